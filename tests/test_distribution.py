"""Merged percentiles against exact percentiles of the raw samples, with injectors whose
latency distributions differ, merged through Locust's own master/worker stats path."""

import random

import pytest
from locust.event import Events
from locust.stats import RequestStats, setup_distributed_stats_event_listeners

from loadstage.distribution import (PERCENTILE_LEVELS, bucket_width, exact_percentile, merge, percentile,
                                    weighted_average_percentile)
from loadstage.summary import summarize


def injector_samples():
    rng = random.Random(20261122)
    fast = [rng.lognormvariate(3.0, 0.3) for _ in range(40000)]                    # ~20 ms
    slow = [rng.lognormvariate(5.3, 0.4) for _ in range(8000)]                     # ~200 ms
    bimodal = [rng.choice((rng.uniform(3, 8), rng.uniform(900, 2500))) for _ in range(4000)]
    return {"fast": fast, "slow": slow, "bimodal": bimodal}


def run_through_locust_master(samples_by_injector, reports_per_injector=3):
    """Each injector records its samples in its own RequestStats and reports to the master
    several times, as Locust workers do; the master merges with Locust's own listener."""
    master_events = Events()
    master = RequestStats()
    setup_distributed_stats_event_listeners(master_events, master)
    for name, samples in samples_by_injector.items():
        events = Events()
        stats = RequestStats()
        setup_distributed_stats_event_listeners(events, stats)
        chunk = len(samples) // reports_per_injector + 1
        for start in range(0, len(samples), chunk):
            for i, rt in enumerate(samples[start:start + chunk]):
                method = "GET" if (start + i) % 2 else "POST"
                stats.log_request(method, "/page", rt, 100)
            data = {}
            events.report_to_master.fire(client_id=name, data=data)
            stats.clear_all()
            master_events.worker_report.fire(client_id=name, data=data)
    return master


def test_merged_percentiles_match_exact_within_one_bucket():
    by_injector = injector_samples()
    everything = [s for samples in by_injector.values() for s in samples]
    summary = summarize(run_through_locust_master(by_injector), injectors=3)
    assert summary["requests"] == len(everything)
    for name, q in PERCENTILE_LEVELS.items():
        exact = exact_percentile(everything, q)
        merged = summary["latencyMs"][name]
        assert abs(merged - exact) <= bucket_width(exact), (name, merged, exact)


def test_weighted_average_of_percentiles_is_far_off_where_merging_is_not():
    by_injector = injector_samples()
    everything = [s for samples in by_injector.values() for s in samples]
    summary = summarize(run_through_locust_master(by_injector), injectors=3)
    exact_p99 = exact_percentile(everything, 0.99)
    averaged = weighted_average_percentile(
        [(len(s), exact_percentile(s, 0.99)) for s in by_injector.values()])
    merged_error = abs(summary["latencyMs"]["p99"] - exact_p99) / exact_p99
    averaged_error = abs(averaged - exact_p99) / exact_p99
    assert merged_error < 0.05
    assert averaged_error > 0.5


def test_split_by_method_uses_each_methods_own_merged_distribution():
    by_injector = injector_samples()
    summary = summarize(run_through_locust_master(by_injector), injectors=3)
    gets = [s for samples in by_injector.values() for i, s in enumerate(samples) if i % 2]
    assert summary["byMethod"]["GET"]["requests"] + summary["byMethod"]["POST"]["requests"] == summary["requests"]
    exact = exact_percentile(gets, 0.99)
    assert abs(summary["byMethod"]["GET"]["latencyMs"]["p99"] - exact) <= bucket_width(exact)


def test_percentile_is_nearest_rank_over_merged_counts():
    a, b = {10: 90}, {10: 5, 500: 5}
    merged = merge([a, b])
    assert merged == {10.0: 95, 500.0: 5}
    assert percentile(merged, 0.95) == 10.0
    assert percentile(merged, 0.96) == 500.0
    assert percentile({}, 0.5) is None


@pytest.mark.parametrize("value,width", [(7, 1), (99, 1), (150, 10), (3432, 100), (58760, 1000)])
def test_bucket_width_follows_locusts_rounding(value, width):
    assert bucket_width(value) == width
