"""How long a run has left, from its plan and the set-up time it has measured."""

import datetime as dt

from loadstage.api.load import parse_experiment
from loadstage.engine.eta import estimate
from loadstage.engine.steps import plan

T0 = dt.datetime(2026, 11, 24, 8, 0, tzinfo=dt.UTC)


def ladder(stages=3, variants=(2, 4)):
    return parse_experiment({
        "apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "eta"},
        "spec": {"target": {"workers": 1}, "matrix": {"threads": list(variants)},
                 "stages": [{"injectors": 1, "duration": "10m"}] * stages}})


def test_the_first_estimate_is_the_load_to_come_and_then_it_adds_the_measured_set_up_per_step():
    steps = plan(ladder(), None)
    first = estimate(steps, 0, T0, T0)
    assert (first.elapsed, first.remaining) == (0, 6 * 600)
    # two steps took 22 minutes: a minute of set-up each, so the four to come take 11 minutes each
    third = estimate(steps, 2, T0, T0 + dt.timedelta(minutes=22))
    assert third.remaining == 4 * 660
    progress = third.to_progress(T0 + dt.timedelta(minutes=22))
    assert progress == {"elapsedSeconds": 1320, "remainingSeconds": 2640, "remaining": "44m",
                        "eta": "2026-11-24T09:06:00Z"}


def test_time_into_the_current_step_counts_down_and_the_end_is_zero():
    steps = plan(ladder(stages=1, variants=(2,)), None)
    assert estimate(steps, 0, T0, T0 + dt.timedelta(minutes=4), into_step=240).remaining == 360
    assert estimate(steps, 0, T0, T0 + dt.timedelta(minutes=12), into_step=720).remaining == 0

