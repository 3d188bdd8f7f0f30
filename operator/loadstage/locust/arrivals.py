"""An open-model load on an injector: a stage's `arrivalRate`.

The stage's rate is shared by its injectors and interleaved: injector i of n starts its arrivals at
i / rate, (i + n) / rate, (i + 2n) / rate ... after the load begins (one instant, the master's, for all), so
that together they start one every 1 / rate seconds, whatever the answers, and exactly rate x seconds in all
over a stage of `seconds`. Each arrival goes to a user of the injector's pool that is free (waiting
for one); an arrival that finds none is dropped and counted, as k6 counts dropped_iterations. A user records its
requests' latency from its arrival's intended start as well, so that an arrival that waits for its user (a late
scheduler) is not hidden."""

from __future__ import annotations

import math
import time
from collections import deque

import gevent
from gevent.event import AsyncResult

ARRIVALS_DUE_SECONDS = 0.5   # at the stage's end, an injector running late still makes the arrivals due in it


def offset(rate: float, injectors: int, index: int, k: int) -> float:
    """When injector `index` of `injectors` starts its k-th arrival (0-based), in seconds after the load began."""
    return (index % injectors + k * injectors) / rate


def intended_starts(rate: float, injectors: int, index: int, seconds: float) -> list[float]:
    """Injector `index`'s arrivals within the load's first `seconds`."""
    starts: list[float] = []
    while (at := offset(rate, injectors, index, len(starts))) < seconds:
        starts.append(at)
    return starts


class Arrivals:
    """One injector's arrivals: a scheduler hands each to a waiting user, or drops it."""

    def __init__(self, rate: float, injectors: int, index: int) -> None:
        self.rate, self.injectors, self.index = rate, max(injectors, 1), index
        self.arrived = 0     # arrivals scheduled so far, dropped or not
        self.dropped = 0
        self._free: deque[AsyncResult] = deque()
        self._scheduler: gevent.Greenlet | None = None
        self._bounded = False

    def start(self, at: float | None = None, seconds: float | None = None) -> None:
        """Arrivals from `at` (epoch seconds; default now) for `seconds` (default: until stop())."""
        if self._scheduler is None:
            self._bounded = seconds is not None
            self._scheduler = gevent.spawn(self._run, time.time() if at is None else at, seconds)

    @property
    def ended(self) -> bool:
        """The last of a stage's arrivals is made (or stop() came first)."""
        return self._scheduler is not None and self._scheduler.dead

    def finish(self, timeout: float) -> None:
        """The stage's arrivals still due (a scheduler running late), for at most `timeout` seconds; then stop."""
        if self._scheduler is not None and self._bounded:
            self._scheduler.join(timeout)
        self.stop()

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.kill(block=False)

    def _run(self, began: float, seconds: float | None) -> None:
        k, limit = 0, math.inf if seconds is None else seconds
        while (after := offset(self.rate, self.injectors, self.index, k)) < limit:
            intended = began + after
            gevent.sleep(max(0.0, intended - time.time()))   # late: at once, the intended start kept
            self.arrived += 1
            if self._free:
                self._free.popleft().set(intended)
            else:
                self.dropped += 1
            k += 1

    def take(self) -> float:
        """A user's wait for its next arrival; returns the arrival's intended start (epoch seconds)."""
        slot = AsyncResult()
        self._free.append(slot)
        try:
            return slot.get()
        finally:
            if not slot.ready():     # the user was stopped while it waited
                self._free.remove(slot)
