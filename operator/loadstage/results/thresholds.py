"""Pass/fail verdicts per stage, and the capacity of a variant."""

from __future__ import annotations

from loadstage.api.types import Thresholds
from loadstage.results.model import Capacity, StageResult, Verdict


def verdict(stage: StageResult, thresholds: Thresholds) -> Verdict:
    violations = []
    if not stage.requests:
        violations.append("no requests were made")
    for name, limit in thresholds.latency_limits_ms().items():
        value = stage.latency.percentile(name)
        if value is not None and value > limit:
            violations.append(f"{name} {value:g}ms > {limit:g}ms")
    if thresholds.error_rate is not None and stage.error_rate > thresholds.error_rate:
        violations.append(f"error rate {stage.error_rate:.2%} > {thresholds.error_rate:.2%}")
    return Verdict(not violations, tuple(violations))


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
