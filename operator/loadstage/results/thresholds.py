"""Verdicts per stage, by spec.thresholds (each figure against its limit) or by spec.slo (each figure's interval
against its objective: pass, fail, near or undecided), and the capacity of a ladder."""

from __future__ import annotations

import math
from collections.abc import Sequence

from loadstage.api.status import Capacity, Intervals, Objective, StageResult, Verdict
from loadstage.api.status.figures import Bounds, bounds_of
from loadstage.api.types import PERCENTILES, Slo, Spec, Thresholds
from loadstage.results.intervals import CONFIDENCE
from loadstage.results.proportions import clopper_pearson
from loadstage.results.saturation import limited_by


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


def _held(name: str, limit: float, value: float | None, interval: Bounds | None, tolerance: float, *,
          floor: bool = False) -> Objective:
    """`limit` is a ceiling (or with `floor`, a floor): the interval wholly on its good side holds it, wholly on
    its bad side breaks it, and one across it, or no interval at all, leaves it undecided; undecided with the
    whole interval within `tolerance` of the limit, the figure is at it (near). A high bound of infinity (a
    percentile too few requests bound from above) is written None."""
    if interval is None:
        return Objective(name, limit, value, None, None)
    low, high = interval
    good, bad = (low >= limit, high < limit) if floor else (high <= limit, low > limit)
    holds = True if good else False if bad else None
    near = holds is None and limit * (1 - tolerance) <= low and high <= limit * (1 + tolerance)
    return Objective(name, limit, value, (low, None if math.isinf(high) else high), holds, near)


def _shown(o: Objective) -> str:
    def one(v: float | None) -> str:
        return "?" if v is None else f"{v:.2%}" if o.name == "errorRate" else f"{v:.4g}ms" if o.name[0] == "p" \
            else f"{v:.4g} req/s"
    interval = f" [{one(o.interval[0])}, {one(o.interval[1])}]" if o.interval else " (no interval)"
    relation = "is at" if o.near else {True: "holds", False: "breaks", None: "undecided against"}[o.holds]
    return f"{o.name} {one(o.value)}{interval} {relation} {'>=' if o.name == 'minRps' else '<='} {one(o.limit)}"


def held(slo: Slo, values: dict[str, float | None], found: Intervals | None,
         counts: tuple[int, int] | None = None) -> list[Objective]:
    """Each objective against its figure (`values`, by the interval keys: p99, errorRate, rps) and its interval
    in `found` (results.intervals). The error rate's interval is at least the exact interval of its `counts`
    (failures, requests): resampled blocks without a failure say [0, 0], which no objective can break."""
    found = found or {}
    objectives = [_held(name, limit, values.get(name), bounds_of(found, name), slo.tolerance)
                  for name, limit in slo.latency_limits_ms().items()]
    if slo.error_rate is not None:
        error_rate = found.get("errorRate")
        if error_rate and counts is not None:
            exact = clopper_pearson(*counts, found.get("confidence", CONFIDENCE))
            error_rate = (min(error_rate[0], exact[0]), max(error_rate[1], exact[1]))
        objectives.append(_held("errorRate", slo.error_rate, values.get("errorRate"), error_rate, slo.tolerance))
    if slo.min_rps is not None:
        objectives.append(_held("minRps", float(slo.min_rps), values.get("rps"), found.get("rps"), slo.tolerance,
                                floor=True))
    return objectives


def slo_verdict(stage: StageResult, slo: Slo, found: Intervals | None = None) -> Verdict:
    """A stage held against the SLO by its own figures and intervals (95%, or `found`: intervals at another
    confidence): for stages merged over repeats (their intervals are of the spread between the repeats), and for
    a stage without the blocks of results.judgement."""
    if not stage.requests:
        return Verdict(False, ("no requests were made",))
    values = {**{p: stage.latency.percentile(p) for p in PERCENTILES}, "errorRate": stage.error_rate,
              "rps": stage.rps}
    raised = stage.exceptions.count if stage.exceptions else 0
    found = stage.intervals if found is None else found
    return verdict_of(held(slo, values, found, (stage.failures + raised, stage.requests + raised)), final=True,
                      confidence=(found or {}).get("confidence"))


CLIMBING = "latency still climbing over its settled batches (Mann-Kendall, one-sided 1%, a rise of 10% or more)"


def verdict_of(objectives: Sequence[Objective], *, climbing: bool = False, final: bool = True,
               settle_seconds: int | None = None, confidence: float | None = None,
               batch_seconds: float | None = None, batches: int | None = None) -> Verdict:
    """Fail where an objective is broken, or (`final`: at the stage's end) where latency still climbs (reason
    Unsteady); else undecided where an objective is undecided and not near, or latency climbs; else Near where
    one is near; else Pass."""
    broken = tuple(_shown(o) for o in objectives if o.holds is False)
    open_ = tuple(_shown(o) for o in objectives if o.holds is None and not o.near)
    near = tuple(_shown(o) for o in objectives if o.near)
    every = tuple(objectives)
    how = (settle_seconds, confidence, batch_seconds, batches)
    if climbing and not broken:
        if final:
            return Verdict(False, (f"not a steady state: {CLIMBING}",), (), every, near, "Unsteady", *how)
        return Verdict(False, (), (*open_, CLIMBING), every, near, None, *how)
    return Verdict(not broken and not open_ and not near, broken, open_, every, near, None, *how)


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
    broke = next((s for s in stages if s.stage == first_failed), None)
    limit = None if broke is None else limited_by(broke, best, f"stage {broke.stage} ({broke.injectors} injectors"
                                                               + (f", {broke.users:,} users)" if broke.users else ")"))
    return Capacity(best.stage, best.injectors, best.users, best.rps, first_failed, limit)
