"""Histories of played runs (support.played) for the history's tests: a ladder of 10, 20 and 40 users whose p99
climbs past a knee that is known, kept run after run."""

import copy

from loadstage.api.load import parse_experiment
from loadstage.history.locations import location
from loadstage.history.records import record_of
from loadstage.history.store import Store
from support.documents import BASE
from support.played import KneeBackend, run

LOADS = (10, 20, 40)


def played_document(knee, name="shop"):
    """A result document of a played ladder of 10, 20 and 40 users, its p99 climbing past `knee` users."""
    doc = copy.deepcopy(BASE)
    doc["metadata"]["name"] = name
    doc["spec"].update(stages=[{"users": n, "duration": "30s"} for n in LOADS], thresholds={"p99": "50ms"},
                       history={"labels": {"team": "checkout"}})
    status = run(parse_experiment(doc), KneeBackend(knee))[-1]
    for stage in status["variants"][0]["stages"]:   # played on the wall clock: a rate of its own each time
        stage["rps"] = 10.0 * stage["users"]
        stage.get("intervals", {}).pop("rps", None)
    return {**doc, "status": status}


def played_documents():
    """By knee: 30 users (the p99 at 40 users 23.7 ms) and 20 (80 ms, past the 50 ms threshold)."""
    return {knee: played_document(knee) for knee in (30, 20)}


def keep(url, documents, knees):
    """One run for each knee in `knees`, in order, labelled version=1.0, 1.1, ..."""
    with Store(location(url)) as store:
        for i, knee in enumerate(knees):
            made = record_of(documents[knee], uid=f"run-{i}", source="local", labels={"version": f"1.{i}"})
            assert store.record(made, f"2026-11-28T10:{i:02d}:00+00:00")
