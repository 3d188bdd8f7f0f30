"""Summary size, thresholds, capacity, command lines and the results table: pure functions."""

import copy
import dataclasses
import itertools
import math
import random

import pytest
from locust.stats import RequestStats

from loadstage.api.load import parse_experiment
from loadstage.api.status import RunStatus, StageResult, TargetPodHealth, VariantRecord
from loadstage.engine.steps import Step
from loadstage.launch import argv as commands
from loadstage.locust.recorder import StageRecorder
from loadstage.locust.summary import build
from loadstage.reports.csv import render_csv
from loadstage.reports.terminal import render_capacity, render_report, render_status, render_table
from loadstage.results.artifact import Artifact
from loadstage.results.measurement import StageMeasurement
from loadstage.results.saturation import REMEDIES
from loadstage.results.stage_results import p99_pivot, stage_result, variant_aggregate
from loadstage.results.thresholds import capacity, verdict
from support.documents import BASE


def experiment(**spec):
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec)
    return parse_experiment(doc)


def _measured(requests=1000, failures=0, p99=120.0, injector_bound=False):
    latency = {"p50": 10.0, "p90": 40.0, "p95": 60.0, "p99": p99, "p999": p99 * 2, "max": p99 * 3,
               "n": requests, "p999Reliable": requests >= 1000}
    return StageMeasurement(
        summary={"requests": requests, "failures": failures, "rps": requests / 10, "meanMs": 20.0,
                 "latencyMs": latency, "injectorPeakCpuPercent": 97.0 if injector_bound else 35.0,
                 "injectorBound": injector_bound,
                 "byMethod": {"GET": {"requests": requests, "failures": failures, "meanMs": 20.0,
                                      "latencyMs": latency}}},
        started_at="t0", finished_at="t1", redis_peak_connections=12)


def test_stage_result_applies_thresholds():
    e = experiment(thresholds={"p99": "100ms", "errorRate": "1%"},
                   stages=[{"injectors": n, "duration": "10s"} for n in (1, 2, 3)])
    ok = stage_result(e, 1, e.spec.stages[0], _measured(p99=90))
    slow = stage_result(e, 2, e.spec.stages[1], _measured(p99=250))
    failing = stage_result(e, 3, e.spec.stages[2], _measured(failures=30, p99=90))
    assert ok.to_status()["verdict"] == {"passed": True, "violations": []}
    assert slow.to_status()["verdict"] == {"passed": False, "violations": ["p99 250ms > 100ms"]}
    assert failing.to_status()["verdict"] == {"passed": False, "violations": ["error rate 3.00% > 1.00%"]}
    assert failing.error_rate == 0.03
    assert capacity([ok, slow, failing]).injectors == 1
    assert capacity([slow, failing]) is None


def test_a_stage_without_requests_fails_every_threshold():
    e = experiment(thresholds={"errorRate": "5%"})
    empty = _measured(requests=0)
    empty.summary["latencyMs"] = dict.fromkeys(empty.summary["latencyMs"])
    assert verdict(stage_result(e, 1, e.spec.stages[0], empty), e.spec.thresholds).violations == (
        "no requests were made",)


def _ladder(*steps):
    return [StageResult.from_status({"stage": i, "injectors": n, "users": n * 10, "rps": n * 100.0, "requests": 1,
                                     "failures": 0, "latencyMs": {}, "injectorBound": bound,
                                     "verdict": {"passed": ok, "violations": []}})
            for i, (n, ok, bound) in enumerate(steps, 1)]


def run_of(variants):
    return RunStatus("Succeeded", "", None, None, variants, [])


def test_capacity_is_the_knee_the_last_stage_before_the_first_failure():
    stages = _ladder((10, True, False), (15, True, False), (20, False, False), (25, True, False), (30, False, False))
    assert capacity(stages).to_status() == {
        "stage": 2, "injectors": 15, "users": 150, "rps": 1500.0, "firstFailedStage": 3,
        "limitedBy": {"resource": "Unknown", "cliff": False, "remedy": REMEDIES["Unknown"],
                      "evidence": "nothing crossed its threshold at stage 3 (20 injectors, 200 users): no signal was "
                                  "measured"}}
    assert capacity(_ladder((10, True, False), (15, True, False))).first_failed_stage is None
    assert capacity(_ladder((10, False, False), (15, True, False))) is None


def test_an_injector_bound_stage_never_counts_toward_capacity():
    stages = _ladder((10, True, False), (15, True, True), (20, True, False), (25, False, False))
    assert capacity(stages).injectors == 20
    assert capacity(_ladder((10, True, False), (15, True, True))).injectors == 10
    assert capacity(_ladder((10, True, True))) is None


def test_a_stage_whose_target_restarted_is_flagged_in_every_table_and_never_counts_toward_capacity():
    e = experiment(matrix={"threads": [2, 3]}, thresholds={"p99": "500ms"},
                   stages=[{"injectors": n, "duration": "10s"} for n in (10, 15)])
    restarted = (TargetPodHealth("runner-7d9-abcde", 3, 41.5, ("Error (exit 137)", "Container runner failed "
                                 "liveness probe, will be restarted")),)
    variants = []
    for v in e.variants():
        stages = []
        for i, s in enumerate(e.spec.stages):
            m = _measured(p99=100 + 50 * i)
            m.summary["servedRequests"] = 1000
            if v.index == 0 and i == 1:
                m = dataclasses.replace(m, target_pods=restarted)
            stages.append(stage_result(e, i + 1, s, m))
        variants.append(VariantRecord(v.index, v.settings(), stages, judged=True, capacity=capacity(stages),
                                      aggregate=variant_aggregate(stages, [Artifact()] * len(stages))))
    steady, unsteady = variants[0].stages
    assert unsteady.to_status()["target"] == {
        "peakCpuCores": None, "peakMemoryBytes": None, "servedRequests": None, "restarts": 3,
        "unreadySeconds": 41.5, "pods": [{"pod": "runner-7d9-abcde", "restarts": 3, "unreadySeconds": 41.5,
                                          "causes": ["Error (exit 137)",
                                                     "Container runner failed liveness probe, will be restarted"]}]}
    assert steady.target.served_requests == 1000 and steady.target.unsteady() is None
    assert variants[0].capacity.stage == 1 and variants[1].capacity.stage == 2

    run = RunStatus("Succeeded", "", None, None, variants, p99_pivot(variants))
    report = render_report(run)
    stage_table = report.split("\n\n")[0].splitlines()
    assert stage_table[0].split("|")[-2].strip() == "Target"
    assert [c.strip() for c in stage_table[3].split("|")][:2] == ["threads=2", "15†"]
    assert "3 restart(s), 41.5 s unready" in stage_table[3]
    assert stage_table[2].split("|")[-2].strip() == "steady"
    headline = report.split("Per variant, over all its stages:\n")[1].splitlines()
    assert headline[2].startswith("threads=2†") and headline[3].startswith("threads=3 ")
    pivot = report.split("99th percentile per stage (ms):\n")[1].splitlines()
    assert pivot[3].split("|")[-2].strip() == "150†" and not pivot[3].rstrip().endswith("†")
    assert "† the target was not steady during the stage" in report
    lines = render_status(run).splitlines()
    assert ("variant 1 stage 2: target 3 restart(s), 41.5 s unready (runner-7d9-abcde: 3 restart(s), "
            "Error (exit 137), Container runner failed liveness probe, will be restarted, 41.5 s unready)") in lines


def test_master_and_worker_command_lines():
    e = experiment(injectors={"usersPerInjector": 200, "spawnRatePerInjector": 50,
                              "waitTime": {"min": "500ms", "max": "2s"}},
                   stages=[{"injectors": 10, "duration": "90s"}])
    argv = commands.locust_master_command(e, e.spec.stages[0], host="http://runner:8000",
                                          summary_file="/dev/termination-log", artifact_file="-",
                                          target_metrics=["http://a:1/metrics", "http://b:2/metrics"])
    opts = dict(itertools.pairwise(argv))
    assert argv[0] == "locust" and "--master" in argv and "--headless" in argv
    assert opts["-f"] == "injectors/loadstage_results.py,injectors/respondent.py"
    assert (opts["--expect-workers"], opts["--users"], opts["--spawn-rate"]) == ("10", "2000", "500")
    assert (opts["--stage-seconds"], opts["--host"]) == ("90", "http://runner:8000")
    assert opts["--run-time"] == "150s"  # Locust's own limit is only a backstop
    assert (opts["--wait-min"], opts["--wait-max"]) == ("0.5", "2")
    assert opts["--summary-file"] == "/dev/termination-log"
    assert opts["--target-metrics"] == "http://a:1/metrics,http://b:2/metrics"
    assert opts["--master-bind-host"] == "*"
    assert opts["--artifact-file"] == "-" and "--pacing" not in opts
    local = commands.locust_master_command(e, e.spec.stages[0], host="http://127.0.0.1:8000", summary_file="s",
                                           artifact_file="a.json", target_metrics=[], bind_host="127.0.0.1")
    assert local[local.index("--master-bind-host") + 1] == "127.0.0.1"
    paced = experiment(injectors={"pacing": "250ms"})
    paced_argv = commands.locust_master_command(paced, paced.spec.stages[0], host="h", summary_file="s",
                                                artifact_file="a", target_metrics=[])
    assert paced_argv[paced_argv.index("--pacing") + 1] == "0.25" and "--arrival-rate" not in paced_argv
    opened = experiment(injectors={"maxUsersPerInjector": 40}, stages=[{"arrivalRate": 1200, "duration": "30s"}])
    open_argv = commands.locust_master_command(opened, opened.spec.stages[0], host="h", summary_file="s",
                                               artifact_file="a", target_metrics=[])
    open_opts = dict(itertools.pairwise(open_argv))
    # 3 injectors (1200 / 500 a second each at most), each with a pool of 40 users, all started at once
    assert (open_opts["--arrival-rate"], open_opts["--expect-workers"]) == ("1200", "3")
    assert (open_opts["--users"], open_opts["--spawn-rate"]) == ("120", "120")
    worker = commands.locust_worker_command(e, master_host="lx-master")
    assert worker[worker.index("--master-host") + 1] == "lx-master" and "--worker" in worker


def test_custom_locustfile_replaces_the_scenario_but_keeps_the_results_extension():
    e = experiment(injectors={"locustfile": {"path": "/abs/mine.py"}})
    assert commands.locustfiles(e, "/abs/mine.py") == "injectors/loadstage_results.py,/abs/mine.py"


def test_runner_environment_names_redis_and_the_metrics_directory():
    e = experiment(target={"workers": 7, "threads": 3, "env": {"FEATURE": "on"}})
    env = commands.runner_env(e, e.variants()[0], redis_url="redis://r:6379/0", metrics_dir="/tmp/m")
    assert env == {"FEATURE": "on", "REDIS_URL": "redis://r:6379/0", "PROMETHEUS_MULTIPROC_DIR": "/tmp/m"}


def test_an_asgi_variant_serves_the_asgi_runner_app_with_its_threads_as_the_sync_pool():
    e = experiment(matrix={"server": ["gunicorn", "uvicorn", "granian"], "workerClass": ["gthread", "uvicorn"],
                           "threads": [3]}, target={"interface": "asgi"})
    by_label = {(v.server, v.worker_class): v for v in e.variants()}
    assert set(by_label) == {("gunicorn", "gthread"), ("gunicorn", "uvicorn"), ("uvicorn", None), ("granian", None)}
    for (server, klass), variant in by_label.items():
        asgi = klass == "uvicorn" or server in ("uvicorn", "granian")
        argv = commands.runner_command(e, variant, binds=["0.0.0.0:8000"])
        assert argv[-1] == ("runner_app.asgi:app" if asgi else "runner_app.app:app"), argv
        env = commands.runner_env(e, variant, redis_url=None, metrics_dir="/tmp/m")
        assert env.get("LOADSTAGE_SYNC_THREADS") == ("3" if asgi else None)
    assert "uvicorn_worker.UvicornWorker" in commands.runner_command(e, by_label["gunicorn", "uvicorn"],
                                                                      binds=["0.0.0.0:8000"])
    granian = commands.runner_command(e, by_label["granian", None], binds=["0.0.0.0:8000"])
    # granian's ASGI interface takes one blocking thread; the threads are the app's pool
    assert granian[granian.index("--interface") + 1] == "asgi" and \
        granian[granian.index("--blocking-threads") + 1] == "1"
    wsgi = experiment(target={"server": "granian", "threads": 3})
    granian = commands.runner_command(wsgi, wsgi.variants()[0], binds=["0.0.0.0:8000"])
    assert (granian[granian.index("--interface") + 1], granian[granian.index("--blocking-threads") + 1],
            granian[-1]) == ("wsgi", "3", "runner_app.app:app")


def test_step_labels_name_variant_and_stage():
    e = experiment(matrix={"threads": [2, 7]}, warmup={"injectors": 1, "duration": "5s"})
    v = e.variants()[1]
    assert Step(v, 2, e.spec.stages[0], 1, 1).label() == \
        "variant 2/2 (gunicorn pods=1 workers=2 threads=7 gthread), stage 1/1"
    assert Step(v, 2, e.spec.warmup, None, 1).label().endswith("warm-up")


def test_table_has_the_seed_columns_one_row_per_stage_and_variant():
    e = experiment(matrix={"threads": [2, 3]}, thresholds={"p99": "100ms"},
                   stages=[{"injectors": n, "duration": "10s"} for n in (10, 15)])
    variants = []
    for v in e.variants():
        stages = [stage_result(e, i + 1, s, _measured(requests=2_956_643, p99=80 + 40 * i, injector_bound=i == 0))
                  for i, s in enumerate(e.spec.stages)]
        variants.append(VariantRecord(v.index, v.settings(), stages, judged=True, capacity=capacity(stages)))
    status = run_of(variants)
    lines = render_table(status).splitlines()
    assert [c.strip() for c in lines[0].split("|")] == [
        "Variant", "Injectors", "Users", "50th", "90th", "95th", "99th", "99.9th", "GETs avg", "GETs p99",
        "POSTs avg", "POSTs p99", "Total Requests", "Redis peak", "Verdict"]
    assert len(lines) == 2 + 4
    assert [c.strip() for c in lines[3].split("|")][:3] == ["threads=2", "15", "150"]
    assert "2,956,643" in lines[2] and "FAIL: p99 120ms > 100ms" in lines[3]
    assert lines[2].endswith("pass (injector-bound)")
    # its figures carry the mark in every table, and the report says what it means
    assert [c.strip() for c in lines[2].split("|")][1] == "10‡" and "‡" not in lines[3]
    report = render_status(status)
    assert report.count(" 10‡ |") == 4 and "‡ injector-bound: an injector's CPU went over 90%" in report
    assert render_capacity(status)[0].endswith("none; stage 1 passed, but its injectors were CPU-bound")


def test_the_report_shows_errors_and_the_targets_cpu_rss_and_redis_peak_per_server_and_stage():
    e = experiment(matrix={"server": ["gunicorn", "waitress"]}, stages=[{"users": 50, "duration": "10s"}])
    variants = []
    for v in e.variants():
        measured = _measured(requests=12_345, failures=7 * v.index)
        measured = dataclasses.replace(measured, target_peak_cpu_cores=0.5 + v.index,
                                       target_peak_memory_bytes=(100 + v.index) * 2**20)
        variants.append(VariantRecord(v.index, v.settings(), [stage_result(e, 1, e.spec.stages[0], measured)]))
    text = render_report(run_of(variants))
    table = text.split("Errors and target resources per stage (peaks while the stage ran):\n")[1].splitlines()
    assert [c.strip() for c in table[0].split("|")] == [
        "Variant", "Injectors", "Users", "Requests", "req/s", "Errors", "Error rate", "Target CPU (cores)",
        "Target RSS (MiB)", "Redis peak"]
    assert [[c.strip() for c in line.split("|")] for line in table[2:4]] == [
        ["server=gunicorn workers=2 workerClass=gthread", "1", "50", "12,345", "1,234", "0", "0.00%", "0.50", "100",
         "12"],
        ["server=waitress workers=1", "1", "50", "12,345", "1,234", "7", "0.06%", "1.50", "101", "12"]]


def _recorded_stage(rng, scale, count):
    """A real stage: samples recorded as an injector would, built as the master would."""
    stats, recorder = RequestStats(), StageRecorder()
    samples = []
    for i in range(count):
        ms = rng.lognormvariate(scale, 0.6)
        method = "GET" if i % 3 else "POST"
        stats.log_request(method, "/page", ms, 10)
        recorder.record(method, "/page", ms)
        samples.append(ms)
    recorder.keep_unsent()
    return (*build(stats, recorder, injectors=1), samples)


def test_a_variants_headline_row_is_computed_from_all_its_stages_histograms_never_averaged():
    e = experiment(matrix={"threads": [2, 7]}, stages=[{"injectors": n, "duration": "10s"} for n in (10, 15, 20)])
    rng = random.Random(7)
    variants = []
    for v in e.variants():
        stages, artifacts, everything = [], [], []
        for i, stage in enumerate(e.spec.stages):
            headline, artifact, samples = _recorded_stage(rng, 2 + i + v.index, 3000 * (i + 1))
            stages.append(stage_result(e, i + 1, stage, StageMeasurement(
                summary=headline, artifact=artifact, started_at="t0", finished_at="t1",
                redis_peak_connections=10 * (i + 1))))
            artifacts.append(Artifact.from_artifact(artifact))
            everything += samples
        aggregate = variant_aggregate(stages, artifacts)
        truth = sorted(everything)[math.ceil(0.99 * len(everything)) - 1]
        assert abs(aggregate.latency.p99 - truth) / truth <= 0.001
        averaged = sum(s.latency.p99 * s.requests for s in stages) / aggregate.requests
        assert abs(averaged - truth) / truth > 0.05   # the spreadsheet method is visibly wrong here
        assert aggregate.requests == len(everything) == aggregate.latency.n
        assert aggregate.redis_peak_connections == 30
        gets = [ms for i, ms in enumerate(everything) if i % 3]
        assert aggregate.by_method["GET"].requests + aggregate.by_method["POST"].requests == len(everything)
        assert aggregate.by_method["GET"].p99_ms <= aggregate.latency.max
        assert aggregate.by_method["GET"].mean_ms == pytest.approx(
            sum(s.by_method["GET"].mean_ms * s.by_method["GET"].requests for s in stages)
            / aggregate.by_method["GET"].requests, rel=1e-4)
        assert len(gets) > 0
        variants.append(VariantRecord(v.index, v.settings(), stages, aggregate=aggregate))
    pivot_rows = p99_pivot(variants)
    assert [r.injectors for r in pivot_rows] == [10, 15, 20]
    assert pivot_rows[1].p99_ms_by_variant == tuple(v.stages[1].latency.p99 for v in variants)
    status = RunStatus("Succeeded", "", None, None, variants, pivot_rows)
    report = render_report(status)
    assert "Per variant, over all its stages:" in report and "99th percentile per stage (ms):" in report
    headline = report.split("Per variant, over all its stages:\n")[1].splitlines()
    assert [c.strip() for c in headline[0].split("|")] == [
        "Variant", "50th", "90th", "95th", "99th", "99.9th", "GETs avg", "POSTs avg", "Total Requests", "Redis peak"]
    assert headline[2].startswith("threads=2") and f"{variants[0].aggregate.requests:,}" in headline[2]
    pivot = report.split("99th percentile per stage (ms):\n")[1].split("\n\n")[0].splitlines()
    assert [c.strip() for c in pivot[0].split("|")] == ["Injectors", "Users", "threads=2", "threads=7"]
    assert len(pivot) == 2 + 3


def test_a_stage_whose_master_fell_behind_says_so_in_its_status_its_table_and_its_csv():
    e = experiment(stages=[{"injectors": 1000, "duration": "10s"}])
    measured = _measured()
    measured.summary.update(masterLagSeconds=7.25, masterBound=True)
    behind = stage_result(e, 1, e.spec.stages[0], measured)
    assert behind.to_status()["masterLagSeconds"] == 7.25 and behind.to_status()["masterBound"] is True
    assert StageResult.from_status(behind.to_status()) == behind
    on_time = stage_result(e, 1, e.spec.stages[0], _measured())
    assert "masterBound" not in on_time.to_status()
    status = run_of([VariantRecord(1, e.variants()[0].settings(), [behind], judged=False, capacity=None)])
    lines = render_table(status).splitlines()
    assert lines[0].split("|")[-1].strip() == "Verdict" and lines[2].endswith("- (master behind)")
    assert "master behind: the Locust master merged a worker's report more than a report interval" \
        in render_status(status)
    assert "masterLagSeconds,masterBound" in render_csv(e, status).splitlines()[0]
    assert ",7.25,true," in render_csv(e, status).splitlines()[1]


def test_tasks_that_raised_count_as_failed_requests_are_marked_in_the_tables_and_named_last():
    e = experiment(thresholds={"errorRate": "1%"}, stages=[{"injectors": n, "duration": "10s"} for n in (1, 2)],
                   repeats=1)
    raising = _measured(requests=1000)
    raising.summary["exceptions"] = {"count": 1000, "top": [{"message": "ValueError: no survey", "count": 990},
                                                            {"message": "KeyError: 'id'", "count": 10}]}
    quiet = _measured(requests=1000)
    stages = [stage_result(e, 1, e.spec.stages[0], quiet), stage_result(e, 2, e.spec.stages[1], raising)]
    assert stages[0].error_rate == 0.0 and stages[0].exceptions is None and "exceptions" not in stages[0].to_status()
    raised = stages[1]
    assert raised.error_rate == 0.5                   # 1,000 requests that passed, 1,000 tasks that raised
    assert raised.verdict.violations == ("error rate 50.00% > 1.00%",)
    assert raised.to_status()["exceptions"] == raising.summary["exceptions"]
    assert StageResult.from_status(raised.to_status()) == raised
    aggregate = variant_aggregate(stages, [Artifact()] * 2)
    assert (aggregate.exceptions, aggregate.error_rate) == (1000, round(1000 / 3000, 6))
    assert raised.headline().exceptions == 1000 and raised.headline().error_rate == 0.5

    run = run_of([VariantRecord(0, {}, stages, judged=True, capacity=capacity(stages), aggregate=aggregate)])
    report = render_report(run)
    assert [row.split("|")[0].strip() for row in report.split("\n\n")[0].splitlines()[2:]] == ["1", "2§"]
    assert "§ its tasks raised exceptions (Locust logs them and goes on)" in report
    assert render_status(run).splitlines()[-1] == ("variant 1 stage 2: 1,000 exception(s) in tasks, most often "
                                                   "ValueError: no survey (990); KeyError: 'id' (10)")
    rows = render_csv(e, run).splitlines()
    header, second = rows[0].split(","), rows[2].split(",")
    assert second[header.index("exceptions")] == "1000" and second[header.index("errorRate")] == "0.5"
    assert rows[2].endswith("ValueError: no survey (990); KeyError: 'id' (10)")


@pytest.mark.parametrize("requests, failures, said", [(0, 0, "no request completed"),
                                                      (500, 500, "every request failed")])
def test_a_stage_where_nothing_succeeded_is_named_last(requests, failures, said):
    e = experiment()
    m = _measured(requests=requests, failures=failures)
    stage = stage_result(e, 1, e.spec.stages[0], m)
    assert stage.nothing_succeeded() == said
    run = run_of([VariantRecord(0, {}, [stage], judged=False)])
    assert render_status(run).splitlines()[-1] == f"variant 1 stage 1: {said}"
