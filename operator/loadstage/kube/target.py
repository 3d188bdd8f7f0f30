"""A variant's target in the cluster: its Redis and runner Deployments (or an existing Deployment, copied or
held in place) and Services, the Secret and ConfigMap the spec names, and readiness, judged from the pods'
watch and the Deployments' status."""

from __future__ import annotations

import base64
import time
from typing import Any

from kubernetes.client.rest import ApiException

from loadstage.api.names import ANNOTATION_REDIS_URL, LABEL_ROLE
from loadstage.api.types import Variant
from loadstage.engine.errors import ExperimentFailed
from loadstage.kube import in_place, manifests
from loadstage.kube.children import Children
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.deployment_target import (
    TargetDeploymentInvalid,
    as_it_was,
    copy_deployment,
    server_port,
    variant_template,
)
from loadstage.kube.manifests import Defaults
from loadstage.kube.pod_watch import NamespacePods
from loadstage.kube.pods import Pod, cannot_start, ready
from loadstage.kube.redis_auth import derived_password
from loadstage.kube.scheduling import refusals_from, refused_creation, unschedulable
from loadstage.launch.argv import RUNNER_PORT
from loadstage.samplers.worker_log import logs_workers, workers_started

SETTINGS_LOG_WAIT_SECONDS = 5    # a ready pod's server may still be booting its other workers
REFUSAL_CHECK_SECONDS = 15       # how often a target not yet ready has its pods' refusals looked up


class Target:
    def __init__(self, context: ExperimentContext, children: Children, pods: NamespacePods, defaults: Defaults):
        self.context, self.children, self.pods, self.defaults = context, children, pods, defaults
        self.server_port = RUNNER_PORT   # where the runner pods' server listens

    async def deploy(self, variant: Variant) -> list[str]:
        """Deploys the variant's target and waits until it is ready; returns its runner pods' IPs."""
        exp = self.context.experiment
        components = {}
        uid = self.context.owner_uid
        if exp.spec.redis.deployed:
            if exp.spec.redis.password_secret is None and (password := await self.redis_password()):
                await self.children.create(manifests.redis_auth_secret(exp, uid, password))
            await self.children.apply_deployment(manifests.redis_deployment(exp, variant, self.defaults, uid))
            await self.children.create(manifests.redis_service(exp))
            components["redis"] = manifests.redis_name(exp)
        existing = exp.spec.target.deployment
        if existing is None:
            await self.children.apply_deployment(manifests.runner_deployment(exp, variant, self.defaults, uid))
            components["runner"] = manifests.runner_name(exp)
            service_port = None
        else:
            components["runner"] = await self._run_existing(variant)
            service_port = self.server_port
        await self.children.create(manifests.runner_service(exp, service_port))
        await self.children.create(manifests.runner_pods_service(exp, service_port))
        for policy in manifests.network_policies(exp, self.defaults, self.server_port):
            await self.children.create(policy)
        runner_ips = await self._wait_until_ready(components, variant)
        checked = await self._check_settings(variant) if existing is not None else ""
        self.context.on_event("TargetReady", f"variant {variant.index + 1}: {variant.label()}, "
                                             f"{variant.pods} runner pod(s) ready{checked}")
        return runner_ips

    async def _run_existing(self, variant: Variant) -> str:
        """An existing Deployment runs the variant: a copy of it, or itself (InPlace); returns which one."""
        c = self.context
        ref = c.experiment.spec.target.existing
        if ref.namespace not in (None, c.namespace):
            raise TargetDeploymentInvalid(f"spec.target.deployment.namespace: Deployment {ref.name} is in namespace "
                                          f"{ref.namespace}, but the experiment is in {c.namespace}; the target "
                                          f"must be in the experiment's own namespace")
        deployment = await call(in_place.read_deployment, c.api, c.namespace, ref.name)
        if deployment is None:
            raise TargetDeploymentInvalid(f"spec.target.deployment.name: Deployment {ref.name!r} not found in "
                                          f"namespace {c.namespace}")
        self.server_port = server_port(c.experiment, deployment)
        if ref.mode == "Copy":
            await self.children.apply_deployment(copy_deployment(c.experiment, variant, deployment, self.defaults))
            return manifests.runner_name(c.experiment)
        template = variant_template(c.experiment, variant, as_it_was(deployment, c.owner_uid), self.defaults,
                                    keep_labels=True)
        await in_place.hold(c, variant, deployment, template)
        return ref.name

    async def _check_settings(self, variant: Variant) -> str:
        """The workers each runner pod's server says it started, where its log says (its entry's boot_line, at
        their default log level): another number than the variant's means the settings did not reach the server
        (an entrypoint with flags of its own), and the variant's figures would be of something else. Returns
        what was seen, for the TargetReady event."""
        c = self.context
        if variant.workers is None or not logs_workers(variant.server):
            return ""
        container = c.experiment.spec.target.existing.container
        selector = ",".join(f"{k}={v}" for k, v in manifests.runner_selector(c.experiment).items())
        deadline = time.monotonic() + SETTINGS_LOG_WAIT_SECONDS
        while True:
            seen: dict[str, int | None] = {}
            listed: Any = await call(c.core.list_namespaced_pod, c.namespace, label_selector=selector)
            for pod in listed.items:
                if pod.metadata.deletion_timestamp is None:
                    try:
                        log = await call(c.core.read_namespaced_pod_log, pod.metadata.name, c.namespace,
                                         container=container or pod.spec.containers[0].name)
                    except ApiException:    # no log to read (yet): nothing to judge by
                        log = ""
                    seen[pod.metadata.name] = workers_started(variant.server, log) or None
            wrong = {name: n for name, n in seen.items() if n is not None and n != variant.workers}
            if not wrong and all(n is not None for n in seen.values()):
                return f"; {variant.server} says each pod started {variant.workers} worker(s)"
            if time.monotonic() > deadline:
                if not wrong:
                    return f"; {len([n for n in seen.values() if n is None])} pod(s) logged no worker start"
                raise ExperimentFailed("SettingsNotApplied", f"variant {variant.index + 1} wants {variant.workers} "
                                       f"{variant.server} worker(s), but its pods started " + ", ".join(
                                           f"{n} ({name})" for name, n in sorted(wrong.items())) +
                                       ": the container's own command line or entrypoint overrides the setting")
            await c.pause(c.poll)

    async def redis_password(self) -> str | None:
        c = self.context
        secret = c.experiment.spec.redis.password_secret
        if secret is None:
            if manifests.redis_password_ref(c.experiment, self.defaults, c.owner_uid) is None:
                return None
            assert self.defaults.redis_key is not None, "a password is derived only with the operator's key"
            return derived_password(self.defaults.redis_key, c.owner_uid)
        where = f"spec.redis.passwordSecret: Secret {secret.name!r}"
        try:
            found: Any = await call(c.core.read_namespaced_secret, secret.name, c.namespace)
        except ApiException as e:
            if e.status == 404:
                raise ExperimentFailed("RedisSecretMissing", f"{where} not found") from None
            if e.status == 403:
                raise ExperimentFailed("RedisSecretForbidden", f"{where}: the operator may not read it; list it "
                                                               f"in the chart's rbac.redisPasswordSecrets") from None
            raise
        data = found.data or {}
        if secret.key not in data:
            raise ExperimentFailed("RedisSecretMissing", f"{where} has no key {secret.key!r}")
        url = c.experiment.spec.redis.url
        if url is not None and (found.metadata.annotations or {}).get(ANNOTATION_REDIS_URL) != url:
            # whoever may create an experiment must not be able to send a Secret to a server of their choice
            raise ExperimentFailed("RedisSecretNotForThisUrl", f"{where} is sent only to a Redis that loadstage "
                                   f"deploys, or to the URL the Secret itself names; to send it to {url}, "
                                   f"annotate it: kubectl annotate secret {secret.name} {ANNOTATION_REDIS_URL}={url}")
        return base64.b64decode(data[secret.key]).decode()

    async def check_locustfile(self) -> None:
        c = self.context
        lf = c.experiment.spec.injectors.locustfile
        if lf is None:
            return
        if lf.config_map is None:
            raise ExperimentFailed("InvalidSpec", "spec.injectors.locustfile.path works only with the local "
                                                  "engine; in a cluster use locustfile.configMap")
        try:
            cm = await call(c.core.read_namespaced_config_map, lf.config_map.name, c.namespace)
        except ApiException as e:
            if e.status == 404:
                raise ExperimentFailed("LocustfileMissing", f"spec.injectors.locustfile.configMap: ConfigMap "
                                                            f"{lf.config_map.name!r} not found") from None
            raise
        if lf.config_map.key not in (cm.data or {}):
            raise ExperimentFailed("LocustfileMissing", f"spec.injectors.locustfile.configMap: ConfigMap "
                                                        f"{lf.config_map.name!r} has no key {lf.config_map.key!r}")

    async def _wait_until_ready(self, components: dict[str, str], variant: Variant) -> list[str]:
        """Waits on the target's pods until each component (its Deployment's name by component) has exactly
        its replicas ready and none left over, then confirms with the Deployments' status (which lags the
        pods' a moment)."""
        c = self.context
        exp = c.experiment
        timeout = exp.spec.target.ready_timeout
        deadline = time.monotonic() + timeout
        want = {component: variant.pods if component == "runner" else 1 for component in components}
        names = list(components.values())

        def settled(current: dict[str, Pod]) -> list[str] | None:
            """The runner pods' IPs, once every component has its pods ready."""
            fatal = cannot_start(current.values())
            if fatal:
                raise ExperimentFailed("TargetNotReady", fatal)
            if stuck := unschedulable(current.values(), exp.spec.scheduling_timeout):
                raise ExperimentFailed("Unschedulable", f"the target's {stuck}")
            live = [p for p in current.values() if not p["metadata"].get("deletionTimestamp")]
            for component, count in want.items():
                mine = [p for p in live if p["metadata"]["labels"].get(LABEL_ROLE) == component]
                if len(mine) != count or not all(ready(p) for p in mine):
                    return None
            return sorted(p["status"].get("podIP", "") for p in live
                          if p["metadata"]["labels"].get(LABEL_ROLE) == "runner")
        since = refusals_from()
        while True:
            left = max(0.0, deadline - time.monotonic())
            runner_ips = await self.pods.until(exp.name, {LABEL_ROLE: ",".join(want)}, settled, c.stopped,
                                               timeout=min(left, REFUSAL_CHECK_SECONDS))
            if runner_ips:
                waiting = [n for n in names if not await self._deployment_ready(n)]
                if not waiting:
                    return [ip for ip in runner_ips if ip]
                await c.pause(c.poll)   # the Deployments' status lags the pods' a moment
            else:
                if refused := await refused_creation(c, since, deployments=names):
                    raise ExperimentFailed("PodsRefused", f"the target: {refused}")
                waiting = names
            if time.monotonic() > deadline:
                raise ExperimentFailed("TargetNotReady", f"Deployment {', '.join(waiting)} not ready after "
                                                         f"{timeout:g}s ({await self._readiness(waiting[0])})")

    async def _deployment_ready(self, name: str) -> bool:
        d: Any = await call(self.context.apps.read_namespaced_deployment_status, name, self.context.namespace)
        s, want = d.status, d.spec.replicas
        return ((s.observed_generation or 0) >= d.metadata.generation and (s.updated_replicas or 0) == want
                and (s.ready_replicas or 0) == want and (s.replicas or 0) == want)

    async def _readiness(self, name: str) -> str:
        read: Any = await call(self.context.apps.read_namespaced_deployment_status, name, self.context.namespace)
        s = read.status
        return f"{s.ready_replicas or 0} ready, {s.updated_replicas or 0} updated of {s.replicas or 0}"
