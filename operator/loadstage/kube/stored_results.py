"""What a stage keeps in the cluster beyond its pods: its artifact in a ConfigMap owned by the experiment,
and the injectors it lost, as an annotation on its worker Job, for an operator that resumes it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes.client.rest import ApiException

from loadstage.api.names import ANNOTATION_LOST_INJECTORS, ARTIFACT_KEY, LABEL_COMPONENT, LABEL_EXPERIMENT, LABEL_RUN
from loadstage.engine.errors import ExperimentFailed, StageDisrupted
from loadstage.engine.steps import Step
from loadstage.kube import manifests
from loadstage.kube.children import Children
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.results.artifact import UnreadableArtifact, artifact_from_log, fit_artifact

LOG_READS, LOG_READ_INTERVAL_SECONDS = 3, 2.0


def first_repeat_artifacts(core: Any, namespace: str, name: str,
                           stages: list[tuple[int, int]]) -> list[tuple[int, int, int, dict[str, Any]]]:
    """(variant, 1, stage, artifact) of each (variant, stage) numbered from 1, each ConfigMap read by its name (the
    operator may get ConfigMaps, not list them); one that is gone is left out. A synchronous CoreV1Api."""
    found = []
    for variant, stage in stages:
        try:
            kept = core.read_namespaced_config_map(manifests.results_name_of(name, f"v{variant}-s{stage}"), namespace)
        except ApiException as e:
            if e.status == 404:
                continue
            raise
        found.append((variant, 1, stage, json.loads((kept.data or {}).get(ARTIFACT_KEY, "{}"))))
    return found


def stored_artifacts(core: Any, namespace: str, name: str) -> list[tuple[int, int, int, dict[str, Any]]]:
    """(variant, repeat, stage, artifact) of every stage an experiment kept in its ConfigMaps, each numbered
    from 1, in order (a synchronous CoreV1Api; its ApiException is the caller's)."""
    maps = core.list_namespaced_config_map(namespace,
                                           label_selector=f"{LABEL_EXPERIMENT}={name},{LABEL_COMPONENT}=results").items
    found = []
    for cm in maps:
        parts = {part[0]: int(part[1:]) for part in cm.metadata.labels[LABEL_RUN].split("-")}   # v1-r2-s3
        found.append((parts["v"], parts.get("r", 1), parts["s"], json.loads((cm.data or {}).get(ARTIFACT_KEY, "{}"))))
    return sorted(found, key=lambda item: item[:3])


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
