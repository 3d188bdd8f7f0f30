"""The operator's own Prometheus metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, start_http_server

EXPERIMENTS_RUNNING = Gauge("loadstage_experiments_running", "Experiments whose daemon is running.")
STAGES_FINISHED = Counter("loadstage_stages_finished_total", "Stages finished and recorded in status.",
                          ["namespace"])
EXPERIMENTS_FINISHED = Counter("loadstage_experiments_finished_total", "Experiments that ended, by phase.",
                               ["namespace", "phase", "reason"])
STATUS_WRITES = Counter("loadstage_status_writes_total", "Status patches written.", ["namespace"])


def serve(port: int, address: str) -> None:
    start_http_server(port, address)
