"""The API server gone for 40 s mid-stage (four of the operator's 10 s retry periods), then back: with a cluster
of its own, so that no other test shares the outage."""

import time

import pytest

from support.kube import Cluster, apply, event_reasons, example, finish_stage, running_pods_of_job, wait_phase
from support.waiting import wait_for

pytestmark = pytest.mark.cluster
OUTAGE_SECONDS = 40


@pytest.fixture(scope="module")
def cluster():
    """A control plane of this module's own: the test stops it."""
    with Cluster.running("outage", stoppable=True) as c:
        yield c


def test_a_stage_outlives_an_api_server_outage_and_is_recorded_exactly_once(
        cluster, namespace, operator, real_stage):
    op = operator()
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]
    assert apply(cluster, namespace, doc).returncode == 0
    master, workers = "cluster-ladder-v1-s1-master", "cluster-ladder-v1-s1-workers"
    running_pods_of_job(cluster, namespace, master)
    running_pods_of_job(cluster, namespace, workers, 2)
    wait_for(lambda: "StageStarted" in event_reasons(cluster, namespace, "cluster-ladder"))
    jobs_before = {j.metadata.name: j.metadata.uid for j in cluster.batch.list_namespaced_job(namespace).items}

    cluster.stop()
    stopped = time.monotonic()
    while time.monotonic() - stopped < OUTAGE_SECONDS:
        assert op.healthy(), op.output()[-3000:]   # the operator waits it out; it neither exits nor fails
        time.sleep(1)
    cluster.start()
    back = time.monotonic()

    # the stage ends once the API server is back: the operator's watch must see it again
    finish_stage(cluster, namespace, master, workers, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded", timeout=120)
    print(f"\nSucceeded {time.monotonic() - back:.1f} s after the API server was back")
    status = cluster.status(namespace, "cluster-ladder")
    (variant,) = status["variants"]
    (stage,) = variant["stages"]
    assert stage["requests"] == real_stage.summary["requests"] and "retries" not in stage, stage
    assert stage.get("attempts", 1) == 1
    assert variant["aggregate"]["latencyMs"]["n"] == real_stage.summary["requests"]
    # Kopf posts events from a queue of its own, which the outage may have left behind the status
    reasons = wait_for(lambda: (found := event_reasons(cluster, namespace, "cluster-ladder")).count("StageFinished")
                       and found, timeout=30, explain=lambda: event_reasons(cluster, namespace, "cluster-ladder"))
    assert reasons.count("StageFinished") == 1 and "StageDisrupted" not in reasons, reasons
    assert reasons.count("StageStarted") == 1 and "StageResumed" in reasons, reasons
    # the Redis peak covers only what was sampled after the resumption, and says so
    assert stage["redisPeakCovers"].endswith("the operator resumed the stage (it restarted, or lost the API server)")
    kept = [cm.metadata.name for cm in cluster.core.list_namespaced_config_map(
        namespace, label_selector="loadstage.io/experiment=cluster-ladder").items]
    assert kept == ["cluster-ladder-v1-s1-results"], kept
    assert {j.metadata.name: j.metadata.uid for j in cluster.batch.list_namespaced_job(
        namespace).items}.items() <= jobs_before.items()   # nothing was created again
    print("\n".join(line for line in op.output().splitlines() if "kopf.objects" in line)[-2000:])
