"""Change points in a figure's series over runs, and whether the newest run is past one that made it worse.

Where: e-divisive means (Matteson and James, 2014; the statistic Apache Otava and MongoDB's tools use), by
binary segmentation: in a segment, the split that maximises the energy distance between its two sides, weighed
by their sizes. Whether: each candidate split is kept only where Student's t-test between its two sides gives a
p-value under `p_value`; the halves are then searched again. Latencies and capacities are compared in logs (a
change is a ratio), error rates as they are.

The gate reads the last change point only: the runs after it against the runs before it back to the previous
one. `Worse` where that change is significant and at least `min_change` in the worse direction, `Undecided`
where it is that large but not significant (the runs' spread covers it), else nothing is said."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from loadstage.results.students_t import t_quantile, two_sided

if TYPE_CHECKING:   # numpy is imported where a series is searched: at the operator's start it would add a thread
    import numpy as np

P_VALUE = 0.0003          # benchmark (k): at 0.01, 14% of 30-run series of no change alarmed at least once
MIN_CHANGE = 0.05
CONFIDENCE = 0.95
FEWEST_RUNS = 4          # below this, nothing is said
RECENT = 5               # a change with more runs after it is history, not news
ALONE = 0.1              # the newest run alone against the runs before it: a p-value ten times smaller
EXP_MAX = 700.0          # of a log-ratio: the largest change said (e^700), where values are absurd

Outcome = Literal["Worse", "Better", "Undecided"]


@dataclass(frozen=True)
class Change:
    index: int                      # the first run after the change
    before: float                   # the mean of the runs before it (back to the previous change), linear units
    after: float                    # of the runs from it on
    runs_before: int
    runs_after: int
    change: float                   # after / before - 1 (a share), or after - before where compared as they are
    interval: tuple[float, float]   # of `change`, at CONFIDENCE
    p_value: float
    outcome: Outcome


def _block_sums(distances: np.ndarray) -> np.ndarray:
    """2-D prefix sums: the sum of distances[a:b, c:d] is S[b, d] - S[a, d] - S[b, c] + S[a, c]."""
    import numpy as np
    sums = np.zeros((distances.shape[0] + 1, distances.shape[1] + 1))
    sums[1:, 1:] = distances.cumsum(0).cumsum(1)
    return sums


def _block(sums: np.ndarray, a: Any, b: Any, c: Any, d: Any) -> Any:
    """Indices may be arrays (each split at once)."""
    return sums[b, d] - sums[a, d] - sums[b, c] + sums[a, c]


def best_split(sums: np.ndarray, start: int, end: int, min_size: int = 1) -> int | None:
    """The split in [start, end) that maximises e-divisive's statistic (alpha 1): Q(t) = m n / (m + n) times
    (2 E|X - Y| - E|X - X'| - E|Y - Y'|), X the m values before t, Y the n from t on."""
    import numpy as np
    taus = np.arange(start + min_size, end - min_size + 1)
    if taus.size == 0:
        return None
    m, n = (taus - start).astype(float), (end - taus).astype(float)
    between = _block(sums, start, taus, taus, end) / (m * n)
    left = np.where(m > 1, _block(sums, start, taus, start, taus) / np.maximum(m * (m - 1), 1), 0.0)
    right = np.where(n > 1, _block(sums, taus, end, taus, end) / np.maximum(n * (n - 1), 1), 0.0)
    q = m * n / (m + n) * (2 * between - left - right)
    return int(taus[int(np.argmax(q))])


def t_test(before: Sequence[float], after: Sequence[float]) -> tuple[float, float, float]:
    """Student's: the difference of means (after - before), its standard error and its two-sided p-value, on
    the pooled spread (one experiment's runs vary alike before and after a change; Welch's test on the two or
    three runs after a change has too few degrees of freedom to find one)."""
    m, n = len(before), len(after)
    mean_b, mean_a = sum(before) / m, sum(after) / n
    diff, freedom = mean_a - mean_b, m + n - 2
    if freedom < 1:
        return diff, math.inf, 1.0
    pooled = (sum((x - mean_b) ** 2 for x in before) + sum((x - mean_a) ** 2 for x in after)) / freedom
    se = math.sqrt(pooled * (1 / m + 1 / n))
    if se == 0:
        return diff, 0.0, 0.0 if diff else 1.0
    return diff, se, min(1.0, max(0.0, 1 - two_sided(abs(diff) / se, freedom)))   # the tail rounds past 1


def change_points(values: Sequence[float], p_value: float = P_VALUE) -> list[int]:
    """The indices where a new segment starts, in order; each segment two runs or more (one run alone is not a
    segment: it may be an outlier)."""
    if len(values) < FEWEST_RUNS:
        return []
    import numpy as np
    x = np.asarray(values, dtype=float)
    sums = _block_sums(np.abs(x[:, None] - x[None, :]))
    found, todo = [], [(0, len(x))]
    while todo:
        start, end = todo.pop()
        tau = best_split(sums, start, end, min_size=2)
        if tau is None or t_test(values[start:tau], values[tau:end])[2] >= p_value:
            continue
        found.append(tau)
        todo += [(start, tau), (tau, end)]
    return sorted(found)


def newest_change(values: Sequence[float], *, higher_is_worse: bool, ratio: bool = True, p_value: float = P_VALUE,
                  min_change: float = MIN_CHANGE, recent: int = RECENT) -> Change | None:
    """The last change point of the series, where at most `recent` runs came after it: those runs against the
    ones before it, back to the previous change. Else the newest run alone, against the runs since the last change
    point, at a p-value of `p_value` x ALONE (one run is a change, or an outlier). Not significant but as large as
    `min_change`: Undecided. None where nothing changed by `min_change` (a share where compared as a ratio, else in
    the values' own unit)."""
    if ratio and any(v <= 0 for v in values):
        ratio = False
    xs = [math.log(v) for v in values] if ratio else [float(v) for v in values]
    points = change_points(xs, p_value)
    if points and len(xs) - points[-1] <= recent:
        tau, start, threshold = points[-1], points[-2] if len(points) >= 2 else 0, p_value
    else:
        tau, start, threshold = len(xs) - 1, points[-1] if points else 0, p_value * ALONE
    before, after = xs[start:tau], xs[tau:]
    if len(before) < FEWEST_RUNS - 1:
        return None
    diff, se, p = t_test(before, after)
    half = t_quantile(CONFIDENCE, max(1, len(before) + len(after) - 2)) * se if math.isfinite(se) else math.inf
    mean_before = sum(before) / len(before)
    if ratio:
        change, interval = _expm1(diff), (_expm1(diff - half), _expm1(diff + half))
        size, mean_after, mean_before = change, math.exp(min(mean_before + diff, EXP_MAX)), math.exp(mean_before)
    else:
        change, interval = diff, (diff - half, diff + half)
        size, mean_after = diff, mean_before + diff
    if abs(size) < min_change:
        return None
    outcome: Outcome = "Undecided"
    if p < threshold:
        outcome = "Worse" if (size > 0) == higher_is_worse else "Better"
    return Change(tau, mean_before, mean_after, len(before), len(after), change, interval, p, outcome)


def _expm1(x: float) -> float:
    return math.expm1(max(-EXP_MAX, min(x, EXP_MAX)))
