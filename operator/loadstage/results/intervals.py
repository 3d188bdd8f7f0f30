"""Confidence intervals of a stage's figures from a single run: a block bootstrap over the stage's
per-second histograms.

A bootstrap resamples what was measured to see how much the figures would move in another run. Resampling
single requests, or single seconds, treats them as independent, and under load they are not: a queue that
builds up in one second drains over the next few, so neighbouring seconds are slow together. Intervals from
independent resampling then come out too narrow. So the stage's seconds are cut into blocks of consecutive
seconds, and whole blocks are resampled, which keeps the dependence inside a block. The block length is
twice the lag at which the autocorrelation of the per-second mean latency, and of the per-second request
count, first falls below the noise band 2/sqrt(n) (twice: the correlation is small there, not gone), and at
least n^(1/3) seconds, the usual length for a variance; a stage needs MIN_BLOCKS blocks, or gets none.

Histograms are sparse here: {value_ns: count}, where each value is the top of its HdrHistogram bucket, so
that percentiles come out exactly as loadstage.results.histograms computes them for the merged histogram."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter, mul
from typing import Any

from hdrh.histogram import HdrHistogram

from loadstage.api.status.figures import FIGURES, Intervals, with_bounds
from loadstage.results import histograms

CONFIDENCE = 0.95
RESAMPLES = 1000
MIN_BLOCKS = 10

Sparse = dict[int, int]


_TOPS: dict[tuple[int, int, int], int] = {}   # a bucket's top value, by the histogram's layout and its index


def sparse(histogram: HdrHistogram) -> Sparse:
    """The histogram's counts by the top value of each bucket (nanoseconds)."""
    if histogram.get_total_count() == 0:
        return {}
    counts: Sparse = {}
    layout = (histogram.unit_magnitude, histogram.sub_bucket_half_count_magnitude)
    for index, count in histograms.occupied(histogram):
        value = _TOPS.get((*layout, index))
        if value is None:
            value = _TOPS[(*layout, index)] = histogram.get_highest_equivalent_value(
                histogram.get_value_from_index(index))
        counts[value] = counts.get(value, 0) + count
    return counts


def as_histogram(counts: Sparse) -> HdrHistogram:
    histogram = histograms.new()
    for value, count in counts.items():
        histogram.record_value(value, count)
    return histogram


@dataclass(frozen=True)
class Block:
    """Consecutive seconds of a stage: their requests' times, how many of them failed, and how long."""
    counts: Sparse
    failures: int
    seconds: float

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    @property
    def latency_ns(self) -> int:
        """Its requests' latencies, summed."""
        return sum(v * c for v, c in self.counts.items())


MAX_SERIES = 3600   # a longer stage's seconds are averaged into this many bins before the autocorrelation


def decorrelation_lag(series: Sequence[float], longest: int) -> int:
    """The first lag at which the autocorrelation falls below the noise band 2/sqrt(n) (a negative one, as in
    a rhythm, counts as fallen); `longest` if it has not by then. A long series is averaged into at most
    MAX_SERIES bins first, so that this stays linear in the stage's length."""
    n = len(series)
    width = max(1, math.ceil(n / MAX_SERIES))
    if width > 1:
        series = [sum(series[i:i + width]) / len(series[i:i + width]) for i in range(0, n, width)]
    mean = sum(series) / len(series)
    centred = [x - mean for x in series]
    variance = sum(x * x for x in centred)
    if variance == 0:
        return 1
    band = 2 / math.sqrt(len(series))
    for lag in range(1, min(longest // width, len(series) - 1) + 1):
        if sum(a * b for a, b in zip(centred, centred[lag:])) / variance < band:
            return lag * width
    return longest


def block_seconds(means: Sequence[float], counts: Sequence[float]) -> tuple[int, int] | None:
    """The block length for a stage, from its per-second mean latency and request count, and the lag at which
    they decorrelate; None when the stage is too short for MIN_BLOCKS blocks (or made too few requests)."""
    n = len(counts)
    if sum(1 for c in counts if c) < MIN_BLOCKS:
        return None
    longest = max(1, n // (2 * MIN_BLOCKS))   # blocks are at most n // MIN_BLOCKS long: no need to look further
    busy = [m for m, c in zip(means, counts) if c]   # a second without requests has no latency
    lag = max(decorrelation_lag(busy, longest), decorrelation_lag(counts, longest))
    length = min(max(2 * lag, math.ceil(n ** (1 / 3))), n // MIN_BLOCKS)
    return (length, lag) if length else None


def seconds_figures(seconds: Sequence[Sparse]) -> tuple[list[float], list[float]]:
    """Each second's mean latency (ns; 0 without requests) and request count."""
    counts = [float(sum(s.values())) for s in seconds]
    means = [sum(v * c for v, c in s.items()) / n if n else 0.0 for s, n in zip(seconds, counts)]
    return means, counts


def blocks_of(seconds: Sequence[Sparse], failures: Sequence[int], length: int) -> list[Block]:
    """Consecutive `length`-second blocks; the last one may be shorter. No second is left out."""
    blocks = []
    for start in range(0, len(seconds), length):
        merged: Sparse = {}
        for second in seconds[start:start + length]:
            for value, count in second.items():
                merged[value] = merged.get(value, 0) + count
        blocks.append(Block(merged, sum(failures[start:start + length]), len(seconds[start:start + length])))
    return blocks


def blocks_from_artifact(section: dict[str, Any] | None) -> list[Block]:
    """The blocks a Locust master wrote into a stage's artifact (locust.recorder); none if it wrote none."""
    if not section:
        return []
    return [Block(sparse(histograms.decode(encoded)), failures, seconds) for encoded, failures, seconds in
            zip(section["histograms"], section["failures"], section["durations"])]


def of_artifacts(sections: Sequence[dict[str, Any] | None], *, seed: str,
                 confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> Intervals | None:
    """Intervals from the blocks of one stage's artifact, or of several stages (a variant's row); None when a
    stage has no blocks (too short, or its artifact had to leave them out)."""
    present = [s for s in sections if s]
    if not sections or len(present) < len(sections):
        return None
    found = bootstrap([blocks_from_artifact(s) for s in present], seed=seed, confidence=confidence,
                      resamples=resamples)
    if found is None:
        return None
    if len(present) == 1:
        found["blockSeconds"] = present[0]["seconds"]
    if short := [s for s in present if s["seconds"] < 2 * s.get("correlationSeconds", 0)]:
        found["warning"] = (f"too short for blocks of 2 x {short[0]['correlationSeconds']} s (how long its "
                            f"seconds stay alike): may be too narrow")
    return found


def cumulative_rows(blocks: Sequence[Block], position: dict[int, int]) -> list[list[int]]:
    """Each block's cumulative counts over one grid of values (`position`: each value's index in it)."""
    rows = []
    for block in blocks:
        row = [0] * len(position)
        for value, count in block.counts.items():
            row[position[value]] += count
        running = 0
        for i, count in enumerate(row):
            running += count
            row[i] = running
        rows.append(row)
    return rows


class _Resampler:
    """Cumulative counts of every block over one grid of values, so that a percentile of any mix of blocks
    is a search over sums of a few rows."""

    def __init__(self, strata: Sequence[Sequence[Block]]):
        self.strata = [list(s) for s in strata if s]
        self.grid = sorted({v for stratum in self.strata for block in stratum for v in block.counts})
        position = {v: i for i, v in enumerate(self.grid)}
        self.cumulative: dict[int, list[int]] = {}
        everything = [b for stratum in self.strata for b in stratum]
        self.weighted_ns = {id(b): b.latency_ns for b in everything}
        self.seconds = {id(b): b.seconds for b in everything}
        self.failures = {id(b): b.failures for b in everything}
        for block, row in zip(everything, cumulative_rows(everything, position)):
            self.cumulative[id(block)] = row
        self.hints: dict[str, int] = {}
        if self.grid:   # the index of each percentile of every block once: where a resample's search starts
            found = self.figures(everything)
            self.hints = {name: position[round(ms * 1e6)] for name in histograms.LEVELS
                          if (ms := found[name]) is not None}

    def figures(self, chosen: list[Block]) -> dict[str, float | None]:
        weights = Counter(map(id, chosen))

        def added(per_block: dict[int, Any]) -> Any:
            return sum(map(mul, map(per_block.__getitem__, weights), weights.values()))
        rows, counts = list(map(self.cumulative.__getitem__, weights)), list(weights.values())
        total = sum(map(mul, map(itemgetter(-1), rows), counts)) if self.grid else 0
        seconds, failures = added(self.seconds), added(self.failures)
        result: dict[str, float | None] = {
            "rps": total / seconds if seconds else None,
            "errorRate": failures / total if total else None,
            "mean": added(self.weighted_ns) / total / 1e6 if total else None}
        at_least = 0
        for name, q in histograms.LEVELS.items():   # in rising order: each one's index is at least the last's
            if not total:
                result[name] = None
                continue
            at_least = self._first_reaching(rows, counts, max(1, math.ceil(q * total - 1e-9)), at_least,
                                            self.hints.get(name, 0))
            result[name] = self.grid[at_least] / 1e6
        return result

    def _first_reaching(self, rows: list[list[int]], counts: list[int], rank: int, low: int, hint: int) -> int:
        """The first index of the grid at or above `low` where the mix's cumulative count reaches `rank`. A
        resample's percentile is near the whole sample's (`hint`): the search gallops out from there, then
        halves, with a few sums over the rows where a search of the whole grid needs ten or more."""
        def reaches(i: int) -> bool:
            total: int = sum(map(mul, map(itemgetter(i), rows), counts))
            return total >= rank
        top = len(self.grid) - 1
        start, step = min(max(hint, low), top), 1
        if reaches(start):
            high, probe = start, start - 1
            while probe >= low and reaches(probe):
                high, step = probe, step * 2
                probe = high - step
            low = max(low, probe + 1)
        else:
            low, probe = start + 1, start + 1
            while probe < top and not reaches(probe):
                low, step = probe + 1, step * 2
                probe = start + step
            high = min(probe, top)   # the whole mix reaches every rank at the top
        while low < high:
            middle = (low + high) // 2
            if reaches(middle):
                high = middle
            else:
                low = middle + 1
        return low


def _quantile(sorted_values: list[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    return sorted_values[below] + (sorted_values[above] - sorted_values[below]) * (position - below)


def four_digits(value: float) -> float:
    """Four significant digits: what an interval's bounds are worth."""
    return float(f"{value:.4g}")


def bootstrap(strata: Iterable[Sequence[Block]], *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
              seed: int | str = 0) -> Intervals | None:
    """Percentile-bootstrap intervals of FIGURES over the blocks, resampled within each stratum (a stage: a
    variant's row resamples each of its stages on its own, then merges them). None without enough blocks.
    p999 gets no interval when there are fewer than histograms.P999_MIN_SAMPLES requests."""
    strata = [list(s) for s in strata if s]
    if not strata or any(len(s) < MIN_BLOCKS for s in strata):
        return None
    resampler = _Resampler(strata)
    rng = random.Random(str(seed))
    draws: dict[str, list[float]] = {name: [] for name in FIGURES}
    for _ in range(resamples):
        chosen = [block for stratum in strata for block in rng.choices(stratum, k=len(stratum))]
        for name, value in resampler.figures(chosen).items():
            if value is not None:
                draws[name].append(value)
    alpha = (1 - confidence) / 2
    result: Intervals = {"confidence": confidence, "method": "bootstrap", "blocks": sum(len(s) for s in strata)}
    requests = sum(block.requests for s in strata for block in s)
    for name in FIGURES:
        values = sorted(draws[name])
        if len(values) < resamples or (name == "p999" and requests < histograms.P999_MIN_SAMPLES):
            continue
        with_bounds(result, name, [four_digits(_quantile(values, alpha)), four_digits(_quantile(values, 1 - alpha))])
    return result


def with_exceptions(found: Intervals | None, raised: int, requests: int) -> Intervals | None:
    """The error rate's interval, for a verdict, where tasks raised: the blocks count only requests, so the
    `raised` exceptions (each a failed request, results.stage_results) are added to both bounds as a fixed
    count, (bound x requests + raised) / (requests + raised). Where they vary between blocks the interval is a
    little narrow."""
    if found is None or not raised or not (error_rate := found.get("errorRate")):
        return found
    low, high = error_rate
    return {**found, "errorRate": [four_digits((b * requests + raised) / (requests + raised)) for b in (low, high)]}
