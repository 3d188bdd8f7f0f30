"""What a backend measured of one stage: the Locust master's headline and artifact, and the samplers'
peaks while the stage ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadstage.api.status import Saturation, TargetPodHealth


@dataclass(frozen=True)
class StageMeasurement:
    summary: dict[str, Any]                 # the Locust master's headline
    started_at: str
    finished_at: str
    artifact: dict[str, Any] = field(default_factory=dict)   # histograms, endpoint and error rows, series
    redis_peak_connections: int | None = None
    redis_connections_received: int | None = None
    redis_peak_covers: str = "stage"        # "stage", or "resumed" when an operator restart lost the start
    target_peak_cpu_cores: float | None = None
    target_cpu_readings: tuple[tuple[float, float], ...] = ()   # (epoch seconds, cores since the reading before)
    target_cpu_span: float = 0.0   # where longer than a local half second: the seconds one reading covers to its time
    target_peak_memory_bytes: int | None = None
    target_processes: int | None = None            # the most processes one pod had at once (local)
    target_peak_process_rss_bytes: int | None = None   # the largest resident set of one process (local)
    host_cpu_per_core: tuple[float, ...] | None = None   # the machine's mean CPU per core, percent (local)
    proxy_peak_cpu_cores: float | None = None      # the front proxies', apart from the server's figures
    proxy_peak_memory_bytes: int | None = None
    lost_injectors: list[dict[str, Any]] = field(default_factory=list)   # {"injector", "at", "cause"}
    target_pods: tuple[TargetPodHealth, ...] | None = None   # the unsteady ones; None: not watched
    saturation: Saturation | None = None   # the signals the backend measured (results.saturation completes them)


def load_window(artifact: dict[str, Any]) -> tuple[float, float] | None:
    """From the artifact's time series, the epoch seconds the load ran: its first second's start to its last
    second's end; None without a series."""
    rows = artifact.get("series") or []
    return (rows[0]["start"], rows[-1]["start"] + rows[-1]["seconds"]) if rows else None
