"""The Kubernetes backend: the target as Deployments and Services, each stage as a Locust
master Job (with its Service) and a worker Job whose parallelism is the injector count.

Every call is idempotent: objects are created if missing and adopted if present, so a
restarted operator picks a stage in flight up where it is. The stage result travels in
the master container's termination message, which survives an operator restart. The parts:
children (create or adopt), target (deploy and readiness), stage_watch (a running stage),
stored_results (artifacts and lost injectors) and the samplers around each stage."""

from __future__ import annotations

import contextlib
from typing import Any

from loadstage.api.names import LABEL_EXPERIMENT, LABEL_ROLE
from loadstage.api.status import Saturation
from loadstage.api.types import Variant
from loadstage.engine.clock import now
from loadstage.engine.errors import StageDisrupted
from loadstage.engine.steps import Step, series_labels
from loadstage.kube import manifests, metrics
from loadstage.kube.cadvisor import NodeCounters
from loadstage.kube.children import Children
from loadstage.kube.context import ExperimentContext
from loadstage.kube.manifests import Defaults
from loadstage.kube.pod_metrics import PodMetricsSampler, metrics_interval
from loadstage.kube.pod_watch import PodWatches
from loadstage.kube.stage_watch import StageWatch, parse_summary
from loadstage.kube.stored_results import StoredResults
from loadstage.kube.target import Target
from loadstage.kube.target_health import TargetHealth
from loadstage.launch.argv import REDIS_PORT
from loadstage.results.live_series import target_samples
from loadstage.results.measurement import StageMeasurement, load_window
from loadstage.results.saturation import redis_cpu_share, share, since_each
from loadstage.samplers.redis import AsyncRedisSampler


class KubernetesBackend:
    """Every method is a coroutine: waiting on pods costs no thread (the namespace's PodWatches do),
    and each API request runs on the shared pool of loadstage.kube.client."""

    def __init__(self, context: ExperimentContext, *, defaults: Defaults, pod_watches: PodWatches,
                 redis_sample_url: str | None = None):
        self.context = context
        self.defaults = defaults
        pods = self.pods = pod_watches(context.namespace)
        self.children = Children(context)
        self.stored = StoredResults(context, self.children)
        self.target = Target(context, self.children, pods, defaults)
        self.stage_watch = StageWatch(context, pods, self.stored)
        self.redis_sample_url = redis_sample_url or self._in_cluster_redis_url()
        self.redis_password: str | None = None
        self.runner_ips: list[str] = []   # of the current variant's ready runner pods
        self.node_counters = NodeCounters(context,
                                          lambda: pods.snapshot(context.experiment.name, {LABEL_ROLE: "runner"}))

    def _in_cluster_redis_url(self) -> str | None:
        experiment = self.context.experiment
        if not experiment.spec.redis.deployed:
            return experiment.spec.redis.url   # None: the target uses no Redis
        return f"redis://{manifests.redis_name(experiment)}.{self.context.namespace}.svc:{REDIS_PORT}/0"

    async def prepare_variant(self, variant: Variant) -> None:
        await self.target.check_locustfile()
        self.redis_password = await self.target.redis_password()
        self.runner_ips = await self.target.deploy(variant)

    async def finish_variant(self, variant: Variant) -> None:
        pass

    async def discard_stage(self, step: Step) -> None:
        exp = self.context.experiment
        for kind, name in (("Job", manifests.master_name(exp, step)), ("Job", manifests.workers_name(exp, step)),
                           ("Service", manifests.master_name(exp, step)),
                           ("PodDisruptionBudget", manifests.stage_budget(exp, step)["metadata"]["name"])):
            await self.children.delete(kind, name)
        self.context.on_event("StageDisrupted", f"{step.label()}: its Jobs are deleted; the stage runs again")

    async def saved_artifacts(self, steps: list[Step]) -> list[dict[str, Any]]:
        return await self.stored.saved_artifacts(steps)

    async def _began(self, master: str) -> str | None:
        """When a resumed stage began: its master Job's creation."""
        job = await self.children.read("Job", master)
        if job is None or not self.children.owns(job):    # none yet, or an earlier experiment's of the same name
            return None
        return job.metadata.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")

    async def run_stage(self, step: Step) -> StageMeasurement:
        c = self.context
        exp = c.experiment
        master = manifests.master_name(exp, step)
        began = await self._began(master)    # a resumed stage's; None: the stage begins now
        selector = f"{LABEL_EXPERIMENT}={exp.name},{LABEL_ROLE}=runner"
        redis_url = self.redis_sample_url if c.experiment.spec.redis.used else None
        # the target's health from before its Jobs exist: a restart as the injectors start is the stage's
        async with TargetHealth(c, self.pods, since=began) as target_health, \
                (TargetHealth(c, self.pods, since=began, role="redis") if exp.spec.redis.deployed
                 else contextlib.nullcontext()) as redis_health:
            counted = await self.node_counters.read()
            created = await self.children.create(manifests.master_service(exp, step))
            created = await self.children.create(manifests.master_job(
                exp, step, self.defaults, self.runner_ips, self.target.server_port)) or created
            created = await self.children.create(manifests.workers_job(exp, step, self.defaults)) or created
            budget = manifests.stage_budget(exp, step)
            await self.children.create(budget)
            c.on_event("StageStarted" if created else "StageResumed",
                       f"{step.label()}: Jobs {master} and {manifests.workers_name(exp, step)}")
            sampling_from = now()
            async with AsyncRedisSampler(redis_url, password=self.redis_password) as redis_sampler, \
                    PodMetricsSampler(c.custom, c.namespace, selector,
                                      metrics_interval(step.stage.duration), step.variant.pods) as pod_metrics:
                with metrics.LIVE.stage(series_labels(exp, step),
                                        lambda: target_samples(pod_metrics.now, redis_sampler.now)):
                    pod, terminated, lost = await self.stage_watch.wait_for_master(step, resumed=not created)
            counts = await self.node_counters.read()
        if redis_health is not None and (redis_lost := await redis_health.pods()):
            raise StageDisrupted("; ".join(f"the Redis pod {p.describe()}" for p in redis_lost), reason="RedisLost")
        await self.children.delete("PodDisruptionBudget", budget["metadata"]["name"])
        summary = parse_summary(terminated.get("message"), master)
        artifact = {} if step.warmup else await self.stored.keep_artifact(step, pod, stored_before=not created)
        sample = redis_sampler.result
        assert sample is not None, "set as its sampler ended"
        throttled = since_each(counted, counts) if created else None
        return StageMeasurement(
            summary=summary, artifact=artifact,
            started_at=terminated.get("startedAt") or now(), finished_at=terminated.get("finishedAt") or now(),
            redis_peak_connections=sample.peak, redis_connections_received=sample.received,
            redis_peak_covers=sample.covers("stage" if created else
                                            f"from {sampling_from}: the operator resumed the stage "
                                            f"(it restarted, or lost the API server)"),
            target_peak_cpu_cores=pod_metrics.peak_cpu, target_peak_memory_bytes=pod_metrics.peak_memory,
            target_cpu_readings=tuple(pod_metrics.cpu_readings), target_cpu_span=pod_metrics.cpu_span,
            proxy_peak_cpu_cores=pod_metrics.proxy_peak_cpu, proxy_peak_memory_bytes=pod_metrics.proxy_peak_memory,
            lost_injectors=lost, target_pods=(unsteady := await target_health.pods()),
            saturation=Saturation(
                throttled_share=share(throttled.throttled, throttled.periods) if throttled else None,
                oom_kills=max(throttled.oom_kills if throttled else 0,
                              sum(1 for p in unsteady or () for cause in p.causes if "OOMKilled" in cause)),
                redis_cpu_share=redis_cpu_share(sample.cpu_cores_within(load_window(artifact)),
                                                exp.spec.redis.resources.limits.cpu
                                                if exp.spec.redis.deployed else None),
                redis_max_clients=sample.max_clients, redis_rejected=sample.rejected,
                redis_usec_per_call=sample.usec_per_call))
