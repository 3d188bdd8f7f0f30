"""The report as one self-contained HTML file: the Markdown report's tables and the charts, inline.
It loads nothing (no script, stylesheet, font or image from anywhere), so it works offline and can
be mailed or attached as it is."""

from __future__ import annotations

import html

from loadstage.api.status import RunStatus
from loadstage.api.types import Experiment
from loadstage.reports import charts, ons_layout, tables, terminal
from loadstage.reports.significance import between_variants
from loadstage.results.artifact import Artifact

STYLE = """
body { font-family: system-ui, "DejaVu Sans", sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
figure.chart { margin: 1em 0 2em; } figure.chart svg { max-width: 100%; height: auto; }
figcaption { font-weight: 600; margin-bottom: 0.3em; }
.note { color: #555; font-size: 0.9em; } .fail { color: #b00; }
"""


def table(header: list[str], rows: list[list[str]], text_columns: int = 0) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td{'' if i < text_columns else ' class=n'}>{html.escape(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(experiment: Experiment, run: RunStatus, artifacts: dict[tuple[int, int], Artifact]) -> str:
    name = html.escape(experiment.name)
    phase = run.phase
    parts = [f"<h1>Load experiment <code>{name}</code></h1>",
             f"<p>{html.escape(ons_layout.run_period(run))}. Latencies in milliseconds, from the "
             f"merged HDR histograms of every request (3 significant digits).</p>"]
    if phase != "Succeeded" and run.message:
        parts.append(f"<p class=fail>{html.escape(phase)}: {html.escape(run.message)}</p>")
    sections = ons_layout.page_sections(experiment, run)

    def shown(section: ons_layout.Section) -> list[str]:
        return [f"<h2>{html.escape(section.title)}</h2>", table(section.header, section.rows, section.text_columns)]
    for section in sections:
        if not section.per_variant:
            parts += shown(section)
    header, rows = tables.repeat_rows(run)
    if rows:
        parts += [f"<h2>{html.escape(tables.REPEATS_TITLE)}</h2>", table(header, rows, 2)]
    decided = between_variants(run, [tables.variant_label(run, v) for v in run.variants])
    if decided:
        parts += ["<h2>Between variants</h2>", "<ul>", *(f"<li>{html.escape(line)}</li>" for line in decided),
                  "</ul>"]
    header, rows = tables.interval_rows(run)
    if rows:
        parts += ["<h2>95% confidence intervals per variant, over all its stages</h2>", table(header, rows, 1)]
    parts += [chart_figure(chart) for chart in charts.charts(run, artifacts, by_users=ons_layout.by_users(experiment))]
    for section in sections:
        if section.per_variant:
            parts += shown(section)
    lines = terminal.render_capacity(run) + ons_layout.page_footnotes(sections)
    parts += [f"<p class=note>{html.escape(line)}</p>" for line in lines]
    return page(name, parts)


def chart_figure(chart: charts.Chart) -> str:
    chart_id, title, svg = chart
    return f"<figure class=chart id=chart-{chart_id}><figcaption>{html.escape(title)}</figcaption>{svg}</figure>"


def page(name: str, parts: list[str]) -> str:
    """One offline page: its parts (HTML), the style inline."""
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            "<link rel=icon href='data:,'>"
            f"<title>loadstage: {name}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
