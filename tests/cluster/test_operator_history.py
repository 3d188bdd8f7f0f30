"""The operator records each finished experiment into a real PostgreSQL (the chart's history.url): once by its uid,
also when the database was down as the experiment ended and the operator restarted before it came back."""

import signal

import psycopg
import pytest
from test_operator import one_stage_ladder

from loadstage.results import histograms
from support.kube import apply, play_stage, wait_phase
from support.postgres import Postgres
from support.waiting import wait_for

pytestmark = pytest.mark.cluster


def test_a_run_that_ended_while_the_database_was_down_is_recorded_once_when_it_is_back(cluster, namespace, operator,
                                                                                      real_stage):
    database = Postgres()
    try:
        first = operator(extra=("--history-url", database.url()))
        database.kill()
        assert apply(cluster, namespace, one_stage_ladder()).returncode == 0
        play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
        wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
        failed = wait_for(lambda: (cluster.status(namespace, "cluster-ladder").get("history") or {}).get("error"),
                          timeout=30)
        assert failed.startswith("history: postgresql://loadstage@/history?host=") and "tried again in 10 s" in failed
        assert cluster.status(namespace, "cluster-ladder")["history"]["recorded"] is False
        first.kill(signal.SIGKILL)
        operator(extra=("--history-url", database.url()))
        database.start()
        recorded = wait_for(lambda: (cluster.status(namespace, "cluster-ladder").get("history") or {}).get(
            "recorded"), timeout=40)
        assert recorded is True
        resource = cluster.lx(namespace, "cluster-ladder")
        assert resource["status"]["history"]["trend"] == "too few runs (1 of 4)"
        listed = cluster.kubectl("get", "lx", "-n", namespace).stdout
        assert "TREND" in listed and "too few runs (1 of 4)" in listed, listed
        with psycopg.connect(database.url()) as connection:
            runs = connection.execute("SELECT uid, series, source, image, phase FROM runs").fetchall()
            (histogram,) = connection.execute("SELECT histogram FROM stages").fetchone()
    finally:
        database.stop()
    (run,) = runs   # once, though two operators tried
    assert run[:3] == (resource["metadata"]["uid"], "cluster-ladder", "cluster") and run[4] == "Succeeded"
    assert histograms.decode(histogram).get_total_count() == resource["status"]["variants"][0]["stages"][0]["requests"]
    events = cluster.core.list_namespaced_event(namespace).items
    assert {"HistoryFailed", "Recorded"} <= {e.reason for e in events}
