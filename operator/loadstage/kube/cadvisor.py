"""The target containers' CPU throttling and OOM kills in a cluster, from their own cgroups as the kubelet's cAdvisor
reads them (/metrics/cadvisor, through the API server's node proxy: RBAC `nodes/proxy` get, which the chart grants
only with rbac.nodeMetrics, as it lets the operator read each kubelet's API). Read at a stage's start and end on
every node of the target's pods; a node that does not answer (kwok's, or no grant) leaves the signals absent."""

from __future__ import annotations

import re
from collections.abc import Callable

import urllib3
from kubernetes.client.rest import ApiException

from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.manifests import PROXY_CONTAINER
from loadstage.kube.pods import Pod
from loadstage.results.saturation import Counters

PERIODS = "container_cpu_cfs_periods_total"
THROTTLED = "container_cpu_cfs_throttled_periods_total"
OOM = "container_oom_events_total"
REQUEST_TIMEOUT_SECONDS = 3
# by node, in this process: a kubelet that did not answer is never asked again (kwok's), and while one is asked
# for the first time, no other experiment asks it (40 experiments at once would hold 40 threads on a dead node)
_UNREACHABLE: set[str] = set()
_ANSWERED: set[str] = set()
_ASKING: set[str] = set()
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def counters(text: str, namespace: str, pods: set[str],
             skip: tuple[str, ...] = (PROXY_CONTAINER,)) -> dict[str, Counters]:
    """The CFS periods, throttled periods and OOM events of each named pod in one /metrics/cadvisor text: its
    containers' (`skip` left out), or where the kubelet's cAdvisor does not see its runtime's containers
    (containerd 1.6 under kubelet 1.32 on cgroup v1), its own cgroup's (container=""), which holds them all. A pod
    without CFS periods (no CPU limit) is left out."""
    by_pod: dict[tuple[str, bool], dict[str, float]] = {}
    for line in text.splitlines():
        name, brace, rest = line.partition("{")
        if name not in (PERIODS, THROTTLED, OOM) or not brace:
            continue
        labels_text, _, value_text = rest.rpartition("}")
        labels = dict(_LABEL.findall(labels_text))
        container = labels.get("container", "")
        if labels.get("namespace") != namespace or labels.get("pod") not in pods or container in ("POD", *skip):
            continue
        try:
            value = float(value_text.split()[0])
        except (ValueError, IndexError):
            continue
        if not 0 <= value < 2**63:   # a counter: never negative, NaN or infinite
            continue
        found = by_pod.setdefault((labels["pod"], container == ""), {})
        found[name] = found.get(name, 0.0) + value
    return {pod: Counters(*(int(found.get(k, 0.0)) for k in (PERIODS, THROTTLED, OOM)))
            for (pod, whole), found in by_pod.items()
            if PERIODS in found and (not whole or PERIODS not in by_pod.get((pod, False), {}))}


class NodeCounters:
    """Reads the target pods' counters from their nodes' kubelets; gives up for the experiment at the first
    refusal (no grant), and for good on a node that did not answer, so that a stage never waits on them twice."""

    def __init__(self, context: ExperimentContext, pods: Callable[[], dict[str, Pod]]):
        self._context, self._pods = context, pods   # the target's pods, from the namespace's watch
        self.available = True

    async def read(self) -> dict[str, Counters] | None:
        """Each running target pod's counters (a pod being replaced left out); None where a node did not say."""
        if not self.available:
            return None
        c = self._context
        pods = {name: pod["spec"]["nodeName"] for name, pod in self._pods().items()
                if pod.get("spec", {}).get("nodeName") and not pod["metadata"].get("deletionTimestamp")}
        texts = []
        for node in sorted(set(pods.values())):
            if node in _UNREACHABLE or (node not in _ANSWERED and node in _ASKING):
                return None
            first = node not in _ANSWERED
            _ASKING.add(node)
            try:
                texts.append(await call(c.core.connect_get_node_proxy_with_path, node, "metrics/cadvisor",
                                        _request_timeout=REQUEST_TIMEOUT_SECONDS))
                _ANSWERED.add(node)
            except ApiException as e:
                if e.status in (401, 403):
                    self.available = False
                elif first:
                    _UNREACHABLE.add(node)
                return None
            except (urllib3.exceptions.HTTPError, OSError):
                if first:
                    _UNREACHABLE.add(node)
                return None
            finally:
                _ASKING.discard(node)
        return {pod: found for text in texts for pod, found in counters(text, c.namespace, set(pods)).items()}
