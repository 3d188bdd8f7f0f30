import copy
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

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


def wait_for(check, timeout=20.0, interval=0.1):
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def start_redis(supervisor, tmp_path, port):
    import redis
    from loadstage import commands
    child = supervisor.start("redis", commands.redis_command(port=port, bind="127.0.0.1"),
                             log_path=tmp_path / f"redis-{port}.log", cwd=tmp_path)

    def up():
        try:
            return redis.Redis(port=port, socket_connect_timeout=0.2).ping()
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
