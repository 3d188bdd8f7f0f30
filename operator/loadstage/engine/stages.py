"""The stage engine: runs every variant through its warm-up and stages on a backend,
and keeps the LoadExperiment status. Written once; the local and Kubernetes backends
differ only in how they deploy a target and run a stage.

The status is the engine's only memory: given a status with finished stages, it
continues after them, so a restarted operator neither loses nor repeats a stage."""

from __future__ import annotations

import asyncio

from dataclasses import replace
from typing import Any, Awaitable, Callable

from loadstage.api.types import Experiment
from loadstage.engine.backend import Backend
from loadstage.engine.clock import now
from loadstage.engine.errors import ExperimentFailed, StageDisrupted
from loadstage.engine.steps import Step, stage_step, warmup_step
from loadstage.results.measurement import StageMeasurement
from loadstage.results.model import Artifact, Retry, VariantRecord
from loadstage.results.stage_results import p99_pivot, stage_result, variant_aggregate
from loadstage.results.thresholds import capacity


async def _ignore(status: dict[str, Any]) -> None:
    pass


STATUS_SCHEMA_VERSION = 2   # 1: before the status said; every earlier version is read as it is


def new_status(experiment: Experiment) -> dict[str, Any]:
    return {
        "schemaVersion": STATUS_SCHEMA_VERSION,
        "phase": "Pending",
        "message": "waiting to start",
        "variants": [{"index": v.index, "settings": v.settings(), "stages": []}
                     for v in experiment.variants()],
    }


ATTEMPT_KEYS = ("attempt", "retries")


def _with_attempts(status: dict[str, Any], progress: dict[str, Any]) -> dict[str, Any]:
    """The progress of a step, carrying its attempts so far when status.progress is of the same step (a run
    resumed after an operator restart), and no other step's."""
    before = status.get("progress") or {}
    fresh = {k: v for k, v in progress.items() if k not in ATTEMPT_KEYS}
    same = all(before.get(k) == fresh.get(k) for k in ("variant", "stage"))
    return {**fresh, **{k: before[k] for k in ATTEMPT_KEYS if same and k in before}}


class StageEngine:
    def __init__(self, experiment: Experiment, backend: Backend, *,
                 on_update: Callable[[dict[str, Any]], Awaitable[None]] | None = None):
        self.experiment = experiment
        self.backend = backend
        self.on_update = on_update or _ignore
        self.artifacts: dict[int, list[dict[str, Any]]] = {}   # per variant, one per finished stage

    async def _set(self, status: dict[str, Any], **fields) -> None:
        status.update(fields)
        await self.on_update(status)

    async def run(self, status: dict[str, Any] | None = None) -> dict[str, Any]:
        status = status or new_status(self.experiment)
        status.setdefault("startedAt", now())
        status["schemaVersion"] = STATUS_SCHEMA_VERSION
        spec = self.experiment.spec
        variants = self.experiment.variants()
        records = [VariantRecord.from_status(v) for v in status["variants"]]
        # A run picked up after a restart keeps its phase and progress while the target is re-checked:
        # the stage in flight goes on, and the status must not go backwards.
        resuming = status.get("phase") == "Running"
        for variant in variants:
            record = records[variant.index]
            if len(record.stages) >= len(spec.stages):
                continue
            progress = {"variant": f"{variant.index + 1}/{len(variants)}",
                        "stage": f"{len(record.stages)}/{len(spec.stages)}", "injectors": 0}
            which = f"variant {variant.index + 1}/{len(variants)} ({variant.label()})"
            if resuming:
                progress = status.get("progress", progress)
                await self._set(status, message=f"resuming {which}: checking the target")
                resuming = False
            else:
                await self._set(status, phase="Deploying", progress=progress,
                                message=f"deploying the target for {which}")
            await self.backend.prepare_variant(variant)
            artifacts = self.artifacts.setdefault(
                variant.index, await self.backend.saved_artifacts(variant, len(record.stages)))
            kept = [Artifact.from_artifact(a) for a in artifacts]
            warmup = warmup_step(self.experiment, variant)
            if warmup is not None and not record.warmed_up:
                await self._set(status, phase="Running", message=f"running {warmup.label()}",
                                progress=_with_attempts(status, {**progress, "injectors": warmup.stage.injectors}))
                await self._run_step(warmup, status)
                record.warmed_up = True
                status["variants"][variant.index] = record.to_status()
                await self.on_update(status)
            for number in range(len(record.stages) + 1, len(spec.stages) + 1):
                step = stage_step(self.experiment, variant, number)
                progress = {**progress, "stage": f"{number}/{len(spec.stages)}", "injectors": step.stage.injectors}
                progress = _with_attempts(status, progress)
                await self._set(status, phase="Running", progress=progress, message=f"running {step.label()}")
                measurement, retries = await self._run_step(step, status)
                # the intervals' bootstrap takes a second or two of CPU: off the event loop
                result = replace(await asyncio.to_thread(stage_result, self.experiment, number, step.stage,
                                                         measurement), retries=retries)
                record.stages.append(result)
                artifacts.append(measurement.artifact)
                kept.append(Artifact.from_artifact(measurement.artifact))
                record.aggregate = await asyncio.to_thread(variant_aggregate, record.stages, kept)
                if spec.thresholds is not None:
                    record.judged, record.capacity = True, capacity(record.stages)
                status["variants"][variant.index] = record.to_status()
                status["p99ByStage"] = [row.to_status() for row in p99_pivot(records)]
                p99 = result.latency.p99
                status["latest"] = {"p99Ms": None if p99 is None else round(p99, 1),   # for `kubectl get lx`
                                    "redisPeakConnections": result.redis_peak_connections}
                await self.on_update(status)
            await self.backend.finish_variant(variant)
        await self._set(status, phase="Succeeded", message="all stages finished", finishedAt=now())
        return status

    async def _run_step(self, step: Step, status: dict[str, Any]) -> tuple[StageMeasurement, tuple[Retry, ...]]:
        """Runs the step, and again from scratch each time its pods are taken away, up to spec.stageRetries
        times. The attempt in flight and the retries so far are in status.progress before each attempt starts,
        so that a restarted operator resumes that attempt."""
        progress = status["progress"]
        retries = tuple(Retry.from_status(r) for r in progress.get("retries", ()))
        step = replace(step, attempt=len(retries) + 1)
        while True:
            try:
                return await self.backend.run_stage(step), retries
            except StageDisrupted as e:
                allowed = self.experiment.spec.stage_retries
                if step.attempt > allowed:
                    raise ExperimentFailed("StageDisrupted", f"{step.label()}: {e.cause}; no retry left "
                                                             f"(spec.stageRetries: {allowed})") from None
                retries += (Retry(step.attempt, now(), e.cause),)
                await self.backend.discard_stage(step)
                step = step.again()
                await self._set(status, progress={**progress, "attempt": step.attempt,
                                                  "retries": [r.to_status() for r in retries]},
                                message=f"running {step.label()}; attempt {step.attempt - 1}: {e.cause}")
