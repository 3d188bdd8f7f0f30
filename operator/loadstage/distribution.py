"""Response-time distributions: merge histograms, then take percentiles.

A histogram maps a response-time bucket (ms, as Locust rounds it) to a count.
Merging adds counts, so percentiles of the merged histogram are percentiles of
all requests together. Averaging per-injector percentiles is not, and nothing
here does it except `weighted_average_percentile`, kept to show the error."""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Mapping

PERCENTILE_LEVELS = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}

Histogram = Mapping[float, int]


def merge(histograms: Iterable[Histogram]) -> Counter:
    merged: Counter = Counter()
    for h in histograms:
        for bucket, count in h.items():
            merged[float(bucket)] += int(count)
    return merged


def percentile(histogram: Histogram, q: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least ceil(q*n) samples at or below it."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total - 1e-9))
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return float(bucket)
    return float(max(histogram))


def percentiles(histogram: Histogram) -> dict[str, float | None]:
    return {name: percentile(histogram, q) for name, q in PERCENTILE_LEVELS.items()}


def exact_percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile of raw samples: the ground truth the histogram approximates."""
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(q * len(ordered) - 1e-9)) - 1]


def weighted_average_percentile(per_injector: list[tuple[int, float]]) -> float:
    """The spreadsheet method: per-injector percentiles averaged, weighted by request count.
    Wrong by construction; used only to measure how wrong."""
    total = sum(n for n, _ in per_injector)
    return sum(n * p for n, p in per_injector) / total


def bucket_width(value_ms: float) -> float:
    """Width of Locust's default response-time bucket at this value (2 significant digits)."""
    if value_ms < 100:
        return 1.0
    return 10.0 ** (math.floor(math.log10(value_ms)) - 1)
