"""spec.verify in a cluster (export.verification): once the export is written, a copy of the target with the
recommended settings and the exported HPA runs a ladder of arrival rates, each step's verdict and pods into
status.verification as it goes; the copy, its HPA and its stages' Jobs are deleted after, however it ended.

The copy is an experiment of its own name (export.verification.verification_name), run by the same engine and
backend as any, its objects owned by this LoadExperiment. Its progress lives in the operator's memory only: an
operator that restarts mid-ladder finds the record `Running`, deletes what the last attempt left, and runs the
ladder again from its first step. Registered with Kopf as `loadstage operator` imports it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import kopf
import yaml
from kubernetes import client

from loadstage.api.load import parse_experiment
from loadstage.api.names import API_GROUP, API_VERSION, PLURAL
from loadstage.api.schema import ShapeError, ValidationError
from loadstage.api.status import RunStatus, VerificationRecord
from loadstage.api.types import Experiment
from loadstage.edge.handlers import SAME_ERROR_LIMIT
from loadstage.engine.errors import Cancelled, ExperimentFailed
from loadstage.engine.stages import StageEngine, new_status
from loadstage.export import autoscaler, verification
from loadstage.export.verification import ClusterPlan
from loadstage.kube.autoscaled import AutoscaledBackend
from loadstage.kube.backend import KubernetesBackend
from loadstage.kube.children import delete_children
from loadstage.kube.client import API_ERRORS, API_RETRY_SECONDS, call, retry_message
from loadstage.kube.context import ExperimentContext
from loadstage.kube.status import record as status_record

DONE_EVENT = {"Holds": "Normal", "Breaks": "Warning", "Undecided": "Warning"}


def _verify_due(spec, status, **_) -> bool:
    """An export (or its refusal) not yet verified; a ladder left Running by an operator that stopped: again."""
    return bool(spec.get("verify")) and status.get("phase") == "Succeeded" and bool(status.get("export")) \
        and (status.get("verification") or {}).get("result") in (None, "Running")


def exported_hpa(api: client.ApiClient, namespace: str, configmap: str) -> dict[str, Any] | None:
    """The HPA the export wrote, as it wrote it (None: it wrote none)."""
    data = client.CoreV1Api(api).read_namespaced_config_map(configmap, namespace).data or {}
    return yaml.safe_load(data["hpa.yaml"]) if "hpa.yaml" in data else None


def plan_of(body: kopf.Body, api: client.ApiClient, namespace: str) -> tuple[ClusterPlan, Experiment] | str:
    """The ladder to run and the copy's experiment, or why there is nothing to verify."""
    document = {k: body[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    exported = body.status["export"]
    if "error" in exported:
        return f"the export was refused ({exported['error']})"
    try:
        experiment = parse_experiment(document)
        variant = experiment.variants()[exported["variant"]]
        try:
            hpa = exported_hpa(api, namespace, exported["configMap"])
        except client.ApiException as e:
            if e.status != 404:
                raise
            return f"the export's ConfigMap {exported['configMap']} is gone"
        if experiment.spec.autoscale is not None and hpa is None:
            return f"the export in ConfigMap {exported['configMap']} has no HPA"
        planned = verification.in_cluster(experiment, body.metadata.uid, variant, hpa)
        return planned, parse_experiment(planned.document)
    except (ValidationError, ShapeError, LookupError, yaml.YAMLError) as e:
        return f"{getattr(e, 'message', None) or e}"


def _key(namespace: str, name: str) -> tuple[str, str]:
    return namespace, f"{name}/verify"


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, id="verify", when=_verify_due, backoff=API_RETRY_SECONDS,
             cancellation_backoff=10, cancellation_timeout=30)
async def verify_in_cluster(body: kopf.Body, namespace: Any, name: str, stopped: kopf.DaemonStopped,
                            memo: kopf.Memo, logger: kopf.Logger, **_):
    async def record(checked: VerificationRecord) -> None:
        await call(status_record, memo.api, namespace, name, verification=checked)

    async def retried(e: Exception, steps: VerificationRecord | None) -> kopf.TemporaryError:
        """An API error: tried again (the ladder from its start) up to SAME_ERROR_LIMIT times in a row."""
        message = f"verification: {retry_message(e)}"
        logger.warning(message)
        times = memo.errors.count(_key(namespace, name), message, 0)
        if times >= SAME_ERROR_LIMIT:
            memo.errors.forget(_key(namespace, name))
            with contextlib.suppress(*API_ERRORS):
                await record({**(steps or {"where": "Cluster", "steps": []}), "result": "Undecided",
                              "reason": f"{message} ({times} times in a row; given up)"})
        return kopf.TemporaryError(message, delay=API_RETRY_SECONDS)

    try:
        made = await call(plan_of, body, memo.api, namespace)
    except API_ERRORS as e:
        raise await retried(e, None) from None
    if isinstance(made, str):
        await record({"where": "Cluster", "result": "Undecided", "reason": f"nothing to verify: {made}", "steps": []})
        return
    planned, copied = made
    owner: Any = {"apiVersion": body["apiVersion"], "kind": body["kind"], "metadata": body["metadata"]}
    context = ExperimentContext(
        copied, namespace, memo.api, owner_uid=body.metadata.uid,
        adopt=lambda child: kopf.adopt(child, owner=owner), stopped=stopped,
        on_event=lambda reason, message: kopf.event(body, type="Normal", reason=reason,
                                                    message=f"verification: {message}"))
    inner = KubernetesBackend(context, defaults=memo.config.defaults, pod_watches=memo.pod_watches,
                              redis_sample_url=memo.config.redis_sample_url)
    backend = AutoscaledBackend(inner, planned.hpa, autoscaler.SYNC_SECONDS) if planned.hpa else None
    replicas = backend.replicas if backend else [planned.replicas] * len(planned.loads)
    ran = new_status(copied)

    engine = StageEngine(copied, backend or inner)

    async def progress(current: RunStatus) -> None:
        await record(verification.cluster_record(planned, current, replicas, running=True,
                                                 artifacts=engine.artifacts))
    engine.on_update = progress
    logger.info(planned.said())
    kopf.event(body, type="Normal", reason="Verifying", message=planned.said())
    ended = None
    try:
        await call(delete_children, memo.api, namespace, copied.name)    # what an earlier attempt left
        await engine.run(ran)
    except ExperimentFailed as e:
        ended = e.message
    except Cancelled:
        logger.info("verification stopped: %s", getattr(stopped, "reason", None) or "stop requested")
        return
    except API_ERRORS as e:
        raise await retried(e, verification.cluster_record(planned, ran, replicas, running=True,
                                                           artifacts=engine.artifacts)) from None
    finally:
        with contextlib.suppress(*API_ERRORS):
            deleted = await call(delete_children, memo.api, namespace, copied.name)
            logger.info("verification: deleted %d object(s) of %s", deleted, copied.name)
    memo.errors.forget(_key(namespace, name))
    checked = verification.cluster_record(planned, ran, replicas, broke=backend.stuck if backend else None,
                                          ended=ended, artifacts=engine.artifacts)
    # the Event first: the record ends this daemon (its filter no longer holds)
    kopf.event(body, type=DONE_EVENT[checked["result"]], reason=f"Verification{checked['result']}",
               message=checked["reason"])
    logger.info("verification: %s: %s", checked["result"], checked["reason"])
    for attempt in range(SAME_ERROR_LIMIT):
        try:
            await record(checked)
            return
        except API_ERRORS as e:
            logger.warning("verification: recording it: %s", retry_message(e))
            await asyncio.sleep(API_RETRY_SECONDS * (attempt + 1))
    raise kopf.TemporaryError("verification: its record could not be written", delay=API_RETRY_SECONDS)
