"""A series' figures over its runs, and the regression gate over them: for each variant (by its settings) its
capacity at the objective, its capacity per core, and at each load its p99 and error rate, each a series over
the runs that succeeded; each checked for a change point the newest run is past (results.change_points)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from loadstage.history.records import StageRow, VariantRow
from loadstage.history.store import StoredRun
from loadstage.results.change_points import FEWEST_RUNS, MIN_CHANGE, P_VALUE, RECENT, Change, newest_change

MIN_ERROR_CHANGE = 0.005   # an error rate's, absolute: half a percentage point


@dataclass(frozen=True)
class Figure:
    name: str                       # "capacity", "capacity per core", "p99 at 40 users", "error rate at 40 users"
    unit: str                       # "req/s", "req/s a core", "ms", "%"
    higher_is_worse: bool
    ratio: bool                     # compared as a ratio (in logs), else as a difference


CAPACITY = Figure("capacity", "req/s", False, True)
PER_CORE = Figure("capacity per core", "req/s a core", False, True)


def p99_at(load: str) -> Figure:
    return Figure(f"p99 at {load}", "ms", True, True)


def errors_at(load: str) -> Figure:
    return Figure(f"error rate at {load}", "%", True, False)


def variant_key(settings: dict[str, object]) -> str:
    return json.dumps(settings, sort_keys=True)


def per_core(v: VariantRow) -> float | None:
    return None if v.capacity_rps is None or not v.cores else v.capacity_rps / v.cores


Bounds = tuple[float | None, float | None]


def _figures(v: VariantRow, stages: Sequence[StageRow]) -> dict[Figure, tuple[float, Bounds]]:
    """Each figure of the variant in one run, with its interval (a capacity's bracket, a stage's 95% interval)."""
    found: dict[Figure, tuple[float, Bounds]] = {}
    if v.capacity_rps is not None:
        found[CAPACITY] = v.capacity_rps, (v.capacity_low, v.capacity_high)
    if (core := per_core(v)) is not None and v.cores:
        found[PER_CORE] = core, (None if v.capacity_low is None else v.capacity_low / v.cores,
                                 None if v.capacity_high is None else v.capacity_high / v.cores)
    for s in stages:   # a load run twice: its last stage
        if s.variant == v.variant and s.latency_ms.get("p99") is not None:
            found[p99_at(s.load)] = float(s.latency_ms["p99"]), _bounds(s.intervals, "p99")
            if s.error_rate is not None:
                found[errors_at(s.load)] = s.error_rate, _bounds(s.intervals, "errorRate")
    return found


def _bounds(intervals: dict[str, object] | None, figure: str) -> Bounds:
    found = (intervals or {}).get(figure)
    return (float(found[0]), float(found[1])) if isinstance(found, list) and len(found) == 2 and None not in found \
        else (None, None)


@dataclass(frozen=True)
class Trend:
    variant: str                    # its label in the newest run that has it
    figure: Figure
    runs: tuple[StoredRun, ...]     # the runs that have the figure, oldest first
    values: tuple[float, ...]
    bounds: tuple[Bounds, ...]      # each value's interval, (None, None) where it has none


def trends(runs: Sequence[StoredRun]) -> list[Trend]:
    """Each variant's figures over the runs that succeeded, in the order first met."""
    series: dict[tuple[str, Figure], list[tuple[StoredRun, float, Bounds]]] = {}
    labels: dict[str, str] = {}
    for run in runs:
        if run.run.phase != "Succeeded":
            continue
        for v in run.variants:
            key = variant_key(v.settings)
            labels[key] = v.label
            for figure, (value, bounds) in _figures(v, run.stages).items():
                series.setdefault((key, figure), []).append((run, value, bounds))
    return [Trend(labels[key], figure, tuple(p[0] for p in points), tuple(p[1] for p in points),
                  tuple(p[2] for p in points)) for (key, figure), points in series.items()]


@dataclass(frozen=True)
class Finding:
    trend: Trend
    change: Change

    @property
    def first_after(self) -> StoredRun:
        return self.trend.runs[self.change.index]

    @property
    def last_before(self) -> StoredRun:
        return self.trend.runs[self.change.index - 1]


@dataclass(frozen=True)
class Checked:
    findings: list[Finding]         # worse, better and undecided changes the newest run is past
    too_short: list[Trend]          # fewer runs than the check needs
    newest: StoredRun | None

    def worse(self) -> list[Finding]:
        return [f for f in self.findings if f.change.outcome == "Worse"]


def check(runs: Sequence[StoredRun], *, p_value: float = P_VALUE, min_change: float = MIN_CHANGE,
          min_error_change: float = MIN_ERROR_CHANGE, recent: int = RECENT) -> Checked:
    """Every trend whose newest point is the series' newest succeeded run, checked."""
    succeeded = [r for r in runs if r.run.phase == "Succeeded"]
    newest = succeeded[-1] if succeeded else None
    findings, short = [], []
    for trend in trends(runs):
        if newest is None or trend.runs[-1] is not newest:
            continue
        if len(trend.values) < FEWEST_RUNS:
            short.append(trend)
            continue
        change = newest_change(trend.values, higher_is_worse=trend.figure.higher_is_worse, ratio=trend.figure.ratio,
                               p_value=p_value, min_change=min_change if trend.figure.ratio else min_error_change,
                               recent=recent)
        if change is not None:
            findings.append(Finding(trend, change))
    return Checked(findings, short, newest)
