"""Kopf handlers: the edge between Kopf and the stage engine.

One async daemon per unfinished LoadExperiment runs the StageEngine with the Kubernetes
backend in the event loop: a waiting experiment holds no thread, so hundreds run at once.
The resource's status is the engine's memory, so when the operator restarts the daemon
continues after the last finished stage. Kopf's keyword arguments stop here."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

import kopf
import kubernetes

from loadstage.api.load import parse_experiment
from loadstage.api.names import API_GROUP, API_VERSION, FINISHED, PLURAL
from loadstage.api.schema import ShapeError, ValidationError
from loadstage.api.status import Cleanup, RunStatus
from loadstage.engine.clock import now
from loadstage.engine.errors import Cancelled, ExperimentFailed
from loadstage.engine.stages import StageEngine, new_status
from loadstage.history.locations import Location
from loadstage.kube import in_place, metrics
from loadstage.kube.backend import KubernetesBackend
from loadstage.kube.children import delete_children
from loadstage.kube.client import (
    API_CONNECT_TIMEOUT,
    API_ERRORS,
    API_READ_TIMEOUT,
    API_RETRY_SECONDS,
    api_client,
    call,
    load_config,
    retry_message,
)
from loadstage.kube.context import ExperimentContext
from loadstage.kube.manifests import Defaults, resource_problems
from loadstage.kube.pod_watch import PodWatches
from loadstage.kube.status import StatusWriter
from loadstage.kube.status import record as status_record

API_WAIT_SECONDS = 120
SAME_ERROR_LIMIT = 3   # an unexpected error met this many times in a row, with no stage recorded between, fails it
API_NOT_SERVING = {404: "the LoadExperiment CRD is not installed", 429: "the API server is initializing its storage",
                   503: "the API server is unavailable"}


@dataclass(frozen=True)
class OperatorConfig:
    defaults: Defaults
    namespaces: tuple[str, ...] = ()     # empty: every namespace
    redis_sample_url: str | None = None
    metrics_port: int | None = None
    listen_address: str = "0.0.0.0"
    history: Location | None = None      # where each finished experiment is recorded (edge.history)


def wait_for_the_api(api: kubernetes.client.ApiClient, namespaces: tuple[str, ...], logger: kopf.Logger,
                     timeout: float = API_WAIT_SECONDS) -> None:
    """Returns once LoadExperiments can be listed, or after `timeout` (Kopf then reports the error).
    Right after a CRD is installed the API server refuses it for a moment, and Kopf would log each
    refused watch as an error."""
    custom = kubernetes.client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    said = None
    while True:
        try:
            for namespace in namespaces:
                custom.list_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL, limit=1)
            if not namespaces:
                custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, limit=1)
            return
        except kubernetes.client.ApiException as e:
            if e.status not in API_NOT_SERVING or time.monotonic() > deadline:
                return
            if API_NOT_SERVING[e.status] != said:
                said = API_NOT_SERVING[e.status]
                logger.info("waiting for the LoadExperiment API: %s", said)
        time.sleep(1)


def tune(settings: kopf.OperatorSettings) -> None:
    settings.persistence.finalizer = f"{API_GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=API_GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    # The CRD is installed before the operator; scanning CRDs and namespaces would need
    # cluster-wide RBAC that the namespaced install must not have.
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.connect_timeout = API_CONNECT_TIMEOUT
    settings.networking.request_timeout = API_READ_TIMEOUT
    # Only the short sync handlers (startup, cleanup) use Kopf's thread pool.
    settings.execution.max_workers = 32


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: kopf.Logger, **_):
    tune(settings)
    load_config()
    memo.api = api_client()
    memo.pod_watches = PodWatches(kubernetes.client.CoreV1Api(memo.api))
    memo.running = set()
    memo.errors = RepeatedErrors()
    if memo.config.metrics_port:
        metrics.serve(memo.config.metrics_port, memo.config.listen_address)
    wait_for_the_api(memo.api, memo.config.namespaces, logger)


class RepeatedErrors:
    """Unexpected errors by experiment: the same one again, with no stage recorded since, counts up."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[str, int, int]] = {}

    def count(self, key: tuple[str, str], message: str, recorded: int) -> int:
        said, at, times = self._last.get(key, (None, None, 0))
        times = times + 1 if (said, at) == (message, recorded) else 1
        self._last[key] = (message, recorded, times)
        return times

    def forget(self, key: tuple[str, str]) -> None:
        self._last.pop(key, None)


@kopf.on.probe(id="runningExperiments")
def running_experiments(memo: kopf.Memo, **_) -> int:
    return len(memo.running)


def _unfinished(status, **_) -> bool:
    return status.get("phase") not in FINISHED


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, id="experiment", when=_unfinished,
             cancellation_backoff=15, cancellation_timeout=30, backoff=10)
async def run_experiment(body: kopf.Body, namespace: Any, name: str, stopped: kopf.DaemonStopped,
                         memo: kopf.Memo, logger: kopf.Logger, **_):
    document = copy.deepcopy(dict(body))
    generation = body.metadata.get("generation", 1)
    status = copy.deepcopy(dict(body.status))
    key = (namespace, name)
    memo.running.add(key)
    metrics.EXPERIMENTS_RUNNING.set(len(memo.running))
    try:
        await run(document, status, namespace, generation, stopped=stopped, memo=memo, logger=logger,
                  post_event=lambda kind, reason, message: kopf.event(body, type=kind, reason=reason,
                                                                       message=message))
    finally:
        memo.running.discard(key)
        metrics.EXPERIMENTS_RUNNING.set(len(memo.running))
        metrics.LIVE.forget(namespace, name)


async def run(document: dict[str, Any], stored: dict[str, Any], namespace: str, generation: int, *,
              stopped, memo: kopf.Memo, logger: kopf.Logger, post_event) -> None:
    config: OperatorConfig = memo.config
    name = document["metadata"]["name"]
    try:
        status = RunStatus.read(stored)
    except ShapeError as e:   # an earlier operator's status this one cannot resume: nothing is overwritten
        status = RunStatus()
        unreadable: str | None = f"the status cannot be resumed: {e}"
    else:
        unreadable = None
    writer = StatusWriter(memo.api, namespace, name, generation, status.conditions, post_event)

    async def write(current: RunStatus) -> None:
        await call(writer, current)
    if unreadable:
        await write(status.ended("Failed", "StatusUnreadable", unreadable, now()))
        return
    try:
        experiment = parse_experiment(document)
        if problems := resource_problems(experiment, config.defaults.resources):
            raise ValidationError(problems)
    except ValidationError as e:
        await write(status.ended("Failed", "InvalidSpec", "; ".join(f"{p}: {m}" for p, m in e.problems), now()))
        return
    if not status.variants:
        status = new_status(experiment, status)
    owner: Any = {"apiVersion": document["apiVersion"], "kind": document["kind"], "metadata": document["metadata"]}
    context = ExperimentContext(
        experiment, namespace, memo.api, owner_uid=document["metadata"]["uid"],
        adopt=lambda child: kopf.adopt(child, owner=owner), stopped=stopped,
        on_event=lambda reason, message: post_event("Normal", reason, message),
        on_message=lambda message: write(dataclasses.replace(status, message=message)))
    backend = KubernetesBackend(context, defaults=config.defaults, pod_watches=memo.pod_watches,
                                redis_sample_url=config.redis_sample_url)
    try:
        await StageEngine(experiment, backend, on_update=write).run(status)
    except API_ERRORS as e:
        message = retry_message(e)
        logger.warning(message)
        with contextlib.suppress(*API_ERRORS):
            await write(dataclasses.replace(status, message=message))
        raise kopf.TemporaryError(message, delay=API_RETRY_SECONDS) from None
    except Cancelled:
        logger.info("stopped: %s", getattr(stopped, "reason", None) or "stop requested")
    except ExperimentFailed as e:
        logger.warning("failed: %s: %s", e.reason, e.message)
        await write(status.ended("Failed", e.reason, e.message, now()))
    except Exception as e:   # the operator's own bug: on record, retried, and failing the experiment if it persists
        logger.exception("unexpected error")
        key, message = (namespace, name), f"the operator's unexpected error: {type(e).__name__}: {e}"
        times = memo.errors.count(key, message, status.recorded_stages())
        if times >= SAME_ERROR_LIMIT:
            memo.errors.forget(key)
            await write(status.ended("Failed", "OperatorError", f"{message} ({times} times in a row; its traceback "
                                                                f"is in the operator's log)", now()))
            return
        await write(dataclasses.replace(status, message=f"{message}; retrying in {API_RETRY_SECONDS}s ({times} of "
                                                        f"{SAME_ERROR_LIMIT} before the experiment fails)"))
        raise kopf.TemporaryError(message, delay=API_RETRY_SECONDS) from None
    memo.errors.forget((namespace, name))


def _in_place(spec: Any) -> str | None:
    """The Deployment an InPlace experiment holds, or None."""
    deployment = (spec.get("target") or {}).get("deployment") or {}
    return deployment.get("name") if deployment.get("mode") == "InPlace" else None


def _restore_due(spec, status, **_) -> bool:
    return status.get("phase") in FINISHED and _in_place(spec) is not None and \
        not (status.get("inPlace") or {}).get("restored")


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, id="restore", when=_restore_due, backoff=API_RETRY_SECONDS,
             cancellation_timeout=10)
def restore_in_place(body: kopf.Body, namespace: Any, name: str, spec, memo: kopf.Memo, logger: kopf.Logger,
                     **_):
    """An InPlace target restored once the experiment has ended, however it ended; also after an operator
    restart, from the snapshot on the Deployment, until it succeeds."""
    try:
        restored = in_place.restore(memo.api, namespace, _in_place(spec) or "", body.metadata.uid)
    except API_ERRORS as e:
        message = f"restoring {_in_place(spec)}: {retry_message(e)}"
        logger.warning(message)
        kopf.event(body, type="Warning", reason="RestoreFailed", message=message)
        raise kopf.TemporaryError(message, delay=API_RETRY_SECONDS) from None
    message = f"restored {', '.join(restored)}" if restored else f"nothing of {_in_place(spec)} was held"
    status_record(memo.api, namespace, name, in_place={"restored": True, "at": now(), "message": message})
    kopf.event(body, type="Normal", reason="TargetRestored", message=message)
    logger.info(message)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL, id="restore-on-delete")
def restore_on_delete(body: kopf.Body, namespace: Any, spec: Any, memo: kopf.Memo, logger: kopf.Logger, **_):
    """An experiment deleted while it holds its target InPlace restores it first (Kopf's finalizer waits), once
    its run has stopped: a run still stopping could hold the target again after the restore."""
    if _in_place(spec) is None:
        return
    if (namespace, body.metadata.name) in memo.running:
        raise kopf.TemporaryError("waiting for the run to stop before restoring the target", delay=2)
    restored = in_place.restore(memo.api, namespace, _in_place(spec) or "", body.metadata.uid)
    if restored:
        logger.info("deleted while holding its target: restored %s", ", ".join(restored))


def _cleanup_due(spec, status, **_) -> bool:
    phase, policy = status.get("phase"), spec.get("cleanup", "Delete")
    return (phase in FINISHED and not (status.get("cleanup") or {}).get("done")
            and (policy == "Delete" or (policy == "KeepOnFailure" and phase == "Succeeded")))


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, id="cleanup", when=_cleanup_due, backoff=API_RETRY_SECONDS,
             cancellation_timeout=10)
def clean_up(body: kopf.Body, namespace: Any, name: str, memo: kopf.Memo, logger: kopf.Logger, **_):
    """The cleanup policy, driven by the phase alone: it runs for every finished experiment whose
    children are not yet deleted, also after an operator restart, until it succeeds."""
    def record(cleanup: Cleanup) -> None:
        status_record(memo.api, namespace, name, cleanup=cleanup)
    try:
        deleted = delete_children(memo.api, namespace, name)
    except API_ERRORS as e:
        message = f"cleanup: {retry_message(e)}"
        logger.warning(message)
        kopf.event(body, type="Warning", reason="CleanupFailed", message=message)
        with contextlib.suppress(*API_ERRORS):
            record({"done": False, "message": message})
        raise kopf.TemporaryError(message, delay=API_RETRY_SECONDS) from None
    record({"done": True, "at": now(), "message": f"deleted {deleted} object(s) and their pods"})
    logger.info("cleanup: deleted %d object(s)", deleted)

