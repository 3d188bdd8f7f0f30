"""The stage engine: runs every variant through its warm-up and stages on a backend,
and keeps the LoadExperiment status. Written once; the local and Kubernetes backends
differ only in how they deploy a target and run a stage.

The status is the engine's only memory: given a status with finished stages, it
continues after them, so a restarted operator neither loses nor repeats a stage."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from loadstage.api.status import SCHEMA_VERSION as STATUS_SCHEMA_VERSION
from loadstage.api.status import Progress, Retry, RunStatus, StageResult, VariantRecord
from loadstage.api.types import MAX_SEED, Experiment, Variant
from loadstage.engine.backend import Backend
from loadstage.engine.clock import now, parse
from loadstage.engine.errors import Cancelled, ExperimentFailed, StageDisrupted
from loadstage.engine.eta import estimate
from loadstage.engine.planners import planner_for
from loadstage.engine.planners.search import searched
from loadstage.engine.steps import Step, warmup_before
from loadstage.results.artifact import Artifact
from loadstage.results.measurement import StageMeasurement
from loadstage.results.scale_out import asked, scale_outs
from loadstage.results.stage_results import ladder_headline, merged_repeats, p99_pivot, stage_result, variant_aggregate
from loadstage.results.thresholds import capacity


async def _ignore(status: RunStatus) -> None:
    pass


def new_status(experiment: Experiment, before: RunStatus | None = None) -> RunStatus:
    """A run's first status: Pending, every variant without stages; the rest of `before` (its conditions) kept."""
    return replace(before or RunStatus(), schema_version=STATUS_SCHEMA_VERSION, phase="Pending",
                   message="waiting to start",
                   variants=[VariantRecord(v.index, v.settings()) for v in experiment.variants()])


PROGRESS_REFRESH_SECONDS = 60.0   # how often a running step's time left is rewritten (kubectl get lx)


class RunClock:
    """Where the run is in its plan, for the time it has left. A step's time is the event loop's (the monotonic
    clock, or the virtual one a test runs the loop on)."""

    def __init__(self, steps: list[Step], started_at: str, monotonic: Callable[[], float] = time.monotonic):
        self.steps, self.monotonic = steps, monotonic
        self.position, self.step_began = 0, monotonic()
        self.started = parse(started_at)

    def at(self, position: int) -> None:
        self.position, self.step_began = position, self.monotonic()

    def progress(self) -> Progress:
        moment = dt.datetime.now(dt.UTC)
        return estimate(self.steps, self.position, self.started, moment,
                        into_step=self.monotonic() - self.step_began).to_progress(moment)


def _with_attempts(status: RunStatus, progress: Progress) -> Progress:
    """The progress of a step, carrying its attempts so far when status.progress is of the same step (a run
    resumed after an operator restart), and no other step's."""
    before = status.progress or Progress()
    fresh = Progress(**progress)
    fresh.pop("attempt", None)
    fresh.pop("retries", None)

    def step_of(p: Progress) -> tuple[object, ...]:
        return p.get("variant"), p.get("repeat"), p.get("stage"), p.get("warmup")
    if step_of(before) == step_of(fresh):
        if "attempt" in before:
            fresh["attempt"] = before["attempt"]
        if "retries" in before:
            fresh["retries"] = before["retries"]
    return fresh


class StageEngine:
    def __init__(self, experiment: Experiment, backend: Backend, *,
                 on_update: Callable[[RunStatus], Awaitable[None]] | None = None):
        self.experiment = experiment
        self.backend = backend
        self.on_update = on_update or _ignore
        self.artifacts: dict[tuple[int, int, int | None], dict[str, Any]] = {}   # by Step.key
        self.variants = experiment.variants()

    async def _set(self, status: RunStatus, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(status, name, value)
        await self.on_update(status)

    async def run(self, status: RunStatus | None = None) -> RunStatus:
        status = self.status = status or new_status(self.experiment)
        status.started_at = status.started_at or now()
        status.schema_version = STATUS_SCHEMA_VERSION
        spec = self.experiment.spec
        if spec.order == "Random" and status.seed is None:
            status.seed = spec.seed if spec.seed is not None else random.randrange(MAX_SEED + 1)
        self.planner = planner_for(self.experiment, status.seed)
        self.clock = RunClock([], status.started_at, asyncio.get_running_loop().time)
        try:
            await self._run_planned(status)
        except (ExperimentFailed, Cancelled):
            await self._headlines_so_far(status)
            raise
        self.clock.at(len(self.clock.steps))
        await self._set(status, phase="Succeeded", message="all stages finished", finished_at=now(),
                        progress={**(status.progress or {}), **self.clock.progress()})
        return status

    async def _run_planned(self, status: RunStatus) -> None:
        """Each stage its planner plans next, until it plans none. A run picked up after a restart keeps its phase
        and progress while the target is re-checked: the stage in flight goes on, and the status must not go
        backwards."""
        resuming = status.phase == "Running"
        prepared = None
        while (planned := self.planner.next(status, prepared, resuming)) is not None:
            self.clock.steps = planned.steps
            self.clock.at(planned.position)
            step = planned.step
            prepared = await self._prepare(prepared, step, status, status.variants[step.variant.index], resuming,
                                           planned.fresh)
            resuming = False
            await self._run_and_record(step, status, planned.last)
        if prepared is not None:
            await self.backend.finish_variant(prepared)

    async def _prepare(self, prepared: Variant | None, step: Step, status: RunStatus, record: VariantRecord,
                       resuming: bool, fresh: bool) -> Variant:
        """Deploys the step's variant unless it is the one prepared, then its warm-up where its target is `fresh`."""
        variant = step.variant
        if prepared == variant:
            return variant
        if prepared is not None:
            await self.backend.finish_variant(prepared)
        which = f"variant {variant.index + 1}/{step.variants} ({variant.label()})"
        if resuming:
            await self._set(status, message=f"resuming {which}: checking the target")
        else:
            await self._set(status, phase="Deploying", progress=self._progress(step),
                            message=f"deploying the target for {which}")
        await self.backend.prepare_variant(variant)
        warmup = warmup_before(self.experiment, step) if fresh else None
        if warmup is not None and not self._warmed_up(status, record, warmup):
            await self._set(status, phase="Running", message=f"running {warmup.label()}",
                            progress=_with_attempts(status, self._progress(warmup)))
            await self._run_step(warmup, status)
            status.warmed_up = warmup.run_id
            await self.on_update(status)
        return variant

    async def _run_and_record(self, step: Step, status: RunStatus, last: Callable[[], bool]) -> None:
        """Runs the step and writes its figures; after the variant's `last` step, also its headline row."""
        records = status.variants
        variant, record = step.variant, records[step.variant.index]
        await self._set(status, phase="Running", progress=_with_attempts(status, self._progress(step)),
                        message=f"running {step.label()}")
        measurement, retries = await self._run_step(step, status)
        result = await self._record(step, record, measurement, retries)
        if last():
            await self._headline(record, variant)
            predict = self.experiment.spec.predict.sizes() if self.experiment.spec.predict else None
            if asked(self.variants, predict):   # a fit takes a second: off the event loop, and only where asked
                status.scale_out = await asyncio.to_thread(scale_outs, self.variants, records, predict)
        if not step.searching:   # a search's stage numbers are of its own order, at loads of its own
            status.p99_by_stage = p99_pivot(records)
        p99 = result.latency.p99
        status.latest = {"p99Ms": None if p99 is None else round(p99, 1),   # for `kubectl get lx`
                         "redisPeakConnections": measurement.redis_peak_connections,
                         **({"verdict": result.verdict.summary()} if result.verdict and result.verdict.objectives
                            else {}),
                         **({"bracket": record.search.bracket()} if record.search else {})}
        await self.on_update(status)

    def _progress(self, step: Step) -> Progress:
        """A warm-up's stage is the one finished before it, as the count of finished stages."""
        number = step.precedes - 1 if step.warmup else step.number
        return {"variant": f"{step.variant.index + 1}/{step.variants}",
                **({"repeat": f"{step.repeat}/{step.repeats}"} if step.repeats > 1 else {}),
                "stage": str(number) if step.searching else f"{number}/{step.stages}",
                **({"warmup": True} if step.warmup else {}),
                "injectors": step.stage.injectors, **self.clock.progress()}

    @staticmethod
    def _warmed_up(status: RunStatus, record: VariantRecord, warmup: Step) -> bool:
        """Whether the warm-up ran before an operator restart (a status before repeats said so per variant)."""
        return status.warmed_up == warmup.run_id or (record.warmed_up and warmup.repeat == 1
                                                            and warmup.precedes == 1)

    async def _artifacts(self, variant: Variant, number: int, repeats: list[int]) -> list[Artifact]:
        """The artifacts of the variant's stage `number` in each of `repeats`: kept since they ran, or read back."""
        missing = [self.planner.finished(self.status, variant, r, number) for r in repeats
                   if (variant.index, r, number) not in self.artifacts]
        for done, artifact in zip(missing, await self.backend.saved_artifacts(missing) if missing else []):
            self.artifacts[done.key] = artifact
        return [Artifact.from_artifact(self.artifacts[(variant.index, r, number)]) for r in repeats]

    async def _record(self, step: Step, record: VariantRecord, measurement: StageMeasurement,
                      retries: tuple[Retry, ...]) -> StageResult:
        """Adds the step's figures to the variant's record: the stage's result, merged with its other repeats,
        the repeat's headline, and the variant's aggregate over everything; returns the step's own result."""
        # the intervals' bootstrap takes a second or two of CPU: off the event loop
        result = replace(await asyncio.to_thread(stage_result, self.experiment, step.stage_number, step.stage,
                                                 measurement, step.variant), retries=retries)
        if result.requests and result.latency.n == 0:   # never again quietly: see compat.runner_of
            raise ExperimentFailed("ResultsLost", f"{step.label()}: Locust counted {result.requests:,} requests, but "
                                                  f"no injector's histograms reached its master")
        self.artifacts[step.key] = measurement.artifact
        variant, number = step.variant, step.stage_number
        before = next((s for s in record.stages if s.stage == number), None)
        if step.repeats > 1:
            this = record.repeat(step.repeat)
            this.stages = sorted([*this.stages, result.headline()], key=lambda h: h.stage or 0)
            if len(this.stages) == step.stages:
                ladder = [(await self._artifacts(variant, n, [step.repeat]))[0] for n in range(1, step.stages + 1)]
                this.aggregate = ladder_headline(self.experiment, this.stages, ladder)
        if before is None:
            record.stages = sorted([*record.stages, result], key=lambda s: s.stage)
        else:
            runs = record.repeats_of(number)
            merged = await asyncio.to_thread(
                merged_repeats, self.experiment, before, result, await self._artifacts(variant, number, runs),
                [h for r in runs for h in record.repeats[r - 1].stages if h.stage == number])
            record.stages = [merged if s.stage == number else s for s in record.stages]
        record.aggregate = None   # until the variant's last step (_headline): its cost grows with every stage
        spec = self.experiment.spec
        if spec.search is not None:
            record.search = searched(self.experiment, record)[0]
        elif record.search is not None:   # a goal's winner, searched (spec.autoscale): its bracket is its capacity
            record.capacity = None
        elif spec.objective is not None:
            record.judged, record.capacity = True, capacity(record.stages)
        return result

    async def _headline(self, record: VariantRecord, variant: Variant) -> None:
        """The variant's row over all its stages and repeats so far."""
        every = [a for s in record.stages for a in await self._artifacts(variant, s.stage, record.repeats_of(s.stage))]
        whole = [r.aggregate for r in record.repeats if r.aggregate is not None]
        record.aggregate = await asyncio.to_thread(variant_aggregate, record.stages, every, whole)

    async def _headlines_so_far(self, status: RunStatus) -> None:
        """A run that ends early keeps the rows of the stages it finished."""
        for record, variant in zip(status.variants, self.experiment.variants()):
            if record.stages and record.aggregate is None:
                with contextlib.suppress(Exception):   # the run's own failure is what it reports
                    await self._headline(record, variant)

    @contextlib.asynccontextmanager
    async def _refreshing(self, status: RunStatus) -> AsyncIterator[None]:
        """While a step runs, its time left is rewritten every PROGRESS_REFRESH_SECONDS (a backend whose calls
        block the event loop leaves no room for it: its own progress line shows the time left)."""
        async def refresh() -> None:
            while True:
                await asyncio.sleep(PROGRESS_REFRESH_SECONDS)
                status.progress = {**(status.progress or {}), **self.clock.progress()}
                with contextlib.suppress(Exception):   # the next write carries it; the stage must not fail for it
                    await self.on_update(status)
        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run_step(self, step: Step, status: RunStatus) -> tuple[StageMeasurement, tuple[Retry, ...]]:
        """Runs the step, and again from scratch each time its pods are taken away, up to spec.stageRetries
        times. The attempt in flight and the retries so far are in status.progress before each attempt starts,
        so that a restarted operator resumes that attempt."""
        progress = status.progress or Progress()
        retries = tuple(progress.get("retries", ()))
        step = replace(step, attempt=len(retries) + 1)
        while True:
            try:
                async with self._refreshing(status):
                    return await self.backend.run_stage(step), retries
            except StageDisrupted as e:
                allowed = self.experiment.spec.stage_retries
                if step.attempt > allowed:
                    raise ExperimentFailed(e.reason, f"{step.label()}: {e.cause}; no retry left "
                                                             f"(spec.stageRetries: {allowed})") from None
                retries += (Retry(step.attempt, now(), e.cause, e.reason),)
                await self.backend.discard_stage(step)
                step = step.again()
                await self._set(status, progress={**progress, "attempt": step.attempt, "retries": list(retries)},
                                message=f"running {step.label()}; attempt {step.attempt - 1}: {e.cause}")
