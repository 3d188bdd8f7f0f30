"""InPlace: an existing Deployment patched to run each variant, every HPA that scales it pinned, and both
restored exactly from the snapshot kept on them. The snapshot lives on the objects themselves, so an
operator that restarts, or the experiment's deletion, finds what to restore."""

from __future__ import annotations

from typing import Any, Callable

from kubernetes import client
from kubernetes.client.rest import ApiException

from loadstage.api.types import Variant
from loadstage.engine.errors import ExperimentFailed
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext
from loadstage.kube.deployment_target import (
    held_by,
    hold_patch,
    holder,
    pin_patch,
    restore_patch,
    scales,
    unpin_patch,
)


def _held_elsewhere(obj: dict[str, Any], kind: str, uid: str) -> None:
    snapshot = held_by(obj)
    if snapshot is not None and snapshot["uid"] != uid:
        raise ExperimentFailed("TargetHeld", f"{kind} {obj['metadata']['name']} is held InPlace by LoadExperiment "
                                             f"{snapshot['experiment']}; wait until it ends, or use spec.target."
                                             f"deployment.mode: Copy")


PATCH_ATTEMPTS = 5   # each patch applies only to the version read; a status write in between means read again


def _dict(api: client.ApiClient, obj: Any) -> dict[str, Any]:
    return api.sanitize_for_serialization(obj)


def _patch_fresh(read: Callable[[], dict[str, Any] | None], patch: Callable[[dict[str, Any]], Any],
                 current: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """patch(object) on the object as read; read again while another write came in between (422 from the
    JSON patch's resourceVersion test). Returns the object patched, or None if it is gone."""
    for attempt in range(PATCH_ATTEMPTS):
        current = current if current is not None and attempt == 0 else read()
        if current is None:
            return None
        try:
            patch(current)
            return current
        except ApiException as e:
            if e.status != 422 or attempt == PATCH_ATTEMPTS - 1:
                raise
    return None


def _scaling_hpas(api: client.ApiClient, namespace: str, deployment: str) -> list[dict[str, Any]]:
    items = client.AutoscalingV2Api(api).list_namespaced_horizontal_pod_autoscaler(namespace).items
    return [h for h in (_dict(api, item) for item in items) if scales(h, deployment)]


async def hold(context: ExperimentContext, variant: Variant, deployment: dict[str, Any],
               template: dict[str, Any]) -> None:
    """The Deployment runs the variant, and every HPA that scales it holds `variant.pods`."""
    c = context
    name = deployment["metadata"]["name"]
    snapshot_of = holder(c.experiment, c.namespace, c.owner_uid)
    _held_elsewhere(deployment, "Deployment", c.owner_uid)
    try:
        hpas = await call(_scaling_hpas, c.api, c.namespace, name)
    except ApiException as e:
        if e.status == 403:
            raise ExperimentFailed("HpaNotPinned", f"the operator may not list HorizontalPodAutoscalers in "
                                                   f"{c.namespace}, so it cannot pin one that scales Deployment "
                                                   f"{name}: grant it (the chart does)") from None
        raise
    autoscaling = client.AutoscalingV2Api(c.api)
    for hpa in hpas:
        _held_elsewhere(hpa, "HorizontalPodAutoscaler", c.owner_uid)
        hpa_name = hpa["metadata"]["name"]
        try:
            await call(_patch_fresh, lambda: _read_hpa(c.api, c.namespace, hpa_name),
                       lambda h: autoscaling.patch_namespaced_horizontal_pod_autoscaler(
                           hpa_name, c.namespace, pin_patch(h, variant.pods, snapshot_of)), hpa)
        except ApiException as e:
            raise ExperimentFailed("HpaNotPinned", f"HorizontalPodAutoscaler {hpa_name} scales Deployment {name} "
                                                   f"and could not be pinned to {variant.pods} pod(s): "
                                                   f"{e.status} {e.reason}") from None
    await call(_patch_fresh, lambda: _read_deployment(c.api, c.namespace, name),
               lambda d: c.apps.patch_namespaced_deployment(name, c.namespace,
                                                            hold_patch(d, template, variant.pods, snapshot_of)),
               deployment)
    c.on_event("TargetHeld", f"Deployment {name} holds variant {variant.index + 1} ({variant.label()}) in place"
                             + (f"; HPA {', '.join(h['metadata']['name'] for h in hpas)} pinned to {variant.pods}"
                                if hpas else ""))


def restore(api: client.ApiClient, namespace: str, deployment: str, uid: str) -> list[str]:
    """Restores the Deployment and its HPAs that this experiment (`uid`) holds; returns what was restored.
    Idempotent: what holds no snapshot of this experiment is left alone."""
    apps, autoscaling = client.AppsV1Api(api), client.AutoscalingV2Api(api)
    restored = []

    def ours(obj: dict[str, Any] | None) -> dict[str, Any] | None:
        return obj if obj is not None and (held_by(obj) or {}).get("uid") == uid else None

    if _patch_fresh(lambda: ours(_read_deployment(api, namespace, deployment)),
                    lambda d: apps.patch_namespaced_deployment(deployment, namespace, restore_patch(d))):
        restored.append(f"Deployment {deployment}")
    for hpa in _scaling_hpas(api, namespace, deployment):
        name = hpa["metadata"]["name"]
        if _patch_fresh(lambda: ours(_read_hpa(api, namespace, name)),
                        lambda h: autoscaling.patch_namespaced_horizontal_pod_autoscaler(name, namespace,
                                                                                         unpin_patch(h))):
            restored.append(f"HorizontalPodAutoscaler {name}")
    return restored


def _read(read: Callable[[], Any], api: client.ApiClient) -> dict[str, Any] | None:
    try:
        return _dict(api, read())
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def _read_deployment(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    return _read(lambda: client.AppsV1Api(api).read_namespaced_deployment(name, namespace), api)


def _read_hpa(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    return _read(lambda: client.AutoscalingV2Api(api).read_namespaced_horizontal_pod_autoscaler(name, namespace),
                 api)
