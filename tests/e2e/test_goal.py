"""spec.goal end to end on the local engine: real gunicorn, redis-server and Locust processes, and a pick whose
answer is known by design. Each request holds a thread ~18 ms (the runner app's `fast` delay): one thread
serves at most ~55 req/s, four ~220."""

import json

import pytest
from test_local_engine import finish, start_cli

from support.documents import BASE
from support.processes import alive

pytestmark = pytest.mark.e2e

RATE = 80


@pytest.mark.long
@pytest.mark.fair_cpu
def test_a_goal_picks_the_variant_that_meets_the_objective_and_drops_the_one_that_breaks_it(write_experiment,
                                                                                         tmp_path):
    path = write_experiment({**BASE, "spec": {
        "target": {"pods": 1, "workers": 1, "env": {"RUNNER_DELAY": "fast"},
                   "resources": {"limits": {"cpu": "1"}}},
        "injectors": {"scenario": "hello", "maxUsersPerInjector": 40},
        "goal": {"rps": RATE}, "slo": {"p99": "150ms"}, "stageEnd": {"when": "Decided", "min": "8s", "max": "20s"},
        "matrix": {"threads": [1, 4], "memory": ["256Mi"]}, "verify": True}})
    out_file = tmp_path / "result.json"
    code, out, err, _ = finish(start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w",
                                         "--fail-on-threshold", "--warmup-duration", "3s"), 300)
    assert code == 0, err   # a variant met the objective: no threshold failed
    assert "the cheapest that meets p99 <= 150ms at 80 req/s: one stage each at that load" in err
    assert "  note: there is no warm-up: a variant's start-up transient" in err
    status = json.loads(out_file.read_text())["status"]
    found = status["recommendation"]
    one, four = status["variants"]
    # 80 a second queue for one thread of ~18 ms: its p99 climbs past a second, far beyond the objective
    assert one["dropped"]["after"] == 1 and one["dropped"]["reason"].startswith("broke it by far"), one["dropped"]
    assert one["stages"][0]["endedBy"] == "Breached" and one["stages"][0]["durationSeconds"] < 18
    assert (found["reason"], found["variant"], found["runnerUp"]) == ("Found", 1, None), found
    assert found["winner"]["cost"] == {"cores": 1.0, "from": "limit", "memoryBytes": 256 * 2 ** 20}
    # a stage a busy machine leaves undecided runs again, twice as long, and that one decides; the winner's second
    # stage confirms it
    outcomes = [stage["verdict"]["outcome"] for stage in four["stages"]]
    assert outcomes[-1] == "Pass" and outcomes.count("Pass") == 2 and set(outcomes) <= {"Pass", "Undecided"}, outcomes
    assert found["winner"]["confirmed"] is True
    assert four["met"]["headroom"] > 0
    assert found["sentence"] == "threads=4 meets p99 <= 150ms at 80 req/s with 1 core; no other variant met it"
    assert f"Recommendation: {found['sentence']}" in out
    assert "dropped variant 1 after 1 stage(s): broke it by far at the goal's load: p99 " in out
    assert found["order"] == [0, 1]

    # spec.verify: the pick run again as exported (its one pod) at the goal's rate, after a warm-up (3 s: the
    # option's; the run has none, so the goal's variants have none)
    checked = status["verification"]
    assert (checked["where"], checked["variant"], checked["result"]) == ("Local", 1, "Holds"), checked
    (step,) = checked["steps"]
    assert (step["load"], step["replicas"], step["outcome"]) == (RATE, 1, "Pass") and step["p99Ms"] < 150, step
    assert "verify: variant 2 as exported, 1 pod(s) at 80 req/s (80 req/s a pod)" in err
    assert "Verification (Local): Holds: the objective holds at 1 pod(s) at 80 req/s: Pass: p99 " in out

    # `loadstage verify` of an export that is wrong by design: the run's result with threads=1 recommended, which
    # broke the objective by far at this rate; the result file gets its answer, and the exit code says it
    document = json.loads(out_file.read_text())
    document["status"]["recommendation"].update(variant=0, winner={**found["winner"], "variant": 0})
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(document))
    code, out, err, started = finish(start_cli("verify", wrong, "--workdir", tmp_path / "v",
                                               "--warmup-duration", "3s"), 120)
    assert code == 3, err
    assert not alive(started)
    refuted = json.loads(wrong.read_text())["status"]["verification"]
    assert (refuted["result"], refuted["steps"][0]["outcome"], refuted["steps"][0]["replicas"]) == (
        "Breaks", "Fail", 1), refuted
    assert refuted["reason"].startswith("the objective breaks at 1 pod(s) at 80 req/s: Fail: p99 "), refuted
    assert refuted["steps"][0]["p99Ms"] > 3 * 150
    assert "Verification (Local): Breaks: the objective breaks at 1 pod(s) at 80 req/s" in out
    assert json.loads(wrong.read_text())["status"]["variants"] == status["variants"]   # the rest left as it was
