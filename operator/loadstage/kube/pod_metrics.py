"""Peak CPU and memory of the target pods from metrics.k8s.io, where the cluster has it."""

from __future__ import annotations

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

from loadstage.kube.client import call
from loadstage.samplers.periodic import PeriodicTask


def parse_cpu(text: str) -> float:
    return float(parse_quantity(text))


def parse_bytes(text: str) -> int:
    return int(parse_quantity(text))


def metrics_interval(stage_seconds: float) -> float:
    """A sixth of the stage, between 5 s and 60 s: a short stage gets several samples, and a long
    stage (whose load is steady) costs one request a minute."""
    return min(60.0, max(5.0, stage_seconds / 6))


class PodMetricsSampler:
    """Use as an async context manager around a stage. Stops sampling for good where the cluster has no
    metrics API (or the operator may not read it)."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str, selector: str, interval: float):
        self._custom, self._namespace, self._selector = custom, namespace, selector
        self._loop = PeriodicTask(self._sample, interval, keep_going=lambda: self.available)
        self.available = True
        self.peak_cpu: float | None = None
        self.peak_memory: int | None = None

    async def _sample(self) -> None:
        try:
            items = (await call(self._custom.list_namespaced_custom_object, "metrics.k8s.io", "v1beta1",
                                self._namespace, "pods", label_selector=self._selector))["items"]
        except ApiException as e:
            if e.status in (404, 403, 503):
                self.available = False
            return
        except (urllib3.exceptions.HTTPError, OSError):   # a sample lost: the next one may succeed
            return
        containers = [c for item in items for c in item.get("containers", [])]
        if not containers:
            return
        cpu = sum(parse_cpu(c["usage"]["cpu"]) for c in containers)
        mem = sum(parse_bytes(c["usage"]["memory"]) for c in containers)
        self.peak_cpu = max(self.peak_cpu or 0.0, round(cpu, 3))
        self.peak_memory = max(self.peak_memory or 0, mem)

    async def __aenter__(self) -> "PodMetricsSampler":
        await self._sample()
        if self.available:
            self._loop.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._loop.stop()
