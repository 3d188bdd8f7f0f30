"""The one loop under every sampler: call `sample` every `interval` seconds until stopped, in a thread
(the local engine) or as a task in the event loop (the operator). Stopping waits for a sample in
flight to end, and never cancels it: a cancellation landing inside a client library's own timeout
can be swallowed, and the loop would never end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable


class PeriodicThread:
    def __init__(self, sample: Callable[[], None], interval: float, name: str):
        self._sample, self._interval = sample, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Waits up to `seconds` for `stop`; True if it was set."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return True
    except TimeoutError:
        return False


class PeriodicTask:
    """`keep_going` is asked before every sample: a sampler whose source went away stops itself."""

    def __init__(self, sample: Callable[[], Awaitable[None]], interval: float,
                 keep_going: Callable[[], bool] = lambda: True):
        self._sample, self._interval, self._keep_going = sample, interval, keep_going
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while self._keep_going() and not await stopped_within(self._stop, self._interval):
            await self._sample()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
