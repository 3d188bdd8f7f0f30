"""Following a running stage through its pods: the Locust master's end, a pod that cannot start, and an
injector lost on the way (under spec.injectors.onLost), all seen as they happen."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.rest import ApiException

from loadstage.api.names import LABEL_RUN
from loadstage.engine.errors import ExperimentFailed
from loadstage.engine.injectors import LostInjectors
from loadstage.engine.steps import Step
from loadstage.kube import manifests
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.pod_watch import WATCH_SECONDS, NamespacePods
from loadstage.kube.pods import Pod, cannot_start, containers, job_of, loss, master_terminated
from loadstage.kube.stored_results import StoredResults


class StageWatch:
    def __init__(self, context: ExperimentContext, pods: NamespacePods, stored: StoredResults):
        self.context, self.pods, self.stored = context, pods, stored

    async def wait_for_master(self, step: Step, resumed: bool):
        """Waits on the stage's pods. Every WATCH_SECONDS with nothing seen, checks whether either Job
        failed without a pod to show it. Returns the master pod's name, its terminated state and the
        injectors lost on the way (onLost: Continue), which are kept on the worker Job as they are seen."""
        c = self.context
        exp = c.experiment
        master, workers = manifests.master_name(exp, step), manifests.workers_name(exp, step)
        lost = LostInjectors(exp.spec.injectors.on_lost, step,
                             await self.stored.lost_before(workers) if resumed else None)
        seen: set[str] = {entry["injector"] for entry in lost.entries()}
        unrecorded: set[str] = set()

        def ended(current: dict[str, Pod]):
            fatal = cannot_start(current.values())
            if fatal:
                raise ExperimentFailed("InjectorNotStarting", f"{step.label()}: {fatal}")
            masters = [p for p in current.values() if job_of(p) == master]
            for pod in masters:
                if pod["metadata"].get("deletionTimestamp"):
                    return "deleted", pod
            found = master_terminated(masters, step)
            if found is not None:
                return "finished", found
            mine = {name: pod for name, pod in current.items() if job_of(pod) == workers}
            causes = {name: loss(pod) for name, pod in mine.items()}
            causes.update({name: "was deleted" for name in seen - mine.keys()})
            for name, cause in causes.items():
                if cause is None or name in lost:
                    continue
                message = lost.lose(name, cause, described=f"injector pod {name}")
                unrecorded.add(name)
                c.on_event("InjectorLost", f"{message}; the stage goes on (onLost: Continue)")
            seen.update(mine)
            return ("lost", None) if unrecorded else None
        while True:
            found = await self.pods.until(exp.name, {LABEL_RUN: step.run_id}, ended,
                                          c.stopped, timeout=WATCH_SECONDS)
            if found is not None:
                what, detail = found
                if what == "lost":
                    await self.stored.record_lost(workers, lost.entries())
                    unrecorded.clear()
                    continue
                if what == "finished":
                    return (*detail, lost.entries())
                failure = await self._job_failure(master)
                raise ExperimentFailed("StageFailed", f"{step.label()}: the Locust master pod "
                                                      f"{detail['metadata']['name']} {loss(detail)}"
                                       + (f"; Job {master} failed: {failure}" if failure else ""))
            for job_name in (master, workers):
                failure = await self._job_failure(job_name)
                if failure:
                    raise ExperimentFailed("StageFailed", f"{step.label()}: Job {job_name} failed: {failure}"
                                           + self._master_output(master))

    async def _job_failure(self, name: str) -> str | None:
        try:
            job = await call(self.context.batch.read_namespaced_job_status, name, self.context.namespace)
        except ApiException as e:
            if e.status == 404:
                return "the Job was deleted"
            raise
        for condition in job.status.conditions or []:
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
