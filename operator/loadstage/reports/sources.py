"""Where a finished (or running) experiment's results are read from: a result file written by
`loadstage run -o`, or a LoadExperiment in a cluster (`lx/NAME`, through the current kubeconfig),
with its artifacts (each stage's histograms and rows): in the result file under `artifacts`, in a
cluster in the ConfigMaps the operator keeps, one per stage."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from loadstage.api.load import parse_experiment
from loadstage.api.names import API_GROUP, API_VERSION, FINISHED, PLURAL
from loadstage.api.schema import Int, Json, ListOf, Obj, ShapeError, ValidationError
from loadstage.api.status import RunStatus
from loadstage.api.types import Experiment
from loadstage.api.yaml_files import load_documents, read_utf8
from loadstage.results.artifact import Artifact

RESOURCE_PREFIXES = ("lx/", "loadexperiment/", "loadexperiments/")
ARTIFACT_ENTRIES = ListOf("A result file's artifacts: an entry per variant and repeat.", Obj(dict, "", {
    "variant": Int("The variant, from 1."),
    "repeat": Int("The repeat, from 2 (absent: 1)."),
    "stages": ListOf("Each stage's artifact, in order ({} for one not run).", Json("An artifact.")),
}, required=("variant", "stages")))


def is_resource(source: str) -> bool:
    return source.startswith(RESOURCE_PREFIXES)


def load_document(source: str, namespace: str | None = None) -> dict[str, Any]:
    """The LoadExperiment document, with its status; raises ValidationError naming the source."""
    document = _from_cluster(source, namespace) if is_resource(source) else _from_file(source)
    status = document.get("status") if isinstance(document, dict) else None
    if not isinstance(status, dict) or not isinstance(status.get("variants"), list):
        raise ValidationError([(source, "has no LoadExperiment status with variants (not a loadstage result?)")])
    return document


def results_of(source: str, document: dict[str, Any]) -> RunStatus:
    """The document's results, read against the model: a damaged one is refused naming its first bad path."""
    try:
        return RunStatus.read(document.get("status") or {})
    except ShapeError as e:
        raise ValidationError([(e.path, f"{e.message} (in {source})")]) from None


def artifact_of(source: str, raw: Any, variant: int, repeat: int, stage: int) -> Artifact:
    """A stage's artifact read against the model: a damaged one is refused naming its first bad path."""
    where = f"artifacts (variant {variant}" + (f", repeat {repeat}" if repeat > 1 else "") + f", stage {stage})"
    try:
        return Artifact.read(raw, where)
    except ShapeError as e:
        raise ValidationError([(e.path, f"{e.message} (in {source})")]) from None


def artifacts_of(source: str, namespace: str | None, document: dict[str, Any]) -> dict[tuple[int, int], Artifact]:
    """Each stage's artifact of the first repeat, by (variant, stage)."""
    return {(v, s): artifact_of(source, a, v, r, s) for v, r, s, a in load_artifacts(source, namespace, document)
            if r == 1}


def _from_file(source: str) -> dict[str, Any]:
    path = Path(source)
    text = read_utf8(path, source)
    if path.suffix != ".json":
        documents = load_documents(text, source)
        if len(documents) != 1:
            raise ValidationError([(source, f"must hold one LoadExperiment document, found {len(documents)} "
                                            f"(truncated?)")])
        if isinstance(documents[0], dict) and "status" in documents[0] and "artifacts" not in documents[0]:
            # YAML cut at a line break still parses: the artifacts, which `loadstage run -o` writes last, say
            raise ValidationError([(source, "has no artifacts, which loadstage run -o writes after the status: "
                                            "the file was cut short")])
        return documents[0]
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValidationError([(source, f"not valid JSON (truncated?): {str(e).splitlines()[0]}")]) from None


def _cluster(source: str, namespace: str | None):
    from kubernetes import client, config

    from loadstage.kube.client import kubeconfig_namespace, load_config
    try:
        load_config(in_cluster=False)
        namespace = namespace or kubeconfig_namespace()
    except (config.ConfigException, OSError, TypeError, KeyError) as e:
        raise ValidationError([(source, f"no usable kubeconfig: {e}")]) from None
    return client, namespace


def _api_error(source: str, namespace: str, e) -> ValidationError:
    reason = "not found" if e.status == 404 else f"{e.status} {e.reason}"
    return ValidationError([(source, f"{reason} in namespace {namespace}")])


def _from_cluster(source: str, namespace: str | None) -> dict[str, Any]:
    client, namespace = _cluster(source, namespace)
    try:
        return client.CustomObjectsApi().get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL,
                                                                      source.split("/", 1)[1])
    except client.ApiException as e:
        raise _api_error(source, namespace, e) from None


def experiment_of(source: str, document: dict[str, Any]) -> Experiment:
    """The experiment a result document ran; its problems are named with the source."""
    try:
        return parse_experiment({k: document[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in document})
    except ValidationError as e:
        raise ValidationError([(f"{source}: {path}", message) for path, message in e.problems]) from None


def load_artifacts(source: str, namespace: str | None = None,
                   document: dict[str, Any] | None = None) -> list[tuple[int, int, int, dict[str, Any]]]:
    """(variant, repeat, stage, artifact) of every finished stage, each numbered from 1."""
    document = document or load_document(source, namespace)
    if not is_resource(source):
        try:
            entries = ARTIFACT_ENTRIES.read(document.get("artifacts") or [], "artifacts")
        except ShapeError as e:
            raise ValidationError([(e.path, f"{e.message} (in {source})")]) from None
        return [(v["variant"], v.get("repeat", 1), number, artifact) for v in entries
                for number, artifact in enumerate(v["stages"], 1) if artifact]
    from loadstage.kube.stored_results import stored_artifacts  # the Kubernetes client, where a cluster is named
    client, namespace = _cluster(source, namespace)
    try:
        return stored_artifacts(client.CoreV1Api(), namespace, source.split("/", 1)[1])
    except client.ApiException as e:
        raise _api_error(source, namespace, e) from None



def _finished(document: dict[str, Any]) -> bool:
    return document.get("status", {}).get("phase") in FINISHED


def follow(source: str, namespace: str | None = None, poll_seconds: float = 1.0):
    """Yields the document now and again whenever it changes, until its phase is Succeeded or Failed:
    a result file that `loadstage run -o` rewrites after every stage, or lx/NAME through a watch."""
    if not is_resource(source):
        seen = None
        while True:
            stamp = Path(source).stat().st_mtime_ns if Path(source).exists() else None
            if stamp != seen:
                seen = stamp
                document = load_document(source)
                yield document
                if _finished(document):
                    return
            time.sleep(poll_seconds)
    yield from _follow_resource(source, namespace)


def _follow_resource(source: str, namespace: str | None):
    from kubernetes import watch
    client, namespace = _cluster(source, namespace)
    api, name = client.CustomObjectsApi(), source.split("/", 1)[1]
    while True:
        document = _from_cluster(source, namespace)
        yield document
        if _finished(document):
            return
        try:
            for event in watch.Watch().stream(api.list_namespaced_custom_object, API_GROUP, API_VERSION, namespace,
                                              PLURAL, field_selector=f"metadata.name={name}",
                                              resource_version=document["metadata"]["resourceVersion"],
                                              timeout_seconds=300):
                if event["type"] == "DELETED":
                    raise ValidationError([(source, f"was deleted in namespace {namespace}")])
                if event["type"] == "MODIFIED":
                    yield event["object"]
                    if _finished(event["object"]):
                        return
        except client.ApiException as e:
            if e.status != 410:
                raise _api_error(source, namespace, e) from None
