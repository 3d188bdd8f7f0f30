"""Gunicorn hooks for the runner app: a clean metrics directory at start, and the files of
a dead worker marked. Workers, threads, worker class and bind are on the command line."""

import os
from pathlib import Path

accesslog = None
graceful_timeout = 5


def on_starting(server):
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for stale in Path(directory).glob("*.db"):
            stale.unlink()


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess
        multiprocess.mark_process_dead(worker.pid)
