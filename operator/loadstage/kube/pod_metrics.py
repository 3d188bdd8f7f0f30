"""Peak CPU and memory of the target pods from metrics.k8s.io, where the cluster has it: the server's containers,
and apart from them the front proxy's (the container named `proxy`)."""

from __future__ import annotations

from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

from loadstage.kube.client import call
from loadstage.kube.manifests import PROXY_CONTAINER
from loadstage.samplers.periodic import PeriodicTask


def parse_cpu(text: str) -> float:
    return float(parse_quantity(text))


def parse_bytes(text: str) -> int:
    return int(parse_quantity(text))


def metrics_interval(stage_seconds: float) -> float:
    """A sixth of the stage, between 5 s and 60 s: a short stage gets several samples, and a long
    stage (whose load is steady) costs one request a minute."""
    return min(60.0, max(5.0, stage_seconds / 6))


def _peaks(containers: list[dict], cpu: float | None, memory: int | None) -> tuple[float, int]:
    """The containers' CPU and memory together, raised to the peaks so far."""
    now_cpu = sum(parse_cpu(c["usage"]["cpu"]) for c in containers)
    now_memory = sum(parse_bytes(c["usage"]["memory"]) for c in containers)
    return max(cpu or 0.0, round(now_cpu, 3)), max(memory or 0, now_memory)


class PodMetricsSampler:
    """Use as an async context manager around a stage. Stops sampling for good where the cluster has no
    metrics API (or the operator may not read it)."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str, selector: str, interval: float):
        self._custom, self._namespace, self._selector = custom, namespace, selector
        self._loop = PeriodicTask(self._sample, interval, keep_going=lambda: self.available)
        self.available = True
        self.peak_cpu: float | None = None
        self.peak_memory: int | None = None
        self.proxy_peak_cpu: float | None = None
        self.proxy_peak_memory: int | None = None
        self.now: tuple[float, int] | None = None   # the server's latest sample: (CPU cores, memory bytes)

    async def _sample(self) -> None:
        try:
            listed: Any = await call(self._custom.list_namespaced_custom_object, "metrics.k8s.io", "v1beta1",
                                     self._namespace, "pods", label_selector=self._selector)
            items = listed["items"]
        except ApiException as e:
            if e.status in (404, 403, 503):
                self.available = False
            return
        except (urllib3.exceptions.HTTPError, OSError):   # a sample lost: the next one may succeed
            return
        containers = [c for item in items for c in item.get("containers", [])]
        server = [c for c in containers if c.get("name") != PROXY_CONTAINER]
        proxy = [c for c in containers if c.get("name") == PROXY_CONTAINER]
        if server:
            self.now = _peaks(server, None, None)
            self.peak_cpu, self.peak_memory = _peaks(server, self.peak_cpu, self.peak_memory)
        if proxy:
            self.proxy_peak_cpu, self.proxy_peak_memory = _peaks(proxy, self.proxy_peak_cpu, self.proxy_peak_memory)

    async def __aenter__(self) -> PodMetricsSampler:
        await self._sample()
        if self.available:
            self._loop.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._loop.stop()
