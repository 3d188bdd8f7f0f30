"""Whether a stage's latency is still climbing. Every stage starts on an empty queue (and a closed model spawns
its users over its first seconds); near saturation latency climbs for the whole stage, and its first seconds are
the best it will ever have: a verdict drawn from them while they climb is a verdict on a transient.

- The settling seconds are cut first (MSER-5, White 1997): the per-second mean latency in batches of MSER_BATCH
  seconds, and the number of leading batches whose removal minimises the squared standard error of the rest's
  mean, searched over the first half; at least SETTLE_FLOOR_SECONDS.
- Then Mann-Kendall's test, one-sided at TREND_ALPHA, on the per-second mean latency of the seconds left
  (rank-based: one slow second does not make a trend), and a rise that matters: Sen's slope over those seconds
  at least MATERIAL_RISE of their median (a flat, noisy stage's 2% drift is no transient)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

TREND_ALPHA = 0.05
MATERIAL_RISE = 0.10   # ... and a rise over the seconds of at least this share of their median: a trend that matters
MSER_BATCH = 5
SETTLE_FLOOR_SECONDS = 2   # connections opened and users spawned: no stage's first seconds are steady


def settle_seconds(means: Sequence[float], requests: Sequence[int]) -> int:
    """How many leading seconds to cut before the trend test (MSER-5 over the first half)."""
    series = []
    for i in range(0, len(means) - MSER_BATCH + 1, MSER_BATCH):
        served = sum(requests[i:i + MSER_BATCH])
        series.append(sum(m * n for m, n in zip(means[i:i + MSER_BATCH], requests[i:i + MSER_BATCH])) / served
                      if served else None)
    worst = max((m for m in series if m is not None), default=0.0)
    batches = [worst if m is None else m for m in series]   # a batch with no answer is as slow as any
    best, cut = math.inf, 0
    for at in range(len(batches) // 2 + 1):
        rest = batches[at:]
        if not rest:
            break
        centre = sum(rest) / len(rest)
        mser = sum((x - centre) ** 2 for x in rest) / len(rest) ** 2
        if mser < best:
            best, cut = mser, at
    return max(SETTLE_FLOOR_SECONDS, cut * MSER_BATCH)


def upward_trend(values: Sequence[float]) -> bool:
    """Mann-Kendall, one-sided at TREND_ALPHA: whether the values rise beyond chance."""
    n = len(values)
    if n < 4:
        return False
    s = sum((b > a) - (b < a) for i, a in enumerate(values) for b in values[i + 1:])
    ties: dict[float, int] = {}
    for v in values:
        ties[v] = ties.get(v, 0) + 1
    variance = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties.values())) / 18
    if variance <= 0 or s <= 0:
        return False
    return (s - 1) / math.sqrt(variance) > NormalDist().inv_cdf(1 - TREND_ALPHA)


def climbing(blocks: dict[str, Any] | None) -> bool:
    """Whether a stage's (or a look's) settled seconds show latency still climbing: their per-second mean latency
    and requests, as the Locust master records them beside the blocks (`secondMeans`, `secondRequests`); a second
    without requests is left out of the trend."""
    means = list((blocks or {}).get("secondMeans") or ())
    requests = list((blocks or {}).get("secondRequests") or ())
    if len(requests) != len(means):
        return False
    cut = settle_seconds(means, requests)
    settled = [m for m, n in zip(means[cut:], requests[cut:]) if n]
    return upward_trend(settled) and rise(settled) >= MATERIAL_RISE * statistics.median(settled)


def rise(values: Sequence[float]) -> float:
    """Sen's slope (the median of the pairwise slopes) times the series' length: how much it rose."""
    slopes = [(b - a) / (j - i) for i, a in enumerate(values) for j, b in enumerate(values[i + 1:], i + 1)]
    return statistics.median(slopes) * len(values) if slopes else 0.0
