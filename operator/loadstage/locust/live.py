"""What a running stage looks like now, on its Locust master: the snapshot it writes to --progress-file every
second (and once more with the stage's final counts) and serves as Prometheus series on --metrics-port
(loadstage.results.live_series)."""

from __future__ import annotations

import time
from typing import Any

from loadstage.locust import compat
from loadstage.locust.summary import MAX_ENDPOINTS, OTHER
from loadstage.results import histograms

LIVE_WINDOW_SECONDS = 10.0
QUANTILES = {"0.5": 0.5, "0.9": 0.9, "0.99": 0.99, "0.999": 0.999}


def endpoints(stats) -> list[list]:
    """[method, name, requests, failures] of each request name; past MAX_ENDPOINTS, the rest in one row."""
    rows = sorted(([e.method, e.name, e.num_requests, e.num_failures] for e in stats.entries.values()
                   if e.num_requests or e.num_failures), key=lambda r: (-r[2], r[0], r[1]))
    if len(rows) <= MAX_ENDPOINTS:
        return rows
    kept, folded = rows[:MAX_ENDPOINTS], rows[MAX_ENDPOINTS:]
    return [*kept, ["*", OTHER, sum(r[2] for r in folded), sum(r[3] for r in folded)]]


def recent_latency_seconds(recorder, at: float) -> dict[str, float]:
    """The quantiles of the requests that completed in the LIVE_WINDOW_SECONDS before the last worker report
    could have arrived (a worker reports every few seconds, so the newest seconds are still filling)."""
    merged = recorder.recent(at - compat.REPORT_INTERVAL_SECONDS, LIVE_WINDOW_SECONDS)
    found = histograms.percentiles_ns(merged, QUANTILES)
    return {q: value / 1e9 for q, value in found.items() if value is not None}


def injector_cpu_percent(environment) -> dict[str, float]:
    """Each connected worker's CPU: loadstage's own latest sample (every 2 s, sent with each report), else what
    Locust's heartbeat said (Locust measures every 5 s, from 0)."""
    sampled = environment.loadstage.worker_cpu
    return {worker: sampled.get(worker, cpu) for worker, cpu in compat.worker_cpu_percent(environment.runner).items()}


def snapshot(environment) -> dict[str, Any]:
    total, runner = environment.stats.total, environment.runner
    return {
        "users": runner.user_count,
        "workers": compat.connected_workers(runner),
        "requests": total.num_requests,
        "failures": total.num_failures,
        "currentRps": round(total.current_rps or 0.0, 1),
        "currentP99Ms": total.get_current_response_time_percentile(0.99),
        "endpoints": endpoints(environment.stats),
        "latencySeconds": recent_latency_seconds(environment.loadstage, time.time()),
        "injectorCpuPercent": injector_cpu_percent(environment),
        "startedAt": getattr(environment, "loadstage_started", None),
    }
