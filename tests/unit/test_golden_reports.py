"""The reports of stored result files (real local runs: the quick start with 20 s stages and their confidence
intervals, the five servers, a paced users ladder with failed thresholds, a goal's pick of four variants at an
arrival rate) are exactly the stored ones. A
refactor must not move a character; a change that means to alters the stored files, and the diff shows what a user
will see.
LOADSTAGE_UPDATE_GOLDEN=1 rewrites them."""

import os
import re

import pytest

from loadstage.cli.results import render_document
from loadstage.reports import sources
from support.waiting import ROOT

RESULTS = ROOT / "tests" / "data" / "results"
GOLDEN = ROOT / "tests" / "data" / "reports"
RUNS = {"quickstart": "quickstart.yaml", "servers": "servers.json", "paced": "paced.yaml", "goal": "goal.json",
        "maximize": "maximize.json", "search": "search.json"}
FORMATS = {"table": "txt", "markdown": "md", "csv": "csv", "html": "html.txt"}
SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def shown(form: str, text: str) -> str:
    """What is compared: the whole report; in HTML every chart is reduced to the ids of its data lines and
    interval bars (the drawing's coordinates follow the fonts the machine has)."""
    if form != "html":
        return text
    ids = re.compile(r'id="([^"]*-(?:data|interval)-[^"]*)"')
    return SVG.sub(lambda m: "<svg " + " ".join(sorted(set(ids.findall(m.group(0))))) + ">", text)


@pytest.mark.parametrize("form", FORMATS)
@pytest.mark.parametrize("run", RUNS)
def test_a_stored_runs_report_is_unchanged(run, form):
    source = str(RESULTS / RUNS[run])
    text = shown(form, render_document(source, sources.load_document(source), form))
    golden = GOLDEN / f"{run}.{FORMATS[form]}"
    if os.environ.get("LOADSTAGE_UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert text == golden.read_text(), f"{run} {form} report changed; see {golden}"
