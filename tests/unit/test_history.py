"""The history in SQLite, on runs the engine plays (support.played): each run kept once with its variants and
stages, read back as a table, CSV and JSON, and `history check` exiting 4 once a run's p99 climbed, 0 before it;
bad URLs, a newer schema and a read-only file refused naming the option."""

import argparse
import csv
import io
import json
import sqlite3
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadstage.api.schema import ValidationError
from loadstage.cli import main
from loadstage.cli.history import prepared
from loadstage.history.locations import location
from loadstage.history.records import cluster_document, record_of
from loadstage.history.store import HistoryError, Store
from loadstage.history.trends import check
from loadstage.history.views import trend
from support.histories import keep, played_documents


@pytest.fixture(scope="module")
def documents():
    return played_documents()


def test_a_run_is_kept_once_with_its_variants_stages_and_labels_and_read_back_as_kept(tmp_path, documents):
    url = f"sqlite:{tmp_path}/h.sqlite"
    made = record_of(documents[20], uid="u1", source="local", labels={"commit": "abc"})
    with Store(location(url)) as store:
        assert store.record(made, "2026-11-28T10:00:00+00:00") is True
        assert store.record(made, "2026-11-28T10:01:00+00:00") is False   # a retry, a second replica
        (kept,) = store.runs("shop")
        assert store.series() == [("shop", 1, made.run.finished_at)]
    assert kept.run == made.run and kept.variants == made.variants and kept.stages == made.stages
    assert kept.run.labels == {"team": "checkout", "commit": "abc"} and kept.run.phase == "Succeeded"
    assert [s.load for s in kept.stages] == ["10 users", "20 users", "40 users"]
    assert kept.stages[2].latency_ms["p99"] == pytest.approx(10 * (40 / 20) ** 3, rel=0.01)
    assert [s.outcome for s in kept.stages] == ["Pass", "Pass", "Fail"]
    (variant,) = kept.variants   # the knee: 20 users passed, 40 failed (a p99 of 80 ms)
    knee = documents[20]["status"]["variants"][0]["capacity"]
    assert knee["stage"] == 2 and (variant.capacity_low, variant.capacity_high) == (knee["rps"], max(knee["rps"], 400))
    rows = sqlite3.connect(f"{tmp_path}/h.sqlite").execute("SELECT COUNT(*) FROM stages").fetchone()
    assert rows == (3,)


def test_history_lists_a_series_as_a_table_csv_and_json(tmp_path, documents, capsys):
    url = f"sqlite:{tmp_path}/h.sqlite"
    keep(url, documents, [30, 30, 20])
    assert main(["history", "--history", url]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "p99 10 users" in table[0] and "p99 40 users" in table[0] and len(table) == 2 + 3
    assert "team=checkout version=1.2" in table[-1] and "Succeeded" in table[-1]
    assert main(["history", "shop", "--history", url, "--format", "csv"]) == 0
    found = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [float(r["p99Ms@40 users"]) for r in found] == pytest.approx([23.7, 23.7, 80.0], rel=0.01)
    assert main(["history", "--history", url, "--format", "json", "--last", "2"]) == 0
    assert [r["labels"]["version"] for r in json.loads(capsys.readouterr().out)] == ["1.1", "1.2"]


def test_check_exits_4_naming_the_p99_that_climbed_and_0_before_it(tmp_path, documents, capsys):
    before, after = f"sqlite:{tmp_path}/before.sqlite", f"sqlite:{tmp_path}/after.sqlite"
    keep(before, documents, [30] * 6)
    keep(after, documents, [30] * 6 + [20] * 2)
    assert main(["history", "check", "--history", before]) == 0
    assert "no figure changed by more than the runs' spread" in capsys.readouterr().out
    assert main(["history", "check", "shop", "--history", after]) == 4
    out = capsys.readouterr().out
    assert "WORSE: p99 at 40 users, the only settings:" not in out   # a single variant has no settings to name
    line = next(x for x in out.splitlines() if "WORSE: p99 at 40 users" in x)
    assert "23.7 -> 80.0 ms (+238%" in line and "2 run(s) since " in line and "(team=checkout version=1.6)" in line
    assert "against 6 before it" in line and "(team=checkout version=1.5)" in line
    assert out.rstrip().endswith("worse: exit 4")
    assert "p99 at 10 users" not in out   # the same 10 ms in every run


def test_check_on_too_few_runs_says_so_and_exits_0(tmp_path, documents, capsys):
    url = f"sqlite:{tmp_path}/h.sqlite"
    keep(url, documents, [30, 20])
    assert main(["history", "check", "--history", url]) == 0
    assert "too few runs to check: 2 succeeded, the check needs 4" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "said"), [
    (["--history", "mysql://db/x"], "error: --history: unknown scheme 'mysql': sqlite or postgresql"),
    (["--history", "sqlite:///"], "error: --history: 'sqlite:///' names no file"),
    (["--history", "postgresql://"], "error: --history: 'postgresql://' names no server or database"),
    (["nope", "--history", "sqlite:{tmp}/h.sqlite"], "error: SERIES: no series 'nope' in sqlite:{tmp}/h.sqlite; it "
                                                     "has: shop"),
    (["a", "b", "--history", "sqlite:{tmp}/h.sqlite"], "error: history: one series at most, got 2: a b"),
    (["--history", "sqlite:{tmp}/none.sqlite"], "error: --history: sqlite:{tmp}/none.sqlite: no history there yet"),
])
def test_bad_history_options_are_refused_naming_the_option(tmp_path, documents, capsys, argv, said):
    keep(f"sqlite:{tmp_path}/h.sqlite", documents, [30])
    assert main(["history", *(a.replace("{tmp}", str(tmp_path)) for a in argv)]) == 2
    assert said.replace("{tmp}", str(tmp_path)) in capsys.readouterr().err


def test_a_history_of_a_newer_schema_is_refused_not_changed(tmp_path):
    path = tmp_path / "h.sqlite"
    Store(location(str(path))).close()
    sqlite3.connect(path, isolation_level=None).execute("UPDATE loadstage_schema SET version = 9")
    with pytest.raises(HistoryError, match="its schema is version 9, newer than this loadstage's 1"):
        Store(location(str(path)))
    assert sqlite3.connect(path).execute("SELECT version FROM loadstage_schema").fetchone() == (9,)


@pytest.fixture
def read_only(tmp_path):
    """A history no one may write: immutable (chattr +i), which binds root too."""
    path = tmp_path / "h.sqlite"
    Store(location(str(path))).close()
    if subprocess.run(["chattr", "+i", path], capture_output=True).returncode:
        pytest.skip("this filesystem has no immutable files")
    yield path
    subprocess.run(["chattr", "-i", path], check=True)


def test_a_read_only_history_is_refused_before_a_run_naming_the_option(read_only):
    with pytest.raises(ValidationError) as e:
        prepared(argparse.Namespace(no_history=False, history=f"sqlite:{read_only}"))
    ((option, message),) = e.value.problems
    assert option == "--history" and message.startswith(f"cannot write {read_only}"), message
    assert main(["history", "--history", f"sqlite:{read_only}"]) == 0   # reading it is fine


@given(st.text(max_size=60))
def test_any_history_url_is_a_location_or_a_clear_error(text):
    try:
        found = location(text)
    except ValueError as e:
        assert str(e)
    else:
        assert found.scheme in ("sqlite", "postgresql") and found.target


def test_the_trend_kubectl_shows_names_the_first_figure_that_got_worse(tmp_path, documents):
    url = f"sqlite:{tmp_path}/h.sqlite"
    keep(url, documents, [30] * 6)
    with Store(location(url)) as store:
        assert trend(check(store.runs("shop")), 6) == "ok"
        assert trend(check(store.runs("shop", last=2)), 2) == "too few runs (2 of 4)"
    keep(f"sqlite:{tmp_path}/h2.sqlite", documents, [30] * 6 + [20] * 2)
    with Store(location(f"sqlite:{tmp_path}/h2.sqlite")) as store:
        assert trend(check(store.runs("shop")), 8) == "worse p99 at 40 users +238%"


def test_a_clusters_resource_and_its_configmaps_artifacts_make_the_document_a_local_run_writes(documents):
    resource = {"metadata": {"name": "shop", "namespace": "team", "uid": "u-1", "labels": {"x": "y"}},
                "spec": documents[20]["spec"], "status": documents[20]["status"]}
    artifacts = [(1, 1, 3, {"histogram": "h3"}), (1, 1, 1, {"histogram": "h1"}), (1, 2, 1, {"histogram": "r2"})]
    made = record_of(cluster_document(resource, artifacts), uid="u-1", source="cluster", image="app:1")
    assert (made.run.namespace, made.run.source, made.run.image) == ("team", "cluster", "app:1")
    assert [s.histogram for s in made.stages] == ["h1", None, "h3"]   # the first repeat's; stage 2's is gone


def test_compare_reads_two_runs_from_the_history_by_series_and_by_uid(tmp_path, documents, capsys):
    url = f"sqlite:{tmp_path}/h.sqlite"
    keep(url, documents, [30, 30, 20])
    assert main(["compare", "history:shop~2", "history:run-1", "--history", url]) == 0   # the same knee
    capsys.readouterr()
    assert main(["compare", "history:shop~1", "history:shop", "--history", url]) == 4   # the newest: a lower knee
    out = capsys.readouterr().out
    assert "regressed: p99 +237.5%" in out and out.count("regressed:") == 1, out
    assert main(["compare", "history:shop~5", "history:shop", "--history", url]) == 2
    assert "error: history:shop~5: no run 'shop~5' in sqlite:" in capsys.readouterr().err
