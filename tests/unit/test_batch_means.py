"""Batch means (results.batch_means): autocorrelated blocks merged into longer batches, and a percentile's
interval by inversion that always holds the percentile of the merged histogram."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadstage.api.types import Slo
from loadstage.results import histograms
from loadstage.results.batch_means import Batches, _Tail, batches_of, intervals, ratio_interval, von_neumann
from loadstage.results.intervals import Block, as_histogram
from loadstage.results.thresholds import held


def ar1(rng, n, phi):
    x, out = 0.0, []
    for _ in range(n):
        x = phi * x + rng.gauss(0, 1)
        out.append(100 + x)
    return out


def test_von_neumann_tells_a_remembering_series_from_independent_values():
    rng = random.Random(3)
    alike = [von_neumann(ar1(rng, 40, 0.8)) for _ in range(20)]
    independent = [von_neumann(ar1(rng, 40, 0.0)) for _ in range(200)]
    assert sum(a for a, _ in alike) >= 18 and all(r > 0.3 for a, r in alike if a)
    assert sum(a for a, _ in independent) <= 0.2 * 200   # a one-sided test at 10%


def section(means_ms, seconds=2):
    """A recorded section whose blocks have the given mean latencies (10 requests each, +-1 ms)."""
    blocks = [as_histogram({round((m + d) * 1e6): 5 for d in (-1, 1)}) for m in means_ms]
    return {"seconds": seconds, "histograms": [histograms.encode(b) for b in blocks],
            "failures": [0] * len(blocks), "durations": [float(seconds)] * len(blocks)}


def test_autocorrelated_blocks_are_merged_into_fewer_longer_batches_and_still_alike_ones_widen_the_interval():
    rng = random.Random(7)
    independent = [batches_of(section(ar1(rng, 40, 0.0))) for _ in range(20)]
    kept = [b for b in independent if (len(b.batches), b.seconds, b.correlation) == (40, 2.0, 0.0)]
    assert len(kept) >= 15
    drifting = batches_of(section([100 + 20 * math.sin(i / 6) for i in range(40)]))
    assert len(drifting.batches) in (10, 20) and drifting.seconds == 2.0 * 40 / len(drifting.batches)
    assert drifting.correlation > 0 and drifting.inflation > 1   # still alike at 10 batches: widened
    assert batches_of(section([100.0] * 9)) is None               # fewer than 10 blocks: no batches


def test_a_tail_the_stage_never_reached_bounds_its_percentile_from_below_only():
    # 200 requests, none slower than 5 ms: their p99 is 5 ms, but 0 in 200 is compatible with 1.8% over it
    batches = Batches(tuple(Block({5_000_000: 20}, 0, 1.0) for _ in range(10)), 1.0)
    assert intervals(batches, 0.95)["p99"] == [4.995, math.inf]    # at least its bucket
    slo = Slo(None, None, None, 0.1, None, None)
    (open_,) = held(slo, {"p99": 5.0}, intervals(batches, 0.95))
    assert (open_.holds, open_.interval) == (None, (4.995, None))        # it cannot pass: written [4.995, null]
    slow = Batches(tuple(Block({900_000_000: 20}, 0, 1.0) for _ in range(10)), 1.0)
    (broken,) = held(slo, {"p99": 900.0}, intervals(slow, 0.95))
    assert broken.holds is False and broken.interval[1] is None          # but it can fail, and be breached
    many = Batches(tuple(Block({5_000_000: 400}, 0, 1.0) for _ in range(10)), 1.0)
    assert intervals(many, 0.95)["p99"] == [4.995, 5.0]


latencies = st.lists(st.lists(st.integers(1, 400), min_size=1, max_size=60), min_size=10, max_size=24)


@settings(max_examples=60, deadline=None)
@given(latencies, st.sampled_from([0.9, 0.95, 0.995]))
def test_every_percentiles_interval_holds_the_percentile_of_the_merged_histogram(batches_ms, confidence):
    blocks = tuple(Block(_counts(ms), 0, 1.0) for ms in batches_ms)
    found = intervals(Batches(blocks, 1.0), confidence)
    merged = histograms.latency_ms(histograms.merge(as_histogram(b.counts) for b in blocks))
    for name in histograms.LEVELS:
        if name in found:
            low, high = found[name]
            assert low <= merged[name] <= high, (name, found[name], merged[name])
    assert found["rps"][0] <= sum(len(ms) for ms in batches_ms) / len(blocks) <= found["rps"][1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.integers(1, 400), st.integers(1, 100_000), min_size=1, max_size=30),
                min_size=2, max_size=40), st.sampled_from([(1.0, 1.0), (1.0, 2.5)]))
def test_a_percentiles_share_slower_has_the_ratio_estimators_interval_from_sums_kept_exact(counts, inflation):
    tail = _Tail([Block({ms * 1_000_000: n for ms, n in c.items()}, 0, 1.0) for c in counts], inflation)
    for index in range(-1, len(tail.grid)):
        expected = ratio_interval(tail.slower(index), tail.requests, 0.95, inflation)
        assert tail.slower_interval(index, 0.95) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def _counts(ms):
    top = {}
    for value in ms:
        bucket = histograms.new()
        bucket.record_value(value * 1_000_000)
        (key,) = {bucket.get_highest_equivalent_value(bucket.get_max_value())}
        top[key] = top.get(key, 0) + 1
    return top
