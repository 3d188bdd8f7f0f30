"""Request latency histograms, correct under any server's worker processes when
PROMETHEUS_MULTIPROC_DIR is set (each process writes its own files; /metrics merges them)."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest, multiprocess

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

UNINSTRUMENTED = {"/metrics", "/healthz", "/readyz", "unmatched"}
REQUEST_SECONDS = Histogram(
    "runner_request_duration_seconds", "Time to serve a request, by method, route and status.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


def observe(method: str, route: str, status: int, seconds: float) -> None:
    REQUEST_SECONDS.labels(method, route, str(status)).observe(seconds)


def render() -> tuple[bytes, str]:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
