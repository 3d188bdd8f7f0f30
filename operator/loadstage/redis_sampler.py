"""Peak Redis connections during a stage: INFO polled several times a second. RedisSampler runs
in a thread (the local engine); AsyncRedisSampler runs in the operator's event loop."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio

SAMPLE_INTERVAL_SECONDS = 0.25
SAMPLER_CLIENT_NAME = "loadstage-sampler"   # how the sampler shows in CLIENT LIST
CLIENT_OPTIONS = {"socket_timeout": 2, "socket_connect_timeout": 1, "client_name": SAMPLER_CLIENT_NAME}


@dataclass(frozen=True)
class RedisSample:
    peak_connections: int        # connected_clients, less the sampler's own connection
    connections_received: int    # change in total_connections_received during the stage
    samples: int
    errors: int


class _Peaks:
    def __init__(self):
        self.peak = self.samples = self.errors = 0
        self.received_start: int | None = None
        self.received_last: int | None = None

    def add(self, info: dict[str, Any] | None) -> None:
        if info is None:
            self.errors += 1
            return
        self.samples += 1
        self.peak = max(self.peak, int(info["connected_clients"]) - 1)
        received = int(info["total_connections_received"])
        if self.received_start is None:
            self.received_start = received
        self.received_last = received

    def result(self) -> RedisSample:
        received = (self.received_last or 0) - (self.received_start or 0)
        return RedisSample(self.peak, received, self.samples, self.errors)


class RedisSampler:
    """Use as a context manager around a stage; `result` is set on exit."""

    def __init__(self, url: str, *, password: str | None = None, interval: float = SAMPLE_INTERVAL_SECONDS):
        self._client = redis.Redis.from_url(url, password=password, **CLIENT_OPTIONS)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="redis-sampler", daemon=True)
        self._peaks = _Peaks()
        self.result: RedisSample | None = None

    def _sample(self) -> None:
        try:
            self._peaks.add(self._client.info())
        except redis.RedisError:
            self._peaks.add(None)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __enter__(self) -> "RedisSampler":
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self._client.close()
        self.result = self._peaks.result()


async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Waits up to `seconds` for `stop`; True if it was set."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return True
    except TimeoutError:
        return False


class AsyncRedisSampler:
    """Use as an async context manager around a stage; `result` is set on exit."""

    def __init__(self, url: str, *, password: str | None = None, interval: float = SAMPLE_INTERVAL_SECONDS):
        self._client = redis.asyncio.Redis.from_url(url, password=password, **CLIENT_OPTIONS)
        self._interval = interval
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._peaks = _Peaks()
        self.result: RedisSample | None = None

    async def _sample(self) -> None:
        try:
            self._peaks.add(await self._client.info())
        except (redis.RedisError, OSError):
            self._peaks.add(None)

    async def _loop(self) -> None:
        while not await stopped_within(self._stop, self._interval):
            await self._sample()

    async def __aenter__(self) -> "AsyncRedisSampler":
        await self._sample()
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc) -> None:
        # Not task.cancel(): a cancellation landing in redis-py's own timeout can be swallowed,
        # and the loop would never end. The loop ends after its sample in flight (bounded by timeouts).
        self._stop.set()
        await self._task
        await self._sample()
        await self._client.aclose()
        self.result = self._peaks.result()
