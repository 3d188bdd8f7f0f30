"""Pass/fail verdicts per stage, and the capacity of a variant."""

from __future__ import annotations

from typing import Any

from loadstage.api.types import Thresholds


def verdict(stage_result: dict[str, Any], thresholds: Thresholds) -> dict[str, Any]:
    violations = []
    if not stage_result["requests"]:
        violations.append("no requests were made")
    latency = stage_result["latencyMs"]
    for name, limit in thresholds.latency_limits_ms().items():
        value = latency.get(name)
        if value is not None and value > limit:
            violations.append(f"{name} {value:g}ms > {limit:g}ms")
    if thresholds.error_rate is not None and stage_result["errorRate"] > thresholds.error_rate:
        violations.append(f"error rate {stage_result['errorRate']:.2%} > {thresholds.error_rate:.2%}")
    return {"passed": not violations, "violations": violations}


def capacity(stage_results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The knee: the last stage, in ladder order, before the first stage that failed a threshold.
    A stage whose injectors were CPU-bound measured the injectors, not the target: it never counts,
    though the search goes on past it. None if no stage qualifies."""
    best, first_failed = None, None
    for stage in sorted(stage_results, key=lambda s: s["stage"]):
        if not stage.get("verdict", {}).get("passed"):
            first_failed = stage["stage"]
            break
        if not stage.get("injectorBound"):
            best = stage
    if best is None:
        return None
    return {"stage": best["stage"], "injectors": best["injectors"], "users": best["users"], "rps": best["rps"],
            "firstFailedStage": first_failed}
