"""A study's own table: one figure of every stage, rows by some settings and columns by another, as the
studies laid theirs out ("httpd, uWSGI | hello with TCP | hello with Unix" in req/s). `stage` and `users`
may stand for settings. With 3 or more repeats a cell is the trimmed mean, the studies' figure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from loadstage.api.schema import ValidationError
from loadstage.api.status import RunStatus, StageResult
from loadstage.reports.significance import load_of, numbered_by_load
from loadstage.reports.tables import Table, count, flagged, footnotes, format_ms, mib, number

STAGE_KEYS = ("stage", "users", "injectors")


@dataclass(frozen=True)
class Figure:
    title: str
    value: Callable[[StageResult], float | int | None]
    trimmed: str | None = None       # its key in a stage's trimmed mean, where repeats give one
    shown: Callable[[float | int | None], str] = format_ms


FIGURES = {
    "rps": Figure("req/s", lambda s: s.rps, "rps", lambda v: number(v, ",.0f")),
    "p50": Figure("p50 (ms)", lambda s: s.latency.percentile("p50"), "p50"),
    "p90": Figure("p90 (ms)", lambda s: s.latency.percentile("p90"), "p90"),
    "p99": Figure("p99 (ms)", lambda s: s.latency.percentile("p99"), "p99"),
    "mean": Figure("mean (ms)", lambda s: s.mean_ms, "mean"),
    "requests": Figure("requests", lambda s: s.requests, shown=count),
    "errors": Figure("errors", lambda s: s.failures, shown=count),
    "errorRate": Figure("error rate", lambda s: s.error_rate, "errorRate", lambda v: number(v, ".2%")),
    "cpu": Figure("target CPU (cores)", lambda s: s.target.peak_cpu_cores, shown=lambda v: number(v, ".2f")),
    "rss": Figure("target RSS (MiB)", lambda s: s.target.peak_memory_bytes, shown=lambda v: number(mib(v), ",.0f")),
    "rssPerProcess": Figure("RSS per process (MiB)", lambda s: s.target.peak_process_rss_bytes,
                            shown=lambda v: number(mib(v), ",.0f")),
    "proxyCpu": Figure("proxy CPU (cores)", lambda s: s.target.proxy_peak_cpu_cores,
                       shown=lambda v: number(v, ".2f")),
}


def parse_pivot(text: str) -> tuple[list[str], str]:
    """ROWS:COLUMNS, e.g. proxy,server:socket."""
    rows, sep, columns = text.partition(":")
    if not sep or not rows or not columns or "," in columns:
        raise ValidationError([("--pivot", f"must be ROWS:COLUMN, settings such as proxy,server:socket, got {text!r}")])
    return rows.split(","), columns


def _cell(value) -> str:
    return number(value, "")


def _key(settings: Mapping[str, object], stage: StageResult, name: str) -> object:
    if name in STAGE_KEYS:
        return getattr(stage, name)
    return settings.get(name)


def _ranks(values: list, name: str) -> dict:
    met = list(dict.fromkeys(values))
    if name in STAGE_KEYS and all(isinstance(v, int) for v in met):
        met.sort()
    return {v: i for i, v in enumerate(met)}


def _deciding(run: RunStatus, stages: list[StageResult]) -> list[StageResult]:
    """A variant's stages, each load once where a search or a pick ran it again (undecided): the later run."""
    if numbered_by_load(run):
        return stages
    latest = {load_of(s): s for s in sorted(stages, key=lambda s: s.stage)}
    return sorted(latest.values(), key=lambda s: s.stage)


def pivot_table(run: RunStatus, rows: list[str], column: str, figure: str) -> tuple[str, Table, list[str]]:
    """The title, the table and its footnotes (a figure of an injector-bound or unsteady stage is marked, as in
    every table); a cell that two stages would fill is refused, naming what to add."""
    known = {*STAGE_KEYS, *(k for v in run.variants for k in v.settings)}
    unknown = [name for name in [*rows, column] if name not in known]
    if unknown:
        raise ValidationError([("--pivot", f"{', '.join(unknown)}: not a setting of this run (known: "
                                           f"{', '.join(sorted(known))})")])
    shown = FIGURES[figure]
    cells: dict[tuple, dict] = {}
    columns: dict = {}
    trimmed = False
    for variant in run.variants:
        for stage in _deciding(run, variant.stages):
            row = tuple(_key(variant.settings, stage, name) for name in rows)
            col = _key(variant.settings, stage, column)
            columns[col] = None
            if col in cells.setdefault(row, {}):
                raise ValidationError([("--pivot", f"two stages fall in the cell {', '.join(map(str, row))} / "
                                                   f"{col}: add stage (or the setting that tells them apart) "
                                                   f"to the rows")])
            mean = (stage.trimmed_mean or {}).get(shown.trimmed) if shown.trimmed else None
            trimmed = trimmed or mean is not None
            cells[row][col] = flagged(shown.shown(mean if mean is not None else shown.value(stage)), [stage])
    title = f"{shown.title}{', trimmed mean of the repeats' if trimmed else ''}, by {', '.join(rows)} and {column}"
    # grouped by the first row setting, then the next, each in the order the run met its values (a stage's
    # numbers in their order: a search meets its loads out of order)
    ranks = [_ranks([row[at] for row in cells], rows[at]) for at in range(len(rows))]
    ordered = sorted(cells, key=lambda row: [rank[v] for rank, v in zip(ranks, row)])
    columns = dict.fromkeys(sorted(columns, key=_ranks(list(columns), column).__getitem__))
    header = [", ".join(rows), *(f"{column} {_cell(c)}" for c in columns)]
    body = [[", ".join(_cell(v) for v in row), *(cells[row].get(c, "-") for c in columns)] for row in ordered]
    return title, (header, body), footnotes([c for row in body for c in row[1:]])
