"""The Kubernetes backend: the target as Deployments and Services, each stage as a Locust
master Job (with its Service) and a worker Job whose parallelism is the injector count.

Every call is idempotent: objects are created if missing and adopted if present, so a
restarted operator picks a stage in flight up where it is. The stage result travels in
the master container's termination message, which survives an operator restart."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any, Awaitable, Callable

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

from . import manifests
from .api_calls import call
from .engine import Cancelled, ExperimentFailed, Step, now
from .manifests import Images
from .model import API_GROUP, Experiment, Variant
from .pod_watch import WATCH_SECONDS, Pod, PodWatches
from .redis_sampler import AsyncRedisSampler, stopped_within
from .results import StageMeasurement
from .summary import artifact_from_log, fit_artifact

POLL_SECONDS = 1.0
UNMAPPED_OWNER_WAIT_SECONDS = 90   # three times the API server's remapping period
# Waiting reasons after which a pod will not start by itself.
FATAL_WAITING_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff",
                         "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


class StopFlag:
    """Whether kopf's DaemonStopped or a threading.Event is set."""

    def __init__(self, flag: Any):
        self._flag = flag

    def is_set(self) -> bool:
        return bool(self._flag.is_set() if hasattr(self._flag, "is_set") else self._flag)


def _parse_quantity_cpu(text: str) -> float:
    return float(parse_quantity(text))


def _parse_quantity_bytes(text: str) -> int:
    return int(parse_quantity(text))


def metrics_interval(stage_seconds: float) -> float:
    """A sixth of the stage, between 5 s and 60 s: a short stage gets several samples, and a long
    stage (whose load is steady) costs one request a minute."""
    return min(60.0, max(5.0, stage_seconds / 6))


class PodMetricsSampler:
    """Peak CPU and memory of the target pods from metrics.k8s.io, where the cluster has it.
    Use as an async context manager around a stage."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str, selector: str, interval: float):
        self._custom, self._namespace, self._selector, self._interval = custom, namespace, selector, interval
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self.available = True
        self.peak_cpu: float | None = None
        self.peak_memory: int | None = None

    async def _sample(self) -> None:
        try:
            items = (await call(self._custom.list_namespaced_custom_object, "metrics.k8s.io", "v1beta1",
                                self._namespace, "pods", label_selector=self._selector))["items"]
        except ApiException as e:
            if e.status in (404, 403, 503):
                self.available = False
            return
        except (urllib3.exceptions.HTTPError, OSError):   # a sample lost: the next one may succeed
            return
        containers = [c for item in items for c in item.get("containers", [])]
        if not containers:
            return
        cpu = sum(_parse_quantity_cpu(c["usage"]["cpu"]) for c in containers)
        mem = sum(_parse_quantity_bytes(c["usage"]["memory"]) for c in containers)
        self.peak_cpu = max(self.peak_cpu or 0.0, round(cpu, 3))
        self.peak_memory = max(self.peak_memory or 0, mem)

    async def _loop(self) -> None:
        while self.available and not await stopped_within(self._stop, self._interval):
            await self._sample()

    async def __aenter__(self) -> "PodMetricsSampler":
        await self._sample()
        if self.available:
            self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


class KubernetesBackend:
    """Every method is a coroutine: waiting on pods costs no thread (the namespace's PodWatches do),
    and each API request runs on the shared api_calls pool."""

    def __init__(self, experiment: Experiment, namespace: str, *, api: client.ApiClient, images: Images,
                 owner_uid: str, adopt: Callable[[dict], None], stopped: Any, pod_watches: PodWatches,
                 on_event: Callable[[str, str], None] = lambda reason, message: None,
                 on_message: Callable[[str], Awaitable[None]] | None = None,
                 redis_sample_url: str | None = None, poll: float = POLL_SECONDS):
        self.experiment = experiment
        self.namespace = namespace
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.images = images
        self.owner_uid = owner_uid
        self.adopt = adopt
        self.stopped = StopFlag(stopped)
        self.pods = pod_watches(namespace)
        self.on_event = on_event
        self.on_message = on_message
        self.redis_sample_url = redis_sample_url or self._in_cluster_redis_url()
        self.poll = poll
        self.redis_password: str | None = None
        self.runner_ips: list[str] = []   # of the current variant's ready runner pods

    def _in_cluster_redis_url(self) -> str:
        if not self.experiment.spec.redis.deployed:
            return self.experiment.spec.redis.url
        return (f"redis://{manifests.redis_name(self.experiment)}.{self.namespace}.svc:"
                f"{manifests.commands.REDIS_PORT}/0")

    # -- objects ------------------------------------------------------------------

    async def _create(self, manifest: dict) -> bool:
        """Creates the object, or adopts it if it exists, is owned by this experiment and is not being
        deleted. True if it was created. An earlier experiment's object of the same name is waited for."""
        self.adopt(manifest)
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        create = {"Deployment": self.apps.create_namespaced_deployment,
                  "Service": self.core.create_namespaced_service,
                  "Job": self.batch.create_namespaced_job,
                  "ConfigMap": self.core.create_namespaced_config_map}[kind]
        unmapped_since = None
        while True:
            try:
                await call(create, self.namespace, manifest)
                return True
            except ApiException as e:
                if e.status in (400, 422):  # the object itself is invalid: retrying cannot help
                    raise ExperimentFailed("InvalidChild", f"cannot create {kind} {name}: {api_message(e)}") from None
                if _owner_kind_unmapped(e):
                    if unmapped_since is None:
                        unmapped_since = time.monotonic()
                        await self._say("WaitingForApiServer", _unmapped_owner_message(manifest))
                    if time.monotonic() - unmapped_since < UNMAPPED_OWNER_WAIT_SECONDS:
                        await self._pause(self.poll)
                        continue
                if e.status != 409:
                    raise  # forbidden, throttled, unavailable: the caller retries
            existing = await self._read(kind, name)
            if existing is None:
                continue
            if self._owned(existing) and existing.metadata.deletion_timestamp is None:
                return False
            await self._wait_until_gone(kind, name, existing)

    async def _read(self, kind: str, name: str):
        read = {"Deployment": self.apps.read_namespaced_deployment, "Service": self.core.read_namespaced_service,
                "Job": self.batch.read_namespaced_job, "ConfigMap": self.core.read_namespaced_config_map}[kind]
        try:
            return await call(read, name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def _owned(self, obj) -> bool:
        return any(ref.uid == self.owner_uid for ref in obj.metadata.owner_references or [])

    async def _wait_until_gone(self, kind: str, name: str, existing) -> None:
        """Waits for another experiment's object (or one being deleted) to go; a foreign one fails."""
        owners = [f"{ref.kind} {ref.name} (uid {ref.uid})" for ref in existing.metadata.owner_references or []]
        earlier = any(ref.kind == "LoadExperiment" and ref.api_version.startswith(f"{API_GROUP}/")
                      for ref in existing.metadata.owner_references or [])
        if existing.metadata.deletion_timestamp is None and not earlier:
            raise ExperimentFailed("ChildConflict", f"{kind} {name} already exists and is not this experiment's "
                                                    f"(owners: {', '.join(owners) or 'none'}); delete or rename it")
        state = "being deleted" if existing.metadata.deletion_timestamp else "not yet garbage-collected"
        await self._say("WaitingForOldChild", f"waiting for {kind} {name} of an earlier LoadExperiment (owner "
                                              f"{', '.join(owners) or 'none'}) to be deleted: it is {state}")
        while await self._read(kind, name) is not None:
            await self._pause(self.poll * 2)

    async def _say(self, reason: str, message: str) -> None:
        if self.on_message is not None:
            await self.on_message(message)
        self.on_event(reason, message)

    async def _pause(self, seconds: float) -> None:
        self._check_stopped()
        await asyncio.sleep(seconds)
        self._check_stopped()

    async def _apply_deployment(self, manifest: dict) -> None:
        if not await self._create(manifest):
            await call(self.apps.patch_namespaced_deployment, manifest["metadata"]["name"], self.namespace, manifest)

    def _check_stopped(self) -> None:
        if self.stopped.is_set():
            raise Cancelled()

    # -- target -------------------------------------------------------------------

    async def prepare_variant(self, variant: Variant) -> None:
        exp = self.experiment
        await self._check_locustfile()
        self.redis_password = await self._read_redis_password()
        components = []
        if exp.spec.redis.deployed:
            await self._apply_deployment(manifests.redis_deployment(exp, variant, self.images))
            await self._create(manifests.redis_service(exp))
            components.append(manifests.redis_name(exp))
        await self._apply_deployment(manifests.runner_deployment(exp, variant, self.images))
        await self._create(manifests.runner_service(exp))
        await self._create(manifests.runner_pods_service(exp))
        components.append(manifests.runner_name(exp))
        await self._wait_until_ready(components, variant)
        self.on_event("TargetReady", f"variant {variant.index + 1}: {variant.label()}, "
                                     f"{variant.pods} runner pod(s) ready")

    async def _read_redis_password(self) -> str | None:
        secret = self.experiment.spec.redis.password_secret
        if secret is None:
            return None
        where = f"spec.redis.passwordSecret: Secret {secret.name!r}"
        try:
            data = (await call(self.core.read_namespaced_secret, secret.name, self.namespace)).data or {}
        except ApiException as e:
            if e.status == 404:
                raise ExperimentFailed("RedisSecretMissing", f"{where} not found") from None
            if e.status == 403:
                raise ExperimentFailed("RedisSecretForbidden", f"{where}: the operator may not read it; list it "
                                                               f"in the chart's rbac.redisPasswordSecrets") from None
            raise
        if secret.key not in data:
            raise ExperimentFailed("RedisSecretMissing", f"{where} has no key {secret.key!r}")
        return base64.b64decode(data[secret.key]).decode()

    async def _check_locustfile(self) -> None:
        lf = self.experiment.spec.injectors.locustfile
        if lf is None:
            return
        if lf.config_map is None:
            raise ExperimentFailed("InvalidSpec", "spec.injectors.locustfile.path works only with the local "
                                                  "engine; in a cluster use locustfile.configMap")
        try:
            cm = await call(self.core.read_namespaced_config_map, lf.config_map.name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                raise ExperimentFailed("LocustfileMissing", f"spec.injectors.locustfile.configMap: ConfigMap "
                                                            f"{lf.config_map.name!r} not found") from None
            raise
        if lf.config_map.key not in (cm.data or {}):
            raise ExperimentFailed("LocustfileMissing", f"spec.injectors.locustfile.configMap: ConfigMap "
                                                        f"{lf.config_map.name!r} has no key {lf.config_map.key!r}")

    async def _wait_until_ready(self, names: list[str], variant: Variant) -> None:
        """Waits on the target's pods until each component has exactly its replicas ready and none
        left over, then confirms with the Deployments' status (which lags the pods' a moment)."""
        exp = self.experiment
        timeout = exp.spec.target.ready_timeout
        deadline = time.monotonic() + timeout
        want = {name.rsplit("-", 1)[1]: variant.pods if name == manifests.runner_name(exp) else 1 for name in names}

        def settled(current: dict[str, Pod]) -> list[str] | None:
            """The runner pods' IPs, once every component has its pods ready."""
            fatal = _cannot_start(current.values())
            if fatal:
                raise ExperimentFailed("TargetNotReady", fatal)
            live = [p for p in current.values() if not p["metadata"].get("deletionTimestamp")]
            for component, count in want.items():
                mine = [p for p in live if p["metadata"]["labels"].get(manifests.LABEL_COMPONENT) == component]
                if len(mine) != count or not all(_ready(p) for p in mine):
                    return None
            return sorted(p["status"].get("podIP", "") for p in live
                          if p["metadata"]["labels"].get(manifests.LABEL_COMPONENT) == "runner")
        while True:
            runner_ips = await self.pods.until(exp.name, {manifests.LABEL_COMPONENT: ",".join(want)}, settled,
                                               self.stopped, timeout=max(0.0, deadline - time.monotonic()))
            if runner_ips:
                waiting = [n for n in names if not await self._deployment_ready(n)]
                if not waiting:
                    self.runner_ips = [ip for ip in runner_ips if ip]
                    return
            else:
                waiting = names
            if time.monotonic() > deadline:
                raise ExperimentFailed("TargetNotReady", f"Deployment {', '.join(waiting)} not ready after "
                                                         f"{timeout:g}s ({await self._readiness(waiting[0])})")
            await self._pause(self.poll)

    async def _deployment_ready(self, name: str) -> bool:
        d = await call(self.apps.read_namespaced_deployment_status, name, self.namespace)
        s, want = d.status, d.spec.replicas
        return ((s.observed_generation or 0) >= d.metadata.generation and (s.updated_replicas or 0) == want
                and (s.ready_replicas or 0) == want and (s.replicas or 0) == want)

    async def _readiness(self, name: str) -> str:
        s = (await call(self.apps.read_namespaced_deployment_status, name, self.namespace)).status
        return f"{s.ready_replicas or 0} ready, {s.updated_replicas or 0} updated of {s.replicas or 0}"

    async def finish_variant(self, variant: Variant) -> None:
        pass

    # -- stages -------------------------------------------------------------------

    async def run_stage(self, step: Step) -> StageMeasurement:
        exp = self.experiment
        master = manifests.master_name(exp, step)
        created = await self._create(manifests.master_service(exp, step))
        created = await self._create(manifests.master_job(exp, step, self.images, self.runner_ips)) or created
        created = await self._create(manifests.workers_job(exp, step, self.images)) or created
        self.on_event("StageStarted" if created else "StageResumed",
                      f"{step.label()}: Jobs {master} and {manifests.workers_name(exp, step)}")
        sampling_from = now()
        selector = f"{manifests.LABEL_EXPERIMENT}={exp.name},{manifests.LABEL_COMPONENT}=runner"
        async with AsyncRedisSampler(self.redis_sample_url, password=self.redis_password) as redis_sampler, \
                PodMetricsSampler(self.custom, self.namespace, selector,
                                  metrics_interval(step.stage.duration)) as pod_metrics:
            pod, terminated, lost = await self._wait_for_master(step, resumed=not created)
        summary = _parse_summary(terminated.get("message"), master)
        artifact = {} if step.warmup else await self._keep_artifact(step, pod, stored_before=not created)
        sample = redis_sampler.result
        return StageMeasurement(
            summary=summary, artifact=artifact,
            started_at=terminated.get("startedAt") or now(), finished_at=terminated.get("finishedAt") or now(),
            redis_peak_connections=sample.peak_connections if sample.samples else None,
            redis_connections_received=sample.connections_received if sample.samples else None,
            redis_peak_covers="stage" if created else f"from {sampling_from}: the operator restarted mid-stage",
            target_peak_cpu_cores=pod_metrics.peak_cpu, target_peak_memory_bytes=pod_metrics.peak_memory,
            lost_injectors=lost)

    async def _keep_artifact(self, step: Step, pod: str, stored_before: bool) -> dict[str, Any]:
        """The stage's artifact, from its ConfigMap if an earlier run may have stored it (the stage was
        resumed), else from the master's log (its last line), stored in a ConfigMap owned by the experiment."""
        name = manifests.results_name(self.experiment, step.variant.index, step.number)
        kept = await self._read_artifact(name) if stored_before else None
        if kept is not None:
            return kept
        log = await call(self.core.read_namespaced_pod_log, pod, self.namespace, container="locust-master")
        artifact = artifact_from_log(log)
        if artifact is None:
            raise ExperimentFailed("StageFailed", f"{step.label()}: the Locust master {pod} printed no "
                                                  f"artifact line; end of its log: {log[-500:]!r}")
        await self._create(manifests.results_configmap(self.experiment, step, fit_artifact(artifact)))
        return artifact

    async def _read_artifact(self, name: str) -> dict[str, Any] | None:
        try:
            data = (await call(self.core.read_namespaced_config_map, name, self.namespace)).data or {}
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return json.loads(data[manifests.ARTIFACT_KEY]) if manifests.ARTIFACT_KEY in data else None

    async def saved_artifacts(self, variant: Variant, count: int) -> list[dict[str, Any]]:
        return [await self._read_artifact(manifests.results_name(self.experiment, variant.index, number)) or {}
                for number in range(1, count + 1)]

    async def _wait_for_master(self, step: Step, resumed: bool):
        """Waits on the stage's pods, so the master's end, a pod that cannot start and a lost injector
        are seen at once. Every WATCH_SECONDS with nothing seen, checks whether either Job failed
        without a pod to show it. Returns the master pod's name, its terminated state and the
        injectors lost on the way (onLost: Continue), which are kept on the worker Job as they are
        seen, for an operator that resumes the stage."""
        exp = self.experiment
        master, workers = manifests.master_name(exp, step), manifests.workers_name(exp, step)
        lost: dict[str, dict[str, Any]] = await self._lost_before(workers) if resumed else {}
        seen: set[str] = set(lost)
        unrecorded: set[str] = set()

        def ended(current: dict[str, Pod]):
            fatal = _cannot_start(current.values())
            if fatal:
                raise ExperimentFailed("InjectorNotStarting", f"{step.label()}: {fatal}")
            masters = [p for p in current.values() if _job_of(p) == master]
            for pod in masters:
                if pod["metadata"].get("deletionTimestamp"):
                    return "deleted", pod
            found = _master_terminated(masters, step)
            if found is not None:
                return "finished", found
            mine = {name: pod for name, pod in current.items() if _job_of(pod) == workers}
            causes = {name: _loss(pod) for name, pod in mine.items()}
            causes.update({name: "was deleted" for name in seen - mine.keys()})
            for name, cause in causes.items():
                if cause is None or name in lost:
                    continue
                message = f"{step.label()}: injector pod {name} {cause}"
                if exp.spec.injectors.on_lost == "Fail":
                    raise ExperimentFailed("InjectorLost", message)
                lost[name] = {"injector": name, "at": now(), "cause": cause}
                unrecorded.add(name)
                self.on_event("InjectorLost", f"{message}; the stage goes on (onLost: Continue)")
            seen.update(mine)
            return ("lost", None) if unrecorded else None
        while True:
            found = await self.pods.until(exp.name, {manifests.LABEL_RUN: manifests.run_id(step)}, ended,
                                          self.stopped, timeout=WATCH_SECONDS)
            if found is not None:
                what, detail = found
                if what == "lost":
                    await self._record_lost(workers, list(lost.values()))
                    unrecorded.clear()
                    continue
                if what == "finished":
                    return (*detail, list(lost.values()))
                failure = await self._job_failure(master)
                raise ExperimentFailed("StageFailed", f"{step.label()}: the Locust master pod "
                                                      f"{detail['metadata']['name']} {_loss(detail)}"
                                       + (f"; Job {master} failed: {failure}" if failure else ""))
            for job_name in (master, workers):
                failure = await self._job_failure(job_name)
                if failure:
                    raise ExperimentFailed("StageFailed", f"{step.label()}: Job {job_name} failed: {failure}"
                                           + self._master_output(master))

    async def _record_lost(self, workers: str, lost: list[dict[str, Any]]) -> None:
        await call(self.batch.patch_namespaced_job, workers, self.namespace,
                   {"metadata": {"annotations": {manifests.ANNOTATION_LOST_INJECTORS: json.dumps(lost)}}})

    async def _lost_before(self, workers: str) -> dict[str, dict[str, Any]]:
        job = await self._read("Job", workers)
        recorded = ((job.metadata.annotations or {}) if job else {}).get(manifests.ANNOTATION_LOST_INJECTORS)
        try:
            return {entry["injector"]: entry for entry in json.loads(recorded or "[]")}
        except (ValueError, TypeError, KeyError):   # edited by hand: the losses seen from now on still count
            return {}

    async def _job_failure(self, name: str) -> str | None:
        try:
            job = await call(self.batch.read_namespaced_job_status, name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return "the Job was deleted"
            raise
        for condition in job.status.conditions or []:
            if condition.type == "Failed" and condition.status == "True":
                return f"{condition.reason}: {condition.message}"
        return None

    def _master_output(self, master: str) -> str:
        pods = self.pods.snapshot(self.experiment.name, {"job-name": master})
        for pod in pods.values():
            for cs in _containers(pod):
                message = ((cs.get("state") or {}).get("terminated") or {}).get("message")
                if message:
                    return f"; master said: {message[-500:]}"
        return ""


def delete_children(api: client.ApiClient, namespace: str, experiment_name: str) -> int:
    """Deletes the experiment's Jobs (with their pods), Deployments and Services; idempotent.
    Its results ConfigMaps stay until the experiment itself is deleted. Returns how many were deleted."""
    selector = f"{manifests.LABEL_EXPERIMENT}={experiment_name}"
    background = client.V1DeleteOptions(propagation_policy="Background")
    batch, apps, core = client.BatchV1Api(api), client.AppsV1Api(api), client.CoreV1Api(api)
    deleted = 0
    for lister, deleter in ((batch.list_namespaced_job, batch.delete_namespaced_job),
                            (apps.list_namespaced_deployment, apps.delete_namespaced_deployment),
                            (core.list_namespaced_service, core.delete_namespaced_service)):
        for item in lister(namespace, label_selector=selector).items:
            if item.metadata.deletion_timestamp is not None:
                continue
            try:
                deleter(item.metadata.name, namespace, body=background)
                deleted += 1
            except ApiException as e:
                if e.status != 404:
                    raise
    return deleted


def _job_of(pod: Pod) -> str | None:
    return (pod["metadata"].get("labels") or {}).get("job-name")


def _ready(pod: Pod) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions") or [])


def _containers(pod: Pod) -> list[dict[str, Any]]:
    return pod.get("status", {}).get("containerStatuses") or []


def _cannot_start(pods) -> str | None:
    """What keeps a container from ever starting (a bad image, a crash loop), naming pod and image."""
    for pod in pods:
        for cs in _containers(pod):
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in FATAL_WAITING_REASONS:
                return (f"pod {pod['metadata']['name']} container {cs['name']} (image {cs.get('image')}): "
                        f"{waiting['reason']}: {waiting.get('message') or ''}").strip()
    return None


def _master_terminated(pods: list[Pod], step: Step):
    """(pod name, the master container's terminated state) if it exited 0; raises if it failed."""
    for pod in pods:
        for cs in _containers(pod):
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is None:
                continue
            if terminated.get("exitCode") == 0:
                return pod["metadata"]["name"], terminated
            raise ExperimentFailed("StageFailed", f"{step.label()}: the Locust master pod {pod['metadata']['name']} "
                                                  f"{_loss(pod)}")
    return None


def _loss(pod: Pod) -> str | None:
    """Why a stage pod is gone for good (deleted, evicted, its container failed), or None."""
    status = pod.get("status") or {}
    why = f" ({status['reason']}: {status.get('message')})" if status.get("reason") else ""
    if pod["metadata"].get("deletionTimestamp"):
        return f"was deleted{why}"
    for cs in _containers(pod):
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated is not None and terminated.get("exitCode") != 0:
            said = (terminated.get("message") or "").strip()
            return (f"failed: container {cs['name']} exited with code {terminated.get('exitCode')} "
                    f"({terminated.get('reason') or 'Error'})" + (f": {said[-400:]}" if said else ""))
    if status.get("phase") == "Failed":
        return f"failed{why}"
    return None


def _parse_summary(message: str | None, master: str) -> dict[str, Any]:
    try:
        summary = json.loads(message or "")
        if not isinstance(summary, dict) or "latencyMs" not in summary:
            raise ValueError
        return summary
    except ValueError:
        raise ExperimentFailed("StageFailed", f"the Locust master {master} ended without a stage summary in "
                                              f"its termination message: {(message or '')[:300]!r}") from None


def _owner_kind_unmapped(e: ApiException) -> bool:
    """The OwnerReferencesPermissionEnforcement admission plugin maps kinds every 30 s: a CRD installed
    since then cannot own an object that blocks its deletion, yet."""
    return e.status == 403 and "cannot find RESTMapping" in (e.body or "")


def _unmapped_owner_message(manifest: dict) -> str:
    kinds = ", ".join(f"{ref['kind']} ({ref['apiVersion']})" for ref in manifest["metadata"].get("ownerReferences", [])
                      if ref.get("blockOwnerDeletion"))
    return f"waiting for the API server to map kind {kinds} for owner references: its CRD was installed moments ago"


def api_message(e: ApiException) -> str:
    try:
        return json.loads(e.body)["message"]
    except (TypeError, ValueError, KeyError):
        return f"{e.status} {e.reason}"
