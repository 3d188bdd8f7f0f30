"""What a server's own log says of its worker processes (gunicorn, uWSGI, uvicorn and hypercorn log it): how many it
started, and each that died. Read from where a stage began, each death is a restart of its instance. A boot alone
is not: a server that passed its readiness probe may still be booting its other workers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from loadstage.api.servers import BY_NAME
from loadstage.api.status import TargetPodHealth


def logs_workers(server: str) -> bool:
    """Whether the server's log tells of its workers (its entry has a boot_line)."""
    return server in BY_NAME and BY_NAME[server].boot_line is not None


def workers_started(server: str, log: str) -> int | None:
    """How many worker processes a server's log says it started, where its log says (its entry's boot line)."""
    line = BY_NAME[server].boot_line
    return log.count(line) if line is not None and logs_workers(server) else None


def worker_deaths(server: str, log: str) -> list[str]:
    """Each worker death the log tells of, without its pid: 'Worker exited with code 7'."""
    pattern = BY_NAME[server].death_pattern if server in BY_NAME else None
    found = [] if pattern is None else [m.group(1).strip() for m in pattern.finditer(log)]
    return [re.sub(r"\s*(\(pid: ?\d+\)|\[\d+\])", "", line) for line in found]


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
    except OSError:
        return ""


class Logged(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def log_path(self) -> Path: ...


def worker_restarts(server: str, pods: Sequence[Logged], offsets: list[int]) -> tuple[TargetPodHealth, ...] | None:
    """Each server instance whose workers died since its log's `offsets`; None for a server whose log does
    not tell."""
    if not logs_workers(server):
        return None
    health = []
    for pod, offset in zip(pods, offsets):
        log = log_since(pod.log_path, offset)
        if deaths := worker_deaths(server, log):
            kinds = {death: deaths.count(death) for death in deaths}
            causes = tuple(f"{death} ({n} times)" if n > 1 else death for death, n in kinds.items())
            health.append(TargetPodHealth(pod.name, len(deaths), 0.0, causes[:3]))
    return tuple(health)


# what a server's log says when it calls an app of the other interface (each seen from a real server: gunicorn and
# granian over WSGI on an ASGI app; uvicorn and granian over ASGI on a WSGI app)
INTERFACE_MISMATCHES = (
    (re.compile(r"TypeError: \S+\(\) missing 1 required positional argument: 'send'"),
     "an ASGI app, which its server calls as WSGI"),
    (re.compile(r"TypeError: \S+\(\) (missing 1 required positional argument: 'start_response'|takes 2 "
                r"positional arguments but 3 were given)"),
     "a WSGI app, which its server calls as ASGI"),
)


def interface_mismatch(pods: Sequence[Logged], offsets: list[int]) -> str | None:
    """Where a server instance's log since `offsets` says it calls its app in the other interface: what, and
    the line."""
    for pod, offset in zip(pods, offsets):
        log = log_since(pod.log_path, offset)
        for pattern, what in INTERFACE_MISMATCHES:
            if found := pattern.search(log):
                return f"the app is {what} ({pod.name}'s log: {found.group(0)})"
    return None
