"""`loadstage report`, `compare` and `artifacts`: the results of a run, from a result file or lx/NAME."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from loadstage.api.schema import ValidationError
from loadstage.cli.history import HISTORY_PREFIX, kept_document
from loadstage.cli.parser import EXIT_FAILED, EXIT_OK, EXIT_REGRESSION, SUFFIX_FORMATS
from loadstage.cli.run import replace_file
from loadstage.reports import compare, pivot, sources
from loadstage.reports.tables import format_ms, render
from loadstage.reports.terminal import render_status
from loadstage.results import histograms


def _report_format(args) -> str:
    if args.format:
        return args.format
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if args.output and suffix not in SUFFIX_FORMATS:
        raise ValidationError([("--format", f"cannot tell the format from {args.output!r}: give --format, or name "
                                            f"the file .md, .csv, .html or .txt")])
    return SUFFIX_FORMATS.get(suffix, "table")


def render_document(source: str, document: dict[str, Any], form: str, namespace: str | None = None) -> str:
    run = sources.results_of(source, document)
    if form == "table":
        return render_status(run)
    experiment = sources.experiment_of(source, document)
    if form == "markdown":
        from loadstage.reports.markdown import render_markdown
        return render_markdown(experiment, run)
    if form == "csv":
        from loadstage.reports.csv import render_csv
        return render_csv(experiment, run)
    try:
        import matplotlib  # noqa: F401

        from loadstage.reports.html import render_html
    except ImportError:
        raise ValidationError([("--format html", "needs matplotlib: pip install 'loadstage[report]'")]) from None
    return render_html(experiment, run, sources.artifacts_of(source, namespace, document))  # the first repeat's


def _write(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        replace_file(Path(output), text)
    except OSError as e:
        raise ValidationError([("--output", f"cannot write {output}: {e.strerror}")]) from None


def cmd_report(args) -> int:
    form = _report_format(args)
    if args.pivot:
        return _pivot(args, form)
    if args.follow:
        if form != "table" or args.output:
            raise ValidationError([("--follow", "prints the table to the terminal; write the other formats "
                                                "once the run has ended")])
        return _follow(args)
    document = sources.load_document(args.source, args.namespace)
    _write(render_document(args.source, document, form, args.namespace), args.output)
    if args.output:
        print(f"{form} report written to {args.output}", file=sys.stderr)
    return EXIT_OK


def _pivot(args, form: str) -> int:
    if form not in ("table", "markdown") or args.follow:
        raise ValidationError([("--pivot", "prints one table, as text or Markdown (--format table or markdown)")])
    rows, column = pivot.parse_pivot(args.pivot)
    run = sources.results_of(args.source, sources.load_document(args.source, args.namespace))
    title, (header, body), notes = pivot.pivot_table(run, rows, column, args.figure)
    if form == "markdown":
        table = "\n".join(["", f"| {' | '.join(header)} |", f"|{'---|' * len(header)}",
                           *(f"| {' | '.join(row)} |" for row in body), ""])
    else:
        table = render(header, body, left=(header[0],))
    text = "\n".join([f"{title}:", table, *notes]) + "\n"
    _write(text, args.output)
    return EXIT_OK


def _follow(args) -> int:
    shown = None
    for document in sources.follow(args.source, args.namespace):
        run = sources.results_of(args.source, document)
        finished = sum(sum(len(r.stages) for r in v.repeats) or len(v.stages) for v in run.variants)
        state = (run.phase, finished)
        if state == shown:
            continue
        shown = state
        spec = document.get("spec", {})
        total = len(run.variants) * len(spec.get("stages", [])) * spec.get("repeats", 1)
        print(f"== {time.strftime('%H:%M:%S')} {run.phase}: {finished} of {total or '?'} stage(s) finished ==")
        if run.variants:
            sys.stdout.write(render_status(run))
        sys.stdout.flush()
    return EXIT_OK if shown and shown[0] == "Succeeded" else EXIT_FAILED


def cmd_compare(args) -> int:
    runs = []
    for source in (args.base, args.new):
        document = kept_document(source, args) if source.startswith(HISTORY_PREFIX) else \
            sources.load_document(source, args.namespace)
        runs.append((sources.experiment_of(source, document), sources.results_of(source, document)))
    comparison = compare.compare(runs[0], runs[1], args.tolerance, names=(args.base, args.new),
                                 confidence=args.confidence)
    sys.stdout.write(compare.render_markdown(comparison) if args.format == "markdown"
                     else compare.render_table(comparison))
    return EXIT_REGRESSION if comparison.regressed else EXIT_OK


def cmd_artifacts(args) -> int:
    """Per stage: the artifact as JSON, and the stage's histogram as an HdrHistogram percentile
    distribution (.hgrm, milliseconds) that HdrHistogram's plotters read."""
    found = sources.load_artifacts(args.source, args.namespace)
    out = Path(args.output)
    checked = [(v, r, n, raw, sources.artifact_of(args.source, raw, v, r, n)) for v, r, n, raw in found]
    for variant, repeat, number, raw, artifact in checked:     # every one read before any is written
        directory = out / f"variant-{variant}" / (f"repeat-{repeat}" if repeat > 1 else "")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"stage-{number}.json").write_text(json.dumps(raw, indent=1) + "\n")
        which = f"variant {variant}" + (f" repeat {repeat}" if repeat > 1 else "") + f" stage {number}"
        if artifact.histogram is None:
            print(f"{which}: no histogram -> {directory}/stage-{number}.json")
            continue
        histogram = histograms.decode(artifact.histogram)
        with open(directory / f"stage-{number}.hgrm", "wb") as f:
            histogram.output_percentile_distribution(f, 1e6)
        latency = histograms.latency_ms(histogram)
        print(f"{which}: {latency['n']:,} requests, p50 {format_ms(latency['p50'])} ms, p99 {format_ms(latency['p99'])}"
              f" ms, p99.9 {format_ms(latency['p999'])} ms -> {directory}/stage-{number}.json, .hgrm")
    if not found:
        print(f"{args.source}: no stage has finished yet")
    return EXIT_OK
