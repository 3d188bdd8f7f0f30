"""A stage's mean CPU over its settled seconds, with its interval: what a variant that declares no CPU costs.

The target's sampler reads its CPU every half second (each reading the mean since the one before: exact from a
cgroup, in clock ticks from the processes' own times); the readings within the stage's settled seconds (from its
settle cut to its end) are averaged, and cut into CPU_BATCHES consecutive batches whose means give a Student
t-interval (results.batch_means.ratio_interval). A peak grows with the stage's length and its noise; a mean does
not."""

from __future__ import annotations

from collections.abc import Sequence

from loadstage.results.batch_means import ratio_interval

CPU_BATCHES = 10


def settled_mean(samples: Sequence[tuple[float, float]], start: float, end: float,
                 confidence: float) -> tuple[float, tuple[float, float] | None] | None:
    """The mean of the (epoch seconds, cores) readings from `start` to `end`, and its interval (None with fewer
    than two readings a batch); None without a reading there."""
    kept = [cores for at, cores in samples if start <= at <= end]
    if not kept:
        return None
    mean = sum(kept) / len(kept)
    size = len(kept) // CPU_BATCHES
    if size < 2:
        return mean, None
    batches = [kept[i * size:(i + 1) * size if i < CPU_BATCHES - 1 else len(kept)] for i in range(CPU_BATCHES)]
    found = ratio_interval([sum(b) for b in batches], [float(len(b)) for b in batches], confidence)
    return mean, None if found is None else (max(0.0, found[0]), found[1])
