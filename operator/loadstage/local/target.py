"""A variant's target on this machine: a redis-server (unless the experiment names an external Redis, or the
target uses none) and one server instance per pod, started with the command lines the pods run, and ready
when each passes the target's readiness probe (httpGet or tcpSocket, on its own loopback port).

One instance listens on one loopback port. Several instances (gunicorn and uWSGI only) listen on one
shared loopback port with SO_REUSEPORT, so the kernel spreads the injectors' connections across them
the way a Service spreads them across pods; each also listens on a port of its own, for readiness and
/metrics."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from loadstage.api import servers
from loadstage.api.status import Saturation
from loadstage.api.types import Experiment, Resources, Variant
from loadstage.launch import argv
from loadstage.local import cgroups
from loadstage.local.cgroups import Cgroups, Counters, PodCgroup
from loadstage.local.ports import LOOPBACK, PORTS_ENV, free_port, range_problem
from loadstage.local.processes import Child, Supervisor
from loadstage.local.readiness import READY_POLL_SECONDS, LocalRunError, check_alive, wait_until_ready
from loadstage.results.saturation import machine_cores, redis_cpu_share, share
from loadstage.samplers.listen_queue import ListenQueues, backlog_limit
from loadstage.samplers.redis import RedisSample

REDIS_READY_SECONDS = 30


def closed_to_apache_workers() -> Path | None:
    """Under root, the first directory on the way to this Python or this checkout that others cannot enter:
    mod_wsgi's Apache, started by root, runs the app as nobody, who must read both. None when there is none."""
    if os.geteuid() != 0:
        return None
    for path in (Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parents[3]):
        for directory in [*reversed(path.resolve().parents), path.resolve()]:
            if not directory.stat().st_mode & 0o001:
                return directory
    return None


def project_root() -> Path:
    """The checkout holding injectors/: the working directory of every injector process."""
    root = Path(__file__).resolve().parents[3]
    if not (root / argv.RESULTS_EXTENSION).is_file():
        raise LocalRunError(f"cannot find {argv.RESULTS_EXTENSION} under {root}; "
                            "the local engine runs from a checkout of the loadstage repository")
    return root


def limit_fields(experiment: Experiment) -> list[str]:
    """The fields that give a local process a resource limit."""
    spec, m = experiment.spec, experiment.spec.matrix
    fields = [f"{path}.limits" for path, resources in (
        ("spec.target.resources", spec.target.resources), ("spec.redis.resources", spec.redis.resources),
        ("spec.injectors.resources", spec.injectors.resources),
        ("spec.injectors.masterResources", spec.injectors.master_resources)) if resources.limits.items()]
    return fields + [f"spec.matrix.{axis}" for axis in ("cpu", "memory") if m and getattr(m, axis)]


def local_problems(experiment: Experiment, cgroups_unavailable=cgroups.unavailable) -> list[tuple[str, str]]:
    """What a cluster runs but this machine cannot, each naming the field (or the environment variable)."""
    problems = []
    if why := range_problem():
        problems.append((PORTS_ENV, why))
    if experiment.spec.target.deployment is not None:
        problems.append(("spec.target.deployment", "an existing Deployment runs only in a cluster; the local engine "
                                                   "serves spec.target.app"))
    fields = limit_fields(experiment)
    if fields and (why := cgroups_unavailable()):
        problems += [(field, f"{why}, so it cannot enforce this limit; run loadstage as root, or the experiment in "
                             f"a cluster") for field in fields]
    if experiment.spec.redis.password_secret is not None:
        problems.append(("spec.redis.passwordSecret", "Secrets exist only in a cluster; the local engine's "
                                                      "Redis listens on loopback without a password"))
    target = experiment.spec.target
    for which, probe in (("readinessProbe", target.readiness_probe), ("livenessProbe", target.liveness_probe)):
        if probe is not None and probe.exec is not None:
            problems.append((f"spec.target.{which}.exec", "the local engine runs no command in a target; use "
                                                          "httpGet or tcpSocket, which it checks on the instance's "
                                                          "own port"))
    m = experiment.spec.matrix
    pods_field = "spec.matrix.pods" if m and m.pods else "spec.target.pods"
    several = [v for v in experiment.variants() if v.pods > 1]
    if proxied := next((v.proxy for v in several if v.proxy), None):
        problems.append((pods_field, f"the local engine runs one {proxied} per target instance on its own "
                                     f"port, so with a proxy pods must be 1; a cluster runs any number of pods"))
    for server in dict.fromkeys(v.server for v in several if not v.proxy):
        if not (entry := servers.BY_NAME.get(server)) or not entry.shares_port:
            problems.append((pods_field, f"the local engine runs {server} as one instance (it cannot listen on a "
                                         f"shared port and a port of its own), so pods must be 1; a cluster runs "
                                         f"any number of pods"))
    return problems


@dataclass
class LocalTarget:
    redis_url: str | None         # None: the target uses no Redis
    redis_process: Child | None
    shared_port: int
    pods: list[Child]
    admin_urls: list[str]
    scratch: list[Path] = field(default_factory=list)   # directories outside the run's, removed at stop
    proxies: list[Child] = field(default_factory=list)  # each pod's front proxy, where the variant has one

    @property
    def processes(self) -> list[Child]:
        return [*self.pods, *self.proxies]

    @classmethod
    def start(cls, experiment: Experiment, variant: Variant, directory: Path, supervisor: Supervisor, root: Path,
              check_cancel: Callable[[], None], cgroups: Cgroups | None = None, name: str | None = None
              ) -> LocalTarget:
        """Starts the variant's target and waits until every instance passes its readiness probe. `name`
        prefixes its cgroups (v1 by default)."""
        redis_process = None
        prefix = name or f"v{variant.index + 1}"
        if experiment.spec.redis.deployed:
            port = free_port()
            redis_process = supervisor.start("redis-server", argv.redis_command(port=port, bind=LOOPBACK),
                                             log_path=directory / "redis.log", cwd=directory,
                                             cgroup=pod_cgroup(cgroups, f"{prefix}-redis",
                                                               experiment.spec.redis.resources))
            deployed = f"redis://{LOOPBACK}:{port}/0"
            _wait_for_redis(deployed, redis_process, check_cancel)
            redis_url: str | None = deployed
        else:
            redis_url = experiment.spec.redis.url
        shared = free_port()
        pods, proxies, admin_ports, scratch = [], [], [], []
        proxy = experiment.spec.target.proxy_of(variant)
        open_socket = variant.socket == "unix" and os.geteuid() == 0
        for p in range(variant.pods):
            admin = free_port() if variant.pods > 1 else shared
            binds = [f"{LOOPBACK}:{port}" for port in dict.fromkeys([shared, admin])]
            env, own = pod_env(experiment, variant, redis_url, directory / f"pod-{p + 1}-metrics",
                               f"loadstage-{prefix}-pod-{p + 1}-")
            scratch += [own] if own else []
            if proxy is not None:
                beside = _scratch_dir(f"loadstage-{prefix}-proxy-{p + 1}-")   # its socket and configuration
                scratch.append(beside)
                app_binds = [argv.app_bind(variant, port=free_port(), socket_dir=str(beside))]
                proxies.append(supervisor.start(
                    f"{proxy.server} pod {p + 1}", argv.proxy_command(variant, proxy, listen=binds,
                                                                      upstream=app_binds[0]),
                    log_path=directory / f"proxy-{p + 1}.log", env={"TMPDIR": str(beside)}, cwd=directory,
                    cgroup=pod_cgroup(cgroups, f"{prefix}-proxy-{p + 1}", proxy.resources)))
            command = argv.runner_command(experiment, variant, binds=app_binds if proxy else binds,
                                          reuse_port=variant.pods > 1)
            pods.append(supervisor.start(f"{variant.server} pod {p + 1}", command,
                                         log_path=directory / f"pod-{p + 1}.log", env=env, cwd=root,
                                         cgroup=pod_cgroup(cgroups, f"{prefix}-pod-{p + 1}", variant.resources),
                                         umask=OPEN_SOCKET_UMASK if open_socket else -1))
            admin_ports.append(admin)
        target = cls(redis_url, redis_process, shared, pods, [f"http://{LOOPBACK}:{port}" for port in admin_ports],
                     scratch, proxies)
        deadline = time.monotonic() + experiment.spec.target.ready_timeout
        try:
            for p, port in enumerate(admin_ports):
                wait_until_ready([pods[p], *proxies[p:p + 1]], experiment.spec.target.readiness(), port, deadline,
                                  check_cancel)
        except BaseException:
            target.remove_scratch()
            raise
        return target

    def cpu_seconds(self) -> float | None:
        """CPU time of every instance, from their cgroups; None where they run in none."""
        cgroups = [pod.cgroup for pod in self.pods if pod.cgroup is not None]
        if len(cgroups) < len(self.pods):
            return None
        return sum(cgroup.cpu_seconds() for cgroup in cgroups)

    def counters(self) -> Counters | None:
        """Throttling and OOM kills of every instance so far, from their cgroups; None where one runs in none."""
        found = [pod.cgroup.counters() if pod.cgroup is not None else None for pod in self.pods]
        each = [c for c in found if c is not None]
        return Counters.summed(each) if each and len(each) == len(found) else None

    @property
    def ports(self) -> list[int]:
        """The ports its instances listen on: the shared one and each admin one."""
        return [self.shared_port, *(int(url.rpartition(":")[2]) for url in self.admin_urls)]

    @property
    def every_process(self) -> list[Child]:
        return [*self.proxies, *self.pods, *([self.redis_process] if self.redis_process else [])]

    def stop(self, supervisor: Supervisor) -> None:
        supervisor.stop_together(self.every_process)
        self.remove_scratch()

    def redis_lost(self) -> str | None:
        """Why the redis-server this run started is gone, if it is."""
        process = self.redis_process
        if process is None or process.alive():
            return None
        return f"redis-server (pid {process.pid}) exited with code {process.process.returncode}; its log: " \
               f"{process.log_path}"

    def restart_redis(self, supervisor: Supervisor, check_cancel: Callable[[], None]) -> None:
        """A lost redis-server again, as it was started, on its port: empty, as a Redis pod that restarted."""
        lost = self.redis_process
        if lost is None or lost.alive() or self.redis_url is None:
            return
        supervisor.stop(lost, at_once=True)
        self.redis_process = supervisor.start(lost.name, lost.argv, log_path=lost.log_path, cwd=lost.log_path.parent,
                                              cgroup=lost.cgroup)
        _wait_for_redis(self.redis_url, self.redis_process, check_cancel)

    def remove_scratch(self) -> None:
        for path in self.scratch:
            shutil.rmtree(path, ignore_errors=True)


OPEN_SOCKET_UMASK = 0o000   # cheroot leaves its Unix socket to the umask; under root the proxy's workers are nobody


def pod_env(experiment: Experiment, variant: Variant, redis_url: str | None, metrics_dir: Path,
            scratch_prefix: str) -> tuple[dict[str, str], Path | None]:
    """A local pod's environment (argv.runner_env), and the scratch directory it needs, if any: mod_wsgi gets
    one for the app's metrics and for Apache's server root ($TMPDIR), to be removed when the pod stops."""
    if variant.server != "mod_wsgi":
        return argv.runner_env(experiment, variant, redis_url=redis_url, metrics_dir=str(metrics_dir)), None
    if closed := closed_to_apache_workers():
        raise LocalRunError(f"mod_wsgi, run by root, serves the app as nobody, who cannot enter {closed} (on the "
                            f"way to this Python or checkout); run loadstage as another user, or from a directory "
                            f"others can enter")
    scratch = _scratch_dir(scratch_prefix)
    metrics_dir = scratch / "metrics"
    metrics_dir.mkdir()
    metrics_dir.chmod(scratch.stat().st_mode & 0o777)
    return {**argv.runner_env(experiment, variant, redis_url=redis_url, metrics_dir=str(metrics_dir)),
            "TMPDIR": str(scratch)}, scratch


def _scratch_dir(prefix: str) -> Path:
    """A directory in the system's temporary directory. Under root, open to all: Apache, started by root, runs
    the app as nobody (servers.MOD_WSGI_USER), and the run's own directories are root's alone."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        path.chmod(0o777)
    return path


def pod_cgroup(cgroups: Cgroups | None, name: str, resources: Resources) -> PodCgroup | None:
    """A local pod's own cgroup, where it has resources and this run has cgroups."""
    return cgroups.pod(name, resources) if cgroups is not None and resources.manifest() else None


def _wait_for_redis(url: str, process: Child, check_cancel: Callable[[], None]) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
    deadline = time.monotonic() + REDIS_READY_SECONDS
    try:
        while True:
            check_cancel()
            try:
                client.ping()
                return
            except redis.ConnectionError:
                pass
            check_alive(process)
            if time.monotonic() > deadline:
                raise LocalRunError(f"redis-server did not answer within {REDIS_READY_SECONDS}s")
            time.sleep(READY_POLL_SECONDS)
    finally:
        client.close()


def signals(counters: Counters | None, queues: ListenQueues, redis: RedisSample, backlog: int,
            redis_limit: str | None, load: tuple[float, float] | None) -> Saturation:
    """What the local backend measured of the target's saturation (results.saturation completes it): its pods
    share this machine's cores; Redis's CPU is over the `load` window."""
    return Saturation(
        cpu_capacity_cores=machine_cores(),
        throttled_share=None if counters is None else share(counters.throttled, counters.periods),
        oom_kills=None if counters is None else counters.oom_kills,
        backlog_peak=queues.peak, backlog_limit=backlog_limit(backlog), listen_overflows=queues.overflows,
        redis_cpu_share=redis_cpu_share(redis.cpu_cores_within(load), redis_limit), redis_max_clients=redis.max_clients,
        redis_rejected=redis.rejected, redis_usec_per_call=redis.usec_per_call)
