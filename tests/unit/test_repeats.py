"""Intervals from the spread of repeats, and the studies' trimmed mean."""

import math

import pytest

from loadstage.api.status import Headline, Latency
from loadstage.results.repeats import between_repeats, trimmed_mean
from loadstage.results.students_t import t_quantile


def repeat(p99, rps=100.0, error_rate=0.0, requests=5000):
    return Headline(1, requests, round(error_rate * requests), error_rate, rps, p99 / 2,
                    Latency(p99 / 4, p99 / 2, p99 / 1.5, p99, p99 * 2))


def test_a_latency_interval_is_a_t_interval_on_the_log_scale():
    values = [100.0, 110.0, 125.0, 104.0]
    found = between_repeats([repeat(v) for v in values])
    logs = [math.log(v) for v in values]
    mean = sum(logs) / 4
    half = 3.182 * math.sqrt(sum((x - mean) ** 2 for x in logs) / 3) / 2
    assert found["method"] == "repeats" and found["repeats"] == 4 and found["confidence"] == 0.95
    assert found["p99"] == pytest.approx([math.exp(mean - half), math.exp(mean + half)], rel=1e-3)
    assert set(found) >= {"p50", "p90", "p95", "p999", "mean", "rps", "errorRate"}


def test_an_error_rate_stays_linear_and_within_0_and_1():
    found = between_repeats([repeat(100, error_rate=e) for e in (0.0, 0.0, 0.03)])
    assert found["errorRate"][0] == 0.0 and 0.03 < found["errorRate"][1] < 1


def test_fewer_than_three_repeats_or_too_few_requests_for_a_p999_give_no_interval():
    assert between_repeats([repeat(100), repeat(120)]) is None
    assert trimmed_mean([repeat(100), repeat(120)]) is None
    assert "p999" not in between_repeats([repeat(100, requests=900)] * 3)


def test_the_trimmed_mean_drops_the_highest_and_the_lowest_repeat():
    found = trimmed_mean([repeat(v) for v in (300.0, 100.0, 110.0, 120.0, 90.0)])
    assert found["p99"] == pytest.approx(110.0)          # (100 + 110 + 120) / 3: 300 and 90 dropped
    assert found["rps"] == 100.0


def test_the_difference_of_two_repeat_intervals_is_welchs_t_interval_of_the_logs():
    from loadstage.results.differences import difference
    a, b = [100.0, 104.0, 110.0], [140.0, 150.0, 145.0, 158.0]
    base, new = between_repeats([repeat(v) for v in a]), between_repeats([repeat(v) for v in b])
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]

    def mean(xs):
        return sum(xs) / len(xs)

    def var(xs):
        return sum((x - mean(xs)) ** 2 for x in xs) / (len(xs) - 1)
    sa, sb = var(la) / 3, var(lb) / 4
    df = (sa + sb) ** 2 / (sa ** 2 / 2 + sb ** 2 / 3)       # Welch-Satterthwaite, rounded down below
    centre = math.exp(mean(lb) - mean(la))
    found = difference("p99", 100, base, 180, new)    # the merged figures do not centre it: the repeats' do
    half = t_quantile(0.95, math.floor(df)) * math.sqrt(sa + sb)
    assert found.relative == pytest.approx(centre - 1, rel=1e-4)   # the bounds keep 4 digits
    assert found.low == pytest.approx(math.exp(math.log(centre) - half) - 1, abs=2e-3)
    assert found.high == pytest.approx(math.exp(math.log(centre) + half) - 1, abs=2e-3)
    assert found.worse                                          # 100-110 against 140-158: slower, beyond the noise


def test_a_rate_interval_is_not_held_below_1_when_a_repeat_measured_none():
    found = between_repeats([repeat(100, rps=r) for r in (0.0, 120.0, 130.0)])
    assert found["rps"][0] == 0.0 and found["rps"][1] > 130      # linear (a 0 has no log), and not capped at 1
