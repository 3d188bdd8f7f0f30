"""What a stage keeps in the cluster beyond its pods: its artifact in a ConfigMap owned by the experiment,
and the injectors it lost, as an annotation on its worker Job, for an operator that resumes it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes.client.rest import ApiException

from loadstage.api.names import ANNOTATION_LOST_INJECTORS, ARTIFACT_KEY
from loadstage.engine.errors import ExperimentFailed, StageDisrupted
from loadstage.engine.steps import Step
from loadstage.kube import manifests
from loadstage.kube.children import Children
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.results.artifact import UnreadableArtifact, artifact_from_log, fit_artifact

LOG_READS, LOG_READ_INTERVAL_SECONDS = 3, 2.0


class StoredResults:
    def __init__(self, context: ExperimentContext, children: Children):
        self.context, self.children = context, children

    async def keep_artifact(self, step: Step, pod: str, stored_before: bool) -> dict[str, Any]:
        """The stage's artifact, from its ConfigMap if an earlier run may have stored it (the stage was
        resumed), else from the master's log (its last line), stored in a ConfigMap owned by the experiment."""
        c = self.context
        name = manifests.results_name(c.experiment, step)
        kept = await self._read_artifact(name) if stored_before else None
        if kept is not None:
            return kept
        for attempt in range(1, LOG_READS + 1):
            log = await call(c.core.read_namespaced_pod_log, pod, c.namespace, container="locust-master")
            try:
                artifact = artifact_from_log(log)
                break
            except UnreadableArtifact as e:   # the log may still be being written out: read it again
                if attempt == LOG_READS:      # the stage's results are lost with it: the stage runs again
                    raise StageDisrupted(f"the Locust master {pod}'s log, read {LOG_READS} times: {e}",
                                         reason="ArtifactUnreadable") from None
                await asyncio.sleep(LOG_READ_INTERVAL_SECONDS)
        if artifact is None:
            raise ExperimentFailed("StageFailed", f"{step.label()}: the Locust master {pod} printed no "
                                                  f"artifact line; end of its log: {log[-500:]!r}")
        fitted = fit_artifact(artifact)
        await self.children.create(manifests.results_configmap(c.experiment, step, fitted))
        return json.loads(fitted)   # what is kept, with what had to be left out (`omitted`)

    async def _read_artifact(self, name: str) -> dict[str, Any] | None:
        try:
            data = (await call(self.context.core.read_namespaced_config_map, name, self.context.namespace)).data or {}
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return json.loads(data[ARTIFACT_KEY]) if ARTIFACT_KEY in data else None

    async def saved_artifacts(self, steps: list[Step]) -> list[dict[str, Any]]:
        return [await self._read_artifact(manifests.results_name(self.context.experiment, step)) or {}
                for step in steps]

    async def record_lost(self, workers: str, lost: list[dict[str, Any]]) -> None:
        await call(self.context.batch.patch_namespaced_job, workers, self.context.namespace,
                   {"metadata": {"annotations": {ANNOTATION_LOST_INJECTORS: json.dumps(lost)}}})

    async def lost_before(self, workers: str) -> dict[str, dict[str, Any]]:
        job = await self.children.read("Job", workers)
        recorded = ((job.metadata.annotations or {}) if job else {}).get(ANNOTATION_LOST_INJECTORS)
        try:
            return {entry["injector"]: entry for entry in json.loads(recorded or "[]")}
        except (ValueError, TypeError, KeyError):   # edited by hand: the losses seen from now on still count
            return {}
