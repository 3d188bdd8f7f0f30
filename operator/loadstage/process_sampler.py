"""Peak CPU and memory of local process trees (the target's gunicorn instances)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psutil

SAMPLE_INTERVAL_SECONDS = 0.5


@dataclass(frozen=True)
class ResourceSample:
    peak_cpu_cores: float    # sum of CPU use of every process in the trees, in cores
    peak_memory_bytes: int   # sum of resident set sizes (shared pages counted once per process)


class ProcessTreeSampler:
    def __init__(self, root_pids: list[int], *, interval: float = SAMPLE_INTERVAL_SECONDS):
        self._roots = root_pids
        self._interval = interval
        self._known: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="process-sampler", daemon=True)
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
        if record:
            self._cpu, self._mem = max(self._cpu, cpu), max(self._mem, mem)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample(record=True)

    def __enter__(self) -> "ProcessTreeSampler":
        self._sample(record=False)  # primes cpu_percent, whose first call has no interval
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.result = ResourceSample(round(self._cpu, 3), self._mem)
