"""spec.goal end to end on the local engine: real gunicorn, redis-server and Locust processes, and a pick whose
answer is known by design. Each request holds a thread ~18 ms (the runner app's `fast` delay): one thread
serves at most ~55 req/s, four ~220."""

import json

import pytest
from test_local_engine import finish, start_cli

from support.documents import BASE

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
        "matrix": {"threads": [1, 4], "memory": ["256Mi"]}}})
    out_file = tmp_path / "result.json"
    code, out, err, _ = finish(start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w",
                                         "--fail-on-threshold"), 240)
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
