"""Every server loadstage runs, one entry each: what it can take (workers, threads, worker classes, a Unix
socket), what it speaks, its command line, how its settings are set on a container loadstage did not build, and
what its log says of its workers. The parser's rules, the CRD's CEL rules, the pods' and the local engine's
command lines and the settings rewrite all read these entries; adding a server is adding an entry.
(It is over 300 lines because it is that table: one entry per server, each with its command line.)"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

LISTEN_BACKLOG = 2048   # gunicorn's default, spec.target.backlog's: every server gets the same
WAITRESS_CONNECTION_LIMIT = 10_000   # waitress stops accepting at 100 open connections by default
UNIX = "unix:"
SOCKET_PERMISSIONS = "666"              # the proxy may run as another user (a local run as root)
RUNNER_GUNICORN_CONFIG = "python:runner_app.gunicorn_conf"
# Apache's own connections at once: its default (20 with 2 x 2 daemon threads) closed connections it kept alive
# once its workers were all busy, failing requests in flight (15 of 6,591 with 20 users)
MOD_WSGI_MAX_CLIENTS = 200
MOD_WSGI_USER = ("nobody", "nogroup")   # whom Apache's workers run as when started by root (a local run as root)


WSGI, ASGI = "wsgi", "asgi"


@dataclass(frozen=True)
class Launch:
    """What one instance of a server is started with."""
    app: str
    workers: int | str         # a string: a placeholder, in the reference's table
    threads: int | str
    worker_class: str | None
    binds: tuple[str, ...]       # host:port or unix:PATH; the first shared between instances with reuse_port
    reuse_port: bool = False
    runner_app: bool = False     # the bundled runner app: its own server hooks
    interface: str = WSGI        # the app's, where the server serves more than one
    backlog: int = LISTEN_BACKLOG   # its listen queue's length (spec.target.backlog)

    @property
    def chosen_class(self) -> str:
        """The worker class of a server that has classes (the variant's, or the server's default)."""
        assert self.worker_class is not None, "a server with worker classes is launched with one"
        return self.worker_class

    @property
    def bind(self) -> str:
        (only,) = self.binds
        return only


ASGI_RUNNER_APP = "runner_app.asgi:app"
SYNC_THREADS_ENV = "LOADSTAGE_SYNC_THREADS"   # an ASGI app's sync thread pool: the ASGI runner app reads it


@dataclass(frozen=True)
class WorkerClass:
    name: str
    one_at_a_time: bool = False   # serves one request at a time per process: threads must be 1
    argument: str | None = None   # what the server is given for it, where not its name
    kind: str | None = None       # the interface of the app it serves, where not its server's
    green: bool = False           # green threads: no bound on the requests a process serves at once


@dataclass(frozen=True)
class Setting:
    """How a server reads one setting on a container loadstage did not build: its flags (the last one is the
    one added) and its environment variable (None: flags only)."""
    flags: tuple[str, ...]
    env: str | None = None


@dataclass(frozen=True)
class Server:
    name: str
    program: str                               # its argv[0]
    about: str                                 # a few words for the docs and the schema
    command: Callable[[Launch], list[str]]
    kind: str = WSGI                           # the interface of the app it serves: wsgi or asgi
    interfaces: tuple[str, ...] = ()           # more than one: spec.target.interface chooses (the first: default)
    workers: bool = True                       # False: one process; workers must be 1
    threads: bool = True                       # False: one request at a time per process; threads must be 1
    worker_classes: tuple[WorkerClass, ...] = ()   # the first is the default
    protocol: str = "http"                     # fastcgi: only behind a front proxy
    unix_socket: bool = True                   # can listen on a Unix socket behind a proxy
    shares_port: bool = False                  # instances can share a port (SO_REUSEPORT): local pods > 1
    settings: dict[str, Setting] | None = None   # on a container loadstage did not build; None: none settable
    settings_env_args: str | None = None       # one variable of the server's flags (GUNICORN_CMD_ARGS)
    flag_equals: bool = False                  # a flag added to its command line as --flag=VALUE
    workers_are: str = "worker processes"      # what workers and threads are to it, for the docs
    threads_are: str = "threads per process"
    boot_line: str | None = None               # its log's line for each worker started
    death_pattern: re.Pattern[str] | None = field(default=None, compare=False)   # group 1: the death
    serves_either: bool = False                # tells a WSGI app from an ASGI one by its call, and serves both

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.worker_classes)

    @property
    def one_at_a_time_classes(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.worker_classes if c.one_at_a_time)

    def default_workers(self) -> int:
        return 2 if self.workers else 1

    def one_at_a_time(self, worker_class: str | None) -> bool:
        return not self.threads or worker_class in self.one_at_a_time_classes

    def green(self, worker_class: str | None) -> bool:
        return any(c.green and c.name == worker_class for c in self.worker_classes)

    def kind_of(self, worker_class: str | None, interface: str | None = None) -> str:
        """The interface of the app it serves with this class (an ASGI class makes gunicorn an ASGI server), or
        the one chosen (spec.target.interface) where it serves several."""
        if interface in self.interfaces:
            return interface
        chosen = next((c for c in self.worker_classes if c.name == worker_class), None)
        return chosen.kind if chosen is not None and chosen.kind else self.kind

    def class_argument(self, worker_class: str | None) -> str | None:
        chosen = next((c for c in self.worker_classes if c.name == worker_class), None)
        return chosen.argument or chosen.name if chosen is not None else worker_class


def _each(option: str, values: Iterable[str]) -> list[str]:
    return [arg for value in values for arg in (option, value)]


def split_bind(bind: str) -> tuple[str, str]:
    host, _, port = bind.rpartition(":")
    return host, port


def unix_path(bind: str) -> str | None:
    return bind.removeprefix(UNIX) if bind.startswith(UNIX) else None


def _gunicorn(run: Launch) -> list[str]:
    # no control socket: gunicorn would put it under $HOME, read-only in a pod and shared between
    # the local engine's instances; the runner app's hooks keep its multiprocess metrics right
    config = ["--config", RUNNER_GUNICORN_CONFIG] if run.runner_app else []
    return ["gunicorn", *config, *_each("--bind", run.binds),
            "--workers", str(run.workers), "--threads", str(run.threads),
            "--worker-class", run.chosen_class, "--backlog", str(run.backlog), "--no-control-socket",
            *(["--reuse-port"] if run.reuse_port else []), run.app]


def _uwsgi(run: Launch) -> list[str]:
    # --lazy-apps: every worker imports the app, as gunicorn's workers do; --die-on-term: SIGTERM
    # stops uWSGI (by default it reloads)
    return ["uwsgi", "--master", *_each("--http-socket", [unix_path(b) or b for b in run.binds]), "--module", run.app,
            "--processes", str(run.workers), "--threads", str(run.threads), "--enable-threads",
            "--lazy-apps", "--die-on-term", "--need-app", "--disable-logging", "--listen", str(run.backlog),
            "--add-header", "Connection: close",
            *(["--chmod-socket=" + SOCKET_PERMISSIONS] if any(map(unix_path, run.binds)) else []),
            *(["--reuse-port"] if run.reuse_port else [])]


def _waitress(run: Launch) -> list[str]:
    listen = [f"--unix-socket={path}" if (path := unix_path(b)) else f"--listen={b}" for b in run.binds]
    listen += [f"--unix-socket-perms={SOCKET_PERMISSIONS}"] if any(map(unix_path, run.binds)) else []
    return ["waitress-serve", *listen, f"--threads={run.threads}",
            f"--backlog={run.backlog}", f"--connection-limit={WAITRESS_CONNECTION_LIMIT}", run.app]


def _cheroot(run: Launch) -> list[str]:
    return ["cheroot", "--bind", unix_path(run.bind) or run.bind, "--threads", str(run.threads),
            "--max-threads", str(run.threads), "--request-queue-size", str(run.backlog), run.app]


def _granian(run: Launch) -> list[str]:
    host, port = split_bind(run.bind)
    listen = ["--uds", path, "--uds-permissions", f"0o{SOCKET_PERMISSIONS}"] if (path := unix_path(run.bind)) else \
        ["--host", host, "--port", port]
    # its ASGI interface takes one blocking thread (the event loop's); threads are then the app's sync pool
    blocking = run.threads if run.interface == WSGI else 1
    return ["granian", "--interface", run.interface, *listen, "--workers", str(run.workers),
            "--blocking-threads", str(blocking), "--backlog", str(run.backlog), run.app]


def _uvicorn(run: Launch) -> list[str]:
    # one process per worker, each with its own event loop; a sync endpoint runs on the app's thread pool
    path = unix_path(run.bind)
    host, port = split_bind(run.bind)
    listen = ["--uds", path] if path else ["--host", host, "--port", port]
    return ["uvicorn", *listen, "--workers", str(run.workers), "--backlog", str(run.backlog),
            "--no-access-log", "--timeout-graceful-shutdown", "5", run.app]


def _hypercorn(run: Launch) -> list[str]:
    return ["hypercorn", "--bind", run.bind, "--workers", str(run.workers), "--worker-class", run.chosen_class,
            "--backlog", str(run.backlog), "--graceful-timeout", "5", run.app]


def _mod_wsgi(run: Launch) -> list[str]:
    # daemon mode (mod_wsgi-express's default): Apache's workers take the connections and hand each request to
    # W daemon processes of T threads. Its server root is $TMPDIR/mod_wsgi-HOST:PORT:UID, one per instance.
    host, port = split_bind(run.bind)
    module, _, callable_object = run.app.partition(":")
    return ["mod_wsgi-express", "start-server", "--application-type", "module", module,
            "--callable-object", callable_object or "application", "--host", host, "--port", port,
            "--processes", str(run.workers), "--threads", str(run.threads),
            "--server-backlog", str(run.backlog), "--max-clients", str(MOD_WSGI_MAX_CLIENTS),
            "--log-to-terminal", "--locale", "C.UTF-8", "--user", MOD_WSGI_USER[0], "--group", MOD_WSGI_USER[1]]


PREFORK_PROGRAM = "loadstage-prefork"


def _prefork(server: str) -> Callable[[Launch], list[str]]:
    """bjoern, meinheld and flup are libraries: loadstage's launcher (loadstage.servers.prefork) serves the app."""
    def command(run: Launch) -> list[str]:
        classed = ["--worker-class", run.worker_class, "--threads", str(run.threads)] if run.worker_class else []
        return [PREFORK_PROGRAM, server, run.app, "--bind", run.bind, "--workers", str(run.workers),
                "--backlog", str(run.backlog), *classed]
    return command


ENTRIES = (
    Server("gunicorn", "gunicorn", "the default", _gunicorn,
           worker_classes=(WorkerClass("gthread"), WorkerClass("sync"), WorkerClass("gevent", green=True),
                           WorkerClass("uvicorn", argument="uvicorn_worker.UvicornWorker", kind=ASGI)),
           shares_port=True,
           settings={"workers": Setting(("-w", "--workers")), "threads": Setting(("--threads",)),
                     "worker_class": Setting(("-k", "--worker-class"))},
           settings_env_args="GUNICORN_CMD_ARGS",
           threads_are="gthread threads (sync, gevent: workerClass); uvicorn: the app's sync thread pool",
           boot_line="Booting worker with pid",
           death_pattern=re.compile(r"(Worker \(pid:\d+\) (?:exited with code \d+|was sent \w+!?.*)|"
                                    r"WORKER TIMEOUT \(pid:\d+\))")),
    Server("uwsgi", "uwsgi", "the pyuwsgi wheel", _uwsgi, shares_port=True,
           settings={"workers": Setting(("-p", "--processes", "--workers"), "UWSGI_PROCESSES"),
                     "threads": Setting(("--threads",), "UWSGI_THREADS")},
           boot_line="spawned uWSGI worker", death_pattern=re.compile(r"(worker \d+ \(pid: \d+\) died.*?)(?: :\(|$)")),
    Server("waitress", "waitress-serve", "threads in one process", _waitress, workers=False,
           settings={"threads": Setting(("--threads",))}, flag_equals=True, workers_are="always 1",
           threads_are="its thread pool"),
    Server("cheroot", "cheroot", "CherryPy's server: threads in one process", _cheroot, workers=False,
           settings={"threads": Setting(("--threads",))}, workers_are="always 1", threads_are="its thread pool"),
    Server("granian", "granian", "Rust; WSGI, or ASGI with spec.target.interface", _granian,
           interfaces=(WSGI, ASGI),
           settings={"workers": Setting(("--workers",), "GRANIAN_WORKERS"),
                     "threads": Setting(("--blocking-threads",), "GRANIAN_BLOCKING_THREADS")},
           threads_are="wsgi: blocking threads per worker; asgi: the app's sync thread pool"),
    Server("bjoern", PREFORK_PROGRAM, "an event loop per process", _prefork("bjoern"), threads=False,
           workers_are="forked processes, each on its own event loop", threads_are="always 1"),
    Server("meinheld", PREFORK_PROGRAM, "an event loop per process", _prefork("meinheld"), threads=False,
           workers_are="forked processes, each on its own event loop", threads_are="always 1"),
    Server("mod_wsgi", "mod_wsgi-express", "Apache httpd, daemon mode", _mod_wsgi, unix_socket=False,
           workers_are="daemon processes (behind Apache's event MPM)", threads_are="threads per daemon process"),
    Server("flup", PREFORK_PROGRAM, "FastCGI, behind spec.target.proxy", _prefork("flup"),
           worker_classes=(WorkerClass("threaded"), WorkerClass("prefork", one_at_a_time=True)),
           protocol="fastcgi", workers_are="forked processes",
           threads_are="threaded: a pool of T per process; prefork: always 1"),
    Server("uvicorn", "uvicorn", "ASGI: an event loop per worker process", _uvicorn, kind=ASGI,
           settings={"workers": Setting(("--workers",), "UVICORN_WORKERS")},
           threads_are=f"the app's sync thread pool ({SYNC_THREADS_ENV})", boot_line="Started server process",
           death_pattern=re.compile(r"(Child process \[\d+\] died)")),
    Server("hypercorn", "hypercorn", "ASGI: an event loop per worker process", _hypercorn, kind=ASGI,
           worker_classes=(WorkerClass("asyncio"), WorkerClass("uvloop"), WorkerClass("trio")),
           settings={"workers": Setting(("-w", "--workers")), "worker_class": Setting(("-k", "--worker-class"))},
           threads_are=f"the app's sync thread pool ({SYNC_THREADS_ENV})", boot_line="] [INFO] Running on ",
           serves_either=True),
)
BY_NAME = {s.name: s for s in ENTRIES}
DEFAULT_SERVER = "gunicorn"
CUSTOM_SERVER = "command"     # the server of a target given as spec.target.command

SERVERS = tuple(BY_NAME)
SERVER_WORKER_CLASSES = {s.name: s.classes for s in ENTRIES if s.worker_classes}
WORKER_CLASSES = tuple(dict.fromkeys(c for classes in SERVER_WORKER_CLASSES.values() for c in classes))
PREFORK_SERVERS = tuple(s.name for s in ENTRIES if s.program == PREFORK_PROGRAM)
INTERFACES = (WSGI, ASGI)
CHOOSE_INTERFACE = tuple(s.name for s in ENTRIES if len(s.interfaces) > 1)   # spec.target.interface


def kind(server: str, worker_class: str | None, interface: str | None) -> str:
    """The interface the server speaks to the app: wsgi or asgi (a target's own command: wsgi)."""
    entry = BY_NAME.get(server)
    return entry.kind_of(worker_class, interface) if entry else WSGI


def sync_pool_env(kind_: str, threads: int | None) -> dict[str, str]:
    """An ASGI app's threads: its sync thread pool, which it reads from SYNC_THREADS_ENV."""
    return {SYNC_THREADS_ENV: str(threads)} if kind_ == ASGI and threads is not None else {}


def names(servers: Iterable[str], have: Callable[[Server], object]) -> list[str]:
    """Those of `servers` whose entry has it, in order."""
    return [s for s in servers if s in BY_NAME and have(BY_NAME[s])]


def listing(names_: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names_[0] if len(names_) == 1 else ", ".join(names_[:-1]) + " and " + names_[-1]


@dataclass(frozen=True)
class Limit:
    """What some servers cannot do, from their entries: which servers it binds (`binds`), and what each refuses,
    in words (`refuses`). The parser (load.server_problems), the CRD's CEL rules (spec.SERVER_RULES) and the
    reference's servers table all take it from here."""
    binds: Callable[[Server], bool]
    refuses: Callable[[Server], list[str]]

    def of(self, servers: Iterable[str]) -> list[str]:
        return names(servers, self.binds)


ONE_PROCESS = Limit(lambda e: not e.workers, lambda e: ["workers above 1"])
ONE_THREAD = Limit(lambda e: not e.threads, lambda e: ["threads above 1"])
TCP_ONLY = Limit(lambda e: not e.unix_socket, lambda e: ["a unix socket"])
PROXIED_ONLY = Limit(lambda e: e.protocol != "http", lambda e: [f"no proxy ({e.protocol})"])
ONE_AT_A_TIME_CLASSES = Limit(lambda e: bool(e.one_at_a_time_classes),
                              lambda e: [f"threads above 1 with {c}" for c in e.one_at_a_time_classes])
LIMITS = (ONE_PROCESS, ONE_THREAD, TCP_ONLY, PROXIED_ONLY, ONE_AT_A_TIME_CLASSES)


def refusals(entry: Server) -> list[str]:
    """Everything the server refuses, for the reference."""
    return [said for limit in LIMITS if limit.binds(entry) for said in limit.refuses(entry)]

