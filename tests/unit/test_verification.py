"""spec.verify's pure parts (export.verification): the experiment that runs the recommendation as exported, at
the load the export promises a pod, and the answer read from its stage; on a real run's result file."""

import dataclasses
import json
import re

import pytest

from loadstage.api.load import parse_experiment
from loadstage.api.status import RunStatus
from loadstage.api.types import Autoscale
from loadstage.export import autoscaler, verification
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


def autoscaled(run, **autoscale):
    """goal.json's experiment with spec.autoscale and spec.verify, its pick, and the HPA its export writes."""
    experiment, status = run
    source = {**experiment.source, "spec": {**experiment.source["spec"], "verify": True,
                                            "autoscale": {"minLoad": 50, "maxLoad": 600, **autoscale}}}
    experiment = parse_experiment(source)
    chosen = choose(experiment, status, None)
    scaler = scaler_for(experiment.spec.autoscale, status, chosen, "250m")
    return experiment, chosen.variant, autoscaler.hpa("goal-runner", scaler, "lx/goal", experiment.spec.autoscale)


def test_in_a_cluster_a_copy_with_the_exported_hpa_climbs_from_min_to_max_load_in_steps_the_hpa_can_act_in(run):
    experiment, variant, hpa = autoscaled(run, readySeconds="10s")
    planned = verification.in_cluster(experiment, UID, variant, hpa)
    # four steps, each twice what a pod takes to come back (15 s sync + 15 s metrics + 10 s ready = 40 s)
    assert (planned.loads, planned.step_seconds, planned.replicas) == ((50, 234, 417, 600), 80, 1)
    spec = planned.document["spec"]
    assert planned.document["metadata"] == {"name": "goal-vf-9f3c2a"} and planned.copy_name == "goal-vf-9f3c2a"
    assert spec["stages"] == [{"arrivalRate": load, "duration": "1m20s"} for load in (50, 234, 417, 600)]
    assert "stageEnd" not in spec and spec["cleanup"] == "Delete" and spec["warmup"]["arrivalRate"] == 50
    assert not {"goal", "autoscale", "verify", "search"} & spec.keys()
    (copied,) = parse_experiment(planned.document).variants()
    assert copied.settings() == {**variant.settings(), "pods": 1}
    # the export's HPA as it wrote it, scaling the copy's Deployment and labelled as the copy's
    assert planned.hpa["metadata"]["name"] == planned.hpa["spec"]["scaleTargetRef"]["name"] == "goal-vf-9f3c2a-runner"
    assert planned.hpa["metadata"]["labels"] == {"loadstage.io/experiment": "goal-vf-9f3c2a"}
    assert {k: planned.hpa["spec"][k] for k in ("minReplicas", "maxReplicas", "metrics")} == \
        {k: hpa["spec"][k] for k in ("minReplicas", "maxReplicas", "metrics")}
    assert hpa["metadata"]["name"] == "goal-runner"    # the export's own, untouched
    assert planned.said() == "verify: variant 3 as exported, a copy (goal-vf-9f3c2a) of 1 pod(s) with the exported " \
                             "HPA, 4 step(s) of 80 s at 50, 234, 417, 600 req/s"
    without = verification.in_cluster(experiment, UID, variant, None)   # no HPA: the goal's rate on the exported pods
    assert (without.loads, without.step_seconds, without.hpa) == ((120,), 20, None)


UID = "9f3c2a7e-1b2d-4c5e-8f90-123456789abc"


@pytest.mark.parametrize("name", ["goal", "a" * 30, "a" * 31, "b" * 40, "shop-" * 6 + "abcdefghij"])
def test_the_copys_name_is_a_valid_experiment_name_no_other_experiment_has(name):
    from loadstage.api.names import NAME_MAX, NAME_PATTERN
    copied = verification.verification_name(name, UID)
    assert len(copied) <= NAME_MAX and re.fullmatch(NAME_PATTERN, copied) and copied.endswith("-vf-9f3c2a")
    # an experiment named like another's copy gets a copy of its own name: another uid
    assert verification.verification_name(copied, "0b1c2d3e-0000-4000-8000-000000000000") != copied


def ladder_ran(status, outcomes):
    """A ladder's run status, each step the real run's stage of that outcome (variant 2 passed, variant 0 failed)."""
    stage = {"Pass": status.variants[2].stages[0], "Fail": status.variants[0].stages[0]}
    return dataclasses.replace(status, variants=[dataclasses.replace(
        status.variants[2], index=0, stages=[stage[o] for o in outcomes])])


def test_a_clusters_ladder_holds_where_every_step_met_it_and_breaks_at_the_first_that_did_not(run):
    experiment, variant, hpa = autoscaled(run, readySeconds="10s")
    planned = verification.in_cluster(experiment, UID, variant, hpa)
    _, status = run
    held = verification.cluster_record(planned, ladder_ran(status, ["Pass"] * 4), [1, 2, 3, 3])
    assert (held["result"], held["where"], held["stepSeconds"], held["copy"]) == ("Holds", "Cluster", 80,
                                                                                  "goal-vf-9f3c2a")
    assert held["reason"] == "the objective holds at every step, up to 3 pod(s) at 600 req/s: Pass: p99 37.81 " \
                             "[35.88, 44.63] ms"
    assert [(s["load"], s["replicas"], s["outcome"]) for s in held["steps"]] == [
        (50, 1, "Pass"), (234, 2, "Pass"), (417, 3, "Pass"), (600, 3, "Pass")]
    broke = verification.cluster_record(planned, ladder_ran(status, ["Pass", "Pass", "Fail", "Pass"]), [1, 1, 1, 1])
    assert broke["result"] == "Breaks" and broke["reason"].startswith("the objective breaks at 1 pod(s) at 417 "
                                                                      "req/s: Fail: p99 681.6"), broke
    going = verification.cluster_record(planned, ladder_ran(status, ["Pass"] * 2), [1, 2], running=True)
    assert (going["result"], going["reason"], len(going["steps"])) == ("Running", "2 of 4 steps done", 2)
    stuck = verification.cluster_record(planned, ladder_ran(status, ["Fail"]), [1], broke="the HPA could not scale")
    assert (stuck["result"], stuck["reason"], len(stuck["steps"])) == ("Breaks", "the HPA could not scale", 1)
    cut = verification.cluster_record(planned, ladder_ran(status, ["Pass"] * 2), [1, 2], ended="a stage failed")
    assert (cut["result"], cut["reason"]) == ("Undecided", "the verification ended after 2 of 4 steps: a stage "
                                                           "failed")
    kept = dataclasses.replace(status, verification=going)
    assert RunStatus.read(kept.to_status()).verification == going
    assert render_verification(kept)[0] == "Verification (Cluster): Running: 2 of 4 steps done"


class Inner:
    """The Kubernetes backend's surface the autoscaled target uses, with the HPA's condition and the copy's ready
    pods a test sets (the real ones: tests/cluster, tests/realnode)."""

    def __init__(self, hpa_says):
        self.hpa_says, self.ready, self.ran, self.created = hpa_says, 1, [], []
        self.children = self

    async def prepare_variant(self, variant):
        self.ran.append("prepared")

    async def run_stage(self, step):
        self.ran.append(step.number)
        return "measured"

    async def create(self, manifest):
        self.created.append(manifest["kind"])
        return True

    async def read(self, kind, name):
        from types import SimpleNamespace as O
        if kind == "Deployment":
            return O(status=O(ready_replicas=self.ready))
        return O(status=O(conditions=[O(type="ScalingActive", reason="FailedGetResourceMetric", message="no metrics",
                                        **self.hpa_says)]))


def test_the_autoscaled_target_counts_pods_after_each_step_and_ends_the_ladder_once_the_hpa_cannot_scale(run):
    import asyncio
    import datetime as dt

    from loadstage.engine.errors import ExperimentFailed
    from loadstage.engine.steps import Step
    from loadstage.kube.autoscaled import AutoscaledBackend
    experiment, variant, hpa = autoscaled(run, readySeconds="10s")
    planned = verification.in_cluster(experiment, UID, variant, hpa)
    parsed = parse_experiment(planned.document)
    (copied,) = parsed.variants()
    steps = [Step(copied, 1, stage, number, 4)
             for number, stage in [(None, parsed.spec.warmup), *enumerate(parsed.spec.stages, 1)]]
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=20)
    just_now = dt.datetime.now(dt.UTC)

    async def ladder(inner, upto):
        target = AutoscaledBackend(inner, planned.hpa, patience=15)
        await target.prepare_variant(copied)
        for step in steps[:upto]:
            await target.run_stage(step)
            inner.ready += 1
        return target
    scaling = Inner({"status": "True", "last_transition_time": long_ago})
    target = asyncio.run(ladder(scaling, 5))
    assert scaling.created == ["HorizontalPodAutoscaler"] and scaling.ran == ["prepared", None, 1, 2, 3, 4]
    assert target.replicas == [2, 3, 4, 5] and target.stuck is None     # the warm-up's pods are not a step's
    moment = Inner({"status": "False", "last_transition_time": just_now})    # a new pod's metrics not yet in
    assert asyncio.run(ladder(moment, 5)).stuck is None
    stuck = Inner({"status": "False", "last_transition_time": long_ago})
    with pytest.raises(ExperimentFailed) as ended:
        asyncio.run(ladder(stuck, 5))
    assert stuck.ran == ["prepared", None, 1]       # step 2 never starts
    assert ended.value.message == "the HPA goal-vf-9f3c2a-runner could not scale: at step 1 (50 req/s, 2 pod(s)) it " \
                                  "said ScalingActive False, FailedGetResourceMetric: no metrics"


def test_a_clusters_step_is_judged_after_the_hpas_reaction_and_the_stages_own_verdict_is_left_as_it_was(run):
    experiment, variant, hpa = autoscaled(run, readySeconds="0s")    # a pod comes back in 30 s: 60 s steps
    planned = verification.in_cluster(experiment, UID, variant, hpa)
    assert (planned.reaction_seconds, planned.step_seconds) == (30, 60)
    _, status = run
    ran = ladder_ran(status, ["Pass"])
    document = json.loads(RESULT.read_text())
    artifact = document["artifacts"][2]["stages"][0]      # the passing stage's blocks: 14 of 1 s
    held = verification.cluster_record(planned, ran, [1], artifacts={(0, 1, 1): artifact}, running=True)
    (step,) = held["steps"]
    # 30 s asked for, 14 s there: all but MIN_BLOCKS cut, and the verdict over what is left
    assert step["seconds"] < ran.variants[0].stages[0].duration_seconds - 2, step
    assert step["p99Ms"] != verification.cluster_record(planned, ran, [1], running=True)["steps"][0]["p99Ms"]
    assert ran.variants[0].stages[0].verdict == status.variants[2].stages[0].verdict     # the stage's own: as it was
