# This process imports Locust without its gevent monkey-patching: a patched threading blocks the threads an xdist
# worker talks to its controller with. The Locust processes the tests start still patch (the flag is not inherited).
import os  # isort: skip
os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"
import locust  # noqa: F401  isort: skip
del os.environ["LOCUST_SKIP_MONKEY_PATCH"]

import atexit
import copy
import shutil
import signal
import tempfile

import pytest
import yaml
from hypothesis import HealthCheck, settings

from loadstage.api.conformance import AUDIT_ENV
from support.documents import BASE
from support.processes import start_redis
from support.waiting import ROOT

pytest_plugins = ["support.timing", "support.scheduling"]   # how scripts/test times a run, and divides it

# Every status loadstage writes in a test (the engine's, `loadstage run`'s, the operator's, in this process or a
# child) is checked against the CRD's status schema before it is written: a field it lacks fails the run.
os.environ[AUDIT_ENV] = "1"

# Every run a test makes records into the history by default ($XDG_DATA_HOME/loadstage): a directory of this
# process's (each xdist worker's own), never the user's.
os.environ.pop("LOADSTAGE_HISTORY", None)
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="loadstage-data-")
atexit.register(shutil.rmtree, os.environ["XDG_DATA_HOME"], ignore_errors=True)


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


@pytest.fixture
def supervisor():
    from loadstage.local.processes import Supervisor
    sup = Supervisor()
    yield sup
    sup.stop_all()


@pytest.fixture(scope="session")
def cluster():
    """A real control plane (kube-apiserver, etcd, controller-manager, scheduler, kwok) on loopback, one per
    test process (each xdist worker has its own); tests keep apart by namespace. It goes down after the
    process's last test of the cluster tier (support/scheduling.py), not at the session's end."""
    from support.kube import Cluster
    with Cluster.running("session") as c:
        yield c


@pytest.fixture(scope="session")
def real_stage():
    """What a real Locust master wrote for a small local stage (2 injectors, 10 s), kept in tests/data: what a
    master pod would report. tests/e2e/test_local_engine.py checks that a fresh stage has the same shape."""
    import json

    from support.kube import RealStage
    data = ROOT / "tests" / "data"
    return RealStage(json.loads((data / "stage-summary.json").read_text()),
                     json.loads((data / "stage-artifact.json").read_text()))


@pytest.fixture
def namespace(cluster, request):
    import re
    import uuid
    name = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower())[:36].strip("-") + "-" + uuid.uuid4().hex[:6]
    cluster.core.create_namespace({"metadata": {"name": name}})
    yield name
    cluster.drop_namespace(name)


@pytest.fixture
def sampler_redis(supervisor, tmp_path):
    """A loopback redis-server that stands in for the experiment's Redis Service for the sampler."""
    from loadstage.local.ports import free_port
    port = free_port()
    start_redis(supervisor, tmp_path, port)
    return port


@pytest.fixture
def operator(cluster, namespace, sampler_redis, tmp_path):
    from loadstage.local.ports import free_port
    from support.kube import OperatorProcess
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


# Property tests: 300 examples each in the unit tier; HYPOTHESIS_PROFILE=deep for a long hunt.
settings.register_profile("suite", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", parent=settings.get_profile("suite"), max_examples=5000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))
