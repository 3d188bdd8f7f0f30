"""Verdicts you can bet on, on synthetic stages of Locust's closed model (tests/support/queue_sim.py: users who
think, send a request and wait for it, to c servers), whose true p99 is known exactly: through the real look code
of a stage that ends once decided (results.judgement, results.batch_means), a stage whose true p99 is a tenth
either side of its objective is not decided on the wrong side, one a fifth or a quarter off is decided, and the
p99's interval covers the truth. At 72% and 96% of the servers' capacity."""

import pytest

from loadstage.api.types import Slo
from loadstage.locust.recorder import blocks_of
from loadstage.results.judgement import judge
from loadstage.results.sequential import Looks
from support.queue_sim import Users, recorded_seconds, true_percentile_ms_closed

SECONDS, STAGES = 60.0, 24
MODELS = {"72%": Users(users=40, think_ms=250.0, servers=4, service_ms=20.0),
          "96%": Users(users=40, think_ms=160.0, servers=4, service_ms=20.0)}


@pytest.fixture(scope="module")
def stages():
    """STAGES seeded stages of a model, each simulated once (a fixture of the module's: its tests share a worker)."""
    made: dict[str, list] = {}

    def of(load):
        if load not in made:
            made[load] = [recorded_seconds(MODELS[load].stage(SECONDS, seed=seed)) for seed in range(STAGES)]
        return made[load]
    return of


def p99(ms):
    return Slo(None, None, None, ms / 1000, None, None)


def looked(closed, slo):
    """The outcome of a stage that ends once decided: its first look that decided, else its end."""
    looks = Looks.schedule(SECONDS)
    for at, confidence in zip(looks.times[:-1], looks.confidences):
        found = judge(slo, blocks_of(closed[:int(at)], at), confidence, final=False)
        if found.outcome != "Undecided":
            return found.outcome
    return judge(slo, blocks_of(closed, SECONDS), looks.last, final=True).outcome


def test_the_models_run_where_they_are_said_to():
    assert MODELS["72%"].utilisation() == pytest.approx(0.725, abs=0.005)
    assert MODELS["96%"].utilisation() == pytest.approx(0.958, abs=0.005)


@pytest.mark.parametrize("load", MODELS)
def test_the_p99s_interval_covers_the_true_p99_nine_times_in_ten(stages, load):
    truth = true_percentile_ms_closed(MODELS[load], 0.99)
    found = [judge(p99(truth), blocks_of(closed, SECONDS), 0.95, final=True).objectives[0].interval
             for closed in stages(load)]
    covered = sum(1 for interval in found if interval and interval[0] <= truth <= interval[1])
    assert covered >= 0.9 * STAGES, found


@pytest.mark.parametrize("truth, wrong", [(0.9, "Fail"), (1.1, "Pass")])
def test_a_stage_a_tenth_either_side_of_its_objective_is_almost_never_decided_on_the_wrong_side(stages, truth,
                                                                                               wrong):
    limit = true_percentile_ms_closed(MODELS["96%"], 0.99) / truth
    found = [looked(closed, p99(limit)) for closed in stages("96%")]
    assert found.count(wrong) <= 0.05 * STAGES and found.count("Near") <= STAGES / 2, found


@pytest.mark.parametrize("truth, right", [(0.8, "Pass"), (1.25, "Fail")])
def test_a_stage_a_fifth_or_a_quarter_off_its_objective_is_decided_on_its_side(stages, truth, right):
    limit = true_percentile_ms_closed(MODELS["96%"], 0.99) / truth
    found = [looked(closed, p99(limit)) for closed in stages("96%")]
    assert found.count(right) >= 0.9 * STAGES, found
