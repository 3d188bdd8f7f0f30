"""A verdict's intervals: batch means over a stage's settled seconds (Schmeiser 1982; Law & Kelton ch. 9).

Under load, neighbouring seconds are alike (a queue remembers), so seconds are not independent observations. The
stage's blocks (results.intervals: consecutive seconds, at least twice their decorrelation lag) are the first
batches; while the batches' mean latencies (around their trend, which results.steady judges) are still
autocorrelated (von Neumann's ratio, one-sided at AUTOCORRELATION_ALPHA) they are merged in pairs, so long as
MIN_BATCHES remain; still autocorrelated then, the standard error is widened on the side that would pass
(Batches.inflation). Each batch is then one observation, and a figure's interval is a Student t-interval of a
ratio over the batches, with batches - 1 degrees of freedom:
- a percentile: p_q <= v exactly when the share of requests slower than v is at most 1 - q (nearest rank, from
  the HDR counts), so v is an upper bound of p_q where the share slower than v is confidently below 1 - q, and a
  lower bound where the share slower than v is confidently above it: the interval is read by inversion, scanning
  the histogram's bucket tops outwards from the percentile. "Confidently" needs both the batches' t-interval and
  the exact binomial test of the pooled counts (Clopper-Pearson), so that a tail the batches never reached, or
  reached once, decides nothing;
- the error rate: failures / requests; the rate: requests / seconds; the mean: latency / requests.
A t-interval over batches is honest where the stage saw its tail many times over: with a few users, as Locust's
closed model runs, a stage of a minute does (tests/unit/test_verdicts.py). An open, Poisson-like arrival at 90%
utilisation and more puts most of its slow requests into rare long excursions, and no stage of minutes is long
enough: its verdicts near the objective may be wrong (docs/measurement.md)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from loadstage.api.status.figures import Intervals, with_bounds
from loadstage.results import histograms
from loadstage.results.intervals import MIN_BLOCKS, Block, blocks_from_artifact, cumulative_rows
from loadstage.results.proportions import regularized_beta
from loadstage.results.steady import rise
from loadstage.results.students_t import t_quantile

MIN_BATCHES = MIN_BLOCKS   # a t-interval from fewer says little; the blocks are never fewer
AUTOCORRELATION_ALPHA = 0.10
MAX_CORRELATION = 0.8
BUCKET_WIDTH = 0.001   # of an HDR bucket (3 significant digits), relative: below its top lies its lowest value


def von_neumann(series: Sequence[float]) -> tuple[bool, float]:
    """Von Neumann's ratio of successive differences to the variance, one-sided at AUTOCORRELATION_ALPHA: whether
    neighbours are more alike than independent values would be, and the lag-1 autocorrelation it implies (1 -
    ratio / 2, at least 0, at most MAX_CORRELATION)."""
    n = len(series)
    mean = sum(series) / n if n else 0.0
    spread = sum((x - mean) ** 2 for x in series)
    if n < 3 or spread == 0:
        return False, 0.0
    ratio = sum((b - a) ** 2 for a, b in itertools.pairwise(series)) / spread
    sd = math.sqrt(4 * (n - 2) / ((n - 1) * (n + 1)))
    return (ratio - 2) / sd < NormalDist().inv_cdf(AUTOCORRELATION_ALPHA), min(max(0.0, 1 - ratio / 2),
                                                                               MAX_CORRELATION)


def mean_latencies(blocks: Sequence[Block]) -> list[float]:
    """Each block's mean latency (ns); a block without requests as slow as the slowest (it answered nothing)."""
    means = [b.latency_ns / b.requests if b.requests else None for b in blocks]
    worst = max((m for m in means if m is not None), default=0.0)
    return [worst if m is None else m for m in means]


def detrended(series: Sequence[float]) -> list[float]:
    """What is left of a series around its Sen's line: a climb is no memory (results.steady judges it)."""
    slope = rise(series) / len(series) if series else 0.0
    return [x - slope * i for i, x in enumerate(series)]


def _merged(pair: Sequence[Block]) -> Block:
    counts: dict[int, int] = {}
    for block in pair:
        for value, count in block.counts.items():
            counts[value] = counts.get(value, 0) + count
    return Block(counts, sum(b.failures for b in pair), sum(b.seconds for b in pair))


@dataclass(frozen=True)
class Batches:
    """A stage's settled seconds in batches; `correlation`: their means' lag-1 autocorrelation where MIN_BATCHES
    of them were still autocorrelated (0 where they are not)."""
    batches: tuple[Block, ...]
    seconds: float          # each batch's length (the last may be shorter)
    correlation: float = 0.0

    @property
    def inflation(self) -> float:
        """How much wider an interval over autocorrelated batches is (an AR(1)'s variance of a mean: (1 + r) /
        (1 - r), Law & Kelton), as a factor of its standard error. It widens the side that would pass (a
        latency's upper bound, the rate's lower): a stage's first seconds, from an empty queue, only flatter it,
        and the climb out of them is a step, not memory, which must not hold a breach back."""
        return math.sqrt((1 + self.correlation) / (1 - self.correlation))

    @property
    def means(self) -> list[float]:
        return mean_latencies(self.batches)


def batches_of(section: dict[str, Any] | None) -> Batches | None:
    """The blocks a Locust master recorded (results.intervals), as batches (batches_from)."""
    return batches_from(blocks_from_artifact(section), float(section["seconds"]) if section else 0.0)


def batches_from(blocks: list[Block], length: float) -> Batches | None:
    """Blocks of `length` seconds merged in pairs until their means are not autocorrelated, so long as MIN_BATCHES
    remain (still autocorrelated then, with their correlation); None with fewer than MIN_BATCHES blocks."""
    if len(blocks) < MIN_BATCHES:
        return None
    while True:
        alike, correlation = von_neumann(detrended(mean_latencies(blocks)))
        if not alike:
            return Batches(tuple(blocks), length)
        if len(blocks) // 2 < MIN_BATCHES:
            return Batches(tuple(blocks), length, correlation)
        blocks = [_merged(blocks[i:i + 2]) for i in range(0, len(blocks), 2)]
        length *= 2


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float], confidence: float,
                   inflation: tuple[float, float] = (1.0, 1.0)) -> tuple[float, float] | None:
    """The t-interval of sum(numerators) / sum(denominators) over batches (the ratio estimator's variance), its
    standard error times `inflation`'s first below the ratio, its second above it."""
    k, total = len(numerators), sum(denominators)
    if k < 2 or not total:
        return None
    ratio = sum(numerators) / total
    residuals = sum((y - ratio * x) ** 2 for y, x in zip(numerators, denominators))
    return _t_bounds(ratio, residuals, k, total, confidence, inflation)


def _t_bounds(ratio: float, residuals: float, k: int, total: float, confidence: float,
              inflation: tuple[float, float]) -> tuple[float, float]:
    error = math.sqrt(residuals / (k * (k - 1))) / (total / k)
    half = t_quantile(confidence, k - 1) * error
    return ratio - half * inflation[0], ratio + half * inflation[1]


class _Tail:
    """Each batch's cumulative counts over one grid of bucket tops: the requests slower than any of them."""

    def __init__(self, batches: Sequence[Block], inflation: tuple[float, float]):
        self.inflation = inflation
        self.grid = sorted({v for b in batches for v in b.counts})
        position = {v: i for i, v in enumerate(self.grid)}
        self.requests = [b.requests for b in batches]
        self.total = sum(self.requests)
        self.cumulative = cumulative_rows(batches, position)
        self.pooled = [sum(column) for column in zip(*self.cumulative)]
        self._squares = sum(n * n for n in self.requests)
        self._sums: dict[int, tuple[int, int]] = {}

    def slower(self, index: int) -> list[int]:
        """Each batch's requests slower than grid[index] (index -1: than anything below the grid, so all)."""
        if index < 0:
            return list(self.requests)
        return [n - row[index] for n, row in zip(self.requests, self.cumulative)]

    def events(self, index: int) -> int:
        """The requests slower than grid[index], over every batch."""
        return self.total - self.pooled[index] if index >= 0 else self.total

    def slower_interval(self, index: int, confidence: float) -> tuple[float, float] | None:
        """ratio_interval(slower(index), requests), its residuals summed exactly in integers from sums cached by
        index: the percentiles' scans cross the same bucket tops, hundreds of times a verdict."""
        k, total = len(self.requests), self.total
        if k < 2 or not total:
            return None
        sums = self._sums.get(index)
        if sums is None:
            slow = self.slower(index)
            sums = self._sums[index] = (sum(s * s for s in slow),
                                        sum(s * n for s, n in zip(slow, self.requests)))
        events, (squares, products) = self.events(index), sums
        scaled = squares * total * total - 2 * total * events * products + events * events * self._squares
        return _t_bounds(events / total, max(0, scaled) / (total * total), k, total, confidence, self.inflation)

    def share_is(self, index: int, share: float, confidence: float) -> str | None:
        """'below' or 'above' where the share slower than grid[index] is confidently below or above `share`, by
        the batches' t-interval and the pooled counts' exact test alike; else None."""
        found = self.slower_interval(index, confidence)
        if found is None:
            return None
        events, tail = self.events(index), (1 - confidence) / 2
        if found[1] < share and (events == self.total or 1 - regularized_beta(events + 1, self.total - events,
                                                                                share) <= tail):
            return "below"
        if found[0] > share and (events and regularized_beta(events, self.total - events + 1, share) <= tail):
            return "above"
        return None

    def percentile_bounds(self, quantile: float, confidence: float) -> tuple[float, float]:
        """[low, high] of the quantile, ms, by inversion; high infinite where no bucket top is confidently above
        it (too few requests: none of 200 over a value is compatible with 1.8% over it), so that it can fail but
        not pass."""
        share = 1 - quantile
        rank = max(1, math.ceil(quantile * self.total - 1e-9))
        at = next(i for i, row in enumerate(self.pooled) if row >= rank)
        high = next((i for i in range(at, len(self.grid)) if self.share_is(i, share, confidence) == "below"), None)
        low = next((i for i in range(at - 1, -2, -1) if self.share_is(i, share, confidence) == "above"), None)
        bottom = 0.0 if low is None else self.grid[low] if low >= 0 else self.grid[0] * (1 - BUCKET_WIDTH)
        return bottom / 1e6, math.inf if high is None else self.grid[high] / 1e6


def intervals(found: Batches | None, confidence: float) -> Intervals | None:
    """Each figure's interval over the batches; None without batches."""
    if found is None:
        return None
    batches, wider = found.batches, found.inflation
    slower, faster = (1.0, wider), (wider, 1.0)   # widened on the side that would pass
    requests = [b.requests for b in batches]
    result: Intervals = {"confidence": confidence, "method": "batch means", "blocks": len(batches),
                         "blockSeconds": found.seconds}
    figures = {"rps": ratio_interval(requests, [b.seconds for b in batches], confidence, faster),
               "errorRate": ratio_interval([b.failures for b in batches], requests, confidence, slower),
               "mean": ratio_interval([b.latency_ns / 1e6 for b in batches], requests, confidence, slower)}
    tail = _Tail(batches, slower)
    if tail.total:
        for name, quantile in histograms.LEVELS.items():
            if name != "p999" or tail.total >= histograms.P999_MIN_SAMPLES:
                figures[name] = tail.percentile_bounds(quantile, confidence)
    for name, bounds in figures.items():
        if bounds is not None:
            with_bounds(result, name, [_four_digits(max(0.0, bounds[0]), math.floor),
                                       _four_digits(bounds[1], math.ceil)])
    return result


def _four_digits(value: float, rounded: Callable[[float], int]) -> float:
    """Four significant digits, rounded outwards (`rounded`: math.floor for a low bound, math.ceil for a high
    one), so that an interval never loses what it holds."""
    if value == 0 or math.isinf(value):
        return value
    scale = 10.0 ** (3 - math.floor(math.log10(abs(value))))
    return float(f"{rounded(value * scale) / scale:.4g}")
