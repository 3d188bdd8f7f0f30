"""spec.goal's answer as the status holds it: each variant's settings and cost, the variants that met the
objective, the one dropped and why, and the recommendation (status.recommendation); each type beside its
declaration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from loadstage.api.schema import Bool, Field, Int, ListOf, Num, Obj, OpenPair, Str, Written, omit_empty, omit_none
from loadstage.api.status.figures import OBJECTIVE, Objective
from loadstage.api.status.saturation import LIMITED_BY, LimitedBy

PICK_REASONS = ("Searching", "Found", "NonePassed")
COST_SOURCES = ("limit", "request", "measured")


class Settings(TypedDict, total=False):
    """A variant's settings: what its matrix chose, and the target's."""
    server: str
    interface: str
    pods: int
    workers: int | None
    threads: int | None
    workerClass: str | None
    cpu: str
    memory: str
    proxy: str
    socket: str


SETTINGS = Obj(Settings, "The variant's settings (each key of spec.matrix, and the target's).", {
    "server": Str("The server (spec.target.server)."),
    "interface": Str("The interface the server serves the app with, where it serves several: wsgi or asgi."),
    "pods": Int("Target pods."),
    "workers": Int("Worker processes of each pod, where the server has workers.", nullable=True),
    "threads": Int("Threads of each worker (an ASGI app's sync thread pool), where the server has them.",
                   nullable=True),
    "workerClass": Str("The server's worker class, where it has one.", nullable=True),
    "cpu": Str("Each target pod's CPU limit."),
    "memory": Str("Each target pod's memory limit."),
    "proxy": Str("The front proxy, where there is one."),
    "socket": Str("How the proxy reaches the server: tcp or unix."),
})


@dataclass(frozen=True)
class Dropped(Written):
    """Why a variant of spec.goal is out of the running, and after how many of its stages (0: never run)."""
    after: int
    reason: str
    limited_by: LimitedBy | None = None   # at the stage that dropped it


DROPPED = Obj(Dropped, "With spec.goal: why the variant is out of the running.", {
    "after": Int("After how many of its stages (0: it never ran)."),
    "reason": Str("Why, in words."),
    "limitedBy": Field(LIMITED_BY, omit=omit_none),
}, required=("after", "reason"), nullable=True)


@dataclass(frozen=True)
class Cost(Written):
    """What a variant reserves: its pods x each one's CPU limit (or request), or its measured CPU where neither is
    set (`source`: limit, request or measured); its memory beside, not folded in."""
    cores: float | None
    source: str
    memory_bytes: int | None = None

    def describe(self) -> str:
        """'6 cores', '0.5 cores measured'."""
        cores = "? cores" if self.cores is None else f"{self.cores:g} core{'' if self.cores == 1 else 's'}"
        return cores + (" measured" if self.source == "measured" else "")


COST = Obj(Cost, "With spec.goal: what the variant reserves.", {
    "cores": Num("Its pods x each one's CPU limit (or request), cores; measured: its mean CPU over the stage's "
                 "settled seconds, or its peak where no reading lay within them.", nullable=True),
    "from": Field(Str("Where the cores come from: limit, request or measured.", enum=COST_SOURCES),
                  attr="source"),
    "memoryBytes": Int("Its pods x each one's memory limit (or request), bytes; beside the cores, not folded in.",
                       nullable=True),
}, required=("from",))


@dataclass(frozen=True)
class Candidate(Written):
    """A variant that met the objective: at the goal's load, its cost and its headroom (the least share by
    which a figure stays within its objective, from the deciding look's figures, of its first stage or its
    confirmation, whichever has less); with maximize, its cost and its capacity per core, [low, high] in req/s
    a core (its search's bracket over its cost; high may be None: it passed even at search.max)."""
    variant: int
    settings: Settings
    label: str
    cost: Cost
    headroom: float
    objectives: tuple[Objective, ...]
    per_core: tuple[float, float | None] | None = None
    confirmed: bool = False    # a second, fresh stage at the goal's load met the objective too
    limited_by: LimitedBy | None = None   # what came nearest its limit at its deciding stage

    @property
    def bounds(self) -> tuple[float, float | None]:
        """With maximize: its capacity per core, [low, high]."""
        assert self.per_core is not None, "a candidate of maximize has its capacity per core"
        return self.per_core

    @property
    def capacity_rps(self) -> float:
        """With maximize: what it serves at its bracket's low end, in req/s."""
        return (self.per_core[0] if self.per_core else 0.0) * (self.cost.cores or 0.0)


CANDIDATE = Obj(Candidate, "A variant that met the objective at the goal's load (or, with maximize, its capacity "
                           "per core).", {
    "variant": Int("Its index in status.variants."),
    "settings": SETTINGS,
    "label": Str("Its settings in words, e.g. workers=3 threads=4."),
    "cost": COST,
    "headroom": Num("The least share by which a figure stays within its objective, at the deciding look; with "
                    "a load, of its first stage or its confirmation, whichever has less."),
    "objectives": Field(ListOf("Each objective against its figure (of the stage its headroom is from).",
                               OBJECTIVE), absent=()),
    "perCore": Field(OpenPair("With maximize: its capacity per core, [low, high] req/s a core (high null: it "
                             "passed even at search.max).", nullable=True), attr="per_core", omit=omit_empty),
    "confirmed": Field(Bool("With a load: a second, fresh stage at the goal's load met the objective too (the "
                            "winner's, and an equivalent runner-up's, before the pick is Found)."), absent=False,
                       omit=omit_empty),
    "limitedBy": Field(LIMITED_BY, omit=omit_none, description="At its deciding stage, which met the objective: "
                                                               "the resource past its threshold, if any (else "
                                                               "Unknown, with its signals)."),
}, required=("variant", "settings", "label", "cost", "headroom"), nullable=True)


@dataclass(frozen=True)
class Margin(Written):
    """The runner-up against the winner, relatively (its figure / the winner's - 1), with an interval: a
    latency's, from each stage's bootstrap interval at `confidence` (results.differences); capacity per core
    ("perCore"), from each search's bracket (`confidence` None; a bound None where a bracket is open)."""
    figure: str
    relative: float
    low: float | None
    high: float | None
    confidence: float | None

    def describe(self) -> str:
        """"the runner-up's p99 is +38% [+12%, +70%] of the winner's (95%)"."""
        def bound(value: float | None, open_end: str) -> str:
            return open_end if value is None else f"{value:+.0%}"
        span = f"[{bound(self.low, '?')}, {bound(self.high, '?')}]"
        if self.figure == "perCore":
            return f"the runner-up serves {self.relative:+.0%} {span} per core of the winner's (from their brackets)"
        level = "" if self.confidence is None else f" ({self.confidence:.0%})"
        return f"the runner-up's {self.figure} is {self.relative:+.0%} {span} of the winner's{level}"


MARGIN = Obj(Margin, "The runner-up against the winner: its figure over the winner's, minus 1.", {
    "figure": Str("The figure compared: a percentile, or perCore."),
    "relative": Num("The runner-up's figure / the winner's - 1."),
    "low": Num("The interval's low end (null: open).", nullable=True),
    "high": Num("The interval's high end (null: open).", nullable=True),
    "confidence": Num("The interval's confidence (null: from the searches' brackets).", nullable=True),
}, required=("figure", "relative"), nullable=True)


@dataclass(frozen=True)
class Recommendation(Written):
    """spec.goal's answer so far: the winner (None until one passes), the runner-up, and why the pick ended
    (Found, NonePassed) or Searching; `order` is the order the variants ran in (their indices)."""
    goal: str
    winner: Candidate | None
    runner_up: Candidate | None
    order: tuple[int, ...]
    reason: str
    sentence: str
    front: tuple[Candidate, ...] = ()   # with maximize: no other variant costs less and serves more
    margin: Margin | None = None
    equivalent: tuple[int, ...] = ()    # variants of the winner's cost within slo.tolerance of it: goal.prefer chose

    @property
    def variant(self) -> int | None:
        return None if self.winner is None else self.winner.variant

    @property
    def settings(self) -> Settings | None:
        return None if self.winner is None else self.winner.settings

    @property
    def margin_cores(self) -> float | None:
        if self.winner is None or self.runner_up is None or self.winner.cost.cores is None \
                or self.runner_up.cost.cores is None:
            return None
        return round(self.runner_up.cost.cores - self.winner.cost.cores, 3)


RECOMMENDATION = Obj(Recommendation, "With spec.goal: the cheapest variant that met spec.slo at the goal's load "
                                     "(or the most per core), and the runner-up.", {
    "goal": Str("The goal, in words."),
    "reason": Str("Found, NonePassed, or Searching while variants are left to run.", enum=PICK_REASONS),
    "sentence": Str("The answer in words, as the reports print it."),
    "variant": Field(Int("The winner's index in status.variants.", nullable=True), derived=True),
    "settings": Field(Obj(Settings, "The winner's settings.", SETTINGS.wire, nullable=True), derived=True),
    "winner": CANDIDATE,
    "runnerUp": Field(CANDIDATE, attr="runner_up", description="The runner-up: the next cheapest that met it."),
    "marginCores": Field(Num("The runner-up's cores minus the winner's.", nullable=True), derived=True),
    "margin": MARGIN,
    "order": Field(ListOf("The order the variants ran in: their indices.", Int("An index.")), absent=()),
    "front": Field(ListOf("With maximize: the variants no other costs less than and serves more than.",
                          CANDIDATE.not_null()), absent=(), omit=omit_empty),
    "equivalent": Field(ListOf("Variants that met the objective at the winner's cost with figures within "
                               "slo.tolerance of the winner's: no better or worse than it beyond noise; goal.prefer "
                               "chose among them.", Int("An index in status.variants.")), absent=(),
                        omit=omit_empty),
}, required=("goal", "reason", "sentence"), nullable=True)
