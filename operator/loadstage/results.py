"""The result of one stage, in the shape the LoadExperiment status holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import Experiment, Stage
from .thresholds import verdict


@dataclass(frozen=True)
class StageMeasurement:
    summary: dict[str, Any]                 # the Locust master's merged summary
    started_at: str
    finished_at: str
    redis_peak_connections: int | None = None
    redis_connections_received: int | None = None
    target_peak_cpu_cores: float | None = None
    target_peak_memory_bytes: int | None = None


def stage_result(experiment: Experiment, number: int, stage: Stage,
                 m: StageMeasurement) -> dict[str, Any]:
    s = m.summary
    requests = s["requests"]
    result: dict[str, Any] = {
        "stage": number,
        "injectors": stage.injectors,
        "users": experiment.spec.injectors.users_for(stage.injectors),
        "durationSeconds": stage.duration,
        "startedAt": m.started_at,
        "finishedAt": m.finished_at,
        "requests": requests,
        "failures": s["failures"],
        "errorRate": round(s["failures"] / requests, 6) if requests else 0.0,
        "rps": s["rps"],
        "latencyMs": s["latencyMs"],
        "byMethod": s["byMethod"],
        "endpoints": s["endpoints"],
        "redisPeakConnections": m.redis_peak_connections,
        "redisConnectionsReceived": m.redis_connections_received,
        "target": {"peakCpuCores": m.target_peak_cpu_cores,
                   "peakMemoryBytes": m.target_peak_memory_bytes,
                   "servedRequests": s.get("servedRequests")},   # the target's own count
    }
    if s.get("errors"):
        result["errors"] = s["errors"]
    if experiment.spec.thresholds is not None:
        result["verdict"] = verdict(result, experiment.spec.thresholds)
    return result
