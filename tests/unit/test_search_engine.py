"""The capacity search (spec.search) and the SLO's verdicts, through the stage engine: a backend plays a target
whose latency climbs past a known knee, so that where the search must land is known."""

import copy
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadstage.api.load import parse_experiment
from loadstage.api.status import Latency, RunStatus, SearchResult, StageResult, TargetFigures, TargetPodHealth, Verdict
from loadstage.api.types import Search, Slo
from loadstage.engine.search import NextStage, outcome, progress
from loadstage.locust.recorder import StageRecorder
from loadstage.reports import compare, tables
from loadstage.reports.pivot import pivot_table
from loadstage.reports.significance import between_variants
from loadstage.reports.terminal import render_capacity
from loadstage.results import histograms, intervals
from loadstage.results.sequential import Looks, spent
from loadstage.results.thresholds import slo_verdict
from support.played import SECONDS, SLO_MS, KneeBackend, run, stages_run, without_wall_clock


def search_experiment(base_doc, search, slo=None, matrix=None, **spec):
    doc = copy.deepcopy(base_doc)
    del doc["spec"]["stages"]
    doc["spec"].update(search=search, slo=slo or {"p99": f"{SLO_MS:g}ms"}, **spec)
    if matrix:
        doc["spec"]["matrix"] = matrix
    return parse_experiment(doc)


def test_a_search_doubles_until_a_stage_fails_then_bisects_to_its_resolution(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 2000, "resolution": "10%",
                                       "duration": "20s"})
    backend = KneeBackend(knee=100)
    writes = run(exp, backend)
    # p99 = 1.0 x p99_at: passes up to 30 ms, i.e. load <= 100 x 3^(1/3) = 144.2; then the pass end once more
    assert [load for load, _ in stages_run(backend)] == [10, 20, 40, 80, 160, 120, 140, 150, 140]
    final = writes[-1]
    assert final["phase"] == "Succeeded"
    search = final["variants"][0]["search"]
    assert (search["reason"], search["confirmed"]) == ("Found", True) and "contradictions" not in search
    assert (search["pass"], search["fail"]) == (140, 150)
    assert search["resolution"] == round(10 / 140, 4) and search["stages"] == 9
    assert search["loadSeconds"] == 8 * 20 + 40 and stages_run(backend)[-1] == (140, 40)   # confirmed twice as long
    outcomes = [s["verdict"]["outcome"] for s in final["variants"][0]["stages"]]
    assert outcomes == ["Pass"] * 4 + ["Fail", "Pass", "Pass", "Fail", "Pass"]
    p99 = next(o for o in final["variants"][0]["stages"][4]["verdict"]["objectives"] if o["name"] == "p99")
    assert p99["holds"] is False and p99["interval"][0] > SLO_MS
    assert final["latest"]["bracket"].startswith("140-150 users")
    assert "p99ByStage" not in final
    assert [w["progress"]["stage"] for w in writes if w["phase"] == "Running"][-1] == "9"
    run_results = RunStatus.read(final)
    assert run_results.variants[0].search.bracket().startswith("140-150 users")


def test_a_search_resumed_after_a_restart_runs_none_of_its_decided_stages_again(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 2000, "resolution": "10%",
                                       "duration": "20s"})
    whole = KneeBackend(knee=100)
    writes = run(exp, whole)
    in_flight = next(copy.deepcopy(w) for w in writes if w["phase"] == "Running" and w["progress"]["stage"] == "6")
    assert len(in_flight["variants"][0]["stages"]) == 5
    resumed = KneeBackend(knee=100)
    again = run(exp, resumed, in_flight)
    assert stages_run(resumed) == stages_run(whole)[5:]
    assert without_wall_clock(again[-1]["variants"][0]["search"]) == \
        without_wall_clock(writes[-1]["variants"][0]["search"])


def test_an_undecided_stage_runs_once_more_twice_as_long_and_undecided_twice_counts_as_a_fail(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 2000, "resolution": "10%",
                                       "duration": "20s"})
    backend = KneeBackend(knee=100, noisy={40})
    writes = run(exp, backend)
    assert stages_run(backend)[:4] == [(10, 20), (20, 20), (40, 20), (40, 40)]
    stages = writes[-1]["variants"][0]["stages"]
    assert [s["verdict"]["outcome"] for s in stages[2:4]] == ["Undecided", "Undecided"]
    assert stages[2]["verdict"]["undecided"] and not stages[2]["verdict"]["passed"]
    search = writes[-1]["variants"][0]["search"]
    assert (search["pass"], search["fail"], search["reason"]) == (30, 40, "Found") or search["fail"] == 40
    # it bisects below 40, a fail that no later stage could undo, and confirms its pass end
    bisected = [load for load, _ in stages_run(backend)[4:]]
    assert all(load < 40 for load in bisected) and bisected[-1] == bisected[-2] == search["pass"]
    # its rerun is not decided on fewer seconds than it had undecided
    rerun = progress(exp.spec.search, [StageResult.from_status(s) for s in stages[:3]])[1]
    assert (rerun.load, rerun.duration, rerun.decided_after) == (40, 40.0, 20.0)


def test_the_ends_of_a_search_say_why_it_stopped(base_doc):
    search = {"load": "injectors", "from": 2, "max": 16, "resolution": "5%", "duration": "20s"}
    floor = KneeBackend(knee=1, load="injectors")
    assert run(search_experiment(base_doc, search), floor)[-1]["variants"][0]["search"]["reason"] == "FloorFailed"
    assert stages_run(floor) == [(2, 20)]
    ceiling = KneeBackend(knee=100, load="injectors")
    found = run(search_experiment(base_doc, search), ceiling)[-1]["variants"][0]["search"]
    assert [load for load, _ in stages_run(ceiling)] == [2, 4, 8, 16]
    assert (found["reason"], found["pass"], found["fail"]) == ("CeilingPassed", 16, None)
    bound = KneeBackend(knee=100, load="injectors", bound_at=8)
    found = run(search_experiment(base_doc, search), bound)[-1]["variants"][0]["search"]
    assert (found["reason"], found["pass"], found["stages"]) == ("InjectorBound", 4, 3)
    assert found["limitedBy"]["resource"] == "Injectors" and " at 8 injectors" in found["limitedBy"]["evidence"]
    assert "limitedBy" not in run(search_experiment(base_doc, search), ceiling)[-1]["variants"][0]["search"]
    cpu_bound_fail = KneeBackend(knee=1, load="injectors", bound_at=2)   # its latencies were the injectors' too
    found = run(search_experiment(base_doc, search), cpu_bound_fail)[-1]["variants"][0]["search"]
    assert (found["reason"], found["pass"], found["fail"]) == ("InjectorBound", None, None)


def test_each_variant_of_a_matrix_gets_its_own_search_each_on_its_own_target(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 50, "max": 400, "resolution": "10%",
                                       "duration": "20s"}, matrix={"threads": [1, 2]})
    backend = KneeBackend(knee=[50, 200])
    writes = run(exp, backend)
    prepares = [c for c in backend.calls if c[0] in ("prepare", "finish")]
    assert prepares == [("prepare", 0), ("finish", 0), ("prepare", 1), ("finish", 1)]
    brackets = [(v["search"]["pass"], v["search"]["fail"]) for v in writes[-1]["variants"]]
    assert brackets[0][0] < 50 * 3 ** (1 / 3) <= brackets[0][1]
    assert brackets[1][0] < 200 * 3 ** (1 / 3) <= brackets[1][1]
    assert all(v["aggregate"] for v in writes[-1]["variants"])


def played(number, load, outcome, search_load="users"):
    """A stage result with just what the search reads: its load, its verdict's outcome, its length."""
    verdict = {"Pass": Verdict(True), "Fail": Verdict(False, ("p99 breaks",)),
               "Undecided": Verdict(False, (), ("p99 undecided",))}[outcome]
    return StageResult(stage=number, injectors=load if search_load == "injectors" else 1,
                       users=load if search_load == "users" else None, duration_seconds=10.0, started_at=None,
                       finished_at=None, requests=100, failures=0, error_rate=0.0, rps=float(load), mean_ms=1.0,
                       latency=Latency(p99=1.0, n=100), by_method={}, redis_peak_connections=None,
                       redis_connections_received=None, target=TargetFigures(), injector_peak_cpu_percent=None,
                       injector_bound=False, verdict=verdict)


@settings(deadline=None)
@given(start=st.integers(1, 500), span=st.integers(2, 2000),
       resolution=st.one_of(st.integers(1, 100).map(lambda p: p / 100), st.floats(1e-9, 0.01)),
       knee=st.integers(1, 5000), undecided=st.sets(st.integers(1, 5000), max_size=5), data=st.data())
def test_a_search_ends_in_a_bracket_around_any_knee_at_its_resolution_within_its_most_stages(
        start, span, resolution, knee, undecided, data):
    """Loads up to `knee` pass and above it fail; loads in `undecided` answer undecided once (or, drawn, twice)."""
    search = Search("users", start, start + span, resolution, 10.0)
    twice = data.draw(st.sets(st.sampled_from(sorted(undecided)), max_size=len(undecided))) if undecided else set()
    stages, seen = [], {}
    while True:
        result, following = progress(search, stages)
        if following is None:
            break
        load = following.load
        assert search.from_ <= load <= search.max
        seen[load] = seen.get(load, 0) + 1
        answer = "Undecided" if load in undecided and seen[load] <= (2 if load in twice else 1) else \
            "Pass" if load <= knee else "Fail"
        stages.append(played(len(stages) + 1, load, answer))
        assert len(stages) <= search.most_stages()
    assert result.stages == len(stages)
    if result.reason == "FloorFailed":
        assert result.passed is None and (knee < search.from_ or search.from_ in twice)
    elif result.reason == "CeilingPassed":
        assert result.passed == search.max and result.failed is None and knee >= search.max
    else:
        assert (result.reason, result.confirmed) == ("Found", True)
        assert result.passed <= knee < result.failed or result.failed in twice
        assert result.failed - result.passed <= 1 or (result.failed - result.passed) / result.passed \
            <= search.resolution
    decided = decided_outcomes(stages)
    if result.passed is not None:
        assert "Fail" not in decided[result.passed]
    if result.failed is not None:
        assert "Fail" in decided[result.failed]


def decided_outcomes(stages):
    """Each load's decided outcomes: an undecided stage's rerun counts (undecided again: a fail), the first not."""
    decided: dict[int, list[str]] = {}
    for before, s in zip([None, *stages], stages):
        rerun = before is not None and before.verdict.outcome == "Undecided" and before.users == s.users
        if s.verdict.outcome != "Undecided" or rerun:
            decided.setdefault(s.users, []).append("Fail" if s.verdict.outcome == "Undecided" else s.verdict.outcome)
    return decided


def searched(search, answer):
    """Stages through progress() until the search ends, each answered by answer(load, visit)."""
    stages, seen = [], {}
    while True:
        result, following = progress(search, stages)
        if following is None:
            return result, stages
        seen[following.load] = seen.get(following.load, 0) + 1
        stages.append(played(len(stages) + 1, following.load, answer(following.load, seen[following.load])))


def test_a_pass_end_its_confirmation_contradicts_moves_the_bracket_back_and_is_kept_as_a_contradiction():
    """30 users passed once, by luck: its confirmation fails, and the search bisects below it, where it would have
    overwritten the pass with the fail and called 30-35 found."""
    search = Search("users", 10, 80, 0.2, 10.0)
    result, stages = searched(search, lambda load, visit: "Pass" if load < 30 or (load, visit) == (30, 1) else "Fail")
    assert [s.users for s in stages] == [10, 20, 40, 30, 35, 30, 25, 25]
    assert (result.reason, result.passed, result.failed, result.confirmed) == ("Found", 25, 30, True)
    assert [(c.load, c.outcomes) for c in result.contradictions] == [(30, ("Pass", "Fail"))]
    assert SearchResult.from_status(result.to_status()) == result


def test_a_load_that_failed_once_stays_failed_however_often_it_passes_after():
    """A target near its knee with rare long excursions (BENCHMARKS.md (i), four threads at 200/s: Fail, then two
    passes): by majority the search called the load a pass and its knee 10% too high."""
    search = Search("users", 10, 80, 0.2, 10.0)
    result, stages = searched(search, lambda load, visit: "Pass" if load < 30 or (load == 30 and visit > 1) else "Fail")
    assert [s.users for s in stages] == [10, 20, 40, 30, 25, 25]
    assert (result.reason, result.passed, result.failed, result.confirmed) == ("Found", 25, 30, True)
    assert progress(search, [*stages[:4], played(5, 30, "Pass"), played(6, 30, "Pass")])[0].failed == 30
    # the pass end's confirmation runs twice as long, and is not decided on fewer seconds than a stage has
    assert progress(search, stages[:5])[1] == NextStage(25, 20.0, 10.0)


@settings(deadline=None)
@given(start=st.integers(1, 100), span=st.integers(2, 500), data=st.data())
def test_whatever_its_stages_say_a_search_ends_within_its_most_stages_and_found_is_confirmed(
        start, span, data):
    search = Search("users", start, start + span, 0.1, 10.0)
    result, stages = searched(search, lambda load, visit: data.draw(st.sampled_from(["Pass", "Fail", "Undecided"])))
    assert len(stages) <= search.most_stages()
    assert result.reason in ("Found", "Exhausted", "FloorFailed", "CeilingPassed")
    if result.reason == "Found":
        decided = decided_outcomes(stages)
        assert result.confirmed and decided[result.passed] == ["Pass"] * len(decided[result.passed]) >= ["Pass"] * 2
        assert "Fail" in decided[result.failed]


bounds = st.tuples(st.floats(0.1, 2000), st.floats(0, 1000)).map(lambda b: [b[0], b[0] + b[1]])


@given(p99=bounds, rps=bounds, p99_limit=st.integers(1000, 1_000_000).map(lambda us: us / 1000),
       rps_floor=st.integers(1, 3000), tolerance=st.sampled_from([0.0, 0.1, 0.5]))
def test_an_slo_verdict_passes_only_whole_intervals_inside_fails_any_wholly_outside_and_is_near_within_its_tolerance(
        p99, rps, p99_limit, rps_floor, tolerance):
    stage = dataclasses.replace(played(1, 10, "Pass"), verdict=None, latency=Latency(p99=sum(p99) / 2, n=100),
                                rps=sum(rps) / 2, intervals={"confidence": 0.95, "method": "bootstrap",
                                                             "p99": p99, "rps": rps})
    slo = Slo(None, None, None, p99_limit / 1000, None, None, min_rps=rps_floor, tolerance=tolerance)
    verdict = slo_verdict(stage, slo)
    p99_holds = True if p99[1] <= p99_limit else False if p99[0] > p99_limit else None
    rps_holds = True if rps[0] >= rps_floor else False if rps[1] < rps_floor else None
    p99_near = p99_holds is None and p99_limit * (1 - tolerance) <= p99[0] and p99[1] <= p99_limit * (1 + tolerance)
    rps_near = rps_holds is None and rps_floor * (1 - tolerance) <= rps[0] and rps[1] <= rps_floor * (1 + tolerance)
    assert [(o.holds, o.near) for o in verdict.objectives] == [(p99_holds, p99_near), (rps_holds, rps_near)]
    open_ = (p99_holds is None and not p99_near) or (rps_holds is None and not rps_near)
    expected = "Fail" if False in (p99_holds, rps_holds) else "Undecided" if open_ else \
        "Near" if p99_near or rps_near else "Pass"
    assert verdict.outcome == expected and verdict.passed == (expected == "Pass")
    assert Verdict.from_status(verdict.to_status()) == verdict
    assert len(verdict.violations) == [p99_holds, rps_holds].count(False)
    assert len(verdict.near) == [p99_near, rps_near].count(True)


def test_a_stage_too_short_for_an_interval_is_undecided_and_says_why():
    stage = dataclasses.replace(played(1, 10, "Pass"), verdict=None, intervals=None)
    verdict = slo_verdict(stage, Slo(None, None, None, 0.3, None, 0.01))
    assert verdict.outcome == "Undecided"
    assert verdict.undecided == ("p99 1ms (no interval) undecided against <= 300ms",
                                 "errorRate 0.00% (no interval) undecided against <= 1.00%")


def test_looks_follow_a_fixed_schedule_and_spend_the_stages_error_strictest_first():
    looks = Looks.schedule(60.0)
    assert looks.times == (10.0, 15.0, 22.5, 33.75, 50.625, 60.0)
    errors = [1 - c for c in looks.confidences]
    assert sum(errors) == pytest.approx(0.05)   # the whole 5%, however the stage ends
    assert errors[:5] == sorted(errors[:5]) and errors[0] < 1e-5 < errors[1]
    # O'Brien-Fleming-type: a look at a third of a 30 s stage spends 2 - 2 Phi(1.96 x sqrt(3)), 0.069%
    assert 1 - Looks.schedule(30.0).confidences[0] == pytest.approx(0.000687, abs=1e-6)
    assert Looks.schedule(30.0).last == pytest.approx(1 - (0.05 - spent(22.5 / 30)))
    assert Looks.schedule(10.0).times == (10.0,) and Looks.schedule(10.0).confidences == (0.95,)


def test_a_look_whose_seconds_are_too_few_tries_each_second_after_until_the_next_looks_time():
    looks = Looks.schedule(40.0)
    assert looks.times == (10.0, 15.0, 22.5, 33.75, 40.0)
    assert looks.tries(1) == (10.0, 11.0, 12.0, 13.0, 14.0) and looks.tries(4) == (33.75, 34.75, 35.75, 36.75,
                                                                                   37.75, 38.75, 39.75)
    # the stage began late in its second 1000 (at 1000.6) and its first response came in second 1001: 9 whole
    # seconds with requests by its 10th, too few for 10 blocks; its 11th has them
    recorder = StageRecorder()
    for second in range(14):
        for i in range(10):
            recorder.record("GET", "/", 5.0 + i, at=1_001.05 + second + i / 20)
    recorder.keep_unsent()
    assert recorder.blocks_before(1_000.6 + looks.tries(1)[0], 1_000.6) is None
    assert len(recorder.blocks_before(1_000.6 + looks.tries(1)[1], 1_000.6)["histograms"]) == 10


def test_a_stage_that_ended_once_decided_keeps_its_length_and_is_judged_at_its_looks_confidence(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 20, "resolution": "10%"},
                            stageEnd={"when": "Decided", "min": "10s", "max": "2m"})
    assert exp.spec.search.duration == 120.0   # stageEnd.max is every stage's longest
    backend = KneeBackend(knee=100, ended_by="Decided", noisy={10})   # noisy: its blocks differ
    stages = run(exp, backend)[-1]["variants"][0]["stages"]
    assert stages_run(backend) == [(10, 120.0), (10, 240.0)]
    first = stages[0]
    assert (first["endedBy"], first["looks"], first["durationSeconds"]) == ("Decided", 2, SECONDS)
    p99 = next(o for o in first["verdict"]["objectives"] if o["name"] == "p99")
    narrow, wide = first["intervals"]["p99"], p99["interval"]   # 95%, and 1 - 0.05 / 8 looks of a 2-minute stage
    assert wide[0] <= narrow[0] and narrow[1] <= wide[1] and wide != narrow
    assert first["verdict"]["objectives"] == backend.decisions[0]["objectives"]   # the deciding look's, as it was


def test_a_stage_that_breached_fails_whatever_its_last_seconds_say(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 20, "resolution": "10%"},
                            stageEnd={"when": "Decided", "max": "1m"})
    writes = run(exp, KneeBackend(knee=100, ended_by="Breached"))
    stage = writes[-1]["variants"][0]["stages"][0]
    assert stage["endedBy"] == "Breached" and stage["verdict"]["outcome"] == "Fail"
    assert stage["verdict"]["violations"] == ["broke the objective by far at a look"]
    assert writes[-1]["variants"][0]["search"]["reason"] == "FloorFailed"


def test_a_look_at_a_running_stage_reads_its_settling_seconds_without_closing_them():
    recorder = StageRecorder()
    for second in range(20):
        for i in range(10):
            recorder.record("GET", "/", 5.0 + i, at=1_000.0 + second + i / 10, failed=i == 0 and second == 11)
    recorder.keep_unsent()
    recorder.close_windows(1_004.0)   # seconds 0-3 closed; 4-19 still settling
    assert recorder.blocks() is None   # 4 closed seconds: too few for blocks
    looked = recorder.blocks_before(1_012.0, 1_000.0)
    assert sum(looked["durations"]) == pytest.approx(12.0) and sum(looked["failures"]) == 1
    assert sum(histograms.decode(h).get_total_count() for h in looked["histograms"]) == 120
    recorder.close_windows()
    assert len(recorder.series) == 20, "a look closed seconds that were still settling"


def test_a_search_resumed_mid_way_goes_on_on_its_target_without_a_second_warm_up(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 2000, "resolution": "10%",
                                       "duration": "20s"}, warmup={"injectors": 1, "duration": "5s"})
    whole = KneeBackend(knee=100)
    writes = run(exp, whole)
    assert [c[2] for c in whole.calls if c[0] == "stage"][:2] == [None, 1]   # one warm-up, before stage 1
    in_flight = next(copy.deepcopy(w) for w in writes if w["phase"] == "Running" and w["progress"]["stage"] == "3")
    resumed = KneeBackend(knee=100)
    run(exp, resumed, in_flight)
    assert [c[2] for c in resumed.calls if c[0] == "stage"] == list(range(3, 10))


def test_a_search_scaled_down_keeps_a_result_file_spec_that_parses(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 20, "max": 2000, "duration": "20m"})
    small = exp.scaled(stage_duration=10.0, users_scale=0.05)
    assert (small.spec.search.from_, small.spec.search.max, small.spec.search.duration) == (1, 100, 10.0)
    again = parse_experiment(small.source)
    assert again.spec.search == small.spec.search and "stages" not in small.source["spec"]


def test_exceptions_widen_the_error_rate_interval_a_verdict_reads_by_their_count():
    found = {"confidence": 0.95, "method": "bootstrap", "errorRate": [0.0, 0.01], "p99": [1.0, 2.0]}
    shifted = intervals.with_exceptions(found, raised=10, requests=990)
    assert shifted["errorRate"] == [0.01, 0.0199] and shifted["p99"] == [1.0, 2.0]
    assert intervals.with_exceptions(found, raised=0, requests=990) is found


def test_a_stage_whose_target_restarted_fails_the_search_even_undecided():
    restarted = TargetFigures(pods=(TargetPodHealth("runner-0", restarts=1, unready_seconds=0.0),))
    undecided = dataclasses.replace(played(1, 10, "Undecided"), target=restarted)
    assert outcome(undecided) == "Fail"


def test_a_search_over_an_arrival_rate_brackets_the_rate_on_as_many_injectors_as_it_needs(base_doc):
    exp = search_experiment(base_doc, {"load": "rps", "from": 50, "max": 5000, "resolution": "10%",
                                       "duration": "20s"}, injectors={"maxRatePerInjector": 150})
    backend = KneeBackend(knee=400, load="rps")
    final = run(exp, backend)[-1]
    # passes up to 400 x 3^(1/3) = 576.9 rps; then the pass end once more
    assert [load for load, _ in stages_run(backend)] == [50, 100, 200, 400, 800, 600, 500, 550, 550]
    search = final["variants"][0]["search"]
    assert (search["reason"], search["pass"], search["fail"], search["load"]) == ("Found", 550, 600, "rps")
    stages = final["variants"][0]["stages"]
    assert [s["injectors"] for s in stages] == [1, 1, 2, 3, 6, 4, 4, 4, 4]   # ceil(rps / maxRatePerInjector)
    assert [s["arrivalRate"] for s in stages] == [50, 100, 200, 400, 800, 600, 500, 550, 550]
    assert all(s["droppedArrivals"] == 0 and s["arrivals"] == s["arrivalRate"] * SECONDS for s in stages)
    assert final["latest"]["bracket"].startswith("550-600 rps")


def test_a_search_whose_injectors_drop_arrivals_ends_injector_bound_with_the_bracket_it_had(base_doc):
    exp = search_experiment(base_doc, {"load": "rps", "from": 50, "max": 5000, "resolution": "10%",
                                       "duration": "20s"})
    backend = KneeBackend(knee=400, load="rps", drops_at=400)
    final = run(exp, backend)[-1]
    assert [load for load, _ in stages_run(backend)] == [50, 100, 200, 400]
    stages = final["variants"][0]["stages"]
    assert [s["injectorBound"] for s in stages] == [False, False, False, True]
    assert stages[-1]["droppedArrivals"] == 400 * SECONDS // 50
    search = final["variants"][0]["search"]
    assert (search["reason"], search["pass"], search["fail"]) == ("InjectorBound", 200, None)
    # before: "the injectors, not the target, ran out of CPU", though their CPU was idle and their pools too small
    (line,) = render_capacity(RunStatus.read(final))
    assert "; stopped at 400 rps: its injectors' pools of users ran out (2% of arrivals dropped, injector CPU not " \
           "bound): raise injectors.maxUsersPerInjector, 4 stages, 1m20s of load; limited by Injectors: 2.0% of " \
           "arrivals dropped (no free user)" in line, line


def test_a_stage_that_drops_arrivals_while_it_fails_the_objective_is_a_fail_not_injector_bound(base_doc):
    """Every user of the pools waited on a target past its knee: the drops are the target's doing."""
    exp = search_experiment(base_doc, {"load": "rps", "from": 50, "max": 5000, "resolution": "10%",
                                       "duration": "20s"})
    backend = KneeBackend(knee=400, load="rps", drops_at=600)
    final = run(exp, backend)[-1]
    assert [load for load, _ in stages_run(backend)] == [50, 100, 200, 400, 800, 600, 500, 550, 550]
    stages = {s["arrivalRate"]: s for s in final["variants"][0]["stages"]}
    assert (stages[800]["injectorBound"], stages[800]["injectorCpuBound"], stages[800]["verdict"]["outcome"]) == \
        (True, False, "Fail")
    search = final["variants"][0]["search"]
    assert (search["reason"], search["pass"], search["fail"]) == ("Found", 550, 600)


def test_compare_sets_two_searches_brackets_side_by_side_and_calls_a_lower_one_a_regression(base_doc):
    exp = search_experiment(base_doc, {"load": "rps", "from": 50, "max": 5000, "resolution": "10%",
                                       "duration": "20s"})
    finals = {knee: RunStatus.read(run(exp, KneeBackend(knee=knee, load="rps"))[-1]) for knee in (400, 300, 390)}
    slower = compare.compare((exp, finals[400]), (exp, finals[300]), 0.1)
    (capacity,) = slower.capacities
    assert (capacity.base.bracket()[:11], capacity.new.bracket()[:11], capacity.verdict) == \
        ("550-600 rps", "425-450 rps", "lower")
    assert capacity in slower.regressed
    assert "; 1 of 1 capacities lower" in compare.summary(slower)
    assert any(line.startswith("Capacity (") and line.endswith(": lower") for line in compare.notes(slower))
    close = compare.compare((exp, finals[400]), (exp, finals[390]), 0.1)
    assert [c.verdict for c in close.capacities] == ["the same"] and close.capacities[0] not in close.regressed
    assert compare.compare((exp, finals[300]), (exp, finals[400]), 0.1).capacities[0].verdict == "higher"


@pytest.mark.parametrize("start, top, resolution, most", [
    (10, 20, 0.00001, 18),   # before: 44, the bisections counted to 0.001% though one user apart ends them
    (10, 200, 0.05, 28),
    (1, 2, 0.05, 10),
    (10, 2000, 0.01, 38),
])
def test_the_most_stages_a_search_can_run_counts_only_the_bisections_its_loads_allow(start, top, resolution, most):
    assert Search("users", start, top, resolution, 10.0).most_stages() == most


def test_the_best_marks_of_searches_compare_stages_at_the_same_load_never_by_their_number(base_doc):
    """Before, threads=2's stage 4 (80 users, 10 ms) was marked best against threads=1's stage 4 (at 30 users
    past its knee): two different loads. The variants' rows over all their stages pool different loads too."""
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 400, "resolution": "10%",
                                       "duration": "20s"}, matrix={"threads": [1, 2]})
    final = RunStatus.read(run(exp, KneeBackend(knee=[20, 160]))[-1])
    one, two = final.variants
    loads = {v.index: {s.stage: s.users for s in v.stages} for v in final.variants}
    assert loads[0][4] != loads[1][4]
    for variant in final.variants:
        other = two if variant is one else one
        for stage in variant.stages:
            if tables.stage_marks(final, variant, stage):
                assert stage.users in loads[other.index].values(), (variant.index, stage.stage)
    marked = [(v.index, s.users) for v in final.variants for s in v.stages if tables.stage_marks(final, v, s)]
    assert marked, "stages at the same load are still compared"
    assert tables.headline_marks(final) == [set(), set()]
    (said,) = between_variants(final, ["threads=1", "threads=2"])
    assert said.startswith("none: the variants ran different loads"), said


def test_a_pivot_of_searches_lists_loads_in_order_with_a_rerun_load_once(base_doc):
    """Before, --pivot users:threads listed a search's loads in the order it ran them (10, 20, 40, 80, 60, ...)."""
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 400, "resolution": "10%",
                                       "duration": "20s"}, matrix={"threads": [1, 2]})
    final = RunStatus.read(run(exp, KneeBackend(knee=[20, 160], noisy={20}))[-1])
    assert [s.users for s in final.variants[0].stages].count(20) == 2     # undecided, run again: a fail
    _, (header, body), _ = pivot_table(final, ["users"], "threads", "p99")
    users = [int(row[0]) for row in body]
    assert users == sorted(set(users)) and header == ["users", "threads 1", "threads 2"]


def test_the_csv_of_a_search_has_each_variants_bracket_and_why_it_ended_on_every_row():
    """Before, the CSV had no column for them: a spreadsheet of a search lacked its answer."""
    import csv
    import io
    import json

    from loadstage.api.load import parse_experiment
    from loadstage.reports.csv import render_csv
    from support.waiting import ROOT

    stored = json.loads((ROOT / "tests" / "data" / "results" / "search.json").read_text())
    experiment = parse_experiment({k: stored[k] for k in ("apiVersion", "kind", "metadata", "spec")})
    rows = list(csv.DictReader(io.StringIO(render_csv(experiment, RunStatus.read(stored["status"])))))
    brackets = {(r["threads"], r["searchLoad"], r["searchPass"], r["searchFail"], r["searchReason"]) for r in rows}
    assert brackets == {("1", "rps", "75", "87", "Found"), ("2", "rps", "150", "175", "Found")}
    searched = {str(v["settings"]["threads"]): v["search"] for v in stored["status"]["variants"]}
    assert all(float(r["searchPassRps"]) == searched[r["threads"]]["passRps"] and
               float(r["searchFailRps"]) == searched[r["threads"]]["failRps"] for r in rows)


def test_a_search_that_finds_a_load_at_its_objective_ends_there_and_says_so(base_doc):
    exp = search_experiment(base_doc, {"load": "users", "from": 10, "max": 2000, "resolution": "10%",
                                       "duration": "20s"})
    backend = KneeBackend(knee=100, near={40})
    final = run(exp, backend)[-1]
    assert stages_run(backend) == [(10, 20), (20, 20), (40, 20)]
    (variant,) = final["variants"]
    near = variant["stages"][-1]["verdict"]
    assert near["outcome"] == "Near" and not near["passed"] and near["near"][0].startswith("p99 ")
    assert " is at <= 30ms" in near["near"][0] and near["objectives"][0]["near"] is True
    low, high = near["objectives"][0]["interval"]
    assert 0.9 * SLO_MS <= low < SLO_MS < high <= 1.1 * SLO_MS
    assert final["latest"]["verdict"] == f"Near: p99 {near['objectives'][0]['value']:.4g} [{low:.4g}, {high:.4g}] " \
                                         f"ms ({near['confidence']:.1%})"   # for kubectl get lx
    search = variant["search"]
    assert (search["reason"], search["pass"], search["fail"], search["near"]) == ("Near", 20, None, 40)
    run_status = RunStatus.read(final)
    assert run_status.variants[0].search.bracket() == f"about 40 users ({search['nearRps']:,.0f} req/s)"
    assert "at the objective there, within slo.tolerance" in "\n".join(render_capacity(run_status))
    assert "NEAR: p99 " in "\n".join(" ".join(row) for row in tables.stage_rows(run_status)[1])
