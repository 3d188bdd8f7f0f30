"""A played backend for the engine's tests: targets whose latency climbs past a knee that is known, each stage
SECONDS long with PER_SECOND requests a second, so that a stage has blocks and intervals; and the engine run on
it in virtual time."""

import asyncio
import copy
import dataclasses
import functools

import looptime
from locust.stats import RequestStats

from loadstage.api.status import RunStatus
from loadstage.api.types import Slo
from loadstage.engine.backend import BlockingBackend
from loadstage.engine.stages import StageEngine
from loadstage.locust.recorder import StageRecorder
from loadstage.locust.summary import build
from loadstage.results import intervals
from loadstage.results.judgement import figures_of
from loadstage.results.measurement import StageMeasurement
from loadstage.results.sequential import Looks
from loadstage.results.thresholds import held


def in_virtual_time(coroutine):
    """Runs the coroutine on an event loop whose clock only moves when every task waits (looptime): a stage of
    minutes takes no time and is exact."""
    with asyncio.Runner(loop_factory=lambda: looptime.new_event_loop(start=0)) as runner:
        return runner.run(coroutine)


SECONDS, PER_SECOND = 20, 60
SLO_MS = 30.0
AT_THE_OBJECTIVE = {4, 13}   # the seconds of a near load over the objective: its p99 just under it


def p99_at(load, knee):
    """The p99 the played target answers with at `load`: 10 ms up to the knee, then climbing steeply."""
    return 10.0 * max(1.0, load / knee) ** 3


@functools.cache
def _recorded(tops, arrivals, injectors):
    """What a master records of a played stage (its headline and artifact): PER_SECOND requests a second spread
    from half of that second's top to it, through Locust's stats and loadstage's recorder; the same stage once."""
    stats, recorder = RequestStats(), StageRecorder()
    for second, top in enumerate(tops):
        for i in range(PER_SECOND):
            ms = top * (0.5 + 0.5 * i / (PER_SECOND - 1))
            stats.log_request("GET", "/", ms, 10)
            recorder.record("GET", "/", ms, at=1_000_000.0 + second + i / PER_SECOND)
    recorder.keep_unsent()
    recorder.close_windows()
    if arrivals:
        recorder.own_arrivals = arrivals
    return build(stats, recorder, injectors=injectors)


class KneeBackend:
    """A target whose requests take p99_at(load) at the p99 (spread from half of it to its whole), over
    SECONDS seconds, so that the stage has blocks and intervals; `noisy` loads answer across the objective, `near`
    ones at it (a p99 within 5% of it either side)."""

    def __init__(self, knee, load="users", noisy=(), bound_at=None, ended_by=None, drops_at=None, near=()):
        self.knee, self.load, self.noisy, self.bound_at = knee, load, set(noisy), bound_at
        self.near = set(near)
        self.drops_at = drops_at   # an arrival rate from which the injectors' pools drop 2% of the arrivals
        self.ended_by, self.decisions = ended_by, []
        self.calls = []

    def prepare_variant(self, variant):
        self.calls.append(("prepare", variant.index))

    def finish_variant(self, variant):
        self.calls.append(("finish", variant.index))

    def discard_stage(self, step):
        pass

    def saved_artifacts(self, steps):
        return [{} for _ in steps]

    def run_stage(self, step):
        load = {"users": step.stage.users, "injectors": step.stage.injectors,
                "rps": step.stage.arrival_rate}[self.load] or 1   # a warm-up: injectors
        self.calls.append(("stage", step.variant.index, step.number, load, step.stage.duration))
        knee = self.knee[step.variant.index] if isinstance(self.knee, list) else self.knee
        # a noisy load is under the objective but for one slow second: whether a resample holds that second
        # decides its p99, so the interval straddles the objective
        tops = tuple((40.0 if second == 7 else 28.0) if load in self.noisy else
                     SLO_MS * (1.04 if second in AT_THE_OBJECTIVE else 0.96) if load in self.near else
                     p99_at(load, knee) for second in range(SECONDS))
        arrivals = None
        if step.stage.arrival_rate:
            arrived = step.stage.arrival_rate * SECONDS
            arrivals = (arrived, arrived // 50 if self.drops_at and load >= self.drops_at else 0)
        headline, artifact = copy.deepcopy(_recorded(tops, arrivals, step.stage.injectors))
        if self.bound_at is not None and load >= self.bound_at:
            headline["injectorBound"] = True
        if self.ended_by:   # as the master writes it with --slo: the look that ended the stage is its verdict
            looks = Looks.schedule(step.stage.duration)
            found = intervals.of_artifacts([artifact["blocks"]], seed="look", confidence=looks.confidences[1])
            objectives = held(Slo(None, None, None, SLO_MS / 1000, None, None), figures_of(artifact["blocks"]), found)
            headline.update(endedBy=self.ended_by, looks=2, elapsedSeconds=float(SECONDS),
                            decision={"atSeconds": 12.0, "confidence": looks.confidences[1],
                                      "objectives": [o.to_status() for o in objectives]})
            self.decisions.append(headline["decision"])
        return StageMeasurement(summary=headline, artifact=artifact, started_at="t0", finished_at="t1")


class RateBackend(KneeBackend):
    """Serves min(load, knee) x 2 req/s at a stage, so that its capacity, and its capacity per core, follow its
    knee."""

    def run_stage(self, step):
        measured = super().run_stage(step)
        knee = self.knee[step.variant.index]
        summary = {**measured.summary, "rps": float(2 * min(step.stage.users or 1, knee))}
        return dataclasses.replace(measured, summary=summary)


def typed(status):
    """A status the engine resumes: as a test keeps it (a write, a dict), read as the operator reads one."""
    return status if status is None or isinstance(status, RunStatus) else RunStatus.read(status)


def run(exp, backend, status=None):
    writes = []

    async def record(s):
        writes.append(s.to_status())
    in_virtual_time(StageEngine(exp, BlockingBackend(backend), on_update=record).run(typed(status)))
    return writes


def without_wall_clock(value):
    """A status without what the played stages time on the real clock: their rates, and Little's law and the
    evidence sentences that are drawn from them."""
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items()
                if not k.endswith(("Rps", "rps")) and k not in ("inFlight", "evidence")}
    return [without_wall_clock(v) for v in value] if isinstance(value, list) else value


def stages_run(backend):
    return [(c[3], c[4]) for c in backend.calls if c[0] == "stage"]
