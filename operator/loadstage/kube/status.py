"""The LoadExperiment status in the cluster: conditions derived from the phase, and every write of it through
the status subresource (the engine's as it goes, and the cleanup's and the restore's records), each through the
status's one declaration (api.status). Nothing else patches a LoadExperiment's status."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from kubernetes import client

from loadstage.api.names import API_GROUP, API_VERSION, CONDITION_TYPES, PLURAL
from loadstage.api.status import (
    STATUS,
    Cleanup,
    Condition,
    ExportRecord,
    HistoryRecord,
    InPlace,
    RunStatus,
    VerificationRecord,
)
from loadstage.engine.clock import now
from loadstage.engine.errors import ExperimentFailed
from loadstage.kube import metrics
from loadstage.kube.client import api_message

# phase -> (TargetReady, Running, Succeeded, Failed); None keeps the previous value
_CONDITIONS_BY_PHASE = {
    "Pending": ("False", "False", "False", "False"),
    "Deploying": ("False", "False", "False", "False"),
    "Running": ("True", "True", "False", "False"),
    "Succeeded": (None, "False", "True", "False"),
    "Failed": (None, "False", "False", "True"),
}
TOO_LARGE_REASON = "StatusTooLarge"


def conditions_for(status: RunStatus, previous: list[Condition], generation: int,
                   timestamp: str | None = None) -> list[Condition]:
    """Conditions for `status`; lastTransitionTime moves only when a condition's status changes."""
    timestamp = timestamp or now()
    old = {c["type"]: c for c in previous or []}
    phase = status.phase
    reason = status.reason or phase
    result: list[Condition] = []
    for ctype, value in zip(CONDITION_TYPES, _CONDITIONS_BY_PHASE[phase]):
        before = old.get(ctype)
        if value is None:
            value = before["status"] if before else "False"
        kept = None if before is None or before["status"] != value else before
        result.append({
            "type": ctype, "status": value,
            "reason": reason if kept is None or value == "True" else kept["reason"],
            "message": status.message if value == "True" else "",
            "lastTransitionTime": timestamp if kept is None else kept["lastTransitionTime"],
            "observedGeneration": generation,
        })
    return result


def _too_large(e: client.ApiException) -> bool:
    """413 from the API server; 500 when etcd or gRPC refuse the object's size."""
    message = api_message(e)
    return e.status == 413 or (e.status == 500 and ("too large" in message or "larger than max" in message))


def _patch(custom: client.CustomObjectsApi, namespace: str, name: str, document: dict[str, Any]) -> None:
    custom.patch_namespaced_custom_object_status(API_GROUP, API_VERSION, namespace, PLURAL, name,
                                                 {"status": document})


def record(api: client.ApiClient, namespace: str, name: str, *, cleanup: Cleanup | None = None,
           in_place: InPlace | None = None, history: HistoryRecord | None = None,
           export: ExportRecord | None = None, verification: VerificationRecord | None = None) -> None:
    """The cleanup's, the restore's, the history's, the export's or the verification's record, alone (a merge
    patch: the rest of the status stays)."""
    parts = {"cleanup": cleanup, "inPlace": in_place, "history": history, "export": export,
             "verification": verification}
    _patch(client.CustomObjectsApi(api), namespace, name,
           {key: STATUS.fields[key].dump(value, f"status.{key}") for key, value in parts.items() if value is not None})


class StatusWriter:
    """Writes the engine's status to the resource and posts an Event on every transition."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, generation: int,
                 previous_conditions: list[Condition],
                 post_event: Callable[[str, str, str], None]):
        self.custom = client.CustomObjectsApi(api)
        self.namespace, self.name, self.generation = namespace, name, generation
        self.conditions = previous_conditions or []
        self.post_event = post_event
        self.last: tuple[str, str] | None = None
        self.stages_seen: int | None = None
        self.refused_for_size: str | None = None

    def __call__(self, status: RunStatus) -> None:
        if self.refused_for_size:
            # what the API server refused stays out; only the end of the experiment is written
            status = RunStatus(phase="Failed", reason=TOO_LARGE_REASON, message=self.refused_for_size,
                               finished_at=status.finished_at or now())
        self.conditions = conditions_for(status, self.conditions, self.generation)
        document = dataclasses.replace(status, observed_generation=self.generation,
                                       conditions=self.conditions).to_status()
        try:
            _patch(self.custom, self.namespace, self.name, document)
        except client.ApiException as e:
            if self.refused_for_size or not _too_large(e):
                raise
            self.refused_for_size = (f"the API server refused a status of {len(json.dumps(document)):,} bytes as "
                                     f"too large ({api_message(e)}); the results written before are kept")
            self(status)
            raise ExperimentFailed(TOO_LARGE_REASON, self.refused_for_size) from None
        metrics.STATUS_WRITES.labels(self.namespace).inc()
        metrics.LIVE.note_status(self.namespace, self.name, document)
        if status.phase in ("Succeeded", "Failed") and (self.last or ("",))[0] != status.phase:
            metrics.EXPERIMENTS_FINISHED.labels(self.namespace, status.phase, status.reason or status.phase).inc()
        self._post_events(status)

    def _post_events(self, status: RunStatus) -> None:
        transition = (status.phase, status.message)
        if transition != self.last:
            kind = "Warning" if status.phase == "Failed" else "Normal"
            self.post_event(kind, status.reason or status.phase, transition[1])
            self.last = transition
        stages = [(v.index, s) for v in status.variants for s in v.stages]
        if self.stages_seen is not None:
            for index, stage in stages[self.stages_seen:]:   # only the stages new since the last write
                metrics.STAGES_FINISHED.labels(self.namespace).inc()
                self.post_event("Normal", "StageFinished",
                                f"variant {index + 1} stage {stage.stage}: {stage.requests:,} requests, "
                                f"p99 {stage.latency.p99} ms, Redis peak {stage.redis_peak_connections}")
        self.stages_seen = len(stages)
