"""`loadstage compare`'s verdicts on one matched stage: the tolerance, the histograms' resolution and the
sample size decide."""

import pytest

from loadstage.api.status import StageResult
from loadstage.reports.compare import compare_stage, parse_confidence, parse_tolerance


def _stage(p99, p999=None, rps=100.0, error_rate=0.0, n=5000):
    return StageResult.from_status({
        "stage": 1, "injectors": 1, "requests": n, "failures": 0, "rps": rps, "errorRate": error_rate,
        "latencyMs": {"p50": 1.0, "p99": p99, "p999": p999 or p99 * 2, "n": n, "p999Reliable": n >= 1000}})


def _verdicts(base, new, tolerance="10%"):
    return {c.figure: c.verdict for c in compare_stage(base, new, parse_tolerance(tolerance))}


def test_verdicts_follow_the_tolerance_the_resolution_and_the_sample_size():
    assert _verdicts(_stage(100), _stage(111))["p99"] == "regressed"
    assert _verdicts(_stage(100), _stage(109))["p99"] == "same"
    assert _verdicts(_stage(100), _stage(80))["p99"] == "improved"
    # below the histograms' resolution (3 significant digits) a change is noise, even at 0% tolerance
    assert _verdicts(_stage(100), _stage(100.05), "0%")["p99"] == "same"
    assert _verdicts(_stage(100), _stage(100.5), "0%")["p99"] == "regressed"
    # p99.9 of fewer than 1,000 requests is the maximum: shown, not judged
    assert _verdicts(_stage(100, 200, n=500), _stage(100, 900, n=500))["p999"] == "thin"
    assert _verdicts(_stage(100, 200), _stage(100, 300))["p999"] == "regressed"
    assert _verdicts(_stage(100, rps=100), _stage(100, rps=85))["rps"] == "regressed"
    assert _verdicts(_stage(100, rps=100), _stage(100, rps=95))["rps"] == "same"
    assert _verdicts(_stage(100), _stage(100, error_rate=0.0001))["errorRate"] == "regressed"
    assert _verdicts(_stage(100, error_rate=0.02), _stage(100, error_rate=0.021))["errorRate"] == "same"
    assert _verdicts(_stage(100, error_rate=0.02), _stage(100, error_rate=0.01))["errorRate"] == "improved"
    with pytest.raises(ValueError, match="must be a percentage"):
        parse_tolerance("-5%")
    assert parse_tolerance("10") == parse_tolerance("10%") == 0.1


def _sure(p99, spread, rps=100.0, rps_spread=0.02):
    """A stage whose p99 and req/s have 95% intervals of +-spread around them."""
    stage = _stage(p99, rps=rps)
    from dataclasses import replace
    return replace(stage, intervals={"confidence": 0.95, "method": "bootstrap",
                                     "p99": [p99 * (1 - spread), p99 * (1 + spread)],
                                     "p999": [p99 * 2 * (1 - spread), p99 * 2 * (1 + spread)],
                                     "rps": [rps * (1 - rps_spread), rps * (1 + rps_spread)]})


def test_a_regression_must_be_beyond_the_tolerance_and_beyond_the_noise():
    # +20%: beyond 10%, and the runs are tight (+-3%): a regression, with the interval of the change
    changes = {c.figure: c for c in compare_stage(_sure(100, 0.03), _sure(120, 0.03), 0.10)}
    assert changes["p99"].verdict == "regressed"
    assert changes["p99"].difference.text() == "+20.0% [+13.9%, +26.4%]"   # at 98.33%: see below
    # +20% from noisy runs (+-30%): beyond the tolerance, not beyond the noise
    assert _verdicts(_sure(100, 0.3), _sure(120, 0.3))["p99"] == "noise"
    # +4% from tight runs (+-1%): significant, but within the tolerance
    assert _verdicts(_sure(100, 0.01), _sure(104, 0.01))["p99"] == "small"
    # an improvement counts only where it is significant too
    assert _verdicts(_sure(100, 0.3), _sure(70, 0.3))["p99"] == "noise"
    assert _verdicts(_sure(100, 0.03), _sure(70, 0.03))["p99"] == "improved"
    # throughput: -15% from runs within +-2% is a regression; a higher confidence asks for more
    assert _verdicts(_sure(100, 0.03, rps=100), _sure(100, 0.03, rps=85))["rps"] == "regressed"
    base, new = _sure(100, 0.03, rps_spread=0.085), _sure(100, 0.03, rps=85, rps_spread=0.085)
    assert {c.figure: c.verdict for c in compare_stage(base, new, 0.10, 0.95)}["rps"] == "regressed"
    assert {c.figure: c.verdict for c in compare_stage(base, new, 0.10, 0.99)}["rps"] == "noise"
    # one side without intervals (a short stage): the tolerance alone decides, as before
    assert _verdicts(_stage(100), _sure(120, 0.3))["p99"] == "regressed"
    with pytest.raises(ValueError, match=r"from 50% to 99\.9%"):
        parse_confidence("100%")


def test_a_verdict_over_three_figures_is_as_sure_as_asked_not_each_figure():
    # "regressed" means any of p99, p99.9 and req/s: each interval is at 1 - 5% / 3, so that a stage that did not
    # change is called regressed at most 5% of the time, not up to 15% (the A/A runs of BENCHMARKS.md (f))
    changes = compare_stage(_sure(100, 0.075), _sure(112, 0.075), 0.10)
    assert [c.difference.confidence for c in changes if c.difference] == [pytest.approx(1 - 0.05 / 3)] * 3
    p99 = next(c for c in changes if c.figure == "p99")
    assert p99.verdict == "noise", p99.difference.text()            # +12% from +-7.5% runs: beyond 95% alone
    from loadstage.results.differences import difference
    alone = difference("p99", 100, _sure(100, 0.075).intervals, 112, _sure(112, 0.075).intervals, 0.95)
    assert alone.worse                                             # ... which one figure at 95% would call
    # a p99.9 too thin to judge leaves two figures: each at 97.5%
    thin = compare_stage(_stage(100, n=500), _stage(100, n=500), 0.10)
    base, new = _sure(100, 0.05), _sure(112, 0.05)
    from dataclasses import replace
    thin_base, thin_new = (replace(s, latency=replace(s.latency, p999_reliable=False)) for s in (base, new))
    levels = [c.difference.confidence for c in compare_stage(thin_base, thin_new, 0.10) if c.difference]
    assert levels == [pytest.approx(0.975)] * 3 and all(c.difference is None for c in thin)


def test_a_p999_without_an_interval_beside_figures_with_intervals_is_shown_not_judged():
    # repeats give p99.9 no interval where one repeat had fewer than 1,000 requests: its noise is unknown, so
    # the tolerance alone must not call it (an A/A pair of BENCHMARKS.md (f) was "regressed: p99.9 +12.8%")
    from dataclasses import replace
    base, new = _sure(100, 0.05), _sure(100, 0.05)
    new = replace(new, latency=replace(new.latency, p999=260.0))
    assert _verdicts(base, new)["p999"] == "regressed"                       # its interval says so
    unsure = replace(new, intervals={k: v for k, v in new.intervals.items() if k != "p999"})
    changes = {c.figure: c for c in compare_stage(base, unsure, 0.10)}
    assert changes["p999"].verdict == "thin" and changes["p999"].difference is None
    assert changes["p99"].difference.confidence == pytest.approx(0.975)      # two figures judged


def test_the_best_variant_is_marked_only_where_it_beats_every_other_by_more_than_the_noise():
    from loadstage.reports.significance import best
    a, b, c = (("a", 100.0, {"confidence": 0.95, "p99": [97.0, 103.0]}),
               ("b", 120.0, {"confidence": 0.95, "p99": [116.4, 123.6]}),
               ("c", 103.0, {"confidence": 0.95, "p99": [99.9, 106.1]}))
    assert best("p99", [a, b]) == 0 and best("p99", [b, a]) == 1
    assert best("p99", [a, b, c]) is None                     # c is within a's noise
    assert best("rps", [("x", 90.0, {"confidence": 0.95, "rps": [88.0, 92.0]}),
                        ("y", 100.0, {"confidence": 0.95, "rps": [98.0, 102.0]})]) == 1   # more is better
    assert best("p99", [a, ("d", 150.0, None)]) is None        # no interval: nothing is marked


def _row(scale, spread, p999=True):
    """A variant's latencies, all `scale` x the same, each with a 95% interval of +-spread."""
    from loadstage.api.status import Latency
    figures = {k: v * scale for k, v in {"p50": 10.0, "p90": 20.0, "p95": 30.0, "p99": 50.0, "p999": 90.0}.items()}
    intervals = {"confidence": 0.95, "method": "bootstrap",
                 **{k: [v * (1 - spread), v * (1 + spread)] for k, v in figures.items() if p999 or k != "p999"}}
    return Latency(**figures, n=5000, p999_reliable=True), intervals


def test_a_rows_best_marks_are_as_sure_as_asked_together_not_each_column():
    # a row marks a best in any of five columns: each is judged at 1 - 5% / 5, so that two identical variants get
    # a false mark at most 5% of the time (an A/A demo of BENCHMARKS.md (f) marked a p99.9 best at +24.6%)
    from loadstage.reports.significance import best_columns
    from loadstage.results.differences import difference
    (fast, fast_iv), (slow, slow_iv) = _row(1.0, 0.075), _row(1.12, 0.075)
    assert difference("p99", 50.0, fast_iv, 56.0, slow_iv, 0.95).worse           # one column alone at 95%: marked
    assert best_columns(["a", "b"], [fast, slow], [fast_iv, slow_iv]) == [set(), set()]
    (far, far_iv) = _row(1.4, 0.075)
    assert best_columns(["a", "b"], [fast, far], [fast_iv, far_iv]) == [{"p50", "p90", "p95", "p99", "p999"}, set()]
    # a column without intervals on every side cannot be marked, and does not count: four columns at 98.75%
    (thin, thin_iv) = _row(1.12, 0.075, p999=False)
    from loadstage.reports import significance
    judged = [f for f in significance.COMPARED
              if significance.judgeable(f, significance.latency_candidates(["a", "b"], [fast, thin],
                                                                           [fast_iv, thin_iv], f))]
    assert judged == ["p50", "p90", "p95", "p99"]


def test_between_variants_says_its_level_over_the_figures_it_judged():
    from loadstage.api.status import RunStatus
    from loadstage.reports.significance import between_variants
    def variant(index, scale):
        latency, intervals = _row(scale, 0.075)
        stage = {"stage": 1, "injectors": 1, "requests": 5000, "failures": 0, "rps": 100.0, "meanMs": 12.0 * scale,
                 "latencyMs": latency.to_status()}
        return {"index": index, "settings": {"threads": index + 1}, "stages": [stage],
                "aggregate": {"stages": 1, "requests": 5000, "failures": 0, "latencyMs": latency.to_status(),
                              "intervals": {**intervals, "mean": [12.0 * scale * 0.925, 12.0 * scale * 1.075]}}}
    run = RunStatus.from_status({"variants": [variant(0, 1.0), variant(1, 1.12)]})
    lines = between_variants(run, ["threads=1", "threads=2"])
    assert lines[1] == ("p99: no significant difference (95% over 4 figures, each interval at 98.75%); against "
                        "threads=1: threads=2 +12.0% [-2.2%, +28.2%]")


def test_the_p99_pivot_marks_a_stage_as_the_stage_table_does():
    # one row's marks share the 95% in the stage table; the pivot's p99 column must not mark what that row does not
    from loadstage.api.status import RunStatus
    from loadstage.reports import tables
    def variant(index, scale):
        latency, intervals = _row(scale, 0.075)
        stage = {"stage": 1, "injectors": 1, "requests": 5000, "failures": 0, "rps": 100.0,
                 "latencyMs": latency.to_status(), "intervals": intervals}
        return {"index": index, "settings": {"threads": index + 1}, "stages": [stage]}
    for slower, marked in ((1.12, False), (1.4, True)):      # significant at 95% alone; at 99% too
        run = RunStatus.from_status({"variants": [variant(0, 1.0), variant(1, slower)],
                                      "p99ByStage": [{"stage": 1, "injectors": 1,
                                                      "p99MsByVariant": [50.0, 50.0 * slower]}]})
        (row,) = tables.pivot_rows(run, users=False)[1]
        assert row[1].endswith(tables.BEST) is marked, row
        assert ("p99" in tables.stage_marks(run, run.variants[0], run.variants[0].stages[0])) is marked


def test_granian_over_wsgi_and_over_asgi_differ_in_their_label_settings_and_profile():
    """Before, the interface was in neither: compare listed no setting that differs."""
    from loadstage.api.load import parse_experiment
    from loadstage.engine.stages import new_status
    from loadstage.reports.ons_layout import profile

    def experiment(interface):
        target = {"server": "granian", **({"interface": interface} if interface else {})}
        return parse_experiment({"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment",
                                 "metadata": {"name": "g"},
                                 "spec": {"target": target, "stages": [{"injectors": 1, "duration": "10s"}]}})
    wsgi, asgi = experiment(None), experiment("asgi")
    (plain,), (served,) = wsgi.variants(), asgi.variants()
    assert plain.label().startswith("granian wsgi ") and served.label().startswith("granian asgi ")
    assert (plain.settings()["interface"], served.settings()["interface"]) == ("wsgi", "asgi")
    profiles = [{o.name: o.text for o in profile(e, new_status(e))} for e in (wsgi, asgi)]
    assert (profiles[0]["Interface"], profiles[1]["Interface"]) == ("wsgi", "asgi")
    gunicorn = parse_experiment({"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment",
                                 "metadata": {"name": "g"}, "spec": {"stages": [{"injectors": 1, "duration": "1m"}]}})
    assert "interface" not in gunicorn.variants()[0].settings()     # one interface: its server's


def test_compare_of_two_goals_names_a_different_objective_and_a_changed_recommendation(tmp_path, capsys):
    """Before, two goal runs with different SLOs compared as if alike, and the pick's change went unsaid."""
    import copy
    import json

    from loadstage.cli import main
    from support.waiting import ROOT

    stored = ROOT / "tests" / "data" / "results" / "goal.json"
    base = json.loads(stored.read_text())
    new = copy.deepcopy(base)
    new["spec"]["slo"]["p99"] = "50ms"
    pick = new["status"]["recommendation"]
    pick["winner"], pick["runnerUp"] = pick["runnerUp"], None
    pick["sentence"] = "threads=4 cpu=500m meets p99 <= 50ms, errorRate <= 1% at 120 req/s with 0.5 cores"
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert main(["compare", str(stored), str(tmp_path / "new.json")]) == 0
    out = capsys.readouterr().out
    assert "Setting that differs: Objective (slo): p99 <= 100ms, errorRate <= 1% -> p99 <= 50ms, errorRate <= 1%" \
        in out
    assert "Recommendation changed: BASE threads=4 cpu=250m meets p99 <= 100ms" in out
    assert main(["compare", str(stored), str(stored)]) == 0
    assert "Recommendation unchanged: threads=4 cpu=250m meets" in capsys.readouterr().out
