"""Stages that end once decided (spec.stageEnd: Decided): when a stage's intervals are looked at, at which
confidence, and what a look decides.

The looks follow a fixed schedule, set before the stage starts: the stage's first FIRST_LOOK_SECONDS (the
shortest stage with enough blocks for an interval), then every LOOK_GROWTH times longer, each looked at once
every worker has reported it, and a last one at the stage's maximum. A look whose seconds with requests are
still too few for an interval (the first requests came late in the stage's first second) takes a second more,
and again, until the next look's time. The stage's error (5%) is spent over its looks by an O'Brien-Fleming-type
function of the share of the stage's maximum each has seen (Lan & DeMets 1983): a look at t of it has spent
2 - 2 Phi(z(0.975) / sqrt(t)), and each look's intervals are at 1 - what it adds. By the union bound the chance
that any look decides wrongly stays within 5% however the stage ends; the early looks, on the fewest and least
settled seconds, are the strictest. Each look's intervals are results.batch_means' over the seconds so far, so
latencies that are not independent from one second to the next are judged in batches that are."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from loadstage.api.status import Objective
from loadstage.results.intervals import CONFIDENCE, MIN_BLOCKS

FIRST_LOOK_SECONDS = float(MIN_BLOCKS)
LOOK_GROWTH = 1.5
LOOK_DELAY_SECONDS = 4.0   # a look at a stage's first t seconds waits until every worker has reported them (3 s)
BREACH_LATENCY, BREACH_ERROR_RATE, BREACH_RPS = 3.0, 10.0, 1 / 3


def spent(share: float, error: float = 1 - CONFIDENCE) -> float:
    """The error spent by a look at `share` of the stage's maximum (O'Brien-Fleming-type, Lan & DeMets)."""
    if share <= 0:
        return 0.0
    normal = NormalDist()
    return 2 * (1 - normal.cdf(normal.inv_cdf(1 - error / 2) / math.sqrt(min(share, 1.0))))


@dataclass(frozen=True)
class Looks:
    times: tuple[float, ...]         # of the stage's seconds, each looked at LOOK_DELAY_SECONDS later; the last its end
    confidences: tuple[float, ...]   # of each look's intervals

    @classmethod
    def schedule(cls, longest: float) -> Looks:
        times, at = [], FIRST_LOOK_SECONDS
        while at + LOOK_DELAY_SECONDS < longest:
            times.append(round(at, 3))
            at *= LOOK_GROWTH
        times.append(longest)
        spending = [spent(t / longest) for t in times]
        return cls(tuple(times), tuple(1 - (now - before) for before, now in zip([0.0, *spending], spending)))

    @property
    def last(self) -> float:
        """The confidence of the stage's end: a stage that ran to its maximum is judged at it."""
        return self.confidences[-1]

    def tries(self, number: int) -> tuple[float, ...]:
        """When look `number` (from 1, before the last) may look: at its time, then each second after, before
        the next look's."""
        at, following = self.times[number - 1], self.times[number]
        return tuple(at + extra for extra in range(math.ceil(following - at)))


def breached(objectives: Sequence[Objective]) -> bool:
    """Broken by far: a latency's interval wholly above 3 x its objective, the error rate's above 10 x (any
    failure at all, for an objective of 0%), or the rate's wholly under a third of minRps."""
    def far(o: Objective) -> bool:
        if o.interval is None:
            return False
        low, high = o.interval
        if o.name == "minRps":
            return high is not None and high < o.limit * BREACH_RPS
        return low > o.limit * (BREACH_ERROR_RATE if o.name == "errorRate" else BREACH_LATENCY)
    return any(far(o) for o in objectives)
