"""One stage's result as the status holds it (status.variants[].stages[]): its figures, the target during it
(status.target), its injectors, and the attempts it took; each type beside its declaration."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from loadstage.api.schema import Bool, Field, Int, ListOf, MapOf, Node, Num, Obj, Str, Written, omit_empty, omit_none
from loadstage.api.status.figures import (
    INTERVALS,
    LATENCY,
    METHOD,
    TASK_EXCEPTIONS,
    VERDICT,
    Headline,
    Intervals,
    Latency,
    MethodFigures,
    TaskExceptions,
    Verdict,
)
from loadstage.api.status.saturation import SATURATION, Saturation
from loadstage.api.status.target import TARGET, TargetFigures

ENDED_BY = ("Decided", "Breached", "MaxDuration", "Duration", "Requests")
RETRY_REASONS = ("StageDisrupted", "RedisLost", "ArtifactUnreadable")


@dataclass(frozen=True)
class LostInjector(Written):
    injector: str
    at: str
    cause: str


class LostInjectors(ListOf):
    """The lost injectors of a stage, written with their count: {count, injectors: [...]}."""

    def __init__(self, description: str, item: Node):
        super().__init__(description, item)
        self.count = Int("How many injectors were lost.")
        self.holder = Obj(dict, description, {"injectors": ListOf(description, item)})

    def read(self, value: Any, path: str) -> Any:
        return tuple(self.holder.read(value, path).get("injectors") or ())

    def dump(self, value: Any, path: str) -> Any:
        return {"count": len(value), "injectors": super().dump(value, f"{path}.injectors")}

    def openapi(self) -> dict[str, Any]:
        return self._with_meta({"type": "object", "properties": {"count": self.count.openapi(),
                                                                 "injectors": super().openapi()}})


LOST_INJECTOR = Obj(LostInjector, "An injector lost during the stage.", {
    "injector": Str("Its pod or process."),
    "at": Str("When it was lost."),
    "cause": Str("Why."),
}, required=("injector", "at", "cause"))


@dataclass(frozen=True)
class Retry(Written):
    """An attempt of a stage that was disrupted, and run again: its Locust pods taken away (StageDisrupted), the
    Redis loadstage deployed lost (RedisLost), or its master's result unreadable (ArtifactUnreadable)."""
    attempt: int
    at: str
    cause: str
    reason: str = "StageDisrupted"


RETRY = Obj(Retry, "A disrupted attempt of the stage, run again from scratch.", {
    "attempt": Int("The attempt's number, from 1."),
    "at": Str("When it was disrupted."),
    "reason": Field(Str("StageDisrupted (its pods taken away), RedisLost or ArtifactUnreadable.",
                        enum=RETRY_REASONS), absent="StageDisrupted"),
    "cause": Str("What happened, in words."),
}, required=("attempt", "at", "cause"))


class ArtifactOmitted(TypedDict, total=False):
    series: bool
    endpointHistograms: int
    blocksMerged: int
    blocks: bool


ARTIFACT_OMITTED = Obj(ArtifactOmitted, "What the stored artifact left out to fit a ConfigMap.", {
    "series": Bool("The time series."),
    "endpointHistograms": Int("The histograms of this many endpoints, the least requested."),
    "blocksMerged": Int("How often the intervals' blocks were merged in pairs."),
    "blocks": Bool("The intervals' blocks."),
}, nullable=True)


@dataclass(frozen=True)
class StageResult(Written):
    stage: int
    injectors: int
    users: int | None
    duration_seconds: float
    started_at: str | None
    finished_at: str | None
    requests: int
    failures: int
    error_rate: float | None
    rps: float | None
    mean_ms: float | None
    latency: Latency
    by_method: dict[str, MethodFigures]
    redis_peak_connections: int | None
    redis_connections_received: int | None
    target: TargetFigures
    injector_peak_cpu_percent: float | None
    injector_bound: bool
    corrected_latency: Latency | None = None
    redis_peak_covers: str | None = None        # set when the peak covers less than the stage
    error_kinds: int | None = None
    lost_injectors: tuple[LostInjector, ...] = ()
    verdict: Verdict | None = None
    retries: tuple[Retry, ...] = ()     # the disrupted attempts before the one these figures are of
    endpoints_folded: int | None = None     # request names beyond the artifact's rows, in its "(other)" row
    artifact_omitted: ArtifactOmitted | None = None   # what the stored artifact had to leave out to fit
    intervals: Intervals | None = None   # confidence intervals of the figures (results.intervals)
    repeats: int = 1                          # how many repeats of the stage these figures merge
    trimmed_mean: dict[str, float] | None = None   # over the repeats, without the highest and lowest
    request_goal: int | None = None           # a stage given in requests (ab -n); duration_seconds: how long
    host_cpu_per_core: tuple[float, ...] | None = None   # the machine's mean CPU per core, percent (local)
    master_lag_seconds: float | None = None   # the latest the Locust master merged a worker's report
    master_bound: bool = False                # ... later than a report interval: the master fell behind
    exceptions: TaskExceptions | None = None  # what its tasks raised; each counts as a failed request
    ended_by: str | None = None   # Decided, Breached, MaxDuration (stageEnd: Decided), Duration or Requests
    looks: int | None = None      # with stageEnd Decided: how often its intervals were looked at before its end
    arrival_rate: int | None = None      # an open model's asked rate (tasks a second)
    arrivals: int | None = None          # ... the arrivals its injectors scheduled
    dropped_arrivals: int | None = None  # ... of which found no free user
    injector_cpu_bound: bool | None = None   # ... whether its injectors' CPU (not only their pools) bound it
    saturation: Saturation | None = None     # how close each resource came to its limit

    @property
    def attempts(self) -> int:
        return len(self.retries) + 1

    def nothing_succeeded(self) -> str | None:
        """'every request failed', or 'no request completed': a stage that measured no service at all."""
        if self.requests == 0 and not self.exceptions:
            return "no request completed"
        return "every request failed" if self.failures >= self.requests else None

    @property
    def measured_its_injectors(self) -> bool:
        """Injector-bound by CPU: its latencies are the injectors' too. (A stage bound only by its pools, which
        dropped arrivals because every user waited on the target, measured the target.)"""
        return self.injector_bound if self.injector_cpu_bound is None else self.injector_cpu_bound

    def injectors_ran_out(self) -> str:
        """Why an injector-bound stage measured its injectors: their CPU, or (an arrival rate) their pools."""
        if self.measured_its_injectors:
            peak = "" if self.injector_peak_cpu_percent is None else \
                f" (peak {self.injector_peak_cpu_percent:g}% of a core)"
            return f"its injectors ran out of CPU{peak}: add injectors, or give each fewer users"
        dropped = f"{self.dropped_arrivals / self.arrivals:.0%} of arrivals dropped, " if self.arrivals and \
            self.dropped_arrivals is not None else ""
        return f"its injectors' pools of users ran out ({dropped}injector CPU not bound): raise " \
               f"injectors.maxUsersPerInjector"

    def headline(self) -> Headline:
        return Headline(self.stage, self.requests, self.failures, self.error_rate, self.rps, self.mean_ms,
                        self.latency, self.exceptions.count if self.exceptions else 0)

    def load(self, by_users: bool) -> int:
        """What the ladder climbs: the stage's users, or its injectors."""
        return (self.users or 0) if by_users else self.injectors

    def offered(self) -> int:
        """The load it was given: its arrival rate, else its users, else its injectors."""
        return self.arrival_rate if self.arrival_rate is not None else \
            self.users if self.users is not None else self.injectors

    def offered_label(self) -> str:
        """'120 rps', '40 users' or '3 injectors'."""
        unit = "rps" if self.arrival_rate is not None else "users" if self.users is not None else "injectors"
        return f"{self.offered()} {unit}"


def last_injector_bound(stages: Iterable[StageResult]) -> StageResult | None:
    """The latest of `stages` whose injectors ran out: the one that ended a search or a pick for it."""
    return max((s for s in stages if s.injector_bound), key=lambda s: s.stage, default=None)


def _closed_model(value: object, stage: StageResult) -> bool:
    return stage.arrival_rate is None


def _one_attempt(value: object, stage: StageResult) -> bool:
    return not stage.retries


def _one_repeat(value: int, stage: StageResult) -> bool:
    return value <= 1


STAGE = Obj(StageResult, "One finished stage: its figures from the merged distribution of all its injectors.", {
    "stage": Int("The stage's number: in the ladder, or in the order a search or a pick ran it."),
    "injectors": Int("Locust workers (injectors) that loaded it."),
    "users": Int("Users in all, across its injectors.", nullable=True),
    "durationSeconds": Field(Num("How long its load ran, seconds."), absent=0.0),
    "startedAt": Str("When it started.", nullable=True),
    "finishedAt": Str("When it finished.", nullable=True),
    "requests": Int("Requests completed, failed ones included."),
    "failures": Int("Failed requests (exceptions in tasks included)."),
    "errorRate": Num("failures / requests.", nullable=True),
    "rps": Num("Requests a second, over the span from the stage's start to its last answer.", nullable=True),
    "meanMs": Num("Mean latency, ms.", nullable=True),
    "latencyMs": Field(LATENCY, attr="latency"),
    "byMethod": Field(MapOf("Each HTTP method's requests, by method.", METHOD), absent={}),
    "redisPeakConnections": Int("The most Redis clients connected at once (INFO clients, sampled every second).",
                                nullable=True),
    "redisConnectionsReceived": Int("Redis connections opened during the stage (INFO stats).", nullable=True),
    "target": Field(TARGET, absent=TargetFigures()),
    "injectorPeakCpuPercent": Num("The busiest injector's peak CPU, percent of a core.", nullable=True),
    "injectorBound": Field(Bool("An injector ran out of CPU (or, at an arrival rate, of users): its latencies "
                                "are partly the injectors'."), absent=False),
    "endedBy": Field(Str("Why it ended: Decided, Breached or MaxDuration (stageEnd Decided), Duration or "
                         "Requests.", enum=ENDED_BY, nullable=True), attr="ended_by", omit=omit_none),
    "looks": Field(Int("With stageEnd Decided: how often its intervals were looked at.", nullable=True),
                   omit=omit_none),
    "arrivalRate": Field(Int("At an arrival rate: the rate asked, arrivals a second.", nullable=True),
                         omit=_closed_model),
    "arrivals": Field(Int("At an arrival rate: the arrivals its injectors scheduled.", nullable=True),
                      omit=_closed_model),
    "droppedArrivals": Field(Int("At an arrival rate: of which found no free user.", nullable=True),
                             omit=_closed_model),
    "injectorCpuBound": Field(Bool("At an arrival rate: whether its injectors' CPU (not only their pools) bound "
                                   "it.", nullable=True), omit=_closed_model),
    "masterLagSeconds": Field(Num("The latest the Locust master merged a worker's report, seconds.",
                                  nullable=True), omit=omit_none),
    "masterBound": Field(Bool("The master fell behind by a report interval."), absent=False, omit=omit_empty),
    "correctedLatencyMs": Field(LATENCY, attr="corrected_latency", omit=omit_none,
                                description="With pacing: latency from each request's intended start "
                                            "(coordinated omission corrected), ms."),
    "redisPeakCovers": Field(Str("Set where the Redis peak covers less than the stage: what it covers.",
                                 nullable=True), omit=omit_none),
    "errorKinds": Field(Int("Distinct errors.", nullable=True), omit=omit_empty),
    "exceptions": Field(TASK_EXCEPTIONS, omit=omit_none),
    "lostInjectors": Field(LostInjectors("Injectors lost during the stage, and how many.", LOST_INJECTOR),
                           absent=(), omit=omit_empty),
    "verdict": Field(VERDICT, omit=omit_none),
    "attempts": Field(Int("Attempts it took, with retries."), derived=True, omit=_one_attempt),
    "retries": Field(ListOf("The disrupted attempts before the one these figures are of.", RETRY), absent=(),
                     omit=omit_empty),
    "endpointsFolded": Field(Int("Request names beyond the artifact's rows, folded into its (other) row.",
                                 nullable=True), omit=omit_empty),
    "artifactOmitted": Field(ARTIFACT_OMITTED, omit=omit_empty),
    "intervals": Field(INTERVALS, omit=omit_empty),
    "repeats": Field(Int("How many repeats of the stage these figures merge."), absent=1, omit=_one_repeat),
    "requestGoal": Field(Int("A stage given in requests: how many.", nullable=True), omit=omit_none),
    "saturation": Field(SATURATION, omit=omit_none),
    "hostCpuPerCore": Field(ListOf("Locally: the machine's mean CPU per core, percent.", Num("Percent."),
                                   nullable=True), omit=omit_empty),
    "trimmedMean": Field(MapOf("Over the repeats, each figure's mean without the highest and the lowest.",
                               Num("The figure's trimmed mean."), nullable=True), omit=omit_empty),
}, required=("stage", "injectors", "requests", "failures", "latencyMs"))
