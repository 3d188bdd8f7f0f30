"""`loadstage run --metrics-port`: the run's live series (loadstage.results.live_series) on 127.0.0.1, for the
whole run. A stage's series come from its master's snapshot as the engine follows the stage; once the stage
ends, its counters stay at their final values and its gauges go."""

from __future__ import annotations

import copy
import datetime as dt
import threading
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from loadstage.api.types import Experiment
from loadstage.engine.steps import series_labels
from loadstage.local.backend import Progress
from loadstage.results.live_series import experiment_families, stage_families, target_families


class LocalSeries:
    def __init__(self, experiment: Experiment):
        self.experiment = experiment
        self._lock = threading.Lock()
        self._status: dict[str, Any] = {}
        self._stages: dict[str, tuple[dict[str, str], dict[str, Any]]] = {}   # by run id, in the run's order
        self._current: Progress | None = None

    def note_progress(self, progress: Progress) -> None:
        with self._lock:
            self._stages[progress.step.run_id] = (series_labels(self.experiment, progress.step), progress.snapshot)
            self._current = progress

    def note_status(self, status: dict[str, Any]) -> None:
        """The engine writes the status as a step starts and once its stage is recorded: no stage runs then."""
        with self._lock:
            self._status, self._current = copy.deepcopy(status), None

    def collect(self):
        with self._lock:
            status, stages, current = self._status, list(self._stages.items()), self._current
        namespace = self.experiment.metadata.namespace or ""
        yield from experiment_families([(namespace, self.experiment.name, status)], dt.datetime.now(dt.UTC))
        running = current.step.run_id if current is not None else None
        yield from stage_families((snapshot, labels, run_id == running) for run_id, (labels, snapshot) in stages)
        yield from target_families([(series_labels(self.experiment, current.step), current.target)]
                                   if current is not None else [])


def serve(series: LocalSeries, port: int):
    """Serves on 127.0.0.1 only; returns the server, for shutdown()."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(series)
    server, _thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    return server
