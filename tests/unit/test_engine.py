"""The stage engine with a recording backend: what it writes into the status, in which order."""

import asyncio
import copy
import dataclasses
import json

import pytest
from locust.stats import RequestStats

from loadstage.api.load import parse_experiment
from loadstage.api.quantities import parse_duration
from loadstage.engine.backend import BlockingBackend
from loadstage.engine.errors import ExperimentFailed, StageDisrupted
from loadstage.engine.stages import STATUS_SCHEMA_VERSION, StageEngine, new_status
from loadstage.engine.steps import plan
from loadstage.locust.recorder import StageRecorder
from loadstage.locust.summary import build
from loadstage.results.measurement import StageMeasurement
from support.played import in_virtual_time, typed
from support.waiting import ROOT

PHASE_ORDER = {"Pending": 0, "Deploying": 1, "Running": 2, "Succeeded": 3}


class RecordingBackend:
    def __init__(self, disrupted=(), slower=None):
        self.calls = []
        self.disrupted = set(disrupted)   # run ids whose pods are taken away
        self.saved = []                   # run ids whose artifacts were read back
        self.slower = slower or {}        # run id: how much slower its requests are
        self.stored = {}                  # run id: artifact, as a cluster keeps it

    def discard_stage(self, step):
        self.calls.append(("discard", step.run_id))

    def prepare_variant(self, variant):
        self.calls.append(("prepare", variant.index))

    def run_stage(self, step):
        self.calls.append(("stage", step.variant.index, step.number) if step.attempt == step.repeat == 1
                          else ("stage", step.run_id))
        if step.run_id in self.disrupted:
            raise StageDisrupted(f"the Locust master pod of {step.run_id} was evicted")
        stats, recorder = RequestStats(), StageRecorder()
        for ms in range(1, 101):
            ms *= self.slower.get(step.run_id, 1)
            stats.log_request("GET", "/", ms, 10)
            recorder.record("GET", "/", ms)
        recorder.keep_unsent()
        headline, artifact = build(stats, recorder, injectors=step.stage.injectors)
        self.stored[step.run_id] = artifact
        return StageMeasurement(summary=headline, artifact=artifact, started_at="t0", finished_at="t1",
                                redis_peak_connections=3)

    def saved_artifacts(self, steps):
        self.saved.extend(s.run_id for s in steps)
        return [self.stored.get(s.run_id, {}) for s in steps]

    def finish_variant(self, variant):
        self.calls.append(("finish", variant.index))


def experiment(base_doc, stages=3, matrix=None):
    base_doc["spec"]["stages"] = [{"injectors": n, "duration": "10s"} for n in range(1, stages + 1)]
    if matrix:
        base_doc["spec"]["matrix"] = matrix
    return parse_experiment(base_doc)


def run(exp, status=None, disrupted=(), backend=None):
    writes = []
    backend = backend or RecordingBackend(disrupted)

    async def record(s):
        writes.append(s.to_status())
    in_virtual_time(StageEngine(exp, BlockingBackend(backend), on_update=record).run(typed(status)))
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
    assert all(PHASE_ORDER[a] <= PHASE_ORDER[b] for a, b in zip(["Running", *phases], phases)), phases
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
    assert stages[1]["retries"][0]["reason"] == "StageDisrupted"
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


class UnreportedBackend(RecordingBackend):
    """Its injectors' requests reached Locust's stats, but none of their histograms reached the master (as when a
    worker took itself for a standalone process: issue 35's start race)."""

    def run_stage(self, step):
        measured = super().run_stage(step)
        return dataclasses.replace(measured, summary={**measured.summary, "latencyMs": {
            **dict.fromkeys(("p50", "p90", "p95", "p99", "p999", "max")), "n": 0}})


def test_a_stage_whose_histograms_never_reached_the_master_fails_the_run_instead_of_passing_without_percentiles(
        base_doc):
    with pytest.raises(ExperimentFailed) as failed:
        run(experiment(base_doc), backend=UnreportedBackend())
    assert failed.value.reason == "ResultsLost"
    assert failed.value.message == ("variant 1/1 (gunicorn pods=1 workers=2 threads=2 gthread), stage 1/3: Locust "
                                    "counted 100 requests, but no injector's histograms reached its master")


def test_a_variants_headline_row_is_written_after_its_last_stage_and_a_failed_run_keeps_the_finished_ones(base_doc):
    exp = experiment(base_doc)
    writes, _ = run(exp)
    midway = [w["variants"][0] for w in writes if 0 < len(w["variants"][0].get("stages", [])) < 3]
    assert midway and not any("aggregate" in v for v in midway)   # it costs more with every stage: once a variant
    assert writes[-1]["variants"][0]["aggregate"]["requests"] == 300

    base_doc["spec"]["stageRetries"] = 0
    status = new_status(exp := experiment(base_doc))
    with pytest.raises(ExperimentFailed):
        run(exp, status, disrupted={"v1-s3"})
    assert status.to_status()["variants"][0]["aggregate"]["requests"] == 200   # stages 1 and 2


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


def test_interleaved_repeats_run_each_stage_of_every_variant_in_turn_with_a_warmup_on_each_fresh_target(base_doc):
    base_doc["spec"].update(repeats=2, order="Interleaved", warmup={"injectors": 1, "duration": "5s"})
    writes, calls = run(experiment(base_doc, stages=2, matrix={"threads": [1, 2]}))
    stages = [c[1] if c[1] != 0 and isinstance(c[1], str) else c for c in calls if c[0] == "stage"]
    assert stages == [("stage", 0, None), ("stage", 0, 1), ("stage", 1, None), ("stage", 1, 1),
                      ("stage", 0, None), ("stage", 0, 2), ("stage", 1, None), ("stage", 1, 2),
                      "v1-r2-w1", "v1-r2-s1", "v2-r2-w1", "v2-r2-s1",
                      "v1-r2-w2", "v1-r2-s2", "v2-r2-w2", "v2-r2-s2"]
    assert [c for c in calls if c[0] in ("prepare", "finish")] == [
        (kind, v) for v in (0, 1, 0, 1, 0, 1, 0, 1) for kind in ("prepare", "finish")]
    final = writes[-1]
    assert final["phase"] == "Succeeded"
    for variant in final["variants"]:
        assert [s["stage"] for s in variant["stages"]] == [1, 2]
        assert all(s["repeats"] == 2 and s["requests"] == 200 for s in variant["stages"])   # merged, not averaged
        assert [r["repeat"] for r in variant["repeats"]] == [1, 2]
        for repeat in variant["repeats"]:
            assert [h["stage"] for h in repeat["stages"]] == [1, 2]
            assert repeat["aggregate"]["requests"] == 200
            assert repeat["aggregate"]["rps"] == pytest.approx(sum(h["rps"] for h in repeat["stages"]) / 2, abs=1e-3)
        assert variant["aggregate"]["requests"] == 400
        assert "trimmedMean" not in variant["aggregate"]   # two repeats have no highest and lowest to drop
    where = ("variant", "repeat", "stage", "injectors")
    progress = [{k: w["progress"].get(k) for k in where} for w in writes if w["phase"] == "Running"]
    assert {"variant": "2/2", "repeat": "2/2", "stage": "1/2", "injectors": 1} in progress
    # the time left: the load still to come in the plan (8 stages), counting down to 0 at the end
    left = [w["progress"]["remainingSeconds"] for w in writes if w["phase"] == "Running"]
    assert left[0] >= 8 * parse_duration(base_doc["spec"]["stages"][0]["duration"]) - 1
    assert left == sorted(left, reverse=True) and final["progress"]["remainingSeconds"] == 0
    assert final["progress"]["remaining"] == "0s" and final["progress"]["eta"] <= final["finishedAt"]


def test_three_repeats_give_intervals_from_their_spread_and_the_studies_trimmed_mean(base_doc):
    base_doc["spec"].update(repeats=3)
    backend = RecordingBackend(slower={"v1-r2-s1": 1.2, "v1-r3-s1": 1.5})
    writes, _ = run(experiment(base_doc, stages=1), backend=backend)
    (stage,) = writes[-1]["variants"][0]["stages"]
    p50s = sorted(h["stages"][0]["latencyMs"]["p50"] for h in writes[-1]["variants"][0]["repeats"])
    assert p50s == pytest.approx([50, 60, 75], rel=1e-3)     # HDR buckets: 3 significant digits
    assert stage["repeats"] == 3 and stage["requests"] == 300
    assert stage["trimmedMean"]["p50"] == pytest.approx(60, rel=1e-3)     # the middle one: highest and lowest dropped
    intervals = stage["intervals"]
    assert intervals["method"] == "repeats" and intervals["repeats"] == 3
    lo, hi = intervals["p50"]
    geometric = (p50s[0] * p50s[1] * p50s[2]) ** (1 / 3)
    assert lo < 50 and hi > 75 and (lo * hi) ** 0.5 == pytest.approx(geometric, rel=1e-3)   # symmetric in log
    assert "p999" not in intervals                # 100 requests a repeat: too few for a p99.9
    assert stage["latencyMs"]["p50"] == pytest.approx(60, rel=1e-3)   # of all 300 requests together
    aggregate = writes[-1]["variants"][0]["aggregate"]
    assert aggregate["intervals"]["method"] == "repeats"
    assert aggregate["trimmedMean"]["p50"] == pytest.approx(60, rel=1e-3)


def test_a_random_order_shuffles_whole_ladders_by_its_seed_and_keeps_the_seed_it_chose(base_doc):
    base_doc["spec"].update(repeats=3, order="Random")
    exp = experiment(base_doc, stages=2, matrix={"threads": [1, 2]})
    writes, calls = run(exp)
    seed = writes[-1]["seed"]
    ran = [c[1] if isinstance(c[1], str) else f"v{c[1] + 1}-s{c[2]}" for c in calls if c[0] == "stage"]
    ladders = [ran[i][:-3] or ran[i] for i in range(0, len(ran), 2)]
    assert all(ran[i].endswith("s1") and ran[i + 1].endswith("s2") for i in range(0, len(ran), 2)), ran
    assert sorted(ladders) == sorted(["v1", "v1-r2", "v1-r3", "v2", "v2-r2", "v2-r3"])
    assert [s.run_id for s in plan(exp, seed)] == ran
    orders = {tuple(s.run_id for s in plan(exp, s)) for s in range(20)}
    assert len(orders) > 10                       # the seed decides
    base_doc["spec"]["seed"] = 7
    writes, calls = run(parse_experiment(base_doc))
    assert writes[-1]["seed"] == 7 and [s.run_id for s in plan(parse_experiment(base_doc), 7)] == \
        [c[1] if isinstance(c[1], str) else f"v{c[1] + 1}-s{c[2]}" for c in calls if c[0] == "stage"]


def test_a_run_of_repeats_resumed_after_a_restart_runs_only_what_is_left_and_reads_back_what_it_merges(base_doc):
    base_doc["spec"].update(repeats=3, order="Random", seed=3)
    exp = experiment(base_doc, stages=2)
    first = RecordingBackend()
    writes, calls = run(exp, backend=first)
    order = [s.run_id for s in plan(exp, 3)]
    def done(w):
        return sum(len(r["stages"]) for r in w["variants"][0].get("repeats", []))
    in_flight = copy.deepcopy(next(w for w in writes if w["message"].startswith("running") and done(w) == 3))
    backend = RecordingBackend()
    backend.stored = {k: v for k, v in first.stored.items() if k in order[:3]}
    resumed, calls = run(exp, in_flight, backend=backend)
    ran = [c[1] if isinstance(c[1], str) else f"v1-s{c[2]}" for c in calls if c[0] == "stage"]
    assert ran == order[3:]
    assert backend.saved and set(backend.saved) <= set(order[:3])   # the earlier repeats' artifacts, read back
    final = resumed[-1]["variants"][0]
    assert [(s["requests"], s["repeats"]) for s in final["stages"]] == [(300, 3), (300, 3)]
    assert without_rates(final) == without_rates(writes[-1]["variants"][0])    # as if it had never stopped


def without_rates(value):
    """The recording backend's Locust stats take their rate from the wall clock (and Little's law from the rate)."""
    if isinstance(value, dict):
        return {k: without_rates(v) for k, v in value.items() if k not in ("rps", "inFlight")}
    return [without_rates(v) for v in value] if isinstance(value, list) else value


def test_every_status_field_the_engine_writes_is_in_the_crds_status_schema(base_doc):
    """The API server prunes what a structural schema does not declare: a field missing there is lost."""
    from loadstage.api.conformance import violations
    from loadstage.api.crd import status_schema
    base_doc["spec"].update(repeats=3, order="Random", warmup={"injectors": 1, "duration": "5s"},
                            thresholds={"p99": "1s"})
    writes, _ = run(experiment(base_doc, stages=2, matrix={"threads": [1, 2]}))

    missing = {p for w in writes for p in violations(status_schema(), w, "status")}
    assert not missing, missing
    assert {"seed", "warmedUp"} <= set(writes[-1]) and any("repeat" in w.get("progress", {}) for w in writes)


class SlowBackend(BlockingBackend):
    """A backend whose stage takes its whole duration without blocking the event loop, as the operator's does."""

    async def run_stage(self, step):
        await asyncio.sleep(step.stage.duration)
        return self.backend.run_stage(step)


def test_a_running_stages_time_left_is_rewritten_while_it_runs_and_a_failed_write_does_not_fail_it(base_doc):
    """A 10-minute stage in virtual time: the time left is rewritten every PROGRESS_REFRESH_SECONDS (60 s)."""
    writes, failed = [], []

    async def record(s):
        if len(writes) == 3 and not failed:
            failed.append(True)
            raise ConnectionError("the API server is away")
        writes.append(s.to_status())
    base_doc["spec"]["stages"] = [{"injectors": 1, "duration": "10m"}]
    in_virtual_time(StageEngine(parse_experiment(base_doc), SlowBackend(RecordingBackend()), on_update=record).run())
    running = [w["progress"] for w in writes if w["phase"] == "Running" and w["progress"]["stage"] == "1/1"]
    assert failed
    # one write as the stage starts, then one a minute (the one at 2 min failed); the stage's result carries the last
    assert [p["remainingSeconds"] for p in running] == [600, 540, 420, 360, 300, 240, 180, 120, 60, 60], running
    assert writes[-1]["phase"] == "Succeeded" and len(writes[-1]["variants"][0]["stages"]) == 1
