"""spec.verify's pure parts (export.verification): the experiment that runs the recommendation as exported, at
the load the export promises a pod, and the answer read from its stage; on a real run's result file."""

import dataclasses
import json

import pytest

from loadstage.api.load import parse_experiment
from loadstage.api.status import RunStatus
from loadstage.api.types import Autoscale
from loadstage.export import verification
from loadstage.export.bundle import scaler_for
from loadstage.export.choice import choose
from loadstage.reports.terminal import render_verification
from support.waiting import ROOT

RESULT = ROOT / "tests" / "data" / "results" / "goal.json"   # threads {1, 4} x cpu {250m, 500m}, goal 120 req/s


@pytest.fixture(scope="module")
def run():
    doc = json.loads(RESULT.read_text())
    return parse_experiment({k: doc[k] for k in ("apiVersion", "kind", "metadata", "spec")}), RunStatus.read(
        doc["status"])


def test_without_autoscale_the_pick_runs_on_its_own_pods_at_the_goals_rate_and_nothing_else(run):
    experiment, status = run
    chosen = choose(experiment, status, None)
    planned = verification.plan(experiment, chosen.variant, None, None)
    assert (planned.variant, planned.replicas, planned.per_pod, planned.load) == (2, 1, 120.0, 120)
    spec = planned.document["spec"]
    assert spec["stages"] == [{"arrivalRate": 120, "duration": "20s"}]   # as long as the goal's longest stage
    assert spec["warmup"] == {"arrivalRate": 120, "duration": "10s"}
    assert spec["stageEnd"] == experiment.source["spec"]["stageEnd"] and spec["slo"] == experiment.source["spec"]["slo"]
    assert not {"goal", "search", "autoscale", "verify", "repeats", "order"} & spec.keys()
    (variant,) = parse_experiment(planned.document).variants()   # one variant: the recommended one, as it ran
    assert variant.settings() == chosen.variant.settings() == {
        "server": "gunicorn", "pods": 1, "workers": 2, "threads": 4, "workerClass": "gthread", "cpu": "250m"}
    assert experiment.source["spec"]["matrix"] == {"threads": [1, 4], "cpu": ["250m", "500m"]}   # left as it was
    shorter = verification.plan(experiment, chosen.variant, None, None, warmup="3s")   # --warmup-duration
    assert shorter.document["spec"]["warmup"] == {"arrivalRate": 120, "duration": "3s"}


def test_with_autoscale_one_pod_runs_at_its_capacity_less_the_headroom(run):
    experiment, status = run
    chosen = choose(experiment, status, None)
    asked = Autoscale(50, 600, headroom=0.3)
    scaler = scaler_for(asked, status, chosen, "250m")
    planned = verification.plan(experiment, chosen.variant, scaler, asked)
    # C: the 119.82 req/s the pick served at its stage, on one pod; L = 0.7 C = 83.874, offered at 84 (never less)
    assert (planned.replicas, planned.per_pod, planned.load) == (1, pytest.approx(83.874), 84)
    assert planned.document["spec"]["stages"] == [{"arrivalRate": 84, "duration": "20s"}]
    assert planned.said() == "verify: variant 3 as exported, 1 pod(s) at 84 req/s (83.87 req/s a pod)"


def ran_with(status, variant):
    """A verification run's status: one variant, its one stage that of `variant` in the real run."""
    return dataclasses.replace(status, variants=[dataclasses.replace(status.variants[variant], index=0)])


def test_the_answer_is_the_stages_verdict_with_its_figure(run):
    experiment, status = run
    planned = verification.plan(experiment, choose(experiment, status, None).variant, None, None)
    held = verification.record(planned, ran_with(status, 2))
    assert (held["result"], held["where"], held["variant"], held["perPodLoad"]) == ("Holds", "Local", 2, 120.0)
    assert held["reason"] == "the objective holds at 1 pod(s) at 120 req/s: Pass: p99 37.81 [35.88, 44.63] ms"
    # the p99 its verdict judged (37.81 ms over the stage's settled seconds), not the whole stage's (39.42 ms)
    assert held["steps"] == [{"load": 120, "replicas": 1, "outcome": "Pass", "seconds": 12.58, "p99Ms": 37.8143,
                              "p99IntervalMs": [35.88, 44.63]}]
    broke = verification.record(planned, ran_with(status, 0))
    assert broke["result"] == "Breaks" and broke["steps"][0]["outcome"] == "Fail", broke
    assert broke["reason"].startswith("the objective breaks at 1 pod(s) at 120 req/s: Fail: p99 681.6")
    lost = verification.record(planned, dataclasses.replace(status, variants=[]), failed="the target did not start")
    assert (lost["result"], lost["steps"]) == ("Undecided", [])
    assert lost["reason"] == "the verification did not run to its end: the target did not start"


def test_the_status_keeps_it_and_the_report_says_it(run):
    experiment, status = run
    planned = verification.plan(experiment, choose(experiment, status, None).variant, None, None)
    checked = dataclasses.replace(status, verification=verification.record(planned, ran_with(status, 2)))
    assert RunStatus.read(checked.to_status()).verification == checked.verification
    assert render_verification(checked) == [
        f"Verification (Local): Holds: {checked.verification['reason']}",
        "  1 pod(s) at 120 req/s: Pass, p99 37.8143 ms [35.88, 44.63] over 12.58 s"]
    assert render_verification(status) == []


@pytest.mark.parametrize(("source", "said"), [
    ("lx/shop", "error: lx/shop: `loadstage verify` runs on this machine, from a result file (`loadstage run -o`)"),
    (str(ROOT / "tests" / "data" / "results" / "search.json"), "search.json: verify runs a run's recommendation at "
                                                               "the req/s its export promises: the run needs "
                                                               "spec.goal.rps"),
    ("missing.json", "error: missing.json: "),
])
def test_verify_refuses_what_it_cannot_verify_naming_it_and_runs_nothing(source, said, capsys, tmp_path,
                                                                         monkeypatch):
    from loadstage.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(["verify", source]) == 2
    assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_fail_on_threshold_fails_a_goal_whose_verified_pick_broke_the_objective(run):
    from loadstage.cli.run import failed_objective
    experiment, status = run
    planned = verification.plan(experiment, choose(experiment, status, None).variant, None, None)
    held = dataclasses.replace(status, verification=verification.record(planned, ran_with(status, 2)))
    broke = dataclasses.replace(status, verification=verification.record(planned, ran_with(status, 0)))
    assert not any(failed_objective(held, v) for v in held.variants)       # dropped variants' stages aside
    assert all(failed_objective(broke, v) for v in broke.variants)
