"""Response-time histograms at 3 significant digits (HdrHistogram), recorded in nanoseconds (so that
sub-millisecond times keep their 3 digits too).

Every injector records every request, as counts by the histogram's bucket index (a tally), and reports them
as such: [index, count, index, count, ...], which the master adds to its histograms at a few microseconds a
bucket (decoding the standard encoding and adding cost about 0.3 ms a histogram). Results carry
HdrHistogram's standard compressed encoding (base64), which any HdrHistogram library decodes; both merge
exactly by adding counts.
Percentiles are nearest-rank: the smallest recorded value with at least ceil(q*n) samples at or
below it, reported as the top of its bucket (never below the true value, at most 0.1% above it)
and never above the exact maximum."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from itertools import compress
from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_NS = 1
HIGHEST_NS = 3_600_000_000_000        # one hour
SIGNIFICANT_DIGITS = 3
LEVELS = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}
P999_MIN_SAMPLES = 1000               # below this, p99.9 is the maximum and says little


def new() -> HdrHistogram:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)


_SHAPE = new()
_UNIT: int = _SHAPE.unit_magnitude
_HALF_MAGNITUDE: int = _SHAPE.sub_bucket_half_count_magnitude
_HALF_COUNT: int = _SHAPE.sub_bucket_half_count
_MASK: int = _SHAPE.sub_bucket_mask


def index_of(value_ns: int) -> int:
    """HdrHistogram.get_counts_array_index(value), inlined: an injector computes it for every request."""
    bucket = (value_ns | _MASK).bit_length() - _UNIT - _HALF_MAGNITUDE - 1
    return ((bucket + 1) << _HALF_MAGNITUDE) + (value_ns >> (bucket + _UNIT)) - _HALF_COUNT


def tally(into: dict[int, int], value_ns: int) -> None:
    index = index_of(value_ns)
    into[index] = into.get(index, 0) + 1


def flat(counts: dict[int, int]) -> list[int]:
    """A tally as it travels: [index, count, index, count, ...]."""
    return [n for pair in counts.items() for n in pair]


def add_flat(histogram: HdrHistogram, pairs: list[int]) -> None:
    """Adds a tally in its travelling form, exactly as adding the histogram of the same values would."""
    if not pairs:
        return
    counts = histogram.counts
    for i in range(0, len(pairs), 2):
        counts[pairs[i]] += pairs[i + 1]
    indexes = pairs[0::2]
    histogram.total_count += sum(pairs[1::2])
    histogram.min_value = min(histogram.min_value, histogram.get_value_from_index(min(indexes)))
    histogram.max_value = max(histogram.max_value,
                              histogram.get_highest_equivalent_value(histogram.get_value_from_index(max(indexes))))


def flat_total(pairs: list[int]) -> int:
    return sum(pairs[1::2])


def to_ns(ms: float) -> int:
    return min(HIGHEST_NS, max(LOWEST_NS, round(ms * 1_000_000)))


def record(histogram: HdrHistogram, ms: float) -> None:
    histogram.record_value(to_ns(ms))


def encode(histogram: HdrHistogram) -> str:
    encoded: bytes = histogram.encode()
    return encoded.decode("ascii")


def decode(encoded: str) -> HdrHistogram:
    return HdrHistogram.decode(encoded.encode("ascii"))


def decodes(encoded: str) -> bool:
    """Whether `encoded` is an HdrHistogram's compressed encoding (of a file that may be damaged)."""
    try:
        decode(encoded)
    except Exception:   # hdrh raises what zlib, base64 and its own header checks raise
        return False
    return True


def merge(histograms: Iterable[HdrHistogram]) -> HdrHistogram:
    merged = new()
    for histogram in histograms:
        merged.add(histogram)
    return merged


def merge_encoded(encoded: Iterable[str]) -> HdrHistogram:
    return merge(decode(e) for e in encoded)


def occupied(histogram: HdrHistogram) -> Iterator[tuple[int, int]]:
    """(index, count) of each bucket with a count, from the lowest value to the highest; the empty buckets between
    are skipped in C (itertools.compress), not walked in Python."""
    first = histogram.get_counts_array_index(histogram.get_min_value())
    counts = histogram.counts[first:histogram.get_counts_array_index(histogram.get_max_value()) + 1]
    return zip(compress(range(first, first + len(counts)), counts), compress(counts, counts))


def mean_ns(histogram: HdrHistogram) -> float:
    """HdrHistogram.get_mean_value(), over the buckets with a count: that method walks every bucket through Python
    iterator objects, tens of times slower (it was most of an injector's cost)."""
    total: int = histogram.get_total_count()
    if total == 0:
        return 0.0
    weighted = 0.0
    for index, count in occupied(histogram):
        weighted += count * histogram._hdr_median_equiv_value(histogram.get_value_from_index(index))
    return weighted / total


def percentiles_ns(histogram: HdrHistogram, levels: dict[str, float]) -> dict[str, int | None]:
    """Nearest-rank percentiles, in one pass over the buckets with a count."""
    total = histogram.get_total_count()
    if total == 0:
        return dict.fromkeys(levels)
    ranks = sorted((max(1, math.ceil(q * total - 1e-9)), name) for name, q in levels.items())
    result: dict[str, int | None] = {}
    seen, next_rank = 0, 0
    for index, count in occupied(histogram):
        seen += count
        while next_rank < len(ranks) and seen >= ranks[next_rank][0]:
            result[ranks[next_rank][1]] = histogram.get_highest_equivalent_value(histogram.get_value_from_index(index))
            next_rank += 1
        if next_rank == len(ranks):
            break
    return result


def _digits(ms: float) -> float:
    """Enough digits that printing adds no error to the histogram's own 0.1%."""
    return float(f"{ms:.6g}")


def latency_ms(histogram: HdrHistogram, max_ms: float | None = None) -> dict[str, Any]:
    """p50..p99.9 and max in milliseconds, `n` samples, and `p999Reliable` (n >= 1000).
    `max_ms` is the exact maximum where it is known (Locust's), which caps every percentile."""
    n: int = histogram.get_total_count()
    top: float = (histogram.get_max_value() / 1e6 if n else 0.0) if max_ms is None else max_ms
    result: dict[str, Any] = {name: None if ns is None else _digits(min(ns / 1e6, top))
                              for name, ns in percentiles_ns(histogram, LEVELS).items()}
    result["max"] = _digits(top) if n else None
    result["n"] = n
    result["p999Reliable"] = n >= P999_MIN_SAMPLES
    return result
