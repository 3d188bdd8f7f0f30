"""Verdicts per stage, by spec.thresholds (each figure against its limit) or by spec.slo (each figure's interval
against its objective: pass, fail or undecided), and the capacity of a ladder."""

from __future__ import annotations

from loadstage.api.status import Capacity, Intervals, Objective, StageResult, Verdict
from loadstage.api.status.figures import Bounds, bounds_of
from loadstage.api.types import PERCENTILES, Slo, Spec, Thresholds


def verdict(stage: StageResult, thresholds: Thresholds) -> Verdict:
    violations = []
    if not stage.requests:
        violations.append("no requests were made")
    for name, limit in thresholds.latency_limits_ms().items():
        value = stage.latency.percentile(name)
        if value is not None and value > limit:
            violations.append(f"{name} {value:g}ms > {limit:g}ms")
    if thresholds.error_rate is not None and (stage.error_rate or 0.0) > thresholds.error_rate:
        violations.append(f"error rate {stage.error_rate:.2%} > {thresholds.error_rate:.2%}")
    return Verdict(not violations, tuple(violations))


def _held(name: str, limit: float, value: float | None, interval: Bounds | None, *, floor: bool = False
          ) -> Objective:
    """`limit` is a ceiling (or with `floor`, a floor): the interval wholly on its good side holds it, wholly on
    its bad side breaks it, and one across it, or no interval at all, leaves it undecided."""
    if interval is None:
        return Objective(name, limit, value, None, None)
    low, high = interval
    good, bad = (low >= limit, high < limit) if floor else (high <= limit, low > limit)
    return Objective(name, limit, value, (low, high), True if good else False if bad else None)


def _shown(o: Objective) -> str:
    def one(v: float | None) -> str:
        return "?" if v is None else f"{v:.2%}" if o.name == "errorRate" else f"{v:.4g}ms" if o.name[0] == "p" \
            else f"{v:.4g} req/s"
    interval = f" [{one(o.interval[0])}, {one(o.interval[1])}]" if o.interval else " (no interval)"
    relation = {True: "holds", False: "breaks", None: "undecided against"}[o.holds]
    return f"{o.name} {one(o.value)}{interval} {relation} {'>=' if o.name == 'minRps' else '<='} {one(o.limit)}"


def held(slo: Slo, values: dict[str, float | None], found: Intervals | None) -> list[Objective]:
    """Each objective against its figure (`values`, by the interval keys: p99, errorRate, rps) and its interval
    in `found` (results.intervals)."""
    found = found or {}
    objectives = [_held(name, limit, values.get(name), bounds_of(found, name))
                  for name, limit in slo.latency_limits_ms().items()]
    if slo.error_rate is not None:
        objectives.append(_held("errorRate", slo.error_rate, values.get("errorRate"), found.get("errorRate")))
    if slo.min_rps is not None:
        objectives.append(_held("minRps", float(slo.min_rps), values.get("rps"), found.get("rps"), floor=True))
    return objectives


def outcome_of(objectives: list[Objective]) -> str:
    return "Fail" if any(o.holds is False for o in objectives) else \
        "Pass" if all(o.holds for o in objectives) else "Undecided"


def slo_verdict(stage: StageResult, slo: Slo, found: Intervals | None = None) -> Verdict:
    """A stage passes when every objective holds over its figure's whole interval (95%, or `found`: intervals at
    another confidence), fails when any is broken over its whole interval, and is undecided otherwise (a stage
    too short for an interval is undecided)."""
    if not stage.requests:
        return Verdict(False, ("no requests were made",))
    values = {**{p: stage.latency.percentile(p) for p in PERCENTILES}, "errorRate": stage.error_rate,
              "rps": stage.rps}
    return verdict_of(held(slo, values, stage.intervals if found is None else found))


def verdict_of(objectives: list[Objective]) -> Verdict:
    broken = tuple(_shown(o) for o in objectives if o.holds is False)
    open_ = tuple(_shown(o) for o in objectives if o.holds is None)
    return Verdict(not broken and not open_, broken, open_, tuple(objectives))


def judged(stage: StageResult, spec: Spec) -> Verdict | None:
    """The stage's verdict by the spec's objective, if it has one."""
    if spec.slo is not None:
        return slo_verdict(stage, spec.slo)
    return None if spec.thresholds is None else verdict(stage, spec.thresholds)


def capacity(stages: list[StageResult]) -> Capacity | None:
    """The knee: the last stage, in ladder order, before the first stage that failed a threshold.
    A stage whose injectors were CPU-bound measured the injectors, not the target, and one whose target was
    not steady (restarts, pods gone or out of the Service) measured something else: neither counts, though
    the search goes on past them. None if no stage qualifies."""
    best, first_failed = None, None
    for stage in sorted(stages, key=lambda s: s.stage):
        if not (stage.verdict and stage.verdict.passed):
            first_failed = stage.stage
            break
        if not stage.injector_bound and not stage.target.unsteady():
            best = stage
    if best is None:
        return None
    return Capacity(best.stage, best.injectors, best.users, best.rps, first_failed)
