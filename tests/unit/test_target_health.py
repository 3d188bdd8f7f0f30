"""The target's health as the pod watch shows it: a stage's restarts, pods taken away and unready seconds,
from a run of pod states (as the API server sends them)."""

import asyncio

from loadstage.kube.target_health import TargetHealth


def pod(name, *, ready=True, restarts=0, deleting=False, last=None):
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
              "containerStatuses": [{"name": "runner", "restartCount": restarts,
                                     **({"lastState": {"terminated": last}} if last else {})}]}
    meta = {"name": name, **({"deletionTimestamp": "2026-11-23T10:00:00Z"} if deleting else {})}
    return {"metadata": meta, "status": status}


class NoEvents:
    namespace = "default"

    class core:
        @staticmethod
        def list_namespaced_event(namespace, field_selector):
            return type("Events", (), {"items": []})()


def health_after(*moments):
    health = TargetHealth(NoEvents(), None)
    for current in moments:
        health._observe({p["metadata"]["name"]: p for p in current})
    return asyncio.run(health.pods())


def test_the_previous_variants_pods_going_away_as_the_stage_starts_are_no_disruption():
    assert health_after([pod("old", ready=False, deleting=True), pod("new")], [pod("new")]) == ()


def test_a_pod_of_the_stage_deleted_or_restarted_is_on_record():
    (gone,) = health_after([pod("a"), pod("b")], [pod("b")])
    assert gone.pod == "a" and gone.gone == "was deleted" and gone.interrupted
    (restarted,) = health_after([pod("a", restarts=1)], [pod("a", restarts=3, last={"reason": "OOMKilled",
                                                                                     "exitCode": 137})])
    assert restarted.restarts == 2 and restarted.causes == ("OOMKilled (exit 137)",)


def test_a_stage_resumed_by_a_restarted_operator_keeps_the_restarts_made_while_no_operator_watched():
    """The baseline of a resumed stage is not 'whatever the pods show now': a restart whose container ended
    after the stage began, and every restart of a pod created since, belong to the stage."""
    began = "2026-11-23T10:00:00Z"
    older = pod("older", restarts=3, last={"reason": "OOMKilled", "exitCode": 137,
                                           "finishedAt": "2026-11-23T10:01:00Z"})
    older["metadata"]["creationTimestamp"] = "2026-11-23T09:00:00Z"
    newer = pod("newer", restarts=2, last={"reason": "Error", "exitCode": 1, "finishedAt": "2026-11-23T10:02:00Z"})
    newer["metadata"]["creationTimestamp"] = "2026-11-23T10:00:30Z"
    steady = pod("steady", restarts=4, last={"reason": "Error", "exitCode": 1, "finishedAt": "2026-11-23T09:30:00Z"})
    steady["metadata"]["creationTimestamp"] = "2026-11-23T09:00:00Z"
    health = TargetHealth(NoEvents(), None, since=began)
    health._observe({p["metadata"]["name"]: p for p in (older, newer, steady)})
    found = {p.pod: p.restarts for p in asyncio.run(health.pods())}
    assert found == {"older": 1, "newer": 2}


class Watch:
    """A pod watch that has listed its pods: the stage's first look happens when its task first runs."""
    listed = True

    def __init__(self, *pods):
        self.pods = list(pods)

    def snapshot(self, _experiment, _labels):
        return {p["metadata"]["name"]: p for p in self.pods}

    async def until(self, experiment, labels, check, _stopped):
        while check(self.snapshot(experiment, labels)) is None:   # noqa: ASYNC110 (each turn of the loop is a change)
            await asyncio.sleep(0)


class Stage(NoEvents):
    experiment = type("Experiment", (), {"name": "lx"})()
    stopped = asyncio.Event


def test_a_restart_the_moment_the_stage_began_is_the_stages_though_the_watch_had_not_looked_yet():
    async def stage():
        watch = Watch(pod("a", restarts=1))
        async with TargetHealth(Stage(), watch) as health:
            watch.pods = [pod("a", restarts=3, last={"reason": "Error", "exitCode": 1})]   # before any await
            await asyncio.sleep(0)
        return await health.pods()
    (restarted,) = asyncio.run(stage())
    assert restarted.restarts == 2 and restarted.causes == ("Error (exit 1)",)
