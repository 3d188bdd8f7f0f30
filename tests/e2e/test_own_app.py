"""An app the project did not write as a local target: httpbin (from PyPI), importable only through
spec.target.env.PYTHONPATH, with its own readiness path, no Redis, and no request counter of its own."""

import json
import subprocess
import sys

import psutil
import pytest

from support.documents import BASE
from support.processes import alive, descendants
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.e2e
APPS = ROOT / ".venv" / "test-apps"


def httpbin_experiment(write_experiment, **target):
    return write_experiment({**BASE, "spec": {
        "target": {"app": "httpbin:app", "env": {"PYTHONPATH": str(APPS)}, **target},
        "redis": {"deploy": False},
        "injectors": {"usersPerInjector": 10, "waitTime": {"min": "10ms", "max": "50ms"},
                      "locustfile": {"path": str(ROOT / "examples" / "own-app-locustfile.py")}},
        "stages": [{"injectors": 1, "duration": "5s"}]}})


def run(path, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "loadstage.cli", "run", str(path), "-o", str(tmp_path / "r.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = {}

    def record():
        for p in descendants(proc.pid):
            try:
                p.argv = " ".join(p.cmdline())
            except psutil.Error:
                p.argv = ""
            seen.setdefault(p.pid, p)
        return proc.poll() is not None
    wait_for(record, timeout=120, interval=0.2)
    out, err = proc.communicate()
    return proc.returncode, out, err, list(seen.values())


def test_a_third_party_app_serves_a_stage_with_its_own_readiness_path_and_no_redis(write_experiment, tmp_path):
    path = httpbin_experiment(write_experiment, readinessProbe={"httpGet": {"path": "/status/200"}})
    code, out, err, started = run(path, tmp_path)
    assert code == 0, err
    stage = json.loads((tmp_path / "r.json").read_text())["status"]["variants"][0]["stages"][0]
    assert stage["requests"] > 100 and stage["failures"] == 0, stage
    assert set(stage["byMethod"]) == {"GET", "POST"}
    assert stage["redisPeakConnections"] is None and stage["redisConnectionsReceived"] is None
    assert stage["target"]["servedRequests"] is None        # httpbin counts nothing the way loadstage reads
    assert not [p for p in started if "redis-server" in p.argv]
    assert any("httpbin:app" in p.argv and "gunicorn" in p.argv for p in started)
    header, _, row = (line.split("|") for line in out.splitlines()[:3])
    assert row[[h.strip() for h in header].index("Redis peak")].strip() == "-"
    assert not alive(started)


def test_a_readiness_path_the_app_does_not_pass_fails_naming_the_probe_and_its_answer(write_experiment, tmp_path):
    path = httpbin_experiment(write_experiment, readyTimeout="3s",
                              readinessProbe={"httpGet": {"path": "/status/503"}})
    code, out, err, started = run(path, tmp_path)
    assert code == 1
    assert "was not ready within spec.target.readyTimeout (readiness probe http://127.0.0.1:" in err
    assert "/status/503: GET /status/503 answered 503)" in err
    assert json.loads((tmp_path / "r.json").read_text())["status"]["reason"] == "ComponentFailed"
    assert not alive(started)
