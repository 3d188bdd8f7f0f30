"""The stage engine with a recording backend: what it writes into the status, in which order."""

import asyncio
import copy
import json

from locust.stats import RequestStats

from loadstage.api.load import parse_experiment
from loadstage.engine.backend import BlockingBackend
from loadstage.engine.errors import ExperimentFailed, StageDisrupted
from loadstage.engine.stages import STATUS_SCHEMA_VERSION, StageEngine, new_status
from loadstage.locust.recorder import StageRecorder
from loadstage.locust.summary import build
from loadstage.results.measurement import StageMeasurement
from support.waiting import ROOT

PHASE_ORDER = {"Pending": 0, "Deploying": 1, "Running": 2, "Succeeded": 3}


class RecordingBackend:
    def __init__(self, disrupted=()):
        self.calls = []
        self.disrupted = set(disrupted)   # run ids whose pods are taken away

    def discard_stage(self, step):
        self.calls.append(("discard", step.run_id))

    def prepare_variant(self, variant):
        self.calls.append(("prepare", variant.index))

    def run_stage(self, step):
        self.calls.append(("stage", step.variant.index, step.number) if step.attempt == 1 else ("stage", step.run_id))
        if step.run_id in self.disrupted:
            raise StageDisrupted(f"the Locust master pod of {step.run_id} was evicted")
        stats, recorder = RequestStats(), StageRecorder()
        for ms in range(1, 101):
            stats.log_request("GET", "/", ms, 10)
            recorder.record("GET", "/", ms)
        recorder.keep_unsent()
        headline, artifact = build(stats, recorder, injectors=step.stage.injectors)
        return StageMeasurement(summary=headline, artifact=artifact, started_at="t0", finished_at="t1",
                                redis_peak_connections=3)

    def saved_artifacts(self, variant, count):
        return [{}] * count

    def finish_variant(self, variant):
        self.calls.append(("finish", variant.index))


def experiment(base_doc, stages=3, matrix=None):
    base_doc["spec"]["stages"] = [{"injectors": n, "duration": "10s"} for n in range(1, stages + 1)]
    if matrix:
        base_doc["spec"]["matrix"] = matrix
    return parse_experiment(base_doc)


def run(exp, status=None, disrupted=()):
    writes = []
    backend = RecordingBackend(disrupted)

    async def record(s):
        writes.append(copy.deepcopy(s))
    asyncio.run(StageEngine(exp, BlockingBackend(backend), on_update=record).run(status))
    return writes, backend.calls


def test_a_fresh_run_deploys_each_variant_then_runs_its_stages(base_doc):
    writes, calls = run(experiment(base_doc, stages=2, matrix={"threads": [1, 2]}))
    assert calls == [("prepare", 0), ("stage", 0, 1), ("stage", 0, 2), ("finish", 0),
                     ("prepare", 1), ("stage", 1, 1), ("stage", 1, 2), ("finish", 1)]
    phases = [w["phase"] for w in writes]
    assert phases[0] == "Deploying" and phases.count("Deploying") == 2 and phases[-1] == "Succeeded"


def test_a_run_resumed_mid_stage_keeps_its_phase_and_progress_and_repeats_no_stage(base_doc):
    exp = experiment(base_doc)
    status = new_status(exp)
    first, _ = run(exp, status)
    in_flight = next(copy.deepcopy(w) for w in first if w["progress"]["stage"] == "2/3")
    assert in_flight["phase"] == "Running" and len(in_flight["variants"][0]["stages"]) == 1

    writes, calls = run(exp, in_flight)
    assert calls == [("prepare", 0), ("stage", 0, 2), ("stage", 0, 3), ("finish", 0)]
    phases = [w["phase"] for w in writes]
    assert all(PHASE_ORDER[a] <= PHASE_ORDER[b] for a, b in zip(["Running"] + phases, phases)), phases
    stages = [int(w["progress"]["stage"].split("/")[0]) for w in writes]
    assert stages == sorted(stages) and stages[0] == 2, stages
    assert [s["stage"] for s in writes[-1]["variants"][0]["stages"]] == [1, 2, 3]


def test_a_disrupted_stage_runs_again_from_scratch_and_records_its_attempts(base_doc):
    exp = experiment(base_doc)
    writes, calls = run(exp, disrupted={"v1-s2"})
    assert calls == [("prepare", 0), ("stage", 0, 1), ("stage", 0, 2), ("discard", "v1-s2"), ("stage", "v1-s2-a2"),
                     ("stage", 0, 3), ("finish", 0)]
    final = writes[-1]
    assert final["phase"] == "Succeeded"
    stages = final["variants"][0]["stages"]
    assert "attempts" not in stages[0] and "attempts" not in stages[2]
    assert stages[1]["attempts"] == 2
    assert stages[1]["retries"][0]["attempt"] == 1
    assert stages[1]["retries"][0]["cause"] == "the Locust master pod of v1-s2 was evicted"
    assert stages[1]["requests"] == 100     # the figures of the attempt that finished, not a sum
    in_flight = [w for w in writes if w["progress"].get("attempt") == 2]
    assert in_flight and all(w["progress"]["stage"] == "2/3" for w in in_flight)
    assert "attempt" not in writes[-1]["progress"], "a retry's attempt carried over to the next stage"


def test_an_operator_restarted_mid_retry_resumes_that_attempt(base_doc):
    exp = experiment(base_doc)
    writes, _ = run(exp, disrupted={"v1-s2"})
    in_flight = copy.deepcopy(next(w for w in writes if w["progress"].get("attempt") == 2))

    writes, calls = run(exp, in_flight)
    assert calls == [("prepare", 0), ("stage", "v1-s2-a2"), ("stage", 0, 3), ("finish", 0)]
    assert writes[-1]["variants"][0]["stages"][1]["attempts"] == 2


def test_a_stage_disrupted_more_often_than_spec_stage_retries_fails_naming_the_cause_and_the_field(base_doc):
    base_doc["spec"]["stageRetries"] = 1
    exp = experiment(base_doc)
    try:
        run(exp, disrupted={"v1-s1", "v1-s1-a2"})
    except ExperimentFailed as e:
        assert e.reason == "StageDisrupted"
        assert e.message == ("variant 1/1 (gunicorn pods=1 workers=2 threads=2 gthread), stage 1/3, attempt 2: "
                             "the Locust master pod of v1-s1-a2 was evicted; no retry left (spec.stageRetries: 1)")
    else:
        raise AssertionError("a stage disrupted twice ran on")


def test_a_status_written_mid_run_by_the_version_before_is_resumed_by_this_one():
    """tests/data/upgrade: `loadstage run -o` of the commit before status.schemaVersion, copied when stage 1 of 2
    had finished."""
    document = json.loads((ROOT / "tests" / "data" / "upgrade" / "local-status-before-schema-version.json").read_text())
    old = document["status"]
    assert "schemaVersion" not in old and old["phase"] == "Running" and old["progress"]["stage"] == "2/2"
    exp = parse_experiment({k: document[k] for k in ("apiVersion", "kind", "metadata", "spec")})
    writes, calls = run(exp, copy.deepcopy(old))
    assert calls == [("prepare", 0), ("stage", 0, 2), ("finish", 0)]
    final = writes[-1]
    assert final["phase"] == "Succeeded" and final["schemaVersion"] == STATUS_SCHEMA_VERSION
    stages = final["variants"][0]["stages"]
    assert stages[0] == old["variants"][0]["stages"][0]    # read, and written back, as it was
    assert [s["stage"] for s in stages] == [1, 2] and final["startedAt"] == old["startedAt"]
