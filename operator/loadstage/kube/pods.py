"""What a pod's status says, read from the plain dicts the pod watch keeps: ready, unable to start,
lost, or a Locust master that finished."""

from __future__ import annotations

from typing import Any

from loadstage.engine.errors import ExperimentFailed
from loadstage.engine.steps import Step

Pod = dict[str, Any]
# Waiting reasons after which a pod will not start by itself.
FATAL_WAITING_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff",
                         "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
# ... except where the kubelet's own cache of a Secret or ConfigMap has not synced yet: it retries that itself.
TRANSIENT_WAITING_MESSAGES = ("failed to sync secret cache", "failed to sync configmap cache")


def job_of(pod: Pod) -> str | None:
    return (pod["metadata"].get("labels") or {}).get("job-name")


def owner_uids(pod: Pod) -> set[str]:
    return {ref["uid"] for ref in pod["metadata"].get("ownerReferences") or []}


def ready(pod: Pod) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions") or [])


def containers(pod: Pod) -> list[dict[str, Any]]:
    return pod.get("status", {}).get("containerStatuses") or []


def cannot_start(pods) -> str | None:
    """What keeps a container from ever starting (a bad image, a crash loop), naming pod and image."""
    for pod in pods:
        for cs in containers(pod):
            waiting = (cs.get("state") or {}).get("waiting") or {}
            message = waiting.get("message") or ""
            if waiting.get("reason") in FATAL_WAITING_REASONS and not message.startswith(TRANSIENT_WAITING_MESSAGES):
                return (f"pod {pod['metadata']['name']} container {cs['name']} (image {cs.get('image')}): "
                        f"{waiting['reason']}: {message}").strip()
    return None


def master_terminated(pods: list[Pod], step: Step):
    """(pod name, the master container's terminated state) if it exited 0; raises if it failed."""
    for pod in pods:
        for cs in containers(pod):
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is None:
                continue
            if terminated.get("exitCode") == 0:
                return pod["metadata"]["name"], terminated
            raise ExperimentFailed("StageFailed", f"{step.label()}: the Locust master pod {pod['metadata']['name']} "
                                                  f"{loss(pod)}")
    return None


# A pod's status.reason when the cluster, not its own container, ended it.
DISRUPTION_REASONS = {"Evicted", "Preempting", "NodeLost", "NodeShutdown", "Shutdown", "Terminated"}


def disruption(pod: Pod) -> str | None:
    """How the cluster took the pod away (an eviction, a preemption, its node lost, a deletion), or None."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return f"was taken away ({condition.get('reason')}: {condition.get('message')})"
    if status.get("reason") in DISRUPTION_REASONS:
        return f"was taken away ({status['reason']}: {status.get('message')})"
    if pod["metadata"].get("deletionTimestamp"):
        return "was deleted"
    return None


def loss(pod: Pod) -> str | None:
    """Why a stage pod is gone for good (deleted, evicted, its container failed), or None."""
    status = pod.get("status") or {}
    why = f" ({status['reason']}: {status.get('message')})" if status.get("reason") else ""
    if pod["metadata"].get("deletionTimestamp"):
        return f"was deleted{why}"
    for cs in containers(pod):
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated is not None and terminated.get("exitCode") != 0:
            said = (terminated.get("message") or "").strip()
            return (f"failed: container {cs['name']} exited with code {terminated.get('exitCode')} "
                    f"({terminated.get('reason') or 'Error'})" + (f": {said[-400:]}" if said else ""))
    if status.get("phase") == "Failed":
        return f"failed{why}"
    return None
