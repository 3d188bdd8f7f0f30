"""Experiment documents and result files the tests start from."""

import yaml

from support.waiting import ROOT

BASE = {
    "apiVersion": "loadstage.io/v1alpha1",
    "kind": "LoadExperiment",
    "metadata": {"name": "demo"},
    "spec": {"stages": [{"injectors": 1, "duration": "10s"}]},
}


def stored_result(name: str) -> dict:
    """A result file of tests/data/results, read with libyaml (the pure-Python loader took seconds of every test
    process's collection)."""
    return yaml.load((ROOT / "tests" / "data" / "results" / name).read_text(), Loader=yaml.CSafeLoader)
