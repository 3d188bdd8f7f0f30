"""Benchmark (c): what the operator costs the control plane, at 1, 10 and 50 experiments at once.

On the kwok-based cluster (real kube-apiserver, etcd, controllers), the chart is installed and
the operator runs as a local process authenticated as the chart's ServiceAccount. The API
server's audit log records that ServiceAccount's requests only. A driver plays the kubelet:
it finishes each Locust master pod `--stage-seconds` after its Job appeared.

Reported per level: the operator's peak RSS and CPU seconds; API requests per
experiment-minute; the latency from a stage's end (the master pod finished) to the next
stage's master Job appearing; the latency from creating the resource to its first child.

    python benchmarks/operator_cost.py [--levels 1,10,50] [--stage-seconds 20] [--smoke]
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

from common import ROOT, write_result

sys.path.insert(0, str(ROOT / "tests"))
from support.kube import Cluster, RealStage, binaries, finish_stage, pods

SA_NAMESPACE, RELEASE = "loadstage-bench", "bench"
ACCOUNT = f"system:serviceaccount:{SA_NAMESPACE}:{RELEASE}-loadstage"


def audit_policy(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                    "omitStages": ["RequestReceived"],
                                    "rules": [{"level": "Metadata", "users": [ACCOUNT]}, {"level": "None"}]}))
    return path


def experiment(name: str) -> dict:
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"pods": 2, "workers": 2, "threads": 2},
                     "injectors": {"usersPerInjector": 10},
                     "stages": [{"injectors": 1, "duration": "20m"}, {"injectors": 2, "duration": "20m"}]}}


class Driver(threading.Thread):
    """Plays the kubelet for master pods, and times what the operator does."""

    def __init__(self, cluster: Cluster, namespace: str, stage_seconds: float, stage: RealStage, log_dir: Path):
        super().__init__(daemon=True)
        self.cluster, self.namespace, self.stage_seconds, self.stage = cluster, namespace, stage_seconds, stage
        self.log_dir = log_dir
        self.stop = threading.Event()
        self.job_seen: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.first_child: dict[str, float] = {}

    def run(self):
        while not self.stop.wait(0.2):
            now = time.time()
            for job in self.cluster.batch.list_namespaced_job(self.namespace).items:
                self.job_seen.setdefault(job.metadata.name, now)
            for deploy in self.cluster.apps.list_namespaced_deployment(self.namespace).items:
                self.first_child.setdefault(deploy.metadata.labels["loadstage.io/experiment"], now)
            for name, seen in list(self.job_seen.items()):
                if name.endswith("-master") and name not in self.finished and now - seen >= self.stage_seconds:
                    started = pods(self.cluster, self.namespace, f"job-name={name}")
                    if [p for p in started if p.status.container_statuses]:
                        finish_stage(self.cluster, self.namespace, name, name.replace("-master", "-workers"),
                                     self.stage, self.log_dir)
                        self.finished[name] = time.time()


def audit_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def audit_requests(path: Path, start: float, end: float) -> dict[str, int]:
    """Requests the API server received in [start, end), by verb and resource; one per audit ID (a watch
    logs two stages)."""
    seen = {}
    with open(path, "rb") as f:
        for line in f:
            event = json.loads(line)
            received = dt.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
            if start <= received < end:
                ref = event.get("objectRef") or {}
                what = "/".join(x for x in (ref.get("resource"), ref.get("subresource")) if x)
                seen[event["auditID"]] = f"{event['verb']} {what}"
    return dict(collections.Counter(seen.values()).most_common())


def start_operator(kubeconfig: str, sample_url: str, log_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "loadstage.cli", "operator", "--all-namespaces",
                             "--liveness-port", "0", "--redis-sample-url", sample_url],
                            env={**os.environ, "KUBECONFIG": kubeconfig}, stdout=open(log_path, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def api_cost(cluster: Cluster, kubeconfig: str, audit_log: Path, count: int, idle_seconds: float,
             stage: RealStage, sample_url: str, workdir: Path) -> dict:
    """API requests per experiment in an idle minute of a long stage, and per stage transition (from the
    master's end to the next stage's worker pods running, less the idle rate over that window)."""
    namespace = "bench-api-cost"
    cluster.core.create_namespace({"metadata": {"name": namespace}})
    op = start_operator(kubeconfig, sample_url, workdir / "operator-api-cost.log")
    names = [f"exp-{i:03d}" for i in range(count)]

    def workers_running(run: str) -> bool:
        return all(len([p for p in pods(cluster, namespace, f"job-name={n}-{run}-workers")
                        if p.status.phase == "Running"]) == (1 if run == "v1-s1" else 2) for n in names)

    def wait(check, timeout=300):
        deadline = time.time() + timeout
        while not check():
            assert time.time() < deadline, "the experiments did not get there in time"
            time.sleep(0.5)
    try:
        time.sleep(3)
        for name in names:
            cluster.custom.create_namespaced_custom_object("loadstage.io", "v1alpha1", namespace,
                                                           "loadexperiments", experiment(name))
        wait(lambda: workers_running("v1-s1"))
        time.sleep(15)   # every experiment is inside its first stage, waiting
        t0 = time.time()
        time.sleep(idle_seconds)
        t1 = time.time()
        for name in names:
            finish_stage(cluster, namespace, f"{name}-v1-s1-master", f"{name}-v1-s1-workers", stage, workdir)
        wait(lambda: workers_running("v1-s2"))
        time.sleep(10)
        t2 = time.time()
        time.sleep(3)    # the audit log is written behind
        idle = audit_requests(audit_log, t0, t1)
        transition = audit_requests(audit_log, t1, t2)
    finally:
        os.killpg(op.pid, signal.SIGTERM)
        op.wait(60)
        cluster.core.delete_namespace(namespace)
    idle_per_minute = sum(idle.values()) / count / (idle_seconds / 60)
    return {"experiments": count, "idleSeconds": idle_seconds,
            "idleRequestsPerExperimentMinute": round(idle_per_minute, 2), "idleRequests": idle,
            "transitionWindowSeconds": round(t2 - t1, 1),
            "requestsPerTransition": round(sum(transition.values()) / count - idle_per_minute * (t2 - t1) / 60, 1),
            "transitionRequests": transition}


def run_level(cluster: Cluster, kubeconfig: str, audit_log: Path, count: int, stage_seconds: float,
              stage: RealStage, sample_url: str, workdir: Path) -> dict:
    namespace = f"bench-{count}"
    cluster.core.create_namespace({"metadata": {"name": namespace}})
    driver = Driver(cluster, namespace, stage_seconds, stage, workdir)
    driver.start()
    op = start_operator(kubeconfig, sample_url, workdir / f"operator-{count}.log")
    proc = psutil.Process(op.pid)
    time.sleep(3)
    audit_before, cpu_before = audit_lines(audit_log), sum(proc.cpu_times()[:2])
    peak_rss = proc.memory_info().rss
    created: dict[str, float] = {}
    for i in range(count):
        name = f"exp-{i:03d}"
        cluster.custom.create_namespaced_custom_object("loadstage.io", "v1alpha1", namespace, "loadexperiments",
                                                       experiment(name))
        created[name] = time.time()
    done: dict[str, float] = {}
    deadline = time.time() + 600 + 4 * stage_seconds
    while len(done) < count and time.time() < deadline:
        peak_rss = max(peak_rss, proc.memory_info().rss)
        items = cluster.custom.list_namespaced_custom_object("loadstage.io", "v1alpha1", namespace,
                                                             "loadexperiments")["items"]
        for item in items:
            if (item.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                done.setdefault(item["metadata"]["name"], time.time())
        time.sleep(0.5)
    cpu_seconds = sum(proc.cpu_times()[:2]) - cpu_before
    time.sleep(2)  # audit events are written in batches
    requests = audit_lines(audit_log) - audit_before
    os.killpg(op.pid, signal.SIGTERM)
    op.wait(60)
    driver.stop.set()
    driver.join()
    cluster.core.delete_namespace(namespace)
    experiment_minutes = sum(done[n] - created[n] for n in done) / 60
    next_stage = [driver.job_seen[f"{n}-v1-s2-master"] - driver.finished[f"{n}-v1-s1-master"]
                  for n in created if f"{n}-v1-s1-master" in driver.finished and f"{n}-v1-s2-master" in driver.job_seen]
    first_child = [driver.first_child[n] - created[n] for n in created if n in driver.first_child]
    return {
        "experiments": count, "finished": len(done), "stageSeconds": stage_seconds,
        "operatorPeakRssMiB": round(peak_rss / 2**20, 1), "operatorCpuSeconds": round(cpu_seconds, 2),
        "apiRequests": requests, "experimentMinutes": round(experiment_minutes, 2),
        "apiRequestsPerExperimentMinute": round(requests / experiment_minutes, 1) if experiment_minutes else None,
        "stageEndToNextJobSeconds": {"median": round(statistics.median(next_stage), 2),
                                     "max": round(max(next_stage), 2)} if next_stage else None,
        "createToFirstChildSeconds": {"median": round(statistics.median(first_child), 2),
                                      "max": round(max(first_child), 2)} if first_child else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,10,50")
    parser.add_argument("--stage-seconds", type=float, default=20)
    parser.add_argument("--smoke", action="store_true", help="1 experiment, 3 s stages (CI)")
    parser.add_argument("--api-cost", type=int, default=0, metavar="N",
                        help="instead: N experiments' API requests per idle stage-minute and per stage transition")
    parser.add_argument("--idle-seconds", type=float, default=60)
    args = parser.parse_args()
    levels = [1] if args.smoke else [int(x) for x in args.levels.split(",")]
    stage_seconds = 3 if args.smoke else args.stage_seconds
    data = ROOT / "tests" / "data"
    stage = RealStage(json.loads((data / "stage-summary.json").read_text()),
                      json.loads((data / "stage-artifact.json").read_text()))
    with tempfile.TemporaryDirectory(prefix="loadstage-opcost-") as tmp:
        tmp = Path(tmp)
        name = f"opcost-{os.getpid()}"
        policy = audit_policy(tmp / "audit-policy.yaml")
        kubeconfig = subprocess.run([ROOT / "scripts" / "cluster", "up", name, "--", "--kube-audit-policy",
                                     str(policy)], check=True, capture_output=True, text=True).stdout.strip()
        cluster_dir = Path(kubeconfig).parent / "clusters" / name
        redis = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", str(tmp / "r.sock"), "--save", ""],
                                 cwd=tmp,
                                 stdout=subprocess.DEVNULL)
        try:
            cluster = Cluster(name, kubeconfig, binaries("kwok"))
            cluster.kubectl("apply", "-f", str(ROOT / "crds"), check=True)
            installed = cluster.helm("install", RELEASE, ROOT / "charts" / "loadstage", "-n", SA_NAMESPACE,
                                     "--create-namespace", "--wait")
            assert installed.returncode == 0, installed.stderr
            sa_config = cluster.service_account_kubeconfig(SA_NAMESPACE, f"{RELEASE}-loadstage",
                                                           tmp / "sa.kubeconfig")
            subprocess.run([cluster.bin / "kwokctl", "scale", "node", "--name", name, "--replicas", "8"],
                           env={**os.environ, "KWOK_WORKDIR": str(Path(kubeconfig).parent)}, capture_output=True)
            audit_log, sample_url = cluster_dir / "logs" / "audit.log", f"unix://{tmp / 'r.sock'}"
            if args.api_cost:
                cost = api_cost(cluster, sa_config, audit_log, args.api_cost, args.idle_seconds, stage,
                                sample_url, tmp)
            else:
                results = [run_level(cluster, sa_config, audit_log, n, stage_seconds, stage, sample_url, tmp)
                           for n in levels]
        finally:
            redis.terminate()
            redis.wait(10)
            subprocess.run([ROOT / "scripts" / "cluster", "down", name], capture_output=True)
    if args.api_cost:
        print(f"{cost['experiments']} experiments: {cost['idleRequestsPerExperimentMinute']} API requests per "
              f"experiment per idle stage-minute; {cost['requestsPerTransition']} per stage transition "
              f"(window {cost['transitionWindowSeconds']} s)")
        print(f"written to {write_result('operator_api_cost', cost)}")
        return 0
    for r in results:
        print(f"{r['experiments']:3} experiment(s): {r['finished']} finished; operator peak RSS "
              f"{r['operatorPeakRssMiB']} MiB, {r['operatorCpuSeconds']} CPU s; {r['apiRequests']} API requests = "
              f"{r['apiRequestsPerExperimentMinute']} per experiment-minute; stage end -> next Job "
              f"{r['stageEndToNextJobSeconds']} s; create -> first child {r['createToFirstChildSeconds']} s")
    if not args.smoke:
        print(f"written to {write_result('operator_cost', {'levels': results})}")
    return 0 if all(r["finished"] == r["experiments"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
