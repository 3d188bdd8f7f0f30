"""Where a finished (or running) experiment's status is read from: a result file written by
`loadstage run -o`, or a LoadExperiment in a cluster (`lx/NAME`, through the current kubeconfig)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from .crd import PLURAL
from .model import API_GROUP, API_VERSION
from .schema import ValidationError

RESOURCE_PREFIXES = ("lx/", "loadexperiment/", "loadexperiments/")


def is_resource(source: str) -> bool:
    return source.startswith(RESOURCE_PREFIXES)


def load_document(source: str, namespace: str | None = None) -> dict[str, Any]:
    """The LoadExperiment document, with its status; raises ValidationError naming the source."""
    document = _from_cluster(source, namespace) if is_resource(source) else _from_file(source)
    status = document.get("status") if isinstance(document, dict) else None
    if not isinstance(status, dict) or not isinstance(status.get("variants"), list):
        raise ValidationError([(source, "has no LoadExperiment status with variants (not a loadstage result?)")])
    return document


def _from_file(source: str) -> dict[str, Any]:
    path = Path(source)
    try:
        text = path.read_text()
    except OSError as e:
        raise ValidationError([(source, f"cannot read: {e.strerror}")]) from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise ValidationError([(source, f"not valid {'JSON' if path.suffix == '.json' else 'YAML'} "
                                        f"(truncated?): {str(e).splitlines()[0]}")]) from None


def _from_cluster(source: str, namespace: str | None) -> dict[str, Any]:
    from kubernetes import client, config

    name = source.split("/", 1)[1]
    try:
        config.load_kube_config()
        namespace = namespace or config.list_kube_config_contexts()[1]["context"].get("namespace", "default")
    except (config.ConfigException, OSError, TypeError, KeyError) as e:
        raise ValidationError([(source, f"no usable kubeconfig: {e}")]) from None
    try:
        return client.CustomObjectsApi().get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL,
                                                                      name)
    except client.ApiException as e:
        reason = "not found" if e.status == 404 else f"{e.status} {e.reason}"
        raise ValidationError([(source, f"{reason} in namespace {namespace}")]) from None
