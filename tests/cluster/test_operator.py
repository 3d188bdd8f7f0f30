"""The operator against a real control plane (kube-apiserver, etcd, controller-manager,
scheduler; kwok plays the nodes). The test plays the kubelet for Locust pods: it writes
the termination message a real local Locust master produced."""

import asyncio
import copy
import dataclasses
import datetime
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from loadstage.api.load import parse_experiment
from loadstage.api.quantities import parse_duration
from loadstage.kube.children import Children
from loadstage.kube.client import API_THREADS
from loadstage.kube.context import ExperimentContext
from support.invalid_documents import CASES, EDGES, case_document, document, within
from support.kube import (
    GROUP,
    PLURAL,
    VERSION,
    a_running_pod_of_job,
    api_requests,
    apply,
    children,
    crash_pod,
    event_reasons,
    example,
    finish_stage,
    play_stage,
    pods,
    policy_reach,
    running_pods_of_job,
    services_port,
    stages_done,
    wait_phase,
)
from support.scale import many_at_once, one_big_stage
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def ladder(cluster, real_stage, tmp_path_factory):
    """examples/cluster-ladder.yaml run once through the operator, the test playing the kubelet, with
    `loadstage report --follow` watching; what was seen on the way is kept for the tests below."""
    from loadstage.local.ports import free_port
    from loadstage.local.processes import Supervisor
    from support.kube import OperatorProcess
    from support.processes import start_redis
    work = tmp_path_factory.mktemp("ladder")
    namespace = f"ladder-{uuid.uuid4().hex[:6]}"
    cluster.core.create_namespace({"metadata": {"name": namespace}})
    supervisor = Supervisor()
    sampler = free_port()
    start_redis(supervisor, work, sampler)
    metrics_port = free_port()
    op = OperatorProcess(cluster.kubeconfig, ["-n", namespace], f"redis://127.0.0.1:{sampler}/0",
                         work / "operator.log", free_port(), extra=("--metrics-port", str(metrics_port)))
    kube_env = {**os.environ, "KUBECONFIG": cluster.kubeconfig}
    seen = {"namespace": namespace, "work": work, "stages": [], "env": kube_env}
    try:
        assert apply(cluster, namespace, example("cluster-ladder")).returncode == 0
        seen["uid"] = cluster.lx(namespace, "cluster-ladder")["metadata"]["uid"]
        seen["follow"] = supervisor.start("follow", [sys.executable, "-m", "loadstage.cli", "report", "--follow",
                                                     "lx/cluster-ladder", "-n", namespace],
                                          log_path=work / "follow.log", env={"KUBECONFIG": cluster.kubeconfig})
        seen["runner"] = wait_for(lambda: cluster.apps.list_namespaced_deployment(
            namespace, label_selector="app.kubernetes.io/component=runner").items)[0]
        seen["redis"] = cluster.apps.read_namespaced_deployment("cluster-ladder-redis", namespace)

        def target_services():
            found = {s.metadata.name: s for s in cluster.core.list_namespaced_service(namespace).items}
            return found if {"cluster-ladder-runner", "cluster-ladder-redis"} <= found.keys() else None
        seen["services"] = wait_for(target_services)  # created right after the Deployments
        seen["policies"] = wait_for(lambda: (lambda found: found if len(found) == 3 else None)(
            cluster.api.sanitize_for_serialization(cluster.networking.list_namespaced_network_policy(namespace).items)))
        for number, injectors in enumerate([2, 4, 6], 1):
            run = f"v1-s{number}"
            def jobs(component, run=run):
                return cluster.batch.list_namespaced_job(
                    namespace, label_selector=f"loadstage.io/run={run},app.kubernetes.io/component={component}").items
            master = wait_for(lambda: jobs("locust-master"))[0]
            workers = wait_for(lambda: jobs("locust-worker"))[0]
            seen["stages"].append({
                "run": run, "injectors": injectors, "master": master, "workers": workers,
                "master_service_port": services_port(cluster, namespace, f"cluster-ladder-{run}-master"),
                "row": cluster.kubectl("get", "lx", "-n", namespace, "--no-headers").stdout.split()})
            if number == 2:
                seen["operator_metrics"] = wait_for(lambda: live_samples(metrics_port, stage="2"))
            if number == 1:
                running_pods_of_job(cluster, namespace, workers.metadata.name, injectors)
                seen["pods"] = {p.metadata.name: p.metadata.labels
                                for p in cluster.core.list_namespaced_pod(namespace).items}
            play_stage(cluster, namespace, "cluster-ladder", run, injectors, real_stage,
                       hold_connections=3 * number, sampler_port=sampler)
            wait_for(lambda number=number: stages_done(cluster, namespace, "cluster-ladder") == number)
        wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
        seen["waited"] = cluster.kubectl("wait", "-n", namespace, "--for=condition=Succeeded", "lx/cluster-ladder",
                                         "--timeout=30s")
        seen["status"] = cluster.status(namespace, "cluster-ladder")
        seen["table"] = cluster.kubectl("get", "lx", "-n", namespace).stdout.splitlines()
        seen["events"] = event_reasons(cluster, namespace, "cluster-ladder")
        seen["results"] = [cluster.core.read_namespaced_config_map(f"cluster-ladder-v1-s{n}-results", namespace)
                           for n in (1, 2, 3)]
        seen["follow_code"] = seen["follow"].process.wait(timeout=30)
        seen["followed"] = seen["follow"].log_path.read_text()
        yield seen
    finally:
        op.kill(signal.SIGTERM)
        supervisor.stop_all()
        cluster.drop_namespace(namespace)


def live_samples(port: int, stage: str) -> dict | None:
    """The operator's live series, once the given stage's samples are in."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples
             if s.name.startswith("loadstage_experiment") or s.labels.get("stage") == stage}
    return found if "loadstage_redis_connections" in found else None


def test_the_operator_serves_each_runs_place_time_left_and_the_running_stages_samples(ladder):
    found = ladder["operator_metrics"]
    assert found["loadstage_experiment_info"].labels == {
        "namespace": ladder["namespace"], "experiment": "cluster-ladder", "phase": "Running", "variant": "1/1",
        "repeat": "", "stage": "2/3"}
    assert 45 <= found["loadstage_experiment_remaining_seconds"].value <= 2 * 45 + 30
    redis = found["loadstage_redis_connections"]
    assert redis.labels["settings"] == "gunicorn pods=2 workers=2 threads=2 gthread" and redis.value >= 0
    assert "loadstage_target_cpu_cores" not in found    # kwok has no metrics-server: nothing sampled, nothing shown


def test_the_runner_is_owned_runs_the_servers_command_line_and_is_locked_down(ladder):
    runner = ladder["runner"]
    assert runner.metadata.name == "cluster-ladder-runner" and runner.spec.replicas == 2
    (owner,) = runner.metadata.owner_references
    assert (owner.uid, owner.kind, owner.controller) == (ladder["uid"], "LoadExperiment", True)
    container = runner.spec.template.spec.containers[0]
    assert container.image == "loadstage/runner-app:test"
    assert container.args == ["gunicorn", "--config", "python:runner_app.gunicorn_conf", "--bind", "0.0.0.0:8000",
                              "--workers", "2", "--threads", "2", "--worker-class", "gthread", "--backlog", "2048",
                              "--no-control-socket", "runner_app.app:app"]
    assert {e.name: e.value for e in container.env}["REDIS_URL"] == "redis://cluster-ladder-redis:6379/0"
    assert [(p.name, p.container_port) for p in container.ports] == [("http", 8000)]
    assert container.security_context.allow_privilege_escalation is False
    assert container.security_context.capabilities.drop == ["ALL"]
    assert runner.spec.template.spec.security_context.run_as_non_root is True
    assert runner.spec.template.spec.automount_service_account_token is False


def test_redis_and_the_runner_get_services_that_select_their_pods(ladder):
    assert ladder["redis"].spec.template.spec.containers[0].args[:3] == ["redis-server", "--port", "6379"]
    services = ladder["services"]
    assert services["cluster-ladder-runner"].spec.ports[0].port == 8000
    assert services["cluster-ladder-runner"].spec.selector.items() <= \
        ladder["runner"].spec.template.metadata.labels.items()
    assert services["cluster-ladder-redis"].spec.ports[0].port == 6379


def test_network_policies_let_only_the_experiments_own_pods_reach_redis_the_master_and_the_runners(ladder):
    pods = ladder["pods"]

    def named(role):
        return {n for n, labels in pods.items() if labels.get("loadstage.io/role") == role}
    assert len(named("runner")) == 2 and len(named("locust-worker")) == 2 and named("redis") and named("locust-master")
    reach = policy_reach(ladder["policies"], pods)
    for name in named("redis"):
        assert reach[name] == named("runner")
    for name in named("locust-master"):
        assert reach[name] == named("locust-worker")
    for name in named("runner"):
        assert reach[name] == named("locust-master") | named("locust-worker")
    assert all(p["metadata"]["ownerReferences"][0]["uid"] == ladder["uid"] for p in ladder["policies"])


def test_each_stage_is_a_master_job_and_a_worker_job_of_its_injectors(ladder):
    assert [s["injectors"] for s in ladder["stages"]] == [2, 4, 6]
    for stage in ladder["stages"]:
        injectors, run = stage["injectors"], stage["run"]
        workers = stage["workers"]
        assert workers.spec.parallelism == workers.spec.completions == injectors
        assert workers.metadata.owner_references[0].uid == ladder["uid"]
        args = stage["master"].spec.template.spec.containers[0].args
        opts = dict(itertools.pairwise(args))
        assert (opts["--expect-workers"], opts["--users"]) == (str(injectors), str(25 * injectors))
        assert opts["--host"] == "http://cluster-ladder-runner:8000"
        assert opts["--summary-file"] == "/dev/termination-log"
        worker_args = workers.spec.template.spec.containers[0].args
        assert worker_args[worker_args.index("--master-host") + 1] == f"cluster-ladder-{run}-master"
        assert stage["master_service_port"] == 5557


def test_kubectl_get_lx_shows_the_progress_while_running_and_the_result_at_the_end(ladder):
    for number, stage in enumerate(ladder["stages"], 1):
        assert stage["row"][1:4] in (["Running", "1/1", f"{number}/3"], ["Deploying", "1/1", "0/3"]), stage["row"]
    # the time left at each stage's start counts down: the load to come and the set-up measured so far
    left = [parse_duration(stage["row"][5]) for stage in ladder["stages"]]
    assert left == sorted(left, reverse=True) and left[-1] >= 40, left
    table = ladder["table"]
    assert table[0].split()[:9] == ["NAME", "PHASE", "VARIANT", "STAGE", "INJECTORS", "REMAINING", "P99", "(MS)",
                                    "REDIS"]
    assert table[1].split()[:6] == ["cluster-ladder", "Succeeded", "1/1", "3/3", "6", "0s"]


def test_every_stage_records_the_masters_figures_and_the_redis_peak(ladder, real_stage):
    stages = ladder["status"]["variants"][0]["stages"]
    assert [s["injectors"] for s in stages] == [2, 4, 6]
    for number, stage in enumerate(stages, 1):
        assert stage["latencyMs"] == real_stage.summary["latencyMs"]
        assert stage["requests"] == real_stage.summary["requests"]
        post = real_stage.summary["byMethod"]["POST"]
        assert stage["byMethod"]["POST"] == {"requests": post["requests"], "failures": post["failures"],
                                             "meanMs": post["meanMs"], "p99Ms": post["latencyMs"]["p99"]}
        assert stage["redisPeakConnections"] == 3 * number
        assert stage["verdict"]["passed"] is True
    assert ladder["status"]["variants"][0]["capacity"]["injectors"] == 6


def test_the_status_ends_with_conditions_kubectl_wait_and_events_understand(ladder, real_stage):
    assert ladder["waited"].returncode == 0, ladder["waited"].stderr
    status = ladder["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Succeeded"]["status"] == "True" and conditions["Failed"]["status"] == "False"
    assert conditions["TargetReady"]["status"] == "True" and conditions["Running"]["status"] == "False"
    assert status["observedGeneration"] == 1
    progress = status["progress"]
    assert {k: progress[k] for k in ("variant", "stage", "injectors")} == {"variant": "1/1", "stage": "3/3",
                                                                           "injectors": 6}
    assert (progress["remainingSeconds"], progress["remaining"]) == (0, "0s")
    assert progress["elapsedSeconds"] > 0 and progress["eta"] <= status["finishedAt"]
    assert not progress.keys() - {"variant", "stage", "injectors", "elapsedSeconds", "remainingSeconds",
                                  "remaining", "eta"}
    assert status["latest"] == {"redisPeakConnections": 9, "p99Ms": round(real_stage.summary["latencyMs"]["p99"], 1)}
    for reason in ("Deploying", "TargetReady", "StageStarted", "StageFinished", "Succeeded"):
        assert reason in ladder["events"]


def test_artifacts_are_kept_in_owned_configmaps_and_the_aggregate_comes_from_them(ladder, real_stage):
    for kept in ladder["results"]:
        assert kept.metadata.owner_references[0].uid == ladder["uid"]
        assert json.loads(kept.data["artifact.json"])["histogram"] == real_stage.artifact["histogram"]
    status = ladder["status"]
    aggregate = status["variants"][0]["aggregate"]
    assert aggregate["requests"] == 3 * real_stage.summary["requests"] == aggregate["latencyMs"]["n"]
    p99 = real_stage.summary["latencyMs"]["p99"]
    assert status["p99ByStage"] == [{"stage": n, "injectors": 2 * n, "users": 50 * n, "p99MsByVariant": [p99]}
                                    for n in (1, 2, 3)]   # users too: the schema once pruned them
    assert aggregate["latencyMs"]["p99"] == p99  # the same stage three times


def test_artifacts_and_report_read_the_resource_and_its_configmaps(ladder):
    namespace, env, work = ladder["namespace"], ladder["env"], ladder["work"]
    exported = subprocess.run([sys.executable, "-m", "loadstage.cli", "artifacts", "lx/cluster-ladder", "-n",
                               namespace, "-o", str(work / "exported")], capture_output=True, text=True, env=env)
    assert exported.returncode == 0, exported.stderr
    assert [line.split(":")[0] for line in exported.stdout.splitlines()] == [
        "variant 1 stage 1", "variant 1 stage 2", "variant 1 stage 3"]
    report = subprocess.run([sys.executable, "-m", "loadstage.cli", "report", "lx/cluster-ladder", "-n", namespace],
                            capture_output=True, text=True, env=env)
    assert report.returncode == 0 and "Per variant, over all its stages:" in report.stdout, report.stderr
    missing = subprocess.run([sys.executable, "-m", "loadstage.cli", "report", "lx/no-such", "-n", namespace],
                             capture_output=True, text=True, env=env)
    assert missing.returncode == 2 and f"error: lx/no-such: not found in namespace {namespace}" in missing.stderr
    page = work / "cluster-ladder.html"
    html = subprocess.run([sys.executable, "-m", "loadstage.cli", "report", "lx/cluster-ladder", "-n", namespace,
                           "-o", page], capture_output=True, text=True, env=env)
    assert html.returncode == 0, html.stderr
    for number in (1, 2, 3):   # every stage's time series, read from its ConfigMap
        assert f'id="series-v1-data-s{number}-p99"' in page.read_text()


def test_report_follow_printed_the_table_as_each_stage_finished(ladder):
    assert ladder["follow_code"] == 0, ladder["follow"].tail()
    counts = [int(n) for n in re.findall(r"^== \d\d:\d\d:\d\d \w+: (\d) of 3 stage\(s\) finished ==$",
                                         ladder["followed"], re.M)]
    assert counts[-1] == 3 and counts == sorted(counts) and {1, 2} <= set(counts), ladder["followed"]


def test_cleanup_deletes_every_child_once_the_experiment_has_ended(cluster, ladder):
    wait_for(lambda: not [c for c in children(cluster, ladder["namespace"], "cluster-ladder")
                          if c.metadata.deletion_timestamp is None], timeout=30)


def test_matrix_runs_each_variant_in_order_reconfiguring_the_runner(cluster, namespace, operator,
                                                                     real_stage):
    operator()
    doc = example("studies/ons-threads-at-scale")
    doc["spec"]["target"]["pods"] = 5
    doc["spec"]["matrix"] = {"threads": [2, 7], "cpu": ["500m"]}
    doc["spec"]["stages"] = doc["spec"]["stages"][:2]
    assert apply(cluster, namespace, doc).returncode == 0
    seen_threads = []
    for variant, _threads in enumerate([2, 7], 1):
        for number, injectors in enumerate([10, 15], 1):
            run = f"v{variant}-s{number}"
            running_pods_of_job(cluster, namespace, f"threads-at-scale-{run}-master")
            runner = cluster.apps.read_namespaced_deployment("threads-at-scale-runner", namespace)
            args = runner.spec.template.spec.containers[0].args
            seen_threads.append(args[args.index("--threads") + 1])
            # the matrix's cpu is the request and the limit; every other pod gets the operator's requests
            resources = runner.spec.template.spec.containers[0].resources
            assert (resources.requests, resources.limits) == ({"cpu": "500m", "memory": "128Mi"}, {"cpu": "500m"})
            for pod in cluster.core.list_namespaced_pod(namespace).items:
                assert pod.status.qos_class in ("Burstable", "Guaranteed"), pod.metadata.name
            play_stage(cluster, namespace, "threads-at-scale", run, injectors, real_stage)
            wait_for(lambda v=variant, n=number: stages_done(cluster, namespace, "threads-at-scale", v - 1) == n)
    wait_phase(cluster, namespace, "threads-at-scale", "Succeeded")
    assert seen_threads == ["2", "2", "7", "7"]
    variants = cluster.status(namespace, "threads-at-scale")["variants"]
    assert [v["settings"]["threads"] for v in variants] == [2, 7]
    assert variants[0]["stages"][-1]["finishedAt"] <= variants[1]["stages"][0]["startedAt"]


def test_interleaved_repeats_alternate_the_runners_settings_and_keep_each_repeats_results(
        cluster, namespace, operator, real_stage, tmp_path):
    operator()
    doc = example("studies/ons-threads-at-scale")
    doc["spec"].update(matrix={"threads": [2, 7]}, stages=doc["spec"]["stages"][:1], repeats=2, order="Interleaved")
    doc["spec"]["target"]["pods"] = 5   # the study's 50 runner pods: a rollout each variant, and nothing more shown
    assert apply(cluster, namespace, doc).returncode == 0
    seen_threads = []
    for run in ("v1-s1", "v2-s1", "v1-r2-s1", "v2-r2-s1"):
        running_pods_of_job(cluster, namespace, f"threads-at-scale-{run}-master")
        args = cluster.apps.read_namespaced_deployment("threads-at-scale-runner", namespace) \
            .spec.template.spec.containers[0].args
        seen_threads.append(args[args.index("--threads") + 1])
        play_stage(cluster, namespace, "threads-at-scale", run, 10, real_stage)
    wait_phase(cluster, namespace, "threads-at-scale", "Succeeded")
    assert seen_threads == ["2", "7", "2", "7"]
    status = cluster.status(namespace, "threads-at-scale")
    requests = real_stage.summary["requests"]
    for variant in status["variants"]:
        (stage,) = variant["stages"]
        assert stage["repeats"] == 2 and stage["requests"] == 2 * requests == stage["latencyMs"]["n"]
        assert [r["stages"][0]["requests"] for r in variant["repeats"]] == [requests, requests]
        assert stage["intervals"]["method"] == "bootstrap"    # two repeats: too few for their own spread
    kept = {cm.metadata.name for cm in cluster.core.list_namespaced_config_map(namespace).items}
    assert {f"threads-at-scale-{run}-results" for run in ("v1-s1", "v2-s1", "v1-r2-s1", "v2-r2-s1")} <= kept
    exported = subprocess.run([sys.executable, "-m", "loadstage.cli", "artifacts", "lx/threads-at-scale", "-n",
                               namespace, "-o", str(tmp_path / "exported")], capture_output=True,
                              text=True, env={**os.environ, "KUBECONFIG": cluster.kubeconfig})
    assert exported.returncode == 0, exported.stderr
    assert [line.split(":")[0] for line in exported.stdout.splitlines()] == [
        "variant 1 stage 1", "variant 1 repeat 2 stage 1", "variant 2 stage 1", "variant 2 repeat 2 stage 1"]


def test_a_random_order_without_a_seed_keeps_the_seed_it_picked_and_runs_in_its_order(cluster, namespace, operator,
                                                                                       real_stage):
    from loadstage.engine.steps import plan
    operator()
    doc = example("studies/ons-threads-at-scale")
    doc["spec"].update(matrix={"threads": [2, 7]}, stages=doc["spec"]["stages"][:1], repeats=2, order="Random")
    doc["spec"]["target"]["pods"] = 5   # the study's 50 runner pods: a rollout each variant, and nothing more shown
    assert apply(cluster, namespace, doc).returncode == 0
    wait_for(lambda: "seed" in cluster.status(namespace, "threads-at-scale"))   # kept: the schema declares it
    seed = cluster.status(namespace, "threads-at-scale")["seed"]
    for step in plan(parse_experiment(doc), seed):
        play_stage(cluster, namespace, "threads-at-scale", step.run_id, 10, real_stage)
    wait_phase(cluster, namespace, "threads-at-scale", "Succeeded")
    assert cluster.status(namespace, "threads-at-scale")["seed"] == seed


def test_operator_killed_mid_stage_resumes_without_losing_or_repeating_a_stage(cluster, namespace, operator,
                                                                               real_stage):
    first = operator()
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:2]
    assert apply(cluster, namespace, doc).returncode == 0
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_for(lambda: stages_done(cluster, namespace, "cluster-ladder") == 1)
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s2-master")
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s2-workers", 4)
    jobs_before = {j.metadata.name: j.metadata.uid for j in cluster.batch.list_namespaced_job(namespace).items}
    first.kill(signal.SIGKILL)
    restart_while_no_operator_watches(cluster, namespace)
    operator()
    wait_for(lambda: "StageResumed" in event_reasons(cluster, namespace, "cluster-ladder"))
    jobs_after = {j.metadata.name: j.metadata.uid for j in cluster.batch.list_namespaced_job(namespace).items}
    assert jobs_after == jobs_before
    assert jobs_before.keys() == {"cluster-ladder-v1-s1-master", "cluster-ladder-v1-s1-workers",
                                  "cluster-ladder-v1-s2-master", "cluster-ladder-v1-s2-workers"}
    play_stage(cluster, namespace, "cluster-ladder", "v1-s2", 4, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    variant = cluster.status(namespace, "cluster-ladder")["variants"][0]
    stages = variant["stages"]
    assert [s["stage"] for s in stages] == [1, 2]
    assert event_reasons(cluster, namespace, "cluster-ladder").count("StageFinished") == 2
    # stage 1's histograms came back from its ConfigMap after the restart: the aggregate has both stages
    assert variant["aggregate"]["latencyMs"]["n"] == 2 * real_stage.summary["requests"]
    assert "redisPeakCovers" not in stages[0]
    assert stages[1]["redisPeakCovers"].endswith(
        "the operator resumed the stage (it restarted, or lost the API server)")
    assert not stages[0]["target"].get("restarts") and stages[1]["target"]["restarts"] == 1, stages[1]["target"]


def test_a_search_in_the_operator_steps_its_workers_up_and_resumes_after_a_restart_repeating_no_stage(
        cluster, namespace, operator, real_stage):
    """The stored stage (p99 52 ms, intervals from 10 one-second blocks) passes p99 <= 1s at any load, so the
    search doubles its injectors up to its ceiling: 1, 2, then 4, each stage's worker Job that wide."""
    first = operator()
    doc = document("search", {"search": {"load": "injectors", "from": 1, "max": 4, "duration": "30s"},
                              "slo": {"p99": "1s"}, "cleanup": "Keep"})
    assert apply(cluster, namespace, doc).returncode == 0
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 1, real_stage)
    wait_for(lambda: stages_done(cluster, namespace, "cluster-ladder") == 1)
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s2-workers", 2)
    status = cluster.status(namespace, "cluster-ladder")
    assert status["variants"][0]["search"]["reason"] == "Searching"
    assert status["progress"]["stage"] == "2" and status["progress"]["injectors"] == 2
    assert status["latest"]["bracket"].startswith(">= 1 injectors")
    table = cluster.kubectl("get", "lx", "-n", namespace).stdout
    assert "BRACKET" in table and ">= 1 injectors" in table, table
    first.kill(signal.SIGKILL)
    operator()
    play_stage(cluster, namespace, "cluster-ladder", "v1-s2", 2, real_stage)
    play_stage(cluster, namespace, "cluster-ladder", "v1-s3", 4, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    variant = cluster.status(namespace, "cluster-ladder")["variants"][0]
    assert [(s["stage"], s["injectors"], s["verdict"]["outcome"]) for s in variant["stages"]] == [
        (1, 1, "Pass"), (2, 2, "Pass"), (3, 4, "Pass")]
    search = variant["search"]
    assert (search["reason"], search["pass"], search.get("fail"), search["stages"]) == ("CeilingPassed", 4, None, 3)
    assert search["loadSeconds"] == 90
    jobs = sorted(j.metadata.name for j in cluster.batch.list_namespaced_job(namespace).items)
    assert jobs == [f"cluster-ladder-v1-s{n}-{kind}" for n in (1, 2, 3) for kind in ("master", "workers")]
    assert event_reasons(cluster, namespace, "cluster-ladder").count("StageFinished") == 3


def test_a_goal_in_the_operator_runs_the_cheapest_variants_first_and_resumes_after_a_restart(cluster, namespace,
                                                                                           operator, real_stage):
    """The stored stage (p99 52 ms) meets p99 <= 1s: the cheapest variant (2 pods of 250m) wins, confirmed by a
    second stage, the next cheapest is its runner-up, and the dearest is never run."""
    first = operator()
    doc = document("goal", {"matrix": {"cpu": ["1", "250m", "500m"]}, "slo": {"p99": "1s"},
                            "stageEnd": {"when": "Decided", "min": "8s", "max": "30s"}, "cleanup": "Keep"})
    assert apply(cluster, namespace, doc).returncode == 0
    play_stage(cluster, namespace, "cluster-ladder", "v2-s1", 2, real_stage)
    wait_for(lambda: stages_done(cluster, namespace, "cluster-ladder", variant=1) == 1)
    running_pods_of_job(cluster, namespace, "cluster-ladder-v3-s1-workers", 2)
    status = cluster.status(namespace, "cluster-ladder")
    assert status["recommendation"]["reason"] == "Searching" and status["latest"]["leader"] == "cpu=250m (0.5 cores)"
    table = cluster.kubectl("get", "lx", "-n", namespace).stdout
    assert "LEADER" in table and "cpu=250m (0.5 cores)" in table, table
    first.kill(signal.SIGKILL)
    operator()
    play_stage(cluster, namespace, "cluster-ladder", "v3-s1", 2, real_stage)
    play_stage(cluster, namespace, "cluster-ladder", "v2-s2", 2, real_stage)    # the winner's confirmation
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    status = cluster.status(namespace, "cluster-ladder")
    found = status["recommendation"]
    assert (found["reason"], found["variant"], found["runnerUp"]["variant"], found["order"]) == ("Found", 1, 2, [1, 2])
    assert found["winner"]["confirmed"] is True and len(status["variants"][1]["stages"]) == 2
    assert found["sentence"] == "cpu=250m meets p99 <= 1000ms at 2 injectors with 0.5 cores; the next cheapest, " \
                                "cpu=500m, needs 1 core"
    assert status["variants"][0]["dropped"]["after"] == 0 and not status["variants"][0]["stages"]
    jobs = sorted(j.metadata.name for j in cluster.batch.list_namespaced_job(namespace).items)
    assert jobs == sorted(f"cluster-ladder-{stage}-{kind}" for stage in ("v2-s1", "v2-s2", "v3-s1")
                          for kind in ("master", "workers"))
    assert event_reasons(cluster, namespace, "cluster-ladder").count("StageFinished") == 3
    # its export: the Deployment loadstage deployed for the winner, in a ConfigMap the experiment owns
    exported = wait_for(lambda: cluster.status(namespace, "cluster-ladder").get("export"))
    assert (exported["configMap"], exported["variant"], exported["files"]) == \
        ("cluster-ladder-recommendation", 1, ["deployment.yaml"]), exported
    assert exported["measuredAt"].startswith("stage 2 at 50 users: ") and "error" not in exported   # its confirmation
    configmap = cluster.core.read_namespaced_config_map("cluster-ladder-recommendation", namespace)
    assert [(o.kind, o.name) for o in configmap.metadata.owner_references] == [("LoadExperiment", "cluster-ladder")]
    text = configmap.data["deployment.yaml"]
    assert text.startswith("# loadstage export: lx/cluster-ladder, variant 2 (cpu=250m), recommended: "), text
    deployment = yaml.safe_load(text)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "250m"
    assert "Exported" in event_reasons(cluster, namespace, "cluster-ladder")


def play_stages(cluster, namespace, experiment, stage, until, timeout=120):
    """Plays each stage of `experiment` as it starts (its master and worker Jobs, as a kubelet would end them),
    until `until()`."""
    played = set()

    def next_one():
        if until():
            return True
        for job in cluster.batch.list_namespaced_job(
                namespace, label_selector=f"loadstage.io/experiment={experiment}").items:
            master = job.metadata.name
            if master.endswith("-master") and master not in played:
                workers = master.removesuffix("-master") + "-workers"
                try:   # the master Job is created first
                    injectors = cluster.batch.read_namespaced_job(workers, namespace).spec.parallelism
                except ApiException:
                    return False
                running_pods_of_job(cluster, namespace, master)
                running_pods_of_job(cluster, namespace, workers, injectors)
                finish_stage(cluster, namespace, master, workers, stage)
                played.add(master)
                return until()
        return False
    wait_for(next_one, timeout=timeout, interval=0.2)
    return played


def test_a_verification_of_an_export_that_was_refused_says_so_and_deploys_nothing(cluster, namespace, operator,
                                                                                  real_stage):
    """kwok measures no CPU (no metrics API): the pick's export cannot size an HPA, and spec.verify records why
    there is nothing to verify, with no copy of the target."""
    operator()
    doc = document(spec={"target.pods": 1, "goal": {"rps": 40}, "matrix": {"cpu": ["250m", "500m"]},
                         "slo": {"p99": "1s"}, "stageEnd": {"when": "Decided", "max": "30s"},
                         "injectors.maxRatePerInjector": 200, "autoscale": {"minLoad": 40, "maxLoad": 300},
                         "verify": True, "stages": None, "thresholds": None, "cleanup": "Keep"})
    assert apply(cluster, namespace, doc).returncode == 0
    play_stages(cluster, namespace, "cluster-ladder", real_stage,
                lambda: "verification" in cluster.status(namespace, "cluster-ladder"))
    final = cluster.status(namespace, "cluster-ladder")
    assert final["export"]["error"].endswith("has no measured rate and CPU to size an autoscaler from"), final
    refused = final["export"]["error"]
    assert final["verification"] == {"where": "Cluster", "result": "Undecided", "steps": [],
                                     "reason": f"nothing to verify: the export was refused ({refused})"}
    deployments = [d.metadata.name for d in cluster.apps.list_namespaced_deployment(namespace).items]
    assert not [d for d in deployments if "-vf-" in d], deployments
    assert "Verifying" not in event_reasons(cluster, namespace, "cluster-ladder")


def test_a_copys_hpa_without_a_metrics_api_cannot_scale_the_verification_reads_why_and_deletes_it(cluster,
                                                                                                 namespace):
    """The exported HPA, pointed at a copy's Deployment, on the kwok control plane's own HPA controller with no
    metrics API: ScalingActive False, read as the verification reads it; the copy's deletion takes the HPA."""
    from loadstage.api.status import RunStatus
    from loadstage.export import autoscaler, verification
    from loadstage.export.bundle import scaler_for
    from loadstage.export.choice import choose
    from loadstage.kube.autoscaled import not_scaling
    from loadstage.kube.children import delete_children
    result = json.loads((ROOT / "tests" / "data" / "results" / "goal.json").read_text())
    result["spec"].update({"verify": True, "autoscale": {"minLoad": 50, "maxLoad": 600}})
    experiment = parse_experiment({k: result[k] for k in ("apiVersion", "kind", "metadata", "spec")})
    status = RunStatus.read(result["status"])
    chosen = choose(experiment, status, None)
    hpa = autoscaler.hpa("goal-runner", scaler_for(experiment.spec.autoscale, status, chosen, "250m"), "lx/goal",
                         experiment.spec.autoscale)
    owner = cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, example("cluster-ladder"))
    planned = verification.in_cluster(experiment, owner["metadata"]["uid"], chosen.variant, hpa)
    copied = parse_experiment(planned.document)
    ref = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LoadExperiment", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"]}
    runner = planned.hpa["spec"]["scaleTargetRef"]["name"]
    labels = {"loadstage.io/experiment": copied.name, "loadstage.io/role": "runner"}
    cluster.apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": runner, "labels": labels, "ownerReferences": [ref]},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "runner", "image": "registry.example/runner:1",
                 "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "250m"}}}]}}}})
    api = config.new_client_from_config(config_file=cluster.kubeconfig)
    context = ExperimentContext(copied, namespace, api, owner_uid=owner["metadata"]["uid"],
                                adopt=lambda child: child["metadata"].setdefault("ownerReferences", [ref]),
                                stopped=False)
    assert asyncio.run(Children(context).create(planned.hpa)) is True
    said = wait_for(lambda: not_scaling(cluster.api_autoscaling().read_namespaced_horizontal_pod_autoscaler(
        f"{copied.name}-runner", namespace), datetime.datetime.now(datetime.UTC), autoscaler.SYNC_SECONDS),
        timeout=90, interval=1)
    assert said.startswith("ScalingActive False, FailedGetResourceMetric: "), said
    assert delete_children(api, namespace, copied.name) == 2      # the copy's Deployment and its HPA
    assert not cluster.api_autoscaling().list_namespaced_horizontal_pod_autoscaler(namespace).items
    assert not [d for d in cluster.apps.list_namespaced_deployment(namespace).items
                if d.metadata.deletion_timestamp is None]


def test_maximize_in_the_operator_searches_every_variant_and_picks_the_most_per_core(cluster, namespace, operator,
                                                                                  real_stage):
    """The stored stage passes p99 <= 1s at any load: each search passes up to its ceiling of 2 injectors, so the
    variant that costs less (2 pods of 250m against 2 of 500m) serves the most per core."""
    operator()
    doc = document(spec={"matrix": {"cpu": ["500m", "250m"]}, "goal": {"maximize": "capacityPerCore"},
                         "slo": {"p99": "1s"}, "search": {"load": "injectors", "from": 1, "max": 2, "duration": "30s"},
                         "cleanup": "Keep", "stages": None, "thresholds": None})
    assert apply(cluster, namespace, doc).returncode == 0
    for variant in (1, 2):
        play_stage(cluster, namespace, "cluster-ladder", f"v{variant}-s1", 1, real_stage)
        play_stage(cluster, namespace, "cluster-ladder", f"v{variant}-s2", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    status = cluster.status(namespace, "cluster-ladder")
    found = status["recommendation"]
    assert (found["reason"], found["variant"], found["runnerUp"]["variant"]) == ("Found", 1, 0), found
    rps = real_stage.summary["rps"]
    assert found["winner"]["perCore"] == [round(rps / 0.5, 1), None] and found["winner"]["cost"]["cores"] == 0.5
    assert [c["variant"] for c in found["front"]] == [1]
    assert [v["search"]["reason"] for v in status["variants"]] == ["CeilingPassed"] * 2
    assert event_reasons(cluster, namespace, "cluster-ladder").count("StageFinished") == 4


def restart_while_no_operator_watches(cluster, namespace):
    """Plays the kubelet: one runner container ends (OOMKilled) and is restarted now."""
    victim = pods(cluster, namespace, "loadstage.io/role=runner,loadstage.io/experiment=cluster-ladder")[0]
    cs = victim.status.container_statuses[0]
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cluster.core.patch_namespaced_pod_status(victim.metadata.name, namespace, {"status": {"containerStatuses": [{
        "name": cs.name, "image": cs.image, "imageID": "", "ready": True, "started": True,
        "restartCount": (cs.restart_count or 0) + 1, "state": {"running": {"startedAt": at}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": at, "finishedAt": at}}}]}})


def test_a_standby_operator_takes_over_mid_stage_within_30s_and_records_each_stage_once(cluster, namespace,
                                                                                       operator, real_stage):
    lease = ("--leader-elect", "--leader-elect-namespace", namespace)
    active = operator(extra=lease)
    wait_for(lambda: "leading as" in active.output())
    standby = operator(extra=lease)
    wait_for(lambda: "standby: Lease" in standby.output())
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:2]
    assert apply(cluster, namespace, doc).returncode == 0
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_for(lambda: stages_done(cluster, namespace, "cluster-ladder") == 1)
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s2-workers", 4)
    jobs_before = {j.metadata.name: j.metadata.uid for j in cluster.batch.list_namespaced_job(namespace).items}
    assert "leading as" not in standby.output()   # it never ran Kopf beside the leader
    active.kill(signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: "StageResumed" in event_reasons(cluster, namespace, "cluster-ladder"), timeout=60)
    took = time.monotonic() - killed
    print(f"standby took over in {took:.1f}s")
    assert took < 30 and "leading as" in standby.output()
    assert {j.metadata.name: j.metadata.uid for j in cluster.batch.list_namespaced_job(namespace).items} == jobs_before
    play_stage(cluster, namespace, "cluster-ladder", "v1-s2", 4, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    assert [s["stage"] for s in cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]] == [1, 2]
    assert event_reasons(cluster, namespace, "cluster-ladder").count("StageFinished") == 2


def test_a_leader_that_loses_its_lease_exits_at_once(cluster, namespace, operator):
    leader = operator(extra=("--leader-elect", "--leader-elect-namespace", namespace))
    wait_for(lambda: "leading as" in leader.output())
    coordination = client.CoordinationV1Api(cluster.api)
    lease = coordination.read_namespaced_lease("loadstage-operator", namespace)
    lease.spec.holder_identity = "someone-else"
    coordination.replace_namespaced_lease("loadstage-operator", namespace, lease)
    assert wait_for(lambda: leader.process.poll() is not None, timeout=15)
    assert leader.process.returncode == 1
    assert "lost the Lease (another operator holds the Lease)" in leader.output()


BIG_STAGE = 250   # benchmarks/operator_scale.py runs 1,000, the most the CRD allows


def test_a_stage_of_hundreds_of_injectors_starts_every_worker_and_is_recorded(cluster, namespace, operator,
                                                                                real_stage):
    op = operator()
    figures = one_big_stage(cluster, namespace, real_stage, BIG_STAGE)
    print(f"\n{figures.line()}")
    assert figures.parallelism == figures.completions == BIG_STAGE
    users = BIG_STAGE * example("cluster-ladder")["spec"]["injectors"]["usersPerInjector"]
    assert figures.stage["injectors"] == BIG_STAGE and figures.stage["users"] == users
    log = op.output()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


AT_ONCE = 30   # benchmarks/operator_scale.py runs 300
# the operator's pools: its API calls', asyncio's to_thread (min(32, CPUs + 4)), and two of Kopf's own
THREADS_BOUND = API_THREADS + min(32, (os.cpu_count() or 1) + 4) + 2


def test_many_experiments_at_once_all_progress_without_a_thread_each(cluster, namespace, operator, real_stage):
    """The status writer and the watches at scale: every experiment reaches Running and then Succeeded, and the
    operator's threads stay within its pools, under one per experiment."""
    op = operator()
    figures = many_at_once(cluster, namespace, op.process.pid, real_stage, AT_ONCE)
    print(f"\n{figures.line()}")
    assert figures.threads <= THREADS_BOUND < AT_ONCE, f"{figures.threads} threads for {AT_ONCE} running experiments"
    (stage,) = figures.last_status["variants"][0]["stages"]
    assert stage["requests"] == real_stage.summary["requests"]
    log = op.output()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


def test_deleting_mid_stage_stops_the_load_and_removes_every_child(cluster, namespace, operator):
    op = operator()
    assert apply(cluster, namespace, example("cluster-ladder")).returncode == 0
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-workers", 2)
    assert len(children(cluster, namespace, "cluster-ladder")) >= 10
    deleted = cluster.kubectl("delete", "-n", namespace, "lx/cluster-ladder", "--timeout=60s")
    assert deleted.returncode == 0, deleted.stderr
    wait_for(lambda: not children(cluster, namespace, "cluster-ladder"), timeout=60)
    wait_for(lambda: "stopped: " in op.output(), timeout=30)   # the daemon has seen the deletion and ended
    log = op.output()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


def test_an_old_master_job_held_in_deletion_is_waited_for_and_never_adopted(cluster, namespace, operator,
                                                                           real_stage):
    operator()
    stale = "cluster-ladder-v1-s1-master"
    old_owner = {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "name": "cluster-ladder",
                 "uid": str(uuid.uuid4())}
    cluster.batch.create_namespaced_job(namespace, {
        "metadata": {"name": stale, "finalizers": ["loadstage.io/test-hold"], "ownerReferences": [old_owner]},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                        "containers": [{"name": "old", "image": "old:1"}]}}}})
    cluster.batch.delete_namespaced_job(stale, namespace)
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]
    assert apply(cluster, namespace, doc).returncode == 0
    wait_for(lambda: f"waiting for Job {stale} of an earlier LoadExperiment" in
             cluster.status(namespace, "cluster-ladder").get("message", ""))
    assert "being deleted" in cluster.status(namespace, "cluster-ladder")["message"]
    looked = api_requests(cluster, "jobs", "GET")
    wait_for(lambda: api_requests(cluster, "jobs", "GET") >= looked + 2)   # the operator has read it twice more
    job = cluster.batch.read_namespaced_job(stale, namespace)
    assert job.metadata.owner_references[0].uid == old_owner["uid"]
    assert "StageResumed" not in event_reasons(cluster, namespace, "cluster-ladder")
    cluster.batch.patch_namespaced_job(stale, namespace, {"metadata": {"finalizers": None}})
    uid = cluster.lx(namespace, "cluster-ladder")["metadata"]["uid"]
    wait_for(lambda: [r.uid for j in cluster.batch.list_namespaced_job(namespace).items if j.metadata.name == stale
                      for r in j.metadata.owner_references] == [uid])
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    assert cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"][0]["requests"] == \
        real_stage.summary["requests"]


OPERATOR_USER = "lstest-operator"   # may not finalize everything, like the chart's ServiceAccount


def as_operator_user(cluster, namespace):
    cluster.kubectl("create", "role", "-n", namespace, "children", "--verb=create,get",
                    "--resource=configmaps", check=True)
    cluster.kubectl("create", "role", "-n", namespace, "owners", "--verb=update",
                    "--resource=configmaps/finalizers,*.scratch.loadstage.io/finalizers", check=True)
    for role in ("children", "owners"):
        cluster.kubectl("create", "rolebinding", "-n", namespace, role, f"--role={role}",
                        f"--user={OPERATOR_USER}", check=True)
    api = config.new_client_from_config(config_file=cluster.kubeconfig)
    api.set_default_header("Impersonate-User", OPERATOR_USER)
    return api


def blocking_child(name, owner):
    reference = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
                 "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"},
            "metadata": {"name": name, "ownerReferences": [reference]}}


def unmapped_kind(cluster, namespace, core):
    """An owner whose kind was installed a moment ago, after the API server's admission last mapped kinds
    (it does so every 30 s): until the next time, an owner reference that blocks deletion is refused."""
    anchor = cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "anchor"}})
    anchor = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "anchor", "uid": anchor.metadata.uid}}
    for attempt in range(3):   # a remap may fall between the two requests; 1 s in 30
        core.create_namespaced_config_map(namespace, blocking_child(f"maps-kinds-now-{attempt}", anchor))
        kind = f"Scratch{uuid.uuid4().hex[:8]}"
        plural = kind.lower() + "s"
        cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.scratch.loadstage.io", "labels": {"loadstage.io/test": "scratch"}},
            "spec": {"group": "scratch.loadstage.io", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}))
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{plural}.scratch.loadstage.io", check=True)
        owner = cluster.custom.create_namespaced_custom_object(
            "scratch.loadstage.io", "v1", namespace, plural,
            {"apiVersion": "scratch.loadstage.io/v1", "kind": kind, "metadata": {"name": "owner"}})
        try:
            core.create_namespaced_config_map(namespace, blocking_child(f"probe-{attempt}", owner))
        except ApiException as refused:
            assert refused.status == 403 and "cannot find RESTMapping" in refused.body, refused.body
            return owner
    raise AssertionError("the API server mapped a new kind at once, three times")


def test_a_child_of_a_kind_installed_moments_ago_is_created_once_the_api_server_maps_it(cluster, namespace):
    """`helm install` and at once `kubectl apply`: the operator waits for the API server to map the new kind,
    with a message, instead of failing its daemon (an ERROR in its log)."""
    api = as_operator_user(cluster, namespace)
    try:
        owner = unmapped_kind(cluster, namespace, client.CoreV1Api(api))
        messages, events = [], []

        async def on_message(message):
            messages.append(message)
        child = blocking_child("through-the-backend", owner)
        context = ExperimentContext(
            parse_experiment(example("cluster-ladder")), namespace, api, owner_uid=owner["metadata"]["uid"],
            adopt=lambda manifest: None, stopped=False, on_event=lambda reason, message: events.append(reason),
            on_message=on_message)
        started = time.monotonic()
        assert asyncio.run(Children(context).create(child)) is True
        waited = time.monotonic() - started
        created = cluster.core.read_namespaced_config_map("through-the-backend", namespace)
        assert [r.uid for r in created.metadata.owner_references] == [owner["metadata"]["uid"]]
        assert 0 < waited < 45, waited
        assert events == ["WaitingForApiServer"]
        assert messages == [f"waiting for the API server to map kind {owner['kind']} (scratch.loadstage.io/v1) "
                            "for owner references: its CRD was installed moments ago"], messages
    finally:
        cluster.kubectl("delete", "crd", "-l", "loadstage.io/test=scratch", "--wait=false")


def test_a_foreign_object_with_a_child_name_fails_the_experiment_naming_it(cluster, namespace, operator):
    operator()
    cluster.core.create_namespaced_service(namespace, {"metadata": {"name": "cluster-ladder-runner"}, "spec": {
        "ports": [{"port": 80}], "selector": {"app": "someone-else"}}})
    assert apply(cluster, namespace, example("cluster-ladder")).returncode == 0
    wait_phase(cluster, namespace, "cluster-ladder", "Failed")
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "ChildConflict"
    assert status["message"].startswith("Service cluster-ladder-runner already exists and is not this experiment's")
    assert cluster.core.read_namespaced_service("cluster-ladder-runner", namespace).spec.selector == \
        {"app": "someone-else"}


def one_stage_ladder(**injectors):
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]
    doc["spec"]["injectors"].update(injectors)
    return doc


def failed_within(cluster, namespace, name, seconds):
    started = time.monotonic()
    wait_phase(cluster, namespace, name, "Failed", timeout=seconds)
    return time.monotonic() - started


def test_a_worker_pod_deleted_with_no_retry_left_fails_the_stage_naming_it(cluster, namespace, operator):
    operator()
    doc = one_stage_ladder()
    doc["spec"]["stageRetries"] = 0
    assert apply(cluster, namespace, doc).returncode == 0
    # deleted the moment it exists: most often before the operator, still making the stage's other children,
    # first looks at the stage's pods, and replaced by its Job before it does
    found = wait_for(lambda: pods(cluster, namespace, "job-name=cluster-ladder-v1-s1-workers"), interval=0.02)
    victim = found[0].metadata.name
    cluster.core.delete_namespaced_pod(victim, namespace, grace_period_seconds=0)
    assert failed_within(cluster, namespace, "cluster-ladder", 30) < 30
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "StageDisrupted"
    assert status["message"].endswith(f"stage 1/1: injector pod {victim} was deleted; no retry left "
                                      f"(spec.stageRetries: 0)")


def budget_of(cluster, namespace, run):
    found = cluster.policy.list_namespaced_pod_disruption_budget(
        namespace, label_selector=f"loadstage.io/run={run}").items
    return found[0] if found else None


def test_a_stage_whose_master_is_deleted_runs_again_and_records_both_attempts(cluster, namespace, operator,
                                                                             real_stage):
    operator()
    doc = one_stage_ladder()
    doc["spec"]["stages"] = [{"injectors": 2, "duration": "30s"}] * 2
    assert apply(cluster, namespace, doc).returncode == 0
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s2-workers", 2)
    budget = wait_for(lambda: budget_of(cluster, namespace, "v1-s2"))    # made just after the Jobs
    assert budget.spec.max_unavailable == 0
    assert budget.spec.selector.match_labels == {"loadstage.io/experiment": "cluster-ladder",
                                                 "loadstage.io/run": "v1-s2"}
    (master,) = pods(cluster, namespace, "job-name=cluster-ladder-v1-s2-master")
    cluster.core.delete_namespaced_pod(master.metadata.name, namespace)

    play_stage(cluster, namespace, "cluster-ladder", "v1-s2-a2", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    first, second = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert "attempts" not in first
    assert second["attempts"] == 2
    (retry,) = second["retries"]
    assert retry["attempt"] == 1 and retry["cause"] == f"the Locust master pod {master.metadata.name} was deleted"
    assert second["requests"] == real_stage.summary["requests"]
    assert "StageDisrupted" in event_reasons(cluster, namespace, "cluster-ladder")
    jobs = {j.metadata.name for j in cluster.batch.list_namespaced_job(namespace).items}
    assert not jobs & {"cluster-ladder-v1-s2-master", "cluster-ladder-v1-s2-workers"}, jobs
    assert budget_of(cluster, namespace, "v1-s2") is None and budget_of(cluster, namespace, "v1-s2-a2") is None


def test_a_finished_master_deleted_while_no_operator_ran_is_retried_within_60s(cluster, namespace, operator,
                                                                              real_stage):
    first = operator()
    assert apply(cluster, namespace, one_stage_ladder()).returncode == 0
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-master")
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-workers", 2)
    first.kill(signal.SIGKILL)
    finish_stage(cluster, namespace, "cluster-ladder-v1-s1-master", "cluster-ladder-v1-s1-workers", real_stage)
    wait_for(lambda: cluster.batch.read_namespaced_job_status(
        "cluster-ladder-v1-s1-master", namespace).status.succeeded == 1)
    (master,) = pods(cluster, namespace, "job-name=cluster-ladder-v1-s1-master")
    cluster.core.delete_namespaced_pod(master.metadata.name, namespace, grace_period_seconds=0)
    wait_for(lambda: not pods(cluster, namespace, "job-name=cluster-ladder-v1-s1-master"))
    operator()
    started = time.monotonic()
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-a2-master", timeout=60)
    assert time.monotonic() - started < 60
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1-a2", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    (stage,) = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert stage["attempts"] == 2
    assert stage["retries"][0]["cause"] == ("the Locust master pod of Job cluster-ladder-v1-s1-master finished, "
                                            "but was deleted before its result was read")


def test_a_runner_pod_that_restarts_and_drops_out_mid_stage_is_recorded_and_flagged(cluster, namespace, operator,
                                                                                    real_stage):
    """The test plays the kubelet of a runner pod: its container restarted twice (OOMKilled), and the pod was
    not ready for a while."""
    operator()
    assert apply(cluster, namespace, one_stage_ladder()).returncode == 0
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-workers", 2)
    victim, steady = pods(cluster, namespace, "loadstage.io/role=runner,loadstage.io/experiment=cluster-ladder")
    cs = victim.status.container_statuses[0]
    restarted = {"name": cs.name, "image": cs.image, "imageID": "", "ready": False, "restartCount": 2,
                 "started": True, "state": {"running": {"startedAt": "2026-11-23T10:00:00Z"}},
                 "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                              "startedAt": "2026-11-23T09:59:00Z",
                                              "finishedAt": "2026-11-23T10:00:00Z"}}}
    unready = [{"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "False"}]
    cluster.core.patch_namespaced_pod_status(victim.metadata.name, namespace, {"status": {
        "conditions": unready, "containerStatuses": [restarted]}})
    time.sleep(3)
    cluster.core.patch_namespaced_pod_status(victim.metadata.name, namespace, {"status": {
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}],
        "containerStatuses": [{**restarted, "ready": True}]}})
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    (stage,) = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    target = stage["target"]
    assert target["restarts"] == 2 and target.get("servedRequests") is None   # a count across a restart
    (pod,) = target["pods"]
    assert pod["pod"] == victim.metadata.name and pod["causes"] == ["OOMKilled (exit 137)"]
    assert 2.5 <= pod["unreadySeconds"] <= 6, pod
    assert target["unreadySeconds"] == pod["unreadySeconds"]
    assert steady.metadata.name not in json.dumps(target)
    assert cluster.status(namespace, "cluster-ladder")["variants"][0].get("capacity") is None
    report = subprocess.run([sys.executable, "-m", "loadstage.cli", "report", "lx/cluster-ladder", "-n", namespace],
                            capture_output=True, text=True, env={**os.environ, "KUBECONFIG": cluster.kubeconfig})
    assert "2†" in report.stdout and "† the target was not steady" in report.stdout, report


def test_a_redis_pod_that_restarts_mid_stage_runs_the_stage_again_naming_redis(cluster, namespace, operator,
                                                                              real_stage):
    """Plays the kubelet of the Redis pod loadstage deployed: its container restarted mid-stage (OOMKilled), so
    the app lost its Redis. Issue 35: such a stage counted as any other."""
    operator()
    doc = one_stage_ladder()
    doc["spec"]["stageRetries"] = 1
    assert apply(cluster, namespace, doc).returncode == 0
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-workers", 2)
    (lost,) = pods(cluster, namespace, "loadstage.io/role=redis,loadstage.io/experiment=cluster-ladder")
    cs = lost.status.container_statuses[0]
    cluster.core.patch_namespaced_pod_status(lost.metadata.name, namespace, {"status": {"containerStatuses": [{
        "name": cs.name, "image": cs.image, "imageID": "", "ready": True, "started": True, "restartCount": 1,
        "state": {"running": {"startedAt": "2026-11-26T10:00:00Z"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-11-26T09:59:00Z",
                                     "finishedAt": "2026-11-26T10:00:00Z"}}}]}})
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)       # its figures are not kept
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1-a2", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    (stage,) = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert stage["attempts"] == 2 and stage["requests"] == real_stage.summary["requests"]
    assert stage["retries"][0]["reason"] == "RedisLost"
    assert stage["retries"][0]["cause"] == f"the Redis pod {lost.metadata.name}: 1 restart(s), OOMKilled (exit 137)"


def test_a_resource_quota_that_refuses_the_injectors_fails_the_experiment_within_60s_naming_it(cluster, namespace,
                                                                                             operator):
    cluster.core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "four-pods"},
                                                              "spec": {"hard": {"pods": "4"}}})
    wait_for(lambda: cluster.core.read_namespaced_resource_quota("four-pods", namespace).status.hard)
    operator()
    assert apply(cluster, namespace, one_stage_ladder()).returncode == 0   # redis, 2 runners, master: 4 pods
    master = wait_for(lambda: cluster.batch.list_namespaced_job(
        namespace, label_selector="app.kubernetes.io/component=locust-master").items, timeout=60)[0]
    stage_started = master.metadata.creation_timestamp.timestamp()
    wait_phase(cluster, namespace, "cluster-ladder", "Failed", timeout=90)
    took = time.time() - stage_started
    status = cluster.status(namespace, "cluster-ladder")
    print(f"\nquota refusal: Failed {took:.0f}s after the stage's Jobs were created")
    assert took <= 60
    assert status["reason"] == "PodsRefused"
    # the quota admits whichever of the stage's two Jobs' pods comes first: the other one is refused
    assert re.match(r"variant 1/1 \(gunicorn pods=2 workers=2 threads=2 gthread\), stage 1/1: Job "
                    r"cluster-ladder-v1-s1-(master|workers) cannot create its pods: ", status["message"]), status
    assert "exceeded quota: four-pods" in status["message"], status


def test_a_resource_quota_that_refuses_the_target_fails_the_experiment_naming_it(cluster, namespace, operator):
    cluster.core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "two-pods"},
                                                              "spec": {"hard": {"pods": "2"}}})
    wait_for(lambda: cluster.core.read_namespaced_resource_quota("two-pods", namespace).status.hard)
    operator()
    started = time.monotonic()
    assert apply(cluster, namespace, one_stage_ladder()).returncode == 0   # redis and 2 runners: 3 pods
    wait_phase(cluster, namespace, "cluster-ladder", "Failed", timeout=90)
    assert time.monotonic() - started < 60
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "PodsRefused"
    assert re.fullmatch(r"the target: ReplicaSet cluster-ladder-(runner|redis)-\w+ cannot create its pods: .*"
                        r"exceeded quota: two-pods.*", status["message"]), status["message"]


def test_an_unschedulable_injector_fails_after_spec_scheduling_timeout_with_the_schedulers_reason(
        cluster, namespace, operator):
    operator()
    doc = one_stage_ladder(resources={"requests": {"cpu": "64"}, "limits": {"cpu": "64"}})   # kwok nodes have 32
    doc["spec"]["schedulingTimeout"] = "5s"
    assert apply(cluster, namespace, doc).returncode == 0
    wait_phase(cluster, namespace, "cluster-ladder", "Failed", timeout=60)
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "Unschedulable"
    assert re.search(r"stage 1/1: pod cluster-ladder-v1-s1-workers-\w+ found no node in 5s "
                     r"\(spec.schedulingTimeout\): 0/\d+ nodes are available: .*Insufficient cpu", status["message"]), \
        status["message"]


def test_with_on_lost_continue_the_stage_finishes_and_records_the_lost_injector(cluster, namespace, operator,
                                                                              real_stage):
    operator()
    assert apply(cluster, namespace, one_stage_ladder(onLost="Continue")).returncode == 0
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-workers", 2)
    victim = pods(cluster, namespace, "job-name=cluster-ladder-v1-s1-workers")[0].metadata.name
    cluster.core.delete_namespaced_pod(victim, namespace)
    wait_for(lambda: "InjectorLost" in event_reasons(cluster, namespace, "cluster-ladder"))
    assert cluster.status(namespace, "cluster-ladder")["phase"] == "Running"
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    (stage,) = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert stage["lostInjectors"]["count"] == 1
    (lost,) = stage["lostInjectors"]["injectors"]
    assert lost["injector"] == victim and lost["cause"] == "was deleted" and lost["at"] <= stage["finishedAt"]


def test_an_app_of_your_own_runs_with_its_probes_and_no_redis(cluster, namespace, operator, real_stage):
    operator()
    doc = one_stage_ladder()
    doc["spec"]["target"] = {"app": "httpbin:app", "image": "example.org/httpbin:1", "pods": 2,
                             "readinessProbe": {"httpGet": {"path": "/status/200"}, "failureThreshold": 6},
                             "metrics": {"path": "/prometheus", "counter": "flask_http_request_total"}}
    doc["spec"]["redis"] = {"deploy": False}
    assert apply(cluster, namespace, doc).returncode == 0
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-master")
    (container,) = cluster.apps.read_namespaced_deployment(
        "cluster-ladder-runner", namespace).spec.template.spec.containers
    assert container.image == "example.org/httpbin:1"
    assert (container.readiness_probe.http_get.path, container.readiness_probe.http_get.port) == ("/status/200", "http")
    assert container.readiness_probe.failure_threshold == 6 and container.liveness_probe is None
    assert not {e.name for e in container.env or []} & {"REDIS_URL", "PROMETHEUS_MULTIPROC_DIR"}
    assert [d.metadata.name for d in cluster.apps.list_namespaced_deployment(namespace).items] == [
        "cluster-ladder-runner"]                      # no Redis deployed
    master = cluster.batch.read_namespaced_job("cluster-ladder-v1-s1-master", namespace)
    args = master.spec.template.spec.containers[0].args
    assert args[args.index("--target-counter") + 1] == "flask_http_request_total"
    urls = args[args.index("--target-metrics") + 1].split(",")
    assert len(urls) == 2 and all(url.endswith(":8000/prometheus") for url in urls), urls
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    (stage,) = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert stage.get("redisPeakConnections") is None   # the API server drops a null
    assert stage["requests"] == real_stage.summary["requests"]


def test_the_api_server_refuses_a_probe_with_two_handlers_and_the_runner_app_without_redis(cluster, namespace):
    doc = one_stage_ladder()
    doc["spec"]["target"]["readinessProbe"] = {"httpGet": {"path": "/ok"}, "tcpSocket": {"port": 80}}
    refused = apply(cluster, namespace, doc)
    assert refused.returncode != 0 and "set exactly one of httpGet, tcpSocket or exec" in refused.stderr
    doc = one_stage_ladder()
    doc["spec"]["redis"] = {"deploy": False}
    refused = apply(cluster, namespace, doc)
    assert refused.returncode != 0 and "the bundled runner app keeps its sessions in Redis" in refused.stderr


def test_an_injector_lost_before_an_operator_restart_is_still_recorded_once(cluster, namespace, operator,
                                                                          real_stage):
    first = operator()
    assert apply(cluster, namespace, one_stage_ladder(onLost="Continue")).returncode == 0
    workers = "cluster-ladder-v1-s1-workers"
    running_pods_of_job(cluster, namespace, workers, 2)
    victim = pods(cluster, namespace, f"job-name={workers}")[0].metadata.name
    cluster.core.delete_namespaced_pod(victim, namespace)
    # kept on the stage's worker Job, where `kubectl describe job` shows it
    wait_for(lambda: victim in (cluster.batch.read_namespaced_job(workers, namespace).metadata.annotations or {})
             .get("loadstage.io/lost-injectors", ""))
    first.kill(signal.SIGKILL)
    restart_while_no_operator_watches(cluster, namespace)
    operator()
    wait_for(lambda: "StageResumed" in event_reasons(cluster, namespace, "cluster-ladder"))
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    (stage,) = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert stage["lostInjectors"]["count"] == 1, stage.get("lostInjectors")
    (lost,) = stage["lostInjectors"]["injectors"]
    assert lost["injector"] == victim and lost["cause"] == "was deleted" and lost["at"] <= stage["finishedAt"]
    assert event_reasons(cluster, namespace, "cluster-ladder").count("InjectorLost") == 1


@pytest.mark.parametrize("job", ["master", "workers"])
def test_an_injector_that_crashes_fails_the_experiment_within_60s_naming_pod_and_cause(cluster, namespace,
                                                                                       operator, job):
    operator()
    assert apply(cluster, namespace, one_stage_ladder()).returncode == 0
    pod = a_running_pod_of_job(cluster, namespace, f"cluster-ladder-v1-s1-{job}")
    crash_pod(cluster, namespace, pod, 1, "ModuleNotFoundError: No module named 'mylib'")
    assert failed_within(cluster, namespace, "cluster-ladder", 60) < 60
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == ("StageFailed" if job == "master" else "InjectorLost")
    assert f"pod {pod.metadata.name} failed: container locust-{job[:6]}" in status["message"], status["message"]
    assert "exited with code 1 (Error): ModuleNotFoundError: No module named 'mylib'" in status["message"]


def test_a_master_whose_artifact_line_is_cut_runs_its_stage_again_naming_it(cluster, namespace, operator,
                                                                             real_stage):
    operator()
    assert apply(cluster, namespace, one_stage_ladder()).returncode == 0
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-master")
    running_pods_of_job(cluster, namespace, "cluster-ladder-v1-s1-workers", 2)
    (master,) = pods(cluster, namespace, "job-name=cluster-ladder-v1-s1-master")
    finish_stage(cluster, namespace, "cluster-ladder-v1-s1-master", "cluster-ladder-v1-s1-workers", real_stage,
                 cut=120)
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1-a2", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    (stage,) = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert stage["attempts"] == 2 and stage["requests"] == real_stage.summary["requests"]
    (retry,) = stage["retries"]
    assert retry["reason"] == "ArtifactUnreadable", retry
    assert re.fullmatch(rf"the Locust master {master.metadata.name}'s log, read 3 times: its artifact line \(120 "
                        r"characters\) cannot be read: .+", retry["cause"]), retry


def test_an_unpullable_injector_image_fails_the_experiment_within_60s_naming_pod_and_image(cluster, namespace,
                                                                                           operator):
    operator()
    assert apply(cluster, namespace, one_stage_ladder(image="loadstage-test/unpullable:1")).returncode == 0
    assert failed_within(cluster, namespace, "cluster-ladder", 60) < 60
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "InjectorNotStarting"
    assert "ImagePullBackOff" in status["message"] and "(image loadstage-test/unpullable:1)" in status["message"]
    assert "pod cluster-ladder-v1-s1-" in status["message"]


def test_target_that_cannot_pull_its_image_fails_with_the_reason(cluster, namespace, operator):
    operator()
    doc = example("cluster-ladder")
    doc["spec"]["target"]["image"] = "loadstage-test/unpullable:1"
    assert apply(cluster, namespace, doc).returncode == 0
    wait_phase(cluster, namespace, "cluster-ladder", "Failed")
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "TargetNotReady"
    assert "ImagePullBackOff" in status["message"] and "loadstage-test/unpullable:1" in status["message"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Failed"] == "True"
    waited = cluster.kubectl("wait", "-n", namespace, "--for=condition=Failed", "lx/cluster-ladder",
                             "--timeout=10s")
    assert waited.returncode == 0
    wait_for(lambda: not children(cluster, namespace, "cluster-ladder"), timeout=30)


def test_target_that_is_never_ready_times_out(cluster, namespace, operator):
    operator()
    cluster.core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "no-pods"},
                                                              "spec": {"hard": {"pods": "1"}}})
    doc = example("cluster-ladder")
    doc["spec"]["target"]["readyTimeout"] = "5s"
    assert apply(cluster, namespace, doc).returncode == 0
    wait_phase(cluster, namespace, "cluster-ladder", "Failed", timeout=60)
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "TargetNotReady"
    assert "not ready after 5s" in status["message"]


def test_problems_the_schema_cannot_see_end_failed_with_a_message(cluster, namespace, operator):
    operator()
    missing = copy.deepcopy(example("cluster-ladder"))
    missing["metadata"]["name"] = "missing-locustfile"
    missing["spec"]["injectors"]["locustfile"] = {"configMap": {"name": "my-locustfile"}}
    local_path = copy.deepcopy(example("cluster-ladder"))
    local_path["metadata"]["name"] = "local-path"
    local_path["spec"]["injectors"]["locustfile"] = {"path": "mine.py"}
    for doc in (missing, local_path):
        assert apply(cluster, namespace, doc).returncode == 0
    wait_phase(cluster, namespace, "missing-locustfile", "Failed")
    wait_phase(cluster, namespace, "local-path", "Failed")
    assert cluster.status(namespace, "missing-locustfile")["message"] == \
        "spec.injectors.locustfile.configMap: ConfigMap 'my-locustfile' not found"
    assert cluster.status(namespace, "local-path")["message"].startswith(
        "spec.injectors.locustfile.path works only with the local engine")




def test_invalid_resources_are_refused_by_the_api_server_naming_the_field(cluster, namespace):
    """tests/data/invalid, created in a dry run: each `apiServer` case refused naming its field, or the object
    that holds it (a rule across fields), and each `cel` case accepted, a rule left to the parser (the unit tier
    runs every case through it)."""
    wrong = []
    for case in CASES:
        try:
            cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, case_document(case),
                                                           dry_run="All", field_validation="Strict")
            refused = None
        except ApiException as e:
            status = json.loads(e.body)
            refused = [(c.get("field", "").replace("<nil>", ""), c["message"])
                       for c in (status.get("details") or {}).get("causes") or [status]]
        if "cel" in case:
            if refused:
                wrong.append(f"{case['name']}: refused, though left to the parser: {refused}")
        elif not any(within(case["field"], field) and case["apiServer"] in message for field, message in refused or []):
            wrong.append(f"{case['name']}: not refused with {case['field']}: {case['apiServer']!r}: {refused}")
    assert not wrong, "\n".join(wrong)


def test_a_rule_left_to_the_parser_fails_the_experiment_naming_the_field_and_the_rule(cluster, namespace, operator):
    """Each `cel` case of tests/data/invalid: the API server takes it, and the operator ends it in phase Failed
    with the parser's message, creating nothing."""
    operator()
    left = [case for case in CASES if "cel" in case]
    assert left
    for number, case in enumerate(left):
        doc = case_document(case)
        doc["metadata"]["name"] = f"left-to-the-parser-{number}"
        assert apply(cluster, namespace, doc).returncode == 0, case["name"]
    for number, case in enumerate(left):
        name = f"left-to-the-parser-{number}"
        wait_phase(cluster, namespace, name, "Failed")
        status = cluster.status(namespace, name)
        assert status["reason"] == "InvalidSpec" and f"{case['field']}: {case['parser']}" in status["message"], \
            (case["name"], status)
        assert not children(cluster, namespace, name), case["name"]


def test_the_api_server_accepts_every_example_study_and_edge_of_a_rule(cluster, namespace):
    """The CRD's rules refuse what they must (above) and no example: a dry run of each file on the server."""
    files = sorted([*(ROOT / "examples").glob("*.yaml"), *(ROOT / "examples" / "studies").glob("*.yaml")])
    assert len(files) >= 10
    for path in files:
        accepted = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path))
        assert accepted.returncode == 0, (path.name, accepted.stderr)
    for case in EDGES:   # tests/data/valid: at the edge of a rule
        cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, case_document(case),
                                                       dry_run="All", field_validation="Strict")


def test_spec_is_immutable_once_created(cluster, namespace):
    assert apply(cluster, namespace, example("cluster-ladder")).returncode == 0
    changed = example("cluster-ladder")
    changed["spec"]["stages"][0]["injectors"] = 3
    result = apply(cluster, namespace, changed)
    assert result.returncode != 0
    assert "spec is immutable once created; delete the experiment and create it again" in result.stderr


def _fullest_status(variants, stages_per_variant, repeats, real_stage):
    """The status of the largest experiment the CRD allows, each row as full as it gets: seven methods,
    corrected latencies, every threshold broken, a resumed stage's Redis note, and with repeats each one's
    headline, the trimmed means, every retry."""
    from loadstage.api.load import parse_experiment
    from loadstage.api.status import Headline, Latency, RepeatRecord, RunStatus, VariantRecord
    from loadstage.api.types import MAX_VARIANT_STAGES
    from loadstage.results.artifact import Artifact
    from loadstage.results.measurement import StageMeasurement
    from loadstage.results.stage_results import p99_pivot, stage_result, variant_aggregate
    assert variants * stages_per_variant * repeats == MAX_VARIANT_STAGES
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = [{"injectors": 500, "duration": "24h"}] * stages_per_variant
    doc["spec"]["matrix"] = {"threads": list(range(55, 55 + min(variants, 10)))}
    doc["spec"]["repeats"] = repeats
    if variants > 10:
        doc["spec"]["matrix"]["workers"] = list(range(55, 55 + variants // 10))
    doc["spec"]["thresholds"] = dict.fromkeys(("p50", "p90", "p95", "p99", "p999"), "1ms") | {"errorRate": "0%"}
    experiment = parse_experiment(doc)
    row = {**real_stage.summary["latencyMs"], "p50": 123456.789, "max": 987654.321}
    method = {"requests": 2_000_000_000, "failures": 1_000_000_000, "meanMs": 123456.789, "latencyMs": row,
              "correctedLatencyMs": row}
    headline = {**real_stage.summary, "requests": 2_000_000_000, "failures": 1_000_000_000, "meanMs": 123456.789,
                "latencyMs": row, "correctedLatencyMs": row, "servedRequests": 2_000_000_000,
                "injectorPeakCpuPercent": 99.9, "injectorBound": True, "errorKinds": 50,
                "byMethod": dict.fromkeys(("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"), method)}
    measurement = StageMeasurement(
        summary=headline, artifact={}, started_at="2026-11-22T12:00:00Z", finished_at="2026-11-22T12:00:00Z",
        redis_peak_connections=2_000_000, redis_connections_received=2_000_000,
        redis_peak_covers="from 2026-11-22T12:00:00Z: the operator resumed the stage",
        target_peak_cpu_cores=1000.123, target_peak_memory_bytes=10**15)
    widest = {"confidence": 0.95, "method": "bootstrap", "blocks": 10800, "blockSeconds": 10800,
              **{figure: [123500.0, 987700.0] for figure in ("p50", "p90", "p95", "p99", "p999", "mean", "rps")},
              "errorRate": [0.1235, 0.9877],
              "warning": "too short for blocks of 2 x 43200 s (how long its seconds stay alike): may be too narrow"}
    records = []
    trimmed = dict.fromkeys(("p50", "p90", "p95", "p99", "p999", "mean", "rps", "errorRate"), 987654.3)
    merged = {"trimmed_mean": trimmed, "repeats": repeats} if repeats > 1 else {}
    for v in experiment.variants():
        stages = [dataclasses.replace(stage_result(experiment, n, s, measurement), intervals=widest, **merged)
                  for n, s in enumerate(experiment.spec.stages, 1)]
        full = Latency.from_status(row)
        aggregate = dataclasses.replace(variant_aggregate(stages, [Artifact()] * len(stages)), latency=full,
                                        corrected_latency=full, intervals=widest,
                                        trimmed_mean=trimmed if repeats > 1 else None)
        headline = Headline(None, 2_000_000_000, 1_000_000_000, 0.5, 123456.789, 123456.789, full)
        runs = [RepeatRecord(r, [dataclasses.replace(headline, stage=n) for n in range(1, len(stages) + 1)],
                             headline) for r in range(1, repeats + 1)] if repeats > 1 else []
        records.append(VariantRecord(v.index, v.settings(), stages, aggregate=aggregate, judged=True, repeats=runs))
    return RunStatus(phase="Running", message="m" * 300, variants=records, p99_by_stage=p99_pivot(records))


def _without_nulls(value):
    """A document as a merge patch leaves it: a null removes its key."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return [_without_nulls(v) for v in value] if isinstance(value, list) else value


def test_a_status_with_every_declared_field_is_stored_as_written_and_explained(cluster, namespace):
    """The API server prunes what the CRD does not declare: every field of the status, each set, is written by the
    operator's writer and read back unchanged; and `kubectl explain` describes a stage's fields."""
    from loadstage.api.status import RunStatus
    from loadstage.api.status.stage import STAGE
    from loadstage.kube.status import StatusWriter
    from support.fullest import fullest_status
    assert apply(cluster, namespace, example("cluster-ladder")).returncode == 0
    status = fullest_status()
    writer = StatusWriter(cluster.api, namespace, "cluster-ladder", 1, [], lambda *event: None)
    writer(status)
    stored = cluster.status(namespace, "cluster-ladder")
    written = _without_nulls(RunStatus(**{**vars(status), "observed_generation": 1,
                                          "conditions": writer.conditions}).to_status())
    assert stored == written
    assert RunStatus.read(stored).to_status() == written

    # the API server publishes a new CRD's OpenAPI a moment after it serves it
    def explained():
        done = cluster.kubectl("explain", "loadexperiment.status.variants.stages")
        return done if done.returncode == 0 else None
    explain = wait_for(explained, explain=lambda: cluster.kubectl("explain", "lx.status.variants.stages").stderr)
    blocks = [b.splitlines() for b in explain.stdout.split("FIELDS:\n", 1)[1].split("\n\n") if b.strip()]
    fields = {b[0].split("\t")[0].strip(): " ".join(" ".join(line.split()) for line in b[1:]
                                                     if not line.startswith("  enum:")) for b in blocks}
    assert set(fields) == set(STAGE.fields), explain.stdout
    assert fields["latencyMs"] == "Latency percentiles of the merged response-time histogram, ms."
    assert fields["redisPeakConnections"] == ("The most Redis clients connected at once (INFO clients, sampled every "
                                              "second).")
    assert all(fields.values()), fields


@pytest.mark.parametrize("variants,stages,repeats", [(100, 5, 1), (10, 50, 1), (50, 5, 2), (5, 10, 10)])
def test_the_largest_status_the_crd_allows_is_accepted(cluster, namespace, real_stage, variants, stages, repeats):
    import json

    from loadstage.kube.status import StatusWriter
    status = _fullest_status(variants, stages, repeats, real_stage)
    assert apply(cluster, namespace, example("cluster-ladder")).returncode == 0
    writer = StatusWriter(cluster.api, namespace, "cluster-ladder", 1, [], lambda *event: None)
    writer(status)
    whole = cluster.lx(namespace, "cluster-ladder")   # with metadata.managedFields, as etcd stores it
    stored = whole["status"]
    size, object_size = (len(json.dumps(x, separators=(",", ":"))) for x in (stored, whole))
    print(f"\n{variants} variants x {stages} stages x {repeats} repeats: a status of {size:,} bytes, "
          f"the object {object_size:,}")
    assert len(stored["variants"]) == variants and all(len(v["stages"]) == stages for v in stored["variants"])
    assert object_size < 1_250_000   # etcd refuses objects over 1.5 MiB: a fifth of it to spare


def test_a_status_the_api_server_refuses_for_size_ends_the_experiment_failed(cluster, namespace):
    from loadstage.api.status import RunStatus
    from loadstage.engine.errors import ExperimentFailed
    from loadstage.kube.status import StatusWriter
    assert apply(cluster, namespace, example("cluster-ladder")).returncode == 0
    writer = StatusWriter(cluster.api, namespace, "cluster-ladder", 1, [], lambda *event: None)
    stage = {"stage": 1, "injectors": 2, "requests": 10, "failures": 0, "latencyMs": {"p99": 5.0}}
    first = RunStatus.read({"phase": "Running", "message": "stage 1", "variants": [{"index": 0, "stages": [stage]}]})
    writer(first)
    with pytest.raises(ExperimentFailed) as failed:
        writer(RunStatus(phase="Running", message="x" * 2_000_000))
    assert failed.value.reason == "StatusTooLarge"
    status = cluster.status(namespace, "cluster-ladder")
    assert status["phase"] == "Failed" and status["reason"] == "StatusTooLarge"
    assert "the API server refused a status of 6,00" in status["message"] and "too large" in status["message"]
    assert RunStatus.read(status).variants == first.variants   # what was written before is kept
    assert {c["type"]: c["status"] for c in status["conditions"]}["Failed"] == "True"
    writer(RunStatus(phase="Failed", reason="StatusTooLarge", message="y" * 2_000_000))
    assert cluster.status(namespace, "cluster-ladder")["message"] == status["message"]


def test_a_secret_goes_only_to_a_redis_loadstage_deployed_or_that_the_secret_itself_names(
        cluster, namespace, operator, sampler_redis):
    import redis as redis_client
    operator()
    cluster.core.create_namespaced_secret(namespace, {"metadata": {"name": "redis-auth"},
                                                      "stringData": {"password": "s3cret-pass"}})
    url = f"redis://127.0.0.1:{sampler_redis}/0"     # a server the experiment's author chose
    probe = redis_client.Redis(port=sampler_redis, client_name="test-probe")
    connections = probe.info()["total_connections_received"]
    doc = one_stage_ladder()
    doc["spec"]["redis"] = {"url": url, "passwordSecret": {"name": "redis-auth"}}
    assert apply(cluster, namespace, doc).returncode == 0
    wait_phase(cluster, namespace, "cluster-ladder", "Failed")
    status = cluster.status(namespace, "cluster-ladder")
    assert status["reason"] == "RedisSecretNotForThisUrl"
    assert status["message"] == (
        f"spec.redis.passwordSecret: Secret 'redis-auth' is sent only to a Redis that loadstage deploys, or to the "
        f"URL the Secret itself names; to send it to {url}, annotate it: kubectl annotate secret redis-auth "
        f"loadstage.io/redis-url={url}")
    # nothing connected to the author's server, and nothing was deployed that holds the Secret
    assert probe.info()["total_connections_received"] == connections
    assert not cluster.apps.list_namespaced_deployment(namespace).items

    # the Secret's owner opts in for this URL: the sampler authenticates there with it
    probe.config_set("requirepass", "s3cret-pass")
    cluster.core.patch_namespaced_secret("redis-auth", namespace,
                                         {"metadata": {"annotations": {"loadstage.io/redis-url": url}}})
    doc["metadata"]["name"] = "opted-in"
    assert apply(cluster, namespace, doc).returncode == 0
    running_pods_of_job(cluster, namespace, "opted-in-v1-s1-master")
    wait_for(lambda: any(c["name"] == "loadstage-sampler" for c in probe.client_list()), timeout=10)
    probe.config_set("requirepass", "")
    probe.close()
