"""Which variant is best, and only where it is by more than the noise: the best figure of a column is
marked when its difference from every other variant's is significant (results.differences); otherwise the
variants are said to show no significant difference.

A table's row (a stage, or the variants over all their stages) marks a best in any of several figures, so
each figure is judged at the level that keeps the row's chance of a false mark within 1 - confidence
(Bonferroni, as `compare` does over its figures): 99% for five figures at 95%."""

from __future__ import annotations

from collections.abc import Sequence

from loadstage.api.status import Intervals, Latency, RunStatus, StageResult, VariantRecord
from loadstage.results.differences import CONFIDENCE, LOWER_IS_BETTER, Difference, difference, each_figure

BEST = "^"
FIGURE_NAMES = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9", "mean": "mean",
                "rps": "req/s"}
COMPARED = ("p50", "p90", "p95", "p99", "p999")
Candidate = tuple[str, float | None, Intervals | None]   # (label, figure, intervals)


def judgeable(figure: str, candidates: list[Candidate]) -> bool:
    """Whether one candidate could be marked best: two or more have the figure, each with its interval."""
    known = [intervals for _, value, intervals in candidates if value is not None]
    return len(known) >= 2 and all(intervals and intervals.get(figure) for intervals in known)


def _against_best(figure: str, candidates: list[Candidate],
                  confidence: float) -> tuple[int, list[tuple[str, Difference | None]]] | None:
    """The best candidate's index, and every other's difference from it; None with fewer than 2 figures."""
    values = {i: value for i, (_, value, _) in enumerate(candidates) if value is not None}
    known = list(values)
    if len(known) < 2:
        return None
    pick = min if figure in LOWER_IS_BETTER else max
    best = pick(known, key=lambda i: values[i])
    _, value, intervals = candidates[best]
    return best, [(label, difference(figure, value, intervals, other, other_intervals, confidence))
                  for i, (label, other, other_intervals) in enumerate(candidates) if i != best and i in known]


def best(figure: str, candidates: list[Candidate], confidence: float = CONFIDENCE) -> int | None:
    """The index of the candidate whose figure is best, and significantly so against every other one, each
    difference judged at `confidence`."""
    found = _against_best(figure, candidates, confidence)
    if found is None:
        return None
    index, others = found
    return index if all(d is not None and d.worse for _, d in others) else None


def latency_candidates(labels: list[str], latencies: Sequence[Latency | None], intervals: Sequence[Intervals | None],
                       figure: str) -> list[Candidate]:
    return [(label, None if latency is None or (figure == "p999" and latency.p999_reliable is False)
             else latency.percentile(figure), iv) for label, latency, iv in zip(labels, latencies, intervals)]


def best_columns(labels: list[str], latencies: Sequence[Latency | None], intervals: Sequence[Intervals | None],
                 confidence: float = CONFIDENCE) -> list[set[str]]:
    """For each candidate, the percentiles in which it is significantly best, the row's marks together at
    `confidence`."""
    columns = {figure: latency_candidates(labels, latencies, intervals, figure) for figure in COMPARED}
    judged = [figure for figure, candidates in columns.items() if judgeable(figure, candidates)]
    level = each_figure(confidence, len(judged))
    marks: list[set[str]] = [set() for _ in labels]
    for figure in judged:
        index = best(figure, columns[figure], level)
        if index is not None:
            marks[index].add(figure)
    return marks


def _mean(variant: VariantRecord) -> float | None:
    """The variant's mean over all its stages' requests."""
    timed = [(s.mean_ms, s.requests) for s in variant.stages if s.mean_ms is not None and s.requests]
    total = sum(n for _, n in timed)
    return sum(mean * n for mean, n in timed) / total if total else None


def percent(level: float) -> str:
    return f"{level * 100:.4g}%"


def load_of(stage: StageResult) -> tuple[int | None, ...]:
    """What a stage ran: its injectors, users, arrival rate and request goal."""
    return stage.injectors, stage.users, stage.arrival_rate, stage.request_goal


def numbered_by_load(run: RunStatus) -> bool:
    """Whether a stage number means the same load in every variant (a ladder); a search's and a pick's stages are
    numbered in the order they ran."""
    return run.recommendation is None and all(v.search is None for v in run.variants)


def same_loads(run: RunStatus) -> bool:
    """Whether every variant ran the same loads, so that their figures over all their stages compare."""
    loads = [sorted({load_of(s) for s in v.stages}, key=str) for v in run.variants]
    return all(each == loads[0] for each in loads)


def counterparts(run: RunStatus, variant: VariantRecord, stage: StageResult) -> list[StageResult | None]:
    """The stage each variant ran at the same load as `stage` (its latest there), `stage` itself for its own."""
    def at(other: VariantRecord) -> StageResult | None:
        if other is variant:
            return stage
        if numbered_by_load(run):
            return next((s for s in other.stages if s.stage == stage.stage), None)
        return max((s for s in other.stages if load_of(s) == load_of(stage)), key=lambda s: s.stage, default=None)
    return [at(other) for other in run.variants]


def between_variants(run: RunStatus, labels: list[str], confidence: float = CONFIDENCE) -> list[str]:
    """One line per figure of the variants' rows over all their stages: which is best, by how much, and
    whether that is more than the noise; the lines' verdicts together at `confidence`."""
    aggregates = [v.aggregate for v in run.variants if v.aggregate is not None and v.aggregate.intervals]
    if len(aggregates) < 2 or len(aggregates) < len(run.variants):
        return []
    if not same_loads(run):
        return ["none: the variants ran different loads, so their figures over all their stages do not compare; "
                "each stage is compared with the others' at its load"]
    figures = {figure: latency_candidates(labels, [a.latency for a in aggregates],
                                          [a.intervals for a in aggregates], figure) if figure != "mean" else
               [(label, _mean(v), a.intervals) for label, v, a in zip(labels, run.variants, aggregates)]
               for figure in ("p50", "p99", "p999", "mean")}
    judged = [figure for figure, candidates in figures.items() if judgeable(figure, candidates)]
    level = each_figure(confidence, len(judged))
    said = (f"{percent(confidence)} over {len(judged)} figures, each interval at {percent(level)}"
            if len(judged) > 1 else percent(confidence))
    lines = []
    for figure, candidates in figures.items():
        found = _against_best(figure, candidates, level)
        if found is None:
            continue
        index, others = found
        against = ", ".join(f"{label} {d.text() if d else 'no interval'}" for label, d in others)
        if all(d is not None and d.worse for _, d in others):
            lines.append(f"{FIGURE_NAMES[figure]}: {labels[index]} is best, by more than the run's own noise "
                         f"({said}): {against}")
        else:
            lines.append(f"{FIGURE_NAMES[figure]}: no significant difference ({said}); against "
                         f"{labels[index]}: {against}")
    return lines
