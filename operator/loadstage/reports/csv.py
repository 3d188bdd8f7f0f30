"""The report as CSV: one row per stage and variant, the settings as columns, plain numbers (no
thousands separators, no units in the cells; the unit is in the column name) and empty cells for
figures that were not measured, so that pandas and a spreadsheet load it without cleaning."""

from __future__ import annotations

import csv
import io
from typing import Any

from loadstage.api.status import FIGURES as INTERVAL_FIGURES
from loadstage.api.status import Recommendation, RunStatus, StageResult, VariantRecord
from loadstage.api.status.figures import bounds_of
from loadstage.api.status.pick import SETTINGS as STATUS_SETTINGS
from loadstage.api.types import Experiment
from loadstage.reports import ons_layout

SETTINGS = list(STATUS_SETTINGS.fields)   # a variant's settings, as the status declares them
FIGURES = ["requests", "failures", "exceptions", "errorRate", "rps", "meanMs", "p50Ms", "p90Ms", "p95Ms", "p99Ms",
           "p999Ms", "maxMs", "p999Reliable"]
INTERVALS = [f"{figure}{side}"
             for figure in ("p50Ms", "p90Ms", "p95Ms", "p99Ms", "p999Ms", "meanMs", "rps", "errorRate")
             for side in ("_lo", "_hi")] + ["intervalMethod"]   # 95% confidence intervals (results.intervals)
TRIMMED = ["repeats", *(f"{figure}_trimmed" for figure in ("p50Ms", "p90Ms", "p95Ms", "p99Ms", "p999Ms", "meanMs",
                                                          "rps", "errorRate"))]   # without the highest and lowest
TAIL = ["redisPeakConnections", "redisConnectionsReceived", "targetPeakCpuCores", "targetPeakMemoryBytes",
        "targetServedRequests", "targetRestarts", "targetUnreadySeconds", "targetProcesses",
        "targetPeakProcessRssBytes", "proxyPeakCpuCores", "proxyPeakMemoryBytes", "hostCpuPerCorePercent",
        "requestGoal", "arrivalRate", "arrivals", "droppedArrivals", "injectorPeakCpuPercent", "injectorBound",
        "masterLagSeconds", "masterBound", "attempts", "endedBy", "looks", "passed", "outcome", "violations",
        "topExceptions"]
SEARCH = ["searchLoad", "searchPass", "searchFail", "searchPassRps", "searchFailRps", "searchNear", "searchNearRps",
          "searchReason"]   # its bracket, or its load at the objective
GOAL = ["costCores", "costFrom", "rpsPerCore_lo", "rpsPerCore_hi", "onFront", "recommended", "dropped"]   # spec.goal


def columns(run: RunStatus) -> list[str]:
    per_method = [f"{m.lower()}{figure}" for m in ons_layout.methods(run) for figure in ("Requests", "MeanMs", "P99Ms")]
    return ["experiment", "variant", *SETTINGS, "stage", "injectors", "users", "usersPerInjector",
            "spawnRatePerInjector", "waitMinSeconds", "waitMaxSeconds", "pacingSeconds", "durationSeconds",
            "startedAt", "finishedAt", *FIGURES, *INTERVALS, *TRIMMED, *per_method, *TAIL,
            *(SEARCH if any(v.search for v in run.variants) else ()), *(GOAL if run.recommendation else ())]


def search_values(variant: VariantRecord) -> dict[str, Any]:
    """The variant's search: its bracket, the req/s at each end, and why it ended."""
    found = variant.search
    if found is None:
        return {}
    return {"searchLoad": found.load, "searchPass": found.passed, "searchFail": found.failed,
            "searchPassRps": found.passed_rps, "searchFailRps": found.failed_rps, "searchNear": found.near,
            "searchNearRps": found.near_rps, "searchReason": found.reason}


def goal_values(variant: VariantRecord, pick: Recommendation | None) -> dict[str, Any]:
    """The variant's cost, its capacity per core (with maximize), whether it is on the front, the winner, or
    dropped and why."""
    if pick is None:
        return {}
    met = variant.met
    return {"costCores": variant.cost and variant.cost.cores, "costFrom": variant.cost and variant.cost.source,
            "rpsPerCore_lo": met and met.per_core and met.per_core[0],
            "rpsPerCore_hi": met and met.per_core and met.per_core[1],
            "onFront": any(c.variant == variant.index for c in pick.front) if pick.front else None,
            "recommended": pick.winner is not None and pick.winner.variant == variant.index,
            "dropped": variant.dropped and variant.dropped.reason}


def row(experiment: Experiment, variant: VariantRecord, stage: StageResult) -> dict[str, Any]:
    injectors, latency, target = experiment.spec.injectors, stage.latency, stage.target
    verdict = stage.verdict
    values = {
        "experiment": experiment.name, "variant": variant.index + 1, **variant.settings,
        "stage": stage.stage, "injectors": stage.injectors, "users": stage.users,
        "usersPerInjector": injectors.users_per_injector, "spawnRatePerInjector": injectors.spawn_rate,
        "waitMinSeconds": injectors.wait_time.min, "waitMaxSeconds": injectors.wait_time.max,
        "pacingSeconds": injectors.pacing, "durationSeconds": stage.duration_seconds,
        "startedAt": stage.started_at, "finishedAt": stage.finished_at,
        "requests": stage.requests, "failures": stage.failures,
        "exceptions": stage.exceptions.count if stage.exceptions else 0, "errorRate": stage.error_rate,
        "rps": stage.rps, "meanMs": stage.mean_ms,
        **{f"{p}Ms": latency.percentile(p) for p in ("p50", "p90", "p95", "p99", "p999", "max")},
        "p999Reliable": latency.p999_reliable,
        "redisPeakConnections": stage.redis_peak_connections,
        "redisConnectionsReceived": stage.redis_connections_received,
        "targetPeakCpuCores": target.peak_cpu_cores, "targetPeakMemoryBytes": target.peak_memory_bytes,
        "targetServedRequests": target.served_requests, "targetRestarts": target.restarts,
        "targetUnreadySeconds": target.unready_seconds, "targetProcesses": target.processes,
        "targetPeakProcessRssBytes": target.peak_process_rss_bytes,
        "proxyPeakCpuCores": target.proxy_peak_cpu_cores, "proxyPeakMemoryBytes": target.proxy_peak_memory_bytes,
        "hostCpuPerCorePercent": " ".join(f"{c:g}" for c in stage.host_cpu_per_core or ()) or None,
        "requestGoal": stage.request_goal, "attempts": stage.attempts, "arrivalRate": stage.arrival_rate,
        "arrivals": stage.arrivals, "droppedArrivals": stage.dropped_arrivals, "endedBy": stage.ended_by,
        "looks": stage.looks, "outcome": None if verdict is None else verdict.outcome,
        "injectorPeakCpuPercent": stage.injector_peak_cpu_percent, "injectorBound": stage.injector_bound,
        "masterLagSeconds": stage.master_lag_seconds, "masterBound": stage.master_bound,
        "passed": None if verdict is None else verdict.passed,
        "violations": None if verdict is None else "; ".join(verdict.violations),
        "topExceptions": "; ".join(f"{e.message} ({e.count})" for e in stage.exceptions.top)
                         if stage.exceptions else None,
    }
    for figure in INTERVAL_FIGURES:
        if bounds := bounds_of(stage.intervals or {}, figure):
            values.update({f"{_column(figure)}_lo": bounds[0], f"{_column(figure)}_hi": bounds[1]})
    values["intervalMethod"] = (stage.intervals or {}).get("method")
    values["repeats"] = stage.repeats
    values.update({f"{_column(figure)}_trimmed": value for figure, value in (stage.trimmed_mean or {}).items()})
    for method, figures in stage.by_method.items():
        values.update({f"{method.lower()}Requests": figures.requests, f"{method.lower()}MeanMs": figures.mean_ms,
                       f"{method.lower()}P99Ms": figures.p99_ms})
    return values


def _column(figure: str) -> str:
    """The CSV column of one of results.intervals.FIGURES: p99 is p99Ms, mean meanMs."""
    return figure if figure in ("rps", "errorRate") else f"{figure}Ms"


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def render_csv(experiment: Experiment, run: RunStatus) -> str:
    out = io.StringIO()
    names = columns(run)
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for variant in run.variants:
        for stage in variant.stages:
            values = {**row(experiment, variant, stage), **search_values(variant),
                      **goal_values(variant, run.recommendation)}
            writer.writerow({name: _cell(values.get(name)) for name in names})
    return out.getvalue()
