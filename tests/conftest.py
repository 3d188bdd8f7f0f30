# Locust patches the standard library with gevent on import; it must come before ssl is imported.
import locust  # noqa: F401  isort: skip

import copy
import os
import signal
import textwrap
from pathlib import Path

import pytest
import yaml

from waiting import ROOT, wait_for  # noqa: F401  (re-exported for the tests)

BASE = {
    "apiVersion": "loadstage.io/v1alpha1",
    "kind": "LoadExperiment",
    "metadata": {"name": "demo"},
    "spec": {"stages": [{"injectors": 1, "duration": "10s"}]},
}


@pytest.fixture
def base_doc():
    return copy.deepcopy(BASE)


@pytest.fixture
def write_experiment(tmp_path):
    def write(doc, name="experiment.yaml"):
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
        return path
    return write


def dedent(text):
    return textwrap.dedent(text).lstrip()


@pytest.fixture
def supervisor():
    from loadstage.processes import Supervisor
    sup = Supervisor()
    yield sup
    sup.stop_all()


def start_redis(supervisor, tmp_path, port, *extra_args):
    import redis
    from loadstage import commands
    child = supervisor.start("redis", commands.redis_command(port=port, bind="127.0.0.1") + list(extra_args),
                             log_path=tmp_path / f"redis-{port}.log", cwd=tmp_path)

    def up():
        try:
            return redis.Redis(port=port, socket_connect_timeout=0.2).ping()
        except redis.AuthenticationError:
            return True
        except redis.ConnectionError:
            return False
    wait_for(up)
    return child


def descendants(pid):
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(processes):
    return [p for p in processes if p.is_running() and p.status() != "zombie"]


@pytest.fixture(scope="session")
def cluster():
    """A real control plane (kube-apiserver, etcd, controller-manager, scheduler, kwok) on loopback."""
    import os
    from kube import Cluster
    c = Cluster.up(f"lstest-{os.getpid()}")
    print(f"\ncluster up in {c.up_seconds:.1f}s")
    c.kubectl("apply", "-f", str(ROOT / "crds"), check=True)
    wait_for(lambda: c.kubectl("get", "lx").returncode == 0, timeout=30)
    yield c
    c.down()


@pytest.fixture(scope="session")
def real_stage(tmp_path_factory):
    """What a real Locust master wrote for a small local stage: what a master pod would report."""
    import json
    import subprocess
    import sys
    from kube import RealStage
    work = tmp_path_factory.mktemp("real-stage")
    experiment = work / "exp.yaml"
    experiment.write_text(yaml.safe_dump({**BASE, "spec": {
        "injectors": {"usersPerInjector": 5, "waitTime": {"min": "10ms", "max": "50ms"}},
        "stages": [{"injectors": 2, "duration": "3s"}]}}))
    subprocess.run([sys.executable, "-m", "loadstage.cli", "run", str(experiment), "-q", "--workdir",
                    str(work / "w")], check=True, capture_output=True)
    stage_dir = work / "w" / "variant-1" / "stage-1"
    stage = RealStage(json.loads((stage_dir / "summary.json").read_text()),
                      json.loads((stage_dir / "artifact.json").read_text()))
    assert stage.summary["requests"] > 0 and stage.artifact["histogram"]
    return stage


@pytest.fixture
def namespace(cluster, request):
    import re
    import uuid
    name = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower())[:36].strip("-") + "-" + uuid.uuid4().hex[:6]
    cluster.core.create_namespace({"metadata": {"name": name}})
    yield name
    cluster.core.delete_namespace(name)


@pytest.fixture
def sampler_redis(supervisor, tmp_path):
    """A loopback redis-server that stands in for the experiment's Redis Service for the sampler."""
    from loadstage.local_backend import free_port
    port = free_port()
    start_redis(supervisor, tmp_path, port)
    return port


@pytest.fixture
def operator(cluster, namespace, sampler_redis, tmp_path):
    from kube import OperatorProcess
    from loadstage.local_backend import free_port
    started = []

    def start(kubeconfig=None, scope=None, extra=()):
        op = OperatorProcess(kubeconfig or cluster.kubeconfig, scope or ["-n", namespace],
                             f"redis://127.0.0.1:{sampler_redis}/0", tmp_path / f"operator-{len(started)}.log",
                             free_port(), extra)
        started.append(op)
        return op
    start.started = started
    yield start
    for op in started:
        op.kill(signal.SIGTERM)
