"""The report's charts, drawn by matplotlib as SVG to inline in one HTML file: no script, no font or
bundle to fetch, sharp at any zoom and in print. Every data line carries an id ("<chart>-data-...")
so that a test can find the data in what a browser drew."""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any

from loadstage.api.status import RunStatus, StageResult, VariantRecord
from loadstage.api.status.figures import bounds_of
from loadstage.reports import tables
from loadstage.results.artifact import Artifact

Chart = tuple[str, str, str]   # (id, title, svg)
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
LOAD_LABELS = {"injectors": "load injectors", "users": "users"}
PERCENTILES = [("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"), ("p999", "p99.9")]



def _percentile_of(key: str) -> Callable[[StageResult], float | None]:
    def figure(stage: StageResult) -> float | None:
        return stage.latency.percentile(key)
    return figure

def _figure(width: float, height: float, rows: int = 1, columns: int = 1):
    from matplotlib.figure import Figure
    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    return figure, [a for row in axes for a in row]


def _svg(figure, chart_id: str) -> str:
    import matplotlib
    out = io.StringIO()
    # a salt per chart keeps the ids of the SVGs inlined in one page apart
    with matplotlib.rc_context({"svg.hashsalt": chart_id, "svg.fonttype": "none"}):
        figure.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    return text[text.index("<svg"):]


def _number(value) -> float:
    return math.nan if value is None else float(value)


def _load_label(by_users: bool) -> str:
    return LOAD_LABELS["users" if by_users else "injectors"]


def _style(axes, xlabel: str, ylabel: str) -> None:
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, color="#dddddd", linewidth=0.6)
    top = axes.get_ylim()[1]
    axes.set_ylim(0, top * 1.06 if top > 0 else 1)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def _per_variant(axes, chart_id: str, run: RunStatus, figure_of: Callable[[StageResult], Any],
                 by_users: bool, interval: str | None = None) -> None:
    """One line per variant: a stage figure against the stage's load (its injectors, or its users), with
    the stages' 95% intervals of `interval` as error bars where they have them."""
    axes.set_xticks(sorted({s.load(by_users) for v in run.variants for s in v.stages}))
    for i, variant in enumerate(run.variants):
        stages = sorted(variant.stages, key=lambda s: s.load(by_users))   # a search's run in no order of load
        if stages:
            xs = [s.load(by_users) for s in stages]
            axes.plot(xs, [_number(figure_of(s)) for s in stages], marker="o",
                      color=COLOURS[i % len(COLOURS)], label=tables.variant_label(run, variant),
                      gid=f"{chart_id}-data-{i + 1}")
            bounds: list[tuple[float | None, float | None]] = [
                tuple(found) if (found := bounds_of(s.intervals or {}, interval)) else (None, None)  # type: ignore[misc]
                for s in stages] if interval else []
            if any(low is not None for low, _ in bounds):
                axes.vlines(xs, [_number(low) for low, _ in bounds], [_number(high) for _, high in bounds],
                            color=COLOURS[i % len(COLOURS)], linewidth=2, alpha=0.45,
                            gid=f"{chart_id}-interval-{i + 1}")


def _legend(figure, axes) -> None:
    handles, labels = axes.get_legend_handles_labels()
    if len(labels) > 1:
        figure.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), frameon=False)


def latency_chart(run: RunStatus, by_users: bool = False) -> Chart:
    chart_id = "latency"
    figure, panels = _figure(10, 5.6, 2, 3)
    for axes, (key, name) in zip(panels, PERCENTILES):
        _per_variant(axes, f"{chart_id}-{key}", run, _percentile_of(key), by_users, key)
        _style(axes, _load_label(by_users), f"{name} (ms)")
        axes.set_title(name)
    panels[-1].set_visible(False)
    _legend(figure, panels[0])
    return chart_id, "Latency percentiles against load (bars: 95% confidence intervals)", _svg(figure, chart_id)


def throughput_chart(run: RunStatus, by_users: bool = False) -> Chart:
    chart_id = "throughput"
    figure, (axes,) = _figure(7, 4)
    _per_variant(axes, chart_id, run, lambda s: s.rps, by_users, "rps")
    for i, variant in enumerate(run.variants):
        first = next((s for s in variant.stages if s.rps), None)
        if first is not None and first.rps and len(variant.stages) > 1:
            xs = [s.load(by_users) for s in variant.stages]
            per_load = first.rps / first.load(by_users)
            axes.plot(xs, [per_load * x for x in xs], linestyle=":", linewidth=1,
                      color=COLOURS[i % len(COLOURS)], alpha=0.6)
    axes.plot([], [], linestyle=":", color="grey", label="linear from the first stage")
    _style(axes, _load_label(by_users), "requests per second")
    _legend(figure, axes)
    return chart_id, "Throughput against load (the knee is where it leaves the dotted line)", _svg(figure, chart_id)


def redis_chart(run: RunStatus, by_users: bool = False) -> Chart:
    chart_id = "redis"
    figure, (axes,) = _figure(7, 4)
    _per_variant(axes, chart_id, run, lambda s: s.redis_peak_connections, by_users)
    _style(axes, _load_label(by_users), "peak Redis connections")
    _legend(figure, axes)
    return chart_id, "Peak Redis connections against load", _svg(figure, chart_id)


def target_chart(run: RunStatus, by_users: bool = False) -> Chart:
    chart_id = "target"
    figure, (cpu, memory) = _figure(10, 4, 1, 2)
    _per_variant(cpu, f"{chart_id}-cpu", run, lambda s: s.target.peak_cpu_cores, by_users)
    _style(cpu, _load_label(by_users), "peak CPU (cores)")
    _per_variant(memory, f"{chart_id}-memory", run, lambda s: tables.mib(s.target.peak_memory_bytes), by_users)
    _style(memory, _load_label(by_users), "peak memory (MiB)")
    _legend(figure, cpu)
    return chart_id, "Target CPU and memory against load (all its pods)", _svg(figure, chart_id)


def series_chart(run: RunStatus, variant: VariantRecord, artifacts: dict[int, Artifact]) -> Chart:
    """Requests per second and p50/p99 over time, stage by stage, in the master's windows."""
    index = variant.index + 1
    chart_id = f"series-v{index}"
    stages = variant.stages
    figure, panels = _figure(10, 2.3 * len(stages) + 0.4, len(stages), 2)
    for number, stage in enumerate(stages):
        kept = artifacts.get(stage.stage)
        series = kept.series if kept is not None else ()
        rps_axes, latency_axes = panels[2 * number], panels[2 * number + 1]
        if series:
            t0 = series[0].start
            times = [w.start - t0 for w in series]
            marker = "." if len(series) <= 60 else None
            # each window's rate drawn across its window, the last one too
            rps_axes.plot([*times, times[-1] + series[-1].seconds], [w.rps for w in series] + [series[-1].rps],
                          drawstyle="steps-post", color=COLOURS[0], gid=f"{chart_id}-data-s{stage.stage}-rps")
            for name, figure_of, colour in (("p50", lambda w: w.p50_ms, COLOURS[2]),
                                            ("p99", lambda w: w.p99_ms, COLOURS[1])):
                latency_axes.plot(times, [_number(figure_of(w)) for w in series], marker=marker, color=colour,
                                  label=name, gid=f"{chart_id}-data-s{stage.stage}-{name}")
            latency_axes.legend(loc="upper right", frameon=False, fontsize="small")
            window = f" ({series[0].seconds:g} s windows)"
        else:
            rps_axes.text(0.5, 0.5, "no time series kept for this stage", ha="center", transform=rps_axes.transAxes)
            window = ""
        rps_axes.set_title(f"stage {stage.stage}: {stage.injectors} injectors, {stage.users:,} users{window}",
                           loc="left", fontsize="medium")
        _style(rps_axes, "seconds since the stage's first request", "requests per second")
        _style(latency_axes, "seconds since the stage's first request", "latency (ms)")
    return chart_id, f"Over time, {tables.variant_label(run, variant)}", _svg(figure, chart_id)


def front_chart(run: RunStatus) -> Chart | None:
    """goal.maximize: each variant's capacity (its search's bracket, in req/s) against its cost in cores, the
    front (none cheaper serves more) joined by a line, the winner ringed; None without capacities per core."""
    pick = run.recommendation
    if pick is None:
        return None
    points = {c.variant: c for c in [*(v.met for v in run.variants if v.met), *pick.front] if c.per_core}
    if not points:
        return None
    chart_id = "front"
    figure, (axes,) = _figure(7, 4.4)
    for i, c in sorted(points.items()):
        cores = c.cost.cores or 0.0
        low, high = c.capacity_rps, (c.bounds[1] or c.bounds[0]) * cores
        colour = COLOURS[i % len(COLOURS)]
        axes.vlines([cores], [low], [high], color=colour, linewidth=2, alpha=0.45, gid=f"{chart_id}-interval-{i + 1}")
        axes.plot([cores], [low], marker="o", color=colour, gid=f"{chart_id}-point-{i + 1}")
        axes.annotate(c.label, (cores, low), textcoords="offset points", xytext=(6, -10), fontsize=8)
    front = sorted(pick.front, key=lambda c: c.cost.cores or 0.0)
    axes.plot([c.cost.cores or 0.0 for c in front], [c.capacity_rps for c in front],
              color="#444444", linewidth=1.2, linestyle="--", label="the front", gid=f"{chart_id}-data-front")
    if pick.winner is not None and pick.winner.per_core:
        axes.plot([pick.winner.cost.cores], [pick.winner.capacity_rps], marker="o",
                  markersize=14, fillstyle="none", color="black", linestyle="none", label="recommended")
    _style(axes, "cost (cores reserved, or measured)", "capacity (req/s at the bracket's low end)")
    axes.set_xlim(0, axes.get_xlim()[1] * 1.1)
    axes.legend(frameon=False, loc="lower right")
    return chart_id, "Capacity against cost (bars: each search's bracket, from its pass to its fail)", \
        _svg(figure, chart_id)


def charts(run: RunStatus, artifacts: dict[tuple[int, int], Artifact], by_users: bool = False) -> list[Chart]:
    """Every chart of the report; `artifacts` maps (variant, stage), both from 1, to a stage's artifact."""
    if not run.has_stages():
        return []
    found = [chart for chart in (front_chart(run),) if chart is not None]
    found += [latency_chart(run, by_users), throughput_chart(run, by_users), redis_chart(run, by_users),
              target_chart(run, by_users)]
    for variant in run.variants:
        if variant.stages:
            index = variant.index + 1
            found.append(series_chart(run, variant, {stage: a for (v, stage), a in artifacts.items() if v == index}))
    return found


Line = tuple[str, list[float | None], list[tuple[float | None, float | None]]]   # label, values, intervals


def over_runs_chart(chart_id: str, title: str, ylabel: str, runs: list[str], lines: list[Line]) -> Chart:
    """A figure over a series of runs (`runs`: each one's label, oldest first): one line per variant, each value
    with its interval as a bar; a run without the figure is a gap."""
    figure, (axes,) = _figure(10, 4)
    xs = list(range(1, len(runs) + 1))
    for i, (label, values, bounds) in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        axes.plot(xs, [_number(v) for v in values], marker="o", color=colour, label=label,
                  gid=f"{chart_id}-data-{i + 1}")
        bars = [(x, low, high) for x, (low, high) in zip(xs, bounds) if low is not None and high is not None]
        if bars:
            axes.vlines([x for x, _, _ in bars], [low for _, low, _ in bars], [high for _, _, high in bars],
                        color=colour, linewidth=2, alpha=0.45, gid=f"{chart_id}-interval-{i + 1}")
    axes.set_xticks(xs, runs, rotation=30, ha="right", fontsize=8)
    _style(axes, "run", ylabel)
    _legend(figure, axes)
    return chart_id, title, _svg(figure, chart_id)
