"""The live series' families: one per name across stages, a finished stage's counters only, the time left
counting down from the last status's ETA, and a figure nobody sampled left out."""

import datetime as dt

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loadstage.kube.metrics import LiveExperiments
from loadstage.results.live_series import stage_families, stage_labels, target_samples

T = dt.datetime(2026, 11, 24, 8, 0, tzinfo=dt.UTC)


def labels(stage):
    return stage_labels(experiment="x", namespace="perf", variant=1, settings="gunicorn threads=2", repeat=1,
                        stage=stage)


def samples(*collectors):
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    text = generate_latest(registry).decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples], text


class Stages:
    def __init__(self, stages):
        self.stages = stages

    def collect(self):
        return stage_families(self.stages)


def test_every_stage_shares_one_family_per_name_and_a_finished_stage_keeps_only_its_counters():
    done = {"endpoints": [["GET", "/a", 120, 2]], "users": 10, "workers": 1, "latencySeconds": {"0.99": 0.2}}
    running = {"endpoints": [["GET", "/a", 30, 0], ["POST", "/b", 5, 1]], "users": 20, "workers": 2,
               "latencySeconds": {"0.5": 0.01, "0.99": 0.05}, "injectorCpuPercent": {"w1": 45.0},
               "startedAt": 1795500000.5}
    found, text = samples(Stages([(done, labels(None), False), (running, labels(2), True)]))
    assert text.count("# TYPE loadstage_stage_requests_total counter") == 1
    by = {(s.name, s.labels["stage"], s.labels.get("name"), s.labels.get("quantile")): s.value for s in found}
    assert by[("loadstage_stage_requests_total", "warmup", "/a", None)] == 120
    assert by[("loadstage_stage_failures_total", "warmup", "/a", None)] == 2
    assert by[("loadstage_stage_requests_total", "2", "/b", None)] == 5
    assert by[("loadstage_stage_latency_seconds", "2", None, "0.99")] == 0.05
    assert by[("loadstage_injector_cpu_ratio", "2", None, None)] == 0.45
    assert by[("loadstage_stage_started_timestamp_seconds", "2", None, None)] == 1795500000.5
    assert not [s for s in found if s.labels["stage"] == "warmup" and not s.name.endswith("_total")]


def test_the_operator_shows_each_run_and_its_time_left_and_each_running_stages_latest_samples():
    live = LiveExperiments()
    eta = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)).isoformat().replace("+00:00", "Z")
    live.note_status("perf", "x", {"phase": "Running", "startedAt": "2026-11-24T07:00:00Z",
                                   "progress": {"variant": "1/2", "stage": "2/3", "eta": eta}})
    with live.stage(labels(2), lambda: target_samples((0.75, 2**20), None)):
        found, _ = samples(live)
    by = {s.name: s for s in found}
    assert by["loadstage_experiment_info"].labels == {"namespace": "perf", "experiment": "x", "phase": "Running",
                                                      "variant": "1/2", "repeat": "", "stage": "2/3"}
    assert 590 <= by["loadstage_experiment_remaining_seconds"].value <= 600
    assert by["loadstage_target_cpu_cores"].value == 0.75 and by["loadstage_target_memory_bytes"].value == 2**20
    assert "loadstage_redis_connections" not in by     # nothing sampled it (no Redis)
    live.note_status("perf", "x", {"phase": "Succeeded", "startedAt": "2026-11-24T07:00:00Z",
                                   "finishedAt": "2026-11-24T07:30:00Z", "progress": {"eta": eta}})
    found, _ = samples(live)
    by = {s.name: s for s in found}
    assert by["loadstage_experiment_remaining_seconds"].value == 0
    assert by["loadstage_experiment_elapsed_seconds"].value == 1800
    assert "loadstage_target_cpu_cores" not in by      # the stage ended
    live.forget("perf", "x")
    assert not [s for s in samples(live)[0] if s.name.startswith("loadstage_experiment")]
