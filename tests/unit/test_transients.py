"""A stage is a transient before it is a measurement: on synthetic stages from a seeded queue that starts empty
(tests/support/queue_sim.py), through the real look code of a stage that ends once decided, a stage at or beyond
saturation never passes while its latency climbs; a steady stage well within its objective still passes."""

import pytest

from loadstage.api.types import Slo
from loadstage.locust.recorder import blocks_of
from loadstage.results import histograms
from loadstage.results.intervals import as_histogram
from loadstage.results.sequential import Looks, look
from loadstage.results.steady import upward_trend
from support.queue_sim import Queue, true_percentile_ms

SECONDS = 60.0
LIGHT = Queue(servers=4, service_ms=20.0, utilisation=0.5)


def closed_seconds(blocks):
    """The simulated seconds as the Locust master keeps them: [encoded histogram, mean ns, requests, failures]."""
    out = []
    for block in blocks:
        histogram = as_histogram(block.counts)
        out.append([histograms.encode(histogram), histograms.mean_ns(histogram), histogram.get_total_count(),
                    block.failures])
    return out


def decided_at_a_look(queue, seed, slo):
    """The outcome of the first look that decided a 60 s stage ending once decided (Undecided: none did)."""
    seconds = closed_seconds(queue.stage(SECONDS, seed=seed))
    looks = Looks.schedule(SECONDS)
    for at in looks.times[:-1]:
        outcome = look(slo, blocks_of(seconds[:int(at)], at), looks.confidence, seed=f"look {at}")[1]
        if outcome != "Undecided":
            return outcome
    return "Undecided"


def p99(ms):
    return Slo(None, None, None, ms / 1000, None, None)


@pytest.mark.parametrize("utilisation", [1.02, 1.1])
def test_a_stage_still_filling_its_queue_passes_at_no_look(utilisation):
    saturated = Queue(servers=4, service_ms=20.0, utilisation=utilisation)
    limit = 3 * true_percentile_ms(LIGHT, 0.99)    # its first seconds are well within it
    found = [decided_at_a_look(saturated, seed, p99(limit)) for seed in range(8)]
    assert "Pass" not in found, found


def test_a_steady_stage_well_within_its_objective_still_passes_at_a_look():
    limit = 2 * true_percentile_ms(LIGHT, 0.99)
    found = [decided_at_a_look(LIGHT, seed, p99(limit)) for seed in range(8)]
    assert found.count("Pass") >= 7 and "Fail" not in found, found


def test_a_rising_series_is_a_trend_and_noise_is_not():
    assert upward_trend([10, 12, 11, 14, 15, 15, 18, 17, 20, 22])
    assert not upward_trend([10, 12, 9, 11, 10, 12, 9, 11, 10, 12])
    assert not upward_trend([20, 18, 19, 15, 14, 12])


def test_no_failure_in_a_few_hundred_requests_is_not_yet_a_pass_of_a_strict_error_rate():
    from loadstage.results.proportions import clopper_pearson
    from loadstage.results.thresholds import held
    assert clopper_pearson(0, 800, 0.95) == (0.0, pytest.approx(0.0046, abs=1e-4))
    assert clopper_pearson(8, 800, 0.95) == (pytest.approx(0.00432, abs=1e-4), pytest.approx(0.01959, abs=1e-4))
    resampled = {"confidence": 0.95, "method": "bootstrap", "errorRate": (0.0, 0.0)}
    strict = Slo(None, None, None, None, None, 0.002)
    few, many = (held(strict, {"errorRate": 0.0}, resampled, (0, n))[0] for n in (400, 5000))
    assert few.holds is None and few.interval[1] > 0.002   # 0 in 400 is compatible with up to 0.92%
    assert many.holds is True                              # 0 in 5,000: at most 0.074%
