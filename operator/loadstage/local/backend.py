"""The local backend: the target and the injectors as processes on this machine. A variant's target is
loadstage.local.target; a stage is a Locust master and one worker process per injector. Every process
runs the command line a container would run.

Stages follow each other without dead time: when a stage's load ends, the next stage's master and
workers start, forked from a launcher that imported Locust once (loadstage.locust.launcher), connect, and
wait for a start file; the next stage's load begins the moment the engine asks for it."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadstage.api.types import Experiment, Variant
from loadstage.engine.clock import now
from loadstage.engine.errors import Cancelled, ExperimentFailed, StageDisrupted
from loadstage.engine.steps import Step
from loadstage.launch import argv
from loadstage.launch.lost_injectors import LostInjectors
from loadstage.local.cgroups import Cgroups, CgroupsUnavailable
from loadstage.local.ports import LOOPBACK, free_port
from loadstage.local.processes import Child, Supervisor
from loadstage.local.readiness import LocalRunError, check_alive
from loadstage.local.target import LocalTarget, limit_fields, pod_cgroup, project_root, signals
from loadstage.results.live_series import target_samples
from loadstage.results.measurement import StageMeasurement, load_window
from loadstage.samplers.listen_queue import ListenQueueSampler
from loadstage.samplers.processes import ProcessTreeSampler
from loadstage.samplers.redis import RedisSampler
from loadstage.samplers.worker_log import interface_mismatch, log_size, worker_restarts

STAGE_GRACE_SECONDS = argv.EXPECT_WORKERS_MAX_WAIT_SECONDS + 60
START_FILE = "start"
FOLLOW_POLL_SECONDS = 0.1
ENDING_POLL_SECONDS = 0.02   # once the load is over, the next stage waits only on the results and exits


@dataclass
class Progress:
    step: Step
    elapsed: float
    snapshot: dict[str, Any]                 # the master's (loadstage.locust.live)
    target: dict[str, Any] = field(default_factory=dict)   # the latest samples: cpu_cores, memory_bytes, ...


@dataclass
class _StageProcesses:
    """A stage's Locust master and workers, started and connected, waiting for `start_file`."""
    run_id: str
    directory: Path
    master: Child
    workers: list[Child]

    @property
    def start_file(self) -> Path:
        return self.directory / START_FILE


class LocalBackend:
    def __init__(self, experiment: Experiment, workdir: Path, *,
                 on_progress: Callable[[Progress], None] = lambda p: None,
                 cancel: threading.Event | None = None):
        self.experiment = experiment
        self.workdir = workdir.absolute()   # the injectors are forked in the project root (WarmLauncher)
        self.on_progress = on_progress
        self.cancel = cancel or threading.Event()
        self.root = project_root()
        self.supervisor = Supervisor()
        self.target: LocalTarget | None = None
        self.ahead: _StageProcesses | None = None
        self.retired: list[Child] = []   # masters of finished stages, still quitting
        self.started: dict[int, int] = {}   # how many times each variant's target has been started
        spec = experiment.spec
        self.cgroups = None
        if any(r.manifest() for r in (spec.redis.resources, spec.injectors.resources, spec.injectors.master_resources,
                                      *(v.resources for v in experiment.variants()))):
            try:
                self.cgroups = Cgroups.create()
            except (CgroupsUnavailable, OSError):
                if limit_fields(experiment):   # local_problems refused them already; requests only reserve
                    raise
        self.supervisor.warm_up(workdir / "launcher.log", self.root)   # its imports overlap the target's start


    # -- target -------------------------------------------------------------

    def prepare_variant(self, variant: Variant) -> None:
        """Starts the variant's target; again, in a directory and cgroups of its own, each time an order that
        interleaves the variants comes back to it."""
        times = self.started[variant.index] = self.started.get(variant.index, 0) + 1
        name = f"v{variant.index + 1}" + (f"-{times}" if times > 1 else "")
        directory = self.workdir / f"variant-{variant.index + 1}" / (f"target-{times}" if times > 1 else "")
        self.target = LocalTarget.start(self.experiment, variant, directory, self.supervisor, self.root,
                                        self._check_cancel, self.cgroups, name=name)

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Cancelled()

    def discard_stage(self, step: Step) -> None:
        """A stage disrupted by a lost redis-server (its Locust processes are stopped): Redis again, for the
        stage's next attempt."""
        if self.target is not None:
            self.target.restart_redis(self.supervisor, self._check_cancel)

    def finish_variant(self, variant: Variant) -> None:
        self._drop_ahead()
        self._stop_retired(at_once=True)   # their results are written: they have nothing left to do but quit
        if self.target is not None:
            self.target.stop(self.supervisor)
            self.target = None

    def close(self) -> None:
        self.supervisor.stop_all()
        self.target = None
        if self.cgroups is not None:
            self.cgroups.remove()

    def saved_artifacts(self, steps: list[Step]) -> list[dict]:
        return []   # a local run is never resumed: there is nothing saved from before

    # -- stages -------------------------------------------------------------

    def _launch(self, step: Step) -> _StageProcesses:
        target = self.target
        assert target is not None, "prepare_variant must run first"
        repeat = f"repeat-{step.repeat}" if step.repeat > 1 else ""
        warmup = f"warmup-{step.precedes}" if step.precedes > 1 else "warmup"
        stage = warmup if step.warmup else f"stage-{step.number}"
        sdir = self.workdir / f"variant-{step.variant.index + 1}" / repeat / stage
        sdir.mkdir(parents=True, exist_ok=True)
        custom = self.experiment.spec.injectors.locustfile
        custom_path = custom.path if custom else None
        master_port = free_port()
        start_file = sdir / START_FILE
        start_file.unlink(missing_ok=True)
        injectors = self.experiment.spec.injectors
        master = self.supervisor.start(
            "locust master", argv.locust_master_command(
                self.experiment, step.stage, host=f"http://{LOOPBACK}:{target.shared_port}",
                summary_file=str(sdir / "summary.json"), artifact_file=str(sdir / "artifact.json"),
                progress_file=str(sdir / "progress.json"),
                target_metrics=[f"{url}{self.experiment.spec.target.metrics.path}" for url in target.admin_urls],
                bind_host=LOOPBACK, bind_port=master_port, custom_locustfile=custom_path,
                start_file=str(start_file), decide=not step.warmup),
            log_path=sdir / "master.log", cwd=self.root, warm=True,
            cgroup=pod_cgroup(self.cgroups, f"{step.run_id}-master", injectors.master_resources))
        workers = [self.supervisor.start(
            f"locust worker {i + 1}", argv.locust_worker_command(
                self.experiment, master_host=LOOPBACK, master_port=master_port, custom_locustfile=custom_path),
            log_path=sdir / f"worker-{i + 1}.log", cwd=self.root, warm=True,
            cgroup=pod_cgroup(self.cgroups, f"{step.run_id}-worker-{i + 1}", injectors.resources))
            for i in range(step.stage.count)]
        return _StageProcesses(step.run_id, sdir, master, workers)

    def _start_ahead(self, step: Step) -> None:
        """The load of `step` has ended: start the next stage on this target, to wait for its turn."""
        if step.following is not None and self.ahead is None:
            self.ahead = self._launch(step.following)

    def _drop_ahead(self) -> None:
        if self.ahead is not None:
            for child in [*self.ahead.workers, self.ahead.master]:
                self.supervisor.stop(child, timeout=5.0)
            self.ahead = None

    def run_stage(self, step: Step) -> StageMeasurement:
        target = self.target
        assert target is not None, "prepare_variant must run first"
        if self.ahead is not None and self.ahead.run_id != step.run_id:
            self._drop_ahead()
        launched, self.ahead = self.ahead or self._launch(step), None
        master, workers, sdir = launched.master, launched.workers, launched.directory
        summary_file, artifact_file = sdir / "summary.json", sdir / "artifact.json"
        started_at = now()
        proxies = ProcessTreeSampler([p.pid for p in target.proxies]) if target.proxies else nullcontext()
        log_offsets = [log_size(pod.log_path) for pod in target.pods]
        counted = target.counters()
        with RedisSampler(target.redis_url) as redis_sampler, proxies as proxy_sampler, \
                ListenQueueSampler(target.ports) as queue_sampler, \
                ProcessTreeSampler([p.pid for p in target.pods], cpu_seconds=target.cpu_seconds) as resource_sampler:
            launched.start_file.touch()
            try:
                lost = self._follow_stage(step, master, workers, sdir / "progress.json", summary_file, target,
                                          lambda: target_samples(resource_sampler.now, redis_sampler.now))
            except BaseException:
                for child in [*workers, master]:
                    self._stop_after_exit(child)
                raise
        # the results are written and the workers are gone: the master finishes quitting while the next stage runs
        for worker in workers:
            self._stop_after_exit(worker)
        self._stop_retired()
        self.retired = [master]
        lost_names = {entry["injector"] for entry in lost}
        for child in [master, *workers]:
            if child.name not in lost_names and child.process.returncode not in (0, None):
                raise LocalRunError(f"{child.name} exited with code {child.process.returncode}; "
                                    f"end of {child.log_path}:\n{child.tail()}")
        finished_at = now()
        restarted = worker_restarts(step.variant.server, target.pods, log_offsets)   # before the target stops
        counts = target.counters()
        counters = counts.since(counted) if counts is not None and counted is not None else None
        if not summary_file.is_file():
            raise LocalRunError(f"the Locust master wrote no summary (exit code "
                                f"{master.process.returncode}); end of {master.log_path}:\n{master.tail()}")
        summary = json.loads(summary_file.read_text())
        if summary.get("requests") and summary.get("failures") == summary["requests"] and \
                (why := interface_mismatch(target.pods, log_offsets)):
            raise ExperimentFailed("InterfaceMismatch", f"variant {step.variant.index + 1} "
                                   f"({step.variant.label()}): every request failed: {why}")
        if step.last_on_target:   # the target's last stage: it shuts down while the engine records the results
            self.supervisor.terminate(target.every_process)
            self._stop_retired(at_once=True)
        redis, resources = redis_sampler.result, resource_sampler.result   # set as their samplers ended
        proxied = proxy_sampler.result if isinstance(proxy_sampler, ProcessTreeSampler) else None
        queues = queue_sampler.result
        assert redis is not None and resources is not None and queues is not None
        redis_limit = self.experiment.spec.redis.resources.limits.cpu if target.redis_process else None
        artifact = json.loads(artifact_file.read_text())
        return StageMeasurement(
            summary=summary, started_at=started_at, finished_at=finished_at,
            artifact=artifact, redis_peak_connections=redis.peak,
            redis_connections_received=redis.received,
            redis_peak_covers=redis.covers(),
            target_peak_cpu_cores=resources.peak_cpu_cores, target_cpu_readings=resources.cpu_readings,
            target_peak_memory_bytes=resources.peak_memory_bytes,
            target_processes=resources.processes,
            target_peak_process_rss_bytes=resources.peak_process_rss_bytes,
            host_cpu_per_core=resources.cpu_per_core,
            proxy_peak_cpu_cores=proxied.peak_cpu_cores if proxied else None,
            proxy_peak_memory_bytes=proxied.peak_memory_bytes if proxied else None,
            lost_injectors=lost, target_pods=restarted,
            saturation=signals(counters, queues, redis, self.experiment.spec.target.backlog, redis_limit,
                               load_window(artifact)))

    def _follow_stage(self, step: Step, master: Child, workers: list[Child], progress_file: Path,
                      summary_file: Path, target: LocalTarget, sampled: Callable[[], dict[str, Any]]) -> list[dict]:
        """Follows the stage until the master has written its summary (or exited) and every worker has
        exited (a user that raised makes its worker exit 2 as it quits); returns the injectors lost on the
        way (onLost: Continue), or fails the stage on the first one (onLost: Fail)."""
        start = time.monotonic()
        deadline = start + step.stage.duration + STAGE_GRACE_SECONDS
        lost = LostInjectors(self.experiment.spec.injectors.on_lost, step)

        def ongoing() -> bool:
            return any(w.alive() for w in workers) if summary_file.exists() else master.alive()

        while True:
            finished = not ongoing()   # decided before the checks, so that they see every exit
            self._check_cancel()
            for process in target.processes:
                check_alive(process)
            if lost_redis := target.redis_lost():
                raise StageDisrupted(f"{lost_redis} after {time.monotonic() - start:.1f}s", reason="RedisLost")
            # the users are stopping (the stage's time is up, or its request goal met): nothing measured
            # competes with the start, and a worker that exits 0 was told to quit by the master
            ending = time.monotonic() - start >= step.stage.duration or summary_file.exists()
            if ending:
                self._start_ahead(step)
            for worker in workers:
                elapsed = time.monotonic() - start
                if worker.alive() or worker.name in lost or (worker.process.returncode == 0 and ending):
                    continue
                lost.lose(worker.name, f"exited with code {worker.process.returncode} after {elapsed:.1f}s",
                          detail=f"; end of {worker.log_path}:\n{worker.tail()}")
            if time.monotonic() > deadline:
                raise LocalRunError(f"the Locust master did not finish within the stage duration plus "
                                    f"{STAGE_GRACE_SECONDS}s; end of {master.log_path}:\n{master.tail()}")
            try:
                snapshot = json.loads(progress_file.read_text())
            except (OSError, ValueError):
                snapshot = {}
            self.on_progress(Progress(step, time.monotonic() - start, snapshot, sampled()))
            if finished:
                return lost.entries()
            time.sleep(ENDING_POLL_SECONDS if ending else FOLLOW_POLL_SECONDS)

    def _stop_retired(self, at_once: bool = False) -> None:
        """The masters of the stages before: they have exited by now, or (`at_once`) are killed."""
        for child in self.retired:
            if at_once:
                self.supervisor.stop(child, at_once=True)
            else:
                self._stop_after_exit(child, grace=0)
        self.retired = []

    def _stop_after_exit(self, child: Child, grace: float = 10.0) -> None:
        with suppress(subprocess.TimeoutExpired):
            child.process.wait(grace if not self.cancel.is_set() else 0.1)
        self.supervisor.stop(child, timeout=5.0)
