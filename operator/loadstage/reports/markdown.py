"""The report as Markdown, in the ONS layout, ready to paste into a performance-investigation page:
the benchmark profile, the headline table (one row per variant), the p99 per load stage, and one
breakdown per variant."""

from __future__ import annotations

from loadstage.api.status import RunStatus
from loadstage.api.types import Experiment
from loadstage.reports import ons_layout, tables, terminal
from loadstage.reports.significance import between_variants
from loadstage.reports.tables import interval_rows


def table(header: list[str], rows: list[list[str]], left: tuple[str, ...] = ("Option", "Value")) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")
    align = ["---" if name in left else "---:" for name in header]
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(cell(c) if i != 1 else c for c in line) + " |"
                     for i, line in enumerate(lines))


def render_markdown(experiment: Experiment, run: RunStatus) -> str:
    phase = run.phase
    parts = [f"# Load experiment `{experiment.name}`", "",
             f"{ons_layout.run_period(run)}. Latencies in milliseconds, from the merged HDR histograms of "
             f"every request (3 significant digits); a variant's row covers every request of all its stages."]
    sections = ons_layout.page_sections(experiment, run)
    for section in sections:
        parts += ["", f"## {section.title}", "",
                  table(section.header, section.rows, left=tuple(section.header[:section.text_columns]))]
    repeats = tables.repeat_rows(run)
    if repeats[1]:
        parts += ["", f"## {tables.REPEATS_TITLE}", "", table(*repeats, left=("Variant", "Repeat"))]
    decided = between_variants(run, [tables.variant_label(run, v) for v in run.variants])
    if decided:
        parts += ["", "## Between variants", "", *(f"- {line}" for line in decided)]
    intervals = interval_rows(run)
    if intervals[1]:
        parts += ["", "## 95% confidence intervals per variant, over all its stages", "",
                  table(*intervals, left=("Variant",))]
    failed = [f"- {tables.variant_label(run, v)}, {s.injectors} injectors: {', '.join(s.verdict.violations)}"
              for v in run.variants for s in v.stages if s.verdict and not s.verdict.passed]
    if failed:
        parts += ["", "## Thresholds not met", "", *failed]
    capacity = terminal.render_capacity(run)
    if capacity:
        parts += ["", "## Capacity", "", *(f"- {line}" for line in capacity)]
    notes = ons_layout.page_footnotes(sections)
    if notes:
        parts += ["", *(note.replace("*", "\\*", 1) + "  " for note in notes)]
    if phase != "Succeeded" and run.message:
        parts += ["", f"**{phase}:** {run.message}"]
    return "\n".join(parts) + "\n"
