"""The operator's own Prometheus metrics, and each running experiment's live series
(loadstage.results.live_series): its phase, place and time left, and the target's and Redis's latest samples
while a stage runs."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, start_http_server

from loadstage.results.live_series import experiment_families, target_families

EXPERIMENTS_RUNNING = Gauge("loadstage_experiments_running", "Experiments whose daemon is running.")
STAGES_FINISHED = Counter("loadstage_stages_finished_total", "Stages finished and recorded in status.",
                          ["namespace"])
EXPERIMENTS_FINISHED = Counter("loadstage_experiments_finished_total", "Experiments that ended, by phase.",
                               ["namespace", "phase", "reason"])
STATUS_WRITES = Counter("loadstage_status_writes_total", "Status patches written.", ["namespace"])


class LiveExperiments:
    """What the operator knows of each experiment it runs, as Prometheus reads it (a collector)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], dict[str, Any]] = {}
        self._stages: dict[int, tuple[dict[str, str], Callable[[], dict[str, Any]]]] = {}

    def note_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        kept: dict[str, Any] = {k: status[k] for k in ("phase", "progress", "startedAt", "finishedAt") if k in status}
        with self._lock:
            self._runs[(namespace, name)] = kept

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._runs.pop((namespace, name), None)

    @contextlib.contextmanager
    def stage(self, labels: dict[str, str], samples: Callable[[], dict[str, Any]]):
        """While a stage runs: its labels, and a function of its latest samples."""
        key = id(samples)
        with self._lock:
            self._stages[key] = (labels, samples)
        try:
            yield
        finally:
            with self._lock:
                self._stages.pop(key, None)

    def collect(self):
        with self._lock:
            runs, stages = list(self._runs.items()), list(self._stages.values())
        yield from experiment_families([(ns, name, status) for (ns, name), status in runs],
                                       dt.datetime.now(dt.UTC))
        yield from target_families([(labels, samples()) for labels, samples in stages])


LIVE = LiveExperiments()
REGISTRY.register(LIVE)


def serve(port: int, address: str) -> None:
    start_http_server(port, address)
