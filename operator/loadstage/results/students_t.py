"""Student's t distribution, for every interval of a mean over few observations (repeats, batches, segments)."""

from __future__ import annotations

import functools
import math
from statistics import NormalDist


def two_sided(t: float, freedom: int) -> float:
    """P(|T| < t) for Student's t with `freedom` degrees of freedom (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(freedom))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if freedom % 2:
        term, total = math.cos(theta), 0.0
        for k in range(1, (freedom - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2 / math.pi * (theta + s * total) if freedom > 1 else 2 * theta / math.pi
    term, total = 1.0, 0.0
    for k in range(1, freedom // 2 + 1):
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return s * total


@functools.cache
def t_quantile(confidence: float, freedom: int) -> float:
    """The t with P(|T| < t) = confidence: a two-sided `confidence` interval's half-width, in standard errors.
    Newton's method on `two_sided` (concave for t > 0: from below, no step overshoots) from the Cornish-Fisher
    expansion, which lies below the root or within 1e-11 of it (far below it at 1 and 2 degrees of freedom)."""
    t = _cornish_fisher(confidence, freedom)
    for _ in range(100):
        step = (confidence - two_sided(t, freedom)) / (2 * _density(t, freedom))
        t += step
        if abs(step) <= 1e-13 * t:
            break
    return t


def _density(t: float, freedom: int) -> float:
    f = float(freedom)
    return math.exp(math.lgamma((f + 1) / 2) - math.lgamma(f / 2) - math.log(f * math.pi) / 2
                    - (f + 1) / 2 * math.log1p(t * t / f))


def _cornish_fisher(confidence: float, freedom: int) -> float:
    z, v = NormalDist().inv_cdf((1 + confidence) / 2), float(freedom)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3)
            + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / (92160 * v ** 4))
