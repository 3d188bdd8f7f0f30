"""Pods that will not come by themselves: refused by a ResourceQuota or LimitRange (their controller's
FailedCreate Event), or unschedulable for longer than spec.schedulingTimeout (their PodScheduled condition).
Both name the cluster's own reason."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from kubernetes.client.rest import ApiException

from loadstage.engine.clock import parse
from loadstage.kube.client import call
from loadstage.kube.context import ExperimentContext

REFUSAL_GRACE_SECONDS = 20   # a refusal that lasts: the pods of a discarded attempt may still hold the quota


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def refusals_from() -> dt.datetime:
    """Where a wait that starts now looks for refusals: its own, and the API server's clock may run behind."""
    return utc_now() - dt.timedelta(seconds=REFUSAL_GRACE_SECONDS)


def _parse(stamp: str | None) -> dt.datetime | None:
    return parse(stamp) if stamp else None


def unschedulable(pods, timeout: float, at: dt.datetime | None = None) -> str | None:
    """The first pod the scheduler has found no node for since longer than `timeout` seconds, and why."""
    at = at or utc_now()
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") != "PodScheduled" or condition.get("status") != "False" \
                    or condition.get("reason") != "Unschedulable":
                continue
            since = _parse(condition.get("lastTransitionTime"))
            if since is not None and (at - since).total_seconds() >= timeout:
                return (f"pod {pod['metadata']['name']} found no node in {timeout:g}s "
                        f"(spec.schedulingTimeout): {condition.get('message')}")
    return None


async def refused_creation(context: ExperimentContext, since: dt.datetime, *, jobs: Sequence[str] = (),
                           deployments: Sequence[str] = ()) -> str | None:
    """Why the Jobs' or the Deployments' ReplicaSets cannot create their pods, when the API server has refused
    them since `since` and for REFUSAL_GRACE_SECONDS (a ResourceQuota, a LimitRange, a policy); else None."""
    try:
        events = await call(context.core.list_namespaced_event, context.namespace,
                            field_selector="reason=FailedCreate")
    except ApiException:
        return None
    at = utc_now()
    replica_sets = tuple(f"{d}-" for d in deployments)
    listed: list[Any] = events.items
    for event in listed:
        obj = event.involved_object
        if not ((obj.kind == "Job" and obj.name in jobs)
                or (obj.kind == "ReplicaSet" and obj.name.startswith(replica_sets))):
            continue
        first = event.first_timestamp or event.event_time or event.metadata.creation_timestamp
        last = event.last_timestamp or event.event_time or first
        if first is None or last < since or (at - first).total_seconds() < REFUSAL_GRACE_SECONDS:
            continue
        return f"{obj.kind} {obj.name} cannot create its pods: {event.message}"
    return None
