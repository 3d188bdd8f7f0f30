"""Peak Redis connections during a stage: INFO clients/stats polled several times a second."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import redis

SAMPLE_INTERVAL_SECONDS = 0.25
SAMPLER_CLIENT_NAME = "loadstage-sampler"   # how the sampler shows in CLIENT LIST


@dataclass(frozen=True)
class RedisSample:
    peak_connections: int        # connected_clients, less the sampler's own connection
    connections_received: int    # change in total_connections_received during the stage
    samples: int
    errors: int


class RedisSampler:
    """Use as a context manager around a stage; `result` is set on exit."""

    def __init__(self, url: str, *, password: str | None = None,
                 interval: float = SAMPLE_INTERVAL_SECONDS):
        self._client = redis.Redis.from_url(url, password=password, socket_timeout=2,
                                            socket_connect_timeout=1, client_name=SAMPLER_CLIENT_NAME)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="redis-sampler", daemon=True)
        self._peak = 0
        self._samples = 0
        self._errors = 0
        self._received_start: int | None = None
        self._received_last: int | None = None
        self.result: RedisSample | None = None

    def _sample(self) -> None:
        try:
            info = self._client.info()
        except redis.RedisError:
            self._errors += 1
            return
        self._samples += 1
        self._peak = max(self._peak, int(info["connected_clients"]) - 1)
        received = int(info["total_connections_received"])
        if self._received_start is None:
            self._received_start = received
        self._received_last = received

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
        received = (self._received_last or 0) - (self._received_start or 0)
        self.result = RedisSample(self._peak, received, self._samples, self._errors)
