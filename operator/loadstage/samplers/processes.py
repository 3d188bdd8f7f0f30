"""Peak CPU and memory of local process trees (the target's instances, one tree per pod), and every CPU reading
(for the mean over a stage's settled seconds). CPU comes from their cgroups where they run in some (exact), else
from the processes' own times (clock ticks, 10 ms). Also: the most
processes one tree had at once, the largest resident set of any one process, and the machine's CPU per core
over the sampled time (the EC2 study's "CPU usage of each core")."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from loadstage.samplers.periodic import PeriodicThread

SAMPLE_INTERVAL_SECONDS = 0.5


@dataclass(frozen=True)
class ResourceSample:
    peak_cpu_cores: float    # sum of CPU use of every process in the trees, in cores
    peak_memory_bytes: int   # sum of resident set sizes (shared pages counted once per process)
    processes: int = 0       # the most processes one tree (pod) had at once, its server's master included
    peak_process_rss_bytes: int = 0   # the largest resident set of one process (its shared pages in full)
    cpu_per_core: tuple[float, ...] = ()   # the machine's mean CPU use per core over the sampled time, percent
    cpu_readings: tuple[tuple[float, float], ...] = ()   # (epoch seconds, cores since the reading before)


class ProcessTreeSampler:
    def __init__(self, root_pids: list[int], *, cpu_seconds: Callable[[], float | None] = lambda: None,
                 interval: float = SAMPLE_INTERVAL_SECONDS):
        self._roots = root_pids
        self._cpu_seconds = cpu_seconds
        self._last: tuple[float, float] | None = None   # (CPU seconds, monotonic time) of the last sample
        self._known: dict[int, psutil.Process] = {}
        self._loop = PeriodicThread(lambda: self._sample(record=True), interval, "process-sampler")
        self._cpu = 0.0
        self._mem = 0
        self._processes_peak = 0
        self._process_rss = 0
        self._cores_at_start: list | None = None
        self._readings: list[tuple[float, float]] = []
        self.result: ResourceSample | None = None
        self.now: tuple[float, int] | None = None   # the latest sample: (CPU cores, memory bytes)

    def _trees(self) -> list[list[psutil.Process]]:
        """Every process of each tree; known ones are reused, as cpu_percent measures since the last call."""
        trees = []
        for pid in self._roots:
            try:
                root = psutil.Process(pid)
                trees.append([self._known.setdefault(p.pid, p) for p in [root, *root.children(recursive=True)]])
            except psutil.NoSuchProcess:
                continue
        return trees

    def _sample(self, record: bool) -> None:
        cpu, mem = 0.0, 0
        trees = self._trees()
        for p in (p for tree in trees for p in tree):
            try:
                cpu += p.cpu_percent(None) / 100.0
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            mem += rss
            if record:
                self._process_rss = max(self._process_rss, rss)
        if record:
            self._processes_peak = max([self._processes_peak, *map(len, trees)])
        try:
            used, at = self._cpu_seconds(), time.monotonic()
        except OSError:
            used = None
        if used is not None:
            if self._last is not None:
                cpu = (used - self._last[0]) / (at - self._last[1])
            self._last = (used, at)
        self.now = (round(cpu, 3), mem)
        if record:
            self._cpu, self._mem = max(self._cpu, cpu), max(self._mem, mem)
            self._readings.append((round(time.time(), 3), round(cpu, 4)))

    def __enter__(self) -> ProcessTreeSampler:
        self._sample(record=False)  # primes cpu_percent, whose first call has no interval
        self._cores_at_start = psutil.cpu_times(percpu=True)
        self._loop.start()
        return self

    def __exit__(self, *exc) -> None:
        self._loop.stop()
        self.result = ResourceSample(round(self._cpu, 3), self._mem, self._processes_peak, self._process_rss,
                                     cpu_per_core(self._cores_at_start or [], psutil.cpu_times(percpu=True)),
                                     tuple(self._readings))


def cpu_per_core(before: list, after: list) -> tuple[float, ...]:
    """Each core's busy share between two readings of psutil.cpu_times(percpu=True), in percent."""
    shares = []
    for start, end in zip(before, after):
        total = sum(end) - sum(start)
        idle = (end.idle + getattr(end, "iowait", 0.0)) - (start.idle + getattr(start, "iowait", 0.0))
        shares.append(round(100.0 * (1 - idle / total), 1) if total > 0 else 0.0)
    return tuple(shares)
