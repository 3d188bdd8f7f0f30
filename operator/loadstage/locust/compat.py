"""The one seam with Locust's internals. The extension (injectors/loadstage_results.py) uses Locust's
documented events and options directly; whatever else it needs of a runner goes through here, so that an
upgrade of the pinned Locust has one module to check (tests/unit/test_locust_compat.py does, against the
installed Locust)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from types import FrameType

from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner, WorkerRunner
from locust.user.task import LOCUST_STATE_RUNNING, LOCUST_STATE_WAITING

REPORT_INTERVAL_SECONDS = WORKER_REPORT_INTERVAL   # how often a worker reports to its master


def runner_of(environment):
    """environment.runner; or, while a WorkerRunner is still being built, that runner. Its constructor starts
    its message loop, then waits for the master's ack; the loop may handle the master's spawn (and fire
    test_start) before the constructor returns and Environment assigns the runner. The loop's frame holds it."""
    if environment.runner is not None:
        return environment.runner
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, WorkerRunner) and candidate.environment is environment:
            return candidate
        frame = frame.f_back
    return None


def is_master(runner) -> bool:
    return isinstance(runner, MasterRunner)


def is_worker(runner) -> bool:
    return isinstance(runner, WorkerRunner)


def report_now(runner) -> None:
    """A worker's report to its master, sent at once rather than at the next interval: Locust's stats and,
    through the report_to_master event, loadstage's histograms."""
    runner._send_stats()


def connected_workers(runner) -> int:
    """Workers connected to a master; 1 for a standalone runner."""
    return len(runner.clients) if is_master(runner) else 1


def worker_ids(runner) -> set[str]:
    return {client.id for client in runner.clients.all}


def ready_workers(runner) -> int:
    return len(runner.clients.ready)


def workers_seen(runner) -> int | None:
    """How many workers ever joined the master during the test; None for a standalone runner."""
    return getattr(runner, "worker_index_max", None)


def worker_index(runner) -> int:
    """A worker's index among its master's workers (0, 1, ...); 0 for a standalone runner."""
    return getattr(runner, "worker_index", 0) or 0


def http_sessions() -> tuple[type, ...]:
    """The session classes of Locust's HTTP users (HttpUser, FastHttpUser): every request they send goes
    through their `request` method."""
    from locust.clients import HttpSession
    from locust.contrib.fasthttp import FastHttpSession
    return HttpSession, FastHttpSession


def worker_cpu_percent(runner) -> dict[str, float]:
    """Each connected worker's CPU as it last reported it (Locust's heartbeat), by worker id."""
    return {client.id: float(client.cpu_usage) for client in runner.clients.values()} if is_master(runner) else {}


@contextmanager
def waiting(user):
    """A user waiting outside Locust's own wait (before its first task) is stopped at once, as it would be in its
    wait_time, not after --stop-timeout."""
    user._state = LOCUST_STATE_WAITING
    yield
    user._state = LOCUST_STATE_RUNNING
