"""A variant's measured cost: its target's mean CPU over the stage's settled seconds, with an interval, not the peak
of half-second readings (which grows with the stage's length and its noise)."""

import dataclasses
import random

from hypothesis import given
from hypothesis import strategies as st
from test_stage_results import _measured, experiment

from loadstage.api.status import TargetFigures
from loadstage.engine.recommend import measured_cost
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


