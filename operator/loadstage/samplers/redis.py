"""Peak Redis connections during a stage: INFO polled several times a second; from its first and last INFO, its
refused connections and its maxclients; from every INFO, Redis's CPU (INFO cpu) on its own clock, over the seconds
the load ran; and from INFO commandstats at the stage's start and end, its mean command time (the sampler's own INFO
left out). RedisSampler runs in a thread (the local
engine); AsyncRedisSampler runs in the operator's event loop."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio

from loadstage.samplers.periodic import PeriodicTask, PeriodicThread

SAMPLE_INTERVAL_SECONDS = 0.25
SAMPLER_CLIENT_NAME = "loadstage-sampler"   # how the sampler shows in CLIENT LIST
CLIENT_OPTIONS: dict[str, Any] = {"socket_timeout": 2, "socket_connect_timeout": 1,
                                  "client_name": SAMPLER_CLIENT_NAME}


@dataclass(frozen=True)
class RedisSample:
    peak_connections: int        # connected_clients, less the sampler's own connection
    connections_received: int    # change in total_connections_received during the stage
    samples: int
    errors: int
    error: str | None = None     # the first error, e.g. an ACL that refuses INFO
    cpu_cores: float | None = None       # its CPU from the first INFO to the last, cores
    max_clients: int | None = None
    rejected: int | None = None          # connections refused during the stage
    usec_per_call: float | None = None   # its mean command time over the stage, microseconds
    cpu_readings: tuple[tuple[float, float], ...] = ()   # (epoch seconds on Redis's clock, its CPU seconds so far)

    def cpu_cores_within(self, window: tuple[float, float] | None) -> float | None:
        """Its CPU between the first and last readings inside `window` (epoch seconds): the seconds the load ran,
        not the idle ones before the injectors start and after they stop; without two readings there, cpu_cores."""
        if window is None:
            return self.cpu_cores
        inside = [r for r in self.cpu_readings if window[0] <= r[0] <= window[1]]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return self.cpu_cores
        return round((inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]), 3)

    def covers(self, whole: str = "stage") -> str:
        """What the peak covers: `whole`, or why there is none although a Redis was named."""
        if self.samples or self.error is None:
            return whole
        return f"nothing: every INFO failed ({self.error})"

    @property
    def peak(self) -> int | None:
        """The peak, or None if no sample was taken (no Redis, or none answered)."""
        return self.peak_connections if self.samples else None

    @property
    def received(self) -> int | None:
        return self.connections_received if self.samples else None


class _Peaks:
    def __init__(self):
        self.peak = self.samples = self.errors = 0
        self.received_start: int | None = None
        self.received_last: int | None = None
        self.error: str | None = None
        self.now: int | None = None   # the latest sample's connections
        self.first: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.commands: list[tuple[int, int]] = []   # (calls, usec) of INFO commandstats, at the start and end
        self.cpu: list[tuple[float, float]] = []

    def add(self, info: dict[str, Any] | None, error: Exception | None = None) -> None:
        if info is None:
            self.errors += 1
            self.error = self.error or f"{type(error).__name__}: {error}"
            return
        self.samples += 1
        info = {**info, "at": time.monotonic()}
        self.first, self.last = self.first or info, info
        if "used_cpu_sys" in info:
            at = int(info["server_time_usec"]) / 1e6 if "server_time_usec" in info else time.time()
            self.cpu.append((at, float(info["used_cpu_sys"]) + float(info["used_cpu_user"])))
        self.now = int(info["connected_clients"]) - 1
        self.peak = max(self.peak, self.now)
        received = int(info["total_connections_received"])
        if self.received_start is None:
            self.received_start = received
        self.received_last = received

    def add_commands(self, stats: dict[str, Any]) -> None:
        """INFO commandstats: every command's calls and time, the sampler's own INFO left out."""
        counted = [v for k, v in stats.items() if k != "cmdstat_info" and isinstance(v, dict)]
        self.commands.append((sum(int(v.get("calls", 0)) for v in counted),
                              sum(int(v.get("usec", 0)) for v in counted)))

    def result(self) -> RedisSample:
        received = (self.received_last or 0) - (self.received_start or 0)
        first, last = self.first, self.last
        cpu = rejected = max_clients = usec = None
        if first is not None and last is not None:
            rejected = int(last.get("rejected_connections", 0)) - int(first.get("rejected_connections", 0))
            max_clients = int(last["maxclients"]) if "maxclients" in last else None
            if last["at"] > first["at"] and "used_cpu_sys" in last:
                used = (float(last["used_cpu_sys"]) + float(last["used_cpu_user"]) - float(first["used_cpu_sys"])
                        - float(first["used_cpu_user"]))
                cpu = round(used / (last["at"] - first["at"]), 3)
        if len(self.commands) == 2 and self.commands[1][0] > self.commands[0][0]:
            usec = round((self.commands[1][1] - self.commands[0][1]) / (self.commands[1][0] - self.commands[0][0]), 1)
        return RedisSample(self.peak, received, self.samples, self.errors, self.error, cpu, max_clients, rejected,
                           usec, tuple(self.cpu))


class _Sampled:
    _peaks: _Peaks

    @property
    def now(self) -> int | None:
        """The latest sample's connections, less the sampler's own."""
        return self._peaks.now


class RedisSampler(_Sampled):
    """Use as a context manager around a stage; `result` is set on exit. Without a url (the target uses no
    Redis) it takes no sample."""

    def __init__(self, url: str | None, *, password: str | None = None, interval: float = SAMPLE_INTERVAL_SECONDS):
        self._client = redis.Redis.from_url(url, password=password, **CLIENT_OPTIONS) if url else None
        self._loop = PeriodicThread(self._sample, interval, "redis-sampler")
        self._peaks = _Peaks()
        self.result: RedisSample | None = None

    def _sample(self) -> None:
        assert self._client is not None, "a sampler without Redis takes no sample"
        try:
            self._peaks.add(self._client.info())
        except redis.RedisError as e:
            self._peaks.add(None, e)

    def _commands(self) -> None:
        assert self._client is not None
        with contextlib.suppress(redis.RedisError):
            self._peaks.add_commands(self._client.info("commandstats"))

    def __enter__(self) -> RedisSampler:
        if self._client is not None:
            self._commands()
            self._sample()
            self._loop.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._loop.stop()
            self._sample()
            self._commands()
            self._client.close()
        self.result = self._peaks.result()


class AsyncRedisSampler(_Sampled):
    """Use as an async context manager around a stage; `result` is set on exit. Without a url (the target
    uses no Redis) it takes no sample."""

    def __init__(self, url: str | None, *, password: str | None = None, interval: float = SAMPLE_INTERVAL_SECONDS):
        self._client = redis.asyncio.Redis.from_url(url, password=password, **CLIENT_OPTIONS) if url else None
        self._loop = PeriodicTask(self._sample, interval)
        self._peaks = _Peaks()
        self.result: RedisSample | None = None

    async def _sample(self) -> None:
        assert self._client is not None, "a sampler without Redis takes no sample"
        try:
            self._peaks.add(await self._client.info())
        except (redis.RedisError, OSError) as e:
            self._peaks.add(None, e)

    async def _commands(self) -> None:
        assert self._client is not None
        with contextlib.suppress(redis.RedisError, OSError):
            self._peaks.add_commands(await self._client.info("commandstats"))

    async def __aenter__(self) -> AsyncRedisSampler:
        if self._client is not None:
            await self._commands()
            await self._sample()
            self._loop.start()
        return self

    async def __aexit__(self, *exc) -> None:
        if self._client is not None:
            await self._loop.stop()
            await self._sample()
            await self._commands()
            await self._client.aclose()
        self.result = self._peaks.result()
