"""A target under an HPA (a verification's copy, export.verification): the Kubernetes backend, with the
autoscaler created once the target is ready, and after each stage the pods that were serving and whether the
HPA could scale at all. An HPA that cannot read its metric (no metrics-server, no CPU request) never adds a
pod: the stage where it said so is kept, and the run ends before the next, naming its condition, rather than
measure a ladder on too few pods."""

from __future__ import annotations

import datetime as dt
from typing import Any

from loadstage.api.types import Variant
from loadstage.engine.errors import ExperimentFailed
from loadstage.engine.steps import Step
from loadstage.kube.backend import KubernetesBackend
from loadstage.results.measurement import StageMeasurement


def not_scaling(hpa: Any, now: dt.datetime, patience: float) -> str | None:
    """Why the HPA cannot scale, from its ScalingActive condition, False for at least `patience` seconds (a sync
    of the HPA: a new pod's first metrics can be missing for a moment): None while it can, or has not said so
    for that long."""
    for condition in (hpa.status.conditions if hpa is not None and hpa.status else None) or []:
        since = condition.last_transition_time
        if condition.type == "ScalingActive" and condition.status == "False" and \
                (since is None or (now - since).total_seconds() >= patience):
            return f"ScalingActive False, {condition.reason}: {condition.message}"
    return None


class AutoscaledBackend:
    def __init__(self, backend: KubernetesBackend, hpa: dict[str, Any], patience: float):
        self.backend, self.hpa, self.patience = backend, hpa, patience
        self.replicas: list[int] = []     # the target's ready pods at each stage's end (warm-ups aside)
        self.stuck: str | None = None     # why the HPA could not scale, once it said so

    async def prepare_variant(self, variant: Variant) -> None:
        await self.backend.prepare_variant(variant)
        await self.backend.children.create(self.hpa)

    async def run_stage(self, step: Step) -> StageMeasurement:
        if self.stuck is not None:
            raise ExperimentFailed("AutoscalerNotScaling", self.stuck)
        measured = await self.backend.run_stage(step)
        if step.warmup:    # too soon to tell
            return measured
        name = self.hpa["metadata"]["name"]
        deployment = await self.backend.children.read("Deployment", self.hpa["spec"]["scaleTargetRef"]["name"])
        ready = (deployment.status.ready_replicas or 0) if deployment is not None else 0
        self.replicas.append(ready)
        why = not_scaling(await self.backend.children.read("HorizontalPodAutoscaler", name), dt.datetime.now(dt.UTC),
                          self.patience)
        if why is not None:
            self.stuck = f"the HPA {name} could not scale: at step {step.number} ({step.stage.arrival_rate} req/s, " \
                         f"{ready} pod(s)) it said {why}"
        return measured

    async def finish_variant(self, variant: Variant) -> None:
        await self.backend.finish_variant(variant)

    async def discard_stage(self, step: Step) -> None:
        await self.backend.discard_stage(step)

    async def saved_artifacts(self, steps: list[Step]) -> list[dict[str, Any]]:
        return await self.backend.saved_artifacts(steps)
