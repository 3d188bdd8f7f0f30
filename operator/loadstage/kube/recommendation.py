"""The recommendation's ConfigMap in the cluster (its manifest: kube.manifests.recommendation_configmap), and the
team's own Deployment it patches, read as it is now."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from loadstage.api.types import Experiment
from loadstage.kube.deployment_target import container_index
from loadstage.kube.in_place import read_deployment


class NotOurs(Exception):
    """A ConfigMap of the recommendation's name that another owner holds: it is left as it is."""


def create(api: client.ApiClient, namespace: str, manifest: dict[str, Any], owner_uid: str) -> None:
    """Creates it; one already there from this experiment (an operator that stopped before it recorded it) is
    taken as written: its files come from the same finished status."""
    core: Any = client.CoreV1Api(api)
    try:
        core.create_namespaced_config_map(namespace, manifest)
    except ApiException as e:
        if e.status != 409:
            raise
        existing = core.read_namespaced_config_map(manifest["metadata"]["name"], namespace)
        if not any(ref.uid == owner_uid for ref in existing.metadata.owner_references or []):
            raise NotOurs(f"ConfigMap {manifest['metadata']['name']} exists and is not this experiment's; it is "
                          f"left as it is (`loadstage export` writes the same files)") from None


def own_container(api: client.ApiClient, namespace: str, experiment: Experiment) -> tuple[str, dict[str, Any]]:
    """spec.target.deployment's name and its container as the Deployment holds it now (an InPlace target is
    restored by the time an experiment ends); raises LookupError where it is gone."""
    ref = experiment.spec.target.existing
    deployment = read_deployment(api, namespace, ref.name)
    if deployment is None:
        raise LookupError(f"Deployment {ref.name} is gone: nothing to patch")
    return ref.name, deployment["spec"]["template"]["spec"]["containers"][container_index(experiment, deployment)]
