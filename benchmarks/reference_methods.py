"""The methods loadstage compares itself with: Locust's response-time dict and the spreadsheet.

A Locust dict maps a response-time bucket (ms, rounded to 2 significant digits) to a count.
Merging adds counts; percentiles of the merged dict are those of all requests together, at
Locust's resolution. Averaging per-injector percentiles is not even that, and nothing here does
it except `weighted_average_percentile`, kept to show the error. loadstage's own percentiles
come from HDR histograms (loadstage.results.histograms); these serve the fidelity benchmark and its test."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

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


def exact_percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile of raw samples: the ground truth the histogram approximates."""
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(q * len(ordered) - 1e-9)) - 1]


def weighted_average_percentile(per_injector: list[tuple[int, float]]) -> float:
    """The spreadsheet method: per-injector percentiles averaged, weighted by request count.
    Wrong by construction; used only to measure how wrong."""
    total = sum(n for n, _ in per_injector)
    return sum(n * p for n, p in per_injector) / total
