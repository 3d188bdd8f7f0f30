"""The LoadExperiment model: the one parser and validator for experiment YAML,
shared by the local engine, the operator and the CRD generator."""

from __future__ import annotations

import copy
import itertools
import math
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .schema import (Bool, Duration, Int, ListOf, MapOf, Obj, Percent, Problems, Rule, Str,
                     ValidationError, format_duration)

API_GROUP = "loadstage.io"
API_VERSION = "v1alpha1"
KIND = "LoadExperiment"
WORKER_CLASSES = ("gthread", "sync", "gevent")
SERVERS = ("gunicorn", "uwsgi", "waitress", "cheroot", "granian")
SINGLE_PROCESS_SERVERS = ("waitress", "cheroot")   # threads in one process: no worker processes
DEFAULT_SERVER = "gunicorn"
CUSTOM_SERVER = "command"                           # the server of a target given as spec.target.command
COMMAND_PLACEHOLDERS = ("app", "host", "port", "bind", "workers", "threads")
DEFAULT_RUNNER_APP = "runner_app.app:app"
PERCENTILES = ("p50", "p90", "p95", "p99", "p999")
MAX_VARIANTS = 100
MAX_VARIANT_STAGES = 500    # variants x stages: what keeps the status well under etcd's object limit
MAX_INJECTORS = 1000
MAX_STAGE_USERS = 1_000_000
DEFAULT_MAX_USERS_PER_INJECTOR = 100
CLEANUP_POLICIES = ("Delete", "Keep", "KeepOnFailure")
ON_LOST = ("Fail", "Continue")
NAME_PATTERN = r"[a-z]([-a-z0-9]*[a-z0-9])?"
NAME_MAX = 40


@dataclass(frozen=True)
class Target:
    image: str | None
    app: str
    pods: int
    server: str | None
    workers: int | None       # None: the server's default (1 for a single-process server, else 2)
    threads: int
    worker_class: str | None  # gunicorn only; None: gthread
    command: list[str] | None
    env: dict[str, str]
    ready_timeout: float


@dataclass(frozen=True)
class SecretKey:
    name: str
    key: str


@dataclass(frozen=True)
class Redis:
    deploy: bool | None
    url: str | None
    image: str | None
    password_secret: SecretKey | None

    @property
    def deployed(self) -> bool:
        return self.url is None


@dataclass(frozen=True)
class WaitTime:
    min: float
    max: float


@dataclass(frozen=True)
class ConfigMapKey:
    name: str
    key: str


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
    max_users_per_injector: int = 100

    @property
    def spawn_rate(self) -> float:
        return self.spawn_rate_per_injector or float(self.users_per_injector)

    def users_for(self, stage: "Stage") -> int:
        """Total users of a stage: its own, or usersPerInjector on each of its injectors."""
        return stage.users if stage.users is not None else stage.injectors * self.users_per_injector

    def spawn_rate_for(self, stage: "Stage") -> float:
        return stage.injectors * self.spawn_rate


@dataclass(frozen=True)
class Stage:
    injectors: int | None     # set after parsing for a stage given in users
    duration: float
    users: int | None = None  # a stage given in users: spread evenly over its injectors


@dataclass(frozen=True)
class Matrix:
    server: list[str] | None
    workers: list[int] | None
    threads: list[int] | None
    pods: list[int] | None
    worker_class: list[str] | None


@dataclass(frozen=True)
class Thresholds:
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None
    error_rate: float | None

    def latency_limits_ms(self) -> dict[str, float]:
        return {p: getattr(self, p) * 1000 for p in PERCENTILES if getattr(self, p) is not None}


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
    workers: int
    threads: int
    worker_class: str | None   # gunicorn's; None for every other server

    def settings(self) -> dict:
        return {"server": self.server, "pods": self.pods, "workers": self.workers, "threads": self.threads,
                "workerClass": self.worker_class}

    def label(self) -> str:
        return " ".join([self.server, f"pods={self.pods}", f"workers={self.workers}", f"threads={self.threads}",
                         *([self.worker_class] if self.worker_class else [])])


@dataclass(frozen=True)
class Experiment:
    metadata: Metadata
    spec: Spec
    source: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.metadata.name

    def variants(self) -> list[Variant]:
        m, t = self.spec.matrix, self.spec.target
        axes = {
            "server": (m and m.server) or [server_of(t)],
            "workers": (m and m.workers) or [t.workers],
            "threads": (m and m.threads) or [t.threads],
            "pods": (m and m.pods) or [t.pods],
            "worker_class": (m and m.worker_class) or [t.worker_class],
        }
        variants = []
        for i, combo in enumerate(itertools.product(*axes.values())):
            v = dict(zip(axes, combo))
            if v["workers"] is None:
                v["workers"] = 1 if v["server"] in SINGLE_PROCESS_SERVERS else 2
            if v["server"] == "gunicorn":
                v["worker_class"] = v["worker_class"] or "gthread"
            variants.append(Variant(index=i, **v))
        return variants

    def scaled(self, *, stage_duration: float | None = None, warmup_duration: float | None = None,
               users_scale: float | None = None) -> "Experiment":
        """Shrinks an experiment to a machine: every stage lasts `stage_duration`; users and spawn rate
        per injector, and the users of a stage given in users, are multiplied by `users_scale`. The
        source says so too, so that a result file's spec is what ran."""
        spec = self.spec
        source = copy.deepcopy(self.source)
        written = source.setdefault("spec", {})
        if stage_duration is not None:
            spec = replace(spec, stages=[replace(s, duration=stage_duration) for s in spec.stages])
            written["stages"] = [{**s, "duration": format_duration(stage_duration)} for s in written["stages"]]
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
            spec = _resolve_injectors(replace(spec, stages=[
                s if s.users is None else replace(s, users=max(1, round(s.users * users_scale)), injectors=None)
                for s in spec.stages]))
            for stage, scaled_stage in zip(written["stages"], spec.stages):
                if "users" in stage:
                    stage["users"] = scaled_stage.users
        return replace(self, spec=spec, source=source)


def _injectors_of(stage: Stage, injectors: Injectors) -> int:
    return stage.injectors if stage.injectors is not None else \
        math.ceil(stage.users / injectors.max_users_per_injector)


def _resolve_injectors(spec: Spec) -> Spec:
    """Every stage given in users gets its injectors."""
    def resolved(stage: Stage | None) -> Stage | None:
        return stage if stage is None or stage.injectors is not None else \
            replace(stage, injectors=_injectors_of(stage, spec.injectors))
    return replace(spec, stages=[resolved(s) for s in spec.stages], warmup=resolved(spec.warmup))


def _no_duplicates(values) -> bool:
    return values is None or len(values) == len(set(values))


def _variant_count(m: Matrix | None) -> int:
    n = 1
    for axis in (m.server, m.workers, m.threads, m.pods, m.worker_class) if m else ():
        n *= len(axis or [1])
    return n


_CEL_MAX_USERS = ("(has(self.injectors) && has(self.injectors.maxUsersPerInjector) ? "
                  f"self.injectors.maxUsersPerInjector : {DEFAULT_MAX_USERS_PER_INJECTOR})")
_CEL_USERS_FIT = "!has({s}.users) || ({s}.users + %s - 1) / %s <= %d" % (_CEL_MAX_USERS, _CEL_MAX_USERS,
                                                                          MAX_INJECTORS)
_CEL_VARIANTS = ("(has(self.{m}workers) ? size(self.{m}workers) : 1) * (has(self.{m}threads) ? size(self.{m}threads) : 1)"
                 " * (has(self.{m}pods) ? size(self.{m}pods) : 1) * (has(self.{m}workerClass) ? size(self.{m}workerClass) : 1)"
                 " * (has(self.{m}server) ? size(self.{m}server) : 1)")


_CEL_SERVERS = ("(has(self.matrix) && has(self.matrix.server) ? self.matrix.server : "
                "[has(self.target) && has(self.target.server) ? self.target.server : 'gunicorn'])")
_CEL_HAS_WORKER_CLASS = ("(has(self.matrix) && has(self.matrix.workerClass)) || "
                         "(has(self.target) && has(self.target.workerClass))")
_CEL_HAS_WORKERS = "(has(self.matrix) && has(self.matrix.workers)) || (has(self.target) && has(self.target.workers))"
_CEL_WORKERS = "(has(self.matrix) && has(self.matrix.workers) ? self.matrix.workers : [self.target.workers])"


def server_of(target: Target) -> str:
    return CUSTOM_SERVER if target.command else target.server or DEFAULT_SERVER


def command_placeholders(arg: str) -> list[str]:
    """The placeholders of one argument of spec.target.command; raises ValueError on a stray brace."""
    return [name for _, name, _, _ in string.Formatter().parse(arg) if name is not None]


def server_problems(spec: Spec) -> list[tuple[str, str]]:
    """What the chosen servers cannot express, each naming the field and the server."""
    t, m = spec.target, spec.matrix
    servers = (m and m.server) or [server_of(t)]
    problems = []
    class_field = "spec.matrix.workerClass" if m and m.worker_class else "spec.target.workerClass"
    server_field = "spec.matrix.server" if m and m.server else "spec.target.server"
    if (m and m.worker_class) or t.worker_class:
        for server in servers:
            if server not in ("gunicorn", CUSTOM_SERVER):
                problems.append((class_field, f"a worker class is a gunicorn setting; {server} "
                                              f"({server_field}) has none"))
    workers = (m and m.workers) or ([t.workers] if t.workers is not None else [])
    workers_field = "spec.matrix.workers" if m and m.workers else "spec.target.workers"
    for server in servers:
        if server in SINGLE_PROCESS_SERVERS and any(w != 1 for w in workers):
            problems.append((workers_field, f"{server} ({server_field}) runs one process, so workers must be 1, "
                                            f"got {', '.join(map(str, workers))}; use threads or pods instead"))
    if t.command:
        for name, value in (("spec.target.server", t.server), ("spec.target.workerClass", t.worker_class),
                            ("spec.matrix.server", m and m.server),
                            ("spec.matrix.workerClass", m and m.worker_class)):
            if value:
                problems.append((name, "spec.target.command replaces the server: set one of them, not both"))
        problems += _command_problems(t.command)
    return problems


def _command_problems(command: list[str]) -> list[tuple[str, str]]:
    problems, used = [], set()
    for i, arg in enumerate(command):
        path = f"spec.target.command[{i}]"
        try:
            names = command_placeholders(arg)
        except ValueError as error:
            problems.append((path, f"{error} in {arg!r}; write {{{{ and }}}} for a literal brace"))
            continue
        for name in names:
            if name not in COMMAND_PLACEHOLDERS:
                problems.append((path, f"unknown placeholder {{{name}}} (known: "
                                       f"{', '.join(f'{{{p}}}' for p in COMMAND_PLACEHOLDERS)})"))
        used.update(names)
    if not problems and not used & {"port", "bind"}:
        problems.append(("spec.target.command", "must listen on {port} or {bind}: the target's port comes "
                                                "from loadstage"))
    return problems


_image = Str("Container image; defaults to the image the operator was installed with.")

TARGET = Obj(Target, "The system under test: a WSGI app, served by the server you choose.", {
    "image": _image,
    "app": Str("WSGI application that the server serves (module:callable).",
               pattern=r"[A-Za-z_][\w.]*:[A-Za-z_][\w.()]*", pattern_hint="module:callable",
               default=DEFAULT_RUNNER_APP),
    "pods": Int("Number of target pods (local engine: server instances).", minimum=1, maximum=500,
                default=1),
    "server": Str("The WSGI server: gunicorn (the default), uwsgi, waitress, cheroot or granian. workers and "
                  "threads map onto each server's own settings.", enum=SERVERS),
    "workers": Int("Worker processes per pod (gunicorn, uwsgi and granian; waitress and cheroot run one "
                   "process). Defaults to 2, or 1 for waitress and cheroot.", minimum=1, maximum=64),
    "threads": Int("Threads per worker process (gunicorn's gthread class, uwsgi's threads, granian's blocking "
                   "threads, waitress's and cheroot's thread pool).", minimum=1, maximum=64, default=2),
    "workerClass": Str("Gunicorn worker class (gunicorn only); defaults to gthread.", enum=WORKER_CLASSES),
    "command": ListOf("Any other server: its command line, instead of server. Placeholders: "
                      + ", ".join(f"{{{p}}}" for p in COMMAND_PLACEHOLDERS)
                      + " ({bind} is host:port); it must listen on {port} or {bind}. Write {{ and }} for a "
                        "literal brace.", Str("One argument.", max_length=256), min_items=1, max_items=50),
    "env": MapOf("Extra environment variables for the target.", Str("Value."),
                 key_pattern=r"[A-Za-z_][A-Za-z0-9_]*", key_hint="an environment variable name", default={}),
    "readyTimeout": Duration("How long the target may take to become ready before the experiment fails.",
                             minimum="1s", maximum="1h", default="5m"),
}, default={})

REDIS = Obj(Redis, "The Redis the target keeps its sessions in: deployed per variant, or external.", {
    "deploy": Bool("Deploy a fresh Redis for each variant (the default when no url is given)."),
    "url": Str("URL of an external Redis, e.g. redis://redis.example:6379/0.",
               pattern=r"rediss?://.+", pattern_hint="a redis:// or rediss:// URL"),
    "image": _image,
    "passwordSecret": Obj(SecretKey, "Secret key holding the Redis password (cluster only). A deployed Redis "
                                     "requires it; the target and the sampler authenticate with it.", {
        "name": Str("Secret name.", max_length=253),
        "key": Str("Key in the Secret.", default="password", max_length=253),
    }, required=["name"]),
}, rules=[
    Rule(lambda r: not (r.deploy and r.url), "set either deploy: true or url, not both",
         cel="!(has(self.deploy) && self.deploy && has(self.url))"),
    Rule(lambda r: not (r.deploy is False and r.url is None), "deploy: false needs a url",
         cel="!has(self.deploy) || self.deploy || has(self.url)"),
], default={})

WAIT_TIME = Obj(WaitTime, "Wait between one user's tasks, drawn uniformly from [min, max].", {
    "min": Duration("Shortest wait.", maximum="1h", default="1s"),
    "max": Duration("Longest wait.", maximum="1h", default="2s"),
}, rules=[Rule(lambda w: w.min <= w.max, "min must be <= max",
               cel="!has(self.min) || !has(self.max) || duration(self.min) <= duration(self.max)")], default={})

LOCUSTFILE = Obj(Locustfile, "A locustfile of your own instead of the built-in scenario.", {
    "path": Str("Path of the locustfile (local engine; relative to the experiment file)."),
    "configMap": Obj(ConfigMapKey, "ConfigMap key holding the locustfile (operator).", {
        "name": Str("ConfigMap name."),
        "key": Str("Key in the ConfigMap.", default="locustfile.py"),
    }, required=["name"]),
}, rules=[Rule(lambda l: (l.path is None) != (l.config_map is None), "set exactly one of path or configMap",
               cel="has(self.path) != has(self.configMap)")])

INJECTORS = Obj(Injectors, "The Locust injectors: one Locust worker process per injector.", {
    "image": _image,
    "usersPerInjector": Int("Simulated users per injector.", minimum=1, maximum=100000, default=10),
    "maxUsersPerInjector": Int("Stages given in users: the most users one injector runs; such a stage gets "
                               "ceil(users / maxUsersPerInjector) injectors.", minimum=1, maximum=100000,
                               default=DEFAULT_MAX_USERS_PER_INJECTOR),
    "spawnRatePerInjector": Int("Users started per second per injector; defaults to usersPerInjector.",
                                minimum=1, maximum=100000),
    "waitTime": WAIT_TIME,
    "pacing": Duration("Optional open model: every user starts a task on this fixed schedule (e.g. 1s) instead "
                       "of waiting waitTime between tasks. Latency is then also measured from each task's "
                       "intended start, as wrk2 does, so queueing that a closed model hides shows.",
                       minimum="10ms", maximum="1h"),
    "scenario": Str("Built-in scenario.", enum=("respondent",)),
    "locustfile": LOCUSTFILE,
    "onLost": Str("What an injector that dies, is deleted or is evicted mid-stage does to its stage: Fail it "
                  "(naming the injector), or Continue with the remaining injectors and record the loss.",
                  enum=ON_LOST, default="Fail"),
}, rules=[Rule(lambda i: not (i.scenario and i.locustfile), "set either scenario or locustfile, not both",
               cel="!(has(self.scenario) && has(self.locustfile))")], default={})

STAGE = Obj(Stage, "One step of the ladder: this many injectors, or this many users, for this long.", {
    "injectors": Int("Number of Locust injectors (worker processes or pods), each running usersPerInjector "
                     "users. Set this or users.", minimum=1, maximum=MAX_INJECTORS),
    "users": Int("Total simulated users, spread evenly over ceil(users / injectors.maxUsersPerInjector) "
                 "injectors. Set this or injectors.", minimum=1, maximum=MAX_STAGE_USERS),
    "duration": Duration("How long the stage runs, e.g. 90s or 20m.", minimum="1s", maximum="24h"),
}, required=["duration"], rules=[
    Rule(lambda s: (s.injectors is None) != (s.users is None), "set exactly one of injectors or users",
         cel="has(self.injectors) != has(self.users)")])

MATRIX = Obj(Matrix, "Optional: run every stage once per combination of these values.", {
    "server": ListOf("WSGI servers.", Str("", enum=SERVERS), min_items=1, max_items=len(SERVERS), unique=True),
    "workers": ListOf("Worker processes per pod.", Int("", minimum=1, maximum=64),
                      min_items=1, max_items=20, unique=True),
    "threads": ListOf("Threads per worker.", Int("", minimum=1, maximum=64),
                      min_items=1, max_items=20, unique=True),
    "pods": ListOf("Target pod counts.", Int("", minimum=1, maximum=500),
                   min_items=1, max_items=20, unique=True),
    "workerClass": ListOf("Gunicorn worker classes.", Str("", enum=WORKER_CLASSES),
                          min_items=1, max_items=3, unique=True),
}, rules=[Rule(lambda m: _variant_count(m) <= MAX_VARIANTS,
               f"at most {MAX_VARIANTS} variants (the product of all list lengths)",
               cel=f"{_CEL_VARIANTS.format(m='')} <= {MAX_VARIANTS}")])

_latency = "Highest acceptable {} latency, e.g. 1000ms."
THRESHOLDS = Obj(Thresholds, "Optional: pass/fail limits checked for every stage.", {
    **{p: Duration(_latency.format(p), maximum="1h") for p in PERCENTILES},
    "errorRate": Percent("Highest acceptable share of failed requests, e.g. '1%'."),
})

SPEC = Obj(Spec, "What to deploy and how to load it.", {
    "target": TARGET,
    "redis": REDIS,
    "injectors": INJECTORS,
    "warmup": Obj(Stage, "Optional stage run before each variant's stages; excluded from results.",
                  STAGE.fields, required=["duration"], rules=STAGE.rules),
    "stages": ListOf("The ladder of stages, run in order.", STAGE, min_items=1, max_items=50),
    "matrix": MATRIX,
    "thresholds": THRESHOLDS,
    "cleanup": Str("What happens to the target and the injector Jobs when the experiment ends: Delete them, "
                   "Keep them, or KeepOnFailure.", enum=CLEANUP_POLICIES, default="Delete"),
}, required=["stages"], rules=[
    Rule(None, "spec is immutable once created; delete the experiment and create it again",
         cel="self == oldSelf"),
    Rule(lambda s: all(_injectors_of(stage, s.injectors) <= MAX_INJECTORS
                       for stage in [*s.stages, *([s.warmup] if s.warmup else [])]),
         f"a stage given in users needs at most {MAX_INJECTORS} injectors: users / injectors.maxUsersPerInjector "
         f"must be <= {MAX_INJECTORS}",
         cel=f"self.stages.all(s, {_CEL_USERS_FIT.format(s='s')}) && "
             f"(!has(self.warmup) || {_CEL_USERS_FIT.format(s='self.warmup')})"),
    Rule(lambda s: _variant_count(s.matrix) * len(s.stages) <= MAX_VARIANT_STAGES,
         f"at most {MAX_VARIANT_STAGES} stages in all (variants x stages), so that the status stays small",
         cel=f"(has(self.matrix) ? {_CEL_VARIANTS.format(m='matrix.')} : 1) * size(self.stages) "
             f"<= {MAX_VARIANT_STAGES}"),
    # the API server's side of server_problems()
    Rule(None, "a worker class (spec.target.workerClass or spec.matrix.workerClass) is a gunicorn setting: "
               "every server must be gunicorn", cel=f"!({_CEL_HAS_WORKER_CLASS}) || {_CEL_SERVERS}.all(s, s == 'gunicorn')"),
    Rule(None, "waitress and cheroot run one process: workers (spec.target.workers or spec.matrix.workers) "
               "must be 1 when they are among the servers",
         cel=f"!({_CEL_HAS_WORKERS}) || !{_CEL_SERVERS}.exists(s, s in {list(SINGLE_PROCESS_SERVERS)}) || "
             f"{_CEL_WORKERS}.all(w, w == 1)"),
    Rule(None, "spec.target.command replaces the server: set none of spec.target.server, spec.target.workerClass, "
               "spec.matrix.server or spec.matrix.workerClass with it",
         cel="!has(self.target) || !has(self.target.command) || (!has(self.target.server) && "
             "!has(self.target.workerClass) && (!has(self.matrix) || (!has(self.matrix.server) && "
             "!has(self.matrix.workerClass))))"),
    Rule(None, "spec.target.command must listen on {port} or {bind}, and use only the placeholders "
               + ", ".join(f"{{{p}}}" for p in COMMAND_PLACEHOLDERS),
         cel="!has(self.target) || !has(self.target.command) || "
             "(self.target.command.exists(a, a.replace('{{', '').contains('{port}') || "
             "a.replace('{{', '').contains('{bind}')) && self.target.command.all(a, "
             "a.replace('{{', '').replace('}}', '').findAll('\\\\{[^{}]*\\\\}').all(p, p in "
             f"{[f'{{{p}}}' for p in COMMAND_PLACEHOLDERS]})))"),
])

METADATA = Obj(Metadata, "", {
    "name": Str("", pattern=NAME_PATTERN, pattern_hint="a lowercase DNS label starting with a letter", max_length=NAME_MAX),
    "namespace": Str(""),
}, required=["name"])


def _tolerant_metadata(raw: Any) -> dict:
    # Kubernetes adds many fields to metadata; the model reads only name and namespace.
    if isinstance(raw, dict):
        return {k: raw[k] for k in ("name", "namespace") if k in raw}
    return raw


def parse_experiment(doc: Any) -> Experiment:
    """Parses a LoadExperiment document; raises ValidationError naming every bad field."""
    problems = Problems()
    if not isinstance(doc, dict):
        raise ValidationError([("(document)", f"must be a LoadExperiment mapping, got {type(doc).__name__}")])
    expected = f"{API_GROUP}/{API_VERSION}"
    if doc.get("apiVersion") != expected:
        problems.add("apiVersion", f"must be {expected}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        problems.add("kind", f"must be {KIND}, got {doc.get('kind')!r}")
    for key in doc:
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            problems.add(str(key), "unknown field (known: apiVersion, kind, metadata, spec)")
    if "metadata" not in doc:
        problems.add("metadata", "is required")
    if "spec" not in doc:
        problems.add("spec", "is required")
    metadata = METADATA.parse(_tolerant_metadata(doc.get("metadata")), "metadata", problems)
    spec = SPEC.parse(doc.get("spec"), "spec", problems) if "spec" in doc else None
    problems.raise_if_any()
    for path, message in server_problems(spec):
        problems.add(path, message)
    problems.raise_if_any()
    return Experiment(metadata=metadata, spec=_resolve_injectors(spec), source=doc)


def load_experiment_file(path: str | Path) -> Experiment:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ValidationError([(str(path), f"cannot read: {e.strerror}")]) from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ValidationError([(where, f"not valid YAML: {getattr(e, 'problem', e)}")]) from None
    if len(docs) != 1:
        raise ValidationError([(str(path), f"must hold exactly one LoadExperiment document, found {len(docs)}")])
    experiment = parse_experiment(docs[0])
    lf = experiment.spec.injectors.locustfile
    if lf is not None and lf.path is not None:
        resolved = (path.parent / lf.path).resolve()
        if not resolved.is_file():
            raise ValidationError([("spec.injectors.locustfile.path", f"file not found: {resolved}")])
        experiment = replace(experiment, spec=replace(experiment.spec, injectors=replace(
            experiment.spec.injectors, locustfile=replace(lf, path=str(resolved)))))
    return experiment
