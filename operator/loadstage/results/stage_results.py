"""The results in the shape the LoadExperiment status holds: one entry per stage, from the Locust
master's headline, and the exact aggregates over stages, from the stages' merged histograms."""

from __future__ import annotations

from typing import Any

from loadstage.api.types import Experiment, Stage
from loadstage.results import histograms
from loadstage.results.measurement import StageMeasurement
from loadstage.results.thresholds import verdict


def stage_result(experiment: Experiment, number: int, stage: Stage, m: StageMeasurement) -> dict[str, Any]:
    s = m.summary
    requests = s["requests"]
    result: dict[str, Any] = {
        "stage": number,
        "injectors": stage.injectors,
        "users": experiment.spec.injectors.users_for(stage),
        "durationSeconds": stage.duration,
        "startedAt": m.started_at,
        "finishedAt": m.finished_at,
        "requests": requests,
        "failures": s["failures"],
        "errorRate": round(s["failures"] / requests, 6) if requests else 0.0,
        "rps": s["rps"],
        "meanMs": s["meanMs"],
        "latencyMs": s["latencyMs"],
        "byMethod": {method: method_row(row["requests"], row["failures"], row["meanMs"], row["latencyMs"]["p99"])
                     for method, row in s["byMethod"].items()},
        "redisPeakConnections": m.redis_peak_connections,
        "redisConnectionsReceived": m.redis_connections_received,
        "target": {"peakCpuCores": m.target_peak_cpu_cores,
                   "peakMemoryBytes": m.target_peak_memory_bytes,
                   "servedRequests": s.get("servedRequests")},   # the target's own count
        "injectorPeakCpuPercent": s.get("injectorPeakCpuPercent"),
        "injectorBound": bool(s.get("injectorBound")),
    }
    if "correctedLatencyMs" in s:
        result["correctedLatencyMs"] = s["correctedLatencyMs"]
    if m.redis_peak_covers != "stage":
        result["redisPeakCovers"] = m.redis_peak_covers
    if s.get("errorKinds"):
        result["errorKinds"] = s["errorKinds"]
    if m.lost_injectors:
        result["lostInjectors"] = {"count": len(m.lost_injectors), "injectors": m.lost_injectors}
    if experiment.spec.thresholds is not None:
        result["verdict"] = verdict(result, experiment.spec.thresholds)
    return result


def method_row(requests: int, failures: int, mean_ms: float | None, p99_ms: float | None) -> dict[str, Any]:
    """What the status keeps of a method: the ONS breakdown has its mean; p99 is the figure people
    compare. Every other percentile is in the stage's artifact (its per-method histogram)."""
    return {"requests": requests, "failures": failures,
            "meanMs": None if mean_ms is None else round(mean_ms, 3), "p99Ms": p99_ms}


def _merged(artifacts: list[dict[str, Any]], pick) -> histograms.HdrHistogram:
    return histograms.merge_encoded(e for a in artifacts if (e := pick(a)))


def variant_aggregate(stages: list[dict[str, Any]], artifacts: list[dict[str, Any]]) -> dict[str, Any]:
    """The ONS headline row of a variant over all its stages: percentiles of every request of every
    stage together (from the merged histograms, never averaged), totals, and the variant's Redis peak."""
    requests = sum(s["requests"] for s in stages)
    failures = sum(s["failures"] for s in stages)
    max_ms = max((s["latencyMs"]["max"] for s in stages if s["latencyMs"].get("max") is not None), default=None)
    methods = sorted({m for s in stages for m in s.get("byMethod", {})})
    by_method = {}
    for method in methods:
        rows = [s["byMethod"][method] for s in stages if method in s.get("byMethod", {})]
        n = sum(r["requests"] for r in rows)
        merged = _merged(artifacts, lambda a: a.get("byMethod", {}).get(method, {}).get("histogram"))
        mean = sum(r["meanMs"] * r["requests"] for r in rows if r["meanMs"] is not None) / n if n else None
        by_method[method] = method_row(n, sum(r["failures"] for r in rows), mean,
                                       histograms.latency_ms(merged, max_ms)["p99"])
    peaks = [s["redisPeakConnections"] for s in stages if s.get("redisPeakConnections") is not None]
    aggregate: dict[str, Any] = {
        "stages": len(stages),
        "requests": requests,
        "failures": failures,
        "errorRate": round(failures / requests, 6) if requests else 0.0,
        "latencyMs": histograms.latency_ms(_merged(artifacts, lambda a: a.get("histogram")), max_ms),
        "byMethod": by_method,
        "redisPeakConnections": max(peaks) if peaks else None,
    }
    if any(a.get("correctedHistogram") for a in artifacts):
        aggregate["correctedLatencyMs"] = histograms.latency_ms(
            _merged(artifacts, lambda a: a.get("correctedHistogram")))
    return aggregate


def p99_pivot(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ONS "99th percentile timings per load stage": one row per stage, one p99 per variant."""
    numbers = sorted({s["stage"] for v in variants for s in v["stages"]})
    rows = []
    for number in numbers:
        by_variant = [next((s["latencyMs"]["p99"] for s in v["stages"] if s["stage"] == number), None)
                      for v in variants]
        first = next(s for v in variants for s in v["stages"] if s["stage"] == number)
        rows.append({"stage": number, "injectors": first["injectors"], "users": first.get("users"),
                     "p99MsByVariant": by_variant})
    return rows
