"""The export's handler: once spec.goal found a winner, its files (docs/export.md) in a ConfigMap the experiment
owns, `<name>-recommendation`, named in status.export; registered with Kopf as `loadstage operator` imports it."""

from __future__ import annotations

import contextlib
from typing import Any

import kopf

from loadstage.api.load import parse_experiment
from loadstage.api.names import API_GROUP, API_VERSION, PLURAL
from loadstage.api.schema import ShapeError, ValidationError
from loadstage.api.status import ExportRecord, RunStatus
from loadstage.export import bundle
from loadstage.export.choice import ExportRefused
from loadstage.kube import manifests, recommendation
from loadstage.kube.client import API_ERRORS, retry_message
from loadstage.kube.deployment_target import TargetDeploymentInvalid
from loadstage.kube.server_settings import SettingsNotSettable
from loadstage.kube.status import record as status_record

EXPORT_RETRY_SECONDS = 10
REFUSED = (ExportRefused, SettingsNotSettable, ValidationError, ShapeError, TargetDeploymentInvalid, LookupError,
           recommendation.NotOurs)


def _export_due(status, **_) -> bool:
    """A succeeded experiment whose goal found a winner, not yet exported."""
    return status.get("phase") == "Succeeded" and (status.get("recommendation") or {}).get("variant") is not None \
        and not status.get("export")


def _said(error: Exception) -> str:
    return getattr(error, "message", None) or str(error)


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, id="export", when=_export_due, backoff=EXPORT_RETRY_SECONDS,
             cancellation_timeout=10)
def export_recommendation(body: kopf.Body, namespace: Any, name: str, memo: kopf.Memo, logger: kopf.Logger, **_):
    """The pick's files: whole manifests of the app loadstage deployed, or a kustomize patch of the team's own
    Deployment (spec.target.deployment), with an HPA where spec.autoscale gives the traffic."""
    document = {k: body[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    source = f"lx/{name}"
    try:
        experiment = parse_experiment(document)
        status = RunStatus.read(dict(body.status))
        if experiment.spec.target.deployment is None:
            shape, own = "manifests", bundle.Own(manifests.runner_name(experiment), {})
        else:
            shape, own = "kustomize", bundle.Own(*recommendation.own_container(memo.api, namespace, experiment))
        made = bundle.build(experiment, status, source=source, shape=shape, own=own, defaults=memo.config.defaults,
                            asked=experiment.spec.autoscale)
        configmap = manifests.recommendation_configmap(experiment, made.texts())
        kopf.adopt(configmap, owner=body)
        recommendation.create(memo.api, namespace, configmap, body.metadata.uid)
    except REFUSED as e:
        message = f"export: {_said(e)}"
        logger.warning(message)
        kopf.event(body, type="Warning", reason="ExportRefused", message=message)
        status_record(memo.api, namespace, name, export={"error": message})
        return
    except API_ERRORS as e:
        message = f"export: {retry_message(e)}; tried again in {EXPORT_RETRY_SECONDS} s"
        logger.warning(message)
        with contextlib.suppress(*API_ERRORS):
            kopf.event(body, type="Warning", reason="ExportFailed", message=message)
        raise kopf.TemporaryError(message, delay=EXPORT_RETRY_SECONDS) from None
    scaler = made.scaler
    written: ExportRecord = {"configMap": configmap["metadata"]["name"], "variant": made.chosen.variant.index,
                             "files": list(made.files), "measuredAt": made.chosen.evidence.line()}
    if scaler is not None and made.asked is not None:
        written["autoscaler"] = "; ".join(scaler.lines(made.asked))
    status_record(memo.api, namespace, name, export=written)
    message = f"{', '.join(made.files)} in ConfigMap {written['configMap']}: {made.chosen.title()}"
    kopf.event(body, type="Normal", reason="Exported", message=message)
    logger.info("export: %s", message)
