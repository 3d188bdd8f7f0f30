"""The experiment as typed, immutable values: what the spec parses into, and the variants a matrix
expands to. Every layer above reads these, never the YAML. (It is over 300 lines because it holds every type
of the spec, one dataclass per object of the schema, beside the defaults they share.)"""

from __future__ import annotations

import copy
import itertools
import math
import string
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from loadstage.api.quantities import format_duration, format_percent

if TYPE_CHECKING:
    from loadstage.api.status.pick import Settings
from loadstage.api.servers import BY_NAME, CUSTOM_SERVER, DEFAULT_SERVER, LISTEN_BACKLOG

PROXIES = ("nginx", "httpd")
NO_PROXY = "none"                                   # spec.matrix.proxy's value for a target without one
SOCKETS = ("tcp", "unix")
COMMAND_PLACEHOLDERS = ("app", "host", "port", "bind", "workers", "threads")
DEFAULT_RUNNER_APP = "runner_app.app:app"
DEFAULT_METRICS_PATH = "/metrics"
DEFAULT_COUNTER = "runner_request_duration_seconds"   # the runner app's request histogram
DEFAULT_TOLERANCE = 0.10   # slo.tolerance: a figure within 10% of its objective is at it (Near)
PERCENTILES = ("p50", "p90", "p95", "p99", "p999")
MAX_VARIANTS = 100
MAX_VARIANT_STAGES = 500    # variants x stages x repeats: what keeps the status well under etcd's object limit
MAX_REPEATS = 10
ORDERS = ("Sequential", "Interleaved", "Random")
MAX_SEED = 2**31 - 1
MAX_INJECTORS = 1000
MAX_STAGE_USERS = 1_000_000
DEFAULT_MAX_USERS_PER_INJECTOR = 100
DEFAULT_MAX_RATE_PER_INJECTOR = 500   # arrivals a second one injector starts, for a stage given in arrivalRate alone
MAX_ARRIVAL_RATE = 10_000_000
DROPPED_ARRIVALS_BOUND = 0.01   # a stage that drops more of its arrivals measured its injectors' pool
MAX_STAGE_REQUESTS = 1_000_000_000
REQUESTS_TIME_LIMIT = 600.0   # seconds: a stage given in requests alone ends here, should they not all complete
CLEANUP_POLICIES = ("Delete", "Keep", "KeepOnFailure")
DEPLOYMENT_MODES = ("Copy", "InPlace")
DEFAULT_THREADS = 2
ON_LOST = ("Fail", "Continue")
SEARCH_LOADS = ("users", "injectors", "rps")
GOAL_LOADS = ("rps", "users", "injectors")
GOAL_MAXIMA = ("capacityPerCore",)
GOAL_PREFERENCES = ("fewerProcesses", "fewerPods", "fewerThreads", "moreHeadroom")
DEFAULT_PREFER = ("fewerProcesses", "fewerPods")
MAX_GOAL_VARIANTS = 1000    # a goal's variants: it runs the cheapest first, and need not run every one
STAGE_ENDS = ("Duration", "Decided")


@dataclass(frozen=True)
class HttpGet:
    path: str
    port: int | None          # None: the target's own port


@dataclass(frozen=True)
class TcpSocket:
    port: int | None


@dataclass(frozen=True)
class Exec:
    command: list[str]


@dataclass(frozen=True)
class Probe:
    """A Kubernetes probe of the target's container, as the pod spec takes it; exactly one handler."""
    http_get: HttpGet | None
    tcp_socket: TcpSocket | None
    exec: Exec | None
    initial_delay_seconds: int | None
    period_seconds: int | None
    timeout_seconds: int | None
    success_threshold: int | None
    failure_threshold: int | None


READINESS_TIMEOUT_SECONDS = 2
LIVENESS_TIMEOUT_SECONDS, LIVENESS_FAILURES = 5, 6


def _probe(*, http_get: HttpGet | None = None, tcp_socket: TcpSocket | None = None, period_seconds: int = 2,
           timeout_seconds: int | None = None, failure_threshold: int | None = None) -> Probe:
    return Probe(http_get, tcp_socket, None, None, period_seconds, timeout_seconds, None, failure_threshold)


@dataclass(frozen=True)
class ResourceList:
    cpu: str | None = None      # a Kubernetes quantity, as written: "500m", "2"
    memory: str | None = None   # "512Mi"

    def items(self) -> dict[str, str]:
        return {k: v for k, v in (("cpu", self.cpu), ("memory", self.memory)) if v is not None}


@dataclass(frozen=True)
class Resources:
    """A container's requests and limits, in Kubernetes syntax."""
    requests: ResourceList = ResourceList()
    limits: ResourceList = ResourceList()

    def with_value(self, resource: str, value: str | None) -> Resources:
        """A matrix value sets both the request and the limit."""
        if value is None:
            return self
        return Resources(replace(self.requests, **{resource: value}), replace(self.limits, **{resource: value}))

    def over(self, defaults: Resources) -> Resources:
        """These resources, each unset one taken from `defaults`; a limit given without its request is also
        the request, as in a pod spec."""
        requests, limits = {}, {}
        for name in ("cpu", "memory"):
            limits[name] = getattr(self.limits, name) or getattr(defaults.limits, name)
            requests[name] = getattr(self.requests, name) or getattr(self.limits, name) or \
                getattr(defaults.requests, name)
        return Resources(ResourceList(**requests), ResourceList(**limits))

    def manifest(self) -> dict[str, dict[str, str]]:
        return {k: v for k, v in (("requests", self.requests.items()), ("limits", self.limits.items())) if v}


NO_RESOURCES = Resources()


@dataclass(frozen=True)
class PodResources:
    """The operator's resources for each kind of pod it creates, where an experiment's spec sets none."""
    target: Resources
    redis: Resources
    locust_master: Resources
    locust_worker: Resources


DEFAULT_POD_RESOURCES = PodResources(
    target=Resources(ResourceList("100m", "128Mi")), redis=Resources(ResourceList("50m", "32Mi")),
    locust_master=Resources(ResourceList("100m", "128Mi")), locust_worker=Resources(ResourceList("100m", "128Mi")))


@dataclass(frozen=True)
class TargetMetrics:
    """Where the target's own request count is read: a Prometheus counter (or histogram) on a path."""
    path: str
    counter: str


@dataclass(frozen=True)
class DeploymentTarget:
    """An existing Deployment of the experiment's namespace as the target: copied per variant, or patched in
    place and restored."""
    name: str
    container: str | None     # None: the first container
    mode: str                 # Copy | InPlace
    port: int | None          # None: the container's first TCP containerPort
    namespace: str | None = None   # refused unless it is the experiment's own


@dataclass(frozen=True)
class LabelSelector:
    match_labels: dict[str, str]


@dataclass(frozen=True)
class IpBlock:
    cidr: str


@dataclass(frozen=True)
class Peer:
    """Who else may reach the target's pods: a NetworkPolicy peer, with label selectors by matchLabels."""
    pod_selector: LabelSelector | None
    namespace_selector: LabelSelector | None
    ip_block: IpBlock | None

    def manifest(self) -> dict[str, Any]:
        peer: dict[str, Any] = {}
        if self.pod_selector is not None:
            peer["podSelector"] = {"matchLabels": dict(self.pod_selector.match_labels)}
        if self.namespace_selector is not None:
            peer["namespaceSelector"] = {"matchLabels": dict(self.namespace_selector.match_labels)}
        if self.ip_block is not None:
            peer["ipBlock"] = {"cidr": self.ip_block.cidr}
        return peer


@dataclass(frozen=True)
class Proxy:
    """A front proxy in each target pod, in front of the WSGI server."""
    server: str
    socket: str = "tcp"        # how it reaches the WSGI server: loopback TCP, or a Unix socket
    workers: int = 1
    resources: Resources = NO_RESOURCES


@dataclass(frozen=True)
class Target:
    image: str | None
    app: str
    pods: int
    server: str | None
    workers: int | None       # None: the server's default (1 for a single-process server, else 2)
    threads: int | None       # None: 2, or a Deployment target's own
    worker_class: str | None  # of a server with worker classes (api.servers); None: its default
    command: list[str] | None
    env: dict[str, str]
    ready_timeout: float
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    metrics: TargetMetrics = TargetMetrics(DEFAULT_METRICS_PATH, DEFAULT_COUNTER)
    resources: Resources = NO_RESOURCES
    deployment: DeploymentTarget | None = None
    allow_from: list[Peer] = field(default_factory=list)
    proxy: Proxy | None = None
    interface: str | None = None   # None: wsgi where the server serves several (granian)
    backlog: int = LISTEN_BACKLOG  # the server's listen queue

    @property
    def existing(self) -> DeploymentTarget:
        """The Deployment of a target that is one (spec.target.deployment)."""
        assert self.deployment is not None, "a target of its own has no Deployment"
        return self.deployment

    @property
    def runner_app(self) -> bool:
        """The bundled runner app: it serves /readyz, /healthz and /metrics, and needs Redis."""
        return self.app == DEFAULT_RUNNER_APP and self.deployment is None

    def proxy_of(self, variant: Variant) -> Proxy | None:
        """The variant's front proxy: its server and socket (the matrix's, or spec.target.proxy's), with the
        rest of spec.target.proxy."""
        if variant.proxy is None:
            return None
        return replace(self.proxy or Proxy(variant.proxy), server=variant.proxy, socket=variant.socket or "tcp")

    def readiness(self) -> Probe:
        """The spec's readiness probe; else the runner app's /readyz, or for any other app its port open."""
        if self.readiness_probe is not None:
            return self.readiness_probe
        if not self.runner_app:
            return _probe(tcp_socket=TcpSocket(None))
        return _probe(http_get=HttpGet("/readyz", None), timeout_seconds=READINESS_TIMEOUT_SECONDS)

    def liveness(self) -> Probe | None:
        """The spec's liveness probe; else the runner app's /healthz, and none for any other app."""
        if self.liveness_probe is not None or not self.runner_app:
            return self.liveness_probe
        # answered by the server under test, behind its queue: only a server stuck for a minute is restarted
        return _probe(http_get=HttpGet("/healthz", None), period_seconds=10, timeout_seconds=LIVENESS_TIMEOUT_SECONDS,
                      failure_threshold=LIVENESS_FAILURES)


@dataclass(frozen=True)
class KeyRef:
    """A key in a named Secret or ConfigMap."""
    name: str
    key: str


SecretKey = KeyRef
ConfigMapKey = KeyRef


@dataclass(frozen=True)
class Redis:
    deploy: bool | None
    url: str | None
    image: str | None
    password_secret: SecretKey | None
    resources: Resources = NO_RESOURCES

    @property
    def deployed(self) -> bool:
        return self.url is None and self.deploy is not False

    @property
    def used(self) -> bool:
        """False for `deploy: false` without a url: the target uses no Redis."""
        return self.deployed or self.url is not None


@dataclass(frozen=True)
class WaitTime:
    min: float
    max: float


@dataclass(frozen=True)
class Locustfile:
    path: str | None
    config_map: ConfigMapKey | None


@dataclass(frozen=True)
class Injectors:
    image: str | None
    users_per_injector: int
    spawn_rate_per_injector: float | None
    wait_time: WaitTime
    pacing: float | None
    scenario: str | None
    locustfile: Locustfile | None
    on_lost: str = "Fail"
    keep_alive: bool = True
    max_users_per_injector: int = DEFAULT_MAX_USERS_PER_INJECTOR
    max_rate_per_injector: int = DEFAULT_MAX_RATE_PER_INJECTOR
    resources: Resources = NO_RESOURCES          # each injector (Locust worker) pod
    master_resources: Resources = NO_RESOURCES   # each stage's Locust master pod

    @property
    def spawn_rate(self) -> float:
        return self.spawn_rate_per_injector or float(self.users_per_injector)

    def users_for(self, stage: Stage) -> int:
        """Total users of a stage: its own; for an arrival rate, the pool (maxUsersPerInjector on each of its
        injectors); else usersPerInjector on each."""
        if stage.users is not None:
            return stage.users
        return stage.count * (self.max_users_per_injector if stage.arrival_rate else self.users_per_injector)

    def spawn_rate_for(self, stage: Stage) -> float:
        """An arrival rate's pool starts at once: the first arrival finds it whole."""
        return float(self.users_for(stage)) if stage.arrival_rate else stage.count * self.spawn_rate


@dataclass(frozen=True)
class Stage:
    injectors: int | None     # set after parsing for a stage given in users
    duration: float           # with requests: the stage's time limit (REQUESTS_TIME_LIMIT unless given)
    users: int | None = None  # a stage given in users: spread evenly over its injectors
    requests: int | None = None   # ends once this many requests in all have completed (ab -n)
    arrival_rate: int | None = None   # an open model: tasks started a second, across its injectors
    decided_after: float | None = None   # a rerun of an undecided stage: decided no sooner (stageEnd.min aside)

    @property
    def count(self) -> int:
        """Its injectors, once resolved (resolve_stages)."""
        assert self.injectors is not None, "a stage's injectors are resolved when it is parsed"
        return self.injectors


@dataclass(frozen=True)
class Matrix:
    server: list[str] | None
    workers: list[int] | None
    threads: list[int] | None
    pods: list[int] | None
    worker_class: list[str] | None
    cpu: list[str] | None = None      # each sets the target's CPU request and limit
    memory: list[str] | None = None
    proxy: list[str] | None = None    # PROXIES, or NO_PROXY
    socket: list[str] | None = None


@dataclass(frozen=True)
class Thresholds:
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None
    error_rate: float | None

    def latency_limits_ms(self) -> dict[str, float]:
        # rounded: 0.125625 s is 125.625 ms, not 125.62499999999999, so that a bound equal to its limit holds it
        return {p: round(getattr(self, p) * 1000, 9) for p in PERCENTILES if getattr(self, p) is not None}

    def describe(self) -> str:
        """'p99 <= 300ms, errorRate <= 1%, minRps >= 100'."""
        rps = getattr(self, "min_rps", None)
        return ", ".join([*(f"{p} <= {ms:g}ms" for p, ms in self.latency_limits_ms().items()),
                          *([f"errorRate <= {format_percent(self.error_rate)}"] if self.error_rate is not None else []),
                          *([f"minRps >= {rps:g}"] if rps is not None else [])])


@dataclass(frozen=True)
class Slo(Thresholds):
    """The service level objective: each figure's whole interval must hold it for a stage to pass; `tolerance`: how
    near a limit a figure is at it (a fraction)."""
    min_rps: float | None = None
    tolerance: float = DEFAULT_TOLERANCE


@dataclass(frozen=True)
class Search:
    """A capacity search: stages from `from_` up, doubling until one fails, then bisecting down to `resolution`
    (the bracket's width over its low end)."""
    load: str            # SEARCH_LOADS
    from_: int
    max: int
    resolution: float    # a fraction
    duration: float | None   # each stage's (stageEnd.max's, where given); an undecided one runs again, twice as long
    confirm: bool = True     # the bracket's ends confirmed before Found (not in the spec: goal.maximize's coarse
                             # round does without)

    @property
    def seconds(self) -> float:
        """Each stage's duration, once resolved (resolve_stages)."""
        assert self.duration is not None, "a search's duration is resolved when it is parsed"
        return self.duration

    def stage(self, load: int, duration: float | None = None) -> Stage:
        """A stage at `load`: for `duration`, else each stage's (0 before the search's is resolved)."""
        return load_stage(self.load, load, duration or self.duration or 0.0)

    def most_stages(self) -> int:
        """The most stages one variant's search runs: doubling up to `max`, bisecting down to the resolution
        or to loads one apart (a bracket is at most max / 2 wide), each stage run twice (undecided once), and
        CONFIRMING_STAGES to confirm the bracket's ends (the engine ends an unconfirmed search there)."""
        bisections = min(times_doubled(self.resolution, 1), times_doubled(1, self.max // 2))
        return 2 * (times_doubled(self.from_, self.max) + 1 + bisections) + CONFIRMING_STAGES


DOUBLINGS = 32   # more than any search runs: its loads are at most MAX_STAGE_USERS
CONFIRMING_STAGES = 6   # a pass end's second stage and its rerun if undecided, for up to three pass ends in turn


def times_doubled(start: float, below: float) -> int:
    """ceil(log2(below / start)), counted as the CEL rule counts it (the API server's CEL has no logarithm)."""
    return sum(1 for k in range(DOUBLINGS) if start * 2**k < below)


def load_stage(unit: str, load: int, duration: float) -> Stage:
    """A stage at `load` in `unit` (SEARCH_LOADS)."""
    if unit == "rps":
        return Stage(None, duration, arrival_rate=load)
    return Stage(load, duration) if unit == "injectors" else Stage(None, duration, users=load)


@dataclass(frozen=True)
class Goal:
    """What the best variant is (spec.goal): the cheapest that meets spec.slo at a load (one of rps, users or
    injectors), or the one with the most capacity per core (maximize: capacityPerCore, with spec.search)."""
    rps: int | None = None
    users: int | None = None
    injectors: int | None = None
    maximize: str | None = None   # GOAL_MAXIMA
    prefer: tuple[str, ...] | None = None   # GOAL_PREFERENCES: among equivalent variants; None: DEFAULT_PREFER

    @property
    def load(self) -> str | None:
        return next((unit for unit in GOAL_LOADS if getattr(self, unit) is not None), None)

    @property
    def amount(self) -> int:
        amount: int = getattr(self, self.unit)
        return amount

    @property
    def unit(self) -> str:
        """The load's unit, for a goal at a load."""
        assert self.load is not None, "a goal with maximize has no load"
        return self.load

    def stage(self, duration: float) -> Stage:
        return load_stage(self.unit, self.amount, duration)

    def describe(self) -> str:
        """'2,000 req/s', '300 users', '10 injectors', 'the most capacity per core'."""
        if self.load is None:
            return "the most capacity per core"
        return f"{self.amount:,} " + ("req/s" if self.load == "rps" else self.load)


DECIDED_NOT_BEFORE = 30.0   # seconds: stageEnd.min where unwritten (a shorter stage's length)


@dataclass(frozen=True)
class StageEnd:
    """When a stage ends: at its duration, or (Decided) once its verdict by spec.slo is decided, not before
    `min`; `max`, where given, is every stage's longest, in place of its own duration."""
    when: str = "Duration"
    min: float | None = None    # as written
    max: float | None = None

    @property
    def decided(self) -> bool:
        return self.when == "Decided"

    def shortest(self, length: float) -> float:
        """No stage this long ends as decided sooner: min, or 30 s (its whole length where shorter)."""
        return self.min if self.min is not None else min(DECIDED_NOT_BEFORE, length)


@dataclass(frozen=True)
class Predict:
    """spec.predict: the size at which a scale-out law (results.scale_out) gives the capacity."""
    pods: int | None = None
    workers: int | None = None

    def sizes(self) -> dict[str, int]:
        return {k: v for k, v in (("pods", self.pods), ("workers", self.workers)) if v is not None}


@dataclass(frozen=True)
class History:
    """spec.history: where a run is kept in the history, and with which labels."""
    series: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Autoscale:
    """spec.autoscale: the traffic the recommended variant is to serve (req/s), for the exported autoscaler
    (docs/export.md)."""
    min_load: int
    max_load: int
    headroom: float = 0.2             # a share of a pod's capacity kept free
    growth: float | None = None       # req/s a second the load may rise by
    ready_seconds: float = 30.0       # from a pod's creation to serving


@dataclass(frozen=True)
class Spec:
    target: Target
    redis: Redis
    injectors: Injectors
    warmup: Stage | None
    stages: list[Stage]
    matrix: Matrix | None
    thresholds: Thresholds | None
    cleanup: str
    stage_retries: int = 1
    scheduling_timeout: float = 300.0
    network_policies: bool = True
    repeats: int = 1
    order: str = "Sequential"
    seed: int | None = None
    slo: Slo | None = None
    search: Search | None = None
    stage_end: StageEnd = StageEnd()
    goal: Goal | None = None
    predict: Predict | None = None
    history: History = History()
    autoscale: Autoscale | None = None
    verify: bool = False

    @property
    def objective(self) -> Thresholds | None:
        """What a stage is judged by: spec.slo, or spec.thresholds (never both)."""
        return self.slo or self.thresholds


@dataclass(frozen=True)
class Metadata:
    name: str
    namespace: str | None


@dataclass(frozen=True)
class Variant:
    """One combination of matrix values: what the target runs with."""
    index: int
    server: str
    pods: int
    workers: int | None        # None: a Deployment target's own, left as it is
    threads: int | None
    worker_class: str | None   # of a server with worker classes (api.servers); None for every other server
    resources: Resources = NO_RESOURCES   # the target container's: the spec's, with the matrix's cpu and memory
    proxy: str | None = None   # the front proxy's server; None: none
    socket: str | None = None  # between the proxy and the WSGI server; None without a proxy
    interface: str | None = None   # of a server that serves several (spec.target.interface); None for the others

    @property
    def cpu(self) -> str | None:
        """Each target pod's CPU limit, where one is set."""
        return self.resources.limits.cpu

    @property
    def memory(self) -> str | None:
        return self.resources.limits.memory

    def settings(self) -> Settings:
        settings: Settings = {"server": self.server, "pods": self.pods, "workers": self.workers,
                              "threads": self.threads, "workerClass": self.worker_class}
        limits = self.resources.limits
        if limits.cpu is not None:
            settings["cpu"] = limits.cpu
        if limits.memory is not None:
            settings["memory"] = limits.memory
        if self.proxy:
            settings["proxy"], settings["socket"] = self.proxy, self.socket or "tcp"
        if self.interface:
            settings["interface"] = self.interface
        return settings

    def label(self) -> str:
        return " ".join([*([f"{self.proxy}/{self.socket}"] if self.proxy else []), self.server,
                         *([self.interface] if self.interface else []), f"pods={self.pods}",
                         *(f"{k}={v}" for k, v in (("workers", self.workers), ("threads", self.threads)) if v),
                         *([self.worker_class] if self.worker_class else []),
                         *(f"{k}={v}" for k, v in self.resources.limits.items().items())])


@dataclass(frozen=True)
class Experiment:
    metadata: Metadata
    spec: Spec
    source: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.metadata.name

    def variants(self) -> list[Variant]:
        return list(self._variants)

    @cached_property
    def _variants(self) -> tuple[Variant, ...]:
        """The matrix's variants, once an experiment (a planner asks for them at every step)."""
        m, t = self.spec.matrix, self.spec.target
        axes: dict[str, Sequence[Any]] = {
            "server": (m and m.server) or [server_of(t)],
            "workers": (m and m.workers) or [t.workers],
            "threads": (m and m.threads) or [t.threads],
            "pods": (m and m.pods) or [t.pods],
            "worker_class": (m and m.worker_class) or [t.worker_class],
            "cpu": (m and m.cpu) or [None],
            "memory": (m and m.memory) or [None],
            "proxy": (m and m.proxy) or [t.proxy.server if t.proxy else NO_PROXY],
            "socket": (m and m.socket) or [t.proxy.socket if t.proxy else "tcp"],
        }
        variants: list[Variant] = []
        seen: set[Variant] = set()
        for combo in itertools.product(*axes.values()):
            v = dict(zip(axes, combo))
            entry = BY_NAME.get(v["server"])   # None: a target's own command
            if entry is None or not entry.worker_classes:
                v["worker_class"] = None      # a matrix's worker classes are for the servers that have them
            if t.deployment is None:   # a Deployment target keeps what it is not told
                if v["workers"] is None:
                    v["workers"] = entry.default_workers() if entry else 2
                if entry is not None and entry.worker_classes:
                    v["worker_class"] = v["worker_class"] or entry.classes[0]
                one_at_a_time = entry is not None and entry.one_at_a_time(v["worker_class"])
                v["threads"] = v["threads"] or (1 if one_at_a_time else DEFAULT_THREADS)
            if v["proxy"] == NO_PROXY:
                v["proxy"] = v["socket"] = None
            if entry is not None and len(entry.interfaces) > 1:
                v["interface"] = t.interface or entry.interfaces[0]
            v["resources"] = t.resources.with_value("cpu", v.pop("cpu")).with_value("memory", v.pop("memory"))
            variant = Variant(index=len(variants), **v)
            if (unnumbered := replace(variant, index=0)) not in seen:
                seen.add(unnumbered)
                variants.append(variant)
        return tuple(variants)

    def scaled(self, *, stage_duration: float | None = None, warmup_duration: float | None = None,
               users_scale: float | None = None) -> Experiment:
        """Shrinks an experiment to a machine: every stage lasts `stage_duration`; users and spawn rate
        per injector, and the users of a stage given in users, are multiplied by `users_scale`. The
        source says so too, so that a result file's spec is what ran."""
        spec = self.spec
        source = copy.deepcopy(self.source)
        written = source.setdefault("spec", {})
        if stage_duration is not None:
            spec = replace(spec, stages=[replace(s, duration=stage_duration) for s in spec.stages])
            if "stages" in written:
                written["stages"] = [{**s, "duration": format_duration(stage_duration)} for s in written["stages"]]
            if spec.search is not None:
                spec = replace(spec, search=replace(spec.search, duration=stage_duration))
                written["search"]["duration"] = format_duration(stage_duration)
            end = spec.stage_end
            if end.max is not None:   # the stages' longest: what the option sets
                spec = replace(spec, stage_end=replace(end, max=stage_duration))
                written["stageEnd"]["max"] = format_duration(stage_duration)
            if end.decided and end.min is not None and end.min > stage_duration:
                spec = replace(spec, stage_end=replace(spec.stage_end, min=stage_duration))
                written["stageEnd"]["min"] = format_duration(stage_duration)
        if warmup_duration is not None and spec.warmup is not None:
            spec = replace(spec, warmup=replace(spec.warmup, duration=warmup_duration))
            written["warmup"]["duration"] = format_duration(warmup_duration)
        if users_scale is not None:
            inj = spec.injectors
            spec = replace(spec, injectors=replace(
                inj,
                users_per_injector=max(1, round(inj.users_per_injector * users_scale)),
                spawn_rate_per_injector=max(1, round(inj.spawn_rate * users_scale))))
            written.setdefault("injectors", {}).update(usersPerInjector=spec.injectors.users_per_injector,
                                                       spawnRatePerInjector=spec.injectors.spawn_rate_per_injector)
            # a stage given in users keeps injectors.maxUsersPerInjector, so fewer users may need fewer injectors
            spec = resolve_stages(replace(spec, stages=[
                s if s.users is None else replace(s, users=max(1, round(s.users * users_scale)), injectors=None)
                for s in spec.stages]))
            for stage, scaled_stage in zip(written.get("stages", []), spec.stages):
                if "users" in stage:
                    stage["users"] = scaled_stage.users
            if spec.search is not None and spec.search.load == "users":
                start = max(1, round(spec.search.from_ * users_scale))
                scaled = replace(spec.search, from_=start, max=max(start + 1, round(spec.search.max * users_scale)))
                spec = replace(spec, search=scaled)
                written["search"].update({"from": scaled.from_, "max": scaled.max})
            if spec.goal is not None and spec.goal.users is not None:
                users = max(1, round(spec.goal.users * users_scale))
                spec = replace(spec, goal=replace(spec.goal, users=users))
                written["goal"]["users"] = users
        return replace(self, spec=spec, source=source)


def injectors_of(stage: Stage, injectors: Injectors) -> int:
    if stage.injectors is not None:
        return stage.injectors
    if stage.users is not None:
        return math.ceil(stage.users / injectors.max_users_per_injector)
    return math.ceil((stage.arrival_rate or 0) / injectors.max_rate_per_injector)


def resolve_stage(stage: Stage, injectors: Injectors) -> Stage:
    """A stage given in users or in arrivalRate alone gets its injectors, and one given in requests alone its time
    limit."""
    if stage.duration is None:
        stage = replace(stage, duration=REQUESTS_TIME_LIMIT)
    return stage if stage.injectors is not None else replace(stage, injectors=injectors_of(stage, injectors))


def resolve_stages(spec: Spec) -> Spec:
    """Also: stageEnd.max, where given, is every stage's length (a search's too)."""
    longest = spec.stage_end.max if spec.stage_end.decided else None
    stages = [resolve_stage(s, spec.injectors) for s in spec.stages or []]
    if longest is not None:
        stages = [replace(s, duration=longest) for s in stages]
        spec = replace(spec, search=spec.search and replace(spec.search, duration=longest))
    return replace(spec, stages=stages, warmup=spec.warmup and resolve_stage(spec.warmup, spec.injectors))


def variant_count(m: Matrix | None) -> int:
    """At most this many variants: the product of the axes (a worker class axis adds none to a server without)."""
    n = 1
    axes = (m.server, m.workers, m.threads, m.pods, m.worker_class, m.cpu, m.memory, m.proxy, m.socket) if m else ()
    for axis in axes:
        n *= len(axis or [1])
    return n


def server_of(target: Target) -> str:
    return CUSTOM_SERVER if target.command else target.server or DEFAULT_SERVER


def command_placeholders(arg: str) -> list[str]:
    """The placeholders of one argument of spec.target.command; raises ValueError on a stray brace."""
    return [name for _, name, _, _ in string.Formatter().parse(arg) if name is not None]

