"""The history read back: a series' runs as a table (one row a run and variant), CSV or JSON, and the regression
gate's findings in words."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Sequence
from typing import Any

from loadstage.history.store import StoredRun
from loadstage.history.trends import FEWEST_RUNS, Checked, Finding, per_core, trends
from loadstage.reports import charts
from loadstage.reports.html import chart_figure, page, table
from loadstage.reports.tables import number, render

MOST_LOADS = 6   # p99 columns: beyond this, only the newest run's loads


def _load_order(load: str) -> tuple[str, float]:
    amount, _, unit = load.partition(" ")
    return unit, float(amount) if re.fullmatch(r"[0-9.]+", amount) else 0.0


def loads(runs: Sequence[StoredRun]) -> list[str]:
    every = sorted({s.load for r in runs for s in r.stages}, key=_load_order)
    if len(every) <= MOST_LOADS or not runs:
        return every
    return sorted({s.load for s in runs[-1].stages}, key=_load_order)[:MOST_LOADS]


def labels_text(labels: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def rows(runs: Sequence[StoredRun]) -> tuple[list[str], list[dict[str, Any]]]:
    """Plain values: one row a run and variant, oldest first; p99 at each load in ms."""
    shown = loads(runs)
    header = ["finished", "run", "labels", "phase", "variant", "capacityRps", "capacityLow", "capacityHigh",
              "limitedBy", "rpsPerCore", "cores", "errorRate", "redisPeak", *(f"p99Ms@{load}" for load in shown)]
    out = []
    for r in runs:
        for v in r.variants:
            stages = [s for s in r.stages if s.variant == v.variant]
            p99 = {s.load: s.latency_ms.get("p99") for s in stages}   # a load run twice: its last stage
            requests = sum(s.requests for s in stages)
            out.append({"finished": r.run.finished_at or r.recorded_at, "run": r.run.uid,
                        "labels": labels_text(r.run.labels), "phase": r.run.phase, "variant": v.label,
                        "capacityRps": v.capacity_rps, "capacityLow": v.capacity_low, "capacityHigh": v.capacity_high,
                        "limitedBy": v.limited_by, "rpsPerCore": per_core(v), "cores": v.cores,
                        "errorRate": sum(s.failures for s in stages) / requests if requests else None,
                        "redisPeak": max((s.redis_peak for s in stages if s.redis_peak is not None), default=None),
                        **{f"p99Ms@{load}": p99.get(load) for load in shown}})
    return header, out


def _table_cells(runs: Sequence[StoredRun]) -> tuple[list[str], list[list[str]]]:
    header, found = rows(runs)
    shown = ["finished", "run", "labels", "phase", "variant", "limited by", "capacity (req/s)", "req/s a core",
             "errors", "Redis peak", *(f"p99 {h.removeprefix('p99Ms@')}" for h in header if h.startswith("p99Ms@"))]

    def capacity(row: dict[str, Any]) -> str:
        if row["capacityRps"] is None:
            return "-"
        low, high = row["capacityLow"], row["capacityHigh"]
        return number(row["capacityRps"], ",.0f") + (f" [{low:,.0f}-{high:,.0f}]" if low != high else "")
    cells = [[row["finished"][:19].replace("T", " "), row["run"][:8], row["labels"] or "-", row["phase"],
              row["variant"], row["limitedBy"] or "-", capacity(row), number(row["rpsPerCore"], ",.0f"),
              "-" if row["errorRate"] is None else f"{row['errorRate']:.2%}", number(row["redisPeak"], "d"),
              *(number(row[h], ".1f") for h in header if h.startswith("p99Ms@"))] for row in found]
    return shown, cells


def as_table(runs: Sequence[StoredRun]) -> str:
    return render(*_table_cells(runs), left=("finished", "run", "labels", "phase", "variant", "limited by"))


def as_csv(runs: Sequence[StoredRun]) -> str:
    header, found = rows(runs)
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in found)
    return out.getvalue()


def as_json(runs: Sequence[StoredRun]) -> str:
    return json.dumps([{"uid": r.run.uid, "series": r.run.series, "name": r.run.name, "phase": r.run.phase,
                        "startedAt": r.run.started_at, "finishedAt": r.run.finished_at, "recordedAt": r.recorded_at,
                        "labels": r.run.labels, "image": r.run.image, "source": r.run.source,
                        "variants": [{"variant": v.variant, "label": v.label, "settings": v.settings,
                                      "capacityRps": v.capacity_rps, "capacityLow": v.capacity_low,
                                      "capacityHigh": v.capacity_high, "cores": v.cores, "limitedBy": v.limited_by,
                                      "search": v.search} for v in r.variants],
                        "stages": [{"variant": s.variant, "stage": s.stage, "load": s.load, "requests": s.requests,
                                    "failures": s.failures, "errorRate": s.error_rate, "rps": s.rps,
                                    "latencyMs": s.latency_ms, "intervals": s.intervals, "outcome": s.outcome,
                                    "redisPeak": s.redis_peak} for s in r.stages]} for r in runs], indent=2) + "\n"


def as_html(series: str, runs: Sequence[StoredRun], checked: Checked | None = None) -> str:
    """One offline page: the gate's findings, each figure drawn over the runs that succeeded (one line per
    variant, each value's interval as a bar), and the runs' table."""
    succeeded = [r for r in runs if r.run.phase == "Succeeded"]
    position = {id(r): i for i, r in enumerate(succeeded)}
    names = [labels_text(r.run.labels) or (r.run.finished_at or r.recorded_at)[5:16].replace("T", " ")
             for r in succeeded]
    by_figure: dict[str, list[charts.Line]] = {}
    units: dict[str, str] = {}
    for t in trends(runs):
        values: list[float | None] = [None] * len(succeeded)
        bounds: list[tuple[float | None, float | None]] = [(None, None)] * len(succeeded)
        for run, value, interval in zip(t.runs, t.values, t.bounds):
            values[position[id(run)]], bounds[position[id(run)]] = value, interval
        by_figure.setdefault(t.figure.name, []).append((t.variant, values, bounds))
        units[t.figure.name] = t.figure.unit
    parts = [f"<h1>History of <code>{html.escape(series)}</code></h1>",
             f"<p>{len(runs)} run(s), {len(succeeded)} succeeded. Bars: each value's interval (a capacity's "
             f"bracket, a p99's 95% interval).</p>"]
    if checked is not None:
        said = check_lines(series, runs, checked)[1:]
        parts += ["<h2>The regression gate</h2>", "<ul>", *(f"<li>{html.escape(line.strip())}</li>" for line in said),
                  "</ul>"]
    for n, (name, lines) in enumerate(sorted(by_figure.items(), key=lambda item: _figure_order(item[0]))):
        if name.startswith("error rate") and all(v in (None, 0.0) for _, values, _ in lines for v in values):
            continue   # no errors in any run: nothing to draw
        parts.append(chart_figure(charts.over_runs_chart(f"history-{n + 1}", f"{name} over the runs", units[name],
                                                         names, lines)))
    header, cells = _table_cells(runs)
    parts += ["<h2>Runs</h2>", table(header, cells, 6)]
    return page(f"history of {html.escape(series)}", parts)


def _figure_order(name: str) -> tuple[int, tuple[str, float]]:
    kind = 0 if name == "capacity" else 1 if name == "capacity per core" else 2 if name.startswith("p99") else 3
    return kind, _load_order(name.rsplit(" at ", 1)[-1]) if " at " in name else ("", 0.0)


def _run_name(run: StoredRun) -> str:
    when = (run.run.finished_at or run.recorded_at)[:16].replace("T", " ")
    return f"{when}" + (f" ({labels_text(run.run.labels)})" if run.run.labels else "")


def _change(finding: Finding) -> str:
    c, figure = finding.change, finding.trend.figure
    if figure.ratio:
        size = f"{c.change:+.0%}, {c.interval[0]:+.0%} to {c.interval[1]:+.0%}"
        values = f"{c.before:,.1f} -> {c.after:,.1f} {figure.unit}"
    else:
        size = f"{c.change:+.2%} points, {c.interval[0]:+.2%} to {c.interval[1]:+.2%}"
        values = f"{c.before:.2%} -> {c.after:.2%}"
    p = "p < 0.0001" if c.p_value < 0.0001 else f"p {c.p_value:.2g}"
    return f"{values} ({size} at 95%, {p})"


def finding_line(finding: Finding) -> str:
    c = finding.change
    word = {"Worse": "WORSE", "Better": "better", "Undecided": "undecided"}[c.outcome]
    text = (f"{word}: {finding.trend.figure.name}, {finding.trend.variant}: {_change(finding)}; "
            f"{c.runs_after} run(s) since {_run_name(finding.first_after)}, against {c.runs_before} before it "
            f"(the last {_run_name(finding.last_before)})")
    if c.outcome != "Undecided":
        return text
    return text + ("; one run alone may be an outlier: rerun to confirm" if c.runs_after == 1
                   else "; the runs' spread covers it: rerun to decide")


def check_lines(series: str, runs: Sequence[StoredRun], checked: Checked) -> list[str]:
    succeeded = sum(r.run.phase == "Succeeded" for r in runs)
    lines = [f"{series}: {len(runs)} run(s), {succeeded} succeeded"
             + (f"; the newest {_run_name(checked.newest)}" if checked.newest else "")]
    if checked.too_short and not checked.findings and succeeded < FEWEST_RUNS:
        lines.append(f"  too few runs to check: {succeeded} succeeded, the check needs {FEWEST_RUNS}")
        return lines
    order = {"Worse": 0, "Undecided": 1, "Better": 2}
    lines += [f"  {finding_line(f)}" for f in sorted(checked.findings, key=lambda f: order[f.change.outcome])]
    if not checked.findings:
        lines.append("  no figure changed by more than the runs' spread")
    return lines


def trend(checked: Checked, runs: int) -> str:
    """A word for `kubectl get lx`: ok, worse (its first figure), better, undecided, or too few runs."""
    if checked.too_short and not checked.findings and runs < FEWEST_RUNS:
        return f"too few runs ({runs} of {FEWEST_RUNS})"
    for outcome, word in (("Worse", "worse"), ("Undecided", "undecided"), ("Better", "better")):
        found = [f for f in checked.findings if f.change.outcome == outcome]
        if found:
            change, figure = found[0].change, found[0].trend.figure
            size = f"{change.change:+.0%}" if figure.ratio else f"{change.change:+.2%} points"
            return f"{word} {figure.name} {size}" + (f" (+{len(found) - 1} more)" if len(found) > 1 else "")
    return "ok"
