"""Command lines of every component. Pod container args and local process argv both
come from these functions, so a local run executes what the pods will execute.
Paths of the injector files are relative to the working directory: the repository
root locally, the image's WORKDIR in a container."""

from __future__ import annotations

import json
import math

from loadstage.api import servers
from loadstage.api.servers import LISTEN_BACKLOG, Launch, split_bind, unix_path
from loadstage.api.types import Experiment, Proxy, Stage, Variant
from loadstage.api.wire import slo_argument

RUNNER_PORT = 8000
REDIS_PORT = 6379
LOCUST_MASTER_PORT = 5557
MASTER_METRICS_PORT = 9646   # the master's live Prometheus series (docs/live.md)
RESULTS_EXTENSION = "injectors/loadstage_results.py"
BUILTIN_SCENARIOS = {"respondent": "injectors/respondent.py", "hello": "injectors/hello.py",
                     "readbody": "injectors/readbody.py"}
EXPECT_WORKERS_MAX_WAIT_SECONDS = 120
STOP_TIMEOUT_SECONDS = 2
RUN_TIME_BACKSTOP_SECONDS = 60  # Locust's own limit, should the extension not end the stage


REDIS_PASSWORD_ENV = "REDIS_PASSWORD"


def redis_command(*, port: int = REDIS_PORT, bind: str = "0.0.0.0", require_password: bool = False) -> list[str]:
    """With require_password, the password comes from $REDIS_PASSWORD (Kubernetes expands $(VAR) in args)."""
    argv = ["redis-server", "--port", str(port), "--bind", bind, "--protected-mode", "no",
            "--save", "", "--appendonly", "no", "--maxclients", "20000", "--loglevel", "warning"]
    if require_password:
        argv += ["--requirepass", f"$({REDIS_PASSWORD_ENV})"]
    return argv


APP_PORT_BEHIND_PROXY = 8001            # where the WSGI server listens on loopback behind a front proxy
APP_SOCKET = "app.sock"                 # its Unix socket, in the directory it shares with the proxy


def custom_command(template: list[str], app: str, variant: Variant, binds: list[str]) -> list[str]:
    (bind,) = binds
    host, port = split_bind(bind)
    if unix_path(bind):
        host = port = ""
    values = {"app": app, "host": host, "port": port, "bind": bind,
              "workers": str(variant.workers), "threads": str(variant.threads)}
    return [arg.format(**values) for arg in template]


def _each(option: str, values: list[str]) -> list[str]:
    return [arg for value in values for arg in (option, value)]


def runner_command(experiment: Experiment, variant: Variant, *, binds: list[str],
                   reuse_port: bool = False) -> list[str]:
    """One target instance (a pod, or a local instance) serving the app on `binds` (host:port);
    `reuse_port`: the first bind is shared with other instances (a server that shares_port)."""
    target = experiment.spec.target
    if target.command:
        return custom_command(target.command, target.app, variant, binds)
    entry = servers.BY_NAME[variant.server]
    return entry.command(Launch(
        app_of(experiment, variant), variant.workers or 1, variant.threads or 1,
        entry.class_argument(variant.worker_class),
        tuple(binds), reuse_port, runner_app=target.runner_app, interface=kind_of(experiment, variant),
        backlog=target.backlog))


def kind_of(experiment: Experiment, variant: Variant) -> str:
    """The interface the variant's server speaks to the app: wsgi or asgi (a target's own command: wsgi)."""
    return servers.kind(variant.server, variant.worker_class, experiment.spec.target.interface)


def app_of(experiment: Experiment, variant: Variant) -> str:
    """The app the variant serves: the runner app in the interface its server speaks, or the target's own."""
    target = experiment.spec.target
    asgi = kind_of(experiment, variant) == servers.ASGI
    return servers.ASGI_RUNNER_APP if target.runner_app and asgi else target.app


def app_bind(variant: Variant, *, port: int = APP_PORT_BEHIND_PROXY, socket_dir: str) -> str:
    """Where the WSGI server listens behind the variant's proxy: loopback TCP, or a Unix socket in `socket_dir`."""
    return f"{servers.UNIX}{socket_dir}/{APP_SOCKET}" if variant.socket == "unix" else f"127.0.0.1:{port}"


def proxy_command(variant: Variant, proxy: Proxy, *, listen: list[str], upstream: str) -> list[str]:
    """The front proxy (loadstage.servers.proxy): it listens on `listen` and forwards to `upstream` (app_bind),
    in FastCGI to a FastCGI server, else in HTTP."""
    protocol = servers.BY_NAME[variant.server].protocol if variant.server in servers.BY_NAME else "http"
    return ["loadstage-proxy", proxy.server, *_each("--listen", listen), "--upstream", upstream,
            "--protocol", protocol, "--workers", str(proxy.workers), "--backlog", str(LISTEN_BACKLOG)]


def runner_env(experiment: Experiment, variant: Variant, *, redis_url: str | None,
               metrics_dir: str) -> dict[str, str]:
    """Environment of one target instance: the app's Redis (if it uses one), where the runner app's
    processes keep their Prometheus metrics, and for an ASGI app its sync thread pool (threads)."""
    target = experiment.spec.target
    # PROMETHEUS_MULTIPROC_DIR switches prometheus_client into multiprocess mode: the runner app's only
    return {**target.env, **({"REDIS_URL": redis_url} if redis_url else {}),
            **({"PROMETHEUS_MULTIPROC_DIR": metrics_dir} if target.runner_app else {}),
            **servers.sync_pool_env(kind_of(experiment, variant), variant.threads)}


def locustfiles(experiment: Experiment, custom_locustfile: str | None = None) -> str:
    """The -f argument: the results extension, then the scenario (built-in or the user's)."""
    inj = experiment.spec.injectors
    scenario = custom_locustfile if inj.locustfile else BUILTIN_SCENARIOS[inj.scenario or "respondent"]
    return f"{RESULTS_EXTENSION},{scenario}"


FLAT_OUT_INJECTOR_BOUND_PERCENT = 75.0


def flat_out(experiment: Experiment, stage: Stage) -> bool:
    """ab- and wrk-style load: a request goal, a new connection per request, or no wait between requests. The
    injector then does as much work per request as the server, so it is flagged injector-bound sooner."""
    injectors = experiment.spec.injectors
    return bool(stage.requests) or not injectors.keep_alive or (not injectors.pacing and injectors.wait_time.max == 0)


def locust_master_command(experiment: Experiment, stage: Stage, *, host: str, summary_file: str,
                          artifact_file: str, target_metrics: list[str], progress_file: str | None = None,
                          bind_host: str = "*", bind_port: int = LOCUST_MASTER_PORT,
                          custom_locustfile: str | None = None, start_file: str | None = None,
                          workers_wait: int = EXPECT_WORKERS_MAX_WAIT_SECONDS,
                          metrics_labels: dict[str, str] | None = None, metrics_address: str = "127.0.0.1",
                          metrics_port: int = MASTER_METRICS_PORT, decide: bool = False) -> list[str]:
    """`summary_file` gets the stage's headline, `artifact_file` its histograms and rows (`-`: stdout);
    `decide`: a stage (not a warm-up) that ends once its verdict is decided, with spec.stageEnd.when Decided;
    `metrics_labels`: serve the stage's live series on metrics_address:metrics_port, with these labels;
    `workers_wait`: how long the master waits for all its workers to connect;
    `target_metrics`: the target's metrics URLs (spec.target.metrics.path), for its own count of the stage's
    requests (spec.target.metrics.counter);
    `start_file`: the load starts when it exists (the local engine starts a stage ahead)."""
    injectors = experiment.spec.injectors
    users, spawn_rate = injectors.users_for(stage), injectors.spawn_rate_for(stage)
    wait = injectors.wait_time
    argv = ["locust", "-f", locustfiles(experiment, custom_locustfile),
            "--master", "--master-bind-host", bind_host, "--master-bind-port", str(bind_port),
            "--expect-workers", str(stage.injectors),
            "--expect-workers-max-wait", str(workers_wait),
            "--headless", "--users", str(users), "--spawn-rate", f"{spawn_rate:g}",
            "--stage-seconds", f"{stage.duration:g}",
            "--run-time", f"{math.ceil(stage.duration) + RUN_TIME_BACKSTOP_SECONDS}s",
            "--stop-timeout", str(STOP_TIMEOUT_SECONDS), "--exit-code-on-error", "0",
            "--host", host, "--only-summary",
            "--wait-min", f"{wait.min:g}", "--wait-max", f"{wait.max:g}",
            "--summary-file", summary_file, "--artifact-file", artifact_file,
            "--target-metrics", ",".join(target_metrics), "--target-counter", experiment.spec.target.metrics.counter]
    if injectors.pacing:
        argv += ["--pacing", f"{injectors.pacing:g}"]
    if stage.arrival_rate:
        argv += ["--arrival-rate", str(stage.arrival_rate)]
    if stage.requests:
        argv += ["--stage-requests", str(stage.requests)]
    if not injectors.keep_alive:
        argv += ["--keep-alive", "0"]
    if flat_out(experiment, stage):
        argv += ["--injector-bound-percent", f"{FLAT_OUT_INJECTOR_BOUND_PERCENT:g}"]
    if decide and experiment.spec.stage_end.decided and experiment.spec.slo is not None:
        decide_min = max(experiment.spec.stage_end.shortest(stage.duration or 0.0), stage.decided_after or 0.0)
        argv += ["--slo", slo_argument(experiment.spec.slo), "--decide-min", f"{decide_min:g}"]
    if progress_file:
        argv += ["--progress-file", progress_file]
    if start_file:
        argv += ["--start-file", start_file]
    if metrics_labels is not None:
        argv += ["--metrics-port", str(metrics_port), "--metrics-address", metrics_address,
                 "--metrics-labels", json.dumps(metrics_labels, separators=(",", ":"))]
    return argv


def locust_worker_command(experiment: Experiment, *, master_host: str,
                          master_port: int = LOCUST_MASTER_PORT,
                          custom_locustfile: str | None = None) -> list[str]:
    return ["locust", "-f", locustfiles(experiment, custom_locustfile), "--worker",
            "--master-host", master_host, "--master-port", str(master_port)]
