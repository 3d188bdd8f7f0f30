"""What an export writes, as dicts: a strategic-merge patch of the team's Deployment (the server's settings the way
it reads them, its CPU and memory, its replicas where no autoscaler owns them), the kustomization around it, a
Helm values fragment in `helm create`'s shape, and the whole Deployment of an app that loadstage deployed. Each
carries where its numbers come from."""

from __future__ import annotations

import copy
from typing import Any

from loadstage.api.types import Experiment
from loadstage.export.autoscaler import ANNOTATION, Autoscaler
from loadstage.export.choice import Chosen
from loadstage.kube import manifests
from loadstage.kube.server_settings import apply_server_settings


def provenance(chosen: Chosen, source: str) -> str:
    return f"{source}, {chosen.title()}; measured at {chosen.evidence.line()}"


def resources(chosen: Chosen, scaler: Autoscaler | None) -> dict[str, dict[str, str]]:
    """The variant's requests and limits; a CPU request recommended by the autoscaler where the run set none."""
    r = chosen.variant.resources
    requests, limits = r.requests.items(), r.limits.items()
    requests = {**limits, **requests}   # a limit alone: Kubernetes requests as much
    if scaler is not None and "cpu" not in requests:
        requests["cpu"] = scaler.cpu_request
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def container(chosen: Chosen, own: dict[str, Any]) -> dict[str, Any]:
    """`own` (the team's container, or one named only) with the variant's server settings: rewritten where its
    command line sets them, else in the server's environment variable (kube.server_settings)."""
    return apply_server_settings(own, chosen.variant, chosen.variant.interface)


def deployment_patch(name: str, own: dict[str, Any], chosen: Chosen, scaler: Autoscaler | None,
                     note: str) -> dict[str, Any]:
    """Only what the export changes: the container's command line where it was rewritten, its changed
    environment, its resources; the replicas unless an HPA owns them."""
    changed = container(chosen, own)
    patched: dict[str, Any] = {"name": own["name"]}
    for key in ("command", "args"):
        if changed.get(key) != own.get(key):
            patched[key] = changed[key]
    before = {e["name"]: e for e in own.get("env") or []}
    env = [e for e in changed.get("env") or [] if before.get(e["name"]) != e]
    if env:
        patched["env"] = env
    patched["resources"] = resources(chosen, scaler)
    spec: dict[str, Any] = {"template": {"spec": {"containers": [patched]}}}
    if scaler is None:
        spec["replicas"] = chosen.variant.pods
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "annotations": {ANNOTATION: note}}, "spec": spec}


def kustomization(base: str, autoscaled: bool) -> dict[str, Any]:
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [base, *(["hpa.yaml"] if autoscaled else [])],
            "patches": [{"path": "deployment-patch.yaml"}]}


def helm_values(own: dict[str, Any], chosen: Chosen, scaler: Autoscaler | None) -> dict[str, Any]:
    """`helm create`'s replicaCount, resources and autoscaling, plus the container's env (and its command and
    args where the server reads its settings only there)."""
    changed = container(chosen, own)
    values: dict[str, Any] = {"replicaCount": scaler.min_replicas if scaler else chosen.variant.pods,
                              "resources": resources(chosen, scaler)}
    for key in ("command", "args", "env"):
        if changed.get(key):
            values[key] = copy.deepcopy(changed[key])
    if scaler is not None:
        values["autoscaling"] = {"enabled": True, "minReplicas": scaler.min_replicas,
                                 "maxReplicas": scaler.max_replicas,
                                 "targetCPUUtilizationPercentage": scaler.cpu_target_percent}
    return values


def whole_deployment(experiment: Experiment, chosen: Chosen, scaler: Autoscaler | None, note: str,
                     defaults: manifests.Defaults) -> dict[str, Any]:
    """The target's Deployment as loadstage deployed it for the variant (the operator's default resources under
    the variant's), a CPU request recommended where the autoscaler needs one, and no replicas where an HPA owns
    them."""
    deployment = manifests.runner_deployment(experiment, chosen.variant, defaults)
    deployment["metadata"]["annotations"] = {ANNOTATION: note}
    if scaler is not None:
        server = deployment["spec"]["template"]["spec"]["containers"][0]
        server.setdefault("resources", {}).setdefault("requests", {}).setdefault("cpu", scaler.cpu_request)
        del deployment["spec"]["replicas"]
    return deployment
