"""The target's health while a stage runs, from the pod watch: each runner pod's container restarts (with
the reason the kubelet gives: OOMKilled, a failed liveness probe), pods taken away or replaced, and the
seconds each pod was not ready, out of the Service. A stage with any of these did not load a steady target."""

from __future__ import annotations

import asyncio
import contextlib
import time

from kubernetes.client.rest import ApiException

from loadstage.api.names import LABEL_ROLE
from loadstage.api.status import TargetPodHealth
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.pod_watch import NamespacePods
from loadstage.kube.pods import Pod, containers, disruption, ready


def restart_count(pod: Pod) -> int:
    return sum(cs.get("restartCount") or 0 for cs in containers(pod))


def last_exit(pod: Pod) -> str | None:
    """How the pod's last restarted container ended: 'OOMKilled (exit 137)'."""
    for cs in containers(pod):
        terminated = (cs.get("lastState") or {}).get("terminated")
        if terminated:
            return f"{terminated.get('reason') or 'Error'} (exit {terminated.get('exitCode')})"
    return None


def restarts_before(pod: Pod, since: str | None) -> int:
    """The pod's restarts before the stage that began at `since` (None: before now). For a stage resumed
    after the operator was away, a pod created since has none, and a container that ended since counts once:
    the kubelet keeps only the last ending, so more restarts while nobody watched are a lower bound."""
    count = restart_count(pod)
    if since is None:
        return count
    if (pod["metadata"].get("creationTimestamp") or "") >= since:
        return 0
    ended_since = any(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt", "") >= since
                      for cs in containers(pod))
    return count - ended_since


class TargetHealth:
    """Follows the pods of one role (the runners; the Redis loadstage deployed) from `async with` to its end;
    `pods()` is what was seen, by pod. `since` is when a resumed stage began (its master Job's creation), so
    restarts while no operator watched count."""

    def __init__(self, context: ExperimentContext, pods: NamespacePods, since: str | None = None,
                 role: str = "runner"):
        self.context, self.watch, self.since, self.role = context, pods, since, role
        self._baseline: dict[str, int] | None = None    # restarts before the stage, by pod
        self._restarts: dict[str, int] = {}
        self._exits: dict[str, str] = {}
        self._unready: dict[str, float] = {}
        self._gone: dict[str, str] = {}
        self._last: tuple[float, dict[str, bool]] | None = None
        self._task: asyncio.Task | None = None
        self._ending = False
        self._outgoing: set[str] = set()

    async def __aenter__(self) -> TargetHealth:
        if self.watch.listed:    # the baseline now, not when the task first runs
            self._observe(self.watch.snapshot(self.context.experiment.name, {LABEL_ROLE: self.role}))
        self._task = asyncio.create_task(self._follow())
        return self

    async def __aexit__(self, *exc) -> None:
        # ended by a flag, not by cancelling: Python 3.11's wait_for can swallow a cancellation
        self._ending = True
        if self._task is not None:
            await self._task
        self._observe(self.watch.snapshot(self.context.experiment.name, {LABEL_ROLE: self.role}))

    async def _follow(self) -> None:
        def observe(current: dict[str, Pod]) -> bool | None:
            self._observe(current)
            return self._ending or None
        with contextlib.suppress(Exception):    # the stage's own watch reports a watch that fails, or a stop
            await self.watch.until(self.context.experiment.name, {LABEL_ROLE: self.role}, observe,
                                   self.context.stopped)

    def _observe(self, current: dict[str, Pod]) -> None:
        at = time.monotonic()
        if self._baseline is None:
            self._baseline = {name: restarts_before(pod, self.since) for name, pod in current.items()}
            # the previous variant's pods, on their way out as the stage starts: not the stage's target
            self._outgoing = {name for name, pod in current.items() if pod["metadata"].get("deletionTimestamp")}
        current = {name: pod for name, pod in current.items() if name not in self._outgoing}
        if self._last is not None:
            since, was_ready = self._last
            for name, ok in was_ready.items():
                if not ok:
                    self._unready[name] = self._unready.get(name, 0.0) + at - since
        for name, pod in current.items():
            restarts = restart_count(pod) - self._baseline.get(name, 0)
            if restarts > 0:
                self._restarts[name] = restarts
                self._exits[name] = last_exit(pod) or self._exits.get(name, "")
            cause = disruption(pod)
            if cause:
                self._gone[name] = cause
        for name in (self._last[1] if self._last else {}).keys() - current.keys():
            self._gone.setdefault(name, "was deleted")
        self._last = (at, {name: ready(pod) and not pod["metadata"].get("deletionTimestamp")
                           for name, pod in current.items()})

    async def pods(self) -> tuple[TargetPodHealth, ...]:
        """Each pod that restarted, went, or was not ready for a second or more; why, from its Events."""
        names = sorted(set(self._restarts) | set(self._gone) | {n for n, s in self._unready.items() if s >= 1})
        probes = await self._probe_failures(names) if self._restarts else {}
        return tuple(TargetPodHealth(
            pod=name, restarts=self._restarts.get(name, 0),
            unready_seconds=round(self._unready.get(name, 0.0), 1),
            causes=tuple(c for c in (self._exits.get(name), probes.get(name)) if c), gone=self._gone.get(name))
            for name in names)

    async def _probe_failures(self, names: list[str]) -> dict[str, str]:
        """The kubelet's word on why it restarted each pod's container ('Killing': a failed liveness probe)."""
        c = self.context
        found: dict[str, str] = {}
        try:
            events = await call(c.core.list_namespaced_event, c.namespace,
                                field_selector="involvedObject.kind=Pod,reason=Killing")
        except ApiException:
            return found
        for event in events.items:
            name = event.involved_object.name
            if name in names and "probe" in (said := event.message or ""):
                found[name] = said
        return found
