"""`loadstage compare`'s verdicts on one matched stage: the tolerance, the histograms' resolution and the
sample size decide."""

import pytest

from loadstage.reports.compare import compare_stage, parse_tolerance
from loadstage.results.model import StageResult


def _stage(p99, p999=None, rps=100.0, error_rate=0.0, n=5000):
    return StageResult.from_status({
        "stage": 1, "injectors": 1, "requests": n, "failures": 0, "rps": rps, "errorRate": error_rate,
        "latencyMs": {"p50": 1.0, "p99": p99, "p999": p999 or p99 * 2, "n": n, "p999Reliable": n >= 1000}})


def _verdicts(base, new, tolerance="10%"):
    return {c.figure: c.verdict for c in compare_stage(base, new, parse_tolerance(tolerance))}


def test_verdicts_follow_the_tolerance_the_resolution_and_the_sample_size():
    assert _verdicts(_stage(100), _stage(111))["p99"] == "regressed"
    assert _verdicts(_stage(100), _stage(109))["p99"] == "same"
    assert _verdicts(_stage(100), _stage(80))["p99"] == "improved"
    # below the histograms' resolution (3 significant digits) a change is noise, even at 0% tolerance
    assert _verdicts(_stage(100), _stage(100.05), "0%")["p99"] == "same"
    assert _verdicts(_stage(100), _stage(100.5), "0%")["p99"] == "regressed"
    # p99.9 of fewer than 1,000 requests is the maximum: shown, not judged
    assert _verdicts(_stage(100, 200, n=500), _stage(100, 900, n=500))["p999"] == "thin"
    assert _verdicts(_stage(100, 200), _stage(100, 300))["p999"] == "regressed"
    assert _verdicts(_stage(100, rps=100), _stage(100, rps=85))["rps"] == "regressed"
    assert _verdicts(_stage(100, rps=100), _stage(100, rps=95))["rps"] == "same"
    assert _verdicts(_stage(100), _stage(100, error_rate=0.0001))["errorRate"] == "regressed"
    assert _verdicts(_stage(100, error_rate=0.02), _stage(100, error_rate=0.021))["errorRate"] == "same"
    assert _verdicts(_stage(100, error_rate=0.02), _stage(100, error_rate=0.01))["errorRate"] == "improved"
    with pytest.raises(ValueError, match="must be a percentage"):
        parse_tolerance("-5%")
    assert parse_tolerance("10") == parse_tolerance("10%") == 0.1
