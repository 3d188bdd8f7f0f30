"""A variant's measured cost: its target's mean CPU over the stage's settled seconds, with an interval, not the peak
of half-second readings (which grows with the stage's length and its noise)."""

import dataclasses
import random
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_stage_results import _measured, experiment

from loadstage.api.status import TargetFigures
from loadstage.engine.recommend import measured_cost
from loadstage.kube.pod_metrics import PodMetricsSampler, cpu_window, parse_go_duration
from loadstage.results.cpu_use import settled_mean
from loadstage.results.stage_results import stage_result


def readings(seconds, start=1000.0, burst=5.0, seed=1):
    """Every half second: a start-up burst at 0.9 cores for `burst` s, then 0.3 +- 0.05."""
    rng = random.Random(seed)
    return [(start + i / 2, 0.9 if i / 2 < burst else 0.3 + rng.uniform(-0.05, 0.05)) for i in range(seconds * 2)]


def test_the_mean_of_the_readings_within_the_settled_seconds_and_its_interval_hold_the_true_mean():
    found, interval = settled_mean(readings(60), 1005.0, 1060.0, 0.95)
    assert abs(found - 0.3) < 0.01 and interval[0] <= 0.3 <= interval[1] and interval[1] - interval[0] < 0.03
    whole, _ = settled_mean(readings(60), 1000.0, 1060.0, 0.95)
    assert whole > found + 0.04        # the burst, had it not been cut
    assert settled_mean(readings(60), 2000.0, 2010.0, 0.95) is None
    assert settled_mean(readings(60)[:15], 1000.0, 1010.0, 0.95)[1] is None   # too few for 10 batches


@given(st.lists(st.floats(0, 64), min_size=1, max_size=200))
def test_the_mean_lies_within_the_readings_and_its_interval_is_never_below_zero(values):
    found = settled_mean([(float(i), v) for i, v in enumerate(values)], 0.0, float(len(values)), 0.95)
    mean, interval = found
    assert min(values) - 1e-9 <= mean <= max(values) + 1e-9
    assert interval is None or 0 <= interval[0] <= mean + 1e-9 <= interval[1] + 2e-9


def test_a_stage_reports_its_mean_cpu_over_its_load_and_a_goal_costs_a_variant_by_it():
    e = experiment(stages=[{"injectors": 1, "duration": "30s"}])
    rows = [{"start": 1000.0 + s, "seconds": 1.0} for s in range(30)]
    # the readings before the load began (processes starting) and after it ended are not the stage's
    taken = [(990.0 + i / 2, 0.9) for i in range(20)] + readings(30, burst=0.0) + [(1031.0, 0.9)]
    measured = dataclasses.replace(_measured(), target_peak_cpu_cores=0.9, target_cpu_readings=tuple(taken),
                                   artifact={"series": rows})
    result = stage_result(e, 1, e.spec.stages[0], measured)
    assert abs(result.target.mean_cpu_cores - 0.3) < 0.01 and result.target.peak_cpu_cores == 0.9
    low, high = result.to_status()["target"]["meanCpuInterval"]
    assert low <= result.target.mean_cpu_cores <= high
    assert measured_cost(result).cores == result.target.mean_cpu_cores
    unread = stage_result(e, 1, e.spec.stages[0], _measured())
    assert "meanCpuCores" not in unread.to_status()["target"]
    assert measured_cost(dataclasses.replace(unread, target=TargetFigures(peak_cpu_cores=0.7))).cores == 0.7




def pod_metrics(name, end, cores, window="10.2s", proxy=None):
    """One pod's PodMetrics as metrics-server lists it."""
    containers = [{"name": "server", "usage": {"cpu": f"{round(cores * 1e9)}n", "memory": "50Mi"}}]
    if proxy is not None:
        containers.append({"name": "proxy", "usage": {"cpu": f"{round(proxy * 1000)}m", "memory": "5Mi"}})
    stamp = datetime.fromtimestamp(end, UTC).isoformat().replace("+00:00", "Z")
    return {"metadata": {"name": name}, "timestamp": stamp, "window": window, "containers": containers}


def test_metrics_servers_windows_are_each_read_once_with_every_pods_server_cpu_and_the_span_they_cover():
    sampler = PodMetricsSampler(None, "ns", "app=x", 5.0, pods=2)
    sampler.take([pod_metrics("a", 1000.0, 0.2)])       # b not scraped yet: no reading of the target
    assert sampler.cpu_readings == [] and sampler.peak_cpu == 0.2
    sampler.take([pod_metrics("a", 1010.0, 0.2, proxy=0.05), pod_metrics("b", 1012.0, 0.15, "9.8s")])
    assert abs(sampler.cpu_span - 12.2) < 1e-9    # from a's start to b's end
    sampler.take([pod_metrics("a", 1010.0, 0.2, proxy=0.05), pod_metrics("b", 1012.0, 0.15, "9.8s")])  # no scrape
    sampler.take([pod_metrics("a", 1020.0, 0.25), pod_metrics("b", 1022.0, 0.35, "1m0.5s")])
    assert sampler.cpu_readings == [(1012.0, 0.35), (1022.0, 0.6)]       # the proxy's CPU is apart
    assert abs(sampler.cpu_span - 60.5) < 1e-9 and sampler.peak_cpu == 0.6   # b's minute, to its end
    assert cpu_window([pod_metrics("a", 1010.0, 0.2), {"metadata": {"name": "new"}, "containers": []}]) is None
    assert cpu_window([]) is None
    assert cpu_window([{**pod_metrics("a", 1010.0, 0.2), "window": "10 seconds"}]) is None   # unreadable: skipped


@pytest.mark.parametrize(("text", "seconds"), [("10.5s", 10.5), ("1m0.25s", 60.25), ("1h2m3s", 3723.0),
                                               ("250ms", 0.25), ("1.5µs", 1.5e-6), ("0s", 0.0)])
def test_a_go_duration_is_read_as_seconds(text, seconds):
    assert abs(parse_go_duration(text) - seconds) < 1e-12


@given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59_999))
def test_any_duration_go_writes_is_read_back(hours, minutes, millis):
    """Go's Duration.String(): units from hours down, zero ones left out, seconds with their fraction."""
    seconds = f"{millis / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    text = (f"{hours}h{minutes}m" if hours else f"{minutes}m" if minutes else "") + seconds
    assert abs(parse_go_duration(text) - (hours * 3600 + minutes * 60 + millis / 1000)) < 1e-9


@pytest.mark.parametrize("text", ["", "10", "5x", "s", "1m 2s", "-1s"])
def test_what_is_not_a_go_duration_is_refused(text):
    with pytest.raises(ValueError, match="not a Go duration"):
        parse_go_duration(text)


def test_a_cluster_stage_costs_its_variant_by_the_mean_of_the_windows_within_its_settled_seconds():
    e = experiment(stages=[{"injectors": 1, "duration": "60s"}])
    rows = [{"start": 1000.0 + s, "seconds": 1.0} for s in range(60)]
    # 10 s windows every 10 s: a start-up burst, then 0.3 +- 0.02; the first ends 5 s into the load
    windows = [(1005.0 + 10 * i, (1.2, 0.9)[i] if i < 2 else 0.3 + (-1) ** i * 0.02) for i in range(6)]
    measured = dataclasses.replace(_measured(), target_peak_cpu_cores=0.9, target_cpu_readings=tuple(windows),
                                   target_cpu_span=10.0, artifact={"series": rows})
    result = stage_result(e, 1, e.spec.stages[0], measured)
    settle = result.verdict.settle_seconds if result.verdict else 0
    kept = [c for at, c in windows if at - 10.0 >= 1000.0 + (settle or 0)]
    assert result.target.mean_cpu_cores == round(sum(kept) / len(kept), 3)
    assert measured_cost(result).cores == result.target.mean_cpu_cores and "meanCpuInterval" not in \
        result.to_status()["target"]            # 4 or 5 windows: too few for 10 batches
    # the window that began before the load is not the stage's, though it ended within it
    assert windows[0][1] not in kept and len(kept) >= 4
