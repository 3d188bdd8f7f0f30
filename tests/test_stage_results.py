"""Summary size, thresholds, capacity, command lines and the results table: pure functions."""

import copy
import json

from locust.stats import RequestStats

from loadstage import commands
from loadstage.engine import Step
from loadstage.model import parse_experiment
from loadstage.report import render_capacity, render_table
from loadstage.results import StageMeasurement, stage_result
from loadstage.summary import TERMINATION_MESSAGE_LIMIT, encode, summarize
from loadstage.thresholds import capacity, verdict

from conftest import BASE


def experiment(**spec):
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec)
    return parse_experiment(doc)


def test_summary_fits_a_termination_message_and_says_what_it_dropped():
    stats = RequestStats()
    for i in range(200):
        for rt in (5, 50, 500):
            stats.log_request("GET", f"/a/very/long/endpoint/name/number/{i:04d}", rt, 10)
    summary = summarize(stats, injectors=4)
    assert len(encode(summary)) <= TERMINATION_MESSAGE_LIMIT
    assert summary["endpointsOmitted"] + len(summary["endpoints"]) == 200
    assert summary["endpointsOmitted"] > 0
    assert summary["requests"] == 600 and summary["injectors"] == 4


def _measured(requests=1000, failures=0, p99=120.0):
    latency = {"p50": 10.0, "p90": 40.0, "p95": 60.0, "p99": p99, "p999": p99 * 2, "max": p99 * 3}
    return StageMeasurement(
        summary={"requests": requests, "failures": failures, "rps": requests / 10, "latencyMs": latency,
                 "byMethod": {"GET": {"requests": requests, "failures": failures, "latencyMs": latency}},
                 "endpoints": [], "errors": []},
        started_at="t0", finished_at="t1", redis_peak_connections=12)


def test_stage_result_applies_thresholds():
    e = experiment(thresholds={"p99": "100ms", "errorRate": "1%"},
                   stages=[{"injectors": n, "duration": "10s"} for n in (1, 2, 3)])
    ok = stage_result(e, 1, e.spec.stages[0], _measured(p99=90))
    slow = stage_result(e, 2, e.spec.stages[1], _measured(p99=250))
    failing = stage_result(e, 3, e.spec.stages[2], _measured(failures=30, p99=90))
    assert ok["verdict"] == {"passed": True, "violations": []}
    assert slow["verdict"] == {"passed": False, "violations": ["p99 250ms > 100ms"]}
    assert failing["verdict"] == {"passed": False, "violations": ["error rate 3.00% > 1.00%"]}
    assert failing["errorRate"] == 0.03
    assert capacity([ok, slow, failing])["injectors"] == 1
    assert capacity([slow, failing]) is None


def test_a_stage_without_requests_fails_every_threshold():
    e = experiment(thresholds={"errorRate": "5%"})
    empty = _measured(requests=0)
    empty.summary["latencyMs"] = dict.fromkeys(empty.summary["latencyMs"])
    assert verdict(stage_result(e, 1, e.spec.stages[0], empty), e.spec.thresholds)["violations"] == [
        "no requests were made"]


def test_capacity_is_the_highest_stage_that_met_every_threshold():
    stages = [{"stage": i, "injectors": n, "users": n * 10, "rps": n * 100.0,
               "verdict": {"passed": ok, "violations": []}}
              for i, (n, ok) in enumerate([(10, True), (15, True), (20, False), (25, True), (30, False)], 1)]
    assert capacity(stages) == {"stage": 4, "injectors": 25, "users": 250, "rps": 2500.0}


def test_master_and_worker_command_lines():
    e = experiment(injectors={"usersPerInjector": 200, "spawnRatePerInjector": 50,
                              "waitTime": {"min": "500ms", "max": "2s"}},
                   stages=[{"injectors": 10, "duration": "90s"}])
    argv = commands.locust_master_command(e, e.spec.stages[0], host="http://runner:8000",
                                          summary_file="/dev/termination-log",
                                          target_metrics=["http://a:1/metrics", "http://b:2/metrics"])
    opts = dict(zip(argv, argv[1:]))
    assert argv[0] == "locust" and "--master" in argv and "--headless" in argv
    assert opts["-f"] == "injectors/loadstage_results.py,injectors/respondent.py"
    assert (opts["--expect-workers"], opts["--users"], opts["--spawn-rate"]) == ("10", "2000", "500")
    assert (opts["--stage-seconds"], opts["--host"]) == ("90", "http://runner:8000")
    assert opts["--run-time"] == "150s"  # Locust's own limit is only a backstop
    assert (opts["--wait-min"], opts["--wait-max"]) == ("0.5", "2")
    assert opts["--summary-file"] == "/dev/termination-log"
    assert opts["--target-metrics"] == "http://a:1/metrics,http://b:2/metrics"
    assert opts["--master-bind-host"] == "*"
    local = commands.locust_master_command(e, e.spec.stages[0], host="http://127.0.0.1:8000", summary_file="s",
                                           target_metrics=[], bind_host="127.0.0.1")
    assert local[local.index("--master-bind-host") + 1] == "127.0.0.1"
    worker = commands.locust_worker_command(e, master_host="lx-master")
    assert worker[worker.index("--master-host") + 1] == "lx-master" and "--worker" in worker


def test_custom_locustfile_replaces_the_scenario_but_keeps_the_results_extension():
    e = experiment(injectors={"locustfile": {"path": "/abs/mine.py"}})
    assert commands.locustfiles(e, "/abs/mine.py") == "injectors/loadstage_results.py,/abs/mine.py"


def test_runner_environment_configures_gunicorn():
    e = experiment(target={"gunicorn": {"workers": 7, "threads": 3, "workerClass": "gthread"},
                           "env": {"FEATURE": "on"}})
    v = e.variants()[0]
    env = commands.runner_env(e, v, binds=["0.0.0.0:8000"], redis_url="redis://r:6379/0", metrics_dir="/tmp/m")
    assert env["GUNICORN_CMD_ARGS"] == ("--bind 0.0.0.0:8000 --workers 7 --threads 3 --worker-class gthread"
                                       " --no-control-socket")
    assert env["FEATURE"] == "on" and env["REDIS_URL"] == "redis://r:6379/0"
    assert commands.runner_command(e) == ["gunicorn", "--config", "python:runner_app.gunicorn_conf",
                                          "runner_app.app:app"]


def test_step_labels_name_variant_and_stage():
    e = experiment(matrix={"threads": [2, 7]}, warmup={"injectors": 1, "duration": "5s"})
    v = e.variants()[1]
    assert Step(v, 2, e.spec.stages[0], 1, 1).label() == \
        "variant 2/2 (pods=1 workers=2 threads=7 gthread), stage 1/1"
    assert Step(v, 2, e.spec.warmup, None, 1).label().endswith("warm-up")


def test_table_has_the_seed_columns_one_row_per_stage_and_variant():
    e = experiment(matrix={"threads": [2, 3]}, thresholds={"p99": "100ms"},
                   stages=[{"injectors": n, "duration": "10s"} for n in (10, 15)])
    status = {"variants": []}
    for v in e.variants():
        stages = [stage_result(e, i + 1, s, _measured(requests=2_956_643, p99=80 + 40 * i))
                  for i, s in enumerate(e.spec.stages)]
        status["variants"].append({"index": v.index, "settings": v.settings(), "stages": stages,
                                   "capacity": capacity(stages)})
    lines = render_table(status).splitlines()
    assert [c.strip() for c in lines[0].split("|")] == [
        "Variant", "Injectors", "50th", "90th", "95th", "99th", "99.9th", "GETs p99", "POSTs p99",
        "Total Requests", "Redis peak", "Verdict"]
    assert len(lines) == 2 + 4
    assert [c.strip() for c in lines[3].split("|")][:2] == ["threads=2", "15"]
    assert "2,956,643" in lines[2] and "FAIL: p99 120ms > 100ms" in lines[3]
    assert render_capacity(status)[0].endswith("10 injectors, 100 users, 295664 req/s (stage 1)")
    json.dumps(status)
