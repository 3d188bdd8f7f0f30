"""spec.goal, through the stage engine: a backend plays targets whose latency climbs past a knee of each variant's
own, so that which variant must win is known."""

import copy
import csv
import dataclasses
import io
import json

from loadstage.api.load import parse_experiment
from loadstage.api.status import Candidate, Cost, Margin, Objective, RunStatus
from loadstage.engine.halving import per_core_margin
from loadstage.engine.ranking import ranked
from loadstage.engine.recommend import warmup_note
from loadstage.export.choice import choose
from loadstage.launch.argv import locust_master_command
from loadstage.reports.csv import render_csv
from loadstage.reports.terminal import render_status
from support.played import SLO_MS, KneeBackend, RateBackend, run, stages_run, without_wall_clock

USERS = 60   # p99_at(60, knee) <= 30 ms for a knee from 41.6 up


def goal_experiment(base_doc, matrix, target=None, goal=None):
    doc = copy.deepcopy(base_doc)
    del doc["spec"]["stages"]
    doc["spec"]["target"] = target or {}
    doc["spec"].update(goal=goal or {"users": USERS}, slo={"p99": f"{SLO_MS:g}ms"}, matrix=matrix,
                       stageEnd={"when": "Decided", "min": "8s", "max": "20s"})
    return parse_experiment(doc)


def variants_run(backend):
    return [c[1] for c in backend.calls if c[0] == "stage"]


class CpuBackend(KneeBackend):
    """Also measures each variant's target at `cpu[index]` cores at its peak."""

    def __init__(self, knee, cpu):
        super().__init__(knee)
        self.cpu = cpu

    def run_stage(self, step):
        measured = super().run_stage(step)
        return dataclasses.replace(measured, target_peak_cpu_cores=self.cpu[step.variant.index])


def test_the_cheapest_variant_that_meets_the_objective_wins_and_dearer_ones_are_not_run(base_doc):
    # threads 1, 2, 4, 8 x cpu 250m, 500m: the 250m ones cost 0.25 cores, and run first, in matrix order
    exp = goal_experiment(base_doc, {"threads": [1, 2, 4, 8], "cpu": ["250m", "500m"]})
    knees = [k for k in (20, 40, 50, 160) for _ in range(2)]   # 60 users: threads 4 and 8 meet 30 ms
    backend = KneeBackend(knee=knees)
    final = run(exp, backend)[-1]
    assert variants_run(backend) == [0, 2, 4, 6, 6] and final["phase"] == "Succeeded"   # the winner confirmed
    found = final["recommendation"]
    # two at 0.25 cores met it: threads=8 answers in 10 ms, threads=4 in ~17 ms; the most headroom wins
    assert (found["reason"], found["variant"], found["runnerUp"]["variant"]) == ("Found", 6, 4)
    assert found["winner"]["confirmed"] is True and "confirmed" not in found["runnerUp"]   # not equivalent
    assert found["settings"]["threads"] == 8 and found["winner"]["cost"] == {"cores": 0.25, "from": "limit",
                                                                               "memoryBytes": None}
    assert found["winner"]["headroom"] > found["runnerUp"]["headroom"] > 0 and found["marginCores"] == 0
    assert found["sentence"].startswith(f"threads=8 cpu=250m meets p99 <= 30ms at {USERS} users with 0.25 cores; "
                                        f"threads=4 cpu=250m costs as much, with less headroom")
    assert found["order"] == [0, 2, 4, 6]
    # threads=4's p99 against threads=8's, each from its own stage and interval: slower beyond the noise
    margin = found["margin"]
    assert (margin["figure"], margin["confidence"]) == ("p99", 0.95)
    assert 0 < margin["low"] < margin["relative"] < margin["high"], margin
    dropped = {v["index"]: v["dropped"] for v in final["variants"] if "dropped" in v}
    assert dropped.keys() == {0, 2, 1, 3, 5, 7}
    assert dropped[0]["after"] == 1 and dropped[0]["reason"].startswith("failed at the goal's load: p99 ")
    assert dropped[1] == {"after": 0, "reason": "it costs 0.5 cores, more than threads=8 cpu=250m and threads=4 "
                                                "cpu=250m, which met the objective"}
    assert final["latest"]["leader"] == "threads=8 cpu=250m (0.25 cores)"
    printed = render_status(RunStatus.read(final))
    assert f"Recommendation: {found['sentence']}" in printed
    assert f"  margin: the runner-up's p99 is {margin['relative']:+.0%} [{margin['low']:+.0%}, " \
           f"{margin['high']:+.0%}] of the winner's (95%)" in printed
    assert "  dropped variant 1 after 1 stage(s): failed at the goal's load: p99 " in printed
    assert "  not run, 4 variant(s) dearer than two that met the objective: 2, 4, 6, 8" in printed
    rows = list(csv.DictReader(io.StringIO(render_csv(exp, RunStatus.read(final)))))
    assert [(r["variant"], r["costCores"], r["costFrom"], r["recommended"]) for r in rows] == [
        ("1", "0.25", "limit", "false"), ("3", "0.25", "limit", "false"), ("5", "0.25", "limit", "false"),
        ("7", "0.25", "limit", "true"), ("7", "0.25", "limit", "true")]    # the winner's second stage confirmed it
    assert rows[0]["dropped"].startswith("failed at the goal's load") and rows[4]["dropped"] == ""


def test_a_dearer_runner_up_is_run_once_the_cheapest_tier_has_one_winner(base_doc):
    exp = goal_experiment(base_doc, {"pods": [1, 2, 3]}, target={"resources": {"limits": {"cpu": "1"}}})
    backend = KneeBackend(knee=[30, 50, 160])
    found = run(exp, backend)[-1]["recommendation"]
    assert variants_run(backend) == [0, 1, 2, 1]
    assert found["sentence"] == (f"pods=2 meets p99 <= 30ms at {USERS} users with 2 cores; the next cheapest, "
                                 f"pods=3, needs 3 cores")
    assert found["marginCores"] == 1


def test_without_a_cpu_on_every_variant_each_runs_and_costs_its_measured_peak_cpu(base_doc):
    exp = goal_experiment(base_doc, {"threads": [2, 4, 8]})
    backend = CpuBackend(knee=[40, 80, 160], cpu=[0.5, 1.0, 1.5])
    final = run(exp, backend)[-1]
    assert variants_run(backend) == [0, 1, 2, 1]
    found = final["recommendation"]
    assert (found["variant"], found["runnerUp"]["variant"]) == (1, 2)
    assert found["winner"]["cost"]["from"] == "measured" and found["winner"]["cost"]["cores"] == 1.0
    assert found["sentence"].endswith("with 1 core measured; the next cheapest, threads=8, needs 1.5 cores measured")
    assert final["variants"][0]["cost"]["cores"] == 0.5 and "dropped" in final["variants"][0]


def test_measured_costs_within_10_percent_tie_and_the_most_headroom_wins():
    def met(i, cores, headroom):
        return Candidate(i, {}, f"v{i}", Cost(cores, "measured"), headroom, ())
    order = ranked([met(0, 1.0, 0.1), met(1, 1.08, 0.5), met(2, 1.3, 0.9)], 0.10)
    assert [c.variant for c in order] == [1, 0, 2]
    assert [c.variant for c in ranked([met(0, 1.0, 0.1), met(1, 1.08, 0.5)], 0.0)] == [0, 1]


def test_no_variant_that_meets_it_is_said(base_doc):
    exp = goal_experiment(base_doc, {"threads": [1, 2]}, target={"resources": {"limits": {"cpu": "1"}}})
    final = run(exp, KneeBackend(knee=[10, 20]))[-1]
    found = final["recommendation"]
    assert (found["reason"], found["variant"], found["winner"]) == ("NonePassed", None, None)
    assert found["sentence"] == f"no variant meets p99 <= 30ms at {USERS} users: each of the 2 run failed it or was " \
                                f"dropped"


class StepsBackend(KneeBackend):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = []

    def run_stage(self, step):
        self.steps.append(step)
        return super().run_stage(step)


def test_an_undecided_variant_runs_once_more_twice_as_long_then_is_dropped(base_doc):
    exp = goal_experiment(base_doc, {"threads": [1, 2]}, target={"resources": {"limits": {"cpu": "1"}}})
    backend = StepsBackend(knee=[100, 100], noisy={USERS})
    final = run(exp, backend)[-1]
    assert stages_run(backend) == [(USERS, 20.0), (USERS, 40.0)] * 2
    assert {v["dropped"]["reason"] for v in final["variants"]} == {"undecided twice at the goal's load"}
    # undecided over its 20 s, the stage is not decided again on fewer seconds: its rerun's master says so
    first, rerun = (locust_master_command(exp, step.stage, host="h", summary_file="s", artifact_file="a",
                                          target_metrics=[], decide=True) for step in backend.steps[:2])
    assert first[first.index("--decide-min") + 1] == "8" and rerun[rerun.index("--decide-min") + 1] == "20"


def test_a_pick_resumed_after_a_restart_runs_none_of_its_decided_stages_again(base_doc):
    exp = goal_experiment(base_doc, {"threads": [1, 2, 4, 8]}, target={"resources": {"limits": {"cpu": "1"}}})
    whole = KneeBackend(knee=[20, 30, 50, 160])
    writes = run(exp, whole)
    assert variants_run(whole) == [0, 1, 2, 3, 3]
    in_flight = next(copy.deepcopy(w) for w in writes if w["phase"] == "Running" and
                     w["progress"]["variant"] == "3/4")
    resumed = KneeBackend(knee=[20, 30, 50, 160])
    final = run(exp, resumed, in_flight)[-1]
    assert variants_run(resumed) == [2, 3, 3]
    assert without_wall_clock(final["recommendation"]) == without_wall_clock(writes[-1]["recommendation"])


def test_a_thousand_variants_pick_with_a_status_under_a_megabyte(base_doc):
    matrix = {"pods": list(range(1, 11)), "cpu": [f"{m}00m" for m in range(1, 11)], "threads": list(range(1, 11))}
    exp = goal_experiment(base_doc, matrix)
    variants = exp.variants()
    assert len(variants) == 1000
    # 60 users are met from a knee of 50 on: threads 5 and up, whatever the pods and cpu
    backend = KneeBackend(knee=[10 * v.threads for v in variants])
    writes = run(exp, backend)
    final = writes[-1]
    size = max(len(json.dumps(w)) for w in writes)
    assert size < 1_000_000, size
    ran = set(variants_run(backend))   # the cheapest tier only, each of its 10: 1 pod of 100m
    assert sorted(variants[i].threads for i in ran) == list(range(1, 11))
    assert all((variants[i].pods, variants[i].cpu) == (1, "100m") for i in ran)
    found = final["recommendation"]
    assert found["winner"]["cost"]["cores"] == 0.1 and found["settings"]["threads"] >= 6   # 10 ms: most headroom
    full = [v for v in final["variants"] if v["stages"]]
    assert {v["index"] for v in full} == {found["variant"], found["runnerUp"]["variant"]}
    assert sum(1 for v in final["variants"] if "dropped" in v or "met" in v) == 1000
    print(f"largest status: {size:,} bytes")


def test_maximize_searches_every_variant_coarsely_drops_the_ones_that_cannot_win_and_refines_the_rest(base_doc):
    doc = copy.deepcopy(base_doc)
    del doc["spec"]["stages"]
    doc["spec"].update(goal={"maximize": "capacityPerCore"}, slo={"p99": f"{SLO_MS:g}ms"},
                       search={"load": "users", "from": 10, "max": 640, "resolution": "10%", "duration": "20s"},
                       matrix={"threads": [1, 2, 4]}, target={"resources": {"limits": {"cpu": "1"}}})
    exp = parse_experiment(doc)
    # passes up to 1.44 x its knee: threads=1 about 29 users, threads=2 about 115, threads=4 about 230
    backend = RateBackend(knee=[20, 80, 160])
    writes = run(exp, backend)
    final = writes[-1]
    runs = [(c[1], c[3]) for c in backend.calls if c[0] == "stage"]
    # the coarse round: each variant in turn to a bracket within 50%; then only the one left is searched on
    order = [v for v, _ in runs]
    assert order == sorted(order) and order.count(0) == 4 and order.count(1) == 6, runs
    # bisected on past its 160-240, then 220-240's pass end confirmed (the coarse round confirms nothing)
    assert [load for v, load in runs if v == 2][-3:] == [200, 220, 220], runs
    found = final["recommendation"]
    assert (found["reason"], found["variant"], found["runnerUp"]) == ("Found", 2, None), found
    midway = [w["recommendation"]["sentence"] for w in writes
              if (w.get("recommendation") or {}).get("winner") and w["recommendation"]["reason"] == "Searching"]
    assert midway and all(s.startswith("so far ") and s.endswith("; the searches are not finished") for s in midway)
    # threads=1 serves at most 2 x 20 = 40 req/s a core, threads=2 at most 160: under threads=4's 320 at least
    dropped = {v["index"]: v["dropped"]["reason"] for v in final["variants"] if "dropped" in v}
    assert dropped.keys() == {0, 1}, dropped
    assert dropped[0].startswith("at most 40.0 req/s per core, under the best's ") and \
        dropped[0].endswith("at least, after its coarse search")
    # each dropped one with what limited its coarse search, as the report's line says
    limits = {v["index"]: v["dropped"].get("limitedBy", {}).get("resource") for v in final["variants"]
              if "dropped" in v}
    assert limits == {0: final["variants"][0]["search"]["limitedBy"]["resource"],
                      1: final["variants"][1]["search"]["limitedBy"]["resource"]} and None not in limits.values()
    winner = final["variants"][2]
    assert winner["search"]["reason"] == "Found" and winner["search"]["resolution"] <= 0.10   # refined
    assert final["variants"][1]["search"]["resolution"] > 0.10   # dropped after its coarse search only
    assert found["winner"]["perCore"][0] == winner["search"]["passRps"]   # on 1 core
    assert found["sentence"].startswith("threads=4 serves the most per core under p99 <= 30ms: ")
    # each variant costs 1 core: the front is the one that serves most
    assert [c["variant"] for c in found["front"]] == [2]
    printed = render_status(RunStatus.read(final))
    assert f"Recommendation: {found['sentence']}" in printed
    assert f"the front, none cheaper serves more: threads=4 on 1 core: {winner['search']['passRps']:,.0f} req/s" \
        in printed
    rows = list(csv.DictReader(io.StringIO(render_csv(exp, RunStatus.read(final)))))
    last = [r for r in rows if r["variant"] == "3"][-1]
    assert (last["onFront"], last["recommended"], float(last["rpsPerCore_lo"])) == ("true", "true", 320.0)
    assert {r["onFront"] for r in rows if r["variant"] != "3"} == {"false"}


def test_the_margin_of_capacity_per_core_spans_both_brackets():
    def bracketed(index, low, high):
        return Candidate(index, {}, f"v{index}", Cost(1.0, "limit"), 0.0, (), (low, high))
    margin = per_core_margin(bracketed(0, 400.0, 440.0), bracketed(1, 300.0, None))
    # 300/400 - 1 at the low ends; from 300/440 - 1 to unbounded: the runner-up never failed
    assert (margin.figure, margin.relative, margin.low, margin.high) == ("perCore", -0.25, -0.3182, None)
    assert margin.describe() == "the runner-up serves -25% [-32%, ?] per core of the winner's (from their brackets)"
    assert per_core_margin(bracketed(0, 400.0, 440.0), None) is None
    # a stored margin without its level (a damaged status) still reads as a sentence
    assert Margin("p99", 0.1, None, 0.2, None).describe() == "the runner-up's p99 is +10% [?, +20%] of the winner's"


def test_a_goal_warmed_up_lighter_than_its_load_is_told_so(base_doc):
    exp = goal_experiment(base_doc, {"threads": [1, 4]}, goal={"rps": 80})
    light = parse_experiment({**base_doc, "spec": {**base_doc["spec"], "warmup": {"arrivalRate": 10,
                                                                                  "duration": "30s"}}}).spec.warmup

    def note(warmup):
        return warmup_note(dataclasses.replace(exp, spec=dataclasses.replace(exp.spec, warmup=warmup)))
    assert note(None).startswith("there is no warm-up: a variant's start-up transient")
    assert note(light).startswith("the warm-up is lighter or shorter than the goal's load")
    assert note(dataclasses.replace(light, arrival_rate=80, duration=5.0)).startswith("the warm-up is lighter")
    assert note(dataclasses.replace(light, arrival_rate=80, duration=10.0)) is None


def test_a_pick_stopped_midway_says_its_winner_is_so_far_and_how_many_variants_never_ran(base_doc):
    """Before, a goal interrupted after its first variant passed printed '... no other variant met it'."""
    exp = goal_experiment(base_doc, {"threads": [1, 2, 4]}, target={"resources": {"limits": {"cpu": "1"}}})
    writes = run(exp, KneeBackend(knee=[160, 160, 160]))
    midway = next(w for w in writes if (w.get("recommendation") or {}).get("winner") and
                  w["recommendation"]["reason"] == "Searching")
    sentence = midway["recommendation"]["sentence"]
    assert sentence.startswith("so far threads=1 meets p99 <= 30ms") and "no other variant met it" not in sentence
    assert sentence.endswith("; 2 variant(s) not yet run"), sentence
    assert f"Recommendation: {sentence}" in render_status(RunStatus.read(midway))
    assert not writes[-1]["recommendation"]["sentence"].startswith("so far")


class NearBackend(KneeBackend):
    """The first variant answers at the objective (within its tolerance) at the goal's load."""

    def run_stage(self, step):
        self.near = {USERS} if step.variant.index == 0 else set()
        return super().run_stage(step)


def test_a_variant_decided_at_its_objective_within_the_tolerance_meets_it_and_the_sentence_says_so(base_doc):
    exp = goal_experiment(base_doc, {"cpu": ["250m", "500m"]})
    backend = NearBackend(knee=[20, 160])
    final = run(exp, backend)[-1]
    assert variants_run(backend) == [0, 1, 0]
    assert [v["stages"][-1]["verdict"]["outcome"] for v in final["variants"]] == ["Near", "Pass"]
    found = final["recommendation"]
    assert (found["reason"], found["variant"], found["runnerUp"]["variant"]) == ("Found", 0, 1)
    assert found["winner"]["objectives"][0]["near"] is True
    assert found["sentence"] == (f"cpu=250m is at (within 10%) p99 <= 30ms at {USERS} users with 0.25 cores; the "
                                 f"next cheapest, cpu=500m, needs 0.5 cores")


class FlakyBackend(KneeBackend):
    """Variant `flaky` passes its first stage and breaks the objective at its second."""

    def __init__(self, knee, flaky):
        super().__init__(knee)
        self.flaky = flaky

    def run_stage(self, step):
        second = step.variant.index == self.flaky and variants_run(self).count(self.flaky) == 1
        knee, self.knee = self.knee, [20] * len(self.knee) if second else self.knee
        try:
            return super().run_stage(step)
        finally:
            self.knee = knee


def test_a_winner_that_fails_its_confirmation_is_dropped_and_the_next_is_confirmed_before_found(base_doc):
    exp = goal_experiment(base_doc, {"pods": [1, 2, 3]}, target={"resources": {"limits": {"cpu": "1"}}})
    backend = FlakyBackend(knee=[160, 160, 160], flaky=0)
    final = run(exp, backend)[-1]
    # pods=1 and pods=2 met it (pods=3 costs more than both: not run yet); pods=1 failed its second stage: with
    # one left that met it, pods=3 runs for a runner-up, then pods=2 passes its second stage
    assert variants_run(backend) == [0, 1, 0, 2, 1]
    found = final["recommendation"]
    assert (found["reason"], found["variant"], found["winner"]["confirmed"]) == ("Found", 1, True)
    dropped = final["variants"][0]["dropped"]
    assert dropped["after"] == 2 and dropped["reason"].startswith(
        "met the objective at its first stage, then failed at the goal's load: p99 "), dropped
    assert found["sentence"] == (f"pods=2 meets p99 <= 30ms at {USERS} users with 2 cores; the next cheapest, "
                                 f"pods=3, needs 3 cores")


def test_a_confirmation_after_another_variant_ran_warms_up_its_target_deployed_again(base_doc):
    doc = copy.deepcopy(base_doc)
    doc["spec"]["warmup"] = {"injectors": 1, "duration": "5s"}
    exp = goal_experiment(doc, {"pods": [1, 2, 3]}, target={"resources": {"limits": {"cpu": "1"}}})
    backend = KneeBackend(knee=[160, 160, 160])
    final = run(exp, backend)[-1]
    # pods=1 and pods=2 met it; pods=1's confirmation runs on its target deployed again after pods=2's ran:
    # a cold start measured as the variant's second stage would flatter nothing and fail it on its start-up
    assert [c[1:3] for c in backend.calls if c[0] in ("stage", "prepare")] == [
        (0,), (0, None), (0, 1), (1,), (1, None), (1, 1), (0,), (0, None), (0, 2)]
    assert final["recommendation"]["winner"]["confirmed"] is True and final["recommendation"]["variant"] == 0


def test_equivalent_variants_of_one_cost_are_chosen_by_the_declared_preference_not_by_their_noise(base_doc):
    """workers=4 answers at 10 ms, workers=2 at 11.1 ms: within slo.tolerance (10%) of each other, so the most
    headroom is noise; fewer processes wins, and both are confirmed."""
    exp = goal_experiment(base_doc, {"workers": [4, 2]}, target={"resources": {"limits": {"cpu": "1"}}})
    backend = KneeBackend(knee=[160, 58])
    found = run(exp, backend)[-1]["recommendation"]
    assert variants_run(backend) == [0, 1, 1, 0]
    assert (found["variant"], found["runnerUp"]["variant"], found["equivalent"]) == (1, 0, [0])
    assert found["winner"]["confirmed"] and found["runnerUp"]["confirmed"]
    assert found["winner"]["headroom"] < found["runnerUp"]["headroom"]
    assert found["sentence"] == (f"workers=2 meets p99 <= 30ms at {USERS} users with 1 core; workers=4 is equivalent "
                                 f"(figures within 10%, at the same cost): goal.prefer chose (fewerProcesses, "
                                 f"fewerPods)")
    doc = copy.deepcopy(exp.source)
    doc["spec"]["goal"]["prefer"] = ["moreHeadroom"]
    found = run(parse_experiment(doc), KneeBackend(knee=[160, 58]))[-1]["recommendation"]
    assert (found["variant"], found["equivalent"]) == (0, [1])


def test_preferences_order_equivalent_candidates_and_leave_others_to_headroom():
    def met(i, pods, workers, p99, headroom):
        objectives = (Objective("p99", 30.0, p99, (p99 - 1, p99 + 1), True),)
        return Candidate(i, {"pods": pods, "workers": workers}, f"v{i}", Cost(1.0, "limit"), headroom, objectives)
    one, two, three = met(0, 2, 4, 10.0, 0.66), met(1, 1, 4, 10.5, 0.65), met(2, 1, 1, 20.0, 0.33)
    assert [c.variant for c in ranked([one, two, three], 0.0, 0.1)] == [1, 0, 2]   # 3 is not within 10%
    assert [c.variant for c in ranked([one, two, three], 0.0, 0.0)] == [0, 1, 2]   # no tolerance: headroom
    assert [c.variant for c in ranked([one, two, three], 0.0, 0.1, ("moreHeadroom",))] == [0, 1, 2]


def test_with_autoscale_the_winner_is_searched_from_the_goals_rate_and_exported_from_its_capacity(base_doc):
    """60 req/s: threads=1 (knee 30) fails it, threads=2 (knee 100: its p99 passes 30 ms up to ~144 req/s) wins;
    then its search from 60 req/s brackets its capacity, and a run resumed mid-search goes on where it was."""
    doc = copy.deepcopy(base_doc)
    doc["spec"]["autoscale"] = {"minLoad": 50, "maxLoad": 600}
    exp = goal_experiment(doc, {"threads": [1, 2]}, target={"resources": {"limits": {"cpu": "1"}}},
                          goal={"rps": 60})
    backend = KneeBackend(knee=[30, 100], load="rps")
    writes = run(exp, backend)
    final = writes[-1]
    assert final["phase"] == "Succeeded" and final["recommendation"]["variant"] == 1
    loads = [c[3] for c in backend.calls if c[0] == "stage" and c[1] == 1]
    assert loads[:3] == [60, 60, 120], loads    # the pick's stage and its confirmation, then the search doubles
    search = final["variants"][1]["search"]
    assert (search["reason"], search["pass"], search["fail"], search["confirmed"]) == ("Found", 142, 150, True)
    assert loads == [60, 60, 120, 240, 180, 150, 135, 142, 142]   # the bracket's pass end confirmed
    assert final["recommendation"]["winner"]["confirmed"] is True, "the pick reads only its stages at 60 req/s"
    assert "search" not in final["variants"][0]
    chosen = choose(exp, RunStatus.read(final), None)
    assert chosen.evidence.at_capacity and chosen.evidence.stage.arrival_rate == 142

    in_flight = next(copy.deepcopy(w) for w in writes if w["phase"] == "Running" and
                     len(w["variants"][1]["stages"]) == 4)
    resumed = KneeBackend(knee=[30, 100], load="rps")
    again = run(exp, resumed, in_flight)[-1]
    assert [c[3] for c in resumed.calls if c[0] == "stage"] == loads[4:]
    assert without_wall_clock(again["variants"][1]["search"]) == without_wall_clock(search)


class SlowerSecondBackend(KneeBackend):
    """Each variant's second stage answers at the knee `second[index]` instead of its own."""

    def __init__(self, knee, second):
        super().__init__(knee)
        self.second = second

    def run_stage(self, step):
        again = variants_run(self).count(step.variant.index) == 1
        knee, self.knee = self.knee, self.second if again else self.knee
        try:
            return super().run_stage(step)
        finally:
            self.knee = knee


def test_a_winner_whose_confirmation_has_less_headroom_than_the_next_gives_way_to_it_confirmed(base_doc):
    """threads=2 answers in 10 ms at its first stage, 25 ms at its confirmation; threads=4 in 17 ms at both.
    Ranked by its first stage alone, threads=2 won on its luckiest stage (a winner's curse); by its worse
    stage, threads=4 has the more headroom, and wins once confirmed too."""
    exp = goal_experiment(base_doc, {"threads": [2, 4]}, target={"resources": {"limits": {"cpu": "1"}}})
    backend = SlowerSecondBackend(knee=[160, 50], second=[44, 50])
    final = run(exp, backend)[-1]
    assert variants_run(backend) == [0, 1, 0, 1]
    found = final["recommendation"]
    assert (found["reason"], found["variant"], found["runnerUp"]["variant"]) == ("Found", 1, 0)
    assert found["winner"]["confirmed"] and found["runnerUp"]["confirmed"]   # each ran its second stage
    p99 = {c: next(o["value"] for o in found[c]["objectives"] if o["name"] == "p99") for c in ("winner", "runnerUp")}
    assert p99["winner"] < 20 < p99["runnerUp"] < 30, p99    # threads=2's headroom is its confirmation's
    assert 0 < found["runnerUp"]["headroom"] < 0.2 < found["winner"]["headroom"]


def test_a_confirming_stage_runs_twice_as_long_and_is_not_decided_on_fewer_seconds_than_a_stage(base_doc):
    """As the search's: a first stage may pass at its first look, on its best seconds; its confirmation is not
    decided before stageEnd.max (a breach still ends it), and runs up to twice that."""
    exp = goal_experiment(base_doc, {"threads": [2, 4]}, target={"resources": {"limits": {"cpu": "1"}}})
    backend = StepsBackend(knee=[160, 20])
    run(exp, backend)
    stages = [s.stage for s in backend.steps]
    assert [(s.duration, s.decided_after) for s in stages] == [(20, None), (20, None), (40, 20)]
    argv = locust_master_command(exp, stages[2], host="http://127.0.0.1:8000", summary_file="s", artifact_file="a",
                                 target_metrics=[], decide=True)
    assert (argv[argv.index("--decide-min") + 1], argv[argv.index("--stage-seconds") + 1]) == ("20", "40")
