"""Confidence intervals from one run: the block bootstrap over per-second histograms."""

import math
import random

import pytest

from loadstage.results import histograms
from loadstage.results.intervals import (
    MIN_BLOCKS,
    Block,
    as_histogram,
    block_seconds,
    blocks_from_artifact,
    blocks_of,
    bootstrap,
    seconds_figures,
    sparse,
)


def seconds_of(latencies_ms_per_second):
    out = []
    for latencies in latencies_ms_per_second:
        h = histograms.new()
        for ms in latencies:
            histograms.record(h, ms)
        out.append(sparse(h))
    return out


def queueing_run(rng, seconds=120, rate=40, phi=0.9):
    """Per-second latencies whose level drifts like a queue: an AR(1) factor with correlation time ~1/(1-phi) s."""
    level, run = 0.0, []
    for _ in range(seconds):
        level = phi * level + rng.gauss(0, math.sqrt(1 - phi ** 2))
        run.append([rng.expovariate(1 / (10 * math.exp(0.5 * level))) for _ in range(rate)])
    return run


def independent_run(rng, seconds=120, rate=40):
    return [[rng.expovariate(1 / 10) for _ in range(rate)] for _ in range(seconds)]


def test_the_bootstrap_of_every_block_once_gives_the_exact_percentiles_of_the_merged_histogram():
    rng = random.Random(1)
    seconds = seconds_of(independent_run(rng, seconds=40))
    blocks = blocks_of(seconds, [0] * 40, 5)
    merged = histograms.merge(as_histogram(s) for s in seconds)
    assert sum(b.requests for b in blocks) == merged.get_total_count() == 40 * 40
    exact = histograms.percentiles_ns(merged, histograms.LEVELS)
    from loadstage.results.intervals import _Resampler
    figures = _Resampler([blocks]).figures(blocks)
    assert {k: round(figures[k] * 1e6) for k in exact} == exact
    assert figures["rps"] == 40 and figures["errorRate"] == 0


def test_a_resample_of_blocks_drawn_with_repeats_gives_the_percentiles_of_their_explicit_merge():
    # the search starts at the whole sample's percentiles and gallops: it must land where a plain count does
    from loadstage.results.intervals import _Resampler
    rng = random.Random(7)
    seconds = seconds_of([[rng.lognormvariate(2, 1.2) for _ in range(rng.randint(0, 60))] for _ in range(60)])
    blocks = blocks_of(seconds, [0] * 60, 3)
    resampler = _Resampler([blocks])
    for _ in range(200):
        chosen = rng.choices(blocks, k=rng.choice([1, 3, len(blocks)]))
        merged: dict[int, int] = {}
        for block in chosen:
            for value, count in block.counts.items():
                merged[value] = merged.get(value, 0) + count
        values = sorted(v for v, c in merged.items() for _ in range(c))
        figures = resampler.figures(chosen)
        for name, q in histograms.LEVELS.items():
            expected = values[max(1, math.ceil(q * len(values) - 1e-9)) - 1] / 1e6 if values else None
            assert figures[name] == expected, (name, len(chosen))


def test_a_queue_that_drifts_gets_longer_blocks_and_wider_intervals_than_independent_seconds():
    rng = random.Random(7)
    queued = seconds_of(queueing_run(rng))
    independent = seconds_of(independent_run(rng))
    assert block_seconds(*seconds_figures(independent))[0] <= 6          # about n^(1/3) = 5
    length, _lag = block_seconds(*seconds_figures(queued))
    assert length >= 8, length                      # the drift lasts about 10 s
    failures = [0] * len(queued)
    blocked = bootstrap([blocks_of(queued, failures, length)], resamples=300)
    naive = bootstrap([blocks_of(queued, failures, 1)], resamples=300)
    width = {name: blocked[name][1] - blocked[name][0] for name in ("p50", "p99", "mean")}
    naive_width = {name: naive[name][1] - naive[name][0] for name in ("p50", "p99", "mean")}
    assert all(width[n] > 1.3 * naive_width[n] for n in width), (width, naive_width)


def test_intervals_of_independent_seconds_cover_the_true_figures_about_as_often_as_they_claim():
    # 40 runs of an exponential(10 ms) service: true p50 = 10 ln 2, mean = 10, p90 = 10 ln 10
    rng = random.Random(11)
    truth = {"p50": 10 * math.log(2), "mean": 10.0, "p90": 10 * math.log(10)}
    covered = dict.fromkeys(truth, 0)
    runs = 40
    for run in range(runs):
        seconds = seconds_of(independent_run(rng, seconds=60, rate=30))
        blocks = blocks_of(seconds, [0] * 60, block_seconds(*seconds_figures(seconds))[0])
        found = bootstrap([blocks], resamples=200, seed=run)
        for name, value in truth.items():
            lo, hi = found[name]
            covered[name] += lo <= value * 1.001 and value <= hi * 1.001   # buckets are 0.1% wide
    # 95% intervals: 38 of 40 expected; fewer than 33 would be a coverage below ~82%
    assert all(count >= 33 for count in covered.values()), covered


def test_a_short_stage_gets_no_interval_and_a_p999_from_few_requests_none():
    rng = random.Random(3)
    short = seconds_of(independent_run(rng, seconds=MIN_BLOCKS - 1, rate=10))
    assert block_seconds(*seconds_figures(short)) is None
    assert bootstrap([blocks_of(short, [0] * len(short), 1)]) is None
    few = seconds_of(independent_run(rng, seconds=30, rate=10))   # 300 requests
    found = bootstrap([blocks_of(few, [0] * 30, 2)], resamples=100)
    assert "p999" not in found and found["p99"][0] <= found["p99"][1]
    assert found["method"] == "bootstrap" and found["confidence"] == 0.95


def test_failures_and_rate_come_from_the_blocks_and_strata_are_resampled_each_on_its_own():
    busy = [Block({1_000_000: 100}, failures=10, seconds=1.0) for _ in range(MIN_BLOCKS)]
    quiet = [Block({5_000_000: 10}, failures=0, seconds=1.0) for _ in range(MIN_BLOCKS)]
    found = bootstrap([busy, quiet], resamples=50)
    # every resample takes MIN_BLOCKS blocks from each stage: the figures cannot move
    assert found["rps"] == [55.0, 55.0] and found["errorRate"] == [pytest.approx(100 / 1100, rel=1e-3)] * 2
    assert found["p50"] == [found["p50"][0]] * 2 and found["blocks"] == 2 * MIN_BLOCKS


def _run_figures(rng, scale=1.0, seed=0):
    seconds = seconds_of([[ms * scale for ms in second] for second in independent_run(rng, seconds=40, rate=30)])
    found = bootstrap([blocks_of(seconds, [0] * 40, block_seconds(*seconds_figures(seconds))[0])],
                      resamples=200, seed=seed)
    merged = histograms.latency_ms(histograms.merge(as_histogram(s) for s in seconds))
    return {"p50": merged["p50"], "p99": merged["p99"]}, found


def test_the_difference_of_two_runs_is_significant_for_a_real_slowdown_and_rarely_for_the_same_service():
    from loadstage.results.differences import difference
    rng = random.Random(5)
    same = slower = 0
    pairs = 12
    for pair in range(pairs):
        base, base_iv = _run_figures(rng, seed=pair)
        again, again_iv = _run_figures(rng, seed=pair + 100)
        slow, slow_iv = _run_figures(rng, scale=1.3, seed=pair + 200)
        same += difference("p50", base["p50"], base_iv, again["p50"], again_iv).significant
        found = difference("p50", base["p50"], base_iv, slow["p50"], slow_iv)
        assert 0.15 < found.relative < 0.45 and found.low < found.relative < found.high
        slower += found.worse
    assert same <= 2 and slower >= pairs - 1, (same, slower)
    assert difference("p50", 1.0, None, 2.0, base_iv) is None


def test_the_master_merges_each_seconds_requests_and_failures_into_blocks_that_lose_none():
    from loadstage.locust.recorder import StageRecorder
    from loadstage.results.intervals import blocks_from_artifact
    rng = random.Random(9)
    master, workers = StageRecorder(), [StageRecorder(), StageRecorder()]
    recorded = failed = 0
    for second in range(30):
        for worker in workers:
            for _ in range(rng.randint(5, 15)):
                failure = rng.random() < 0.1
                worker.record("GET", "/", rng.expovariate(0.1), at=1000.0 + second + rng.random(), failed=failure)
                recorded, failed = recorded + 1, failed + failure
        if second % 3 == 2:                      # a report every 3 s, as Locust's workers send them
            for worker in workers:
                master.merge_report(worker.report())
    master.close_windows()
    section = master.blocks()
    assert section["seconds"] >= 3 and sum(section["durations"]) == 30 == len(master.series)
    blocks = blocks_from_artifact(section)
    assert sum(b.requests for b in blocks) == recorded and sum(b.failures for b in blocks) == failed
    found = bootstrap([blocks], resamples=100)
    assert found["errorRate"][0] < failed / recorded < found["errorRate"][1]
    # the first and last seconds were partial: the blocks cover what the load really lasted
    assert sum(master.blocks(elapsed=28.5)["durations"]) == pytest.approx(28.5)


def test_a_rhythm_is_not_read_as_memory_and_a_day_long_trend_stays_within_the_blocks_cap():
    # one request every 2 s at a steady latency: empty seconds are no latency, and the rhythm is no memory
    rhythm = block_seconds([10e6 if i % 2 == 0 else 0.0 for i in range(120)], [1.0 if i % 2 == 0 else 0.0
                                                                               for i in range(120)])
    assert rhythm == (5, 1)                              # n^(1/3) for 120 s; a lag of 1
    # a latency that only climbs never decorrelates: the search stops where longer blocks could not go
    day = 86_400
    length, lag = block_seconds([float(i) for i in range(day)], [10.0] * day)
    assert lag == day // (2 * MIN_BLOCKS) and length == day // MIN_BLOCKS


def test_an_artifact_too_large_merges_its_blocks_before_it_drops_the_series():
    import json

    from loadstage.results.artifact import encode, fit_artifact
    rng = random.Random(4)
    seconds = seconds_of(independent_run(rng, seconds=256, rate=20))
    section = {"seconds": 1, "correlationSeconds": 1,
               "histograms": [histograms.encode(as_histogram(s)) for s in seconds],
               "failures": [1] * 256, "durations": [1.0] * 256}
    series = [{"start": float(i), "seconds": 1.0, "requests": 20, "rps": 20.0, "p50Ms": 7.0, "p99Ms": 40.0}
              for i in range(256)]
    artifact = {"histogram": histograms.encode(histograms.merge(as_histogram(s) for s in seconds)),
                "blocks": section, "series": series}
    budget = len(encode({**artifact, "blocks": {**section, "histograms": section["histograms"][:100]}}))
    fitted = json.loads(fit_artifact(artifact, budget))
    kept = fitted["blocks"]
    assert fitted["series"] == series and fitted["omitted"]["blocksMerged"] >= 1
    assert len(kept["histograms"]) < 256 and kept["seconds"] == 256 // len(kept["histograms"])
    blocks = blocks_from_artifact(kept)
    assert sum(b.requests for b in blocks) == 256 * 20 and sum(b.failures for b in blocks) == 256
    assert sum(b.seconds for b in blocks) == 256


def test_a_one_bucket_interval_still_knows_its_figure_only_to_the_bucket():
    from loadstage.results.differences import difference
    tight = {"confidence": 0.95, "p50": [10.0, 10.0]}
    assert not difference("p50", 10.0, tight, 10.005, {"confidence": 0.95, "p50": [10.005, 10.005]}).significant
    assert difference("p50", 10.0, tight, 10.5, {"confidence": 0.95, "p50": [10.5, 10.5]}).significant
