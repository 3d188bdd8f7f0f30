"""Command lines of every component. Pod container args and local process argv both
come from these functions, so a local run executes what the pods will execute.
Paths of the injector files are relative to the working directory: the repository
root locally, the image's WORKDIR in a container."""

from __future__ import annotations

import json
import math

from loadstage.api.types import (
    DEFAULT_RUNNER_APP,
    FASTCGI_SERVERS,
    PERCENTILES,
    Experiment,
    Proxy,
    Slo,
    Stage,
    Variant,
)

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


LISTEN_BACKLOG = 2048   # gunicorn's default; every server gets it, so none refuses what another would queue
WAITRESS_CONNECTION_LIMIT = 10_000   # waitress stops accepting at 100 open connections by default
SHARED_PORT_SERVERS = ("gunicorn", "uwsgi")  # listen on two addresses, one of them shared (SO_REUSEPORT)


UNIX = "unix:"
APP_PORT_BEHIND_PROXY = 8001            # where the WSGI server listens on loopback behind a front proxy
APP_SOCKET = "app.sock"                 # its Unix socket, in the directory it shares with the proxy
SOCKET_PERMISSIONS = "666"              # the proxy may run as another user (a local run as root)


def _split(bind: str) -> tuple[str, str]:
    host, _, port = bind.rpartition(":")
    return host, port


def _unix(bind: str) -> str | None:
    return bind.removeprefix(UNIX) if bind.startswith(UNIX) else None


def gunicorn_command(app: str, variant: Variant, binds: list[str], reuse_port: bool) -> list[str]:
    # no control socket: gunicorn would put it under $HOME, read-only in a pod and shared between
    # the local engine's instances; the runner app's hooks keep its multiprocess metrics right
    config = ["--config", "python:runner_app.gunicorn_conf"] if app == DEFAULT_RUNNER_APP else []
    return ["gunicorn", *config, *_each("--bind", binds),
            "--workers", str(variant.workers), "--threads", str(variant.threads),
            "--worker-class", variant.worker_class, "--no-control-socket",
            *(["--reuse-port"] if reuse_port else []), app]


def uwsgi_command(app: str, variant: Variant, binds: list[str], reuse_port: bool) -> list[str]:
    # --lazy-apps: every worker imports the app, as gunicorn's workers do; --die-on-term: SIGTERM
    # stops uWSGI (by default it reloads)
    return ["uwsgi", "--master", *_each("--http-socket", [_unix(b) or b for b in binds]), "--module", app,
            "--processes", str(variant.workers), "--threads", str(variant.threads), "--enable-threads",
            "--lazy-apps", "--die-on-term", "--need-app", "--disable-logging", "--listen", str(LISTEN_BACKLOG),
            "--add-header", "Connection: close",
            *(["--chmod-socket=" + SOCKET_PERMISSIONS] if any(map(_unix, binds)) else []),
            *(["--reuse-port"] if reuse_port else [])]


def waitress_command(app: str, variant: Variant, binds: list[str], reuse_port: bool) -> list[str]:
    listen = [f"--unix-socket={path}" if (path := _unix(b)) else f"--listen={b}" for b in binds]
    listen += [f"--unix-socket-perms={SOCKET_PERMISSIONS}"] if any(map(_unix, binds)) else []
    return ["waitress-serve", *listen, f"--threads={variant.threads}",
            f"--backlog={LISTEN_BACKLOG}", f"--connection-limit={WAITRESS_CONNECTION_LIMIT}", app]


def cheroot_command(app: str, variant: Variant, binds: list[str], reuse_port: bool) -> list[str]:
    (bind,) = binds
    return ["cheroot", "--bind", _unix(bind) or bind, "--threads", str(variant.threads),
            "--max-threads", str(variant.threads), "--request-queue-size", str(LISTEN_BACKLOG), app]


def granian_command(app: str, variant: Variant, binds: list[str], reuse_port: bool) -> list[str]:
    (bind,) = binds
    host, port = _split(bind)
    listen = ["--uds", path, "--uds-permissions", f"0o{SOCKET_PERMISSIONS}"] if (path := _unix(bind)) else \
        ["--host", host, "--port", port]
    return ["granian", "--interface", "wsgi", *listen,
            "--workers", str(variant.workers), "--blocking-threads", str(variant.threads),
            "--backlog", str(LISTEN_BACKLOG), app]


# Apache's own connections at once: its default (20 with 2 x 2 daemon threads) closed connections it kept alive
# once its workers were all busy, failing requests in flight (15 of 6,591 with 20 users)
MOD_WSGI_MAX_CLIENTS = 200
MOD_WSGI_USER = ("nobody", "nogroup")   # whom Apache's workers run as when started by root (a local run as root)


def mod_wsgi_command(app: str, variant: Variant, binds: list[str], reuse_port: bool) -> list[str]:
    # daemon mode (mod_wsgi-express's default): Apache's workers take the connections and hand each request to
    # W daemon processes of T threads. Its server root is $TMPDIR/mod_wsgi-HOST:PORT:UID, one per instance.
    (bind,) = binds
    host, port = _split(bind)
    module, _, callable_object = app.partition(":")
    return ["mod_wsgi-express", "start-server", "--application-type", "module", module,
            "--callable-object", callable_object or "application", "--host", host, "--port", port,
            "--processes", str(variant.workers), "--threads", str(variant.threads),
            "--server-backlog", str(LISTEN_BACKLOG), "--max-clients", str(MOD_WSGI_MAX_CLIENTS),
            "--log-to-terminal", "--locale", "C.UTF-8", "--user", MOD_WSGI_USER[0], "--group", MOD_WSGI_USER[1]]


def prefork_command(server: str):
    """bjoern, meinheld and flup are libraries: loadstage's launcher (loadstage.servers.prefork) serves the app."""
    def command(app: str, variant: Variant, binds: list[str], reuse_port: bool) -> list[str]:
        (bind,) = binds
        flup = ["--worker-class", variant.worker_class, "--threads", str(variant.threads)] if server == "flup" else []
        return ["loadstage-prefork", server, app, "--bind", bind, "--workers", str(variant.workers),
                "--backlog", str(LISTEN_BACKLOG), *flup]
    return command


def custom_command(template: list[str], app: str, variant: Variant, binds: list[str]) -> list[str]:
    (bind,) = binds
    host, port = _split(bind)
    if _unix(bind):
        host = port = ""
    values = {"app": app, "host": host, "port": port, "bind": bind,
              "workers": str(variant.workers), "threads": str(variant.threads)}
    return [arg.format(**values) for arg in template]


SERVER_COMMANDS = {"gunicorn": gunicorn_command, "uwsgi": uwsgi_command, "waitress": waitress_command,
                   "cheroot": cheroot_command, "granian": granian_command,
                   "bjoern": prefork_command("bjoern"), "meinheld": prefork_command("meinheld"),
                   "mod_wsgi": mod_wsgi_command, "flup": prefork_command("flup")}


def _each(option: str, values: list[str]) -> list[str]:
    return [arg for value in values for arg in (option, value)]


def runner_command(experiment: Experiment, variant: Variant, *, binds: list[str],
                   reuse_port: bool = False) -> list[str]:
    """One target instance (a pod, or a local instance) serving the app on `binds` (host:port);
    `reuse_port`: the first bind is shared with other instances (only SHARED_PORT_SERVERS)."""
    target = experiment.spec.target
    if target.command:
        return custom_command(target.command, target.app, variant, binds)
    return SERVER_COMMANDS[variant.server](target.app, variant, binds, reuse_port)


def app_bind(variant: Variant, *, port: int = APP_PORT_BEHIND_PROXY, socket_dir: str) -> str:
    """Where the WSGI server listens behind the variant's proxy: loopback TCP, or a Unix socket in `socket_dir`."""
    return f"{UNIX}{socket_dir}/{APP_SOCKET}" if variant.socket == "unix" else f"127.0.0.1:{port}"


def proxy_command(variant: Variant, proxy: Proxy, *, listen: list[str], upstream: str) -> list[str]:
    """The front proxy (loadstage.servers.proxy): it listens on `listen` and forwards to `upstream` (app_bind),
    in FastCGI to a FastCGI server, else in HTTP."""
    protocol = "fastcgi" if variant.server in FASTCGI_SERVERS else "http"
    return ["loadstage-proxy", proxy.server, *_each("--listen", listen), "--upstream", upstream,
            "--protocol", protocol, "--workers", str(proxy.workers), "--backlog", str(LISTEN_BACKLOG)]


def runner_env(experiment: Experiment, *, redis_url: str | None, metrics_dir: str) -> dict[str, str]:
    """Environment of one target instance: the app's Redis (if it uses one), and where the runner app's
    processes keep their Prometheus metrics."""
    target = experiment.spec.target
    # PROMETHEUS_MULTIPROC_DIR switches prometheus_client into multiprocess mode: the runner app's only
    return {**target.env, **({"REDIS_URL": redis_url} if redis_url else {}),
            **({"PROMETHEUS_MULTIPROC_DIR": metrics_dir} if target.runner_app else {})}


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


def slo_option(slo: Slo) -> str:
    """spec.slo for the master's --slo: JSON of the objectives, latencies in seconds, the error rate a fraction."""
    fields = {**{p: getattr(slo, p) for p in PERCENTILES}, "errorRate": slo.error_rate, "minRps": slo.min_rps}
    return json.dumps({k: v for k, v in fields.items() if v is not None}, separators=(",", ":"))


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
    if decide and experiment.spec.stage_end.decided:
        decide_min = max(experiment.spec.stage_end.min, stage.decided_after or 0.0)
        argv += ["--slo", slo_option(experiment.spec.slo), "--decide-min", f"{decide_min:g}"]
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
