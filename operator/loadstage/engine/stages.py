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
from dataclasses import replace
from typing import Any, Awaitable, Callable

from loadstage.api.status import SCHEMA_VERSION as STATUS_SCHEMA_VERSION
from loadstage.api.status import Progress, Retry, RunStatus, SearchResult, StageResult, VariantRecord
from loadstage.api.types import MAX_SEED, MAX_VARIANTS, Experiment, Variant
from loadstage.engine.backend import Backend
from loadstage.engine.clock import now, parse
from loadstage.engine.errors import Cancelled, ExperimentFailed, StageDisrupted
from loadstage.engine.eta import estimate
from loadstage.engine import recommend
from loadstage.engine.search import NextStage, load_of, progress
from loadstage.engine.steps import (
    Step,
    goal_step,
    plan,
    search_order,
    search_step,
    stage_step,
    starts_block,
    warmup_before,
)
from loadstage.results.measurement import StageMeasurement
from loadstage.results.artifact import Artifact
from loadstage.results.stage_results import (
    ladder_headline,
    merged_repeats,
    p99_pivot,
    stage_result,
    variant_aggregate,
)
from loadstage.results.thresholds import capacity


async def _ignore(status: RunStatus) -> None:
    pass


def new_status(experiment: Experiment, before: RunStatus | None = None) -> RunStatus:
    """A run's first status: Pending, every variant without stages; the rest of `before` (its conditions) kept."""
    return replace(before or RunStatus(), schema_version=STATUS_SCHEMA_VERSION, phase="Pending",
                   message="waiting to start",
                   variants=[VariantRecord(v.index, v.settings()) for v in experiment.variants()])


ATTEMPT_KEYS = ("attempt", "retries")
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
        moment = dt.datetime.now(dt.timezone.utc)
        return estimate(self.steps, self.position, self.started, moment,
                        into_step=self.monotonic() - self.step_began).to_progress(moment)


def _with_attempts(status: RunStatus, progress: Progress) -> Progress:
    """The progress of a step, carrying its attempts so far when status.progress is of the same step (a run
    resumed after an operator restart), and no other step's."""
    before = status.progress or Progress()
    fresh = Progress(**{k: v for k, v in progress.items() if k not in ATTEMPT_KEYS})   # type: ignore[typeddict-item]
    same = all(before.get(k) == fresh.get(k) for k in ("variant", "repeat", "stage", "warmup"))
    return Progress(**fresh, **{k: before[k] for k in ATTEMPT_KEYS if same and k in before})  # type: ignore[typeddict-item]


class StageEngine:
    def __init__(self, experiment: Experiment, backend: Backend, *,
                 on_update: Callable[[RunStatus], Awaitable[None]] | None = None):
        self.experiment = experiment
        self.backend = backend
        self.on_update = on_update or _ignore
        self.artifacts: dict[tuple[int, int, int | None], dict[str, Any]] = {}   # by Step.key

    async def _set(self, status: RunStatus, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(status, name, value)
        await self.on_update(status)

    async def run(self, status: RunStatus | None = None) -> RunStatus:
        status = status or new_status(self.experiment)
        status.started_at = status.started_at or now()
        status.schema_version = STATUS_SCHEMA_VERSION
        spec = self.experiment.spec
        if spec.order == "Random" and status.seed is None:
            status.seed = spec.seed if spec.seed is not None else random.randrange(MAX_SEED + 1)
        steps = [] if spec.search or spec.goal else plan(self.experiment, status.seed)
        self.clock = RunClock(steps, status.started_at, asyncio.get_running_loop().time)
        records = self.records = status.variants
        # A run picked up after a restart keeps its phase and progress while the target is re-checked:
        # the stage in flight goes on, and the status must not go backwards.
        resuming = status.phase == "Running"
        try:
            if spec.goal and spec.goal.maximize:
                await self._run_halving(status, records, resuming)
            elif spec.search:
                await self._run_searches(status, records, resuming)
            elif spec.goal:
                await self._run_goal(status, records, resuming)
            else:
                await self._run_steps(steps, status, records, resuming)
        except (ExperimentFailed, Cancelled):
            await self._headlines_so_far(records, status)
            raise
        self.clock.at(len(self.clock.steps))
        await self._set(status, phase="Succeeded", message="all stages finished", finished_at=now(),
                        progress={**(status.progress or {}), **self.clock.progress()})
        return status

    async def _run_steps(self, steps: list[Step], status: RunStatus, records: list[VariantRecord],
                         resuming: bool) -> None:
        prepared = None
        for index, step in enumerate(steps):
            record = records[step.variant.index]
            if record.done(step.repeat, step.number):
                continue
            self.clock.at(index)
            prepared = await self._prepare(prepared, step, status, record, resuming, starts_block(steps, index))
            resuming = False
            last = not any(later.variant == step.variant for later in steps[index + 1:])
            await self._run_and_record(step, status, records, lambda: last)
        if prepared is not None:
            await self.backend.finish_variant(prepared)

    async def _run_searches(self, status: RunStatus, records: list[VariantRecord], resuming: bool) -> None:
        """Each variant's capacity search in turn: its next stage is decided from the stages it ran (engine.search),
        so a search resumed after a restart repeats none of them."""
        prepared = None
        order = search_order(self.experiment, status.seed)
        for variant in order:
            record = records[variant.index]
            first = not record.stages   # a search resumed mid-way goes on on its target, with no warm-up
            while True:
                record.search, following = self._searched(record)
                if following is None:
                    break
                step = search_step(self.experiment, variant, len(record.stages) + 1, following.load, following.duration,
                                   following.decided_after)
                self._clock_search(order, records, step)
                prepared = await self._prepare(prepared, step, status, record, resuming, first)
                first = resuming = False
                await self._run_and_record(step, status, records, lambda: record.search.done)   # _record updated it
        if prepared is not None:
            await self.backend.finish_variant(prepared)

    async def _run_goal(self, status: RunStatus, records: list[VariantRecord], resuming: bool) -> None:
        """Each variant's stage at the goal's load, cheapest first (engine.recommend): the next stage is decided from
        the stages run, so a run resumed after a restart repeats none of them."""
        prepared = None
        while True:
            following = self._picked(status, records)
            if following is None:
                break
            variant, record = following.variant, records[following.variant.index]
            step = goal_step(self.experiment, variant, len(record.stages) + 1, following.duration,
                             following.decided_after)
            self._clock_goal(records, step)
            prepared = await self._prepare(prepared, step, status, record, resuming, not record.stages)
            resuming = False
            await self._run_and_record(step, status, records, lambda: self._last_goal_stage(records, variant))
        if prepared is not None:
            await self.backend.finish_variant(prepared)

    def _last_goal_stage(self, records: list[VariantRecord], variant: Variant) -> bool:
        following = recommend.progress(self.experiment, records).following
        return following is None or following.variant != variant

    async def _run_halving(self, status: RunStatus, records: list[VariantRecord], resuming: bool) -> None:
        """goal.maximize: every variant's search to a coarse bracket, then the ones that may still win searched
        on (engine.recommend.halving); each next stage is decided from the stages run, so a run resumed after a
        restart repeats none of them, and goes on on its target with no warm-up."""
        prepared = None
        order = self.experiment.variants()
        fine = self.experiment.spec.search
        first_round = recommend.coarse(fine)
        while True:
            halving = recommend.halving(self.experiment, records)
            self._note_pick(status, records, halving.pick)
            for record in records:   # each bracket at the resolution of the round it is in, or was dropped after
                if record.stages:
                    searched = first_round if record.dropped or halving.search == first_round else fine
                    record.search = progress(searched, record.stages)[0]
            if halving.variant is None:
                break
            variant, record = halving.variant, records[halving.variant.index]
            following = progress(halving.search, record.stages)[1]
            step = search_step(self.experiment, variant, len(record.stages) + 1, following.load, following.duration,
                               following.decided_after)
            self._clock_search(order, records, step)
            prepared = await self._prepare(prepared, step, status, record, resuming,
                                           prepared != variant and not resuming)
            resuming = False
            await self._run_and_record(step, status, records,
                                       lambda: recommend.halving(self.experiment, records).variant != variant)
        if prepared is not None:
            await self.backend.finish_variant(prepared)

    def _picked(self, status: RunStatus, records: list[VariantRecord]) -> recommend.NextGoalStage | None:
        """The goal's pick so far into the records and the status; its next stage."""
        pick = recommend.progress(self.experiment, records)
        self._note_pick(status, records, pick)
        return pick.following

    def _note_pick(self, status: RunStatus, records: list[VariantRecord], pick: recommend.Pick) -> None:
        """Beyond MAX_VARIANTS, only the winner and runner-up so far keep their stages: every other variant is
        one line (dropped, or met)."""
        found = pick.recommendation
        finalists = {c.variant for c in (found.winner, found.runner_up) if c is not None}
        compact = len(records) > MAX_VARIANTS and self.experiment.spec.goal.load is not None   # a search needs them
        for record in records:
            record.cost = pick.costs.get(record.index, record.cost)
            record.dropped, record.met = pick.dropped.get(record.index), pick.met.get(record.index)
            if compact and record.index not in finalists and (record.dropped or record.met):
                record.stages, record.aggregate = [], None
        status.recommendation = found
        if found.winner is not None:
            status.latest = {**(status.latest or {}), "leader": f"{found.winner.label} ({found.winner.cost.describe()})"}

    def _clock_goal(self, records: list[VariantRecord], step: Step) -> None:
        """The time left of a goal's pick, as steps: each stage run so far, this one, and one for every variant
        neither run nor dropped yet (as if every one were run)."""
        variants = self.experiment.variants()
        done = [goal_step(self.experiment, v, s.stage, s.duration_seconds)
                for v in variants for s in records[v.index].stages]
        ahead = [step] + [replace(step, variant=v) for v in variants
                          if v != step.variant and not records[v.index].stages and records[v.index].dropped is None]
        self.clock.steps = done + ahead
        self.clock.at(len(done))

    def _searched(self, record: VariantRecord) -> tuple[SearchResult, NextStage | None]:
        warmup = self.experiment.spec.warmup
        warmed = warmup.duration if warmup is not None and record.stages else 0.0
        return progress(self.experiment.spec.search, record.stages, warmed)

    def _clock_search(self, order: list[Variant], records: list[VariantRecord], step: Step) -> None:
        """The time left of a search, as steps: each stage run so far, then the current variant's stages to its
        typical count (doubling, then bisecting, none undecided), and as many for every variant after it."""
        search = self.experiment.spec.search
        typical = search.most_stages() // 2
        done = [search_step(self.experiment, v, s.stage, load_of(search, s), s.duration_seconds)
                for v in order for s in records[v.index].stages]
        position = order.index(step.variant)
        ahead = [step] * max(1, typical - len(records[step.variant.index].stages)) + \
            [replace(step, variant=v) for v in order[position + 1:] for _ in range(typical)]
        self.clock.steps = done + ahead
        self.clock.at(len(done))

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

    async def _run_and_record(self, step: Step, status: RunStatus, records: list[VariantRecord],
                              last: Callable[[], bool]) -> None:
        """Runs the step and writes its figures; after the variant's `last` step, also its headline row."""
        variant, record = step.variant, records[step.variant.index]
        await self._set(status, phase="Running", progress=_with_attempts(status, self._progress(step)),
                        message=f"running {step.label()}")
        measurement, retries = await self._run_step(step, status)
        result = await self._record(step, record, measurement, retries)
        if last():
            await self._headline(record, variant)
        if not step.searching:   # a search's stage numbers are of its own order, at loads of its own
            status.p99_by_stage = p99_pivot(records)
        p99 = result.latency.p99
        status.latest = {"p99Ms": None if p99 is None else round(p99, 1),   # for `kubectl get lx`
                         "redisPeakConnections": measurement.redis_peak_connections,
                         **({"bracket": record.search.bracket()} if record.search else {})}
        await self.on_update(status)

    def _progress(self, step: Step) -> Progress:
        """A warm-up's stage is the one finished before it, as the count of finished stages."""
        number = step.precedes - 1 if step.warmup else step.number
        return {"variant": f"{step.variant.index + 1}/{step.variants}",
                **({"repeat": f"{step.repeat}/{step.repeats}"} if step.repeats > 1 else {}),
                "stage": str(number) if step.searching else f"{number}/{step.stages}", **({"warmup": True} if step.warmup else {}),
                "injectors": step.stage.injectors, **self.clock.progress()}

    @staticmethod
    def _warmed_up(status: RunStatus, record: VariantRecord, warmup: Step) -> bool:
        """Whether the warm-up ran before an operator restart (a status before repeats said so per variant)."""
        return status.warmed_up == warmup.run_id or (record.warmed_up and warmup.repeat == 1
                                                            and warmup.precedes == 1)

    def _finished_step(self, variant: Variant, repeat: int, number: int) -> Step:
        spec = self.experiment.spec
        if spec.search is None and spec.goal is None:
            return stage_step(self.experiment, variant, repeat, number)
        stage = next(s for s in self.records[variant.index].stages if s.stage == number)
        if spec.goal is not None:
            return goal_step(self.experiment, variant, number, stage.duration_seconds)
        return search_step(self.experiment, variant, number, load_of(spec.search, stage), stage.duration_seconds)

    async def _artifacts(self, variant: Variant, number: int, repeats: list[int]) -> list[Artifact]:
        """The artifacts of the variant's stage `number` in each of `repeats`: kept since they ran, or read back."""
        missing = [self._finished_step(variant, r, number) for r in repeats
                   if (variant.index, r, number) not in self.artifacts]
        for done, artifact in zip(missing, await self.backend.saved_artifacts(missing) if missing else []):
            self.artifacts[done.key] = artifact
        return [Artifact.from_artifact(self.artifacts[(variant.index, r, number)]) for r in repeats]

    async def _record(self, step: Step, record: VariantRecord, measurement: StageMeasurement,
                      retries: tuple[Retry, ...]) -> StageResult:
        """Adds the step's figures to the variant's record: the stage's result, merged with its other repeats,
        the repeat's headline, and the variant's aggregate over everything; returns the step's own result."""
        # the intervals' bootstrap takes a second or two of CPU: off the event loop
        result = replace(await asyncio.to_thread(stage_result, self.experiment, step.number, step.stage,
                                                 measurement), retries=retries)
        if result.requests and result.latency.n == 0:   # never again quietly: see compat.runner_of
            raise ExperimentFailed("ResultsLost", f"{step.label()}: Locust counted {result.requests:,} requests, but "
                                                  f"no injector's histograms reached its master")
        self.artifacts[step.key] = measurement.artifact
        variant, number = step.variant, step.number
        before = next((s for s in record.stages if s.stage == number), None)
        if step.repeats > 1:
            this = record.repeat(step.repeat)
            this.stages = sorted([*this.stages, result.headline()], key=lambda h: h.stage)
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
            record.search = self._searched(record)[0]
        elif spec.objective is not None:
            record.judged, record.capacity = True, capacity(record.stages)
        return result

    async def _headline(self, record: VariantRecord, variant: Variant) -> None:
        """The variant's row over all its stages and repeats so far."""
        every = [a for s in record.stages for a in await self._artifacts(variant, s.stage, record.repeats_of(s.stage))]
        whole = [r.aggregate for r in record.repeats if r.aggregate is not None]
        record.aggregate = await asyncio.to_thread(variant_aggregate, record.stages, every, whole)

    async def _headlines_so_far(self, records: list[VariantRecord], status: RunStatus) -> None:
        """A run that ends early keeps the rows of the stages it finished."""
        for record, variant in zip(records, self.experiment.variants()):
            if record.stages and record.aggregate is None:
                with contextlib.suppress(Exception):   # the run's own failure is what it reports
                    await self._headline(record, variant)

    @contextlib.asynccontextmanager
    async def _refreshing(self, status: RunStatus):
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
