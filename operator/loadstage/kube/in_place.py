"""InPlace: an existing Deployment patched to run each variant, every HPA that scales it pinned, and both
restored exactly from the snapshot kept on them. The snapshot lives on the objects themselves, so an
operator that restarts, or the experiment's deletion, finds what to restore. Objects are read as raw JSON,
so that no field the client library does not know is lost from the snapshot."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from loadstage.api.types import Variant
from loadstage.engine.errors import ExperimentFailed
from loadstage.kube.client import api_message, call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.deployment_target import held_by, hold_patch, holder, pin_patch, release_patch, scales

PATCH_ATTEMPTS = 5   # each patch applies only to the generation read; another writer in between: read again


def _check_not_held_elsewhere(obj: dict[str, Any], kind: str, uid: str) -> None:
    snapshot = held_by(obj)
    if snapshot is not None and snapshot["uid"] != uid:
        raise ExperimentFailed("TargetHeld", f"{kind} {obj['metadata']['name']} is held InPlace by LoadExperiment "
                                             f"{snapshot['experiment']}; wait until it ends, or use spec.target."
                                             f"deployment.mode: Copy")


def _raw(read: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
    try:
        return json.loads(read(*args, _preload_content=False).data)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def read_deployment(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    return _raw(client.AppsV1Api(api).read_namespaced_deployment, name, namespace)


def _read_hpa(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    return _raw(client.AutoscalingV2Api(api).read_namespaced_horizontal_pod_autoscaler, name, namespace)


def _scaling_hpas(api: client.ApiClient, namespace: str, deployment: str) -> list[dict[str, Any]]:
    listed = _raw(client.AutoscalingV2Api(api).list_namespaced_horizontal_pod_autoscaler, namespace) or {}
    return [h for h in listed.get("items", []) if scales(h, deployment)]


def _stale(e: ApiException) -> bool:
    """A JSON patch refused because its generation test failed: someone else wrote the object in between."""
    body = (e.body or "").lower()
    return e.status == 422 and any(m in body for m in ("test operation", "testing value", "test failed"))


def _patch_fresh(read: Callable[[], dict[str, Any] | None], patch: Callable[[dict[str, Any]], Any],
                 current: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """patch(object) on the object as read, read again while another writer came in between. Returns the
    object patched, or None if there is none (`read` returns None for one that is not to be patched). A 422
    whose body does not say it was the test is taken as one too when the object has changed since it was read
    (an HPA's controller rewrites its status every 15 s)."""
    current = current if current is not None else read()
    for attempt in range(PATCH_ATTEMPTS):
        if current is None:
            return None
        try:
            patch(current)
            return current
        except ApiException as e:
            if e.status != 422 or attempt == PATCH_ATTEMPTS - 1:
                raise
            fresh = read()
            if not _stale(e) and (fresh is None or _version(fresh) == _version(current)):
                raise
            current = fresh
    return None


def _version(obj: dict[str, Any]) -> str | None:
    return obj["metadata"].get("resourceVersion")


async def hold(context: ExperimentContext, variant: Variant, deployment: dict[str, Any],
               template: dict[str, Any]) -> None:
    """The Deployment runs the variant, and every HPA that scales it holds `variant.pods`."""
    c = context
    name = deployment["metadata"]["name"]
    snapshot_of = holder(c.experiment, c.namespace, c.owner_uid)
    _check_not_held_elsewhere(deployment, "Deployment", c.owner_uid)
    try:
        hpas = await call(_scaling_hpas, c.api, c.namespace, name)
    except ApiException as e:
        if e.status == 403:
            raise ExperimentFailed("HpaNotPinned", f"the operator may not list HorizontalPodAutoscalers in "
                                                   f"{c.namespace}, so it cannot pin one that scales Deployment "
                                                   f"{name}: grant it (the chart does)") from None
        raise
    autoscaling = client.AutoscalingV2Api(c.api)

    def pin(hpa: dict[str, Any]) -> None:
        _check_not_held_elsewhere(hpa, "HorizontalPodAutoscaler", c.owner_uid)
        autoscaling.patch_namespaced_horizontal_pod_autoscaler(hpa["metadata"]["name"], c.namespace,
                                                               pin_patch(hpa, variant.pods, snapshot_of))

    def run_variant(current: dict[str, Any]) -> None:
        _check_not_held_elsewhere(current, "Deployment", c.owner_uid)
        c.apps.patch_namespaced_deployment(name, c.namespace, hold_patch(current, template, variant.pods,
                                                                         snapshot_of))
    for hpa in hpas:
        hpa_name = hpa["metadata"]["name"]
        c.check_stopped()
        try:
            await call(_patch_fresh, lambda hpa_name=hpa_name: _read_hpa(c.api, c.namespace, hpa_name), pin, hpa)
        except ApiException as e:
            raise ExperimentFailed("HpaNotPinned", f"HorizontalPodAutoscaler {hpa_name} scales Deployment {name} "
                                                   f"and could not be pinned to {variant.pods} pod(s): "
                                                   f"{e.status} {api_message(e)}") from None
    c.check_stopped()
    try:
        await call(_patch_fresh, lambda: read_deployment(c.api, c.namespace, name), run_variant, deployment)
    except ApiException as e:
        if e.status not in (400, 422):
            raise
        raise ExperimentFailed("TargetDeploymentInvalid", f"Deployment {name} refused variant {variant.index + 1}: "
                                                          f"{api_message(e)}") from None
    c.on_event("TargetHeld", f"Deployment {name} holds variant {variant.index + 1} ({variant.label()}) in place"
                             + (f"; HPA {', '.join(h['metadata']['name'] for h in hpas)} pinned to {variant.pods}"
                                if hpas else ""))


def restore(api: client.ApiClient, namespace: str, deployment: str, uid: str) -> list[str]:
    """Restores the HPAs and the Deployment that this experiment (`uid`) holds, the HPAs first (a pinned HPA
    would scale the restored Deployment back); returns what was restored. Idempotent: what holds no snapshot
    of this experiment is left alone."""
    apps, autoscaling = client.AppsV1Api(api), client.AutoscalingV2Api(api)
    restored = []

    def ours(obj: dict[str, Any] | None) -> dict[str, Any] | None:
        return obj if obj is not None and (held_by(obj) or {}).get("uid") == uid else None

    try:
        hpas = _scaling_hpas(api, namespace, deployment)
    except ApiException as e:
        if e.status != 403:
            raise
        hpas = []      # not listable: none was pinned either (holding lists them first)
    for hpa in hpas:
        name: str = hpa["metadata"]["name"]

        def read_hpa(name: str = name) -> dict[str, Any] | None:
            return ours(_read_hpa(api, namespace, name))

        def release_hpa(h: dict[str, Any], name: str = name) -> Any:
            return autoscaling.patch_namespaced_horizontal_pod_autoscaler(name, namespace, release_patch(h))
        if _patch_fresh(read_hpa, release_hpa):
            restored.append(f"HorizontalPodAutoscaler {name}")
    if _patch_fresh(lambda: ours(read_deployment(api, namespace, deployment)),
                    lambda d: apps.patch_namespaced_deployment(deployment, namespace, release_patch(d))):
        restored.insert(0, f"Deployment {deployment}")
    return restored
