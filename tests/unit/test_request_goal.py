"""ab-style stages: the request goal's shares, the gate every request passes, the master's options, and
the schema's rules."""

import itertools

import pytest
from locust.exception import StopUser

from loadstage.api.load import ValidationError, parse_experiment
from loadstage.api.types import REQUESTS_TIME_LIMIT
from loadstage.launch import argv as commands
from loadstage.locust.request_gate import RequestGate, install, share
from support.documents import BASE


def experiment(**spec):
    return parse_experiment({**BASE, "spec": {**BASE["spec"], **spec}})


@pytest.mark.parametrize("goal,injectors", [(1001, 2), (50, 3), (2, 5), (100_000, 7), (1, 1)])
def test_the_shares_of_a_goal_add_up_to_it_and_differ_by_one_at_most(goal, injectors):
    shares = [share(goal, injectors, i) for i in range(injectors)]
    assert sum(shares) == goal and max(shares) - min(shares) <= 1


def test_the_gate_sends_exactly_its_share_then_stops_each_user_and_reports_done_once():
    gate, done = RequestGate(), []
    gate.on_done = lambda: done.append(1)
    gate.configure(goal=7, injectors=2, index=0, keep_alive=True)    # this injector's share: 4
    assert [gate.admit({"X": "1"}) for _ in range(4)] == [{"X": "1"}] * 4
    with pytest.raises(StopUser):
        gate.admit(None)
    for _ in range(3):
        gate.note_completed()
    assert done == []
    gate.note_completed()
    gate.note_completed()                     # a request outside the HTTP sessions: counted, done only once
    assert done == [1] and gate.sent == 4


def test_without_keep_alive_every_request_asks_the_server_to_close_and_without_a_goal_none_is_stopped():
    gate = RequestGate()
    gate.configure(goal=0, injectors=3, index=2, keep_alive=False)
    assert gate.quota is None
    assert [gate.admit(None) for _ in range(1000)][-1] == {"Connection": "close"}
    assert gate.admit({"Accept": "a"}) == {"Accept": "a", "Connection": "close"}


def test_a_share_of_nothing_is_done_at_once():
    gate, done = RequestGate(), []
    gate.on_done = lambda: done.append(1)
    gate.configure(goal=2, injectors=3, index=2, keep_alive=True)
    assert done == [1]
    with pytest.raises(StopUser):
        gate.admit(None)


def test_install_routes_a_sessions_requests_through_the_gate_once():
    class Session:
        def request(self, method, url, name=None, headers=None, **kwargs):
            return method, url, name, headers, kwargs
    gate = RequestGate()
    gate.configure(goal=1, injectors=1, index=0, keep_alive=False)
    install((Session,), gate)
    install((Session,), gate)                 # a second install does not gate twice
    assert Session().request("GET", "/a", name="a", timeout=3) == (
        "GET", "/a", "a", {"Connection": "close"}, {"timeout": 3})
    assert gate.sent == 1
    with pytest.raises(StopUser):
        Session().request("GET", "/b")


def test_a_stage_of_requests_gets_its_options_and_a_time_limit():
    e = experiment(injectors={"waitTime": {"min": "0s", "max": "0s"}, "keepAlive": False},
                   stages=[{"injectors": 2, "requests": 1001}, {"injectors": 1, "requests": 50, "duration": "20s"},
                           {"injectors": 1, "duration": "30s"}])
    first, second, _timed = e.spec.stages
    assert (first.requests, first.duration) == (1001, REQUESTS_TIME_LIMIT) and second.duration == 20
    argv = commands.locust_master_command(e, first, host="h", summary_file="s", artifact_file="a", target_metrics=[])
    opts = dict(itertools.pairwise(argv))
    assert (opts["--stage-requests"], opts["--stage-seconds"], opts["--keep-alive"]) == ("1001", "600", "0")
    assert opts["--injector-bound-percent"] == "75"
    plain = experiment(stages=[{"injectors": 1, "duration": "30s"}])
    plain_argv = commands.locust_master_command(plain, plain.spec.stages[0], host="h", summary_file="s",
                                                artifact_file="a", target_metrics=[])
    assert not {"--stage-requests", "--keep-alive", "--injector-bound-percent"} & set(plain_argv)
    wrk = experiment(injectors={"waitTime": {"min": "0s", "max": "0s"}}, stages=[{"injectors": 1, "duration": "9s"}])
    assert "--injector-bound-percent" in commands.locust_master_command(
        wrk, wrk.spec.stages[0], host="h", summary_file="s", artifact_file="a", target_metrics=[])


@pytest.mark.parametrize("stage,message", [
    ({"injectors": 1}, "spec.stages[0]: set duration, requests, or both (duration is then the time limit)"),
    ({"injectors": 1, "requests": 0}, "spec.stages[0].requests: must be >= 1"),
])
def test_a_stage_needs_a_duration_or_requests(stage, message):
    with pytest.raises(ValidationError) as refused:
        experiment(stages=[stage])
    assert message in str(refused.value)
