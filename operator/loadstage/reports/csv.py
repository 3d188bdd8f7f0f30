"""The report as CSV: one row per stage and variant, the settings as columns, plain numbers (no
thousands separators, no units in the cells; the unit is in the column name) and empty cells for
figures that were not measured, so that pandas and a spreadsheet load it without cleaning."""

from __future__ import annotations

import csv
import io
from typing import Any

from loadstage.api.types import Experiment
from loadstage.reports import ons_layout

SETTINGS = ["server", "pods", "workers", "threads", "workerClass"]
FIGURES = ["requests", "failures", "errorRate", "rps", "meanMs", "p50Ms", "p90Ms", "p95Ms", "p99Ms", "p999Ms",
           "maxMs", "p999Reliable"]
TAIL = ["redisPeakConnections", "redisConnectionsReceived", "targetPeakCpuCores", "targetPeakMemoryBytes",
        "targetServedRequests", "injectorPeakCpuPercent", "injectorBound", "passed", "violations"]


def columns(status: dict[str, Any]) -> list[str]:
    per_method = [f"{m.lower()}{figure}" for m in ons_layout.methods(status) for figure in ("Requests", "MeanMs", "P99Ms")]
    return ["experiment", "variant", *SETTINGS, "stage", "injectors", "users", "usersPerInjector",
            "spawnRatePerInjector", "waitMinSeconds", "waitMaxSeconds", "pacingSeconds", "durationSeconds",
            "startedAt", "finishedAt", *FIGURES, *per_method, *TAIL]


def row(experiment: Experiment, variant: dict[str, Any], stage: dict[str, Any]) -> dict[str, Any]:
    injectors, latency, target = experiment.spec.injectors, stage["latencyMs"], stage.get("target", {})
    verdict = stage.get("verdict")
    values = {
        "experiment": experiment.name, "variant": variant["index"] + 1, **variant["settings"],
        "stage": stage["stage"], "injectors": stage["injectors"], "users": stage["users"],
        "usersPerInjector": injectors.users_per_injector, "spawnRatePerInjector": injectors.spawn_rate,
        "waitMinSeconds": injectors.wait_time.min, "waitMaxSeconds": injectors.wait_time.max,
        "pacingSeconds": injectors.pacing, "durationSeconds": stage["durationSeconds"],
        "startedAt": stage.get("startedAt"), "finishedAt": stage.get("finishedAt"),
        **{k: stage.get(k) for k in ("requests", "failures", "errorRate", "rps", "meanMs")},
        **{f"{p}Ms": latency.get(p) for p in ("p50", "p90", "p95", "p99", "p999", "max")},
        "p999Reliable": latency.get("p999Reliable"),
        "redisPeakConnections": stage.get("redisPeakConnections"),
        "redisConnectionsReceived": stage.get("redisConnectionsReceived"),
        "targetPeakCpuCores": target.get("peakCpuCores"), "targetPeakMemoryBytes": target.get("peakMemoryBytes"),
        "targetServedRequests": target.get("servedRequests"),
        "injectorPeakCpuPercent": stage.get("injectorPeakCpuPercent"), "injectorBound": stage.get("injectorBound"),
        "passed": None if verdict is None else verdict["passed"],
        "violations": None if verdict is None else "; ".join(verdict["violations"]),
    }
    for method, figures in stage.get("byMethod", {}).items():
        values.update({f"{method.lower()}Requests": figures["requests"], f"{method.lower()}MeanMs": figures["meanMs"],
                       f"{method.lower()}P99Ms": figures["p99Ms"]})
    return values


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def render_csv(experiment: Experiment, status: dict[str, Any]) -> str:
    out = io.StringIO()
    names = columns(status)
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for variant in status["variants"]:
        for stage in variant["stages"]:
            values = row(experiment, variant, stage)
            writer.writerow({name: _cell(values.get(name)) for name in names})
    return out.getvalue()
