"""The history in a real PostgreSQL server (Debian's, on a Unix socket of its own): a real local run recorded into
it and read back, the same SQL as SQLite's; two processes recording at once into either, nothing lost or twice;
a server killed mid-run loses no result; a server that refuses is named before any load runs; the chart's Grafana
dashboard of the history, each query as Grafana expands it, returns the stored figures."""

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta

import psycopg
import pytest
from test_local_engine import finish, start_cli

from loadstage.history.locations import location
from loadstage.history.store import Store
from loadstage.history.trends import trends
from loadstage.results import histograms
from support.documents import BASE
from support.histories import keep, played_documents
from support.postgres import Postgres
from support.waiting import ROOT

pytestmark = pytest.mark.e2e

QUICK = {"target": {"pods": 1, "workers": 1, "threads": 2},
         "injectors": {"usersPerInjector": 4, "waitTime": {"min": "10ms", "max": "20ms"}},
         "stages": [{"injectors": 1, "duration": "4s"}], "history": {"series": "checkout", "labels": {"app": "shop"}}}


@pytest.fixture(scope="module")
def postgres():
    server = Postgres()
    yield server
    server.stop()


def quick_run(write_experiment, tmp_path, *options):
    path = write_experiment({**BASE, "spec": QUICK})
    out_file = tmp_path / "result.json"
    code, _, err, _ = finish(start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w", *options), 120)
    return code, err, out_file


def test_a_local_run_is_recorded_into_postgresql_with_its_histograms_and_listed(write_experiment, tmp_path,
                                                                                postgres):
    code, err, out_file = quick_run(write_experiment, tmp_path, "--history", postgres.url(), "--label", "commit=abc1")
    assert code == 0, err
    said = next(line for line in err.splitlines() if line.startswith("history: "))
    assert said.startswith("history: recorded run ") and "of series 'checkout' (1 variant(s), 1 stage(s)" in said
    assert f"in postgresql://loadstage@/history?host={postgres.socket}" in said
    stage = json.loads(out_file.read_text())["status"]["variants"][0]["stages"][0]
    with psycopg.connect(postgres.url()) as connection:
        labels, histogram = connection.execute("SELECT r.labels, s.histogram FROM runs r JOIN stages s ON "
                                               "s.run_uid = r.uid WHERE r.series = 'checkout'").fetchone()
    assert json.loads(labels) == {"app": "shop", "commit": "abc1"}
    assert histograms.decode(histogram).get_total_count() == stage["requests"]   # the stage's merged histogram
    listed = subprocess.run([sys.executable, "-m", "loadstage.cli", "history", "checkout", "--history",
                             postgres.url(), "--format", "csv"], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.endswith("p99Ms@4 users") and "app=shop commit=abc1,Succeeded" in row
    assert float(row.rsplit(",", 1)[1]) == stage["latencyMs"]["p99"]
    checked = subprocess.run([sys.executable, "-m", "loadstage.cli", "history", "check", "--history", postgres.url()],
                             capture_output=True, text=True)
    assert checked.returncode == 0 and "too few runs to check: 1 succeeded" in checked.stdout, checked


RECORDER = """
import json, sys
from loadstage.history.records import record_of
from loadstage.history.locations import location
from loadstage.history.store import Store
from loadstage.history.trends import trends
document = json.load(open(sys.argv[2]))
with Store(location(sys.argv[1])) as store:
    for uid in sys.argv[3:]:
        store.record(record_of(document, uid=uid, source="local"), "2026-11-28T10:00:00+00:00")
"""


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql"])
def test_two_processes_recording_at_once_keep_every_run_once(tmp_path, postgres, scheme):
    from loadstage.api.load import parse_experiment
    from support.played import KneeBackend, run
    doc = {**BASE, "spec": {"stages": [{"users": n, "duration": "30s"} for n in (10, 20)]}}
    document = tmp_path / "document.json"
    document.write_text(json.dumps({**doc, "status": run(parse_experiment(doc), KneeBackend(15))[-1]}))
    url = f"sqlite:{tmp_path}/h.sqlite" if scheme == "sqlite" else postgres.url(create_database(postgres, "twice"))
    # each writes 30 runs of its own and the same 10 shared ones, from a new database (both make its schema)
    writers = [subprocess.Popen([sys.executable, "-c", RECORDER, url, document,
                                 *(f"{who}-{i}" for i in range(30)), *(f"shared-{i}" for i in range(10))],
                                stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
    with Store(location(url)) as store:
        kept = store.runs("demo")
    assert len(kept) == 70 and len({r.run.uid for r in kept}) == 70
    assert all(len(r.stages) == 2 for r in kept)


def create_database(server, name):
    with psycopg.connect(server.url(), autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name}")
        connection.execute(f"CREATE DATABASE {name}")
    return name


def test_a_server_that_refuses_is_named_before_any_load_runs(write_experiment, tmp_path, postgres):
    code, err, out_file = quick_run(write_experiment, tmp_path, "--history", postgres.url("nosuch"))
    assert code == 2 and 'error: --history: postgresql://loadstage@/nosuch' in err, err
    assert 'database "nosuch" does not exist' in err and not out_file.exists() and "Traceback" not in err
    newer = postgres.url(create_database(postgres, "newer"))
    Store(location(newer)).close()
    with psycopg.connect(newer, autocommit=True) as connection:
        connection.execute("UPDATE loadstage_schema SET version = 2")
    code, err, _ = quick_run(write_experiment, tmp_path, "--history", newer)
    assert code == 2 and "its schema is version 2, newer than this loadstage's 1" in err, err


def test_a_server_killed_mid_run_loses_no_result_and_the_error_is_named(write_experiment, tmp_path):
    server = Postgres()
    try:
        path = write_experiment({**BASE, "spec": QUICK})
        out_file = tmp_path / "result.json"
        proc = start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w", "--history", server.url())
        from support.waiting import wait_for
        wait_for(lambda: out_file.exists() or proc.poll() is not None, timeout=60)   # past the history's check
        server.kill()
        code, _, err, _ = finish(proc, 120)
    finally:
        server.stop()
    assert code == 0, err
    assert json.loads(out_file.read_text())["status"]["phase"] == "Succeeded"
    said = next(line for line in err.splitlines() if line.startswith("history: "))
    assert said.startswith("history: NOT recorded after 3 attempts: postgresql://loadstage@/history") and \
        said.endswith("; the result file keeps the run"), said


BOARD = ROOT / "charts" / "loadstage" / "dashboards" / "history.json"


def as_grafana_expands(sql, series, since, until):
    """$__timeFilter(x) as `x BETWEEN` two instants, and a multi-valued variable as its quoted values."""
    sql = re.sub(r"\$__timeFilter\(([^)]*)\)", rf"\1 BETWEEN '{since.isoformat()}' AND '{until.isoformat()}'", sql)
    return sql.replace("$series", ", ".join(f"'{s}'" for s in series))


def test_the_history_dashboards_queries_return_the_stored_figures(postgres):
    url = postgres.url(create_database(postgres, "board"))
    keep(url, played_documents(), [30, 30, 20])
    with Store(location(url)) as store:
        runs = store.runs("shop")
    expected = {title: set() for title in ("Capacity at the objective", "Capacity per core", "p99 by load",
                                           "Error rate by load")}
    for trend in trends(runs):
        title, load = next((t, trend.figure.name.removeprefix(prefix)) for t, prefix in (
            ("Capacity at the objective", "capacity"), ("Capacity per core", "capacity per core"),
            ("p99 by load", "p99"), ("Error rate by load", "error rate")) if trend.figure.name.startswith(prefix)
            and (trend.figure.name == prefix or trend.figure.name.startswith(f"{prefix} at ")))
        expected[title] |= {(datetime.fromisoformat(r.run.finished_at), f"shop {trend.variant}{load}", round(v, 9))
                            for r, v in zip(trend.runs, trend.values)}
    board = json.loads(BOARD.read_text())
    times = [datetime.fromisoformat(r.run.finished_at) for r in runs]
    window = (min(times) - timedelta(minutes=1), max(times) + timedelta(minutes=1))
    with psycopg.connect(url) as connection:
        (variable,) = [v for v in board["templating"]["list"] if v["name"] == "series"]
        assert connection.execute(variable["query"]).fetchall() == [("shop",)]
        for panel in board["panels"]:
            (target,) = panel["targets"]
            rows = connection.execute(as_grafana_expands(target["rawSql"], ["shop", "other"], *window)).fetchall()
            if panel["type"] == "table":
                assert [(row[2], row[4]) for row in rows] == [("shop", "Succeeded")] * 3, rows
                outside = as_grafana_expands(target["rawSql"], ["shop"], window[1], window[1] + timedelta(days=1))
                assert connection.execute(outside).fetchall() == []
                continue
            assert {(t, metric, round(value, 9)) for t, metric, value in rows} == expected[panel["title"]], panel
    assert all(expected[t] for t in ("Capacity at the objective", "p99 by load", "Error rate by load")), expected
