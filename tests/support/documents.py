"""Experiment documents the tests start from."""

BASE = {
    "apiVersion": "loadstage.io/v1alpha1",
    "kind": "LoadExperiment",
    "metadata": {"name": "demo"},
    "spec": {"stages": [{"injectors": 1, "duration": "10s"}]},
}
