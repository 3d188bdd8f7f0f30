"""One stage's summary, built from the Locust master's merged stats.

The summary must fit a Kubernetes termination message (4096 bytes), so per-endpoint
rows are dropped, least-requested first, until it does; `endpointsOmitted` counts them."""

from __future__ import annotations

import json
from typing import Any, Iterable

from .distribution import merge, percentiles

TERMINATION_MESSAGE_LIMIT = 4096
SUMMARY_BUDGET = 4000


def _latency(histogram, max_ms: float) -> dict[str, float | None]:
    return {**percentiles(histogram), "max": round(max_ms, 1) if histogram else None}


def _row(requests: int, failures: int, histogram, max_ms: float) -> dict[str, Any]:
    return {"requests": requests, "failures": failures, "latencyMs": _latency(histogram, max_ms)}


def _entry_row(entries: Iterable) -> dict[str, Any]:
    entries = list(entries)
    return _row(sum(e.num_requests for e in entries), sum(e.num_failures for e in entries),
                merge(e.response_times for e in entries),
                max((e.max_response_time for e in entries), default=0))


def summarize(stats, *, injectors: int | None = None, served_requests: int | None = None) -> dict[str, Any]:
    """`stats` is a locust RequestStats; on a master it holds every worker's samples merged.
    `served_requests` is the target's own count for the stage, where it was read."""
    total = stats.total
    entries = [e for e in stats.entries.values() if e.num_requests or e.num_failures]
    end = total.last_request_timestamp or total.start_time
    elapsed = max(end - total.start_time, 1e-9) if total.num_requests else 0.0
    summary: dict[str, Any] = {
        **_row(total.num_requests, total.num_failures, total.response_times, total.max_response_time),
        "rps": round(total.num_requests / elapsed, 2) if elapsed else 0.0,
        "elapsedSeconds": round(elapsed, 2),
        "loadStartedAt": round(total.start_time, 3),   # epoch seconds: the test started
        "loadEndedAt": round(end, 3),                  # epoch seconds: the last request completed
        "injectors": injectors,
        "servedRequests": served_requests,
        "byMethod": {m: _entry_row(e for e in entries if e.method == m)
                     for m in sorted({e.method for e in entries})},
        "endpoints": [{"method": e.method, "name": e.name, **_entry_row([e])}
                      for e in sorted(entries, key=lambda e: (-e.num_requests, e.method, e.name))],
        "errors": [{"method": err.method, "name": err.name, "error": str(err.error)[:200],
                    "occurrences": err.occurrences}
                   for err in sorted(stats.errors.values(), key=lambda x: -x.occurrences)][:5],
        "endpointsOmitted": 0,
    }
    return fit(summary)


def fit(summary: dict[str, Any], budget: int = SUMMARY_BUDGET) -> dict[str, Any]:
    while len(encode(summary)) > budget and (summary["endpoints"] or summary["errors"]):
        if summary["endpoints"]:
            summary["endpoints"].pop()
            summary["endpointsOmitted"] += 1
        else:
            summary["errors"].pop()
    return summary


def encode(summary: dict[str, Any]) -> bytes:
    return json.dumps(summary, separators=(",", ":"), sort_keys=True).encode()
