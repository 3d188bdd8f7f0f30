"""Whether a stage's seconds are a steady state, and from which second. Every stage starts on an empty queue (and a
closed model spawns its users over its first seconds); near saturation latency climbs for the whole stage, and
its first seconds are the best it will ever have: a verdict drawn from them is a verdict on a transient.

- The settling seconds (MSER-5, White 1997): the per-second mean latency in batches of MSER_BATCH seconds; the
  cut is the number of leading batches whose removal minimises the squared standard error of the rest's mean,
  searched over at most the first half and leaving at least two batches, and only among cuts of an optimistic
  start (the seconds cut faster on average than those kept). A stage's transient is its queue filling up, which
  flatters it; a slow start (a variant's cold start is its warm-up's) is the target's own state: a target that
  collapses and recovers within a stage has collapsed, and MSER alone would cut the collapse. No floor: a stage's
  first seconds are cut only where the data says so (so not before 15 s, three batches), which keeps a clear
  stage's 10 s look; near its objective a stage waits longer anyway (results.judgement). A verdict is drawn from
  the seconds after the cut (whole blocks of the intervals, leaving enough for an interval: a cut shortened so is
  shortened until it is still an optimistic start, and until its blocks hold no larger share of requests slower
  than a latency objective than the rest: a start faster on average can hold the tail); the stage's histograms
  keep them all.
- A climb: Mann-Kendall's test, one-sided at TREND_ALPHA, on the mean latency of the settled seconds' batches
  (results.batch_means: batches whose means are not autocorrelated, as the test assumes; per-second means near
  saturation are, and made steady stages look like climbs), or of its blocks where no such batches form; and a
  rise that matters: Sen's slope over them at least MATERIAL_RISE of their median (a flat, noisy stage's 2% drift
  is no transient). A cut that reached its ceiling is not by itself unsteady: the trend over the half left
  decides."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from statistics import NormalDist
from typing import Any

from loadstage.results import histograms
from loadstage.results.intervals import MIN_BLOCKS, Block, blocks_from_artifact

TREND_ALPHA = 0.01
MATERIAL_RISE = 0.10
MSER_BATCH = 5


def _served_mean(means: Sequence[float], requests: Sequence[int]) -> float | None:
    """The mean latency of seconds, each weighted by its requests; None where none was served."""
    served = sum(requests)
    return sum(m * n for m, n in zip(means, requests)) / served if served else None


def settle_cut(means: Sequence[float], requests: Sequence[int]) -> int:
    """How many leading seconds to cut: MSER-5 over the per-second means (weighted by their requests), of an
    optimistic start only."""
    series = [_served_mean(means[i:i + MSER_BATCH], requests[i:i + MSER_BATCH])
              for i in range(0, len(means) - MSER_BATCH + 1, MSER_BATCH)]
    worst = max((m for m in series if m is not None), default=0.0)
    batches = [worst if m is None else m for m in series]   # a batch without an answer is as slow as any
    best, cut = math.inf, 0
    for at in range(min(len(batches) // 2, len(batches) - 2) + 1):
        rest = batches[at:]
        centre = sum(rest) / len(rest)
        if at and sum(batches[:at]) / at > centre:
            continue
        mser = sum((x - centre) ** 2 for x in rest) / len(rest) ** 2
        if mser < best:
            best, cut = mser, at
    return cut * MSER_BATCH


def settled(section: dict[str, Any], floor: float = 0, slow_ms: Iterable[float] = (),
            every: Sequence[Block] | None = None) -> tuple[dict[str, Any], int]:
    """A stage's blocks (as the Locust master records them, with each second's mean latency and requests beside
    them) without its settling seconds, cut in whole blocks and leaving enough for an interval; and how many
    seconds were cut. `floor`: seconds cut whatever the data says (a verification's step, while its HPA acts).
    `slow_ms`: latency objectives; the blocks cut must not hold a larger share of requests slower than one than
    the blocks kept (a start faster on average can still hold the stage's tail); `every`: the section's blocks,
    where the caller has them decoded already."""
    means, requests = section.get("secondMeans") or [], section.get("secondRequests") or []
    seconds_known = bool(means) and len(means) == len(requests)
    if not seconds_known and not floor:
        return section, 0
    length = section["seconds"]
    cut = max(settle_cut(means, requests) if seconds_known else 0, math.ceil(floor))
    most = max(0, len(section["histograms"]) - MIN_BLOCKS)
    blocks, floor_blocks = min(-(-cut // length), most), min(-(-math.ceil(floor) // length), most)
    limits = [histograms.to_ns(ms) for ms in slow_ms] if blocks > floor_blocks else []
    tails = _tails(blocks_from_artifact(section) if every is None else every, limits) if limits else []
    while blocks > floor_blocks and seconds_known and not (_optimistic(means, requests, blocks * length) and
                                                           _lighter_tail(tails, blocks)):
        blocks -= 1     # shortened to whole blocks, the cut must still be an optimistic start
    cut = blocks * length
    kept = {"secondMeans": means[cut:], "secondRequests": requests[cut:]} if seconds_known else {}
    return {**section, "histograms": section["histograms"][blocks:], "failures": section["failures"][blocks:],
            "durations": section["durations"][blocks:], **kept}, cut


def _optimistic(means: Sequence[float], requests: Sequence[int], cut: int) -> bool:
    """Whether the first `cut` seconds were faster on average than the rest (seconds without a request are as slow
    as any)."""
    cut_mean, kept_mean = _served_mean(means[:cut], requests[:cut]), _served_mean(means[cut:], requests[cut:])
    return (math.inf if cut_mean is None else cut_mean) <= (math.inf if kept_mean is None else kept_mean)


def _tails(blocks: Sequence[Block], limits: Sequence[int]) -> list[tuple[int, ...]]:
    """Each block's requests, and how many of them were slower than each of `limits` (ns, by their buckets'
    tops)."""
    return [(b.requests, *(sum(n for v, n in b.counts.items() if v > limit) for limit in limits)) for b in blocks]


def _lighter_tail(tails: Sequence[tuple[int, ...]], cut: int) -> bool:
    """Whether the first `cut` blocks held no larger share of slow requests than the rest, for every limit."""
    if not tails:
        return True
    early, late = [sum(column) for column in zip(*tails[:cut])], [sum(column) for column in zip(*tails[cut:])]
    return all(early[i] * late[0] <= late[i] * early[0] for i in range(1, len(early)))


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


def rise(values: Sequence[float]) -> float:
    """Sen's slope (the median of the pairwise slopes) times the series' length: how much it rose."""
    slopes = [(b - a) / (j - i) for i, a in enumerate(values) for j, b in enumerate(values[i + 1:], i + 1)]
    return statistics.median(slopes) * len(values) if slopes else 0.0


def climbing(means: Sequence[float]) -> bool:
    """Whether the mean latencies of a stage's batches (results.batch_means), in order, are still climbing."""
    return bool(means) and upward_trend(means) and rise(means) >= MATERIAL_RISE * statistics.median(means)
