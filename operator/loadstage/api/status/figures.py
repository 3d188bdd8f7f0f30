"""A stage's figures as the status holds them: latency percentiles, each method's row, the confidence intervals,
what its tasks raised, and a verdict by spec.slo or spec.thresholds; each type beside its declaration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from loadstage.api.schema import Bool, Field, Int, ListOf, Num, Obj, OpenPair, Pair, Str, Written, omit_empty, omit_none
from loadstage.api.types import PERCENTILES

FIGURES = (*PERCENTILES, "mean", "rps", "errorRate")   # the figures an interval is given for
OUTCOMES = ("Pass", "Fail", "Near", "Undecided")
VERDICT_REASONS = ("Unsteady",)


@dataclass(frozen=True)
class Latency(Written):
    """Nearest-rank percentiles and the maximum, in ms, of `n` requests. A p99.9 of fewer than 1,000
    requests is close to the maximum: `p999_reliable` says so (None where an old status has no flag)."""
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    n: int | None = None
    p999_reliable: bool | None = None

    def percentile(self, key: str) -> float | None:
        value: float | None = getattr(self, key)
        return value


def _percentile(name: str) -> Num:
    return Num(f"The {name} percentile, ms (nearest rank of the merged histogram).", nullable=True)


LATENCY = Obj(Latency, "Latency percentiles of the merged response-time histogram, ms.", {
    **{p: _percentile(p.replace("p", "").replace("999", "99.9") + "th") for p in PERCENTILES},
    "max": Num("The slowest request, ms.", nullable=True),
    "n": Int("Requests in the histogram.", nullable=True),
    "p999Reliable": Bool("Whether n is at least 1,000: with fewer, the p99.9 is close to the maximum.",
                         nullable=True),
})


@dataclass(frozen=True)
class MethodFigures(Written):
    """What the status keeps of a method: its mean (the ONS breakdown's) and its p99."""
    requests: int
    failures: int
    mean_ms: float | None
    p99_ms: float | None


METHOD = Obj(MethodFigures, "One HTTP method's requests.", {
    "requests": Int("Requests of this method."),
    "failures": Int("Of which failed."),
    "meanMs": Num("Their mean latency, ms.", nullable=True),
    "p99Ms": Num("Their p99 latency, ms.", nullable=True),
}, required=("requests", "failures"))


Bounds = Sequence[float]   # [low, high]: a list as written, a tuple as read


class Intervals(TypedDict, total=False):
    """What results.intervals finds: a [low, high] per figure, and how."""
    p50: Bounds | None
    p90: Bounds | None
    p95: Bounds | None
    p99: Bounds | None
    p999: Bounds | None
    mean: Bounds | None
    rps: Bounds | None
    errorRate: Bounds | None
    confidence: float
    method: str
    blocks: int
    blockSeconds: float
    warning: str
    resamples: int
    repeats: int


def bounds_of(intervals: Intervals, figure: str) -> Bounds | None:
    """A figure's interval, by its name (one of FIGURES)."""
    found: Bounds | None = intervals.get(figure)   # type: ignore[assignment]
    return found


def with_bounds(intervals: Intervals, figure: str, bounds: Bounds) -> None:
    intervals[figure] = bounds   # type: ignore[literal-required]


_FIGURE_NAMES = {"mean": "mean latency, ms", "rps": "requests a second", "errorRate": "error rate, a fraction"}
INTERVALS = Obj(Intervals, "Confidence intervals of the figures: resampled blocks of seconds within a stage, or "
                           "the spread between repeats.", {
    **{f: Pair(f"The interval of the {_FIGURE_NAMES.get(f, f + ', ms')}: [low, high].", nullable=True)
       for f in FIGURES},
    "confidence": Num("The intervals' confidence level, e.g. 0.95.", above=0, below=1),
    "method": Str("How they were found: bootstrap (of blocks of seconds within the stage), or repeats (the "
                  "spread between them)."),
    "blocks": Int("The blocks of seconds resampled."),
    "blockSeconds": Num("Each block's length, seconds."),
    "warning": Str("Why the intervals may be too narrow or too wide."),
    "resamples": Int("Bootstrap resamples drawn."),
    "repeats": Int("Between repeats: how many."),
}, required=("confidence", "method"), nullable=True)


@dataclass(frozen=True)
class ExceptionCount:
    message: str
    count: int


EXCEPTION_COUNT = Obj(ExceptionCount, "One exception message and how often it was raised.", {
    "message": Str("The exception, e.g. ValueError: no survey."),
    "count": Int("How often."),
}, required=("message", "count"))


@dataclass(frozen=True)
class TaskExceptions(Written):
    """What the stage's tasks raised (Locust logs it and goes on): how many, and the most frequent messages."""
    count: int
    top: tuple[ExceptionCount, ...]    # most frequent first

    def __add__(self, other: TaskExceptions | None) -> TaskExceptions:
        if other is None:
            return self
        counts: dict[str, int] = {}
        for said in (*self.top, *other.top):
            counts[said.message] = counts.get(said.message, 0) + said.count
        top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:max(len(self.top), len(other.top))]
        return TaskExceptions(self.count + other.count, tuple(ExceptionCount(m, n) for m, n in top))

    def describe(self) -> str:
        """'345 exception(s) in tasks, most often ValueError: no survey (345)'."""
        return f"{self.count:,} exception(s) in tasks, most often " + \
            "; ".join(f"{said.message} ({said.count})" for said in self.top)


TASK_EXCEPTIONS = Obj(TaskExceptions, "Exceptions the tasks raised (each counts as a failed request).", {
    "count": Int("How many in all."),
    "top": Field(ListOf("The most frequent messages, most frequent first.", EXCEPTION_COUNT), absent=()),
}, required=("count",), nullable=True)


@dataclass(frozen=True)
class Objective(Written):
    """One objective of spec.slo held against a stage: its figure, that figure's interval, and whether the
    whole interval holds it (True), breaks it (False) or straddles it (None); `near`: straddling it, the figure is
    decided to lie within the tolerance (slo.tolerance) of its limit."""
    name: str                     # p99, errorRate, minRps
    limit: float                  # ms, a fraction, or req/s
    value: float | None
    interval: tuple[float, float | None] | None   # high None: bounded from below only (too few requests)
    holds: bool | None
    near: bool = False


OBJECTIVE = Obj(Objective, "One objective of spec.slo held against a figure's interval.", {
    "name": Str("The figure: a percentile (p50 ... p999), errorRate or minRps."),
    "limit": Num("Its objective: ms, a fraction, or req/s."),
    "value": Num("The figure measured.", nullable=True),
    "interval": OpenPair("The figure's interval, [low, high] (high null: the requests so far bound it from below "
                         "only: too few for its percentile).", nullable=True),
    "holds": Bool("True: the whole interval meets the objective; false: it breaks it; null: undecided.",
                  nullable=True),
    "near": Field(Bool("Its interval straddles the limit but lies within slo.tolerance of it: the figure is at the "
                       "objective."), absent=False, omit=omit_empty),
}, required=("name", "limit"))


@dataclass(frozen=True)
class Verdict(Written):
    """A stage held against spec.thresholds (pass or fail by its figures) or spec.slo (by their intervals, so
    that a stage may also be undecided: `undecided` names the objectives its intervals straddle)."""
    passed: bool
    violations: tuple[str, ...] = ()
    undecided: tuple[str, ...] = ()
    objectives: tuple[Objective, ...] = ()
    near: tuple[str, ...] = ()            # the objectives decided at their limits, within slo.tolerance
    reason: str | None = None             # Unsteady: failed for a state still not steady at the stage's end
    settle_seconds: int | None = None     # cut from its start before the verdict (results.steady)
    confidence: float | None = None       # of its objectives' intervals
    batch_seconds: float | None = None    # the batches its intervals were drawn over (results.batch_means)
    batches: int | None = None

    @property
    def outcome(self) -> str:
        if self.passed:
            return "Pass"
        if self.violations or self.reason:
            return "Fail"
        if self.near and not self.undecided:
            return "Near"
        return "Undecided" if self.undecided else "Fail"

    def summary(self) -> str:
        """'Near: p99 29.6 [28.8, 30.9] ms (99.4%)': the outcome, by the objective that decided it (one broken, else
        one at its limit, else one open, else the first), its interval and their confidence."""
        deciding = [o for o in self.objectives if o.holds is False] or [o for o in self.objectives if o.near] or \
            [o for o in self.objectives if o.holds is None] or list(self.objectives)
        if not deciding:
            return self.outcome
        o = deciding[0]

        def shown(v: float | None) -> str:
            return "?" if v is None else f"{v:.2%}" if o.name == "errorRate" else f"{v:.4g}"
        unit = "" if o.name == "errorRate" else " req/s" if o.name == "minRps" else " ms"
        interval = f" [{shown(o.interval[0])}, {shown(o.interval[1])}]" if o.interval else " (no interval)"
        confidence = f" ({self.confidence:.1%})" if self.confidence is not None and o.interval else ""
        unsteady = ", unsteady" if self.reason else ""
        return f"{self.outcome}{unsteady}: {o.name} {shown(o.value)}{interval}{unit}{confidence}"


def _without_objectives(value: object, verdict: Verdict) -> bool:
    return not verdict.objectives


VERDICT = Obj(Verdict, "The stage held against spec.thresholds, or spec.slo.", {
    "passed": Bool("Whether the stage passed."),
    "violations": Field(ListOf("The limits it broke, in words.", Str("A limit broken.")), absent=()),
    "outcome": Field(Str("With spec.slo: Pass, Fail, Near (at the objective, within slo.tolerance) or Undecided.",
                         enum=OUTCOMES), derived=True,
                     omit=_without_objectives),
    "undecided": Field(ListOf("With spec.slo: the objectives whose intervals straddle them.",
                              Str("An objective.")), absent=(), omit=_without_objectives),
    "objectives": Field(ListOf("With spec.slo: each objective against its figure.", OBJECTIVE), absent=(),
                        omit=_without_objectives),
    "near": Field(ListOf("With spec.slo: the objectives decided to lie at their limits (within slo.tolerance).",
                         Str("An objective.")), absent=(), omit=omit_empty),
    "reason": Field(Str("Unsteady: failed because latency was still climbing at the stage's end (Mann-Kendall, "
                        "one-sided 1%, and a rise of at least 10%, over its settled batches): not a steady state.",
                        enum=VERDICT_REASONS, nullable=True), omit=omit_none),
    "settleSeconds": Field(Int("With spec.slo: the seconds cut from the stage's start before its verdict, its "
                               "settling period (MSER-5); the stage's figures and histograms keep them.",
                               nullable=True), omit=omit_none),
    "confidence": Field(Num("With spec.slo: the confidence of its objectives' intervals (95%, or its looks' "
                            "share of it).", nullable=True, above=0, below=1), omit=omit_none),
    "batchSeconds": Field(Num("With spec.slo: the length of the batches of settled seconds its intervals were "
                              "drawn over (batch means: grown until their means are not autocorrelated).",
                              nullable=True), omit=omit_none),
    "batches": Field(Int("With spec.slo: how many batches (at least 10; fewer, or still autocorrelated: no "
                         "interval, and no Pass or Fail).", nullable=True), omit=omit_none),
}, required=("passed",), nullable=True)


@dataclass(frozen=True)
class Headline(Written):
    """The figures of one repeat, of one stage or (stage None) of the variant's whole ladder: what the studies
    tabulate per run, and what the between-repeat intervals are of."""
    stage: int | None
    requests: int
    failures: int
    error_rate: float | None
    rps: float | None
    mean_ms: float | None
    latency: Latency
    exceptions: int = 0     # raised by tasks, each a failed request in error_rate

    def figure(self, name: str) -> float | None:
        """One of FIGURES."""
        others = {"mean": self.mean_ms, "rps": self.rps, "errorRate": self.error_rate}
        return others[name] if name in others else self.latency.percentile(name)


def _counted(headline: Headline, raw: Mapping[str, Any], path: str) -> Headline:
    return replace(headline, latency=replace(headline.latency, n=headline.requests))


class HeadlineLatency(Obj):
    """A headline's latency: its percentiles only (its n is the headline's requests)."""

    def __init__(self) -> None:
        super().__init__(dict, "Latency percentiles, ms.", {p: LATENCY.fields[p] for p in PERCENTILES})

    def read(self, value: Any, path: str) -> Any:
        found = super().read(value, path)
        return Latency(**(found or {}))

    def dump(self, value: Any, path: str) -> Any:
        return super().dump({p: value.percentile(p) for p in PERCENTILES}, path)


HEADLINE = Obj(Headline, "One repeat's figures, of one stage or of the whole ladder.", {
    "stage": Field(Int("The stage (absent: the whole ladder).", nullable=True), omit=omit_none),
    "requests": Int("Requests."),
    "failures": Int("Failed requests."),
    "exceptions": Field(Int("Of which exceptions raised by tasks."), absent=0, omit=omit_empty),
    "errorRate": Field(Num("failures / requests.", nullable=True), omit=omit_none),
    "rps": Field(Num("Requests a second.", nullable=True), omit=omit_none),
    "meanMs": Field(Num("Mean latency, ms.", nullable=True), omit=omit_none),
    "latencyMs": Field(HeadlineLatency(), attr="latency", absent=Latency()),
}, required=("requests", "failures"), nullable=True, on_read=_counted)
