"""Whether two figures differ by more than their noise: the interval of their relative difference, from
each figure's own confidence interval (results.intervals).

Each interval is read as a normal distribution of the figure's logarithm: a percentile's bootstrap
distribution is skewed, its logarithm much less, and a difference of logarithms is a ratio. The standard
error of each is its interval's width in logarithms over 2z; two runs (or two variants) are independent, so
the variance of their difference is the sum of theirs. An interval from n repeats (results.repeats) is a t
interval with n - 1 degrees of freedom, centred on the geometric mean of the repeats: its width is over 2t
instead, the difference is of those centres (not of the figures of the merged histograms, which weigh a busier
repeat more), and its interval is Welch's, with the Welch-Satterthwaite degrees of freedom rounded down. A
difference is significant when its interval leaves out zero."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from loadstage.api.status.figures import Intervals, bounds_of
from loadstage.results.students_t import t_quantile

CONFIDENCE = 0.95
RESOLUTION = 2.0 ** -10   # HDR histograms at 3 significant digits: a bucket is this wide, relatively
COMPARED = ("p50", "p90", "p95", "p99", "p999", "mean", "rps")   # the error rate can be 0: no logarithm
LOWER_IS_BETTER = {"p50", "p90", "p95", "p99", "p999", "mean"}


def z_of(confidence: float) -> float:
    return NormalDist().inv_cdf((1 + confidence) / 2)


def each_figure(confidence: float, judged: int) -> float:
    """The level of each of `judged` figures' intervals, for one verdict over all of them ("any regressed",
    "one is best") at `confidence` (Bonferroni: the chances of a false alarm add up over the figures)."""
    return 1 - (1 - confidence) / max(judged, 1)


@dataclass(frozen=True)
class Difference:
    """`new` against `base`: new / base - 1, and its interval at `confidence`."""
    figure: str
    relative: float
    low: float
    high: float
    confidence: float

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0

    @property
    def worse(self) -> bool:
        """Significantly worse: slower, or less throughput."""
        return self.low > 0 if self.figure in LOWER_IS_BETTER else self.high < 0

    @property
    def better(self) -> bool:
        return self.high < 0 if self.figure in LOWER_IS_BETTER else self.low > 0

    def text(self) -> str:
        return f"{self.relative:+.1%} [{self.low:+.1%}, {self.high:+.1%}]"


def _freedom(intervals: Intervals) -> int | None:
    """The degrees of freedom of an interval from repeats; None (infinite) for a bootstrap's."""
    return intervals["repeats"] - 1 if intervals.get("method") == "repeats" else None


def _quantile(confidence: float, freedom: float | None) -> float:
    return z_of(confidence) if freedom is None else t_quantile(confidence, max(1, math.floor(freedom)))


def _log_error(value: float, intervals: Intervals, figure: str) -> float | None:
    """The standard error of the figure's logarithm; never below the histograms' resolution (an interval of
    one bucket, [x, x], still knows the figure only to that bucket)."""
    bounds = bounds_of(intervals, figure)
    if not bounds or value is None or value <= 0 or bounds[0] <= 0 or bounds[1] <= 0:
        return None
    width = max(math.log(bounds[1]) - math.log(bounds[0]), 2 * RESOLUTION)
    return width / (2 * _quantile(intervals["confidence"], _freedom(intervals)))


def _centre(value: float, intervals: Intervals, figure: str) -> float:
    """What the interval is of: the repeats' geometric mean (the middle of a t interval of logs), else the
    figure itself."""
    bounds = bounds_of(intervals, figure)
    return math.sqrt(bounds[0] * bounds[1]) if _freedom(intervals) is not None and bounds else value


def _welch(errors: list[float], freedoms: list[int | None]) -> float | None:
    """The Welch-Satterthwaite degrees of freedom of a difference; None (infinite) with two bootstraps."""
    tails = [e ** 4 / f for e, f in zip(errors, freedoms) if f is not None]   # errors are never 0 (RESOLUTION)
    return sum(e * e for e in errors) ** 2 / sum(tails) if tails else None


def difference(figure: str, base: float | None, base_intervals: Intervals | None, new: float | None,
               new_intervals: Intervals | None, confidence: float = CONFIDENCE) -> Difference | None:
    """None where either side has no interval of the figure (a short stage, a result from before intervals),
    or a figure of 0."""
    if not base_intervals or not new_intervals or not base or not new:
        return None
    found = [_log_error(base, base_intervals, figure), _log_error(new, new_intervals, figure)]
    errors = [e for e in found if e is not None]
    if len(errors) < 2:
        return None
    freedom = _welch(errors, [_freedom(base_intervals), _freedom(new_intervals)])
    spread = _quantile(confidence, freedom) * math.hypot(*errors)
    log_ratio = math.log(_centre(new, new_intervals, figure) / _centre(base, base_intervals, figure))
    return Difference(figure, _relative(log_ratio), _relative(log_ratio - spread), _relative(log_ratio + spread),
                      confidence)


def _relative(log_ratio: float) -> float:
    """A ratio's logarithm as a relative difference; a damaged interval's absurd width is held to a finite one."""
    return math.expm1(min(log_ratio, MAX_LOG_RATIO))


MAX_LOG_RATIO = 700.0   # e^700: beyond any figure, below a float's overflow
