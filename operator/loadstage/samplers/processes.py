"""Peak CPU and memory of local process trees (the target's gunicorn instances). CPU comes from their
cgroups where they run in some (exact), else from the processes' own times (clock ticks, 10 ms)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import psutil

from loadstage.samplers.periodic import PeriodicThread

SAMPLE_INTERVAL_SECONDS = 0.5


@dataclass(frozen=True)
class ResourceSample:
    peak_cpu_cores: float    # sum of CPU use of every process in the trees, in cores
    peak_memory_bytes: int   # sum of resident set sizes (shared pages counted once per process)


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
        self.result: ResourceSample | None = None

    def _processes(self) -> list[psutil.Process]:
        """Every process of the trees; known ones are reused, as cpu_percent measures since the last call."""
        found = []
        for pid in self._roots:
            try:
                root = psutil.Process(pid)
                found += [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        return [self._known.setdefault(p.pid, p) for p in found]

    def _sample(self, record: bool) -> None:
        cpu, mem = 0.0, 0
        for p in self._processes():
            try:
                cpu += p.cpu_percent(None) / 100.0
                mem += p.memory_info().rss
            except psutil.Error:
                continue
        try:
            used, at = self._cpu_seconds(), time.monotonic()
        except OSError:
            used = None
        if used is not None:
            if self._last is not None:
                cpu = (used - self._last[0]) / (at - self._last[1])
            self._last = (used, at)
        if record:
            self._cpu, self._mem = max(self._cpu, cpu), max(self._mem, mem)

    def __enter__(self) -> "ProcessTreeSampler":
        self._sample(record=False)  # primes cpu_percent, whose first call has no interval
        self._loop.start()
        return self

    def __exit__(self, *exc) -> None:
        self._loop.stop()
        self.result = ResourceSample(round(self._cpu, 3), self._mem)
