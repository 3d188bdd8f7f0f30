"""The experiment's child objects: created if missing, adopted if this experiment already owns them (a
restarted operator picks a stage in flight up where it is), waited for if an earlier experiment's object
of the same name is still going, and refused if a foreign object holds the name."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from loadstage.api.names import API_GROUP, LABEL_EXPERIMENT
from loadstage.engine.errors import ExperimentFailed
from loadstage.kube.client import api_message, call
from loadstage.kube.context import ExperimentContext

UNMAPPED_OWNER_WAIT_SECONDS = 90   # three times the API server's remapping period


class Children:
    def __init__(self, context: ExperimentContext):
        self.context = context
        c = context
        self._create_calls: dict[str, Callable[..., Any]] = {"Deployment": c.apps.create_namespaced_deployment,
                              "Service": c.core.create_namespaced_service,
                              "Job": c.batch.create_namespaced_job,
                              "ConfigMap": c.core.create_namespaced_config_map,
                              "PodDisruptionBudget": c.policy.create_namespaced_pod_disruption_budget,
                              "NetworkPolicy": c.networking.create_namespaced_network_policy,
                              "Secret": c.core.create_namespaced_secret,
                              "HorizontalPodAutoscaler": c.autoscaling.create_namespaced_horizontal_pod_autoscaler}
        self._read_calls = {"Deployment": c.apps.read_namespaced_deployment,
                            "Service": c.core.read_namespaced_service,
                            "Job": c.batch.read_namespaced_job,
                            "ConfigMap": c.core.read_namespaced_config_map,
                            "PodDisruptionBudget": c.policy.read_namespaced_pod_disruption_budget,
                            "NetworkPolicy": c.networking.read_namespaced_network_policy,
                            "HorizontalPodAutoscaler": c.autoscaling.read_namespaced_horizontal_pod_autoscaler}
        self._delete_calls = {"Service": c.core.delete_namespaced_service,
                              "Job": c.batch.delete_namespaced_job,
                              "PodDisruptionBudget": c.policy.delete_namespaced_pod_disruption_budget}

    async def create(self, manifest: dict) -> bool:
        """Creates the object, or adopts it if it exists, is owned by this experiment and is not being
        deleted. True if it was created. An earlier experiment's object of the same name is waited for."""
        c = self.context
        c.adopt(manifest)
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        unmapped_since = None
        while True:
            try:
                await call(self._create_calls[kind], c.namespace, manifest)
                return True
            except ApiException as e:
                if e.status in (400, 422):  # the object itself is invalid: retrying cannot help
                    raise ExperimentFailed("InvalidChild", f"cannot create {kind} {name}: {api_message(e)}") from None
                if _owner_kind_unmapped(e):
                    if unmapped_since is None:
                        unmapped_since = time.monotonic()
                        await c.say("WaitingForApiServer", _unmapped_owner_message(manifest))
                    if time.monotonic() - unmapped_since < UNMAPPED_OWNER_WAIT_SECONDS:
                        await c.pause(c.poll)
                        continue
                if e.status != 409:
                    raise  # forbidden, throttled, unavailable: the caller retries
            if kind not in self._read_calls:
                # the operator may create Secrets but not read them: one of its name (which carries the
                # experiment's uid) is this experiment's
                return False
            existing = await self.read(kind, name)
            if existing is None:
                continue
            if self.owns(existing) and existing.metadata.deletion_timestamp is None:
                return False
            await self._wait_until_gone(kind, name, existing)

    async def apply_deployment(self, manifest: dict) -> None:
        if not await self.create(manifest):
            await call(self.context.apps.patch_namespaced_deployment, manifest["metadata"]["name"],
                       self.context.namespace, manifest)

    async def delete(self, kind: str, name: str) -> None:
        """Deletes the object (a Job with its pods), if it is there."""
        try:
            await call(self._delete_calls[kind], name, self.context.namespace,
                       body=client.V1DeleteOptions(propagation_policy="Background"))
        except ApiException as e:
            if e.status != 404:
                raise

    async def read(self, kind: str, name: str):
        try:
            return await call(self._read_calls[kind], name, self.context.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def owns(self, obj) -> bool:
        return any(ref.uid == self.context.owner_uid for ref in obj.metadata.owner_references or [])

    async def _wait_until_gone(self, kind: str, name: str, existing) -> None:
        """Waits for another experiment's object (or one being deleted) to go; a foreign one fails."""
        owners = [f"{ref.kind} {ref.name} (uid {ref.uid})" for ref in existing.metadata.owner_references or []]
        earlier = any(ref.kind == "LoadExperiment" and ref.api_version.startswith(f"{API_GROUP}/")
                      for ref in existing.metadata.owner_references or [])
        if existing.metadata.deletion_timestamp is None and not earlier:
            raise ExperimentFailed("ChildConflict", f"{kind} {name} already exists and is not this experiment's "
                                                    f"(owners: {', '.join(owners) or 'none'}); delete or rename it")
        state = "being deleted" if existing.metadata.deletion_timestamp else "not yet garbage-collected"
        await self.context.say("WaitingForOldChild", f"waiting for {kind} {name} of an earlier LoadExperiment "
                                                     f"(owner {', '.join(owners) or 'none'}) to be deleted: it is "
                                                     f"{state}")
        while await self.read(kind, name) is not None:
            await self.context.pause(self.context.poll * 2)


def delete_children(api: client.ApiClient, namespace: str, experiment_name: str) -> int:
    """Deletes the experiment's Jobs (with their pods), Deployments, Services, disruption budgets, network
    policies and autoscalers (a verification's); idempotent.
    Its results ConfigMaps stay until the experiment itself is deleted. Returns how many were deleted."""
    selector = f"{LABEL_EXPERIMENT}={experiment_name}"
    background = client.V1DeleteOptions(propagation_policy="Background")
    batch, apps, core = client.BatchV1Api(api), client.AppsV1Api(api), client.CoreV1Api(api)
    policy, networking = client.PolicyV1Api(api), client.NetworkingV1Api(api)
    autoscaling = client.AutoscalingV2Api(api)
    deleted = 0
    for lister, deleter in ((batch.list_namespaced_job, batch.delete_namespaced_job),
                            (apps.list_namespaced_deployment, apps.delete_namespaced_deployment),
                            (core.list_namespaced_service, core.delete_namespaced_service),
                            (policy.list_namespaced_pod_disruption_budget,
                             policy.delete_namespaced_pod_disruption_budget),
                            (networking.list_namespaced_network_policy,
                             networking.delete_namespaced_network_policy),
                            (autoscaling.list_namespaced_horizontal_pod_autoscaler,
                             autoscaling.delete_namespaced_horizontal_pod_autoscaler)):
        listed: list[Any] = lister(namespace, label_selector=selector).items
        for item in listed:
            if item.metadata.deletion_timestamp is not None:
                continue
            try:
                deleter(item.metadata.name, namespace, body=background)
                deleted += 1
            except ApiException as e:
                if e.status != 404:
                    raise
    return deleted


def _owner_kind_unmapped(e: ApiException) -> bool:
    """The OwnerReferencesPermissionEnforcement admission plugin maps kinds every 30 s: a CRD installed
    since then cannot own an object that blocks its deletion, yet."""
    return e.status == 403 and "cannot find RESTMapping" in (e.body or "")


def _unmapped_owner_message(manifest: dict) -> str:
    kinds = ", ".join(f"{ref['kind']} ({ref['apiVersion']})" for ref in manifest["metadata"].get("ownerReferences", [])
                      if ref.get("blockOwnerDeletion"))
    return f"waiting for the API server to map kind {kinds} for owner references: its CRD was installed moments ago"
