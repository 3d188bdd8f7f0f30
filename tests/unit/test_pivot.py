"""`loadstage report --pivot`: a study's own table from a stored run (tests/data/results/servers.json, five
servers on a ladder of users), exactly, and the refusals that name the option."""

from dataclasses import replace

import pytest

from loadstage.api.schema import ValidationError
from loadstage.api.status import RunStatus
from loadstage.cli import main
from loadstage.reports import pivot, sources
from support.waiting import ROOT

SERVERS = ROOT / "tests" / "data" / "results" / "servers.json"


def run() -> RunStatus:
    return RunStatus.from_status(sources.load_document(str(SERVERS))["status"])


def test_rows_by_settings_and_a_column_per_users_holds_each_stages_figure():
    title, (header, body), _notes = pivot.pivot_table(run(), ["server"], "users", "p99")
    assert title == "p99 (ms), by server and users"
    assert header == ["server", "users 10", "users 25", "users 50", "users 100"]
    assert body[0] == ["gunicorn", "44.2", "26.4", "80.7", "24.4"]
    assert [row[0] for row in body] == ["gunicorn", "uwsgi", "waitress", "cheroot", "granian"]
    stage = next(v for v in run().variants if v.settings["server"] == "waitress").stages[2]
    assert body[2][3] == f"{stage.latency.percentile('p99'):.0f}" and stage.users == 50


def test_the_command_prints_it_as_text_or_markdown(capsys):
    assert main(["report", str(SERVERS), "--pivot", "server:users", "--figure", "rps", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("req/s, by server and users:\n\n| server | users 10 | users 25 | users 50 | users 100 |\n")
    assert out.count("\n| ") == 6


@pytest.mark.parametrize("text,message", [
    ("server:workers", "--pivot: two stages fall in the cell gunicorn / 2: add stage (or the setting that tells "
                       "them apart) to the rows"),
    ("server:socket", "--pivot: socket: not a setting of this run"),
    ("server", "--pivot: must be ROWS:COLUMN, settings such as proxy,server:socket, got 'server'"),
])
def test_a_pivot_it_cannot_fill_is_refused_naming_the_option(text, message):
    with pytest.raises(ValidationError) as refused:
        rows, column = pivot.parse_pivot(text)
        pivot.pivot_table(run(), rows, column, "rps")
    assert message in str(refused.value)


def test_an_injector_bound_stage_is_marked_in_its_cell_and_explained():
    whole = run()
    first = whole.variants[0]
    bound = replace(first, stages=[replace(first.stages[0], injector_bound=True), *first.stages[1:]])
    _title, (_header, body), notes = pivot.pivot_table(replace(whole, variants=[bound, *whole.variants[1:]]),
                                                     ["server"], "users", "rps")
    assert body[0][1].endswith("‡") and not body[0][2].endswith("‡") and not body[1][1].endswith("‡")
    assert len(notes) == 1 and notes[0].startswith("‡ injector-bound")
