"""One stage's result as the status holds it (status.variants[].stages[]): its figures, the target's health and
resources during it, its injectors, and the attempts it took; each type beside its declaration."""

from __future__ import annotations

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

ENDED_BY = ("Decided", "Breached", "MaxDuration", "Duration", "Requests")
RETRY_REASONS = ("StageDisrupted", "RedisLost", "ArtifactUnreadable")


@dataclass(frozen=True)
class TargetPodHealth(Written):
    """A target pod that restarted, was taken away, or was out of its Service (not ready) during a stage."""
    pod: str
    restarts: int
    unready_seconds: float
    causes: tuple[str, ...] = ()    # of its restarts: how the container ended, what the kubelet said
    gone: str | None = None         # how it was taken away

    def describe(self) -> str:
        """'runner-abc: 2 restart(s), Error (exit 137), Liveness probe failed: ..., 12 s unready'."""
        said = [f"{self.restarts} restart(s)" if self.restarts else "", *self.causes, self.gone or "",
                f"{self.unready_seconds:g} s unready" if self.unready_seconds else ""]
        return f"{self.pod}: " + ", ".join(s for s in said if s)

    @property
    def interrupted(self) -> bool:
        """Its processes did not serve the whole stage."""
        return self.restarts > 0 or self.gone is not None


POD_HEALTH = Obj(TargetPodHealth, "A target pod that restarted, was taken away or was unready during the stage.", {
    "pod": Str("The pod's name."),
    "restarts": Field(Int("Its containers' restarts during the stage."), absent=0),
    "unreadySeconds": Field(Num("Seconds it was not ready (out of its Service)."), absent=0.0),
    "causes": Field(ListOf("Of its restarts: how the container ended, what the kubelet said.",
                           Str("A cause.")), absent=()),
    "gone": Field(Str("How it was taken away (evicted, deleted).", nullable=True), omit=omit_none),
}, required=("pod",))


@dataclass(frozen=True)
class TargetFigures(Written):
    peak_cpu_cores: float | None = None
    peak_memory_bytes: int | None = None
    served_requests: int | None = None     # the target's own count of the stage's requests
    pods: tuple[TargetPodHealth, ...] | None = None     # None: the target's health was not watched (local)
    processes: int | None = None           # the most processes one pod had at once (local)
    peak_process_rss_bytes: int | None = None   # the largest resident set of one process (local)
    proxy_peak_cpu_cores: float | None = None   # the front proxies (spec.target.proxy), apart from the above
    proxy_peak_memory_bytes: int | None = None

    @property
    def restarts(self) -> int | None:
        return None if self.pods is None else sum(p.restarts for p in self.pods)

    @property
    def unready_seconds(self) -> float | None:
        return None if self.pods is None else round(sum(p.unready_seconds for p in self.pods), 1)

    def unsteady(self) -> str | None:
        """Why the stage did not load a steady target, e.g. '2 restart(s), 4.8 s unready'; None if it did."""
        if not self.pods:
            return None
        gone = sum(1 for p in self.pods if p.gone)
        said = [f"{self.restarts} restart(s)" if self.restarts else "",
                f"{gone} pod(s) taken away" if gone else "",
                f"{self.unready_seconds:g} s unready" if self.unready_seconds else ""]
        return ", ".join(s for s in said if s)


def _unwatched(value: object, target: TargetFigures) -> bool:
    return target.pods is None


def _no_processes(value: object, target: TargetFigures) -> bool:
    return target.processes is None


def _no_proxy(value: object, target: TargetFigures) -> bool:
    return target.proxy_peak_cpu_cores is None and target.proxy_peak_memory_bytes is None


TARGET = Obj(TargetFigures, "The target during the stage: its resources, its own count of requests, its health.", {
    "peakCpuCores": Num("The target's peak CPU, cores (all its pods; sampled every second).", nullable=True),
    "peakMemoryBytes": Int("The target's peak memory, bytes (all its pods).", nullable=True),
    "servedRequests": Int("Requests the target itself counted (its /metrics), to check Locust's count.",
                          nullable=True),
    "processes": Field(Int("Locally: the most processes one target had at once.", nullable=True),
                       omit=_no_processes),
    "peakProcessRssBytes": Field(Int("Locally: the largest resident set of one of its processes, bytes.",
                                     nullable=True), omit=_no_processes),
    "proxyPeakCpuCores": Field(Num("The front proxies' peak CPU, cores (spec.target.proxy).", nullable=True),
                               omit=_no_proxy),
    "proxyPeakMemoryBytes": Field(Int("The front proxies' peak memory, bytes.", nullable=True), omit=_no_proxy),
    "restarts": Field(Int("Restarts of the target's containers during the stage.", nullable=True), derived=True,
                      omit=_unwatched),
    "unreadySeconds": Field(Num("Seconds its pods were unready, summed.", nullable=True), derived=True,
                            omit=_unwatched),
    "pods": Field(ListOf("The pods that restarted, were taken away or were unready.", POD_HEALTH, nullable=True),
                  omit=_unwatched),
})


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

    def headline(self) -> Headline:
        return Headline(self.stage, self.requests, self.failures, self.error_rate, self.rps, self.mean_ms,
                        self.latency, self.exceptions.count if self.exceptions else 0)

    def load(self, by_users: bool) -> int:
        """What the ladder climbs: the stage's users, or its injectors."""
        return (self.users or 0) if by_users else self.injectors


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
    "durationSeconds": Num("How long its load ran, seconds.", nullable=True),
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
    "hostCpuPerCore": Field(ListOf("Locally: the machine's mean CPU per core, percent.", Num("Percent."),
                                   nullable=True), omit=omit_empty),
    "trimmedMean": Field(MapOf("Over the repeats, each figure's mean without the highest and the lowest.",
                               Num("The figure's trimmed mean."), nullable=True), omit=omit_empty),
}, required=("stage", "injectors", "requests", "failures", "latencyMs"))
