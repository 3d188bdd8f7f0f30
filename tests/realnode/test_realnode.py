"""loadstage on a real node: the project's images run under a real kubelet with containerd and runc,
the chart installs the operator as a pod, and whole experiments run in real Locust pods against
real runner pods. Transcripts go to artifacts/realnode/."""

import ipaddress
import itertools
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from loadstage.api.names import ARTIFACT_KEY
from loadstage.api.servers import ASGI, BY_NAME
from loadstage.results import histograms
from support.kube import GROUP, PLURAL, VERSION, policy_reach
from support.realnode import OPERATOR_NAMESPACE, FirstJob, LxWatch, RealNode, StatusRecorder, node_setting
from support.stages import twice_as_long
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.realnode
ARTIFACTS = ROOT / "artifacts" / "realnode"
PHASE_ORDER = {"Pending": 0, "Deploying": 1, "Running": 2, "Succeeded": 3, "Failed": 3}


@pytest.fixture(scope="module")
def node():
    if os.geteuid() != 0:
        pytest.skip("the real node needs root: it makes a bridge, iptables rules, mounts and containers")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    node = RealNode.up()
    node.install_chart()
    print(f"\nreal node: images {node.images_seconds:.0f}s, up {node.up_seconds:.0f}s, "
          f"chart installed at {time.monotonic() - started:.0f}s")
    yield node
    subprocess.run([ROOT / "scripts" / "realnode", "down", "--purge"], capture_output=True)


def experiment(name, *, pods=2, stages=((1, "30s"), (2, "30s")), cleanup="Keep", **injectors):
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"pods": pods, "workers": 2, "threads": 2},
                     "injectors": {"usersPerInjector": 10, "spawnRatePerInjector": 10,
                                   "waitTime": {"min": "100ms", "max": "300ms"}, **injectors},
                     "stages": [{"injectors": n, "duration": d} for n, d in stages],
                     "thresholds": {"p99": "1000ms", "errorRate": "1%"},
                     "cleanup": cleanup}}


def apply(node, namespace, doc):
    node.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc), check=True)


def status(node, namespace, name):
    return node.status(namespace, name)


def wait_running_master(node, namespace, job):
    def running():
        pods = node.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
        return pods and pods[0].status.phase == "Running"
    wait_for(running, timeout=120)


def runner_ips(node, namespace, name):
    return {p.status.pod_ip for p in node.core.list_namespaced_pod(
        namespace, label_selector=f"loadstage.io/experiment={name},app.kubernetes.io/component=runner").items}


def test_a_whole_experiment_runs_in_real_pods_under_cpu_limits_and_reports_real_numbers(node):
    namespace = node.restricted_namespace("lx-ladder")
    doc = experiment("real-ladder", pods=1)
    doc["spec"]["matrix"] = {"cpu": ["250m", "500m"]}
    doc["spec"]["target"]["resources"] = {"limits": {"memory": "256Mi"}}
    # 5 users on one injector, then 40 on two, each with 20-80 ms waits: 250m serves the first with room and
    # queues the second (a p99 of 150 to 220 ms measured, its CFS periods throttled), whatever else the machine runs
    doc["spec"]["injectors"] = {"maxUsersPerInjector": 20, "spawnRatePerInjector": 20,
                                "waitTime": {"min": "20ms", "max": "80ms"}}
    doc["spec"]["stages"] = [{"users": 5, "duration": "20s"}, {"users": 40, "duration": "20s"}]
    doc["spec"]["thresholds"]["p99"] = "100ms"
    with LxWatch(node, namespace, ARTIFACTS / "kubectl-get-lx-w.txt") as lx_watch:
        apply(node, namespace, doc)
        live = live_series_mid_stage(node, namespace, "real-ladder-v1-s1-master")
        waited = node.kubectl("wait", "-n", namespace, "--for=condition=Succeeded", "lx/real-ladder",
                              "--timeout=420s")
        final = status(node, namespace, "real-ladder")
        (ARTIFACTS / "real-ladder-status.yaml").write_text(yaml.safe_dump(final, sort_keys=False))
        assert waited.returncode == 0, (waited.stderr, final.get("message"))
        wait_for(lambda: "real-ladder   Succeeded" in lx_watch.text(), timeout=10, explain=lx_watch.text)

    peaks = []
    for variant in final["variants"]:
        stages = variant["stages"]
        assert [(s["stage"], s["injectors"]) for s in stages] == [(1, 1), (2, 2)]
        for stage in stages:
            latency = stage["latencyMs"]
            assert stage["requests"] > 0 and stage["failures"] == 0
            assert latency["p50"] <= latency["p90"] <= latency["p95"] <= latency["p99"] <= latency["p999"]
            if stage["stage"] == 1 or variant["index"] == 0:   # 500m at 40 users: near 100 ms on a busy machine
                assert stage["verdict"]["passed"] is (stage["stage"] == 1), stage["verdict"]
            served = stage["target"]["servedRequests"]
            assert served is not None, "the server-side count is empty"
            assert abs(served - stage["requests"]) <= 0.005 * stage["requests"], (served, stage["requests"])
        # metrics-server's first sample of a new pod comes 10-30 s after it starts: one of the two stages has one
        cpu = [s["target"].get("peakCpuCores") for s in stages]
        memory = [s["target"].get("peakMemoryBytes") for s in stages]
        assert any(cpu) and all(m > 20 * 2**20 for m in memory if m), stages
        # the mean of the windows within a stage's load: each of them was one of the samples the peak saw
        means = [(s["target"].get("meanCpuCores"), s["target"].get("peakCpuCores")) for s in stages]
        assert all(0 < mean <= peak for mean, peak in means if mean is not None), means
        print(f"\nvariant {variant['index']}: (mean, peak) CPU of each stage, cores: {means}")
        peaks.append(max(c for c in cpu if c))

        # the aggregates, and every stage's artifact in its ConfigMap, read from the master pod's real log
        aggregate = variant["aggregate"]
        assert aggregate["requests"] == sum(s["requests"] for s in stages) == aggregate["latencyMs"]["n"]
        for number, stage in enumerate(stages, 1):
            kept = node.core.read_namespaced_config_map(
                f"real-ladder-v{variant['index'] + 1}-s{number}-results", namespace)
            artifact = json.loads(kept.data["artifact.json"])
            assert histograms.decode(artifact["histogram"]).get_total_count() == stage["requests"]
            assert not stage["injectorBound"] and 0 < stage["injectorPeakCpuPercent"] < 90
    assert [row["stage"] for row in final["p99ByStage"]] == [1, 2]
    # 250m under 40 users crossed its CPU, throttled by its container's own cgroup (the kubelet's cAdvisor): how
    # often depends on the machine (0.36 of its periods in a busy CI, 0.63-0.81 here)
    starved = final["variants"][0]["stages"][1]["saturation"]
    print("\nthe 250m variant's second stage:", starved)
    assert "Cpu" in starved["crossed"] and starved["throttledShare"] > 0, starved
    assert starved["cpuCapacityCores"] == 0.25, starved
    # which names its limit, Cpu, at the stage that broke the p99: the knee is its first stage
    capacity = final["variants"][0]["capacity"]
    print("its capacity:", capacity)
    assert (capacity["stage"], capacity["firstFailedStage"], capacity["limitedBy"]["resource"]) == (1, 2, "Cpu")
    assert "throttled" in capacity["limitedBy"]["evidence"], capacity["limitedBy"]
    roomier = final["variants"][1]["capacity"]
    assert roomier["stage"] >= 1 and roomier.get("limitedBy", {}).get("resource", "Cpu") == "Cpu", roomier
    # recorded once into the history's PostgreSQL (the chart's history.url), each stage with its histogram
    wait_for(lambda: (status(node, namespace, "real-ladder").get("history") or {}).get("recorded"), timeout=60,
             explain=lambda: status(node, namespace, "real-ladder").get("history"))
    uid = node.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "real-ladder")["metadata"]["uid"]
    assert node.history_sql(f"SELECT name, namespace, phase, source FROM runs WHERE uid = '{uid}'") == \
        [["real-ladder", namespace, "Succeeded", "cluster"]]
    kept = node.history_sql(f"SELECT variant, stage, requests, length(histogram) > 0 FROM stages WHERE run_uid = "
                            f"'{uid}' ORDER BY 1, 2")
    assert kept == [[str(v["index"] + 1), str(s["stage"]), str(s["requests"]), "t"]
                    for v in final["variants"] for s in v["stages"]], kept
    # the live series of stage 1, scraped from its master pod and from the operator pod mid-stage
    master, operator = live
    where = {"experiment": "real-ladder", "namespace": namespace, "variant": "1", "stage": "1"}
    requests = [s for s in master if s.name == "loadstage_stage_requests_total"]
    assert requests and all(where.items() <= s.labels.items() for s in requests)
    assert 0 < sum(s.value for s in requests) <= final["variants"][0]["stages"][0]["requests"]
    assert {s.labels["quantile"] for s in master if s.name == "loadstage_stage_latency_seconds"} == {
        "0.5", "0.9", "0.99", "0.999"}
    info = next(s for s in operator
                if s.name == "loadstage_experiment_info" and s.labels["experiment"] == "real-ladder")
    assert info.labels["phase"] == "Running" and info.labels["stage"] == "1/2"
    assert any(s.name == "loadstage_redis_connections" and where.items() <= s.labels.items() for s in operator)
    # Each variant's CPU stays at its limit: CFS may overrun a 100 ms period by its 5 ms slice per CPU (0.1 core
    # here), and metrics-server averages 10 s. The kept runner (the last variant's) got the matrix's value.
    assert [v["settings"]["cpu"] for v in final["variants"]] == ["250m", "500m"]
    for peak, limit in zip(peaks, (0.25, 0.5)):
        assert 0.75 * limit <= peak <= limit + 0.1, (peaks, limit)
    runner = node.apps.read_namespaced_deployment("real-ladder-runner", namespace).spec.template.spec.containers[0]
    assert (runner.resources.requests, runner.resources.limits) == ({"cpu": "500m", "memory": "256Mi"},
                                                                   {"cpu": "500m", "memory": "256Mi"})
    # what the kubelet made of it: the runner container's own cgroups hold the limits
    (pod,) = [p for p in node.core.list_namespaced_pod(
        namespace, label_selector="loadstage.io/experiment=real-ladder,loadstage.io/role=runner").items
        if p.metadata.deletion_timestamp is None]
    container_id = pod.status.container_statuses[0].container_id.split("://", 1)[1]
    (memory_limit,) = Path("/sys/fs/cgroup/memory").glob(f"kubepods*/**/pod{pod.metadata.uid}/{container_id}/"
                                                         "memory.limit_in_bytes")
    (cpu_quota,) = Path("/sys/fs/cgroup/cpu").glob(f"kubepods*/**/pod{pod.metadata.uid}/{container_id}/"
                                                   "cpu.cfs_quota_us")
    assert int(memory_limit.read_text()) == 256 * 2**20 and int(cpu_quota.read_text()) == 50_000
    print(f"\nreal node CPU peaks (metrics-server) against limits 250m and 500m: {peaks}")

    # What the runner pods hold, counted by Redis itself: their pools never close a connection, so at
    # the end every connection they ever opened is still listed, and none of it came from probes.
    stages = final["variants"][-1]["stages"]
    ips = runner_ips(node, namespace, "real-ladder")
    held = [c for c in node.redis_clients(namespace, "real-ladder-redis") if c["addr"].rsplit(":", 1)[0] in ips]
    # the chart's key gave this Redis a password: the runners and the sampler above used it, nobody else can
    assert "NOAUTH" in node.redis_cli(namespace, "real-ladder-redis", "PING", auth=False)
    assert stages[-1]["redisPeakConnections"] == len(held), (stages[-1], held)
    assert 0 < len(held) <= 2 * 2
    assert sum(s["redisConnectionsReceived"] for s in stages) <= len(held), stages

    logs = {**node.all_logs(namespace), **node.all_logs(OPERATOR_NAMESPACE)}
    assert any("/locust-master" in key for key in logs) and any("/runner" in key for key in logs)
    dirty = {key: [line for line in text.splitlines() if "ERROR" in line or "Traceback" in line][:3]
             for key, text in logs.items()}
    assert not {k: v for k, v in dirty.items() if v}, dirty
    # the kept runner requests 500m of the node's 2 cores: give them back to the tests after this one
    assert node.kubectl("delete", "-n", namespace, "lx/real-ladder", "--timeout=60s").returncode == 0


def live_series_mid_stage(node, namespace, master_job) -> tuple[list, list]:
    """The samples the stage's master pod serves on its metrics port once it has latency figures, and the
    operator pod's at that moment (from the node itself, over the bridge)."""
    wait_running_master(node, namespace, master_job)
    (pod,) = node.core.list_namespaced_pod(namespace, label_selector=f"job-name={master_job}").items
    (operator,) = node.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector="app.kubernetes.io/name=loadstage"
                                                ).items

    def scrape(ip, port):
        try:
            text = urllib.request.urlopen(f"http://{ip}:{port}/metrics", timeout=2).read().decode()
        except OSError:
            return []
        return [s for family in text_string_to_metric_families(text) for s in family.samples]

    master = wait_for(lambda: (lambda found: found if any(s.name == "loadstage_stage_latency_seconds"
                                                          for s in found) else None)(scrape(pod.status.pod_ip, 9646)),
                      timeout=60, interval=1)
    return master, scrape(operator.status.pod_ip, 9090)


def run_to_success(node, namespace, *docs) -> list[dict]:
    """Applies the experiments, all at once, and waits for each to succeed; their statuses and every container's
    log go to the artifacts either way."""
    names = [doc["metadata"]["name"] for doc in docs]
    for doc in docs:
        apply(node, namespace, doc)
    waited = node.kubectl("wait", "-n", namespace, "--for=condition=Succeeded", *(f"lx/{n}" for n in names),
                          "--timeout=420s")
    finals = [status(node, namespace, name) for name in names]
    for name, final in zip(names, finals):
        (ARTIFACTS / f"{name}-status.yaml").write_text(yaml.safe_dump(final, sort_keys=False))
    logs = node.all_logs(namespace)
    (ARTIFACTS / f"{namespace}-logs.txt").write_text("\n".join(f"== {k}\n{v}" for k, v in sorted(logs.items())))
    assert waited.returncode == 0, (waited.stderr, [f.get("message") for f in finals])
    return finals


# Each experiment runs its variants one after another, and the experiments run side by side: pairs of servers,
# the last two of ASGI servers (the ASGI runner app): gunicorn's uvicorn class and granian's ASGI interface
SERVER_PAIRS = (("gunicorn", "uwsgi"), ("cheroot", "granian"), ("bjoern", "meinheld"), ("mod_wsgi", "waitress"),
                ("uvicorn", "hypercorn"), ("gunicorn", "granian"))
ASGI_TARGET = {6: {"workerClass": "uvicorn", "interface": "asgi"}}   # by pair
USERS = 10   # 20 in six experiments side by side overloaded the node beside the other tiers: p99 ~1 s, errors


def stage_errors(node, namespace, name, variant):
    """The error rows of the stage's artifact (its results ConfigMap), for a failure's message."""
    config = node.core.read_namespaced_config_map(f"{name}-v{variant}-s1-results", namespace)
    return json.loads(config.data[ARTIFACT_KEY])["errors"]


def test_every_server_serves_a_stage_in_real_pods(node):
    namespace = node.restricted_namespace("lx-servers")
    docs = []
    for number, pair in enumerate(SERVER_PAIRS, 1):
        doc = yaml.safe_load((ROOT / "examples" / "servers.yaml").read_text())
        doc["metadata"]["name"] = f"servers-{number}"
        doc["spec"]["stages"] = [{"users": USERS, "duration": "6s"}]
        doc["spec"]["injectors"]["waitTime"] = {"min": "50ms", "max": "150ms"}
        doc["spec"]["matrix"]["server"] = list(pair)
        del doc["spec"]["target"]["threads"]      # each server's default: 1 for bjoern and meinheld, else 2
        doc["spec"]["target"].update(ASGI_TARGET.get(number, {}))
        doc["spec"]["cleanup"] = "Keep"
        docs.append(doc)
    finals = run_to_success(node, namespace, *docs)
    variants = [v for final in finals for v in final["variants"]]
    interfaces = [doc["spec"]["target"].get("interface") for doc in docs for _ in doc["spec"]["matrix"]["server"]]
    assert [v["settings"]["server"] for v in variants] == [server for pair in SERVER_PAIRS for server in pair]
    names = [(doc["metadata"]["name"], index) for doc in docs
             for index in range(1, len(doc["spec"]["matrix"]["server"]) + 1)]
    for variant, interface, (name, index) in zip(variants, interfaces, names):
        (stage,) = variant["stages"]
        server = variant["settings"]["server"]
        assert stage["requests"] > 100, (server, stage)
        assert stage["failures"] == 0, (server, stage, stage_errors(node, namespace, name, index))
        # every variant's own pods, though DNS still names the previous variant's pod for a while
        served = stage["target"].get("servedRequests")
        assert served is not None and abs(served - stage["requests"]) <= 0.005 * stage["requests"], (server, stage)
        settings = variant["settings"]
        # a thread holds one connection at most; an ASGI app's event loop, one for each request it has in flight
        asgi = BY_NAME[server].kind_of(settings.get("workerClass"), interface) == ASGI
        # (+ 1: the sampler's own; + 1 a worker process: a connection being replaced as the node is busy, whose
        # source is not known: gunicorn 16 of 15 seen once, 17 of 16 once, 2026-11-28)
        most = settings["workers"] * (settings["threads"] + 1) + 1 + (USERS if asgi else 0)
        assert 0 < stage["redisPeakConnections"] <= most, (server, stage)
    # (metrics-server's first sample of a new pod comes 10-30 s after it starts: a 6 s stage has none; the
    # ladder above checks its figures)
    # the kept runners are each pair's second: waitress among them, which has no SIGTERM handler: as PID 1 it
    # would ignore SIGTERM for the whole 30 s grace period
    assert node.running_containers(namespace)
    deleted = time.monotonic()
    assert node.kubectl("delete", "-n", namespace, "lx", "--all", "--timeout=60s").returncode == 0
    wait_for(lambda: not node.running_containers(namespace), timeout=60)
    assert time.monotonic() - deleted < 15, "a runner container outlived SIGTERM"
    print("\nservers on the real node:", [(v["settings"]["server"], v["stages"][0]["requests"],
                                           v["stages"][0]["latencyMs"]["p99"]) for v in variants],
          f"all containers gone {time.monotonic() - deleted:.1f}s after the delete")


def test_each_proxy_over_each_socket_serves_real_pods_from_its_own_container(node):
    namespace = node.restricted_namespace("lx-proxies")
    docs = []
    for server in ("gunicorn", "flup"):
        for proxy in ("nginx", "httpd"):
            doc = experiment(f"proxies-{server}-{proxy}", pods=1, stages=((1, "8s"),), cleanup="Keep")
            # flup's threaded class closes the connections it has no free thread for: either process may take all 10
            doc["spec"]["target"].update(server=server, threads=10, proxy={"server": proxy})
            doc["spec"]["matrix"] = {"socket": ["tcp", "unix"]}
            docs.append(doc)
    finals = run_to_success(node, namespace, *docs)
    seen = []
    for final in finals:
        for variant in final["variants"]:
            (stage,) = variant["stages"]
            settings = variant["settings"]
            seen.append((settings["server"], settings["proxy"], settings["socket"]))
            assert stage["requests"] > 50 and stage["failures"] == 0, (settings, stage)
            served = stage["target"].get("servedRequests")
            assert served is not None and abs(served - stage["requests"]) <= 0.005 * stage["requests"], \
                (settings, stage)
    assert seen == [(s, p, k) for s in ("gunicorn", "flup") for p in ("nginx", "httpd") for k in ("tcp", "unix")]
    # the last variant's pod (kept) of the last experiment: flup over a Unix socket behind httpd, in a container
    # of its own
    (pod,) = node.core.list_namespaced_pod(
        namespace, label_selector="loadstage.io/experiment=proxies-flup-httpd,app.kubernetes.io/component=runner"
    ).items
    assert [c.name for c in pod.spec.containers] == ["runner", "proxy"]
    assert "httpd" in pod.spec.containers[1].args and "unix:/run/loadstage/app.sock" in pod.spec.containers[1].args
    # metrics-server reports each container: the proxy's figures apart, where a sample fell in the stage
    variants = [v for final in finals for v in final["variants"]]
    proxy_memory = [v["stages"][0]["target"].get("proxyPeakMemoryBytes") for v in variants]
    assert any(proxy_memory) and all(m < 200 * 2**20 for m in proxy_memory if m), proxy_memory
    assert node.kubectl("delete", "-n", namespace, "lx", "--all", "--timeout=60s").returncode == 0
    print("\nproxies on the real node:", [(*seen[i], v["stages"][0]["requests"], v["stages"][0]["latencyMs"]["p99"],
                                           v["stages"][0]["target"].get("proxyPeakCpuCores"))
                                          for i, v in enumerate(variants)])


def test_a_capacity_search_at_an_arrival_rate_runs_in_real_pods_each_stage_ending_once_decided(node):
    """One gthread worker of 2 threads, each request held ~18 ms: at most ~110 req/s, so a p99 of 100 ms breaks
    between 80 and 160 arrivals a second. Each stage's Locust master ends it at its deciding look, in its pod."""
    namespace = node.restricted_namespace("lx-search")
    doc = {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "search"},
           "spec": {"target": {"pods": 1, "workers": 1, "threads": 2, "env": {"RUNNER_DELAY": "fast"}},
                    "injectors": {"scenario": "hello", "maxUsersPerInjector": 30, "maxRatePerInjector": 100},
                    # no errorRate: 400 requests without a failure cannot show one within 1% at a look's confidence
                    # (Clopper-Pearson), so a 20 s stage of 20/s would end undecided whatever its p99
                    "slo": {"p99": "100ms"},
                    # 40/s: a p99 at a look's confidence needs some 500 requests (none of 400 over it is compatible
                    # with 1.3% over it), which a 20 s stage at 20/s never has
                    "search": {"load": "rps", "from": 40, "max": 320, "resolution": "100%"},
                    "stageEnd": {"when": "Decided", "min": "8s", "max": "20s"}}}
    (final,) = run_to_success(node, namespace, doc)
    variant = final["variants"][0]
    search, stages = variant["search"], variant["stages"]
    table = [(s["stage"], s["arrivalRate"], s["injectors"], s["endedBy"], s["durationSeconds"], s["requests"],
              s["latencyMs"]["p99"], s["droppedArrivals"], s["verdict"]["outcome"]) for s in stages]
    print("\nsearch on the real node (stage, rps, injectors, ended by, seconds, requests, p99 ms, dropped, verdict):",
          table, "bracket:", search)
    assert search["reason"] in ("Found", "Near") and 40 <= search["pass"] < (search.get("near") or search["fail"]) \
        <= 320, (search, table)
    assert search["reason"] == "Near" or search["confirmed"], search      # each end run twice before Found
    assert search["limitedBy"]["resource"] == "Concurrency", search["limitedBy"]   # two threads, each ~18 ms asleep
    loads = [s["arrivalRate"] for i, s in enumerate(stages)   # an undecided stage runs again at its load
             if i == 0 or stages[i - 1]["arrivalRate"] != s["arrivalRate"]]
    # doubling from `from` while it passes (on a busy node 80 req/s was undecided twice, a fail: no 160)
    assert loads[:2] == [40, 80] and (search["pass"] < 80 or loads[2] == 160), table
    assert [s["injectors"] for s in stages] == [-(-s["arrivalRate"] // 100) for s in stages], table
    # under the objective: the first decided stage (on a busy node the first one's p99 was 70 ms, undecided)
    low = next(s for s in stages if s["arrivalRate"] == 40 and s["verdict"]["outcome"] != "Undecided")
    assert (low["verdict"]["outcome"], low["droppedArrivals"]) == ("Pass", 0), low
    # a stage the master decides ends at that look, in its pod, before its max: 20 s, or 40 s for the rerun of an
    # undecided stage or a confirmation (on a busy node the first stage's p99 was 70 ms, not 25: its interval
    # straddled 100 ms until its max, and its rerun decided at 27 s)
    assert any(s["endedBy"] == "Decided" and s["verdict"]["outcome"] == "Pass"
               and s["durationSeconds"] < (40 if rerun else 20)
               for s, rerun in zip(stages, twice_as_long(stages, "arrivalRate"))), table
    # every arrival of the first stage reached the target, at the rate asked (the served count is the target's own)
    assert low["target"]["servedRequests"] == low["requests"], low
    assert low["requests"] == pytest.approx(40 * low["durationSeconds"], rel=0.02), low
    assert any(s["verdict"]["outcome"] in ("Fail", "Near") for s in stages) and all(
        s["endedBy"] in ("Decided", "Breached", "MaxDuration") for s in stages), table
    assert final["latest"]["bracket"].startswith(f"about {search['near']} rps" if search["reason"] == "Near" else
                                                 f"{search['pass']}-{search['fail']} rps")
    assert final["latest"]["verdict"].split(":")[0] in ("Pass", "Fail", "Near", "Fail, unsteady")


def test_a_goal_picks_the_cheapest_variant_that_meets_it_in_real_pods(node):
    """Each request holds a thread ~18 ms: one thread serves at most ~55 req/s, four ~220. At 80 a second the
    single thread breaks the objective by far and is dropped at its first look; four threads meet it."""
    namespace = node.restricted_namespace("lx-goal")
    doc = {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "goal"},
           "spec": {"target": {"pods": 1, "workers": 1, "env": {"RUNNER_DELAY": "fast"},
                               "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}},
                    "injectors": {"scenario": "hello", "maxUsersPerInjector": 40, "maxRatePerInjector": 100},
                    "goal": {"rps": 80}, "slo": {"p99": "150ms"}, "matrix": {"threads": [1, 4]},
                    "stageEnd": {"when": "Decided", "min": "8s", "max": "20s"}}}
    (final,) = run_to_success(node, namespace, doc)
    found, (one, four) = final["recommendation"], final["variants"]
    print("\ngoal on the real node:", found["sentence"], [(v["index"], v.get("dropped"), [
        (s["endedBy"], s["durationSeconds"], s["latencyMs"]["p99"]) for s in v["stages"]]) for v in (one, four)])
    assert (found["reason"], found["variant"], found["order"]) == ("Found", 1, [0, 1]), found
    assert found["sentence"] == "threads=4 meets p99 <= 150ms at 80 req/s with 0.5 cores; no other variant met it"
    assert one["dropped"]["reason"].startswith("broke it by far") and one["stages"][0]["endedBy"] == "Breached"
    assert one["stages"][0]["durationSeconds"] < 18 and four["met"]["headroom"] > 0
    # one thread held ~18 ms a request, its CPU far from its limit: the thread is the limit
    assert one["dropped"]["limitedBy"]["resource"] == "Concurrency", one["dropped"]
    assert found["winner"]["confirmed"] and [s["verdict"]["outcome"] for s in four["stages"]][-1] == "Pass"
    assert four["stages"][-1]["target"]["servedRequests"] == four["stages"][-1]["requests"]


def verified_goal(name, headroom):
    """A goal whose pick is exported with an HPA for 40 to 180 req/s and verified (spec.verify). One worker of
    four threads under 100m: each request takes ~1 ms of CPU and holds a thread ~18 ms, so CPU binds first,
    near 90 req/s a pod, and CPU is what the HPA scales on."""
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"pods": 1, "workers": 1, "threads": 4, "env": {"RUNNER_DELAY": "fast"},
                                "resources": {"limits": {"memory": "256Mi"}}},
                     "injectors": {"scenario": "hello", "maxUsersPerInjector": 60, "maxRatePerInjector": 200},
                     "matrix": {"cpu": ["100m", "250m"]},
                     "warmup": {"arrivalRate": 40, "duration": "10s"},
                     "goal": {"rps": 40}, "slo": {"p99": "150ms"},
                     "stageEnd": {"when": "Decided", "min": "8s", "max": "20s"},
                     "autoscale": {"minLoad": 40, "maxLoad": 180, "headroom": headroom, "readySeconds": "5s"},
                     "verify": True}}


VERIFICATIONS = {"lx-verify": verified_goal("verify", "20%"),
                 "lx-verify-wrong": verified_goal("verify-wrong", "0%")}   # no headroom: a pod at its capacity
# Two goals, their capacity searches (~14 stages) and their ladders (4 steps of 70 s) take ~20 minutes of the
# node (run beside the other tests, they doubled those tests' time): outside scripts/test's 20 minutes, run on
# demand (docs/development.md, "The HPA on the real node").
HPA_VERIFICATION = os.environ.get("LOADSTAGE_HPA_VERIFICATION") == "1"


@pytest.fixture(scope="module", autouse=True)
def verifications(node, request):
    """The verifications take minutes, mostly waiting for the HPA: they run beside the tests before theirs."""
    if not HPA_VERIFICATION or not any(item.name.startswith("test_a_verified_pick") for item in request.session.items):
        yield
        return
    for namespace, doc in VERIFICATIONS.items():
        node.restricted_namespace(namespace)
        apply(node, namespace, doc)
    yield


SHOP_ARGS = ["gunicorn", "--bind", "0.0.0.0:8080", "--workers", "2", "httpbin:app"]


def shop_deployment(node, name, args=None):
    """A team's own Deployment of an app this project did not write (httpbin, from the example-app image):
    its own labels, probes and resources, and env from a ConfigMap."""
    container = {"name": "web", "image": f"{node_setting('IMAGE_PREFIX')}/loadstage/example-app:0.1.0",
                 **({"args": args} if args else {}),
                 "envFrom": [{"configMapRef": {"name": "shop-env"}}], "ports": [{"containerPort": 8080}],
                 "readinessProbe": {"httpGet": {"path": "/status/200", "port": 8080}, "periodSeconds": 2},
                 "livenessProbe": {"httpGet": {"path": "/status/200", "port": 8080}, "periodSeconds": 10},
                 "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}},
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                             "seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [container]}}}}


def shop(node, namespace, name, args=None):
    """shop_deployment, created, with an HPA on CPU."""
    node.apps.create_namespaced_deployment(namespace, shop_deployment(node, name, args))
    node.api_autoscaling().create_namespaced_horizontal_pod_autoscaler(namespace, {
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": 1, "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": 80}}}]}})

    def settled():
        d = node.apps.read_namespaced_deployment(name, namespace)
        return d.status.observed_generation == d.metadata.generation and d.status.ready_replicas == 1
    wait_for(settled, timeout=120)


def shop_state(node, namespace, name):
    d = node.apps.read_namespaced_deployment(name, namespace)
    h = node.api_autoscaling().read_namespaced_horizontal_pod_autoscaler(name, namespace)
    return {"generation": d.metadata.generation, "resourceVersion": d.metadata.resource_version,
            "replicas": d.spec.replicas, "template": node.api.sanitize_for_serialization(d.spec.template),
            "annotations": {k: v for k, v in (d.metadata.annotations or {}).items()
                            if k != "deployment.kubernetes.io/revision"},   # the controller's rollout count
            "hpa": (h.spec.min_replicas, h.spec.max_replicas, h.metadata.annotations or {})}


def shop_experiment(name, deployment, mode, stages, **target):
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"deployment": {"name": deployment, "mode": mode}, "server": "gunicorn", **target},
                     "redis": {"deploy": False},
                     "injectors": {"usersPerInjector": 10, "spawnRatePerInjector": 10,
                                   "waitTime": {"min": "50ms", "max": "150ms"},
                                   "locustfile": {"configMap": {"name": "shop-locustfile"}}},
                     "stages": [{"injectors": n, "duration": d} for n, d in stages],
                     "cleanup": "Delete"}}


def test_a_teams_own_deployment_in_place_survives_an_operator_restart_and_is_restored_exactly(node):
    namespace = node.restricted_namespace("lx-own")
    node.core.create_namespaced_config_map(namespace, {"metadata": {"name": "shop-env"}, "data": {"MODE": "live"}})
    node.core.create_namespaced_config_map(namespace, {"metadata": {"name": "shop-locustfile"}, "data": {
        "locustfile.py": (ROOT / "examples" / "own-app-locustfile.py").read_text()}})
    shop(node, namespace, "shop", args=SHOP_ARGS)
    shop(node, namespace, "shop-cmd")     # its flags are in the image's CMD, where loadstage cannot reach them
    before, cmd_before = shop_state(node, namespace, "shop"), shop_state(node, namespace, "shop-cmd")

    def keep_yaml(moment):   # kubectl get deploy -o yaml, for the record
        (ARTIFACTS / f"shop-{moment}.yaml").write_text(node.kubectl("get", "deploy/shop", "hpa/shop", "-n", namespace,
                                                                    "-o", "yaml", check=True).stdout)
    keep_yaml("before")

    # Copy: the copy's gunicorn starts the image's 2 workers, not 3, and says so in its log
    apply(node, namespace, shop_experiment("copied", "shop-cmd", "Copy", ((1, "10s"),), pods=1, workers=3))
    node.kubectl("wait", "-n", namespace, "--for=condition=Failed", "lx/copied", "--timeout=180s")
    copied = status(node, namespace, "copied")
    assert copied["reason"] == "SettingsNotApplied", copied
    assert "wants 3 gunicorn worker(s), but its pods started 2 (copied-runner-" in copied["message"]
    wait_for(lambda: not node.apps.list_namespaced_deployment(
        namespace, label_selector="loadstage.io/experiment=copied").items, timeout=60)
    assert shop_state(node, namespace, "shop-cmd") == cmd_before    # never written: same generation and version

    # InPlace, with the operator pod deleted mid-stage
    doc = shop_experiment("in-place", "shop", "InPlace", ((1, "20s"), (2, "20s")), pods=2, workers=3, threads=2,
                          resources={"requests": {"cpu": "100m"}, "limits": {"cpu": "500m"}})
    with StatusRecorder(node, namespace, "in-place") as recorder:
        apply(node, namespace, doc)
        wait_running_master(node, namespace, "in-place-v1-s1-master")
        held = shop_state(node, namespace, "shop")
        keep_yaml("held")
        assert held["replicas"] == 2 and held["hpa"][:2] == (2, 2)
        (web,) = held["template"]["spec"]["containers"]
        assert web["args"][-2:] == ["3", "httpbin:app"] and web["resources"]["limits"] == {"cpu": "500m"}
        (old,) = node.operator_pods()    # mid-stage: its master runs
        node.kubectl("delete", "pod", "-n", OPERATOR_NAMESPACE, old.metadata.name, "--grace-period=0", "--force",
                     check=True)
        wait_for(lambda: [p for p in node.operator_pods() if p.metadata.name != old.metadata.name
                          and p.status.phase == "Running"], timeout=60)
        waited = node.kubectl("wait", "-n", namespace, "--for=condition=Succeeded", "lx/in-place", "--timeout=240s")
        assert waited.returncode == 0, status(node, namespace, "in-place").get("message")
    wait_for(lambda: (status(node, namespace, "in-place").get("inPlace") or {}).get("restored"), timeout=60)
    after = shop_state(node, namespace, "shop")
    keep_yaml("after")
    assert (after["replicas"], after["template"], after["annotations"], after["hpa"]) == \
        (before["replicas"], before["template"], before["annotations"], before["hpa"])
    final = status(node, namespace, "in-place")
    (ARTIFACTS / "in-place-status.yaml").write_text(yaml.safe_dump(final, sort_keys=False))
    stages = final["variants"][0]["stages"]
    assert [s["stage"] for s in stages] == [1, 2]
    for stage in stages:
        assert stage["requests"] > 100 and stage["failures"] == 0, stage
        assert stage["target"].get("servedRequests") is None        # httpbin counts nothing loadstage reads
    assert max(s["target"].get("peakCpuCores") or 0 for s in stages) <= 2 * 0.5 + 0.1
    events = node.core.list_namespaced_event(namespace, field_selector="involvedObject.name=in-place").items
    reasons = [e.reason for e in events]
    assert "StageResumed" in reasons and reasons.count("StageFinished") == 2 and "TargetRestored" in reasons
    assert any("gunicorn says each pod started 3 worker(s)" in e.message for e in events if e.reason == "TargetReady")

    phases = [s["phase"] for s in recorder.statuses]
    assert all(PHASE_ORDER[a] <= PHASE_ORDER[b] for a, b in itertools.pairwise(phases)), phases
    progress = [tuple(int(x) for x in s["progress"]["stage"].split("/")) for s in recorder.statuses
                if s.get("progress")]
    assert progress == sorted(progress), progress
    print("\nhttpbin InPlace on the real node:", [(s["injectors"], s["requests"], s["latencyMs"]["p99"],
                                                   s["target"].get("peakCpuCores")) for s in stages])

    # a real run's recommendation (2 workers x 4 threads, 250m) exported over the team's manifest and applied
    # with kubectl apply -k: the pods the rollout starts run its settings, and the API server takes its HPA
    base = ARTIFACTS / "shop-base"
    base.mkdir(parents=True, exist_ok=True)
    (base / "deployment.yaml").write_text(yaml.safe_dump(shop_deployment(node, "shop", SHOP_ARGS)))
    (base / "kustomization.yaml").write_text(yaml.safe_dump({"resources": ["deployment.yaml"]}))
    exported = subprocess.run([sys.executable, "-m", "loadstage.cli", "export", ROOT / "tests/data/results/goal.json",
                               "--deployment", base / "deployment.yaml", "--autoscale", "50:600", "--base",
                               "../shop-base", "-o", ARTIFACTS / "shop-overlay"], capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    applied = node.kubectl("apply", "-k", str(ARTIFACTS / "shop-overlay"), "-n", namespace)
    assert applied.returncode == 0, applied.stderr
    node.kubectl("rollout", "status", "deploy/shop", "-n", namespace, "--timeout=120s", check=True)
    (pod,) = [p for p in node.core.list_namespaced_pod(namespace, label_selector="app=shop").items
              if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
    (web,) = pod.spec.containers
    assert web.resources.limits == {"cpu": "250m"} and web.args == SHOP_ARGS
    assert {e.name: e.value for e in web.env} == {"GUNICORN_CMD_ARGS": "--threads 4 --worker-class gthread"}
    log = wait_for(lambda: (text := node.logs(namespace, pod.metadata.name)).count("Booting worker") == 2 and text,
                   timeout=60, interval=1)
    assert "Using worker: gthread" in log, log     # the server read the setting: the team's ran sync workers
    scaler = node.api_autoscaling().read_namespaced_horizontal_pod_autoscaler("shop", namespace)
    assert (scaler.spec.min_replicas, scaler.spec.max_replicas) == (1, 7)
    assert scaler.spec.metrics[0].resource.target.average_utilization == 61


def evict(node, namespace, pod):
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace))
    try:
        node.core.create_namespaced_pod_eviction(pod, namespace, body)
        return 201, ""
    except ApiException as e:
        return e.status, e.body


def test_an_evicted_master_reruns_its_stage_and_a_target_restarted_by_its_probe_is_on_record(node):
    """One runner thread with ~180 ms per request under 20 users: a liveness probe that allows 1 s queues behind
    the requests and fails, and the kubelet restarts the server. Stage 2's master is evicted (once its disruption
    budget is out of the way). The users wait 50-100 ms, far less than a request waits in the queue: without
    waits, each user retried a refused connection at once while the server restarted, a busy loop of up to the
    injector's core beside the suite's other tests."""
    namespace = node.restricted_namespace("lx-disrupted")
    doc = experiment("disrupted", pods=1, stages=((1, "12s"),) * 3, cleanup="Delete", usersPerInjector=20,
                     spawnRatePerInjector=20, waitTime={"min": "50ms", "max": "100ms"})
    doc["spec"]["target"].update(workers=1, threads=1, env={"RUNNER_DELAY": "slow"}, livenessProbe={
        "httpGet": {"path": "/healthz"}, "periodSeconds": 2, "timeoutSeconds": 1, "failureThreshold": 2})
    del doc["spec"]["thresholds"]
    apply(node, namespace, doc)
    wait_running_master(node, namespace, "disrupted-v1-s2-master")
    (master,) = node.core.list_namespaced_pod(namespace, label_selector="job-name=disrupted-v1-s2-master").items
    # the bridge CNI enforces no NetworkPolicy: what is checked is that they select the real pods they mean to
    pods = {p.metadata.name: p.metadata.labels for p in node.core.list_namespaced_pod(namespace).items}
    policies = node.api.sanitize_for_serialization(node.networking.list_namespaced_network_policy(namespace).items)
    reach = policy_reach(policies, pods)

    def named(role):
        return {n for n, labels in pods.items() if labels.get("loadstage.io/role") == role}
    assert {n: reach[n] for n in named("redis")} == dict.fromkeys(named("redis"), named("runner"))
    assert reach[master.metadata.name] == named("locust-worker") != set()
    assert all(reach[n] == named("locust-master") | named("locust-worker") for n in named("runner"))
    (operator_pod,) = node.operator_pods()
    redis_policy = next(p for p in policies if p["metadata"]["name"] == "disrupted-redis")
    operator_peer = redis_policy["spec"]["ingress"][0]["from"][-1]
    assert operator_peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": OPERATOR_NAMESPACE}
    assert operator_peer["podSelector"]["matchLabels"].items() <= operator_pod.metadata.labels.items()
    refused, said = evict(node, namespace, master.metadata.name)
    assert refused == 429 and "disruption budget" in said, (refused, said)
    node.policy.delete_namespaced_pod_disruption_budget("disrupted-v1-s2", namespace)
    assert evict(node, namespace, master.metadata.name)[0] == 201
    wait_for(lambda: status(node, namespace, "disrupted").get("phase") in ("Succeeded", "Failed"), timeout=240)
    final = status(node, namespace, "disrupted")
    (ARTIFACTS / "disrupted-status.yaml").write_text(yaml.safe_dump(final, sort_keys=False))
    assert final["phase"] == "Succeeded", final.get("message")
    stages = final["variants"][0]["stages"]
    assert [s.get("attempts", 1) for s in stages] == [1, 2, 1]
    (retry,) = stages[1]["retries"]
    assert retry["cause"].startswith(f"the Locust master pod {master.metadata.name} was taken away "
                                     f"(EvictionByEvictionAPI"), retry
    restarted = [s for s in stages if s["target"]["restarts"]]
    assert restarted, [s["target"] for s in stages]
    causes = [c for s in restarted for pod in s["target"]["pods"] for c in pod.get("causes", ())]
    assert any("liveness probe" in c for c in causes), causes
    assert all(s["target"].get("servedRequests") is None for s in restarted)
    report = subprocess.run([sys.executable, "-m", "loadstage.cli", "report", "lx/disrupted", "-n", namespace],
                            capture_output=True, text=True, env={**os.environ, "KUBECONFIG": node.kubeconfig})
    (ARTIFACTS / "disrupted-report.txt").write_text(report.stdout + report.stderr)
    assert "\u2020 the target was not steady" in report.stdout, report.stderr
    print(f"\nevicted and restarted: attempts {[s.get('attempts', 1) for s in stages]}, target restarts "
          f"{[s['target']['restarts'] for s in stages]}, unready s {[s['target']['unreadySeconds'] for s in stages]}")


def verified(node, namespace, name, timeout=900):
    """The experiment's status once its verification has a result."""
    return wait_for(lambda: (final := status(node, namespace, name)).get("verification", {}).get("result")
                    not in (None, "Running") and final, timeout=timeout, interval=5,
                    explain=lambda: status(node, namespace, name).get("verification") or
                    status(node, namespace, name).get("message"))


@pytest.mark.skipif(not HPA_VERIFICATION, reason="~20 minutes of the real node: LOADSTAGE_HPA_VERIFICATION=1 runs it")
def test_a_verified_pick_scales_a_copy_of_its_target_through_the_exported_hpa(node):
    """metrics-server (10 s resolution) and the controller-manager's HPA controller add pods to a copy of the pick
    as the arrival rate climbs from minLoad to maxLoad, and the objective holds at each step, judged after the
    HPA's reaction; with no headroom the HPA keeps each pod at its capacity, and the objective does not hold at
    the top. The copies and their HPAs are gone after."""
    finals = {}
    for namespace, doc in VERIFICATIONS.items():
        name = doc["metadata"]["name"]
        finals[name] = verified(node, namespace, name)
        (ARTIFACTS / f"{name}-status.yaml").write_text(yaml.safe_dump(finals[name], sort_keys=False))
        (ARTIFACTS / f"{namespace}-events.txt").write_text(
            node.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp").stdout)
    print("\nverification on the real node:", {name: (final["export"].get("autoscaler"), final["verification"])
                                               for name, final in finals.items()})
    held, wrong = finals["verify"]["verification"], finals["verify-wrong"]["verification"]
    assert (held["where"], held["result"]) == ("Cluster", "Holds"), held
    replicas = [step["replicas"] for step in held["steps"]]
    assert [step["load"] for step in held["steps"]] == [40, 87, 134, 180]
    assert replicas[0] == 1 and replicas[-1] >= 3 and replicas == sorted(replicas), held
    assert all(step["outcome"] in ("Pass", "Near") for step in held["steps"]), held
    rescaled = [e.message for e in node.core.list_namespaced_event(
        "lx-verify", field_selector=f"involvedObject.name={held['copy']}-runner,reason=SuccessfulRescale").items]
    assert any("New size: 3" in message for message in rescaled), rescaled
    # no headroom: the HPA's target is a pod at its capacity, so it stops at fewer pods (maxReplicas 2), and the
    # objective does not hold at the top of the ladder
    assert wrong["result"] != "Holds" and wrong["steps"][-1]["outcome"] not in ("Pass", "Near"), wrong
    assert wrong["steps"][-1]["replicas"] < held["steps"][-1]["replicas"], (wrong, held)
    for namespace, doc in VERIFICATIONS.items():
        copy = f"loadstage.io/experiment={finals[doc['metadata']['name']]['verification']['copy']}"
        assert not node.api_autoscaling().list_namespaced_horizontal_pod_autoscaler(namespace).items
        assert not node.apps.list_namespaced_deployment(namespace, label_selector=copy).items
        assert not node.batch.list_namespaced_job(namespace, label_selector=copy).items
        wait_for(lambda ns=namespace, selector=copy: not node.core.list_namespaced_pod(
            ns, label_selector=selector).items, timeout=60)


def test_deleting_an_experiment_mid_stage_leaves_no_object_and_no_container(node):
    namespace = node.restricted_namespace("lx-delete")
    apply(node, namespace, experiment("doomed", pods=1, stages=((2, "60s"),)))
    wait_running_master(node, namespace, "doomed-v1-s1-master")
    assert node.running_containers(namespace)
    deleted = node.kubectl("delete", "-n", namespace, "lx/doomed", "--timeout=60s")
    assert deleted.returncode == 0, deleted.stderr
    selector = "loadstage.io/experiment=doomed"

    def nothing_left():
        return not (node.apps.list_namespaced_deployment(namespace, label_selector=selector).items
                    or node.core.list_namespaced_service(namespace, label_selector=selector).items
                    or node.batch.list_namespaced_job(namespace, label_selector=selector).items
                    or node.core.list_namespaced_pod(namespace, label_selector=selector).items
                    or node.running_containers(namespace))
    wait_for(nothing_left, timeout=90)


def test_an_unpullable_injector_image_fails_the_experiment_within_60s_naming_the_image(node):
    namespace = node.restricted_namespace("lx-badimage")
    image = f"{node_setting('IMAGE_PREFIX')}/loadstage/no-such-injector:0.1.0"
    with FirstJob(node, namespace, "app.kubernetes.io/component=locust-master") as master:
        apply(node, namespace, experiment("badimage", pods=1, stages=((2, "60s"),), cleanup="Delete", image=image))
        wait_for(lambda: status(node, namespace, "badimage").get("phase") == "Failed", timeout=210,
                 explain=lambda: node.explain(namespace, "badimage"))
    failed = status(node, namespace, "badimage")
    assert master.created_at is not None, failed
    took = time.time() - master.created_at
    print(f"\nunpullable injector image: Failed {took:.0f}s after the stage's master Job was created")
    assert took <= 60, f"failed {took:.0f}s after the stage started"
    assert image in failed["message"], failed["message"]
    assert failed["reason"] == "InjectorNotStarting", failed


def test_nothing_leaves_the_machine(node):
    routes = subprocess.run(["ip", "route", "show", "type", "blackhole"], capture_output=True, text=True).stdout
    for cidr in (node_setting("SVC_CIDR"), node_setting("POD_CIDR")):
        assert f"blackhole {cidr}" in routes
    guard, uplink = node_setting("GUARD_CHAIN"), node_setting("UPLINK")
    for iptables in ("iptables", "ip6tables"):
        forward = subprocess.run([iptables, "-t", "mangle", "-S", "FORWARD"], capture_output=True,
                                 text=True).stdout.splitlines()
        assert forward[1] == f"-A FORWARD -j {guard}", forward
        rules = subprocess.run([iptables, "-t", "mangle", "-S", guard], capture_output=True, text=True).stdout
        assert f"-A {guard} -o {uplink} -j DROP" in rules and f"-A {guard} -i {uplink} -j DROP" in rules
    inputs = subprocess.run(["iptables", "-t", "mangle", "-S", "INPUT"], capture_output=True, text=True).stdout
    assert inputs.splitlines()[1].startswith(f"-A INPUT -d {node_setting('BRIDGE_IP')}/32 -i {uplink}"), inputs
    conflist = json.loads(next((ROOT / "tools" / "cluster" / "realnode" / "conf" / "net.d").glob("*.in")).read_text())
    assert conflist["plugins"][0]["ipMasq"] is False

    # every server of ours on the host binds loopback or the node's bridge
    bridge = ipaddress.ip_address(node_setting("BRIDGE_IP"))
    listening = subprocess.run(["ss", "-Hltnup"], capture_output=True, text=True).stdout.splitlines()
    ours = [line for line in listening if "users:" in line]
    assert any("kube-apiserver" in line for line in ours)
    for line in ours:
        address = ipaddress.ip_address(re.sub(r"^\[|\]$", "", line.split()[4].rsplit(":", 1)[0]).split("%")[0])
        assert address.is_loopback or address == bridge, line

    # pods resolve cluster names only: CoreDNS has no upstream
    namespace = node.restricted_namespace("lx-network")
    # not `kubectl run -i --rm`: a pod that ends before kubectl attaches leaves it nothing to print
    started = node.kubectl("run", "dns-probe", "-n", namespace, "--restart=Never",
                         f"--image={node_setting('PYTHON_BASE_IMAGE')}", "--overrides", json.dumps({"spec": {
                             "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                                 "seccompProfile": {"type": "RuntimeDefault"}},
                             "containers": [{"name": "dns-probe", "image": node_setting("PYTHON_BASE_IMAGE"),
                                             "command": ["python3", "-c", DNS_PROBE],
                                             "securityContext": {"allowPrivilegeEscalation": False,
                                                                 "capabilities": {"drop": ["ALL"]}}}]}}))
    assert started.returncode == 0, started.stderr
    ended = node.kubectl("wait", "-n", namespace, "pod/dns-probe", "--for=jsonpath={.status.phase}=Succeeded",
                         "--timeout=120s")
    probe = node.kubectl("logs", "-n", namespace, "dns-probe")
    node.kubectl("delete", "-n", namespace, "pod/dns-probe", "--wait=false")
    assert ended.returncode == 0 and probe.stdout.split() == ["cluster:ok", "outside:refused"], (
        ended.stderr, probe.stdout, probe.stderr)


def process_start(pid: int) -> int | None:
    """When the process started (clock ticks after boot), or None once there is no such PID."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


DNS_PROBE = """
import socket
print("cluster:" + ("ok" if socket.gethostbyname("kubernetes.default.svc.cluster.local") else "no"))
try:
    socket.gethostbyname("example.com")
    print("outside:resolved")
except OSError:
    print("outside:refused")
"""


def test_zz_down_leaves_nothing_behind(node):
    pid_files = list((Path(node_setting("NODE_STATE")) / "pids").iterdir())
    started = {pid: process_start(pid) for pid in (int(f.read_text().split()[0]) for f in pid_files)}
    assert {f.name for f in pid_files} >= {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                           "containerd", "kubelet", "kube-proxy", "api-relay"}, pid_files
    node.down()
    # the same process, not its PID: the tests beside this one start thousands of processes, and PIDs come round
    assert not [pid for pid, start in started.items() if start is not None and process_start(pid) == start]
    run_dir, lib_dir = node_setting("NODE_RUN"), node_setting("NODE_LIB")
    processes = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    assert not [p for p in processes if run_dir in p or lib_dir in p], processes
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    assert run_dir not in mounts and lib_dir not in mounts
    assert not [ns for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if ns.startswith("cni-")]
    bridge = node_setting("BRIDGE")
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    assert "blackhole" not in subprocess.run(["ip", "route", "show", "type", "blackhole"], capture_output=True,
                                             text=True).stdout
    guard = node_setting("GUARD_CHAIN")
    for iptables in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            rules = subprocess.run([iptables, "-t", table, "-S"], capture_output=True, text=True).stdout
            assert "KUBE-" not in rules and guard not in rules, rules
    assert node_setting("BRIDGE_IP") not in subprocess.run(["iptables", "-t", "mangle", "-S"], capture_output=True,
                                                           text=True).stdout
    cgroups = subprocess.run(["bash", "-c", "ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods 2>/dev/null"],
                             capture_output=True, text=True).stdout
    assert not cgroups.strip(), cgroups
