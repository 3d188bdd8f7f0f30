"""Apps the project did not write as local targets, importable only through spec.target.env.PYTHONPATH: httpbin
(WSGI, from PyPI), with its own readiness path, no Redis, no request counter of its own, and CPU limits that its
cgroups enforce; datasette (ASGI, from PyPI) under uvicorn and under gunicorn's uvicorn class."""

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from loadstage.local.cgroups import Cgroups
from support.documents import BASE
from support.processes import alive, descendants
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.e2e
APPS = ROOT / ".venv" / "test-apps"
# CFS hands out quota in 5 ms slices per CPU, so a 100 ms period may overrun by up to 5 ms per CPU
SLACK = 0.05 * os.cpu_count()


def httpbin_experiment(write_experiment, matrix=None, **target):
    return write_experiment({**BASE, "spec": {
        "target": {"app": "httpbin:app", "env": {"PYTHONPATH": str(APPS)}, **target},
        **({"matrix": matrix} if matrix else {}),
        "redis": {"deploy": False},
        "injectors": {"usersPerInjector": 10, "waitTime": {"min": "10ms", "max": "50ms"},
                      "locustfile": {"path": str(ROOT / "examples" / "own-app-locustfile.py")}},
        "stages": [{"injectors": 1, "duration": "5s"}]}})


def _loadstage_cgroup(proc_cgroup: str, controller: str) -> Path | None:
    """The directory of a process's loadstage cgroup of one controller (cgroup v1), where it sits in one."""
    path = next((line.split(":", 2)[2] for line in proc_cgroup.splitlines()
                 if controller in line.split(":")[1].split(",") and "loadstage-" in line), None)
    return None if path is None else Path("/sys/fs/cgroup") / controller / path.lstrip("/")


def memory_limit(proc_cgroup: str) -> int | None:
    """The memory limit the kernel holds a process to, where it sits in a loadstage cgroup."""
    where = _loadstage_cgroup(proc_cgroup, "memory")
    return None if where is None else int((where / "memory.limit_in_bytes").read_text())


def cpu_limit(proc_cgroup: str) -> float | None:
    """The cores the kernel holds a process to (its CFS quota over its period), where it sits in one."""
    where = _loadstage_cgroup(proc_cgroup, "cpu")
    if where is None:
        return None
    return int((where / "cpu.cfs_quota_us").read_text()) / int((where / "cpu.cfs_period_us").read_text())


def serving(started, app):
    """The server processes of `app`: not the shell that puts each in its cgroup (until it runs the server, outside
    of it), nor the Python that read the app's interface before the run."""
    return [p for p in started if app in p.argv and "loadstage-cgroup-join" not in p.argv
            and not p.argv.startswith(f"{sys.executable} -c ")]


def run(path, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "loadstage.cli", "run", str(path), "-o", str(tmp_path / "r.json"),
                             "--workdir", str(tmp_path / "w")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = {}

    def record():
        for p in descendants(proc.pid):
            try:
                p.argv = " ".join(p.cmdline())
                p.cgroups = Path(f"/proc/{p.pid}/cgroup").read_text()
                p.memory_limit = memory_limit(p.cgroups)
                p.cpu_limit = cpu_limit(p.cgroups)
            except (psutil.Error, OSError):
                p.argv = p.cgroups = ""
            # an exiting process leaves its cgroups for the root's before its command line goes: a reading of the
            # same command line outside loadstage's cgroups after one inside them is its exit, not where it ran
            before = seen.get(p.pid)
            if p.argv and not (before and before.argv == p.argv and "loadstage-" in before.cgroups
                               and "loadstage-" not in p.cgroups):
                seen[p.pid] = p
        return proc.poll() is not None
    wait_for(record, timeout=120, interval=0.2)
    out, err = proc.communicate()
    return proc.returncode, out, err, list(seen.values())


def test_a_third_party_app_serves_a_stage_with_its_own_readiness_path_no_redis_and_enforced_cpu_limits(
        write_experiment, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the local engine enforces limits through the cgroup filesystem, which needs root")
    path = httpbin_experiment(write_experiment, readinessProbe={"httpGet": {"path": "/status/200"}},
                              resources={"limits": {"memory": "256Mi"}}, matrix={"cpu": ["100m", "400m"]})
    code, out, err, started = run(path, tmp_path)
    assert code == 0, err
    variants = json.loads((tmp_path / "r.json").read_text())["status"]["variants"]
    for variant in variants:
        (stage,) = variant["stages"]
        assert stage["requests"] > 100 and stage["failures"] == 0, stage
        assert set(stage["byMethod"]) == {"GET", "POST"}
        assert stage["redisPeakConnections"] is None and stage["redisConnectionsReceived"] is None
        assert stage["target"]["servedRequests"] is None        # httpbin counts nothing the way loadstage reads
    low, high = (v["stages"][0]["target"]["peakCpuCores"] for v in variants)
    # each limit holds: the kernel held each variant's servers to its quota, and each peak stayed under it (how much
    # CPU a server got under its limit depends on what else the machine runs: not asserted)
    assert low <= 0.1 + SLACK and high <= 0.4 + SLACK, (low, high)
    assert [v["settings"]["cpu"] for v in variants] == ["100m", "400m"]
    assert all(v["settings"]["memory"] == "256Mi" for v in variants)
    assert not [p for p in started if "redis-server" in p.argv]
    servers = serving(started, "httpbin:app")
    outside = [(p.argv, p.cgroups) for p in servers if not re.search(r"cpu:/.*loadstage-\d+/v[12]-pod-1", p.cgroups)]
    assert servers and not outside, outside
    assert {p.memory_limit for p in servers} == {256 * 2**20}      # what the kernel holds each server to
    assert sorted({p.cpu_limit for p in servers}) == [0.1, 0.4]
    # every cgroup of the run is gone (they sit beside the ones this test process would get, and beside those of
    # the runs of tests alongside: only this run's are looked for)
    runs = {name for p in servers for name in re.findall(r"loadstage-\d+", p.cgroups)}
    assert len(runs) == 1
    assert not [base.parent / name for base in Cgroups.plan().bases.values() for name in runs
                if (base.parent / name).exists()]
    lines = out.splitlines()
    header = lines[lines.index(next(line for line in lines if line.startswith("Variant  | Injectors | Users | "
                                                                             "Requests")))].split("|")
    rows = [line.split("|") for line in lines if line.startswith("cpu=")][-2:]
    column = [h.strip() for h in header].index("Target CPU (cores, % of limit)")
    assert all(re.fullmatch(r"\d\.\d\d \(\d+%\)", row[column].strip()) for row in rows), rows
    assert all(row[[h.strip() for h in header].index("Redis peak")].strip() == "-" for row in rows)
    assert not alive(started)


def test_a_readiness_path_the_app_does_not_pass_fails_naming_the_probe_and_its_answer(write_experiment, tmp_path):
    path = httpbin_experiment(write_experiment, readyTimeout="3s",
                              readinessProbe={"httpGet": {"path": "/status/503"}})
    code, _out, err, started = run(path, tmp_path)
    assert code == 1
    assert "was not ready within spec.target.readyTimeout (readiness probe http://127.0.0.1:" in err
    assert "/status/503: GET /status/503 answered 503)" in err
    assert json.loads((tmp_path / "r.json").read_text())["status"]["reason"] == "ComponentFailed"
    assert not alive(started)


def test_a_third_party_asgi_app_serves_under_uvicorn_and_gunicorns_uvicorn_class_within_its_cpu_limit(
        write_experiment, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the local engine enforces limits through the cgroup filesystem, which needs root")
    database = tmp_path / "items.db"
    with sqlite3.connect(database) as db:
        db.execute("create table items (id integer primary key, name text)")
        db.executemany("insert into items (name) values (?)", [(f"item {i}",) for i in range(200)])
    path = write_experiment({**BASE, "spec": {
        "target": {"app": "datasette_app:app", "workers": 1, "resources": {"limits": {"cpu": "200m"}},
                   "env": {"PYTHONPATH": f"{APPS}:{ROOT / 'tests' / 'apps'}", "DATASETTE_DB": str(database)},
                   "readinessProbe": {"httpGet": {"path": "/-/versions.json"}}},
        "matrix": {"server": ["uvicorn", "gunicorn"], "workerClass": ["uvicorn"]},
        "redis": {"deploy": False},
        "injectors": {"usersPerInjector": 10, "waitTime": {"min": "5ms", "max": "20ms"},
                      "locustfile": {"path": str(ROOT / "tests" / "apps" / "datasette_locustfile.py")}},
        "stages": [{"injectors": 1, "duration": "5s"}]}})
    code, _out, err, started = run(path, tmp_path)
    assert code == 0, err
    variants = json.loads((tmp_path / "r.json").read_text())["status"]["variants"]
    assert [(v["settings"]["server"], v["settings"].get("workerClass")) for v in variants] == \
        [("uvicorn", None), ("gunicorn", "uvicorn")]
    for variant in variants:
        (stage,) = variant["stages"]
        assert stage["requests"] > 50 and stage["failures"] == 0, stage
        assert set(stage["byMethod"]) == {"GET"}
        # 10 users with 5-20 ms think time want more than 0.2 cores: the limit holds them
        assert stage["target"]["peakCpuCores"] <= 0.2 + SLACK, stage["target"]
    assert {p.cpu_limit for p in serving(started, "datasette_app:app")} == {0.2}
    servers = [p.argv for p in started if "datasette_app:app" in p.argv]
    assert any("bin/uvicorn --host" in a for a in servers), servers
    assert any(a.startswith("gunicorn: master") for a in servers), servers     # its process title
    assert not alive(started)


def test_an_app_whose_interface_cannot_be_inspected_fails_its_first_stage_naming_the_mismatch(write_experiment,
                                                                                              tmp_path):
    """A WSGI app whose call says neither interface (*args) under uvicorn: before, the run exited 5 with 'every
    request failed' and the TypeError only in the target's log."""
    path = write_experiment({**BASE, "spec": {
        "target": {"app": "interfaces:opaque_wsgi_app", "server": "uvicorn", "workers": 1,
                   "env": {"PYTHONPATH": str(ROOT / "tests" / "apps")}},
        "redis": {"deploy": False},
        "injectors": {"usersPerInjector": 2, "waitTime": {"min": "50ms", "max": "100ms"},
                      "locustfile": {"path": str(ROOT / "examples" / "own-app-locustfile.py")}},
        "stages": [{"injectors": 1, "duration": "3s"}, {"injectors": 1, "duration": "3s"}]}})
    done = subprocess.run([sys.executable, "-m", "loadstage.cli", "run", str(path), "-o", str(tmp_path / "r.json"),
                           "--workdir", str(tmp_path / "w")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    status = json.loads((tmp_path / "r.json").read_text())["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InterfaceMismatch")
    assert "every request failed: the app is a WSGI app, which its server calls as ASGI (uvicorn pod 1's log: " \
           "TypeError: " in status["message"], status["message"]
    assert len(status["variants"][0].get("stages", [])) == 0 and status["message"] in done.stderr
