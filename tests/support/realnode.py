"""The real node for tests: a kubelet with containerd and runc on this machine (scripts/realnode),
running the images this run built from the project's Dockerfile, with the chart installed the way a
user installs it. Pods run in namespaces that enforce Pod Security `restricted`."""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
import time
from pathlib import Path

from kubernetes import watch
from urllib3.exceptions import ProtocolError

from support.kube import GROUP, PLURAL, VERSION, Cluster, binaries
from support.waiting import ROOT, wait_for

SCRIPT = ROOT / "scripts" / "realnode"
LIB = ROOT / "tools" / "cluster" / "realnode" / "lib.sh"
OPERATOR_NAMESPACE = "loadstage-system"
RELEASE = "loadstage"
HISTORY_DB = "history-db"   # a PostgreSQL Deployment, Service and Secret beside the operator: its history


def node_setting(name: str) -> str:
    """A value of tools/cluster/realnode/lib.sh, as the scripts see it."""
    return subprocess.run(["bash", "-c", f'source "{LIB}"; echo "${name}"'], check=True, capture_output=True,
                          text=True).stdout.strip()


def run_script(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([SCRIPT, *args], capture_output=True, text=True)
    assert result.returncode == 0, f"scripts/realnode {' '.join(args)} failed:\n{result.stderr[-4000:]}"
    return result


def chart_values() -> list[str]:
    """The chart with this run's images, and the kubelet's cAdvisor metrics granted (a target's CPU throttling);
    Redis is Debian's redis-server."""
    prefix = node_setting("IMAGE_PREFIX")
    redis_repository, redis_tag = node_setting("REDIS_IMAGE").rsplit(":", 1)
    return ["--set", f"image.repository={prefix}/loadstage/operator",
            "--set", f"runnerImage.repository={prefix}/loadstage/runner-app",
            "--set", f"injectorImage.repository={prefix}/loadstage/injector",
            "--set", f"redisImage.repository={redis_repository}", "--set-string", f"redisImage.tag={redis_tag}",
            "--set", "rbac.nodeMetrics=true"]


def history_database(image: str, uid: int) -> list[dict]:
    """Debian's PostgreSQL in one restricted pod: a cluster made by initdb in an emptyDir at each start, its
    superuser `loadstage` with the Secret's password over TCP (scram) and trusted on its own socket (psql in the
    pod), and a Service in front of it."""
    labels = {"app.kubernetes.io/name": HISTORY_DB}
    start = ("set -e; initdb -D /data/pg -U loadstage --auth-local=trust --auth-host=scram-sha-256 "
             "--pwfile=/secret/password -E UTF8 --no-sync >/dev/null; "
             "echo 'host all all 0.0.0.0/0 scram-sha-256' >> /data/pg/pg_hba.conf; "
             "exec postgres -D /data/pg -c listen_addresses=* -c unix_socket_directories=/tmp -c fsync=off")
    container = {
        "name": "postgres", "image": image, "command": ["sh", "-c", start],
        "ports": [{"name": "postgres", "containerPort": 5432}],
        "readinessProbe": {"exec": {"command": ["pg_isready", "-q", "-h", "/tmp", "-U", "loadstage"]},
                           "periodSeconds": 2},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"},
                         {"name": "password", "mountPath": "/secret", "readOnly": True}]}
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": HISTORY_DB},
         "stringData": {"password": secrets.token_hex(16)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": HISTORY_DB, "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"containers": [container], "securityContext": {"fsGroup": uid},
                      "volumes": [{"name": "data", "emptyDir": {}},
                                  {"name": "password", "secret": {"secretName": HISTORY_DB}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": HISTORY_DB, "labels": labels},
         "spec": {"selector": labels, "ports": [{"name": "postgres", "port": 5432, "targetPort": "postgres"}]}},
    ]


class RealNode(Cluster):
    @classmethod
    def up(cls) -> RealNode:
        """A node with an empty control plane (a running one is stopped first): nothing of an
        earlier run comes back. Images and containerd's image store are kept."""
        started = time.monotonic()
        run_script("images")
        images_seconds = time.monotonic() - started
        run_script("down")
        kubeconfig = run_script("up", "--fresh").stdout.strip().splitlines()[-1]
        node = cls("realnode", kubeconfig, binaries("realnode"))
        node.images_seconds, node.up_seconds = images_seconds, time.monotonic() - started - images_seconds
        return node

    def down(self) -> None:
        """Stops the node and drops etcd's data: a later `up` brings back nothing of these tests."""
        run_script("down", "--purge")

    def restricted_namespace(self, name: str) -> str:
        self.kubectl("create", "namespace", name, check=True)
        self.kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted", "--overwrite",
                     check=True)
        wait_for(lambda: self.kubectl("get", "serviceaccount", "default", "-n", name).returncode == 0)
        return name

    def install_chart(self) -> None:
        """The chart, recording every experiment into a PostgreSQL pod beside the operator (docs/history.md)."""
        self.kubectl("apply", "-f", str(ROOT / "crds"), check=True)
        self.restricted_namespace(OPERATOR_NAMESPACE)
        database = history_database(node_setting("POSTGRES_IMAGE"), int(node_setting("POSTGRES_UID")))
        self.kubectl("apply", "-n", OPERATOR_NAMESPACE, "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": database}), check=True)
        self.kubectl("rollout", "status", "-n", OPERATOR_NAMESPACE, f"deploy/{HISTORY_DB}", "--timeout=180s",
                     check=True)
        history = ["--set", f"history.url=postgresql://loadstage@{HISTORY_DB}.{OPERATOR_NAMESPACE}.svc:5432/postgres",
                   "--set", f"history.passwordSecret.name={HISTORY_DB}"]
        installed = self.helm("upgrade", "--install", RELEASE, ROOT / "charts" / "loadstage", "-n",
                              OPERATOR_NAMESPACE, "--wait", "--timeout", "3m", *chart_values(), *history)
        assert installed.returncode == 0, installed.stderr

    def history_sql(self, query: str) -> list[list[str]]:
        """psql in the history's pod, on its own socket: the rows, each a list of fields."""
        out = self.kubectl("exec", "-n", OPERATOR_NAMESPACE, f"deploy/{HISTORY_DB}", "--", "psql", "-h", "/tmp",
                           "-U", "loadstage", "-d", "postgres", "-AtF", "\t", "-c", query, check=True).stdout
        return [line.split("\t") for line in out.splitlines() if line]

    def operator_pods(self) -> list:
        return [p for p in self.core.list_namespaced_pod(
            OPERATOR_NAMESPACE, label_selector="app.kubernetes.io/component=operator").items
            if p.metadata.deletion_timestamp is None]

    def logs(self, namespace: str, pod: str, container: str | None = None) -> str:
        args = ["logs", "-n", namespace, pod] + (["-c", container] if container else [])
        return self.kubectl(*args).stdout

    def all_logs(self, namespace: str) -> dict[str, str]:
        """Every container's log in the namespace, by pod/container."""
        return {f"{p.metadata.name}/{c.name}": self.logs(namespace, p.metadata.name, c.name)
                for p in self.core.list_namespaced_pod(namespace).items for c in p.spec.containers}

    def evidence(self, path: Path) -> str:
        """After a failure: every pod and Job, the Events, and every container's log in the node's namespaces go
        to `path`; returns a short account (the pods and Jobs not finished, the last Events, the operator's last
        lines)."""
        pods = self.kubectl("get", "pods,jobs", "-A", "-o", "wide").stdout
        events = self.kubectl("get", "events", "-A", "--sort-by=.lastTimestamp").stdout
        namespaces = [n.metadata.name for n in self.core.list_namespace().items
                      if not n.metadata.name.startswith("kube-") and n.metadata.name != "default"]
        logs = {f"{n}/{k}": v for n in namespaces for k, v in self.all_logs(n).items()}
        path.write_text("\n".join([pods, events, *(f"== {k}\n{v}" for k, v in sorted(logs.items()))]))
        operator = next((v for k, v in logs.items() if k.startswith(f"{OPERATOR_NAMESPACE}/")), "")
        unfinished = [line for line in pods.splitlines() if "Complete" not in line]   # Completed pods, Complete Jobs
        return "\n".join(["pods and Jobs:", *unfinished, "last Events:", *events.splitlines()[-25:],
                          "the operator's last lines:", *operator.splitlines()[-40:], f"(all of it in {path})"])

    def redis_cli(self, namespace: str, redis_deployment: str, *command: str, auth: bool = True) -> str:
        """redis-cli inside the Redis pod, with the password the pod was given (if any)."""
        login = 'REDISCLI_AUTH="$REDIS_PASSWORD" ' if auth else ""
        return self.kubectl("exec", "-n", namespace, f"deploy/{redis_deployment}", "--", "sh", "-c",
                            f'{login}exec redis-cli "$@"', "redis-cli", *command, check=True).stdout

    def redis_clients(self, namespace: str, redis_deployment: str) -> list[dict[str, str]]:
        """CLIENT LIST of a deployed Redis, run inside its pod; redis-cli's own connection left out."""
        listed = self.redis_cli(namespace, redis_deployment, "CLIENT", "LIST")
        clients = [dict(field.split("=", 1) for field in line.split() if "=" in field)
                   for line in listed.splitlines() if line.strip()]
        return [c for c in clients if c.get("cmd") != "client|list"]

    def running_containers(self, namespace: str) -> list[str]:
        """Containers with a live task in containerd for pods of this namespace."""
        socket = node_setting("NODE_SOCKET")
        ctr = ["ctr", "--address", socket, "--namespace", "k8s.io"]
        labelled = f'labels."io.kubernetes.pod.namespace"=={namespace}'
        ours = subprocess.run([*ctr, "containers", "list", "--quiet", labelled],
                              capture_output=True, text=True, check=True).stdout.split()
        tasks = subprocess.run([*ctr, "tasks", "list"], capture_output=True, text=True, check=True).stdout
        running = {line.split()[0] for line in tasks.splitlines()[1:] if "RUNNING" in line}
        return [c for c in ours if c in running]


class _WatchThread:
    """A watch read on a thread of its own while the `with` block runs; `_seen` takes each event."""

    def __init__(self, list_call, *args, **kwargs):
        self._stream = lambda: self._watch.stream(list_call, *args, timeout_seconds=900, **kwargs)
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stopped = False

    def _seen(self, event: dict) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        try:
            for event in self._stream():
                self._seen(event)
        except (OSError, ProtocolError):
            if not self._stopped:
                raise

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped = True
        self._watch.stop()


class StatusRecorder(_WatchThread):
    """Records every status a LoadExperiment goes through, from a watch."""

    def __init__(self, node: RealNode, namespace: str, name: str):
        super().__init__(node.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
                         field_selector=f"metadata.name={name}")
        self.statuses: list[dict] = []

    def _seen(self, event: dict) -> None:
        if not isinstance(event.get("object"), dict):   # a watch's ERROR event may carry no object
            return
        status = event["object"].get("status")
        if status and (not self.statuses or status != self.statuses[-1]):
            self.statuses.append(json.loads(json.dumps(status)))


class FirstJob(_WatchThread):
    """When the first Job that matches a selector was created, from a watch: a Job that a cleanup removes
    moments after it was created is seen all the same."""

    def __init__(self, node: RealNode, namespace: str, selector: str):
        super().__init__(node.batch.list_namespaced_job, namespace, label_selector=selector)
        self.created_at: float | None = None

    def _seen(self, event: dict) -> None:
        if self.created_at is None:
            self.created_at = event["object"].metadata.creation_timestamp.timestamp()


class LxWatch:
    """`kubectl get lx -w`, as a user would watch it, written to a file."""

    def __init__(self, node: RealNode, namespace: str, path: Path):
        self.path = path
        self._out = open(path, "w")
        self._process = subprocess.Popen([node.bin / "kubectl", "--kubeconfig", node.kubeconfig, "get", "lx", "-n",
                                          namespace, "-w"], stdout=self._out, stderr=subprocess.STDOUT)

    def __enter__(self) -> LxWatch:
        return self

    def __exit__(self, *exc) -> None:
        self._process.terminate()
        self._process.wait(10)
        self._out.close()

    def text(self) -> str:
        return self.path.read_text()
