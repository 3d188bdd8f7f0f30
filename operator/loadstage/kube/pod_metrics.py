"""Peak CPU and memory of the target pods from metrics.k8s.io, where the cluster has it: the server's containers,
and apart from them the front proxy's (the container named `proxy`). Also every new window of the server's CPU
(for its mean over a stage's settled seconds: results.cpu_use)."""

from __future__ import annotations

import re
from datetime import datetime
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


_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?)(h|ms|us|µs|ns|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration as metrics-server writes a window ("10.5s", "1m0.2s")."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _cores(containers: list[dict]) -> float:
    return sum(parse_cpu(c["usage"]["cpu"]) for c in containers)


def cpu_window(items: list[dict]) -> tuple[float, float, float] | None:
    """From one listing of the target's PodMetrics: the epoch seconds its windows end, the seconds they span
    (back to the earliest window's start) and the server containers' cores over them, all pods together; None
    where a pod has no window or no server container, or one it cannot read."""
    spans = []
    for item in items:
        server = [c for c in item.get("containers", []) if c.get("name") != PROXY_CONTAINER]
        if not server or not item.get("timestamp") or not item.get("window"):
            return None
        try:
            end = datetime.fromisoformat(item["timestamp"]).timestamp()
            spans.append((end - parse_go_duration(item["window"]), end, _cores(server)))
        except (ValueError, KeyError, TypeError):
            return None
    if not spans:
        return None
    end = max(s[1] for s in spans)
    return end, end - min(s[0] for s in spans), round(sum(s[2] for s in spans), 4)


def _peaks(containers: list[dict], cpu: float | None, memory: int | None) -> tuple[float, int]:
    """The containers' CPU and memory together, raised to the peaks so far."""
    now_cpu = _cores(containers)
    now_memory = sum(parse_bytes(c["usage"]["memory"]) for c in containers)
    return max(cpu or 0.0, round(now_cpu, 3)), max(memory or 0, now_memory)


class PodMetricsSampler:
    """Use as an async context manager around a stage. Stops sampling for good where the cluster has no
    metrics API (or the operator may not read it)."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str, selector: str, interval: float,
                 pods: int = 1):
        self._custom, self._namespace, self._selector = custom, namespace, selector
        self._pods = pods   # a listing of fewer (one not yet scraped) is no reading of the target's CPU
        self._loop = PeriodicTask(self._sample, interval, keep_going=lambda: self.available)
        self.available = True
        self.peak_cpu: float | None = None
        self.peak_memory: int | None = None
        self.proxy_peak_cpu: float | None = None
        self.proxy_peak_memory: int | None = None
        self.now: tuple[float, int] | None = None   # the server's latest sample: (CPU cores, memory bytes)
        self.cpu_readings: list[tuple[float, float]] = []   # (epoch seconds a window ends, the server's cores)
        self.cpu_span = 0.0                                # the longest seconds one reading covers
        self._windows: frozenset | None = None

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
        self.take(items)

    def take(self, items: list[dict]) -> None:
        """One listing of the target's PodMetrics: its peaks, and its CPU once per new set of windows
        (metrics-server answers the same ones until its next scrape)."""
        containers = [c for item in items for c in item.get("containers", [])]
        server = [c for c in containers if c.get("name") != PROXY_CONTAINER]
        proxy = [c for c in containers if c.get("name") == PROXY_CONTAINER]
        if server:
            self.now = _peaks(server, None, None)
            self.peak_cpu, self.peak_memory = _peaks(server, self.peak_cpu, self.peak_memory)
        windows = frozenset((item.get("metadata", {}).get("name"), item.get("timestamp")) for item in items)
        found = None if windows == self._windows or len(items) < self._pods else cpu_window(items)
        if found is not None:
            self._windows = windows
            self.cpu_readings.append((found[0], found[2]))
            self.cpu_span = max(self.cpu_span, found[1])
        if proxy:
            self.proxy_peak_cpu, self.proxy_peak_memory = _peaks(proxy, self.proxy_peak_cpu, self.proxy_peak_memory)

    async def __aenter__(self) -> PodMetricsSampler:
        await self._sample()
        if self.available:
            self._loop.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._loop.stop()
