"""A variant as the status holds it (status.variants[]): its settings, its stages, what they add up to, each
repeat's headline, its capacity, its search, and its place in a pick; and the p99 pivot across variants; each
type beside its declaration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadstage.api.schema import (
    Bool,
    Field,
    Int,
    ListOf,
    MapOf,
    Num,
    Obj,
    ShapeError,
    Str,
    Written,
    omit_empty,
    omit_none,
)
from loadstage.api.status.figures import (
    HEADLINE,
    INTERVALS,
    LATENCY,
    METHOD,
    Headline,
    Intervals,
    Latency,
    MethodFigures,
)
from loadstage.api.status.pick import CANDIDATE, COST, DROPPED, SETTINGS, Candidate, Cost, Dropped, Settings
from loadstage.api.status.saturation import LIMITED_BY, LimitedBy
from loadstage.api.status.stage import STAGE, StageResult
from loadstage.api.types import SEARCH_LOADS

SEARCH_REASONS = ("Searching", "Found", "Near", "CeilingPassed", "FloorFailed", "InjectorBound", "Exhausted")


@dataclass(frozen=True)
class VariantAggregate(Written):
    """A variant over all its stages: percentiles of the merged histograms, totals, its Redis peak."""
    stages: int
    requests: int
    failures: int
    error_rate: float | None
    latency: Latency
    by_method: dict[str, MethodFigures]
    redis_peak_connections: int | None
    corrected_latency: Latency | None = None
    intervals: Intervals | None = None
    trimmed_mean: dict[str, float] | None = None   # over the repeats, without the highest and lowest
    exceptions: int = 0                            # raised by tasks in all its stages


AGGREGATE = Obj(VariantAggregate, "The variant over all its stages: percentiles of the merged histograms, totals, "
                                  "its Redis peak.", {
    "stages": Int("Stages it merges."),
    "requests": Int("Requests in all."),
    "failures": Int("Failed requests in all."),
    "errorRate": Num("failures / requests.", nullable=True),
    "latencyMs": Field(LATENCY, attr="latency"),
    "byMethod": Field(MapOf("Each HTTP method's requests, by method.", METHOD), absent={}),
    "redisPeakConnections": Int("The most Redis clients connected at once in any stage.", nullable=True),
    "correctedLatencyMs": Field(LATENCY, attr="corrected_latency", omit=omit_none,
                                description="With pacing: latency from each request's intended start, ms."),
    "intervals": Field(INTERVALS, omit=omit_empty),
    "trimmedMean": Field(MapOf("Over the repeats, each figure's mean without the highest and the lowest.",
                               Num("The figure's trimmed mean."), nullable=True), omit=omit_empty),
    "exceptions": Field(Int("Exceptions its tasks raised in all its stages."), absent=0, omit=omit_empty),
}, required=("stages", "requests", "failures", "latencyMs"), nullable=True)


@dataclass
class RepeatRecord(Written):
    """One repeat of a variant's ladder: each finished stage's headline, and the ladder's once it is whole."""
    repeat: int
    stages: list[Headline] = field(default_factory=list)
    aggregate: Headline | None = None


REPEAT = Obj(RepeatRecord, "One repeat of the variant's ladder (spec.repeats above 1).", {
    "repeat": Int("The repeat's number, from 1."),
    "stages": Field(ListOf("Each finished stage's headline.", HEADLINE), absent=[]),
    "aggregate": Field(HEADLINE, omit=omit_none, description="The whole ladder's headline, once it is whole."),
}, required=("repeat",))


@dataclass(frozen=True)
class Capacity(Written):
    """The knee: the last stage before the first that failed a threshold, injector-bound stages excluded."""
    stage: int
    injectors: int
    users: int | None
    rps: float | None
    first_failed_stage: int | None
    limited_by: LimitedBy | None = None   # at the first stage that failed


CAPACITY = Obj(Capacity, "With thresholds or an SLO: the knee, the last stage before the first that failed "
                         "(null: none qualified).", {
    "stage": Int("The last stage that passed."),
    "injectors": Int("Its injectors."),
    "users": Int("Its users.", nullable=True),
    "rps": Num("Its requests a second.", nullable=True),
    "firstFailedStage": Int("The first stage that failed (null: none did).", nullable=True),
    "limitedBy": Field(LIMITED_BY, omit=omit_none),
}, required=("stage", "injectors"), nullable=True)


@dataclass(frozen=True)
class Contradiction(Written):
    """A load whose stages disagreed, or that passed above a lower load that failed."""
    load: int
    outcomes: tuple[str, ...]     # its decided stages', in order: Pass or Fail


CONTRADICTION = Obj(Contradiction, "A load whose stages disagreed, or that passed above a lower load that failed.", {
    "load": Int("The load."),
    "outcomes": ListOf("Its decided stages' outcomes, in the order they ran.", Str("Pass or Fail.",
                                                                                 enum=("Pass", "Fail"))),
}, required=("load", "outcomes"))


@dataclass(frozen=True)
class SearchResult(Written):
    """A variant's capacity search so far: the bracket [passed, failed] in the unit of `load`, with the req/s
    measured at each end, or the load found at the objective (`near`); `reason` says why it ended, or Searching."""
    load: str
    passed: int | None
    failed: int | None
    passed_rps: float | None
    failed_rps: float | None
    resolution: float | None    # (failed - passed) / passed, once both are known
    stages: int
    load_seconds: float         # the load time it spent, warm-up included
    reason: str
    near: int | None = None     # the load decided at the objective, within slo.tolerance (reason Near)
    near_rps: float | None = None
    confirmed: bool = False     # Found, its pass end passed by two stages or more, its fail end failed
    contradictions: tuple[Contradiction, ...] = ()
    limited_by: LimitedBy | None = None   # at its fail end (or its Near load)

    @property
    def done(self) -> bool:
        return self.reason != "Searching"

    def bracket(self) -> str:
        """'40-48 users (612-690 req/s)', '>= 2000 users', '< 10 users', 'about 44 users (650 req/s)'."""
        def rps(value: float | None) -> str:
            return "?" if value is None else f"{value:,.0f}"
        if self.near is not None:
            return f"about {self.near:,} {self.load} ({rps(self.near_rps)} req/s)"
        if self.passed is None:
            return "none passed" if self.failed is None else f"< {self.failed:,} {self.load}"
        if self.failed is None:
            return f">= {self.passed:,} {self.load} ({rps(self.passed_rps)} req/s)"
        return f"{self.passed:,}-{self.failed:,} {self.load} ({rps(self.passed_rps)}-{rps(self.failed_rps)} req/s)"


def _bracket_in_order(search: SearchResult, raw: Mapping[str, Any], path: str) -> SearchResult:
    if search.passed is not None and search.failed is not None and search.passed >= search.failed:
        raise ShapeError(path, f"its pass ({search.passed}) must be below its fail ({search.failed})")
    near = search.near
    if near is not None and ((search.passed is not None and near <= search.passed) or
                             (search.failed is not None and near >= search.failed)):
        raise ShapeError(path, f"its load at the objective ({search.near}) must lie between its pass and its fail")
    return search


SEARCH = Obj(SearchResult, "With spec.search: the variant's capacity search so far, as a bracket.", {
    "load": Str("What the search varies: injectors, users or rps.", enum=SEARCH_LOADS),
    "pass": Field(Int("The highest load that passed (null: none yet).", nullable=True), attr="passed"),
    "fail": Field(Int("The lowest load above it that failed (null: none yet).", nullable=True), attr="failed"),
    "passRps": Field(Num("Requests a second measured at the pass end.", nullable=True), attr="passed_rps"),
    "failRps": Field(Num("Requests a second measured at the fail end.", nullable=True), attr="failed_rps"),
    "resolution": Num("(fail - pass) / pass, once both are known.", nullable=True),
    "stages": Int("Stages it ran."),
    "loadSeconds": Num("The load time it spent, warm-up included, seconds."),
    "reason": Str("Searching; or why it ended: Found (its bracket within its resolution, its pass "
                  "end confirmed), Near (a load decided at the objective, within slo.tolerance), CeilingPassed (passed "
                  "at search.max), FloorFailed (failed at search.from), InjectorBound, or Exhausted (it ran the "
                  "most stages a search may before its bracket was confirmed: its stages kept contradicting each "
                  "other).", enum=SEARCH_REASONS),
    "near": Field(Int("The load decided at the objective, within slo.tolerance (reason Near).", nullable=True),
                  omit=omit_none),
    "nearRps": Field(Num("Requests a second measured there.", nullable=True), attr="near_rps", omit=omit_none),
    "confirmed": Field(Bool("Found, and the bracket's pass end confirmed: a second, fresh stage at it passed too "
                            "(a load that failed any stage has failed: no pass outweighs it)."), absent=False,
                       omit=omit_empty),
    "contradictions": Field(ListOf("The loads whose stages disagreed (each a fail), or that passed above a lower "
                                   "load that failed: where the bracket moved back.", CONTRADICTION), absent=(),
                            omit=omit_empty),
    "limitedBy": Field(LIMITED_BY, omit=omit_none),
}, required=("load", "stages", "loadSeconds", "reason"), nullable=True, on_read=_bracket_in_order)


@dataclass(frozen=True)
class PivotRow(Written):
    """The ONS study's "99th percentile timings per load stage": one stage, one p99 per variant."""
    stage: int
    injectors: int
    users: int | None
    p99_ms_by_variant: tuple[float | None, ...]


PIVOT_ROW = Obj(PivotRow, "One stage of the ladder: its p99 per variant.", {
    "stage": Int("Stage number."),
    "injectors": Int("Injectors of the stage."),
    "users": Int("Users of the stage.", nullable=True),
    "p99MsByVariant": ListOf("p99 in ms, by variant (null: not run).", Num("A p99, ms.", nullable=True)),
}, required=("stage", "injectors", "p99MsByVariant"))


@dataclass
class VariantRecord(Written):
    """One variant in the status: its settings, its finished stages, and what they add up to. `judged`:
    the experiment has thresholds, so the record has a capacity (which may be None: no stage qualified)."""
    index: int
    settings: Settings
    stages: list[StageResult] = field(default_factory=list)
    warmed_up: bool = False
    aggregate: VariantAggregate | None = None
    judged: bool = False
    capacity: Capacity | None = None
    repeats: list[RepeatRecord] = field(default_factory=list)   # with spec.repeats > 1: each repeat's own
    search: SearchResult | None = None    # with spec.search
    dropped: Dropped | None = None        # with spec.goal
    cost: Cost | None = None              # with spec.goal, once known
    met: Candidate | None = None          # with spec.goal: it met the objective at the goal's load

    def capacity_stage(self) -> StageResult | None:
        """The stage its capacity at the objective was measured at: a ladder's last passing stage, or a search's
        pass end (its Near load where it ended at the objective); None where it has none."""
        if self.capacity is not None:
            return next((s for s in self.stages if s.stage == self.capacity.stage), None)
        search = self.search
        if search is None or (search.passed is None and search.near is None):
            return None
        at = search.near if search.near is not None else search.passed
        return next((s for s in reversed(self.stages) if s.offered() == at), None)

    def repeat(self, number: int) -> RepeatRecord:
        while len(self.repeats) < number:
            self.repeats.append(RepeatRecord(len(self.repeats) + 1))
        return self.repeats[number - 1]

    def repeats_of(self, stage: int) -> list[int]:
        """The repeats in which the status holds the stage."""
        if not self.repeats:
            return [1] if any(s.stage == stage for s in self.stages) else []
        return [r.repeat for r in self.repeats if any(h.stage == stage for h in r.stages)]

    def done(self, repeat: int, stage: int) -> bool:
        return repeat in self.repeats_of(stage)


def _judged(record: VariantRecord, raw: Mapping[str, Any], path: str) -> VariantRecord:
    record.judged = "capacity" in raw
    return record


def _unjudged(value: object, record: VariantRecord) -> bool:
    return not record.judged


VARIANT = Obj(VariantRecord, "One variant: its settings, its finished stages, and what they add up to.", {
    "index": Int("The variant's index, from 0, in the order of spec.matrix."),
    "settings": Field(SETTINGS, absent={}),
    "stages": Field(ListOf("Its finished stages (a search's and a pick's in the order they ran).", STAGE),
                    absent=[]),
    "warmedUp": Field(Bool("A status before repeats: the variant's warm-up ran."), attr="warmed_up", absent=False,
                      omit=omit_empty),
    "aggregate": Field(AGGREGATE, omit=omit_none),
    "capacity": Field(CAPACITY, omit=_unjudged),
    "repeats": Field(ListOf("With spec.repeats above 1: each repeat's headlines.", REPEAT), absent=[],
                     omit=omit_empty),
    "search": Field(SEARCH, omit=omit_none),
    "cost": Field(COST, omit=omit_none),
    "dropped": Field(DROPPED, omit=omit_none),
    "met": Field(CANDIDATE, omit=omit_none, description="With spec.goal: it met the objective at the goal's load."),
}, required=("index",), on_read=_judged)
