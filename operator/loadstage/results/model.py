"""The results as typed values: a stage's result, a variant's aggregate and record, the p99 pivot, and a
stage's artifact. Each is parsed once from the status (or the artifact) it was written to, and serialised
once, to the same keys in the same order; everything above this module reads attributes, not keys. (It is
over 300 lines because each type keeps its parse and its serialisation side by side: the status format is
in this one place.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadstage.results import histograms
from loadstage.results.intervals import FIGURES as INTERVAL_FIGURES
from loadstage.results.status_reader import Fields, ShapeError, checked, read, reads_status

PERCENTILE_KEYS = ("p50", "p90", "p95", "p99", "p999")
Setting = str | int | float | bool | None
# what results.intervals writes: a [low, high] per figure, and how they were found
INTERVAL_ENTRIES = {**dict.fromkeys(INTERVAL_FIGURES, tuple[float, float] | None),
                    "confidence": float, "method": str, "blocks": int, "blockSeconds": float, "warning": str,
                    "resamples": int}


def _intervals(d: dict[str, Any]) -> dict[str, Any] | None:
    found = checked(d.get("intervals"), INTERVAL_ENTRIES, required=("confidence", "method"))
    if found is not None and not 0 < found["confidence"] < 1:
        raw = d["intervals"]
        raise ShapeError(raw._at("confidence") if isinstance(raw, Fields) else "intervals.confidence",
                         f"must be above 0 and below 1, got {found['confidence']}")
    return found


def _omit_none(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v for k, v in pairs if v is not None}


@dataclass(frozen=True)
class Latency:
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

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Latency":
        return cls(*(d.get(k) for k in (*PERCENTILE_KEYS, "max", "n", "p999Reliable")))

    def to_status(self) -> dict[str, Any]:
        return {"p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99, "p999": self.p999,
                "max": self.max, "n": self.n, "p999Reliable": self.p999_reliable}

    def percentile(self, key: str) -> float | None:
        return getattr(self, key)


@dataclass(frozen=True)
class MethodFigures:
    """What the status keeps of a method: its mean (the ONS breakdown's) and its p99."""
    requests: int
    failures: int
    mean_ms: float | None
    p99_ms: float | None

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "MethodFigures":
        return cls(d["requests"], d["failures"], d.get("meanMs"), d.get("p99Ms"))

    def to_status(self) -> dict[str, Any]:
        return {"requests": self.requests, "failures": self.failures, "meanMs": self.mean_ms, "p99Ms": self.p99_ms}


@dataclass(frozen=True)
class TargetPodHealth:
    """A target pod that restarted, was taken away, or was out of its Service (not ready) during a stage."""
    pod: str
    restarts: int
    unready_seconds: float
    causes: tuple[str, ...] = ()    # of its restarts: how the container ended, what the kubelet said
    gone: str | None = None         # how it was taken away

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "TargetPodHealth":
        return cls(d["pod"], d.get("restarts", 0), d.get("unreadySeconds", 0.0), tuple(d.get("causes", ())),
                   d.get("gone"))

    def to_status(self) -> dict[str, Any]:
        return _omit_none([("pod", self.pod), ("restarts", self.restarts), ("unreadySeconds", self.unready_seconds),
                           ("causes", list(self.causes)), ("gone", self.gone)])

    def describe(self) -> str:
        """'runner-abc: 2 restart(s), Error (exit 137), Liveness probe failed: ..., 12 s unready'."""
        said = [f"{self.restarts} restart(s)" if self.restarts else "", *self.causes, self.gone or "",
                f"{self.unready_seconds:g} s unready" if self.unready_seconds else ""]
        return f"{self.pod}: " + ", ".join(s for s in said if s)

    @property
    def interrupted(self) -> bool:
        """Its processes did not serve the whole stage."""
        return self.restarts > 0 or self.gone is not None


@dataclass(frozen=True)
class TargetFigures:
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

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "TargetFigures":
        pods = None if "restarts" not in d else tuple(TargetPodHealth.from_status(p) for p in d.get("pods", ()))
        return cls(d.get("peakCpuCores"), d.get("peakMemoryBytes"), d.get("servedRequests"), pods,
                   d.get("processes"), d.get("peakProcessRssBytes"), d.get("proxyPeakCpuCores"),
                   d.get("proxyPeakMemoryBytes"))

    def to_status(self) -> dict[str, Any]:
        result = {"peakCpuCores": self.peak_cpu_cores, "peakMemoryBytes": self.peak_memory_bytes,
                  "servedRequests": self.served_requests}
        if self.processes is not None:
            result.update(processes=self.processes, peakProcessRssBytes=self.peak_process_rss_bytes)
        if self.proxy_peak_cpu_cores is not None or self.proxy_peak_memory_bytes is not None:
            result.update(proxyPeakCpuCores=self.proxy_peak_cpu_cores,
                          proxyPeakMemoryBytes=self.proxy_peak_memory_bytes)
        if self.pods is not None:
            result.update(restarts=self.restarts, unreadySeconds=self.unready_seconds,
                          pods=[p.to_status() for p in self.pods])
        return result


@dataclass(frozen=True)
class Objective:
    """One objective of spec.slo held against a stage: its figure, that figure's interval, and whether the
    whole interval holds it (True), breaks it (False) or straddles it (None: undecided)."""
    name: str                     # p99, errorRate, minRps
    limit: float                  # ms, a fraction, or req/s
    value: float | None
    interval: tuple[float, float] | None
    holds: bool | None

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Objective":
        interval = d.get("interval")
        return cls(d["name"], d["limit"], d.get("value"), tuple(interval) if interval else None, d.get("holds"))

    def to_status(self) -> dict[str, Any]:
        return {"name": self.name, "limit": self.limit, "value": self.value,
                "interval": list(self.interval) if self.interval else None, "holds": self.holds}


OUTCOMES = ("Pass", "Fail", "Undecided")


@dataclass(frozen=True)
class Verdict:
    """A stage held against spec.thresholds (pass or fail by its figures) or spec.slo (by their intervals, so
    that a stage may also be undecided: `undecided` names the objectives its intervals straddle)."""
    passed: bool
    violations: tuple[str, ...] = ()
    undecided: tuple[str, ...] = ()
    objectives: tuple[Objective, ...] = ()

    @property
    def outcome(self) -> str:
        return "Pass" if self.passed else "Fail" if self.violations or not self.undecided else "Undecided"

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Verdict":
        return cls(d["passed"], tuple(d.get("violations", ())), tuple(d.get("undecided", ())),
                   tuple(Objective.from_status(o) for o in d.get("objectives", ())))

    def to_status(self) -> dict[str, Any]:
        result: dict[str, Any] = {"passed": self.passed, "violations": list(self.violations)}
        if self.objectives:
            result.update(outcome=self.outcome, undecided=list(self.undecided),
                          objectives=[o.to_status() for o in self.objectives])
        return result


@dataclass(frozen=True)
class LostInjector:
    injector: str
    at: str
    cause: str

    def to_status(self) -> dict[str, Any]:
        return {"injector": self.injector, "at": self.at, "cause": self.cause}


@dataclass(frozen=True)
class TaskExceptions:
    """What the stage's tasks raised (Locust logs it and goes on): how many, and the most frequent messages."""
    count: int
    top: tuple[tuple[str, int], ...]    # ("ValueError: no survey", 345), most frequent first

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "TaskExceptions":
        return cls(d["count"], tuple((e["message"], e["count"]) for e in d.get("top", ())))

    def to_status(self) -> dict[str, Any]:
        return {"count": self.count, "top": [{"message": m, "count": n} for m, n in self.top]}

    def __add__(self, other: "TaskExceptions | None") -> "TaskExceptions":
        if other is None:
            return self
        counts: dict[str, int] = {}
        for message, count in (*self.top, *other.top):
            counts[message] = counts.get(message, 0) + count
        top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:max(len(self.top), len(other.top))]
        return TaskExceptions(self.count + other.count, tuple(top))

    def describe(self) -> str:
        """'345 exception(s) in tasks, most often ValueError: no survey (345)'."""
        return f"{self.count:,} exception(s) in tasks, most often " + \
            "; ".join(f"{message} ({count})" for message, count in self.top)


@dataclass(frozen=True)
class Retry:
    """An attempt of a stage that was disrupted, and run again: its Locust pods taken away (StageDisrupted), or
    the Redis loadstage deployed lost (RedisLost)."""
    attempt: int
    at: str
    cause: str
    reason: str = "StageDisrupted"

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Retry":
        return cls(d["attempt"], d["at"], d["cause"], d.get("reason", "StageDisrupted"))

    def to_status(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "at": self.at, "reason": self.reason, "cause": self.cause}


@dataclass(frozen=True)
class StageResult:
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
    artifact_omitted: dict[str, Any] | None = None   # what the stored artifact had to leave out to fit
    intervals: dict[str, Any] | None = None   # confidence intervals of the figures (results.intervals)
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

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "StageResult":
        lost = (d.get("lostInjectors") or {}).get("injectors", [])
        return cls(
            stage=d["stage"], injectors=d["injectors"], users=d.get("users"),
            duration_seconds=d.get("durationSeconds"), started_at=d.get("startedAt"),
            finished_at=d.get("finishedAt"), requests=d["requests"], failures=d["failures"],
            error_rate=d.get("errorRate"), rps=d.get("rps"), mean_ms=d.get("meanMs"),
            latency=Latency.from_status(d["latencyMs"]),
            by_method={m: MethodFigures.from_status(row) for m, row in d.get("byMethod", {}).items()},
            redis_peak_connections=d.get("redisPeakConnections"),
            redis_connections_received=d.get("redisConnectionsReceived"),
            target=TargetFigures.from_status(d.get("target") or {}),
            injector_peak_cpu_percent=d.get("injectorPeakCpuPercent"),
            injector_bound=bool(d.get("injectorBound")),
            corrected_latency=Latency.from_status(d["correctedLatencyMs"]) if "correctedLatencyMs" in d else None,
            redis_peak_covers=d.get("redisPeakCovers"), error_kinds=d.get("errorKinds"),
            lost_injectors=tuple(LostInjector(e["injector"], e["at"], e["cause"]) for e in lost),
            verdict=Verdict.from_status(d["verdict"]) if "verdict" in d else None,
            retries=tuple(Retry.from_status(r) for r in d.get("retries", ())),
            endpoints_folded=d.get("endpointsFolded"), artifact_omitted=d.get("artifactOmitted"),
            intervals=_intervals(d), repeats=d.get("repeats", 1),
            trimmed_mean=d.get("trimmedMean"),
            request_goal=d.get("requestGoal"),
            host_cpu_per_core=tuple(d["hostCpuPerCore"]) if d.get("hostCpuPerCore") else None,
            master_lag_seconds=d.get("masterLagSeconds"), master_bound=bool(d.get("masterBound")),
            exceptions=TaskExceptions.from_status(d["exceptions"]) if d.get("exceptions") else None,
            ended_by=d.get("endedBy"), looks=d.get("looks"), arrival_rate=d.get("arrivalRate"),
            arrivals=d.get("arrivals"), dropped_arrivals=d.get("droppedArrivals"),
            injector_cpu_bound=d.get("injectorCpuBound"))

    def to_status(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "stage": self.stage, "injectors": self.injectors, "users": self.users,
            "durationSeconds": self.duration_seconds, "startedAt": self.started_at, "finishedAt": self.finished_at,
            "requests": self.requests, "failures": self.failures, "errorRate": self.error_rate, "rps": self.rps,
            "meanMs": self.mean_ms, "latencyMs": self.latency.to_status(),
            "byMethod": {m: row.to_status() for m, row in self.by_method.items()},
            "redisPeakConnections": self.redis_peak_connections,
            "redisConnectionsReceived": self.redis_connections_received,
            "target": self.target.to_status(),
            "injectorPeakCpuPercent": self.injector_peak_cpu_percent,
            "injectorBound": self.injector_bound,
        }
        if self.ended_by is not None:
            result["endedBy"] = self.ended_by
        if self.looks is not None:
            result["looks"] = self.looks
        if self.arrival_rate is not None:
            result.update(arrivalRate=self.arrival_rate, arrivals=self.arrivals, droppedArrivals=self.dropped_arrivals,
                          injectorCpuBound=self.injector_cpu_bound)
        if self.master_lag_seconds is not None:
            result["masterLagSeconds"] = self.master_lag_seconds
        if self.master_bound:
            result["masterBound"] = True
        if self.corrected_latency is not None:
            result["correctedLatencyMs"] = self.corrected_latency.to_status()
        if self.redis_peak_covers is not None:
            result["redisPeakCovers"] = self.redis_peak_covers
        if self.error_kinds:
            result["errorKinds"] = self.error_kinds
        if self.exceptions is not None:
            result["exceptions"] = self.exceptions.to_status()
        if self.lost_injectors:
            result["lostInjectors"] = {"count": len(self.lost_injectors),
                                       "injectors": [e.to_status() for e in self.lost_injectors]}
        if self.verdict is not None:
            result["verdict"] = self.verdict.to_status()
        if self.retries:
            result["attempts"] = self.attempts
            result["retries"] = [r.to_status() for r in self.retries]
        if self.endpoints_folded:
            result["endpointsFolded"] = self.endpoints_folded
        if self.artifact_omitted:
            result["artifactOmitted"] = self.artifact_omitted
        if self.intervals:
            result["intervals"] = self.intervals
        if self.repeats > 1:
            result["repeats"] = self.repeats
        if self.request_goal is not None:
            result["requestGoal"] = self.request_goal
        if self.host_cpu_per_core:
            result["hostCpuPerCore"] = list(self.host_cpu_per_core)
        if self.trimmed_mean:
            result["trimmedMean"] = self.trimmed_mean
        return result

    def headline(self) -> Headline:
        return Headline(self.stage, self.requests, self.failures, self.error_rate, self.rps, self.mean_ms,
                        self.latency, self.exceptions.count if self.exceptions else 0)

    @property
    def measured_its_injectors(self) -> bool:
        """Injector-bound by CPU: its latencies are the injectors' too. (A stage bound only by its pools, which
        dropped arrivals because every user waited on the target, measured the target.)"""
        return self.injector_bound if self.injector_cpu_bound is None else self.injector_cpu_bound

    def load(self, by_users: bool) -> int:
        """What the ladder climbs: the stage's users, or its injectors."""
        return self.users if by_users else self.injectors


@dataclass(frozen=True)
class VariantAggregate:
    """A variant over all its stages: percentiles of the merged histograms, totals, its Redis peak."""
    stages: int
    requests: int
    failures: int
    error_rate: float | None
    latency: Latency
    by_method: dict[str, MethodFigures]
    redis_peak_connections: int | None
    corrected_latency: Latency | None = None
    intervals: dict[str, Any] | None = None
    trimmed_mean: dict[str, float] | None = None   # over the repeats, without the highest and lowest
    exceptions: int = 0                            # raised by tasks in all its stages

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "VariantAggregate":
        return cls(d["stages"], d["requests"], d["failures"], d.get("errorRate"),
                   Latency.from_status(d["latencyMs"]),
                   {m: MethodFigures.from_status(row) for m, row in d.get("byMethod", {}).items()},
                   d.get("redisPeakConnections"),
                   Latency.from_status(d["correctedLatencyMs"]) if "correctedLatencyMs" in d else None,
                   _intervals(d), d.get("trimmedMean"), d.get("exceptions", 0))

    def to_status(self) -> dict[str, Any]:
        result = {"stages": self.stages, "requests": self.requests, "failures": self.failures,
                  "errorRate": self.error_rate, "latencyMs": self.latency.to_status(),
                  "byMethod": {m: row.to_status() for m, row in self.by_method.items()},
                  "redisPeakConnections": self.redis_peak_connections}
        if self.corrected_latency is not None:
            result["correctedLatencyMs"] = self.corrected_latency.to_status()
        if self.intervals:
            result["intervals"] = self.intervals
        if self.trimmed_mean:
            result["trimmedMean"] = self.trimmed_mean
        if self.exceptions:
            result["exceptions"] = self.exceptions
        return result


@dataclass(frozen=True)
class Headline:
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
        """One of results.intervals.FIGURES."""
        others = {"mean": self.mean_ms, "rps": self.rps, "errorRate": self.error_rate}
        return others[name] if name in others else self.latency.percentile(name)

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Headline":
        latency = d.get("latencyMs") or {}
        return cls(d.get("stage"), d["requests"], d["failures"], d.get("errorRate"), d.get("rps"), d.get("meanMs"),
                   Latency(*(latency.get(k) for k in PERCENTILE_KEYS), n=d["requests"]), d.get("exceptions", 0))

    def to_status(self) -> dict[str, Any]:
        return _omit_none([("stage", self.stage), ("requests", self.requests), ("failures", self.failures),
                           ("exceptions", self.exceptions or None),
                           ("errorRate", self.error_rate), ("rps", self.rps), ("meanMs", self.mean_ms),
                           ("latencyMs", {k: self.latency.percentile(k) for k in PERCENTILE_KEYS})])


@dataclass
class RepeatRecord:
    """One repeat of a variant's ladder: each finished stage's headline, and the ladder's once it is whole."""
    repeat: int
    stages: list[Headline] = field(default_factory=list)
    aggregate: Headline | None = None

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "RepeatRecord":
        return cls(d["repeat"], [Headline.from_status(s) for s in d.get("stages", [])],
                   Headline.from_status(d["aggregate"]) if d.get("aggregate") else None)

    def to_status(self) -> dict[str, Any]:
        return _omit_none([("repeat", self.repeat), ("stages", [s.to_status() for s in self.stages]),
                           ("aggregate", None if self.aggregate is None else self.aggregate.to_status())])


@dataclass(frozen=True)
class Capacity:
    """The knee: the last stage before the first that failed a threshold, injector-bound stages excluded."""
    stage: int
    injectors: int
    users: int | None
    rps: float | None
    first_failed_stage: int | None

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Capacity":
        return cls(d["stage"], d["injectors"], d.get("users"), d.get("rps"), d.get("firstFailedStage"))

    def to_status(self) -> dict[str, Any]:
        return {"stage": self.stage, "injectors": self.injectors, "users": self.users, "rps": self.rps,
                "firstFailedStage": self.first_failed_stage}


SEARCH_REASONS = ("Searching", "Found", "CeilingPassed", "FloorFailed", "InjectorBound")


@dataclass(frozen=True)
class SearchResult:
    """A variant's capacity search so far: the bracket [passed, failed] in the unit of `load`, with the req/s
    measured at each end; `reason` says why it ended, or Searching."""
    load: str
    passed: int | None
    failed: int | None
    passed_rps: float | None
    failed_rps: float | None
    resolution: float | None    # (failed - passed) / passed, once both are known
    stages: int
    load_seconds: float         # the load time it spent, warm-up included
    reason: str

    @property
    def done(self) -> bool:
        return self.reason != "Searching"

    def bracket(self) -> str:
        """'40-48 users (612-690 req/s)', '>= 2000 users', '< 10 users'."""
        def rps(value: float | None) -> str:
            return "?" if value is None else f"{value:,.0f}"
        if self.passed is None:
            return "none passed" if self.failed is None else f"< {self.failed:,} {self.load}"
        if self.failed is None:
            return f">= {self.passed:,} {self.load} ({rps(self.passed_rps)} req/s)"
        return f"{self.passed:,}-{self.failed:,} {self.load} ({rps(self.passed_rps)}-{rps(self.failed_rps)} req/s)"

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "SearchResult":
        return cls(d["load"], d.get("pass"), d.get("fail"), d.get("passRps"), d.get("failRps"), d.get("resolution"),
                   d["stages"], d["loadSeconds"], d["reason"])

    def to_status(self) -> dict[str, Any]:
        return {"load": self.load, "pass": self.passed, "fail": self.failed, "passRps": self.passed_rps,
                "failRps": self.failed_rps, "resolution": self.resolution, "stages": self.stages,
                "loadSeconds": self.load_seconds, "reason": self.reason}


@dataclass(frozen=True)
class Dropped:
    """Why a variant of spec.goal is out of the running, and after how many of its stages (0: never run)."""
    after: int
    reason: str

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Dropped":
        return cls(d["after"], d["reason"])

    def to_status(self) -> dict[str, Any]:
        return {"after": self.after, "reason": self.reason}


@dataclass(frozen=True)
class Cost:
    """What a variant reserves: its pods x each one's CPU limit (or request), or its measured peak CPU where
    neither is set (`source`: limit, request or measured); its memory beside, not folded in."""
    cores: float | None
    source: str
    memory_bytes: int | None = None

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Cost":
        return cls(d.get("cores"), d["from"], d.get("memoryBytes"))

    def to_status(self) -> dict[str, Any]:
        return {"cores": self.cores, "from": self.source, "memoryBytes": self.memory_bytes}

    def describe(self) -> str:
        """'6 cores', '0.5 cores measured'."""
        cores = "? cores" if self.cores is None else f"{self.cores:g} core{'' if self.cores == 1 else 's'}"
        return cores + (" measured" if self.source == "measured" else "")


@dataclass(frozen=True)
class Candidate:
    """A variant that met the objective: at the goal's load, its cost and its headroom (the least share by
    which a figure stays within its objective, from the deciding look's figures); with maximize, its cost and
    its capacity per core, [low, high] in req/s a core (its search's bracket over its cost; high may be
    None: it passed even at search.max)."""
    variant: int
    settings: dict[str, Setting]
    label: str
    cost: Cost
    headroom: float
    objectives: tuple[Objective, ...]
    per_core: tuple[float, float | None] | None = None

    @property
    def capacity_rps(self) -> float:
        """With maximize: what it serves at its bracket's low end, in req/s."""
        return self.per_core[0] * (self.cost.cores or 0.0)

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Candidate":
        return cls(d["variant"], dict(d["settings"]), d["label"], Cost.from_status(d["cost"]), d["headroom"],
                   tuple(Objective.from_status(o) for o in d.get("objectives", ())),
                   tuple(d["perCore"]) if d.get("perCore") else None)

    def to_status(self) -> dict[str, Any]:
        return {"variant": self.variant, "settings": self.settings, "label": self.label,
                "cost": self.cost.to_status(), "headroom": self.headroom,
                "objectives": [o.to_status() for o in self.objectives],
                **({"perCore": list(self.per_core)} if self.per_core else {})}


@dataclass(frozen=True)
class Margin:
    """The runner-up against the winner, relatively (its figure / the winner's - 1), with an interval: a
    latency's, from each stage's bootstrap interval at `confidence` (results.differences); capacity per core
    ("perCore"), from each search's bracket (`confidence` None; a bound None where a bracket is open)."""
    figure: str
    relative: float
    low: float | None
    high: float | None
    confidence: float | None

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Margin":
        return cls(d["figure"], d["relative"], d.get("low"), d.get("high"), d.get("confidence"))

    def to_status(self) -> dict[str, Any]:
        return {"figure": self.figure, "relative": self.relative, "low": self.low, "high": self.high,
                "confidence": self.confidence}

    def describe(self) -> str:
        """"the runner-up's p99 is +38% [+12%, +70%] of the winner's (95%)"."""
        def bound(value: float | None, open_end: str) -> str:
            return open_end if value is None else f"{value:+.0%}"
        span = f"[{bound(self.low, '?')}, {bound(self.high, '?')}]"
        if self.figure == "perCore":
            return f"the runner-up serves {self.relative:+.0%} {span} per core of the winner's (from their brackets)"
        level = "" if self.confidence is None else f" ({self.confidence:.0%})"
        return f"the runner-up's {self.figure} is {self.relative:+.0%} {span} of the winner's{level}"


@dataclass(frozen=True)
class Recommendation:
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

    @property
    def margin_cores(self) -> float | None:
        if self.winner is None or self.runner_up is None or None in (self.winner.cost.cores,
                                                                     self.runner_up.cost.cores):
            return None
        return round(self.runner_up.cost.cores - self.winner.cost.cores, 3)

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "Recommendation":
        return cls(d["goal"], Candidate.from_status(d["winner"]) if d.get("winner") else None,
                   Candidate.from_status(d["runnerUp"]) if d.get("runnerUp") else None, tuple(d.get("order", ())),
                   d["reason"], d["sentence"], tuple(Candidate.from_status(c) for c in d.get("front", ())),
                   Margin.from_status(d["margin"]) if d.get("margin") else None)

    def to_status(self) -> dict[str, Any]:
        return {"goal": self.goal, "reason": self.reason, "sentence": self.sentence,
                "variant": None if self.winner is None else self.winner.variant,
                "settings": None if self.winner is None else self.winner.settings,
                "winner": None if self.winner is None else self.winner.to_status(),
                "runnerUp": None if self.runner_up is None else self.runner_up.to_status(),
                "marginCores": self.margin_cores, "margin": None if self.margin is None else self.margin.to_status(),
                "order": list(self.order),
                **({"front": [c.to_status() for c in self.front]} if self.front else {})}


@dataclass
class VariantRecord:
    """One variant in the status: its settings, its finished stages, and what they add up to. `judged`:
    the experiment has thresholds, so the record has a capacity (which may be None: no stage qualified)."""
    index: int
    settings: dict[str, Setting]
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

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "VariantRecord":
        return cls(d["index"], dict(d.get("settings") or {}), [StageResult.from_status(s) for s in d.get("stages", [])],
                   bool(d.get("warmedUp")),
                   VariantAggregate.from_status(d["aggregate"]) if d.get("aggregate") else None,
                   "capacity" in d, Capacity.from_status(d["capacity"]) if d.get("capacity") else None,
                   [RepeatRecord.from_status(r) for r in d.get("repeats", [])],
                   SearchResult.from_status(d["search"]) if d.get("search") else None,
                   Dropped.from_status(d["dropped"]) if d.get("dropped") else None,
                   Cost.from_status(d["cost"]) if d.get("cost") else None,
                   Candidate.from_status(d["met"]) if d.get("met") else None)

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

    def to_status(self) -> dict[str, Any]:
        result: dict[str, Any] = {"index": self.index, "settings": self.settings,
                                  "stages": [s.to_status() for s in self.stages]}
        if self.warmed_up:
            result["warmedUp"] = True
        if self.aggregate is not None:
            result["aggregate"] = self.aggregate.to_status()
        if self.judged:
            result["capacity"] = None if self.capacity is None else self.capacity.to_status()
        if self.repeats:
            result["repeats"] = [r.to_status() for r in self.repeats]
        if self.search is not None:
            result["search"] = self.search.to_status()
        if self.cost is not None:
            result["cost"] = self.cost.to_status()
        if self.dropped is not None:
            result["dropped"] = self.dropped.to_status()
        if self.met is not None:
            result["met"] = self.met.to_status()
        return result


@dataclass(frozen=True)
class PivotRow:
    """The ONS study's "99th percentile timings per load stage": one stage, one p99 per variant."""
    stage: int
    injectors: int
    users: int | None
    p99_ms_by_variant: tuple[float | None, ...]

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "PivotRow":
        return cls(d["stage"], d["injectors"], d.get("users"), tuple(d["p99MsByVariant"]))

    def to_status(self) -> dict[str, Any]:
        return {"stage": self.stage, "injectors": self.injectors, "users": self.users,
                "p99MsByVariant": list(self.p99_ms_by_variant)}


@dataclass(frozen=True)
class RunResults:
    """What the reports read of a status: the phase and its words, when it ran, and every variant."""
    phase: str
    message: str
    started_at: str | None
    finished_at: str | None
    variants: list[VariantRecord]
    p99_by_stage: list[PivotRow]
    recommendation: Recommendation | None = None   # with spec.goal

    @classmethod
    def read(cls, status: Any) -> "RunResults":
        """A status from a file or a cluster, checked as it is read: raises status_reader.ShapeError naming the
        first bad path."""
        return cls.from_status(read(status, "status"))

    @reads_status
    def from_status(cls, d: dict[str, Any]) -> "RunResults":
        run = cls(d.get("phase", "Pending"), d.get("message", ""), d.get("startedAt"), d.get("finishedAt"),
                  [VariantRecord.from_status(v) for v in d.get("variants", [])],
                  [PivotRow.from_status(r) for r in d.get("p99ByStage", [])],
                  Recommendation.from_status(d["recommendation"]) if d.get("recommendation") else None)
        for i, row in enumerate(run.p99_by_stage):
            if len(row.p99_ms_by_variant) != len(run.variants):
                raise ShapeError(f"status.p99ByStage[{i}].p99MsByVariant", f"must hold one value per variant "
                                 f"({len(run.variants)}), holds {len(row.p99_ms_by_variant)}")
        return run

    def has_stages(self) -> bool:
        return any(v.stages for v in self.variants)


@dataclass(frozen=True)
class Window:
    """One second of a stage's time series: its requests, their rate, p50 and p99."""
    start: float
    seconds: float
    requests: int
    rps: float
    p50_ms: float | None
    p99_ms: float | None

    @reads_status
    def from_artifact(cls, d: dict[str, Any]) -> "Window":
        return cls(d["start"], d["seconds"], d["requests"], d["rps"], d.get("p50Ms"), d.get("p99Ms"))


@dataclass(frozen=True)
class Artifact:
    """A stage's artifact: its merged histogram and each method's (HdrHistogram's compressed encoding,
    in ns), the endpoint and error rows as the master wrote them, and the time series."""
    histogram: str | None = None
    corrected_histogram: str | None = None
    method_histograms: dict[str, str] = field(default_factory=dict)
    corrected_method_histograms: dict[str, str] = field(default_factory=dict)
    endpoints: tuple[dict[str, Any], ...] = ()
    errors: tuple[dict[str, Any], ...] = ()
    series: tuple[Window, ...] = ()
    blocks: dict[str, Any] | None = None   # what the confidence intervals resample (results.intervals)

    @classmethod
    def from_artifact(cls, d: dict[str, Any] | None) -> "Artifact":
        return cls._parse(d or {})

    @classmethod
    def read(cls, raw: Any, path: str) -> "Artifact":
        """An artifact from a file or a ConfigMap, checked as it is read, its histograms decoded once: raises
        status_reader.ShapeError naming the first bad path."""
        artifact = cls._parse(read(raw, path))
        encoded = {"histogram": artifact.histogram, "correctedHistogram": artifact.corrected_histogram,
                   **{f"byMethod.{m}.histogram": h for m, h in artifact.method_histograms.items()},
                   **{f"byMethod.{m}.correctedHistogram": h for m, h in artifact.corrected_method_histograms.items()}}
        for key, value in encoded.items():
            if value is not None and not histograms.decodes(value):
                raise ShapeError(f"{path}.{key}", "is not an encoded HDR histogram")
        return artifact

    @reads_status
    def _parse(cls, d: dict[str, Any]) -> "Artifact":
        by_method = d.get("byMethod", {})
        return cls(d.get("histogram"), d.get("correctedHistogram"),
                   {m: h["histogram"] for m, h in by_method.items() if h.get("histogram")},
                   {m: h["correctedHistogram"] for m, h in by_method.items() if h.get("correctedHistogram")},
                   tuple(d.get("endpoints", ())), tuple(d.get("errors", ())),
                   tuple(Window.from_artifact(w) for w in d.get("series") or ()), d.get("blocks"))
