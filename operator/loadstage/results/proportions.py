"""The exact (Clopper-Pearson) interval of a share: events out of trials. No failure in 800 requests is not an
error rate of 0: it is compatible with up to 0.46% at 95%, and an interval of [0, 0] would pass any objective."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - _log_beta(a, b))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def _solve(increasing: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where an increasing function of p reaches `target`."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if increasing(mid) < target else (low, mid)
    return (low + high) / 2


@functools.lru_cache(maxsize=4096)
def clopper_pearson(events: int, trials: int, confidence: float) -> tuple[float, float]:
    """The exact two-sided interval of a share of `events` in `trials`."""
    if trials <= 0:
        return 0.0, 1.0
    events = min(max(events, 0), trials)
    tail = (1 - confidence) / 2
    # P(X >= events; p) = I_p(events, trials - events + 1) grows with p; P(X <= events; p) falls with it
    low = 0.0 if events == 0 else _solve(lambda p: regularized_beta(events, trials - events + 1, p), tail)
    high = 1.0 if events == trials else _solve(
        lambda p: -(1 - regularized_beta(events + 1, trials - events, p)), -tail)
    return low, high
