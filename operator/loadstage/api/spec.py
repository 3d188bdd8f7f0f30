"""The LoadExperiment spec as a schema tree: the one source of the parser's rules, the CRD's
OpenAPI schema and CEL rules, and the field reference in docs/. (It is over 300 lines because it is that one
declaration: every field with its description, beside the CEL rules that check it.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadstage.api import servers as entries
from loadstage.api.names import NAME_MAX, NAME_PATTERN, NAME_SUBDOMAIN
from loadstage.api.quantities import Duration, Percent, Quantity, cpu_cores, format_duration, memory_bytes
from loadstage.api.schema import Bool, Int, ListOf, MapOf, Num, Obj, Rule, Str
from loadstage.api.servers import (
    ASGI,
    ASGI_RUNNER_APP,
    CHOOSE_INTERFACE,
    DEFAULT_SERVER,
    INTERFACES,
    LISTEN_BACKLOG,
    ONE_AT_A_TIME_CLASSES,
    ONE_PROCESS,
    ONE_THREAD,
    PROXIED_ONLY,
    SERVER_WORKER_CLASSES,
    SERVERS,
    SYNC_THREADS_ENV,
    TCP_ONLY,
    WORKER_CLASSES,
    WSGI,
    listing,
)
from loadstage.api.servers import kind as servers_kind
from loadstage.api.types import (
    CLEANUP_POLICIES,
    COMMAND_PLACEHOLDERS,
    CONFIRMING_STAGES,
    DECIDED_NOT_BEFORE,
    DEFAULT_COUNTER,
    DEFAULT_MAX_RATE_PER_INJECTOR,
    DEFAULT_MAX_USERS_PER_INJECTOR,
    DEFAULT_METRICS_PATH,
    DEFAULT_POD_RESOURCES,
    DEFAULT_PREFER,
    DEFAULT_RUNNER_APP,
    DEFAULT_TOLERANCE,
    DEPLOYMENT_MODES,
    DOUBLINGS,
    GOAL_LOADS,
    GOAL_MAXIMA,
    GOAL_PREFERENCES,
    MAX_ARRIVAL_RATE,
    MAX_GOAL_VARIANTS,
    MAX_INJECTORS,
    MAX_REPEATS,
    MAX_SEED,
    MAX_STAGE_REQUESTS,
    MAX_STAGE_USERS,
    MAX_VARIANT_STAGES,
    MAX_VARIANTS,
    NO_PROXY,
    ON_LOST,
    ORDERS,
    PERCENTILES,
    PROXIES,
    REQUESTS_TIME_LIMIT,
    SEARCH_LOADS,
    SOCKETS,
    STAGE_ENDS,
    Autoscale,
    ConfigMapKey,
    DeploymentTarget,
    Exec,
    Goal,
    History,
    HttpGet,
    Injectors,
    IpBlock,
    LabelSelector,
    Locustfile,
    Matrix,
    Metadata,
    Peer,
    PodResources,
    Predict,
    Probe,
    Proxy,
    Redis,
    ResourceList,
    Resources,
    Search,
    SecretKey,
    Slo,
    Spec,
    Stage,
    StageEnd,
    Target,
    TargetMetrics,
    TcpSocket,
    Thresholds,
    WaitTime,
    injectors_of,
    server_of,
    variant_count,
)

_CEL_MAX_USERS = ("(has(self.injectors) && has(self.injectors.maxUsersPerInjector) ? "
                  f"self.injectors.maxUsersPerInjector : {DEFAULT_MAX_USERS_PER_INJECTOR})")
_CEL_MAX_RATE = ("(has(self.injectors) && has(self.injectors.maxRatePerInjector) ? "
                 f"self.injectors.maxRatePerInjector : {DEFAULT_MAX_RATE_PER_INJECTOR})")
_CEL_FITS = "({load} + %s - 1) / %s <= %d"
_CEL_USERS_FIT = _CEL_FITS % (_CEL_MAX_USERS, _CEL_MAX_USERS, MAX_INJECTORS)
_CEL_RATE_FITS = _CEL_FITS % (_CEL_MAX_RATE, _CEL_MAX_RATE, MAX_INJECTORS)
_CEL_STAGE_FITS = ("(!has({s}.users) || " + _CEL_USERS_FIT.format(load="{s}.users") + ") && (has({s}.injectors) || "
                   "!has({s}.arrivalRate) || " + _CEL_RATE_FITS.format(load="{s}.arrivalRate") + ")")
_CEL_VARIANTS = ("(has(self.{m}workers) ? size(self.{m}workers) : 1)"
                 " * (has(self.{m}threads) ? size(self.{m}threads) : 1)"
                 " * (has(self.{m}pods) ? size(self.{m}pods) : 1)"
                 " * (has(self.{m}workerClass) ? size(self.{m}workerClass) : 1)"
                 " * (has(self.{m}server) ? size(self.{m}server) : 1) * (has(self.{m}cpu) ? size(self.{m}cpu) : 1)"
                 " * (has(self.{m}memory) ? size(self.{m}memory) : 1) * (has(self.{m}proxy) ? size(self.{m}proxy) : 1)"
                 " * (has(self.{m}socket) ? size(self.{m}socket) : 1)")


_CEL_SERVERS = ("(has(self.matrix) && has(self.matrix.server) ? self.matrix.server : "
                f"[has(self.target) && has(self.target.server) ? self.target.server : '{DEFAULT_SERVER}'])")
_CEL_SOCKETS = ("(has(self.matrix) && has(self.matrix.socket) ? self.matrix.socket : [has(self.target) && "
                "has(self.target.proxy) && has(self.target.proxy.socket) ? self.target.proxy.socket : 'tcp'])")
_CEL_HAS_WORKER_CLASS = ("(has(self.matrix) && has(self.matrix.workerClass)) || "
                         "(has(self.target) && has(self.target.workerClass))")
_CEL_WORKER_CLASSES = ("(has(self.matrix) && has(self.matrix.workerClass) ? self.matrix.workerClass : "
                       "[self.target.workerClass])")
_CEL_HAS_PROXY = "(has(self.target) && has(self.target.proxy)) || (has(self.matrix) && has(self.matrix.proxy))"
_CEL_PROXIES = ("(has(self.matrix) && has(self.matrix.proxy) ? self.matrix.proxy : "
                f"[has(self.target) && has(self.target.proxy) ? self.target.proxy.server : '{NO_PROXY}'])")
_CEL_HAS_WORKERS = "(has(self.matrix) && has(self.matrix.workers)) || (has(self.target) && has(self.target.workers))"
_CEL_WORKERS = "(has(self.matrix) && has(self.matrix.workers) ? self.matrix.workers : [self.target.workers])"
_CEL_HAS_THREADS = "(has(self.matrix) && has(self.matrix.threads)) || (has(self.target) && has(self.target.threads))"
_CEL_THREADS = "(has(self.matrix) && has(self.matrix.threads) ? self.matrix.threads : [self.target.threads])"


def _among(names: list[str], one: str, many: str) -> str:
    """'waitress and cheroot run', 'flup speaks'."""
    return f"{listing(names)} {one if len(names) == 1 else many}"


def _server_rules() -> list[Rule]:
    """The API server's side of load.server_problems(), from the same entries (api.servers)."""
    classed, fastcgi = list(SERVER_WORKER_CLASSES), PROXIED_ONLY.of(SERVERS)
    one_process, one_thread, tcp_only = ONE_PROCESS.of(SERVERS), ONE_THREAD.of(SERVERS), TCP_ONLY.of(SERVERS)
    fits = " || ".join(
        f"({_CEL_SERVERS}.exists(s, s == '{server}') && {_CEL_SERVERS}.all(s, s == '{server}' || !(s in "
        f"{classed})) && {_CEL_WORKER_CLASSES}.all(c, c in {list(classes)}))"
        for server, classes in SERVER_WORKER_CLASSES.items())
    rules = [
        Rule(None, f"a worker class (spec.target.workerClass or spec.matrix.workerClass) is a "
                   f"{' or a '.join(classed)} setting: the servers must include {' or '.join(classed)}, not "
                   f"{'both' if len(classed) == 2 else 'several'}, and each class must be one of its",
             cel=f"!({_CEL_HAS_WORKER_CLASS}) || {fits}"),
        Rule(None, f"{_among(fastcgi, 'speaks', 'speak')} FastCGI, not HTTP: "
                   f"{'it needs' if len(fastcgi) == 1 else 'they need'} a front proxy (spec.target.proxy, and no "
                   f"'{NO_PROXY}' in spec.matrix.proxy)",
             cel=f"!{_CEL_SERVERS}.exists(s, s in {fastcgi}) || ({_CEL_HAS_PROXY}) && "
                 f"!{_CEL_PROXIES}.exists(p, p == '{NO_PROXY}')"),
        Rule(None, f"{_among(one_process, 'runs', 'run')} one process: workers (spec.target.workers or "
                   f"spec.matrix.workers) must be 1 when {'it is' if len(one_process) == 1 else 'they are'} "
                   f"among the servers",
             cel=f"!({_CEL_HAS_WORKERS}) || !{_CEL_SERVERS}.exists(s, s in {one_process}) || "
                 f"{_CEL_WORKERS}.all(w, w == 1)"),
        Rule(None, f"{_among(one_thread, 'serves', 'serve')} one request at a time per process: threads "
                   f"(spec.target.threads or spec.matrix.threads) must be 1 when "
                   f"{'it is' if len(one_thread) == 1 else 'they are'} among the servers",
             cel=f"!({_CEL_HAS_THREADS}) || !{_CEL_SERVERS}.exists(s, s in {one_thread}) || "
                 f"{_CEL_THREADS}.all(t, t == 1)"),
        Rule(None, f"{_among(tcp_only, 'listens', 'listen')} on TCP only: no unix socket (spec.target.proxy.socket "
                   f"or spec.matrix.socket) with {'it' if len(tcp_only) == 1 else 'them'}",
             cel=f"!{_CEL_SERVERS}.exists(s, s in {tcp_only}) || !{_CEL_SOCKETS}.exists(s, s == 'unix')"),
        Rule(None, f"spec.target.interface chooses the interface of {listing(list(CHOOSE_INTERFACE))}, which "
                   f"{'serves' if len(CHOOSE_INTERFACE) == 1 else 'serve'} more than one: the servers must include "
                   f"{'it' if len(CHOOSE_INTERFACE) == 1 else 'one of them'}",
             cel=f"!has(self.target) || !has(self.target.interface) || has(self.target.command) || "
                 f"{_CEL_SERVERS}.exists(s, s in {list(CHOOSE_INTERFACE)})"),
    ]
    for e in entries.ENTRIES:
        if ONE_AT_A_TIME_CLASSES.binds(e):
            one = list(e.one_at_a_time_classes)
            rules.append(Rule(
                None, f"{e.name}'s {listing(one)} class serves one request at a time per process: threads "
                      f"(spec.target.threads or spec.matrix.threads) must be 1 with it",
                cel=f"!({_CEL_HAS_WORKER_CLASS}) || !({_CEL_HAS_THREADS}) || !{_CEL_SERVERS}.exists(s, s == "
                    f"'{e.name}') || !{_CEL_WORKER_CLASSES}.exists(c, c in {one}) || {_CEL_THREADS}.all(t, t == 1)"))
    return rules


SERVER_RULES = _server_rules()
_WITHOUT_WORKERS = listing(ONE_PROCESS.of(SERVERS))
_ONE_AT_A_TIME = listing(ONE_THREAD.of(SERVERS)
                         + [f"{e.name}'s {c.name}" for e in entries.ENTRIES for c in e.worker_classes
                            if c.one_at_a_time])


_image = Str("Container image; defaults to the image the operator was installed with.")
_port = Int("Port; defaults to the port loadstage gives the server.", minimum=1, maximum=65535)


def _probe(which: str, default: str) -> Obj:
    return Obj(Probe, f"The target container's {which} probe, as in a pod spec: exactly one of httpGet, tcpSocket "
                      f"or exec (exec in a cluster only; the local engine checks httpGet and tcpSocket readiness "
                      f"on each instance's own port). {default}", {
        "httpGet": Obj(HttpGet, "An HTTP GET that must answer 200 to 399.", {
            "path": Str("Path, e.g. /healthz.", pattern=r"/.*", pattern_hint="a path starting with /",
                        max_length=1024),
            "port": _port,
        }, required=["path"]),
        "tcpSocket": Obj(TcpSocket, "A TCP connection that must open.", {"port": _port}),
        "exec": Obj(Exec, "A command run in the container (cluster only).", {
            "command": ListOf("The command and its arguments.", Str("One argument.", max_length=1024),
                              min_items=1, max_items=50)}, required=["command"]),
        "initialDelaySeconds": Int("Seconds before the first probe.", minimum=0, maximum=3600),
        "periodSeconds": Int("Seconds between probes.", minimum=1, maximum=3600),
        "timeoutSeconds": Int("Seconds a probe may take.", minimum=1, maximum=3600),
        "successThreshold": Int("Successes in a row that count as success.", minimum=1, maximum=100),
        "failureThreshold": Int("Failures in a row that count as failure.", minimum=1, maximum=100),
    }, rules=[Rule(lambda p: sum(h is not None for h in (p.http_get, p.tcp_socket, p.exec)) == 1,
                   "set exactly one of httpGet, tcpSocket or exec",
                   cel="(has(self.httpGet) ? 1 : 0) + (has(self.tcpSocket) ? 1 : 0) + (has(self.exec) ? 1 : 0) == 1")])

CPU_RANGE = {"minimum": "10m", "maximum": "64"}          # 10m: CFS's smallest quota (1 ms of each 100 ms)
MEMORY_RANGE = {"minimum": "16Mi", "maximum": "1Ti"}
_cpu = Quantity("CPU, e.g. 500m or 2.", "cpu", **CPU_RANGE)
_memory = Quantity("Memory, e.g. 512Mi or 1Gi.", "memory", **MEMORY_RANGE)


def _not_above(resources: Resources) -> bool:
    asked, most = resources.requests, resources.limits
    return (not (asked.cpu and most.cpu) or cpu_cores(asked.cpu) <= cpu_cores(most.cpu)) and \
        (not (asked.memory and most.memory) or memory_bytes(asked.memory) <= memory_bytes(most.memory))


_CEL_NOT_ABOVE = " && ".join(
    f"(!has(self.requests) || !has(self.requests.{r}) || !has(self.limits) || !has(self.limits.{r}) || "
    f"quantity(string(self.requests.{r})).compareTo(quantity(string(self.limits.{r}))) <= 0)"
    for r in ("cpu", "memory"))


def resources(what: str, *, cpu_limit_minimum: str | None = None, default: Any = None) -> Obj:
    """Requests and limits of one kind of pod; unset ones come from the operator's defaults."""
    limit_cpu = _cpu if cpu_limit_minimum is None else Quantity(
        f"CPU, at least {cpu_limit_minimum}: {what} is one Locust process, whose CPU-bound check is of a whole "
        f"core.", "cpu", minimum=cpu_limit_minimum, maximum=CPU_RANGE["maximum"])
    return Obj(Resources, f"Requests and limits of {what}, as in a pod spec. Each one unset comes from the "
                          f"operator's defaults (the chart's experimentResources); a limit without its request is "
                          f"also the request.", {
        "requests": Obj(ResourceList, "What the scheduler reserves.", {"cpu": _cpu, "memory": _memory},
                        default={}),
        "limits": Obj(ResourceList, "The most the container may use: CPU is throttled, memory over it is "
                                    "OOM-killed.", {"cpu": limit_cpu, "memory": _memory}, default={}),
    }, rules=[Rule(_not_above, "a request must not be above its limit", cel=_CEL_NOT_ABOVE)],
        **({} if default is None else {"default": default}))


SERIES_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"
HISTORY_LABEL_KEY = r"[A-Za-z0-9][A-Za-z0-9._/-]{0,62}"
_LABELS = MapOf("Labels the selected objects carry, all of them.", Str("Value.", max_length=63),
                key_pattern=r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", key_hint="a label key",
                keys_in_cel=False)   # inside spec.target.allowFrom's list: 26 times the API server's CEL budget
PEER = Obj(Peer, "Pods, namespaces or addresses that may reach the target's pods, as in a NetworkPolicy's from: "
                 "podSelector and namespaceSelector (matchLabels; both together: those pods in those namespaces), "
                 "or ipBlock.", {
    "podSelector": Obj(LabelSelector, "Pods by label (in the experiment's namespace, unless namespaceSelector "
                                      "is given too).", {"matchLabels": _LABELS}, required=["matchLabels"]),
    "namespaceSelector": Obj(LabelSelector, "Namespaces by label.", {"matchLabels": _LABELS},
                             required=["matchLabels"]),
    "ipBlock": Obj(IpBlock, "Addresses.", {
        "cidr": Str("An IPv4 or IPv6 CIDR, e.g. 10.0.0.0/8.", pattern=r"[0-9a-fA-F:.]+/[0-9]{1,3}",
                    pattern_hint="a CIDR such as 10.0.0.0/8", max_length=64)}, required=["cidr"]),
}, rules=[Rule(lambda p: (p.pod_selector or p.namespace_selector) is not None or p.ip_block is not None,
               "give podSelector, namespaceSelector or ipBlock",
               cel="has(self.podSelector) || has(self.namespaceSelector) || has(self.ipBlock)"),
          Rule(lambda p: p.ip_block is None or (p.pod_selector is None and p.namespace_selector is None),
               "ipBlock stands alone: give it without podSelector and namespaceSelector",
               cel="!has(self.ipBlock) || (!has(self.podSelector) && !has(self.namespaceSelector))")])

TARGET = Obj(Target, "The system under test: a WSGI or ASGI app, served by the server you choose.", {
    "image": _image,
    "app": Str("The application the server serves (module:callable): a WSGI one, or an ASGI one under an ASGI "
               f"server. The default, the runner app, serves either ({ASGI_RUNNER_APP} under an ASGI server).",
               pattern=r"[A-Za-z_][\w.]*:[A-Za-z_][\w.()]*", pattern_hint="module:callable",
               default=DEFAULT_RUNNER_APP),
    "pods": Int("Number of target pods (local engine: server instances).", minimum=1, maximum=500,
                default=1),
    "server": Str("The server: " + listing([f"{e.name} ({e.about})" for e in entries.ENTRIES]) + ". workers and "
                  "threads map onto each server's own settings.", enum=SERVERS),
    "workers": Int(f"Worker processes per pod. Defaults to 2, or 1 for {_WITHOUT_WORKERS}, which run one process.",
                   minimum=1, maximum=64),
    "threads": Int(f"Threads per worker process (the server's threads, granian's blocking threads, a thread pool); "
                   f"under an ASGI server, the app's thread pool for its sync endpoints ({SYNC_THREADS_ENV}, read by "
                   f"the runner app; AnyIO's default is 40). Defaults to 2, or 1 where a process serves one request "
                   f"at a time ({_ONE_AT_A_TIME}); a Deployment target keeps its own unless this is set.",
                   minimum=1, maximum=64),
    "workerClass": Str("Worker class: " + "; ".join(f"{e.name}'s: {listing(list(e.classes))} (the first is the "
                                                    f"default)" for e in entries.ENTRIES if e.worker_classes)
                       + ". " + " ".join(f"{e.name}'s {c.name} serves one request at a time per process."
                                         for e in entries.ENTRIES for c in e.worker_classes if c.one_at_a_time),
                       enum=WORKER_CLASSES),
    "interface": Str(f"The interface {listing(list(CHOOSE_INTERFACE))} serves the app with (default "
                     f"{INTERFACES[0]}); every other server's is its own, or its worker class's.", enum=INTERFACES),
    "command": ListOf("Any other server: its command line, instead of server. Placeholders: "
                      + ", ".join(f"{{{p}}}" for p in COMMAND_PLACEHOLDERS)
                      + " ({bind} is host:port); it must listen on {port} or {bind}. Write {{ and }} for a "
                        "literal brace.", Str("One argument.", max_length=256), min_items=1, max_items=50),
    "env": MapOf("Extra environment variables for the target.", Str("Value."),
                 key_pattern=r"[A-Za-z_][A-Za-z0-9_]*", key_hint="an environment variable name", default={}),
    "backlog": Int("The server's listen backlog: connections the kernel queues for it to accept, at most "
                   "net.core.somaxconn (a front proxy keeps its own 2048). A short one drops connections once every "
                   "worker is busy: saturation.backlogPeak.", minimum=1, maximum=65535, default=LISTEN_BACKLOG),
    "readyTimeout": Duration("How long the target may take to become ready before the experiment fails.",
                             minimum="1s", maximum="1h", default="5m"),
    "readinessProbe": _probe("readiness", "Defaults to the runner app's httpGet /readyz, and for any other app "
                                          "to tcpSocket on its port: ready once it accepts connections."),
    "livenessProbe": _probe("liveness", "Defaults to the runner app's httpGet /healthz, and to none for any "
                                        "other app."),
    "metrics": Obj(TargetMetrics, "Where the target counts the requests it served, for the server-side count of "
                                  "each stage: a Prometheus counter (or the _count of a histogram) on a path. An "
                                  "app without it has no server-side count, and nothing fails.", {
        "path": Str("Path of the Prometheus metrics.", pattern=r"/.*", pattern_hint="a path starting with /",
                    max_length=1024, default=DEFAULT_METRICS_PATH),
        "counter": Str("Name of the counter (or histogram) of served requests, e.g. flask_http_request_total.",
                       pattern=r"[a-zA-Z_:][a-zA-Z0-9_:]*", pattern_hint="a Prometheus metric name",
                       max_length=200, default=DEFAULT_COUNTER),
    }, default={}),
    "resources": resources("each target pod's server container (the local engine: a cgroup per instance, "
                           "which enforces the limits)", default={}),
    "deployment": Obj(DeploymentTarget, "An existing Deployment as the target (cluster only), instead of image, "
                                        "app and command. server, workers, threads and resources are set on its "
                                        "container the way the server reads them; what is not set stays as it is.", {
        "name": Str("Name of the Deployment, in the experiment's namespace.", pattern=NAME_SUBDOMAIN,
                    pattern_hint="a Kubernetes object name", max_length=253),
        "container": Str("The container that runs the server; defaults to the first.",
                         pattern=r"[a-z0-9]([-a-z0-9]*[a-z0-9])?",
                         pattern_hint="a container name", max_length=63),
        "mode": Str("Copy: each variant runs in a Deployment of its own, made from this one's pod template (the "
                    "original is never written). InPlace: this Deployment is patched (replicas, server settings, "
                    "resources; an HPA that scales it is pinned) and restored exactly at the end, after a "
                    "failure, and when the experiment is deleted.", enum=DEPLOYMENT_MODES, default="Copy"),
        "port": Int("The port the server listens on; defaults to the container's first TCP containerPort.",
                    minimum=1, maximum=65535),
        "namespace": Str("Must be the experiment's own namespace, where the operator may act; a Deployment "
                         "elsewhere is refused.", max_length=63),
    }, required=["name"]),
    "proxy": Obj(Proxy, "A front proxy in each target pod (a sidecar; the local engine: a process beside each "
                        "instance): the injectors reach it, and it forwards each request to the WSGI server over "
                        "loopback TCP or a Unix socket, in HTTP (FastCGI to flup).", {
        "server": Str("nginx or httpd (Apache), from the runner image.", enum=PROXIES),
        "socket": Str("How the proxy reaches the WSGI server: tcp (loopback) or unix (a socket in a volume the "
                      "two containers share).", enum=SOCKETS, default="tcp"),
        "workers": Int("The proxy's worker processes (nginx's worker_processes, httpd's server processes of 25 "
                       "threads each).", minimum=1, maximum=16, default=1),
        "resources": resources("each target pod's proxy container (the local engine: a cgroup per proxy)",
                               default={}),
    }, required=["server"]),
    "allowFrom": ListOf("Who else may reach the target's pods (with spec.networkPolicies): its injectors and "
                        "the operator always may.", PEER, max_items=20, default=[]),
}, rules=[Rule(lambda t: t.deployment is None or (
        t.image is None and t.command is None and t.app == DEFAULT_RUNNER_APP and t.readiness_probe is None
        and t.liveness_probe is None),
    "spec.target.deployment runs the Deployment's own container, with its own probes: set none of image, app, "
    "command, readinessProbe or livenessProbe",
    cel=f"!has(self.deployment) || (!has(self.image) && !has(self.command) && (!has(self.app) || self.app == "
        f"'{DEFAULT_RUNNER_APP}') && !has(self.readinessProbe) && !has(self.livenessProbe))")], default={})

REDIS = Obj(Redis, "The Redis the target keeps its sessions in: deployed per variant, external, or none.", {
    "deploy": Bool("Deploy a fresh Redis for each variant (the default when no url is given); false without a "
                   "url: the target uses no Redis, and none is sampled."),
    "url": Str("URL of an external Redis, e.g. redis://redis.example:6379/0.",
               pattern=r"rediss?://.+", pattern_hint="a redis:// or rediss:// URL"),
    "image": _image,
    "passwordSecret": Obj(SecretKey, "Secret key holding the Redis password (cluster only). A deployed Redis "
                                     "requires it; the target and the sampler authenticate with it.", {
        "name": Str("Secret name.", max_length=253),
        "key": Str("Key in the Secret.", default="password", max_length=253),
    }, required=["name"]),
    "resources": resources("the deployed Redis pod", default={}),
}, rules=[
    Rule(lambda r: not (r.deploy and r.url), "set either deploy: true or url, not both",
         cel="!(has(self.deploy) && self.deploy && has(self.url))"),
    Rule(lambda r: r.used or r.password_secret is None, "passwordSecret needs a Redis: deploy one, or give a url",
         cel="!has(self.passwordSecret) || !has(self.deploy) || self.deploy || has(self.url)"),
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
}, rules=[Rule(lambda f: (f.path is None) != (f.config_map is None), "set exactly one of path or configMap",
               cel="has(self.path) != has(self.configMap)")])

INJECTORS = Obj(Injectors, "The Locust injectors: one Locust worker process per injector.", {
    "image": _image,
    "usersPerInjector": Int("Simulated users per injector.", minimum=1, maximum=100000, default=10),
    "maxUsersPerInjector": Int("Stages given in users: the most users one injector runs; such a stage gets "
                               "ceil(users / maxUsersPerInjector) injectors. Stages given in arrivalRate: each "
                               "injector's pool of users.", minimum=1, maximum=100000,
                               default=DEFAULT_MAX_USERS_PER_INJECTOR),
    "maxRatePerInjector": Int("Stages given in arrivalRate alone: the most arrivals a second one injector "
                              "starts; such a stage gets ceil(arrivalRate / maxRatePerInjector) injectors.",
                              minimum=1, maximum=100000, default=DEFAULT_MAX_RATE_PER_INJECTOR),
    "spawnRatePerInjector": Int("Users started per second per injector; defaults to usersPerInjector.",
                                minimum=1, maximum=100000),
    "waitTime": WAIT_TIME,
    "pacing": Duration("Optional open model: every user starts a task on this fixed schedule (e.g. 1s) instead "
                       "of waiting waitTime between tasks. Latency is then also measured from each task's "
                       "intended start, as wrk2 does, so queueing that a closed model hides shows.",
                       minimum="10ms", maximum="1h"),
    "scenario": Str("Built-in scenario: respondent (the runner app's questionnaire, with Redis), hello (GET "
                    "/hello) or readbody (POST /readbody of 70 KB, echoed), the last two the uWSGI-vs-gunicorn "
                    "study's.", enum=("respondent", "hello", "readbody")),
    "locustfile": LOCUSTFILE,
    "keepAlive": Bool("Reuse each user's connections (HTTP keep-alive). false: every request asks the server to "
                      "close its connection and the next one opens a new one, like ab without -k.", default=True),
    "onLost": Str("What an injector that dies, is deleted or is evicted mid-stage does to its stage: Fail it "
                  "(naming the injector), or Continue with the remaining injectors and record the loss.",
                  enum=ON_LOST, default="Fail"),
    "resources": resources("each injector pod (a Locust worker)", cpu_limit_minimum="1", default={}),
    "masterResources": resources("each stage's Locust master pod", cpu_limit_minimum="1", default={}),
}, rules=[Rule(lambda i: not (i.scenario and i.locustfile), "set either scenario or locustfile, not both",
               cel="!(has(self.scenario) && has(self.locustfile))")], default={})

STAGE = Obj(Stage, "One step of the ladder: this many injectors, this many users, or this arrival rate, for this long "
                   "or for this many requests.", {
    "injectors": Int("Number of Locust injectors (worker processes or pods), each running usersPerInjector "
                     "users (with arrivalRate: sharing its arrivals). Set this, users, or arrivalRate.",
                     minimum=1, maximum=MAX_INJECTORS),
    "users": Int("Total simulated users, spread evenly over ceil(users / injectors.maxUsersPerInjector) "
                 "injectors. Set this or injectors; not with arrivalRate.", minimum=1, maximum=MAX_STAGE_USERS),
    "arrivalRate": Int("An open model: this many tasks start a second across the stage's injectors, on schedule, "
                       "whatever the answers (one request each in the built-in scenarios). Each injector runs a "
                       "pool of injectors.maxUsersPerInjector users; an arrival that finds none free is dropped and "
                       "counted, and a stage that drops over 1% is injector-bound. Latency is also measured from "
                       "each arrival's intended start. Without injectors: ceil(arrivalRate / "
                       "injectors.maxRatePerInjector) of them.", minimum=1, maximum=MAX_ARRIVAL_RATE),
    "duration": Duration("How long the stage runs, e.g. 90s or 20m. With requests: its time limit (default "
                         f"{format_duration(REQUESTS_TIME_LIMIT)}).", minimum="1s", maximum="24h"),
    "requests": Int("End the stage once this many requests in all have completed, like ab -n: the injectors "
                    "share them and send exactly this many. The stage records how long they took.",
                    minimum=1, maximum=MAX_STAGE_REQUESTS),
}, rules=[
    Rule(lambda s: s.injectors is not None or s.users is not None or s.arrival_rate is not None,
         "set injectors, users or arrivalRate", cel="has(self.injectors) || has(self.users) || has(self.arrivalRate)"),
    Rule(lambda s: s.injectors is None or s.users is None, "set either injectors or users, not both",
         cel="!has(self.injectors) || !has(self.users)"),
    Rule(lambda s: s.users is None or s.arrival_rate is None,
         "users (a closed model) and arrivalRate (an open model) are two loads: set one of them",
         cel="!has(self.users) || !has(self.arrivalRate)", field="arrivalRate"),
    Rule(lambda s: s.requests is None or s.arrival_rate is None,
         "arrivalRate starts tasks on a schedule for the stage's duration: it cannot also end at a count of requests",
         cel="!has(self.requests) || !has(self.arrivalRate)", field="requests"),
    Rule(lambda s: s.duration is not None or s.requests is not None,
         "set duration, requests, or both (duration is then the time limit)",
         cel="has(self.duration) || has(self.requests)")])

def _same_quantity_twice(axis: str, amount: Callable[[str], float]) -> Rule:
    """A matrix axis of quantities holds each amount once: 1 and 1000m would make one variant twice."""
    def twice(m: Matrix) -> str | None:
        values = [str(v) for v in getattr(m, axis) or ()]
        return next((f"{a} and {b}" for i, a in enumerate(values) for b in values[i + 1:]
                     if amount(a) == amount(b)), None)
    return Rule(lambda m: twice(m) is None, "holds the same quantity twice: each value makes a variant",
                field=axis, detail=lambda m: f"{twice(m)} are the same quantity")


MATRIX = Obj(Matrix, "Optional: run every stage once per combination of these values.", {
    "server": ListOf("WSGI servers.", Str("", enum=SERVERS), min_items=1, max_items=len(SERVERS), unique=True),
    "workers": ListOf("Worker processes per pod.", Int("", minimum=1, maximum=64),
                      min_items=1, max_items=20, unique=True),
    "threads": ListOf("Threads per worker.", Int("", minimum=1, maximum=64),
                      min_items=1, max_items=20, unique=True),
    "pods": ListOf("Target pod counts.", Int("", minimum=1, maximum=500),
                   min_items=1, max_items=20, unique=True),
    "workerClass": ListOf(f"Worker classes, all of {' or all of '.join(SERVER_WORKER_CLASSES)}; a server without "
                          f"classes runs once.", Str("", enum=WORKER_CLASSES), min_items=1,
                          max_items=max(map(len, SERVER_WORKER_CLASSES.values())), unique=True),
    "cpu": ListOf("Target CPU: each value is every target pod's CPU request and limit, so that workers per core "
                  "is one experiment.", Quantity("", "cpu", **CPU_RANGE), min_items=1, max_items=10, unique=True),
    "memory": ListOf("Target memory: each value is every target pod's memory request and limit.",
                     Quantity("", "memory", **MEMORY_RANGE), min_items=1, max_items=10, unique=True),
    "proxy": ListOf(f"Front proxies: {NO_PROXY}, or spec.target.proxy's server; the proxy's other settings come "
                    f"from spec.target.proxy.", Str("", enum=(NO_PROXY, *PROXIES)), min_items=1,
                    max_items=len(PROXIES) + 1, unique=True),
    "socket": ListOf("How the proxy reaches the WSGI server: tcp, unix.", Str("", enum=SOCKETS), min_items=1,
                     max_items=len(SOCKETS), unique=True),
}, rules=[_same_quantity_twice(axis, amount) for axis, amount in (("cpu", cpu_cores), ("memory", memory_bytes))])

_latency = "Highest acceptable {} latency, e.g. 1000ms."
_LATENCY_LIMITS = {p: Duration(_latency.format(p), minimum="1ms", maximum="1h") for p in PERCENTILES}
THRESHOLDS = Obj(Thresholds, "Optional: pass/fail limits checked for every stage.", {
    **_LATENCY_LIMITS,
    "errorRate": Percent("Highest acceptable share of failed requests, e.g. '1%'."),
})

SLO = Obj(Slo, "Optional: the service level objective. A stage passes when every figure's 95% interval lies wholly "
               "within its objective, fails when one lies wholly beyond it, and is undecided otherwise. Set this "
               "or thresholds, not both.", {
    **_LATENCY_LIMITS,
    "errorRate": Percent("Highest acceptable share of failed requests, e.g. '1%'."),
    "minRps": Int("Lowest acceptable rate of requests a second that the stage served.", minimum=1,
                  maximum=10_000_000),
    "tolerance": Percent("How near its objective a figure counts as at it: a stage whose figure is decided to lie "
                         "within this share of its limit (its interval inside [L(1 - t), L(1 + t)]) is Near, a final "
                         "verdict, rather than undecided; at the objective itself, pass or fail is a coin toss.",
                         default=f"{DEFAULT_TOLERANCE:.0%}", maximum="50%"),
}, rules=[Rule(lambda o: any(getattr(o, p) is not None for p in (*PERCENTILES, "error_rate", "min_rps")),
               "give at least one objective",
               cel=" || ".join(f"has(self.{name})" for name in (*PERCENTILES, "errorRate", "minRps")))])

SEARCH = Obj(Search, "A capacity search instead of a ladder: stages from `from` up, doubling the load until a stage "
                     "fails spec.slo, then bisecting between the last pass and the first fail until the bracket's "
                     "width is at most `resolution` of its low end. An undecided stage runs once more, twice as "
                     "long; undecided again, it counts as a fail.", {
    "load": Str("What the search varies: users (spread over ceil(users / injectors.maxUsersPerInjector) "
                "injectors), injectors (each running injectors.usersPerInjector users) or rps (a stage's "
                "arrivalRate, over ceil(rps / injectors.maxRatePerInjector) injectors).", enum=SEARCH_LOADS),
    "from": Int("The load of the first stage.", minimum=1, maximum=MAX_STAGE_USERS),
    "max": Int("The ceiling: the search never asks for more.", minimum=1, maximum=MAX_STAGE_USERS),
    "resolution": Percent("How fine the answer is: the search ends once (fail - pass) / pass is at most this.",
                          default="5%"),
    "duration": Duration("How long each stage runs (with stageEnd.when Decided: at most; stageEnd.max, where "
                         "given, takes its place).", minimum="1s", maximum="24h"),
}, required=["load", "from", "max"], rules=[
    Rule(lambda s: s.max > s.from_, "max must be above from", cel="self.max > self.from", field="max"),
    Rule(lambda s: s.resolution > 0, "resolution must be above 0%", cel="!self.resolution.matches('^0*[.]?0*%$')",
         field="resolution"),
    Rule(lambda s: s.load != "injectors" or s.max <= MAX_INJECTORS,
         f"a search over injectors goes up to at most {MAX_INJECTORS}",
         cel=f"self.load != 'injectors' || self.max <= {MAX_INJECTORS}", field="max"),
])


GOAL = Obj(Goal, "Let loadstage pick: the cheapest variant of spec.matrix that meets spec.slo at a load (rps, "
                 "users or injectors), or the one with the most capacity per core (maximize). With a load, each "
                 "variant runs one stage at it, ended by spec.stageEnd, cheapest first (a variant's cost is its "
                 "pods x its CPU limit, or request; without either, its measured CPU: its mean over the stage's "
                 "settled seconds, or its peak where no reading lay within them); once one passes, and a dearer "
                 "one after it, the dearer rest are not run. With maximize, each variant's search "
                 "(spec.search) runs first to a coarse bracket; the variants that cannot reach the best's capacity "
                 "per core are dropped, and the rest searched on to spec.search.resolution. "
                 "status.recommendation names the winner and the runner-up.", {
    "rps": Int("A rate: tasks started a second across the injectors (as a stage's arrivalRate).", minimum=1,
               maximum=MAX_ARRIVAL_RATE),
    "users": Int("Concurrent users, over ceil(users / injectors.maxUsersPerInjector) injectors.", minimum=1,
                 maximum=MAX_STAGE_USERS),
    "injectors": Int("Injectors, each running injectors.usersPerInjector users.", minimum=1, maximum=MAX_INJECTORS),
    "maximize": Str("capacityPerCore: the variant whose search's bracket, in req/s per core of its cost, is "
                    "highest at its low end.", enum=GOAL_MAXIMA),
    "prefer": ListOf(f"Among variants of one cost whose figures lie within slo.tolerance of each other (equivalent: "
                     f"which one is better is noise), the one to pick, by these in order, then the matrix's order: "
                     f"fewerProcesses (pods x workers), fewerPods, fewerThreads, or moreHeadroom (the least share by "
                     f"which a figure stays within its objective). Default: {', '.join(DEFAULT_PREFER)}.",
                     Str("", enum=GOAL_PREFERENCES), min_items=1, max_items=len(GOAL_PREFERENCES), unique=True),
}, rules=[Rule(lambda g: sum(getattr(g, unit) is not None for unit in (*GOAL_LOADS, "maximize")) == 1,
               "give one load (rps, users or injectors), or maximize",
               cel="[" + ", ".join(f"has(self.{unit})" for unit in (*GOAL_LOADS, "maximize")) +
                   "].filter(x, x).size() == 1")])


STAGE_END = Obj(StageEnd, "When a stage ends: at its duration (Duration), or once its verdict by spec.slo is decided "
                          "(Decided): the stage's intervals are looked at on a fixed schedule, each look at a "
                          "confidence that keeps the stage's error within 5% over all its looks. A stage that breaks "
                          "the objective by far (a latency's interval above 3 x its objective, the error rate's above "
                          "10 x) ends at once, as failed.", {
    "when": Str("Duration or Decided.", enum=STAGE_ENDS, default="Duration"),
    "min": Duration(f"With Decided: no stage ends as decided before this (a breach ends it at once); unwritten, "
                    f"{format_duration(DECIDED_NOT_BEFORE)}, or the stage's whole length where shorter.",
                    minimum="8s", maximum="24h"),
    "max": Duration("With Decided: every stage's longest, in place of its own duration; undecided then, it ends "
                    "as undecided.", minimum="8s", maximum="24h"),
}, rules=[Rule(lambda e: e.max is None or e.min is None or e.min <= e.max, "min must be at most max",
               cel="!has(self.max) || !has(self.min) || duration(self.min) <= duration(self.max)", field="min"),
          Rule(lambda e: e.decided or (e.min is None and e.max is None),
               "min and max apply with when: Decided (with Duration every stage runs its own duration)",
               cel="(has(self.when) && self.when == 'Decided') || (!has(self.min) && !has(self.max))")],
    default={})


def _min_over_a_stage(s: Spec) -> str | None:
    """Where stageEnd.min, with no max, is longer than a stage: 'spec.search.duration: 30s'."""
    end = s.stage_end
    if not end.decided or end.min is None or end.max is not None:
        return None
    lengths: list[tuple[str, float | None]] = [(f"spec.stages[{i}].duration", stage.duration)
                                               for i, stage in enumerate(s.stages or ())]
    if s.search is not None:
        lengths.append(("spec.search.duration", s.search.duration))
    return next((f"{path}: {format_duration(length)}" for path, length in lengths
                 if length is not None and length < end.min), None)


def _maximize_alone(s: Spec) -> bool:
    """goal.maximize with neither stages nor a search: the rule that it needs a search says so."""
    return s.goal is not None and s.goal.maximize is not None and not s.stages and s.search is None


def _rate_over_its_injectors(s: Spec) -> str | None:
    """Where a stage gives its injectors and asks each for more than maxRatePerInjector arrivals a second."""
    most = s.injectors.max_rate_per_injector
    named = [(f"spec.stages[{i}]", stage) for i, stage in enumerate(s.stages or ())]
    for path, stage in [*named, *([("spec.warmup", s.warmup)] if s.warmup else [])]:
        if stage.injectors and stage.arrival_rate and stage.arrival_rate > stage.injectors * most:
            return f"{path}: {stage.arrival_rate:,} a second on {stage.injectors} injector(s), over {most:,} each"
    return None


_CEL_RATE_WITHIN = "(!has({s}.injectors) || !has({s}.arrivalRate) || {s}.arrivalRate <= {s}.injectors * " + \
    _CEL_MAX_RATE + ")"


_ASGI_SERVERS = [*(e.name for e in entries.ENTRIES if e.kind == ASGI and not e.interfaces),
                 *(f"{e.name}'s {c.name} class" for e in entries.ENTRIES for c in e.worker_classes if c.kind == ASGI),
                 *(f"{e.name} with spec.target.interface: {ASGI}" for e in entries.ENTRIES if ASGI in e.interfaces)]


def _wsgi_under_the_asgi_runner_app(s: Spec) -> str | None:
    """Which server of the variants speaks WSGI to spec.target.app, where that is the runner app's ASGI module."""
    t, m = s.target, s.matrix
    if t.app != ASGI_RUNNER_APP or t.command is not None:
        return None
    for server in (m and m.server) or [server_of(t)]:
        entry = entries.BY_NAME.get(server)
        classes: list[str | None] = [None]
        if entry and entry.classes:
            classes = [*m.worker_class] if m and m.worker_class else [t.worker_class]
        for written in classes:
            worker_class = written or (entry.classes[0] if entry and entry.classes else None)
            if servers_kind(server, worker_class, t.interface) == WSGI:
                return f"{server}{f' {worker_class}' if worker_class else ''} speaks WSGI"
    return None


def _cel_speaks_asgi(s: str) -> str:
    """servers.kind(s, ...) == asgi, in CEL over the spec's worker classes and interface."""
    ways = []
    for e in entries.ENTRIES:
        if e.kind == ASGI and not e.interfaces:
            ways.append(f"{s} == '{e.name}'")
        if ASGI in e.interfaces:
            ways.append(f"({s} == '{e.name}' && has(self.target) && has(self.target.interface) && "
                        f"self.target.interface == '{ASGI}')")
        if asgi := [c.name for c in e.worker_classes if c.kind == ASGI]:
            ways.append(f"({s} == '{e.name}' && ({_CEL_HAS_WORKER_CLASS}) && "
                        f"{_CEL_WORKER_CLASSES}.all(c, c in {asgi}))")
    return "(" + " || ".join(ways) + ")"


def _ladder_or_search(s: Spec) -> list[Stage]:
    """The ladder's stages, a search's largest, or a goal's."""
    if s.goal and s.goal.load:
        return [s.goal.stage(s.stage_end.max or 0.0)]
    return s.stages or ([s.search.stage(s.search.max)] if s.search else [])


def _decided_with_max(s: Spec) -> bool:
    return s.stage_end.decided and s.stage_end.max is not None


def _cel_times_doubled(start: str, below: str, number: str = "int") -> str:
    """types.times_doubled in CEL: how many of start x 2^k are under `below`."""
    powers = ", ".join(f"{2**k}.0" if number == "double" else str(2**k) for k in range(DOUBLINGS))
    return f"[{powers}].filter(p, {start} * p < {below}).size()"


_CEL_RESOLUTION = ("double((has(self.search.resolution) ? self.search.resolution : '5%').replace('%', '')) "
                   "/ 100.0")
_CEL_BISECTIONS = (f"{_cel_times_doubled(_CEL_RESOLUTION, '1.0', 'double')}",
                   f"{_cel_times_doubled('1', 'self.search.max / 2')}")
_CEL_MOST_SEARCH_STAGES = (f"2 * ({_cel_times_doubled('self.search.from', 'self.search.max')} + 1 + "
                           f"({_CEL_BISECTIONS[0]} < {_CEL_BISECTIONS[1]} ? {_CEL_BISECTIONS[0]} : "
                           f"{_CEL_BISECTIONS[1]})) + {CONFIRMING_STAGES}")
_CEL_DECIDED = "has(self.stageEnd) && has(self.stageEnd.when) && self.stageEnd.when == 'Decided'"
_CEL_COUNT_VARIANTS = f"(has(self.matrix) ? {_CEL_VARIANTS.format(m='matrix.')} : 1)"


SPEC = Obj(Spec, "What to deploy and how to load it.", {
    "target": TARGET,
    "redis": REDIS,
    "injectors": INJECTORS,
    "warmup": Obj(Stage, "Optional stage run before each variant's stages; excluded from results.",
                  STAGE.fields, required=["duration"], rules=STAGE.rules),
    "stages": ListOf("The ladder of stages, run in order. Set this or search.", STAGE, min_items=1, max_items=50),
    "search": SEARCH,
    "goal": GOAL,
    "matrix": MATRIX,
    "thresholds": THRESHOLDS,
    "slo": SLO,
    "stageEnd": STAGE_END,
    "predict": Obj(Predict, "Where a matrix measures one setting's capacity at 3 or more pod counts (or worker "
                            "counts), the capacity the scale-out law fitted to them predicts at this size "
                            "(status.scaleOut): pods or workers, one of them.", {
        "pods": Int("Pods.", minimum=1, maximum=100000),
        "workers": Int("Worker processes a pod.", minimum=1, maximum=1024),
    }, rules=[Rule(lambda p: (p.pods is None) != (p.workers is None), "give pods or workers, one of them",
                   cel="has(self.pods) != has(self.workers)")]),
    "history": Obj(History, "How the history keeps this experiment's runs (`loadstage run` records each run; the "
                            "operator, where the chart gives it a database): the series its runs are compared in, "
                            "and labels of your choosing.", {
        "series": Str("The series: runs of one series are listed and checked together (default: the experiment's "
                      "name; give one to share a series across names).", pattern=SERIES_PATTERN,
                      pattern_hint="letters, digits, '.', '_' or '-', starting with a letter or digit",
                      max_length=128),
        "labels": MapOf("Labels each run is kept with, e.g. the app's version or commit (`loadstage run --label` "
                        "adds more).", Str("Value.", max_length=200), key_pattern=HISTORY_LABEL_KEY,
                        key_hint="a label key: letters, digits, '.', '_', '/' or '-', at most 63", default={}),
    }, default={}),
    "autoscale": Obj(Autoscale, "The traffic to serve, for the autoscaler exported with the recommendation "
                                "(status.export, docs/export.md): its replicas from the loads over a pod's capacity "
                                "less the headroom, its CPU target from the CPU a pod used there. Once spec.goal "
                                "has found its pick, the winner's capacity is searched from the goal's rate up to "
                                "maxLoad (or twice the goal's rate), to 10%, each stage ended as the goal's are: "
                                "the autoscaler is sized from that bracket's pass end.", {
        "minLoad": Int("The least load to serve, req/s (the unit of spec.goal.rps).", minimum=1,
                       maximum=MAX_ARRIVAL_RATE),
        "maxLoad": Int("The most load to serve, req/s.", minimum=1, maximum=MAX_ARRIVAL_RATE),
        "headroom": Percent("A share of a pod's capacity kept free before another pod is added.", default="20%",
                            maximum="90%"),
        "growth": Num("How fast the load may rise, req/s a second: the export then says whether the headroom "
                      "absorbs it while a pod is added.", above=0),
        "readySeconds": Duration("A pod's time from its creation to serving, for that check.", minimum="0s",
                                 maximum="1h", default="30s"),
    }, required=["minLoad", "maxLoad"], rules=[
        Rule(lambda a: a.min_load <= a.max_load, "minLoad must be at most maxLoad", cel="self.minLoad <= self.maxLoad",
             field="minLoad"),
    ]),
    "verify": Bool("Once spec.goal has its pick, check the export and record whether the objective holds in "
                   "status.verification (docs/export.md). In a cluster: a copy of the target with the exported "
                   "settings and HPA, through four steps of arrival rates from spec.autoscale.minLoad to maxLoad "
                   "(without spec.autoscale: one step at the goal's rate on the exported pods); `loadstage run`: "
                   "the export's settings at the load a pod is given (with spec.autoscale its capacity less the "
                   "headroom, on one pod), ended as the goal's stages are.", default=False),
    "cleanup": Str("What happens to the target and the injector Jobs when the experiment ends: Delete them, "
                   "Keep them, or KeepOnFailure.", enum=CLEANUP_POLICIES, default="Delete"),
    "repeats": Int("How many times each variant's ladder runs. With 3 or more, every figure's interval comes from "
                   "the variation between repeats, and the status adds the studies' trimmed mean (the highest "
                   "and lowest repeat dropped).", minimum=1, maximum=MAX_REPEATS, default=1),
    "order": Str("The order of the runs: Sequential (each variant's repeats, one after another), Interleaved "
                 "(stage 1 of every variant, then stage 2, and so on, once per repeat: drift spreads over the "
                 "variants) or Random (each variant's ladders, shuffled by spec.seed).",
                 enum=ORDERS, default="Sequential"),
    "seed": Int("The seed of a Random order, to run it again in the same order; without one, the run picks "
                "one and keeps it in status.seed.", minimum=0, maximum=MAX_SEED),
    "stageRetries": Int("How many times a stage runs again, from scratch, when its Locust pods are taken away "
                        "mid-stage (evicted, preempted, deleted, their node lost), or the Redis loadstage deployed "
                        "is lost (its pod restarts or goes unready; locally, redis-server exits), or the master's "
                        "artifact line cannot be read from its log; its partial numbers are discarded and the stage "
                        "records each retry's cause. With none left the experiment fails (reason StageDisrupted, "
                        "RedisLost or ArtifactUnreadable). A pod that fails by itself is never retried.",
                        minimum=0, maximum=5, default=1),
    "networkPolicies": Bool("NetworkPolicies per experiment, so that its deployed Redis accepts only the target's "
                            "pods and the operator, the Locust masters only the experiment's injectors, and the "
                            "target (unless it is an existing Deployment held InPlace) only its injectors, the "
                            "operator and target.allowFrom. They take effect where the cluster's network "
                            "plugin enforces NetworkPolicies.", default=True),
    "schedulingTimeout": Duration("How long a pod of the experiment (target or Locust) may wait for a node, "
                                  "unschedulable, before the experiment fails naming the scheduler's reason; long "
                                  "enough for a cluster autoscaler to add a node. A Locust master waits this long, "
                                  "plus 2 minutes to pull an image, for its workers.",
                                  minimum="1s", maximum="1h", default="5m"),
}, rules=[
    Rule(None, "spec is immutable once created; delete the experiment and create it again",
         cel="self == oldSelf"),
    Rule(lambda s: [s.stages, s.search, s.goal and s.goal.load].count(None) == 2 or _maximize_alone(s),
         "give spec.stages (a ladder), spec.search (a capacity search) or spec.goal (the cheapest variant that "
         "meets the objective): exactly one of them",
         cel="[has(self.stages), has(self.search), has(self.goal) && !has(self.goal.maximize)].filter(x, x).size() "
             "== 1 || (has(self.goal) && has(self.goal.maximize) && !has(self.stages))"),
    Rule(lambda s: s.goal is None or s.goal.maximize is None or s.search is not None,
         "spec.goal.maximize compares the variants' capacities: it needs spec.search, each variant's",
         cel="!has(self.goal) || !has(self.goal.maximize) || has(self.search)", field="goal"),
    Rule(lambda s: variant_count(s.matrix) <= (MAX_GOAL_VARIANTS if s.goal else MAX_VARIANTS),
         f"at most {MAX_VARIANTS} variants (the product of all list lengths), or {MAX_GOAL_VARIANTS} with "
         f"spec.goal", field="matrix",
         cel=f"{_CEL_COUNT_VARIANTS} <= (has(self.goal) ? {MAX_GOAL_VARIANTS} : {MAX_VARIANTS})"),
    Rule(lambda s: s.goal is None or s.slo is not None,
         "spec.goal needs spec.slo: the variant it picks is the cheapest that meets the objective",
         cel="!has(self.goal) || has(self.slo)", field="goal"),
    Rule(lambda s: s.goal is None or variant_count(s.matrix) >= 2,
         "spec.goal picks one of spec.matrix's variants: the matrix needs at least two",
         cel=f"!has(self.goal) || {_CEL_COUNT_VARIANTS} >= 2", field="matrix"),
    Rule(lambda s: s.goal is None or s.goal.load is None or _decided_with_max(s),
         "spec.goal runs each variant one stage at its load, ended once decided: spec.stageEnd needs when: "
         "Decided and a max",
         cel=f"!has(self.goal) || has(self.goal.maximize) || ({_CEL_DECIDED} && has(self.stageEnd.max))",
         field="stageEnd"),
    Rule(lambda s: s.goal is None or s.order == "Sequential",
         "spec.goal picks the variants' order itself: leave spec.order out (Sequential)",
         cel="!has(self.goal) || !has(self.order) || self.order == 'Sequential'", field="order"),
    Rule(lambda s: s.autoscale is None or (s.goal is not None and s.goal.load == "rps"),
         "spec.autoscale sizes the autoscaler of spec.goal's pick, in req/s: it needs spec.goal.rps",
         cel="!has(self.autoscale) || (has(self.goal) && has(self.goal.rps))", field="autoscale"),
    Rule(lambda s: not s.verify or (s.goal is not None and s.goal.load == "rps"),
         "spec.verify runs spec.goal's pick at the req/s its export promises: it needs spec.goal.rps",
         cel="!has(self.verify) || !self.verify || (has(self.goal) && has(self.goal.rps))", field="verify"),
    Rule(lambda s: s.search is None or s.slo is not None,
         "spec.search needs spec.slo: a search looks for the load at which the objective breaks",
         cel="!has(self.search) || has(self.slo)"),
    Rule(lambda s: s.search is None or s.slo is None or s.slo.min_rps is None,
         "a search finds the load the objective breaks at, from its lowest: a floor on the rate (minRps) fails its "
         "first stages by construction; leave minRps out (status.variants[].search gives the rate at each end)",
         cel="!has(self.search) || !has(self.slo) || !has(self.slo.minRps)", field="slo.minRps"),
    Rule(lambda s: s.slo is None or s.thresholds is None,
         "spec.slo and spec.thresholds are both objectives: give one of them",
         cel="!has(self.slo) || !has(self.thresholds)"),
    Rule(lambda s: not s.stage_end.decided or s.slo is not None,
         "spec.stageEnd.when: Decided needs spec.slo: a stage ends once its verdict by the objective is decided",
         cel="!has(self.stageEnd) || !has(self.stageEnd.when) || self.stageEnd.when != 'Decided' || has(self.slo)"),
    Rule(lambda s: s.search is None or s.search.duration is not None or _decided_with_max(s),
         "spec.search.duration is required, unless spec.stageEnd (when: Decided) gives a max",
         cel=f"!has(self.search) || has(self.search.duration) || ({_CEL_DECIDED} && has(self.stageEnd.max))"),
    Rule(lambda s: _min_over_a_stage(s) is None,
         "with no spec.stageEnd.max, min must be at most each stage's duration",
         cel="!has(self.stageEnd) || !has(self.stageEnd.min) || has(self.stageEnd.max) || ((!has(self.stages) || "
             "self.stages.all(s, !has(s.duration) || duration(s.duration) >= duration(self.stageEnd.min))) && "
             "(!has(self.search) || !has(self.search.duration) || duration(self.search.duration) >= "
             "duration(self.stageEnd.min)))",
         field="stageEnd.min", detail=_min_over_a_stage),
    Rule(lambda s: not s.stage_end.decided or s.repeats == 1,
         "spec.stageEnd.when: Decided judges each stage at its own looks: spec.repeats must be 1 with it",
         cel="!has(self.stageEnd) || !has(self.stageEnd.when) || self.stageEnd.when != 'Decided' || "
             "!has(self.repeats) || self.repeats == 1"),
    Rule(lambda s: s.search is None or s.repeats == 1,
         "spec.search runs each variant's own search once, its intervals from each stage's blocks: spec.repeats "
         "must be 1 with it", cel="!has(self.search) || !has(self.repeats) || self.repeats == 1"),
    Rule(lambda s: s.search is None or s.order != "Interleaved",
         "spec.search decides each variant's next stage from its last: order Interleaved cannot take turns "
         "between searches (use Sequential or Random)",
         cel="!has(self.search) || !has(self.order) || self.order != 'Interleaved'"),
    Rule(lambda s: all(injectors_of(stage, s.injectors) <= MAX_INJECTORS
                       for stage in [*_ladder_or_search(s), *([s.warmup] if s.warmup else [])]),
         f"a stage given in users or in arrivalRate alone needs at most {MAX_INJECTORS} injectors: users / "
         f"injectors.maxUsersPerInjector and arrivalRate / injectors.maxRatePerInjector must be <= {MAX_INJECTORS}",
         cel=f"(!has(self.stages) || self.stages.all(s, {_CEL_STAGE_FITS.format(s='s')})) && "
             f"(!has(self.warmup) || {_CEL_STAGE_FITS.format(s='self.warmup')}) && (!has(self.search) || "
             f"(self.search.load != 'users' || {_CEL_USERS_FIT.format(load='self.search.max')}) && "
             f"(self.search.load != 'rps' || {_CEL_RATE_FITS.format(load='self.search.max')})) && (!has(self.goal) "
             f"|| (!has(self.goal.users) || {_CEL_USERS_FIT.format(load='self.goal.users')}) && "
             f"(!has(self.goal.rps) || {_CEL_RATE_FITS.format(load='self.goal.rps')}))"),
    Rule(lambda s: _rate_over_its_injectors(s) is None,
         "a stage that gives its injectors and an arrivalRate asks each injector for at most "
         "injectors.maxRatePerInjector arrivals a second: give more injectors, or leave them out",
         cel=f"(!has(self.stages) || self.stages.all(s, {_CEL_RATE_WITHIN.format(s='s')})) && "
             f"(!has(self.warmup) || {_CEL_RATE_WITHIN.format(s='self.warmup')})",
         detail=_rate_over_its_injectors),
    Rule(lambda s: s.injectors.pacing is None or not any(
        stage.arrival_rate for stage in [*_ladder_or_search(s), *([s.warmup] if s.warmup else [])]),
         "spec.injectors.pacing and an arrivalRate (a stage's, spec.search.load: rps or spec.goal.rps) are two "
         "open models: give one of them",
         cel="!has(self.injectors) || !has(self.injectors.pacing) || ((!has(self.stages) || self.stages.all(s, "
             "!has(s.arrivalRate))) && (!has(self.warmup) || !has(self.warmup.arrivalRate)) && (!has(self.search) "
             "|| self.search.load != 'rps') && (!has(self.goal) || !has(self.goal.rps)))"),
    Rule(lambda s: variant_count(s.matrix) * len(s.stages or ()) * s.repeats <= MAX_VARIANT_STAGES,
         f"at most {MAX_VARIANT_STAGES} stages in all (variants x stages x repeats), so that the status stays small",
         cel=f"!has(self.stages) || {_CEL_COUNT_VARIANTS} * "
             f"size(self.stages) * (has(self.repeats) ? self.repeats : 1) <= {MAX_VARIANT_STAGES}"),
    Rule(lambda s: s.search is None or variant_count(s.matrix) * s.search.most_stages() <= MAX_VARIANT_STAGES,
         f"at most {MAX_VARIANT_STAGES} stages in all, so that the status stays small: variants x the most stages "
         f"one search can run, 2 x (log2(max / from) + 1 + the fewer of log2(1 / resolution) and log2(max / 2)), "
         f"each rounded up, + {CONFIRMING_STAGES} to confirm its bracket",
         cel=f"!has(self.search) || {_CEL_COUNT_VARIANTS} * {_CEL_MOST_SEARCH_STAGES} <= {MAX_VARIANT_STAGES}",
         detail=lambda s: f"{variant_count(s.matrix)} variant(s) x {s.search.most_stages()} stages = "
                          f"{variant_count(s.matrix) * s.search.most_stages()}"),
    Rule(None, "the bundled runner app keeps its sessions in Redis: spec.redis.deploy: false without a url is for "
               "an app of your own (spec.target.app)",
         cel=f"!has(self.redis) || !has(self.redis.deploy) || self.redis.deploy || has(self.redis.url) || "
             f"(has(self.target) && ((has(self.target.app) && self.target.app != '{DEFAULT_RUNNER_APP}') || "
             f"has(self.target.deployment)))"),
    Rule(lambda s: s.target.deployment is None or not (s.matrix and s.matrix.server),
         "spec.target.deployment runs one container, with one server: spec.matrix.server cannot vary it",
         cel="!has(self.target) || !has(self.target.deployment) || !has(self.matrix) || !has(self.matrix.server)"),
    Rule(lambda s: s.target.deployment is None or s.target.server is not None or not any(
        [s.target.workers, s.target.threads, s.target.worker_class,
         *((s.matrix.workers, s.matrix.threads, s.matrix.worker_class) if s.matrix else ())]),
         "spec.target.server must say which server the Deployment's container runs, for loadstage to set its "
         "workers, threads or worker class the way that server reads them",
         cel="!has(self.target) || !has(self.target.deployment) || has(self.target.server) || "
             "!(has(self.target.workers) "
             "|| has(self.target.threads) || has(self.target.workerClass) || (has(self.matrix) && "
             "(has(self.matrix.workers) || has(self.matrix.threads) || has(self.matrix.workerClass))))"),
    Rule(lambda s: s.target.deployment is None or not s.redis.deployed,
         "spec.target.deployment brings its own Redis settings: give spec.redis.url to sample its Redis, or "
         "spec.redis.deploy: false",
         cel="!has(self.target) || !has(self.target.deployment) || (has(self.redis) && (has(self.redis.url) || "
             "(has(self.redis.deploy) && !self.redis.deploy)))"),
    # the API server's side of server_problems()
    Rule(None, "a unix socket (spec.target.proxy.socket or spec.matrix.socket) joins a proxy to the server: "
               "every variant needs a proxy",
         cel=f"!((has(self.matrix) && has(self.matrix.socket) && self.matrix.socket.exists(s, s == 'unix')) || "
             f"(has(self.target) && has(self.target.proxy) && has(self.target.proxy.socket) && "
             f"self.target.proxy.socket == 'unix')) || ({_CEL_HAS_PROXY}) && !{_CEL_PROXIES}.exists(p, p == "
             f"'{NO_PROXY}')"),
    Rule(None, "spec.target.deployment runs its own pods, and loadstage adds no proxy to them: no spec.target.proxy "
               "or spec.matrix.proxy with it (put the proxy in the Deployment)",
         cel="!has(self.target) || !has(self.target.deployment) || !(" + _CEL_HAS_PROXY + ")"),
    Rule(None, "spec.target.command with a unix socket must listen on {bind}, which is then unix:PATH ({host} and "
               "{port} are empty)",
         cel=f"!has(self.target) || !has(self.target.command) || !{_CEL_SOCKETS}.exists(s, s == 'unix') || "
             "self.target.command.exists(a, a.replace('{{', '').contains('{bind}'))"),
    *SERVER_RULES,
    Rule(lambda s: _wsgi_under_the_asgi_runner_app(s) is None,
         f"spec.target.app {ASGI_RUNNER_APP} is the runner app's ASGI module: every server must speak ASGI "
         f"({listing(_ASGI_SERVERS)}); leave spec.target.app out, and the runner app is served in each server's "
         f"interface",
         cel=f"!has(self.target) || !has(self.target.app) || self.target.app != '{ASGI_RUNNER_APP}' || "
             f"has(self.target.command) || {_CEL_SERVERS}.all(s, {_cel_speaks_asgi('s')})",
         field="target.app", detail=_wsgi_under_the_asgi_runner_app),
    Rule(None, "spec.target.command replaces the server: set none of spec.target.server, spec.target.workerClass, "
               "spec.target.interface, spec.matrix.server or spec.matrix.workerClass with it",
         cel="!has(self.target) || !has(self.target.command) || (!has(self.target.server) && "
             "!has(self.target.workerClass) && !has(self.target.interface) && (!has(self.matrix) || "
             "(!has(self.matrix.server) && "
             "!has(self.matrix.workerClass))))"),
    Rule(None, "spec.target.command must listen on {port} or {bind}, and use only the placeholders "
               + ", ".join(f"{{{p}}}" for p in COMMAND_PLACEHOLDERS),
         cel="!has(self.target) || !has(self.target.command) || "
             "(self.target.command.exists(a, a.replace('{{', '').contains('{port}') || "
             "a.replace('{{', '').contains('{bind}')) && self.target.command.all(a, "
             "a.replace('{{', '').replace('}}', '').findAll('\\\\{[^{}]*\\\\}').all(p, p in "
             f"{[f'{{{p}}}' for p in COMMAND_PLACEHOLDERS]})))"),
])

POD_RESOURCES = Obj(PodResources, "The resources of each kind of pod an experiment creates, where its spec sets none "
                                   "(the chart's experimentResources).", {
    "target": resources("each target pod", default=DEFAULT_POD_RESOURCES.target.manifest()),
    "redis": resources("the deployed Redis pod", default=DEFAULT_POD_RESOURCES.redis.manifest()),
    "locustMaster": resources("each Locust master pod", cpu_limit_minimum="1",
                              default=DEFAULT_POD_RESOURCES.locust_master.manifest()),
    "locustWorker": resources("each injector pod", cpu_limit_minimum="1",
                              default=DEFAULT_POD_RESOURCES.locust_worker.manifest()),
})

METADATA = Obj(Metadata, "", {
    "name": Str("", pattern=NAME_PATTERN, pattern_hint="a lowercase DNS label starting with a letter",
                max_length=NAME_MAX),
    "namespace": Str(""),
}, required=["name"])

