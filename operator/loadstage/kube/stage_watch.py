"""Following a running stage through its pods: the Locust master's end, a pod that cannot start, and an
injector lost on the way (under spec.injectors.onLost), all seen as they happen."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.rest import ApiException

from loadstage.api.names import LABEL_RUN
from loadstage.engine.errors import ExperimentFailed, StageDisrupted
from loadstage.engine.steps import Step
from loadstage.kube import manifests
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.pod_watch import WATCH_SECONDS, NamespacePods
from loadstage.kube.pods import Pod, cannot_start, containers, disruption, job_of, loss, master_terminated, owner_uids
from loadstage.kube.scheduling import refusals_from, refused_creation, unschedulable
from loadstage.kube.stored_results import StoredResults
from loadstage.launch.lost_injectors import LostInjectors

ABSENT_POD_CHECK_SECONDS = 15    # how often the Jobs and their Events are read while pods are missing


class StageWatch:
    def __init__(self, context: ExperimentContext, pods: NamespacePods, stored: StoredResults):
        self.context, self.pods, self.stored = context, pods, stored

    async def wait_for_master(self, step: Step, resumed: bool):
        """Waits on the stage's pods. Every WATCH_SECONDS with nothing seen (ABSENT_POD_CHECK_SECONDS while
        pods are missing), checks whether either Job ended without a pod to show it, or cannot create its
        pods. Returns the master pod's name, its terminated state and the injectors lost on the way (onLost:
        Continue), which are kept on the worker Job as they are seen. Raises StageDisrupted when the cluster
        took the master, or under onLost: Fail an injector, away."""
        c = self.context
        exp = c.experiment
        master, workers = manifests.master_name(exp, step), manifests.workers_name(exp, step)
        lost = LostInjectors(exp.spec.injectors.on_lost, step,
                             await self.stored.lost_before(workers) if resumed else None)
        jobs = {job.metadata.uid for job in [await self._job(master), await self._job(workers)] if job}
        unrecorded: set[str] = set()
        absent = [True]     # no master pod: only the Job's status can tell whether it was there and went
        short = [True]      # fewer pods than the Jobs want: the API server may be refusing them
        since = refusals_from()

        def ended(current: dict[str, Pod]):
            fatal = cannot_start(current.values())
            if fatal:
                raise ExperimentFailed("InjectorNotStarting", f"{step.label()}: {fatal}")
            if stuck := unschedulable(current.values(), exp.spec.scheduling_timeout):
                raise ExperimentFailed("Unschedulable", f"{step.label()}: {stuck}")
            masters = {name: pod for name, pod in current.items() if job_of(pod) == master}
            for name, pod in masters.items():
                if cause := disruption(pod):
                    return "disrupted", f"the Locust master pod {name} {cause}"
            found = master_terminated(list(masters.values()), step)
            if found is not None:
                return "finished", found
            # even those deleted before this wait first looked: of these Jobs, not of a namesake's
            deleted = {name: job_of(pod) for name, pod in self.pods.deleted(exp.name, {LABEL_RUN: step.run_id}).items()
                       if owner_uids(pod) & jobs}
            if gone := sorted(name for name, job in deleted.items() if job == master):
                return "disrupted", f"the Locust master pod {', '.join(gone)} was deleted"
            absent[0] = not masters
            mine = {name: pod for name, pod in current.items() if job_of(pod) == workers}
            short[0] = not masters or len(mine) < step.stage.count
            causes = {name: loss(pod) for name, pod in mine.items()}
            causes.update({name: "was deleted" for name, job in deleted.items() if job == workers})
            for name, cause in causes.items():
                if cause is None or name in lost:
                    continue
                if exp.spec.injectors.on_lost == "Fail" and (name not in mine or disruption(mine[name])):
                    return "disrupted", f"injector pod {name} {disruption(mine[name]) if name in mine else cause}"
                message = lost.lose(name, cause, described=f"injector pod {name}")
                unrecorded.add(name)
                c.on_event("InjectorLost", f"{message}; the stage goes on (onLost: Continue)")
            return ("lost", None) if unrecorded else None
        while True:
            found = await self.pods.until(exp.name, {LABEL_RUN: step.run_id}, ended, c.stopped,
                                          timeout=ABSENT_POD_CHECK_SECONDS if short[0] else WATCH_SECONDS)
            if found is not None:
                what, detail = found
                if what == "lost":
                    await self.stored.record_lost(workers, lost.entries())
                    unrecorded.clear()
                    continue
                if what == "finished":
                    return (*detail, lost.entries())
                raise StageDisrupted(detail)
            if short[0] and (refused := await refused_creation(c, since, jobs=[master, workers])):
                raise ExperimentFailed("PodsRefused", f"{step.label()}: {refused}")
            if absent[0] and await self._job_succeeded(master):
                raise StageDisrupted(f"the Locust master pod of Job {master} finished, but was deleted before "
                                     f"its result was read")
            for job_name in (master, workers):
                failure = await self._job_failure(job_name)
                if failure:
                    raise ExperimentFailed("StageFailed", f"{step.label()}: Job {job_name} failed: {failure}"
                                           + self._master_output(master))

    async def _job(self, name: str):
        """The Job, None once deleted."""
        try:
            return await call(self.context.batch.read_namespaced_job_status, name, self.context.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def _job_status(self, name: str):
        job = await self._job(name)
        return None if job is None else job.status

    async def _job_succeeded(self, name: str) -> bool:
        status = await self._job_status(name)
        return status is not None and (status.succeeded or 0) > 0

    async def _job_failure(self, name: str) -> str | None:
        status = await self._job_status(name)
        if status is None:
            return "the Job was deleted"
        for condition in status.conditions or []:
            if condition.type == "Failed" and condition.status == "True":
                return f"{condition.reason}: {condition.message}"
        return None

    def _master_output(self, master: str) -> str:
        pods = self.pods.snapshot(self.context.experiment.name, {"job-name": master})
        for pod in pods.values():
            for cs in containers(pod):
                message = ((cs.get("state") or {}).get("terminated") or {}).get("message")
                if message:
                    return f"; master said: {message[-500:]}"
        return ""


def parse_summary(message: str | None, master: str) -> dict[str, Any]:
    """The stage's headline, from the master container's termination message."""
    try:
        summary = json.loads(message or "")
        if not isinstance(summary, dict) or "latencyMs" not in summary:
            raise ValueError
        return summary
    except ValueError:
        raise ExperimentFailed("StageFailed", f"the Locust master {master} ended without a stage summary in "
                                              f"its termination message: {(message or '')[:300]!r}") from None
