"""ab-style load with real processes: a stage of `requests: N` sends exactly N requests, which the target
counts too; `keepAlive: false` opens a connection per request (the kernel's count of accepted TCP
connections says so); and a goal the time limit cuts short is reported as such."""

import json
import subprocess
import sys

import pytest

from support.documents import BASE

pytestmark = pytest.mark.e2e


def accepted_connections() -> int:
    """TCP connections this network namespace has accepted (Tcp: PassiveOpens in /proc/net/snmp)."""
    header, values = [line.split() for line in open("/proc/net/snmp") if line.startswith("Tcp:")]
    return int(values[header.index("PassiveOpens")])


def run(write_experiment, tmp_path, name, *, keep_alive, stages, scenario="respondent"):
    path = write_experiment({**BASE, "metadata": {"name": name}, "spec": {
        "target": {"pods": 1, "workers": 2, "threads": 4, "workerClass": "gthread"},
        "injectors": {"usersPerInjector": 5, "waitTime": {"min": "0s", "max": "0s"}, "keepAlive": keep_alive,
                      "scenario": scenario},
        "stages": stages}}, name=f"{name}.yaml")
    before = accepted_connections()
    done = subprocess.run([sys.executable, "-m", "loadstage.cli", "run", str(path), "-o", str(tmp_path / "r.json"),
                           "--workdir", str(tmp_path / "w")], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    stages = json.loads((tmp_path / "r.json").read_text())["status"]["variants"][0]["stages"]
    return done.stdout, stages, accepted_connections() - before


# the kernel's count is the whole machine's: never beside the test that makes a target drop thousands
# (test_saturation's, also fair_cpu: the two run on one worker, one after the other)
@pytest.mark.fair_cpu
def test_a_request_goal_sends_exactly_that_many_and_without_keep_alive_each_opens_a_connection(
        write_experiment, tmp_path):
    out, (goal, cut), opened = run(write_experiment, tmp_path, "ab", keep_alive=False, stages=[
        {"injectors": 2, "requests": 1001},                            # 500 + 501, as ab -n 1001 -c 10
        {"injectors": 1, "requests": 1_000_000, "duration": "3s"}])
    assert (goal["requests"], goal["requestGoal"], goal["failures"]) == (1001, 1001, 0)
    assert goal["target"]["servedRequests"] == 1001                   # the server's own count: none more
    assert 0 < goal["durationSeconds"] < 60 and goal["rps"] == pytest.approx(1001 / goal["durationSeconds"], 0.02)
    assert 0 < cut["requests"] < 1_000_000 and 3 <= cut["durationSeconds"] < 10
    assert f"variant 1 stage 1: 1,001 of 1,001 requests in {goal['durationSeconds']:g}s\n" in out
    assert (f"variant 1 stage 2: {cut['requests']:,} of 1,000,000 requests in {cut['durationSeconds']:g}s, "
            "stopped by its time limit (its duration)") in out
    assert opened >= goal["requests"] + cut["requests"], opened    # a connection per request

    # the study's readbody: 70 KB posted, echoed and compared
    _, (kept,), reused = run(write_experiment, tmp_path, "kept", keep_alive=True, scenario="readbody",
                             stages=[{"injectors": 2, "requests": 1001}])
    assert kept["requests"] == kept["target"]["servedRequests"] == 1001 and kept["failures"] == 0
    assert set(kept["byMethod"]) == {"POST"}
    assert reused < 200, reused        # 10 users' connections, the probes, Redis and Locust's own: not 1001
