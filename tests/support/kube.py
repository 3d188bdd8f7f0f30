"""Helpers for tests against the kwok-based control plane: the cluster, an operator
process per test, and playing the kubelet for Locust master pods."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import redis
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from loadstage.local.ports import port_free
from loadstage.results.artifact import artifact_line
from support.waiting import ROOT, wait_for

GROUP, VERSION, PLURAL = "loadstage.io", "v1alpha1", "loadexperiments"


KWOK_PORTS = ("etcdPort", "etcdPeerPort", "kubeApiserverPort", "kwokControllerPort", "kubeControllerManagerPort",
              "kubeSchedulerPort")
FIXED_PORTS_FROM, FIXED_PORTS_TO = 22000, 30000   # below 32767, where kwokctl starts its search downwards


def fixed_ports_config(path: Path) -> Path:
    """tools/cluster/kwok.yaml with a port of its own for every component. kwokctl gives a new cluster the first
    free ports below 32767: those of a cluster that is stopped are free, and a cluster created meanwhile would
    take them, so that the stopped one, started again, cannot bind them (and a client reaches the other one)."""
    documents = list(yaml.safe_load_all((ROOT / "tools" / "cluster" / "kwok.yaml").read_text()))
    blocks = list(range(FIXED_PORTS_FROM, FIXED_PORTS_TO, len(KWOK_PORTS)))
    first = os.getpid() % len(blocks)
    start = next(b for b in blocks[first:] + blocks[:first]
                 if all(port_free(p, host="") for p in range(b, b + len(KWOK_PORTS))))
    documents[0]["options"].update(zip(KWOK_PORTS, range(start, start + len(KWOK_PORTS))))
    path.write_text(yaml.safe_dump_all(documents))
    return path


def binaries(group: str) -> Path:
    """The pinned cluster binaries (tools/cluster/build.sh): `kwok` or `realnode`."""
    out = subprocess.run(["bash", ROOT / "tools" / "cluster" / "build.sh", group], check=True,
                         capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


class Cluster:
    @classmethod
    def up(cls, name: str, config: Path | None = None) -> Cluster:
        started = time.monotonic()
        env = {**os.environ, **({"LOADSTAGE_KWOK_CONFIG": str(config)} if config else {})}
        out = subprocess.run([ROOT / "scripts" / "cluster", "up", name], check=True, capture_output=True,
                             text=True, env=env)
        cluster = cls(name, out.stdout.strip().splitlines()[-1], binaries("kwok"))
        cluster.up_seconds = time.monotonic() - started
        return cluster

    @classmethod
    @contextlib.contextmanager
    def running(cls, purpose: str, stoppable: bool = False):
        """A cluster of this process's own with the CRD installed, for as long as the block runs. A `stoppable`
        one has ports of its own (fixed_ports_config), so that it can be stopped and started again."""
        name = f"lstest-{os.getpid()}-{purpose}"
        with tempfile.TemporaryDirectory(prefix="loadstage-kwok-") as tmp:
            cluster = cls.up(name, fixed_ports_config(Path(tmp) / "kwok.yaml") if stoppable else None)
            cluster.log_dir = Path(tmp)     # the master logs kwok serves go with the cluster
            try:
                print(f"\ncluster {cluster.name} up in {cluster.up_seconds:.1f}s")
                installed = cluster.kubectl("apply", "-f", str(ROOT / "crds"))
                assert installed.returncode == 0, f"the API server refused the CRD: {installed.stderr}"
                wait_for(lambda: cluster.kubectl("get", "lx").returncode == 0, timeout=30)
                yield cluster
            finally:
                cluster.down()

    def __init__(self, name: str, kubeconfig: str, bin_dir: Path):
        self.name = name
        self.bin = bin_dir
        self.kubeconfig = kubeconfig
        self.up_seconds = None
        self.log_dir: Path | None = None
        self.api = config.new_client_from_config(config_file=self.kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.networking = client.NetworkingV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def down(self):
        subprocess.run([ROOT / "scripts" / "cluster", "down", self.name], check=False)

    def _kwokctl(self, *args):
        workdir = os.environ.get("LOADSTAGE_CLUSTER_DIR") or str(Path.home() / ".cache" / "loadstage" / "kwok")
        subprocess.run([self.bin / "kwokctl", *args, "cluster", "--name", self.name], check=True,
                       capture_output=True, env={**os.environ, "KWOK_WORKDIR": workdir})

    def stop(self):
        """Stops the whole control plane (API server, etcd, controllers, kwok); its state stays on disk."""
        self._kwokctl("stop")

    def start(self):
        self._kwokctl("start")
        wait_for(lambda: self.kubectl("get", "--raw", "/readyz").returncode == 0, timeout=60)

    def drop_namespace(self, name: str) -> None:
        """Deletes a test's namespace once its operator has stopped: its LoadExperiments lose the finalizer no
        operator will remove now, so the namespace goes at once and no later operator (of all namespaces, on
        this test process's cluster) picks them up."""
        for item in self.custom.list_namespaced_custom_object(GROUP, VERSION, name, PLURAL)["items"]:
            if item["metadata"].get("finalizers"):
                with contextlib.suppress(ApiException):
                    self.custom.patch_namespaced_custom_object(GROUP, VERSION, name, PLURAL, item["metadata"]["name"],
                                                               {"metadata": {"finalizers": None}})
        self.core.delete_namespace(name)

    def kubectl(self, *args, input=None, check=False):
        return subprocess.run([self.bin / "kubectl", "--kubeconfig", self.kubeconfig, *args], input=input,
                              capture_output=True, text=True, check=check)

    def api_autoscaling(self):
        return client.AutoscalingV2Api(self.api)

    def api_rbac(self):
        return client.RbacAuthorizationV1Api(self.api)

    def helm(self, *args, check=False):
        return subprocess.run([self.bin / "helm", "--kubeconfig", self.kubeconfig, *map(str, args)],
                              capture_output=True, text=True, check=check)

    def service_account_kubeconfig(self, namespace, account, path: Path) -> str:
        """A kubeconfig that authenticates as a ServiceAccount, with a token from the TokenRequest API."""
        token = self.kubectl("create", "token", account, "-n", namespace, "--duration=2h", check=True).stdout.strip()
        admin = yaml.safe_load(Path(self.kubeconfig).read_text())
        cluster_entry = admin["clusters"][0]
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "clusters": [cluster_entry],
            "users": [{"name": account, "user": {"token": token}}],
            "contexts": [{"name": account, "context": {"cluster": cluster_entry["name"], "user": account}}],
            "current-context": account}))
        return str(path)

    def lx(self, namespace, name):
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def status(self, namespace, name):
        return self.lx(namespace, name).get("status") or {}

    def explain(self, namespace, name) -> str:
        """What a timed-out wait leaves to read: the experiment's phase, its pods and the latest events."""
        status = self.status(namespace, name)
        pods = [f"{p.metadata.name}={p.status.phase}" for p in self.core.list_namespaced_pod(namespace).items]
        events = self.core.list_namespaced_event(namespace).items
        events.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
        latest = [f"{e.involved_object.kind}/{e.involved_object.name} {e.reason}: {e.message}" for e in events[-8:]]
        return (f"phase {status.get('phase')} ({status.get('reason')}: {status.get('message')}); "
                f"pods {pods}; events {latest}")


class OperatorProcess:
    def __init__(self, kubeconfig: str, scope: list[str], redis_sample_url: str, log_path: Path, port: int,
                 extra: tuple[str, ...] = (), env: dict[str, str] | None = None):
        self.log_path = log_path
        self.port = port
        env = {**os.environ, "KUBECONFIG": kubeconfig, **(env or {})}
        self.log = open(log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "loadstage.cli", "operator", *scope, "--liveness-port", str(port),
             "--listen-address", "127.0.0.1",
             "--redis-sample-url", redis_sample_url, "--runner-image", "loadstage/runner-app:test",
             "--injector-image", "loadstage/injector:test", *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        wait_for(self.healthy, timeout=30)

    def healthy(self):
        assert self.process.poll() is None, self.output()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def kill(self, sig=signal.SIGKILL):
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def api_requests(cluster, resource: str, verb: str) -> int:
    """How many requests of a verb on one object of a resource the API server has served (its own counter)."""
    text = cluster.kubectl("get", "--raw", "/metrics", check=True).stdout
    return int(sum(s.value for family in text_string_to_metric_families(text) if family.name == "apiserver_request"
                   for s in family.samples if s.name == "apiserver_request_total" and s.labels.get("verb") == verb
                   and s.labels.get("resource") == resource and s.labels.get("scope") == "resource"))


def pods(cluster, namespace, selector):
    return cluster.core.list_namespaced_pod(namespace, label_selector=selector).items


def _terminate(cluster, namespace, pod, phase, ready_reason, exit_code, reason, message):
    """What a kubelet writes when a pod's only container has exited (restartPolicy Never)."""
    now = dt.datetime.now(dt.UTC).isoformat()
    cs = pod.status.container_statuses[0]
    cluster.core.patch_namespaced_pod_status(pod.metadata.name, namespace, {"status": {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "False", "reason": ready_reason}],
        "containerStatuses": [{
            "name": cs.name, "image": cs.image, "imageID": "", "ready": False, "restartCount": 0,
            "started": False, "state": {"terminated": {
                "exitCode": exit_code, "reason": reason, "message": message,
                "startedAt": now, "finishedAt": now}}}]}})


def finish_job_pods(cluster, namespace, job_name, message=""):
    """What a kubelet writes when a Job's containers exit 0: the master's termination message."""
    finished = 0
    for pod in [p for p in pods(cluster, namespace, f"job-name={job_name}") if p.status.container_statuses]:
        try:
            _terminate(cluster, namespace, pod, "Succeeded", "PodCompleted", 0, "Completed", message)
            finished += 1
        except ApiException as e:
            if e.status != 404:  # the operator deleted the Job once the master finished
                raise
    return finished


def crash_pod(cluster, namespace, pod, exit_code=1, message=""):
    """What a kubelet writes when a pod's only container exits non-zero."""
    _terminate(cluster, namespace, pod, "Failed", "PodFailed", exit_code, "Error", message)


@dataclass(frozen=True)
class RealStage:
    """What a real Locust master produced for a stage: its headline (the termination message) and its
    artifact (the last line of its log)."""
    summary: dict
    artifact: dict


def serve_master_log(cluster, namespace, pod_name, artifact: dict, log_dir: Path, cut: int | None = None) -> None:
    """What a kubelet serves as the master container's log: here kwok serves it from a file named by a
    Logs object. The file is in the CRI log format. `cut`: the artifact line ends after that many characters."""
    log_file = log_dir / f"{namespace}-{pod_name}.log"
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    line = artifact_line(artifact)[:cut]
    log_file.write_text(f"{stamp} stdout F locust: the stage is over\n{stamp} stdout F {line}\n")
    cluster.custom.create_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", namespace, "logs", {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs", "metadata": {"name": pod_name},
        "spec": {"logs": [{"containers": ["locust-master"], "logsFile": str(log_file)}]}})


def finish_stage(cluster, namespace, master, workers, stage: RealStage, log_dir: Path | None = None,
                 cut: int | None = None):
    (pod,) = [p for p in pods(cluster, namespace, f"job-name={master}") if p.status.container_statuses]
    serve_master_log(cluster, namespace, pod.metadata.name, stage.artifact,
                     log_dir or cluster.log_dir or Path(tempfile.gettempdir()), cut)
    assert finish_job_pods(cluster, namespace, master, json.dumps(stage.summary)) == 1
    finish_job_pods(cluster, namespace, workers)


def a_running_pod_of_job(cluster, namespace, job_name, timeout=30):
    """One of the Job's pods once kwok has made it Running, with its container's status (the worker Job's other
    pods may not be yet)."""
    return wait_for(lambda: next((p for p in pods(cluster, namespace, f"job-name={job_name}")
                                  if p.status.phase == "Running" and p.status.container_statuses), None),
                    timeout=timeout)


def running_pods_of_job(cluster, namespace, job_name, count=1, timeout=30):
    return wait_for(lambda: len([p for p in pods(cluster, namespace, f"job-name={job_name}")
                                 if p.status.phase == "Running"]) >= count, timeout=timeout,
                    interval=0.1 if count < 100 else 1)


# -- an experiment on the kwok cluster, the operator's view ------------------------------------------

def example(name):
    return yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())


def apply(cluster, namespace, doc):
    return cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))


def stages_done(cluster, namespace, name, variant=0):
    variants = cluster.status(namespace, name).get("variants") or []
    return len(variants[variant]["stages"]) if len(variants) > variant else 0


def wait_phase(cluster, namespace, name, phase, timeout=60):
    return wait_for(lambda: cluster.status(namespace, name).get("phase") == phase, timeout=timeout)


def play_stage(cluster, namespace, name, run, injectors, stage, hold_connections=0, sampler_port=None):
    """Waits for a stage's Jobs and pods, then finishes them as a kubelet would."""
    master, workers = f"{name}-{run}-master", f"{name}-{run}-workers"
    running_pods_of_job(cluster, namespace, master)
    running_pods_of_job(cluster, namespace, workers, injectors)
    held = [redis.Redis(port=sampler_port) for _ in range(hold_connections)]
    for r in held:
        r.ping()
    if held:
        sampled_since(held[0])
    finish_stage(cluster, namespace, master, workers, stage)
    for r in held:
        r.close()


def sampled_since(probe: redis.Redis, timeout: float = 10) -> None:
    """Returns once the Redis sampler has run INFO since the call: counted in INFO commandstats, less the
    probe's own INFO calls. The probe is one of the connections the sampler must count: no extra client."""
    def info_calls():
        return probe.info("commandstats").get("cmdstat_info", {}).get("calls", 0)
    before, own = info_calls(), 1
    while True:
        own += 1
        if info_calls() - before - own >= 1:
            return
        if own > timeout * 10:
            raise AssertionError(f"the Redis sampler ran no INFO within {timeout}s")
        time.sleep(0.1)


def children(cluster, namespace, name):
    selector = f"loadstage.io/experiment={name}"
    return (cluster.apps.list_namespaced_deployment(namespace, label_selector=selector).items
            + cluster.core.list_namespaced_service(namespace, label_selector=selector).items
            + cluster.batch.list_namespaced_job(namespace, label_selector=selector).items
            + pods(cluster, namespace, selector))


def event_reasons(cluster, namespace, name):
    return [e.reason for e in cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}").items]


def services_port(cluster, namespace, name):
    return cluster.core.read_namespaced_service(name, namespace).spec.ports[0].port


# -- NetworkPolicies, read as the network plugin would match them ------------------------------------

def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def policy_reach(policies: list[dict], pods: dict[str, dict]) -> dict[str, set[str]]:
    """For each pod a policy protects (by name): the pods of the same namespace it admits. `policies` as the
    API server returns them (dicts), `pods`: labels by pod name. A peer with a namespaceSelector or an
    ipBlock names no pod of the namespace here."""
    reach: dict[str, set[str]] = {}
    for policy in policies:
        spec = policy["spec"]
        protected = [name for name, labels in pods.items() if _selects(spec["podSelector"], labels)]
        admitted = {name for rule in spec.get("ingress") or [] for peer in rule.get("from") or []
                    if "podSelector" in peer and "namespaceSelector" not in peer and "ipBlock" not in peer
                    for name, labels in pods.items() if _selects(peer["podSelector"], labels)}
        for name in protected:
            reach.setdefault(name, set()).update(admitted)
    return reach
