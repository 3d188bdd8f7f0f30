"""The target's listen queues, as the kernel keeps them: connections accepted by TCP but not yet by the server.
A listening socket's rx_queue in /proc/net/tcp (and tcp6) is its accept queue's length now; its limit is the
server's backlog, at most net.core.somaxconn; a full queue drops connections (TcpExt ListenOverflows, counted
for the whole network namespace). Sampled every half second; the peak is over the stage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadstage.samplers.periodic import PeriodicThread

SAMPLE_INTERVAL_SECONDS = 0.5
LISTEN = "0A"
TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
NETSTAT = Path("/proc/net/netstat")
SOMAXCONN = Path("/proc/sys/net/core/somaxconn")


def queued(table: str, ports: set[int]) -> int:
    """Connections waiting in the accept queues of the listening sockets on `ports`, in one /proc/net/tcp text
    (every socket on a port: SO_REUSEPORT gives each instance its own queue)."""
    waiting = 0
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5 or fields[3] != LISTEN:
            continue
        try:
            port = int(fields[1].rpartition(":")[2], 16)
            rx_queue = int(fields[4].partition(":")[2], 16)
        except ValueError:
            continue
        if port in ports:
            waiting += rx_queue
    return waiting


def listen_overflows(netstat: str) -> int | None:
    """TcpExt ListenOverflows from a /proc/net/netstat text; None where it has none."""
    names: list[str] | None = None
    for line in netstat.splitlines():
        prefix, _, rest = line.partition(":")
        if prefix != "TcpExt":
            continue
        if names is None:
            names = rest.split()
            continue
        values = dict(zip(names, rest.split()))
        found = values.get("ListenOverflows")
        return int(found) if found is not None and found.isdigit() else None
    return None


def backlog_limit(backlog: int, somaxconn: Path = SOMAXCONN) -> int:
    """The accept queue's length: the server's backlog, at most somaxconn."""
    try:
        return min(backlog, int(somaxconn.read_text()))
    except (OSError, ValueError):
        return backlog


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@dataclass(frozen=True)
class ListenQueues:
    peak: int
    overflows: int | None


class ListenQueueSampler:
    """Use as a context manager around a stage; `result` is set on exit."""

    def __init__(self, ports: list[int], *, interval: float = SAMPLE_INTERVAL_SECONDS):
        self._ports = set(ports)
        self._loop = PeriodicThread(self._sample, interval, "listen-queue-sampler")
        self._peak = 0
        self._overflows_at_start: int | None = None
        self.result: ListenQueues | None = None

    def _sample(self) -> None:
        self._peak = max(self._peak, sum(queued(_read(t), self._ports) for t in TABLES))

    def __enter__(self) -> ListenQueueSampler:
        self._overflows_at_start = listen_overflows(_read(NETSTAT))
        self._sample()
        self._loop.start()
        return self

    def __exit__(self, *exc) -> None:
        self._loop.stop()
        self._sample()
        end = listen_overflows(_read(NETSTAT))
        start = self._overflows_at_start
        self.result = ListenQueues(self._peak, None if start is None or end is None else max(0, end - start))
