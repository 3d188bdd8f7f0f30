"""A variant's target in the cluster: its Redis and runner Deployments and Services, the Secret and
ConfigMap the spec names, and readiness, judged from the pods' watch and the Deployments' status."""

from __future__ import annotations

import base64
import time

from kubernetes.client.rest import ApiException

from loadstage.api.names import LABEL_COMPONENT
from loadstage.api.types import Variant
from loadstage.engine.errors import ExperimentFailed
from loadstage.kube import manifests
from loadstage.kube.children import Children
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.manifests import Defaults
from loadstage.kube.pod_watch import NamespacePods
from loadstage.kube.pods import Pod, cannot_start, ready


class Target:
    def __init__(self, context: ExperimentContext, children: Children, pods: NamespacePods, defaults: Defaults):
        self.context, self.children, self.pods, self.defaults = context, children, pods, defaults

    async def deploy(self, variant: Variant) -> list[str]:
        """Deploys the variant's target and waits until it is ready; returns its runner pods' IPs."""
        exp = self.context.experiment
        components = []
        if exp.spec.redis.deployed:
            await self.children.apply_deployment(manifests.redis_deployment(exp, variant, self.defaults))
            await self.children.create(manifests.redis_service(exp))
            components.append(manifests.redis_name(exp))
        await self.children.apply_deployment(manifests.runner_deployment(exp, variant, self.defaults))
        await self.children.create(manifests.runner_service(exp))
        await self.children.create(manifests.runner_pods_service(exp))
        components.append(manifests.runner_name(exp))
        runner_ips = await self._wait_until_ready(components, variant)
        self.context.on_event("TargetReady", f"variant {variant.index + 1}: {variant.label()}, "
                                             f"{variant.pods} runner pod(s) ready")
        return runner_ips

    async def redis_password(self) -> str | None:
        c = self.context
        secret = c.experiment.spec.redis.password_secret
        if secret is None:
            return None
        where = f"spec.redis.passwordSecret: Secret {secret.name!r}"
        try:
            data = (await call(c.core.read_namespaced_secret, secret.name, c.namespace)).data or {}
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

    async def _wait_until_ready(self, names: list[str], variant: Variant) -> list[str]:
        """Waits on the target's pods until each component has exactly its replicas ready and none
        left over, then confirms with the Deployments' status (which lags the pods' a moment)."""
        c = self.context
        exp = c.experiment
        timeout = exp.spec.target.ready_timeout
        deadline = time.monotonic() + timeout
        want = {name.rsplit("-", 1)[1]: variant.pods if name == manifests.runner_name(exp) else 1 for name in names}

        def settled(current: dict[str, Pod]) -> list[str] | None:
            """The runner pods' IPs, once every component has its pods ready."""
            fatal = cannot_start(current.values())
            if fatal:
                raise ExperimentFailed("TargetNotReady", fatal)
            live = [p for p in current.values() if not p["metadata"].get("deletionTimestamp")]
            for component, count in want.items():
                mine = [p for p in live if p["metadata"]["labels"].get(LABEL_COMPONENT) == component]
                if len(mine) != count or not all(ready(p) for p in mine):
                    return None
            return sorted(p["status"].get("podIP", "") for p in live
                          if p["metadata"]["labels"].get(LABEL_COMPONENT) == "runner")
        while True:
            runner_ips = await self.pods.until(exp.name, {LABEL_COMPONENT: ",".join(want)}, settled,
                                               c.stopped, timeout=max(0.0, deadline - time.monotonic()))
            if runner_ips:
                waiting = [n for n in names if not await self._deployment_ready(n)]
                if not waiting:
                    return [ip for ip in runner_ips if ip]
            else:
                waiting = names
            if time.monotonic() > deadline:
                raise ExperimentFailed("TargetNotReady", f"Deployment {', '.join(waiting)} not ready after "
                                                         f"{timeout:g}s ({await self._readiness(waiting[0])})")
            await c.pause(c.poll)

    async def _deployment_ready(self, name: str) -> bool:
        d = await call(self.context.apps.read_namespaced_deployment_status, name, self.context.namespace)
        s, want = d.status, d.spec.replicas
        return ((s.observed_generation or 0) >= d.metadata.generation and (s.updated_replicas or 0) == want
                and (s.ready_replicas or 0) == want and (s.replicas or 0) == want)

    async def _readiness(self, name: str) -> str:
        s = (await call(self.context.apps.read_namespaced_deployment_status, name, self.context.namespace)).status
        return f"{s.ready_replicas or 0} ready, {s.updated_replicas or 0} updated of {s.replicas or 0}"
