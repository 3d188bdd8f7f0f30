"""Stage percentiles from HDR histograms merged across injectors, against exact nearest-rank percentiles
of the raw samples. Ten injectors with different latency distributions record into their own recorder and
report to the master several times, as Locust workers do; counts, means and maxima come from Locust's own
master/worker stats path."""

import json
import math
import random
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from locust.event import Events
from locust.stats import RequestStats, setup_distributed_stats_event_listeners

from loadstage.locust.recorder import StageRecorder
from loadstage.locust.summary import INJECTOR_BOUND_PERCENT, MAX_ENDPOINTS, TERMINATION_MESSAGE_LIMIT, build
from loadstage.results import histograms
from loadstage.results.artifact import (
    ARTIFACT_BUDGET,
    ARTIFACT_MARKER,
    UnreadableArtifact,
    artifact_from_log,
    artifact_line,
    encode,
    fit_artifact,
)
from support.waiting import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from reference_methods import exact_percentile, merge, percentile, weighted_average_percentile

TARGET = 0.001   # 0.1% relative error


def injector_samples(count=10, seed=20261122):
    """Ten injectors that saw very different latencies: fast, slow, bimodal, heavy-tailed."""
    rng = random.Random(seed)
    shapes = [lambda: rng.lognormvariate(0.0, 0.5),                # ~1 ms, sub-millisecond values too
              lambda: rng.lognormvariate(3.0, 0.3),                # ~20 ms
              lambda: rng.lognormvariate(5.3, 0.4),                # ~200 ms
              lambda: rng.choice((rng.uniform(3, 8), rng.uniform(900, 2500))),
              lambda: rng.paretovariate(1.5) * 10]                 # a heavy tail
    return {f"injector-{i}": [shapes[i % len(shapes)]() for _ in range(rng.randint(2000, 12000))]
            for i in range(count)}


def run_stage(samples_by_injector, reports_per_injector=3, cpu=(30.0,)):
    """Every injector records and reports to the master several times; returns the master's
    RequestStats and StageRecorder."""
    master_events, master_stats, master = Events(), RequestStats(), StageRecorder()
    setup_distributed_stats_event_listeners(master_events, master_stats)
    for index, (name, samples) in enumerate(samples_by_injector.items()):
        events, stats, recorder = Events(), RequestStats(), StageRecorder()
        setup_distributed_stats_event_listeners(events, stats)
        recorder.note_cpu(cpu[index % len(cpu)])
        chunk = len(samples) // reports_per_injector + 1
        for start in range(0, len(samples), chunk):
            for i, ms in enumerate(samples[start:start + chunk]):
                method = "GET" if (start + i) % 2 else "POST"
                stats.log_request(method, "/page", ms, 100)
                recorder.record(method, "/page", ms)
            data = {"loadstage": recorder.report()}
            events.report_to_master.fire(client_id=name, data=data)
            stats.clear_all()
            master_events.worker_report.fire(client_id=name, data=data)
            master.merge_report(json.loads(json.dumps(data["loadstage"])))   # as sent over the wire
    return master_stats, master


def exact(samples, q):
    return exact_percentile(samples, q)


def test_merged_percentiles_are_within_a_tenth_of_a_percent_of_exact_and_never_above_the_max():
    by_injector = injector_samples()
    everything = [s for samples in by_injector.values() for s in samples]
    headline, _ = build(*run_stage(by_injector), injectors=10)
    assert headline["requests"] == headline["latencyMs"]["n"] == len(everything)
    assert headline["latencyMs"]["max"] == pytest.approx(max(everything), rel=1e-5)
    for name, q in histograms.LEVELS.items():
        truth = exact(everything, q)
        merged = headline["latencyMs"][name]
        assert abs(merged - truth) / truth <= TARGET, (name, merged, truth)
        assert merged <= headline["latencyMs"]["max"]


def test_per_method_rows_have_their_own_percentiles_and_exact_means():
    by_injector = injector_samples()
    headline, _ = build(*run_stage(by_injector), injectors=10)
    gets = [s for samples in by_injector.values() for i, s in enumerate(samples) if i % 2]
    row = headline["byMethod"]["GET"]
    assert row["requests"] == len(gets) and row["latencyMs"]["n"] == len(gets)
    assert abs(row["latencyMs"]["p99"] - exact(gets, 0.99)) / exact(gets, 0.99) <= TARGET
    assert row["meanMs"] == pytest.approx(sum(gets) / len(gets), rel=1e-5)


def test_the_old_methods_are_further_off_than_the_histograms():
    by_injector = injector_samples()
    everything = [s for samples in by_injector.values() for s in samples]
    stats, recorder = run_stage(by_injector)
    headline, _ = build(stats, recorder, injectors=10)
    locust_dict = stats.total.response_times    # Locust rounds every time to 2 significant digits
    worst_hdr = max(abs(headline["latencyMs"][n] - exact(everything, q)) / exact(everything, q)
                    for n, q in histograms.LEVELS.items())
    worst_dict = max(abs(percentile(merge([locust_dict]), q) - exact(everything, q)) / exact(everything, q)
                     for q in histograms.LEVELS.values())
    averaged = weighted_average_percentile([(len(s), exact(s, 0.99)) for s in by_injector.values()])
    assert worst_hdr <= TARGET < worst_dict
    assert abs(averaged - exact(everything, 0.99)) / exact(everything, 0.99) > 0.2


def test_p999_of_fewer_than_1000_requests_is_marked():
    few = build(*run_stage({"one": [float(i) for i in range(1, 500)]}), injectors=1)[0]
    many = build(*run_stage({"one": [float(i) for i in range(1, 1500)]}), injectors=1)[0]
    assert few["latencyMs"]["n"] == 499 and few["latencyMs"]["p999Reliable"] is False
    assert many["latencyMs"]["p999Reliable"] is True


def test_every_figure_can_be_recomputed_from_the_kept_histograms():
    by_injector = injector_samples()
    headline, artifact = build(*run_stage(by_injector), injectors=10)
    assert artifact["histogramUnit"] == "ns"
    stage = histograms.decode(artifact["histogram"])
    assert histograms.latency_ms(stage, headline["latencyMs"]["max"]) == headline["latencyMs"]
    get = histograms.decode(artifact["byMethod"]["GET"]["histogram"])
    assert histograms.latency_ms(get, headline["byMethod"]["GET"]["latencyMs"]["max"]) == \
        headline["byMethod"]["GET"]["latencyMs"]
    (endpoint_get,) = [e for e in artifact["endpoints"] if e["method"] == "GET"]
    assert histograms.decode(endpoint_get["histogram"]).get_total_count() == endpoint_get["requests"]


def test_an_injector_over_90_percent_cpu_marks_the_stage():
    by_injector = injector_samples(count=3)
    cool = build(*run_stage(by_injector, cpu=(40.0,)), injectors=3)[0]
    hot = build(*run_stage(by_injector, cpu=(40.0, 97.5, 50.0)), injectors=3)[0]
    assert cool["injectorPeakCpuPercent"] == 40.0 and cool["injectorBound"] is False
    assert hot["injectorPeakCpuPercent"] == 97.5 > INJECTOR_BOUND_PERCENT and hot["injectorBound"] is True


def test_the_headline_fits_a_termination_message_and_the_rows_go_to_the_artifact():
    stats, recorder = RequestStats(), StageRecorder()
    for i in range(200):
        for method in ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"):
            for ms in (5, 50, 500):
                stats.log_request(method, f"/a/very/long/endpoint/name/number/{i:04d}", ms, 10)
                recorder.record(method, f"/a/very/long/endpoint/name/number/{i:04d}", ms, ms * 2)
    for n in range(5):                                  # and tasks that raised, with long messages
        recorder.on_user_error(None, RuntimeError(f"{n} " + "long message " * 40), None)
    recorder.keep_unsent()
    headline, artifact = build(stats, recorder, injectors=4)
    assert len(encode(headline)) <= TERMINATION_MESSAGE_LIMIT
    assert len(headline["byMethod"]) == 7 and "correctedLatencyMs" in headline
    assert len(headline["exceptions"]["top"]) == 3
    assert len(artifact["endpoints"]) == MAX_ENDPOINTS + 1 and artifact["endpoints"][0]["histogram"]
    *rows, other = artifact["endpoints"]
    assert other["name"] == "(other)" and other["folded"] == headline["endpointsFolded"] == 1400 - MAX_ENDPOINTS
    assert other["requests"] + sum(r["requests"] for r in rows) == headline["requests"] == 4200
    assert histograms.decode(other["histogram"]).get_total_count() == other["requests"]
    for field in ("histogram", "correctedHistogram"):   # the stage's is its methods' and its rows' merged
        stage = histograms.latency_ms(histograms.decode(artifact[field]))
        for parts in (artifact["byMethod"].values(), artifact["endpoints"]):
            assert histograms.latency_ms(histograms.merge_encoded(p[field] for p in parts)) == stage


def test_5000_ungrouped_request_names_fold_into_one_row_and_the_artifact_fits_a_configmap():
    stats, recorder = RequestStats(), StageRecorder()
    rng = random.Random(2)
    for i in range(5000):
        for _ in range(1 + i % 4):
            ms = rng.lognormvariate(2, 1.5)
            stats.log_request("GET", f"/item/{i}", ms, 10)
            recorder.record("GET", f"/item/{i}", ms)
    recorder.keep_unsent()
    headline, artifact = build(stats, recorder)
    assert headline["endpointsFolded"] == 5000 - MAX_ENDPOINTS
    fitted = fit_artifact(artifact)
    assert len(fitted) <= ARTIFACT_BUDGET and "omitted" not in json.loads(fitted)


def test_an_artifact_that_cannot_fit_drops_its_rows_and_keeps_every_histogram_a_figure_is_made_of():
    stats, recorder = RequestStats(), StageRecorder()
    for i in range(50):
        stats.log_request("GET", f"/e{i}", 10, 10)
        recorder.record("GET", f"/e{i}", 10)
    recorder.keep_unsent()
    _, artifact = build(stats, recorder)
    fitted = json.loads(fit_artifact(artifact, budget=2000))
    assert fitted["omitted"]["endpoints"] == 50 and fitted["endpoints"] == []
    assert fitted["histogram"] == artifact["histogram"] and fitted["byMethod"] == artifact["byMethod"]


def test_an_artifact_too_large_for_a_configmap_drops_the_least_requested_histograms_and_says_so():
    stats, recorder = RequestStats(), StageRecorder()
    rng = random.Random(1)
    for i in range(300):
        for _ in range(i + 1):
            ms = rng.lognormvariate(2, 1.5)
            stats.log_request("GET", f"/e{i}", ms, 10)
            recorder.record("GET", f"/e{i}", ms)
    recorder.keep_unsent()
    _, artifact = build(stats, recorder)
    whole = fit_artifact(artifact, budget=10**9)
    fitted = json.loads(fit_artifact(artifact, budget=len(whole) // 2))
    assert len(json.dumps(fitted, separators=(",", ":"))) <= len(whole) // 2
    dropped = [e for e in fitted["endpoints"] if "histogram" not in e]
    assert fitted["omitted"]["endpointHistograms"] == len(dropped) > 0
    assert max(e["requests"] for e in dropped) <= min(e["requests"] for e in fitted["endpoints"] if "histogram" in e)
    assert fitted["histogram"] == artifact["histogram"]


def test_the_artifact_line_is_read_back_from_a_log_and_a_cut_or_garbled_one_is_named_unreadable():
    stats, recorder = RequestStats(), StageRecorder()
    for ms in range(1, 200):
        stats.log_request("GET", "/", ms, 10)
        recorder.record("GET", "/", ms)
    recorder.keep_unsent()
    _, artifact = build(stats, recorder)
    line = artifact_line(artifact)
    assert artifact_from_log(f"locust: starting\n{line}\nlocust: shutting down\n") == json.loads(encode(artifact))
    assert artifact_from_log("locust: no artifact\n") is None
    with pytest.raises(UnreadableArtifact, match=rf"its artifact line \({len(line) // 2} characters\) cannot be read"):
        artifact_from_log("x\n" + line[:len(line) // 2])     # a log cut short


@given(st.text(max_size=300))
def test_whatever_follows_the_artifact_marker_is_read_or_named_unreadable(tail):
    try:
        found = artifact_from_log(ARTIFACT_MARKER + tail)
    except UnreadableArtifact as e:
        assert "cannot be read" in str(e)
    else:
        assert isinstance(found, dict)


def test_the_time_series_merges_each_seconds_histograms_from_every_injector():
    master, workers = StageRecorder(), [StageRecorder(), StageRecorder()]
    for i, worker in enumerate(workers):
        for ms in range(1, 51):
            worker.record("GET", "/", float(ms + 50 * i), at=1000.5)     # second 1000: 1..100 ms from the two
        worker.record("GET", "/", 7.0, at=1003.2)                       # second 1003; 1001 and 1002 are empty
    for worker in workers:
        master.merge_report(worker.report())
    master.close_windows(before=1001.0)
    assert [r["start"] for r in master.series] == [1000.0]                # 1003 is still open
    first = master.series[0]
    assert (first["seconds"], first["requests"], first["rps"]) == (1.0, 100, 100.0)
    assert first["p50Ms"] == pytest.approx(50.0, rel=1e-3) and first["p99Ms"] == pytest.approx(99.0, rel=1e-3)
    master.close_windows()
    assert [(r["start"], r["requests"], r["p99Ms"]) for r in master.series[1:]] == [
        (1001.0, 0, None), (1002.0, 0, None), (1003.0, 2, pytest.approx(7.0, rel=1e-3))]
    # a report that comes after its second was closed still counts, in the count
    late = StageRecorder()
    late.record("GET", "/", 9.0, at=1000.9)
    master.merge_report(late.report())
    assert master.series[0]["requests"] == 101
    assert sum(h.get_total_count() for h in master.raw.values()) == 103


def test_the_master_keeps_each_workers_latest_cpu_sample_and_the_peak_of_all():
    # the live gauge shows each injector's CPU as sampled every 2 s; Locust's heartbeat figure is 0 for 5 s
    master, first, second = StageRecorder(), StageRecorder(), StageRecorder()
    for percent in (12.5, 40.0, 20.0):
        first.note_cpu(percent)
    second.note_cpu(8.0)
    master.merge_report(json.loads(json.dumps(first.report())), worker="w1")   # as sent over the wire
    master.merge_report(second.report(), worker="w2")
    assert master.worker_cpu == {"w1": 20.0, "w2": 8.0}
    assert master.cpu_peak_percent == 40.0


def test_nearest_rank_over_merged_counts_in_the_old_locust_dict_method():
    a, b = {10: 90}, {10: 5, 500: 5}
    merged = merge([a, b])
    assert merged == {10.0: 95, 500.0: 5}
    assert percentile(merged, 0.95) == 10.0
    assert percentile(merged, 0.96) == 500.0
    assert percentile({}, 0.5) is None
    assert math.isclose(exact([1.0, 2.0, 3.0, 4.0], 0.5), 2.0)



def test_the_fast_mean_is_hdrhistograms_own_mean_exactly():
    import random
    rng = random.Random(7)
    for values in ([], [1_000_000], [int(rng.lognormvariate(15, 1.2)) for _ in range(3000)]):
        h = histograms.new()
        for v in values:
            h.record_value(v)
        assert histograms.mean_ns(h) == h.get_mean_value()


def test_a_reported_tally_adds_up_to_the_very_histogram_the_values_would_make():
    rng = random.Random(5)
    direct, merged = histograms.new(), histograms.new()
    for _ in range(4):   # four reports, each added as the master adds it
        values = [histograms.to_ns(rng.lognormvariate(2.0, 1.5)) for _ in range(3000)] + [1, histograms.HIGHEST_NS]
        tally: dict[int, int] = {}
        for value in values:
            direct.record_value(value)
            histograms.tally(tally, value)
        histograms.add_flat(merged, json.loads(json.dumps(histograms.flat(tally))))
    assert merged.get_total_count() == direct.get_total_count() == 4 * 3002
    assert list(merged.counts) == list(direct.counts)
    assert (merged.get_min_value(), merged.get_max_value()) == (direct.get_min_value(), direct.get_max_value())
    assert histograms.encode(merged) == histograms.encode(direct)
    assert histograms.latency_ms(merged) == histograms.latency_ms(direct)


def _report_sent(seconds_ago: float) -> dict:
    worker = StageRecorder()
    worker.record("GET", "/", 12.0)
    report = worker.report()
    report["sentAt"] -= seconds_ago
    return report


def test_a_master_that_merged_a_report_over_one_report_interval_late_marks_the_stage():
    on_time, behind = StageRecorder(), StageRecorder()
    for recorder, late in ((on_time, 0.4), (behind, 7.5)):
        stats = RequestStats()
        stats.log_request("GET", "/", 12.0, 100)
        recorder.merge_report(_report_sent(0.1))
        recorder.merge_report(_report_sent(late))
        headline, _ = build(stats, recorder, injectors=2)
        assert headline["masterLagSeconds"] == pytest.approx(late, abs=0.5)
        assert headline["masterBound"] is (late > 3)


def test_tasks_that_raise_are_counted_across_injectors_with_their_most_frequent_messages():
    master = StageRecorder()
    for _injector, raised in enumerate(([ValueError("no survey")] * 5 + [KeyError("id")] * 2,
                                       [ValueError("no survey")] * 3 + [RuntimeError("x" * 400)] + [OSError()])):
        worker = StageRecorder()
        worker.record("GET", "/", 5.0)
        for error in raised:
            worker.on_user_error(None, error, None)
        master.merge_report(json.loads(json.dumps(worker.report())))
    stats = RequestStats()
    stats.log_request("GET", "/", 5.0, 10)
    headline = build(stats, master, injectors=2)[0]
    assert headline["exceptions"] == {"count": 12, "top": [
        {"message": "ValueError: no survey", "count": 8}, {"message": "KeyError: 'id'", "count": 2},
        {"message": "OSError: ", "count": 1}]}
    assert master.exceptions["RuntimeError: " + "x" * 145 + "…"] == 1       # long messages are cut to 160
    quiet = StageRecorder()
    quiet.keep_unsent()
    assert "exceptions" not in build(stats, quiet, injectors=1)[0]
