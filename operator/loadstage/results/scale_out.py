"""Scale-out from a few sizes: where a matrix measures the capacity of one setting at several pod counts (or worker
counts), the Universal Scalability Law (Gunther), C(N) = gamma N / (1 + alpha (N - 1) + beta N (N - 1)), fitted to
them by least squares (scipy), with alpha the contention, beta the coherency and gamma one unit's capacity; and the
capacity at a size the user names (spec.predict), with a 95% interval from refits to capacities drawn within each
measured bracket (a search's [pass, fail] req/s, or a ladder's knee to its first failed stage)."""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadstage.api.status import ScaleOut, ScalePoint, ScalePrediction, VariantRecord
from loadstage.api.types import Variant

AXES = ("pods", "workers")
FEWEST_SIZES = 3       # the law has three terms
DRAWS = 200
WIDE = 0.5             # a prediction interval wider than half its value is said to be
FAR = 1.5              # a size beyond this many times the largest measured is said to be far


@dataclass(frozen=True)
class Law:
    alpha: float
    beta: float
    gamma: float

    def at(self, n: float) -> float:
        return self.gamma * n / (1 + self.alpha * (n - 1) + self.beta * n * (n - 1))

    def peak(self) -> float | None:
        """The size past which capacity falls: sqrt((1 - alpha) / beta)."""
        return math.sqrt((1 - self.alpha) / self.beta) if self.beta > 0 and self.alpha < 1 else None


def fit(sizes: Sequence[float], capacities: Sequence[float]) -> Law:
    """Least squares, alpha and beta in [0, 1], gamma above 0, relative to each capacity (a large size weighs no
    more than a small one)."""
    from scipy.optimize import OptimizeWarning, curve_fit  # a second to import: only where a law is fitted

    def law(n: Any, alpha: float, beta: float, gamma: float) -> Any:
        return Law(alpha, beta, gamma).at(n)
    first = capacities[sizes.index(min(sizes))] / min(sizes)
    with warnings.catch_warnings():   # three sizes, three terms: no covariance to estimate, and none is used
        warnings.simplefilter("ignore", OptimizeWarning)
        found, _ = curve_fit(law, list(sizes), list(capacities), p0=(0.01, 0.0001, first), sigma=list(capacities),
                             bounds=([0.0, 0.0, 1e-9], [1.0, 1.0, math.inf]), maxfev=10000)
    return Law(*(float(x) for x in found))


def point(size: int, record: VariantRecord) -> ScalePoint | None:
    """A variant's capacity at its size (its bracket's middle) and its bracket, req/s; None without a closed one
    (none passed, or passed at the search's max: bounded below only)."""
    search, capacity = record.search, record.capacity
    if search is not None:
        if search.near_rps is not None:
            return ScalePoint(size, search.near_rps, search.near_rps, search.near_rps)
        if search.passed_rps is None or search.failed_rps is None:
            return None
        return _bracket(size, search.passed_rps, search.failed_rps)
    if capacity is not None and capacity.rps is not None and capacity.first_failed_stage is not None:
        failed = next((s.rps for s in record.stages if s.stage == capacity.first_failed_stage), None)
        return _bracket(size, capacity.rps, failed or capacity.rps)
    return None


def _bracket(size: int, passed: float, failed: float) -> ScalePoint:
    """The capacity lies between what was served at the pass end and at the fail end: its middle."""
    high = max(passed, failed)
    return ScalePoint(size, round((passed + high) / 2, 2), passed, high)


def asked(variants: list[Variant], predict: dict[str, int] | None) -> bool:
    """Whether a run has a law to fit or a size to predict: a matrix over pods or workers, or spec.predict."""
    return bool(predict) or any(len({getattr(v, axis) for v in variants}) > 1 for axis in AXES)


def scale_outs(variants: list[Variant], records: list[VariantRecord],
               predict: dict[str, int] | None) -> list[ScaleOut]:
    """One law per setting measured at 3 sizes or more of one axis (pods, else workers), each with a capacity (a
    pick's variants have none); where spec.predict names an axis, every setting's law, or its note why not."""
    found = []
    for axis in AXES:
        groups: dict[str, list[tuple[int, ScalePoint | None]]] = {}
        for v in variants:
            size = getattr(v, axis)
            if size is None:
                continue
            rest = " ".join(f"{k}={x}" for k, x in v.settings().items() if k != axis and x is not None)
            groups.setdefault(rest, []).append((size, point(size, records[v.index])))
        for rest, measured in groups.items():
            closed = {size for size, p in measured if p is not None}
            if len(closed) >= FEWEST_SIZES or axis in (predict or {}):   # else nothing to fit, and nobody asked
                found.append(_scale_out(axis, rest, measured, (predict or {}).get(axis)))
    return found


def _scale_out(axis: str, rest: str, measured: list[tuple[int, ScalePoint | None]], size: int | None) -> ScaleOut:
    points = sorted((p for _, p in measured if p is not None), key=lambda p: p.size)
    left_out = sorted({n for n, p in measured if p is None})
    notes = [f"{axis} {', '.join(map(str, left_out))} left out: no closed bracket (none passed, or passed at the "
             f"search's max)"] if left_out else []
    if len({p.size for p in points}) < FEWEST_SIZES:
        notes.append(f"the law needs capacities at {FEWEST_SIZES} sizes or more; {len(points)} measured")
        return ScaleOut(axis, rest, tuple(points), note="; ".join(notes))
    law = fit([p.size for p in points], [p.rps for p in points])
    prediction = None
    if size is not None:
        largest = max(p.size for p in points)
        if size <= largest:
            notes.append(f"predict.{axis} {size} is not above the largest measured ({largest}): nothing to predict")
        else:
            prediction = predicted(points, law, size)
            if prediction.interval[1] - prediction.interval[0] > WIDE * prediction.rps:
                notes.append(f"the prediction at {size} {axis} is wide: its brackets leave the law loose")
            if size > FAR * largest:
                notes.append(f"{size} {axis} is {size / largest:.3g}x the largest measured: the interval covers the "
                             f"brackets' widths, not the target's departure from the law (measured: a third off at "
                             f"2x, BENCHMARKS.md (l)); measure a size nearer it")
    peak = law.peak()
    return ScaleOut(axis, rest, tuple(points), round(law.alpha, 5), round(law.beta, 6), round(law.gamma, 2),
                    None if peak is None else round(peak, 1), prediction, "; ".join(notes) or None)


def predicted(points: Sequence[ScalePoint], law: Law, size: int) -> ScalePrediction:
    """The law's capacity at `size`, and the 2.5th to 97.5th percentiles of refits to capacities drawn uniformly
    within each bracket (seeded: the same status gives the same interval)."""
    draws = random.Random(f"{size} " + " ".join(f"{p.size}:{p.rps}" for p in points))
    refits = []
    for _ in range(DRAWS):
        drawn = [draws.uniform(p.low, p.high) for p in points]
        try:
            refits.append(fit([p.size for p in points], drawn).at(size))
        except RuntimeError:    # a draw the least squares cannot fit
            continue
    refits.sort()
    low = refits[int(0.025 * (len(refits) - 1))] if refits else law.at(size)
    high = refits[int(0.975 * (len(refits) - 1))] if refits else law.at(size)
    return ScalePrediction(size, round(law.at(size), 1), (round(low, 1), round(high, 1)))
