"""What repeats of a run say beyond one run: confidence intervals from the variation between repeats, and the
studies' trimmed mean.

Each repeat gives one value of a figure (its p99, say). With n >= MIN_REPEATS repeats, the interval is
Student's t interval of their mean: mean +- t(n-1) * sd / sqrt(n). Latencies and throughputs vary by factors
rather than by amounts (a slower run is slower by some percent), so they are taken on a log scale and the
interval is a geometric one; the error rate, which may be 0, stays linear. The interval is of the figure a
repeat gives, so it covers what the next run is likely to centre on, machine drift between repeats
included, which a single run's bootstrap cannot see."""

from __future__ import annotations

import math
from collections.abc import Sequence

from loadstage.api.status import Headline
from loadstage.api.status.figures import FIGURES, Intervals, with_bounds
from loadstage.results import histograms
from loadstage.results.intervals import CONFIDENCE, four_digits
from loadstage.results.students_t import t_quantile

MIN_REPEATS = 3
LINEAR = ("errorRate",)


def _interval(values: Sequence[float], confidence: float, log: bool, share: bool) -> list[float]:
    xs = [math.log(v) for v in values] if log else list(values)
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    if log:
        return [four_digits(math.exp(mean - half)), four_digits(math.exp(mean + half))]
    return [four_digits(max(0.0, mean - half)), four_digits(min(1.0, mean + half) if share else mean + half)]


def between_repeats(headlines: Sequence[Headline], confidence: float = CONFIDENCE) -> Intervals | None:
    """Intervals of FIGURES from each repeat's value; None with fewer than MIN_REPEATS. A figure some repeat
    lacks gets none, and p999 none where a repeat had fewer than histograms.P999_MIN_SAMPLES requests."""
    if len(headlines) < MIN_REPEATS:
        return None
    result: Intervals = {"confidence": confidence, "method": "repeats", "repeats": len(headlines)}
    for name in FIGURES:
        values = [v for h in headlines if (v := h.figure(name)) is not None]
        if len(values) < len(headlines):
            continue
        if name == "p999" and min(h.requests for h in headlines) < histograms.P999_MIN_SAMPLES:
            continue
        log = name not in LINEAR and all(v > 0 for v in values)
        with_bounds(result, name, _interval(values, confidence, log, share=name in LINEAR))
    return result


def trimmed_mean(headlines: Sequence[Headline]) -> dict[str, float] | None:
    """The studies' figure: each figure's mean over the repeats without the highest and the lowest one; None
    with fewer than MIN_REPEATS."""
    if len(headlines) < MIN_REPEATS:
        return None
    result = {}
    for name in FIGURES:
        values = sorted(v for h in headlines if (v := h.figure(name)) is not None)
        if len(values) == len(headlines):
            kept = values[1:-1]
            result[name] = four_digits(sum(kept) / len(kept))
    return result
