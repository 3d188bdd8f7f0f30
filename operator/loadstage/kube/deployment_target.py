"""An existing Deployment as the target, as pure functions of dicts: its container and port, a variant's
pod template made from its own (Copy and InPlace), and for InPlace the snapshot kept on the Deployment and
on each HPA that scales it, and the JSON patches that hold and restore them."""

from __future__ import annotations

import copy
import json
from typing import Any

from loadstage.api.names import ANNOTATION_IN_PLACE, ANNOTATION_VARIANT
from loadstage.api.types import Experiment, ResourceList, Resources, Variant
from loadstage.engine.errors import ExperimentFailed
from loadstage.kube import manifests
from loadstage.kube.manifests import Defaults
from loadstage.kube.server_settings import apply_server_settings

FIELD = "spec.target.deployment"


class TargetDeploymentInvalid(ExperimentFailed):
    def __init__(self, message: str):
        super().__init__("TargetDeploymentInvalid", message)


def container_index(experiment: Experiment, deployment: dict[str, Any]) -> int:
    ref = experiment.spec.target.existing
    containers = deployment["spec"]["template"]["spec"]["containers"]
    if ref.container is None:
        return 0
    names = [c["name"] for c in containers]
    if ref.container not in names:
        raise TargetDeploymentInvalid(f"{FIELD}.container: Deployment {ref.name} has no container {ref.container!r} "
                                      f"(it has {', '.join(names)})")
    return names.index(ref.container)


def server_port(experiment: Experiment, deployment: dict[str, Any]) -> int:
    """The port the server listens on: the spec's, else the container's first TCP containerPort."""
    ref = experiment.spec.target.existing
    if ref.port is not None:
        return ref.port
    container = deployment["spec"]["template"]["spec"]["containers"][container_index(experiment, deployment)]
    ports = [p["containerPort"] for p in container.get("ports") or [] if p.get("protocol", "TCP") == "TCP"]
    if not ports:
        raise TargetDeploymentInvalid(f"{FIELD}.port: container {container['name']} of Deployment {ref.name} "
                                      f"declares no TCP containerPort; say which port the server listens on")
    return ports[0]


def _own_resources(container: dict[str, Any]) -> Resources | None:
    own = container.get("resources") or {}
    requests, limits = own.get("requests") or {}, own.get("limits") or {}
    if not any(k in d for d in (requests, limits) for k in ("cpu", "memory")):
        return None
    return Resources(ResourceList(*(str(requests[k]) if k in requests else None for k in ("cpu", "memory"))),
                     ResourceList(*(str(limits[k]) if k in limits else None for k in ("cpu", "memory"))))


def _resources(container: dict[str, Any], variant: Variant, defaults: Defaults) -> dict[str, Any]:
    """The container's resources with the variant's CPU and memory, over its own (else the operator's
    defaults); any other resource it asks for (ephemeral storage, devices) is kept."""
    merged = variant.resources.over(_own_resources(container) or defaults.resources.target)
    own = copy.deepcopy(container.get("resources") or {})
    for part, values in (("requests", merged.requests.items()), ("limits", merged.limits.items())):
        if values:
            own[part] = {**{k: v for k, v in (own.get(part) or {}).items() if k not in ("cpu", "memory")}, **values}
    return own


def variant_template(experiment: Experiment, variant: Variant, deployment: dict[str, Any], defaults: Defaults, *,
                     keep_labels: bool) -> dict[str, Any]:
    """The Deployment's pod template with the variant's settings and resources, and loadstage's runner labels:
    instead of its own labels (Copy: the user's Services never route to the copy), or only loadstage's own keys
    beside them (InPlace: its selector, and whatever else selects its pods, must still match)."""
    template = copy.deepcopy(deployment["spec"]["template"])
    index = container_index(experiment, deployment)
    containers = template["spec"]["containers"]
    container = apply_server_settings(containers[index], variant, experiment.spec.target.interface)
    container["resources"] = _resources(containers[index], variant, defaults)
    containers[index] = container
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **manifests.runner_selector(experiment)} if keep_labels \
        else manifests.labels(experiment, "runner")
    metadata["annotations"] = {**(metadata.get("annotations") or {}), ANNOTATION_VARIANT: str(variant.index + 1)}
    return template


def copy_deployment(experiment: Experiment, variant: Variant, deployment: dict[str, Any],
                    defaults: Defaults) -> dict[str, Any]:
    """Copy mode: the variant's own Deployment, made from the existing one's pod template."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": manifests.runner_name(experiment), "labels": manifests.labels(experiment, "runner")},
            "spec": {"replicas": variant.pods,
                     "selector": {"matchLabels": manifests.runner_selector(experiment)},
                     "template": variant_template(experiment, variant, deployment, defaults, keep_labels=False)}}


def as_it_was(deployment: dict[str, Any], uid: str) -> dict[str, Any]:
    """The Deployment with the pod template it had before this experiment (`uid`) held it: each variant is made
    from the original, never from the variant before."""
    snapshot = held_by(deployment)
    if snapshot is None or snapshot["uid"] != uid:
        return deployment
    return {**deployment, "spec": {**deployment["spec"], "template": snapshot["template"]}}


def holder(experiment: Experiment, namespace: str, uid: str) -> dict[str, str]:
    return {"experiment": f"{namespace}/{experiment.name}", "uid": uid}


def held_by(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The snapshot an InPlace experiment keeps on the object, or None."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_IN_PLACE)
    return json.loads(text) if text else None


_ANNOTATION_PATH = "/metadata/annotations/" + ANNOTATION_IN_PLACE.replace("~", "~0").replace("/", "~1")


def _annotate(obj: dict[str, Any], value: str) -> list[dict[str, Any]]:
    if (obj.get("metadata") or {}).get("annotations") is None:
        return [{"op": "add", "path": "/metadata/annotations", "value": {ANNOTATION_IN_PLACE: value}}]
    return [{"op": "add", "path": _ANNOTATION_PATH, "value": value}]


def _unchanged(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch that applies only to the spec read (another writer in between: 422): its generation, which
    status writes leave alone, where the kind keeps one (an HPA does not: its resourceVersion)."""
    metadata = obj["metadata"]
    key = "generation" if "generation" in metadata else "resourceVersion"
    return [{"op": "test", "path": f"/metadata/{key}", "value": metadata[key]}]


def _hold_patch(obj: dict[str, Any], spec: dict[str, Any], snapshot_of: dict[str, str]) -> list[dict[str, Any]]:
    """`spec` fields set on the object; the first hold also keeps their values before, to restore."""
    ops = _unchanged(obj)
    if held_by(obj) is None:
        before = {name: obj["spec"].get(name) for name in spec}
        ops += _annotate(obj, json.dumps({**snapshot_of, **before}, sort_keys=True))
    return ops + [{"op": "add", "path": f"/spec/{name}", "value": value} for name, value in spec.items()]


def hold_patch(deployment: dict[str, Any], template: dict[str, Any], replicas: int,
               snapshot_of: dict[str, str]) -> list[dict[str, Any]]:
    """InPlace: the Deployment runs the variant."""
    return _hold_patch(deployment, {"replicas": replicas, "template": template}, snapshot_of)


def release_patch(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The spec fields a hold changed (a Deployment's replicas and template, an HPA's bounds) as they were
    before the experiment, and no snapshot."""
    snapshot = held_by(obj) or {}
    fields = [name for name in snapshot if name not in ("experiment", "uid")]
    return _unchanged(obj) + [{"op": "remove", "path": f"/spec/{name}"} if snapshot[name] is None else
                              {"op": "replace", "path": f"/spec/{name}", "value": snapshot[name]}
                              for name in fields] + [{"op": "remove", "path": _ANNOTATION_PATH}]


def scales(hpa: dict[str, Any], deployment_name: str) -> bool:
    ref = hpa["spec"]["scaleTargetRef"]
    return ref.get("kind") == "Deployment" and ref.get("name") == deployment_name and \
        ref.get("apiVersion", "apps/v1").startswith("apps/")


def pin_patch(hpa: dict[str, Any], pods: int, snapshot_of: dict[str, str]) -> list[dict[str, Any]]:
    """An HPA held at `pods`: minReplicas = maxReplicas."""
    return _hold_patch(hpa, {"minReplicas": pods, "maxReplicas": pods}, snapshot_of)
