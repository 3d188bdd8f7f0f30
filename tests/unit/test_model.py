import copy
import itertools

import pytest

from loadstage.api.crd import build_crd
from loadstage.api.load import load_experiment_file, parse_experiment
from loadstage.api.quantities import cpu_cores, format_duration, memory_bytes, parse_duration
from loadstage.api.schema import ValidationError
from loadstage.api.types import Stage
from support.documents import BASE
from support.invalid_documents import BASES, CASES, EDGES, KEYS, case_document, within
from support.waiting import ROOT


def with_spec(**spec):
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec)
    return doc


def problems(doc):
    with pytest.raises(ValidationError) as e:
        parse_experiment(doc)
    return [f"{p}: {m}" for p, m in e.value.problems]


def test_defaults_fill_a_minimal_experiment():
    e = parse_experiment(copy.deepcopy(BASE))
    assert e.spec.target.pods == 1
    assert e.spec.target.app == "runner_app.app:app"
    (v,) = e.variants()
    assert (v.server, v.workers, v.threads, v.worker_class) == ("gunicorn", 2, 2, "gthread")
    assert e.spec.redis.deployed and e.spec.redis.url is None
    assert (e.spec.injectors.wait_time.min, e.spec.injectors.wait_time.max) == (1.0, 2.0)
    assert e.spec.injectors.spawn_rate == e.spec.injectors.users_per_injector == 10
    assert e.spec.stages[0].duration == 10.0
    assert e.spec.thresholds is None and e.spec.matrix is None and e.spec.warmup is None
    assert len(e.variants()) == 1


def test_each_server_gets_its_defaults_and_a_matrix_can_vary_the_server():
    e = parse_experiment(with_spec(target={"threads": 4}, matrix={"server": ["gunicorn", "uwsgi", "waitress",
                                                                              "cheroot", "granian"]}))
    assert [(v.server, v.workers, v.threads, v.worker_class) for v in e.variants()] == [
        ("gunicorn", 2, 4, "gthread"), ("uwsgi", 2, 4, None), ("waitress", 1, 4, None), ("cheroot", 1, 4, None),
        ("granian", 2, 4, None)]
    assert e.variants()[2].settings() == {"server": "waitress", "pods": 1, "workers": 1, "threads": 4,
                                          "workerClass": None}
    assert e.variants()[2].label() == "waitress pods=1 workers=1 threads=4"


def test_a_proxy_and_socket_matrix_is_the_uwsgi_versus_gunicorn_grid():
    e = parse_experiment(with_spec(target={"proxy": {"server": "nginx", "workers": 2}},
                                   matrix={"server": ["uwsgi", "gunicorn"], "proxy": ["httpd", "nginx"],
                                           "socket": ["tcp", "unix"]}))
    variants = e.variants()
    assert len(variants) == 8
    assert [(v.server, v.proxy, v.socket) for v in variants[:4]] == [
        ("uwsgi", "httpd", "tcp"), ("uwsgi", "httpd", "unix"), ("uwsgi", "nginx", "tcp"), ("uwsgi", "nginx", "unix")]
    assert variants[1].label() == "httpd/unix uwsgi pods=1 workers=2 threads=2"
    assert variants[1].settings()["proxy"] == "httpd" and variants[1].settings()["socket"] == "unix"
    proxy = e.spec.target.proxy_of(variants[1])
    assert (proxy.server, proxy.socket, proxy.workers) == ("httpd", "unix", 2)


def test_without_a_proxy_a_variant_has_none_and_flup_gets_its_own_defaults():
    plain = parse_experiment(with_spec()).variants()[0]
    assert plain.proxy is None and plain.socket is None and "proxy" not in plain.settings()
    assert parse_experiment(with_spec()).spec.target.proxy_of(plain) is None
    e = parse_experiment(with_spec(target={"server": "flup", "proxy": {"server": "nginx"}},
                                   matrix={"workerClass": ["threaded", "prefork"]}))
    assert [(v.worker_class, v.workers, v.threads, v.proxy, v.socket) for v in e.variants()] == [
        ("threaded", 2, 2, "nginx", "tcp"), ("prefork", 2, 1, "nginx", "tcp")]


def test_a_worker_class_axis_is_for_the_servers_that_have_classes_and_the_others_run_once():
    e = parse_experiment(with_spec(target={"proxy": {"server": "nginx"}},
                                   matrix={"server": ["mod_wsgi", "flup"], "workerClass": ["prefork", "threaded"]}))
    assert [(v.index, v.server, v.worker_class, v.threads) for v in e.variants()] == [
        (0, "mod_wsgi", None, 2), (1, "flup", "prefork", 1), (2, "flup", "threaded", 2)]


def test_a_command_runs_any_other_server():
    e = parse_experiment(with_spec(target={"command": ["hypercorn", "--bind", "{bind}", "-w", "{workers}", "{app}",
                                                       "--literal={{x}}"], "workers": 3}))
    (v,) = e.variants()
    assert (v.server, v.workers, v.worker_class) == ("command", 3, None)


def test_design_sketch_parses_with_seed_sweep():
    e = parse_experiment(with_spec(
        target={"pods": 50, "workers": 7, "threads": 2},
        redis={"deploy": True},
        injectors={"usersPerInjector": 200, "spawnRatePerInjector": 200,
                   "waitTime": {"min": "1s", "max": "2s"}},
        stages=[{"injectors": n, "duration": "20m"} for n in (10, 15, 20, 25, 30)],
        matrix={"threads": [2, 3, 7]},
        thresholds={"p99": "1000ms", "errorRate": "1%"}))
    assert [v.threads for v in e.variants()] == [2, 3, 7]
    assert {(v.workers, v.pods) for v in e.variants()} == {(7, 50)}
    assert [s.duration for s in e.spec.stages] == [1200.0] * 5
    assert e.spec.thresholds.latency_limits_ms() == {"p99": 1000.0}
    assert e.spec.thresholds.error_rate == 0.01


def test_full_ten_by_ten_grid_is_expressible():
    e = parse_experiment(with_spec(matrix={"workers": list(range(1, 11)), "threads": list(range(1, 11))}))
    variants = e.variants()
    assert len(variants) == 100
    assert {(v.workers, v.threads) for v in variants} == {(w, t) for w in range(1, 11) for t in range(1, 11)}


def test_the_largest_experiments_the_status_bound_allows():
    grid = parse_experiment(with_spec(matrix={"workers": list(range(1, 11)), "threads": list(range(1, 11))},
                                      stages=[{"injectors": n, "duration": "20m"} for n in range(1, 6)]))
    ladder = parse_experiment(with_spec(matrix={"threads": list(range(1, 11))},
                                        stages=[{"injectors": n, "duration": "1m"} for n in range(1, 51)]))
    assert len(grid.variants()) * len(grid.spec.stages) == len(ladder.variants()) * len(ladder.spec.stages) == 500


def test_the_runner_app_gets_its_probes_and_metrics_and_any_other_app_a_port_check_and_no_liveness():
    runner = parse_experiment(with_spec()).spec.target
    assert runner.readiness().http_get.path == "/readyz" and runner.liveness().http_get.path == "/healthz"
    assert (runner.metrics.path, runner.metrics.counter) == ("/metrics", "runner_request_duration_seconds")
    other = parse_experiment(with_spec(target={"app": "httpbin:app"}, redis={"deploy": False})).spec
    assert other.target.readiness().tcp_socket is not None and other.target.readiness().http_get is None
    assert other.target.liveness() is None
    assert not other.redis.used and not other.redis.deployed
    own = parse_experiment(with_spec(target={
        "app": "httpbin:app", "readinessProbe": {"httpGet": {"path": "/status/200"}, "periodSeconds": 3},
        "livenessProbe": {"exec": {"command": ["true"]}},
        "metrics": {"path": "/prometheus", "counter": "flask_http_request_total"}})).spec.target
    assert own.readiness().http_get.path == "/status/200" and own.readiness().period_seconds == 3
    assert own.liveness().exec.command == ["true"]
    assert (own.metrics.path, own.metrics.counter) == ("/prometheus", "flask_http_request_total")


def test_resources_and_a_cpu_and_memory_matrix_make_variants_with_requests_and_limits():
    e = parse_experiment(with_spec(target={"resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                                         "limits": {"memory": "512Mi"}}},
                                   matrix={"cpu": ["1", 2], "workers": [3, 5]}))
    assert [v.label() for v in e.variants()] == [
        "gunicorn pods=1 workers=3 threads=2 gthread cpu=1 memory=512Mi",
        "gunicorn pods=1 workers=3 threads=2 gthread cpu=2 memory=512Mi",
        "gunicorn pods=1 workers=5 threads=2 gthread cpu=1 memory=512Mi",
        "gunicorn pods=1 workers=5 threads=2 gthread cpu=2 memory=512Mi"]
    # each matrix value is the request and the limit; the spec's other values stand
    assert e.variants()[1].resources.manifest() == {"requests": {"cpu": "2", "memory": "256Mi"},
                                                    "limits": {"cpu": "2", "memory": "512Mi"}}
    assert e.variants()[1].settings()["cpu"] == "2" and e.variants()[1].settings()["memory"] == "512Mi"
    plain = parse_experiment(with_spec())
    assert "cpu" not in plain.variants()[0].settings() and "cpu" not in plain.variants()[0].label()
    assert parse_experiment(with_spec(matrix={"memory": ["256Mi", "1Gi"]})).variants()[0].resources.manifest() == \
        {"requests": {"memory": "256Mi"}, "limits": {"memory": "256Mi"}}


def test_quantities():
    assert [cpu_cores(q) for q in ("250m", "1", "0.5", "2")] == [0.25, 1.0, 0.5, 2.0]
    assert [memory_bytes(q) for q in ("512Mi", "1Gi", "500M", "1024")] == [512 * 2**20, 2**30, 500 * 10**6, 1024]
    with pytest.raises(ValueError):
        cpu_cores("1.5 cores")


def test_an_arrival_rate_shares_its_injectors_and_runs_a_pool_of_users_on_each():
    spec = parse_experiment(with_spec(injectors={"maxUsersPerInjector": 30, "maxRatePerInjector": 50}, stages=[
        {"arrivalRate": 120, "duration": "10s"}, {"injectors": 4, "arrivalRate": 120, "duration": "10s"},
        {"injectors": 2, "duration": "10s"}])).spec
    alone, given, _closed = spec.stages
    assert (alone.injectors, given.injectors) == (3, 4)     # ceil(120 / 50) without injectors
    assert [spec.injectors.users_for(s) for s in spec.stages] == [90, 120, 2 * spec.injectors.users_per_injector]
    assert spec.injectors.spawn_rate_for(alone) == 90       # the whole pool at once
    searched = parse_experiment(with_spec(stages=None, slo={"p99": "300ms"}, search={
        "load": "rps", "from": 100, "max": 1600, "duration": "20s"})).spec.search
    assert searched.stage(1200) == Stage(None, 20.0, arrival_rate=1200)


def test_pacing_is_an_optional_open_model():
    assert parse_experiment(with_spec()).spec.injectors.pacing is None
    assert parse_experiment(with_spec(injectors={"pacing": "250ms"})).spec.injectors.pacing == 0.25


def test_external_redis_url_means_no_deployed_redis():
    e = parse_experiment(with_spec(redis={"url": "redis://cache.internal:6379/2"}))
    assert not e.spec.redis.deployed


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("20m", 1200), ("1h30m", 5400),
                                          ("250ms", 0.25), ("1.5s", 1.5)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_format_duration_round_trips():
    for s in (0.25, 1, 90, 1200, 5400):
        assert parse_duration(format_duration(s)) == s


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_parser_refuses_each_invalid_document_naming_the_field_and_the_rule(case):
    """tests/data/invalid through the parser; the cluster tier runs the same cases through the API server."""
    with pytest.raises(ValidationError) as e:
        parse_experiment(case_document(case))
    assert any(within(path, case["field"]) and case["parser"] in message for path, message in e.value.problems), \
        e.value.problems


def test_each_invalid_document_says_what_the_api_server_does_with_it():
    """Its refusal (apiServer), or why CEL cannot express the rule (cel): one of them. That the parser names the
    field, or one within it, is the test above."""
    assert len({case["name"] for case in CASES}) == len(CASES) >= 153
    for case in CASES:
        assert {"name", "field", "parser"} <= case.keys() <= KEYS, case
        assert ("apiServer" in case) != ("cel" in case), case["name"]
        assert case.get("base", "ladder") in BASES, case["name"]


def test_every_problem_is_reported_at_once():
    found = problems(with_spec(stages=[{"injectors": 0, "duration": "x"}], target={"pods": 0}))
    assert found == ["spec.target.pods: must be >= 1, got 0",
                     "spec.stages[0].injectors: must be >= 1, got 0",
                     "spec.stages[0].duration: must be a duration such as 90s, 20m or 1h30m, got 'x'"]


def test_document_level_errors():
    assert problems({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"}}) == [
        "apiVersion: must be loadstage.io/v1alpha1, got 'v1'",
        "kind: must be LoadExperiment, got 'Pod'",
        "spec: is required",
        "metadata.name: must be a lowercase DNS label starting with a letter, got 'Bad_Name'",
    ]


def test_kubernetes_metadata_is_tolerated():
    doc = copy.deepcopy(BASE)
    doc["metadata"].update(namespace="team-a", uid="1234", resourceVersion="7", generation=2,
                           annotations={"a": "b"})
    doc["status"] = {"phase": "Running"}
    assert parse_experiment(doc).metadata.namespace == "team-a"


def test_yaml_syntax_error_points_at_the_line(write_experiment):
    path = write_experiment("apiVersion: loadstage.io/v1alpha1\nspec:\n  stages: [\n")
    with pytest.raises(ValidationError) as e:
        load_experiment_file(path)
    (where, message), = e.value.problems
    assert where.startswith(f"{path}:") and "not valid YAML" in message


def test_missing_file_and_several_documents(tmp_path, write_experiment):
    with pytest.raises(ValidationError, match="cannot read"):
        load_experiment_file(tmp_path / "nope.yaml")
    with pytest.raises(ValidationError, match="exactly one LoadExperiment document, found 2"):
        load_experiment_file(write_experiment("a: 1\n---\nb: 2\n"))


def test_locustfile_path_is_resolved_next_to_the_experiment(tmp_path, write_experiment):
    (tmp_path / "mine.py").write_text("# a locustfile\n")
    doc = with_spec(injectors={"locustfile": {"path": "mine.py"}})
    e = load_experiment_file(write_experiment(doc))
    assert e.spec.injectors.locustfile.path == str(tmp_path / "mine.py")
    doc["spec"]["injectors"]["locustfile"]["path"] = "missing.py"
    with pytest.raises(ValidationError, match=r"spec\.injectors\.locustfile\.path: file not found"):
        load_experiment_file(write_experiment(doc))


def test_scaling_shrinks_stages_and_users_but_keeps_the_ladder():
    e = parse_experiment(with_spec(
        injectors={"usersPerInjector": 200, "spawnRatePerInjector": 100},
        warmup={"injectors": 1, "duration": "5m"},
        stages=[{"injectors": n, "duration": "20m"} for n in (10, 15, 20)]))
    small = e.scaled(stage_duration=10, warmup_duration=2, users_scale=0.1)
    assert [(s.injectors, s.duration) for s in small.spec.stages] == [(10, 10), (15, 10), (20, 10)]
    assert small.spec.warmup.duration == 2
    assert small.spec.injectors.users_per_injector == 20
    assert small.spec.injectors.spawn_rate == 10
    assert e.spec.stages[0].duration == 1200
    # a result file's spec says what ran, and parses back to the same plan
    again = parse_experiment(small.source)
    assert again.spec == small.spec and e.source["spec"]["stages"][0]["duration"] == "20m"


def test_users_scale_scales_every_load_given_in_users_a_goals_too():
    """Before, a goal's users stayed as written while its injectors' users shrank."""
    doc = with_spec(slo={"p99": "1s"}, goal={"users": 300}, stageEnd={"when": "Decided", "max": "1m"},
                    matrix={"threads": [1, 2]})
    del doc["spec"]["stages"]
    small = parse_experiment(doc).scaled(users_scale=0.1)
    assert small.spec.goal.users == 30 and small.source["spec"]["goal"] == {"users": 30}
    assert parse_experiment(small.source).spec == small.spec
    rate = copy.deepcopy(doc)
    rate["spec"]["goal"] = {"rps": 300}
    assert parse_experiment(rate).scaled(users_scale=0.1).spec.goal.rps == 300   # a rate is no users


def test_examples_are_valid():
    paths = sorted((ROOT / "examples").glob("**/*.yaml"))
    assert paths
    for path in paths:
        load_experiment_file(path)


def test_a_ladder_by_users_gets_injectors_from_max_users_per_injector():
    e = parse_experiment(with_spec(
        injectors={"usersPerInjector": 20, "maxUsersPerInjector": 250},
        warmup={"users": 10, "duration": "5s"},
        stages=[{"users": n, "duration": "1m"} for n in (100, 250, 251, 1000)] + [{"injectors": 3, "duration": "1m"}]))
    assert [(s.injectors, e.spec.injectors.users_for(s)) for s in e.spec.stages] == [
        (1, 100), (1, 250), (2, 251), (4, 1000), (3, 60)]
    assert (e.spec.warmup.injectors, e.spec.injectors.users_for(e.spec.warmup)) == (1, 10)
    # the Locust master is given the stage's users; it spreads them evenly over the workers
    from loadstage.launch.argv import locust_master_command
    argv = locust_master_command(e, e.spec.stages[2], host="http://x", summary_file="s", artifact_file="a",
                                 target_metrics=[])
    options = dict(itertools.pairwise(argv))
    assert (options["--users"], options["--expect-workers"]) == ("251", "2")
    # scaling shrinks a stage's users and may need fewer injectors; the written spec says so and parses back
    small = e.scaled(users_scale=0.1)
    assert [(s.injectors, s.users) for s in small.spec.stages] == [(1, 10), (1, 25), (1, 25), (1, 100), (3, None)]
    assert parse_experiment(small.source).spec == small.spec


def test_stage_end_min_unwritten_is_30s_or_the_stage_length_where_shorter():
    """Before, {when: Decided, max: 20s} was refused: the unwritten min (30s) was over the max."""
    doc = with_spec(slo={"p99": "1s"}, search={"load": "users", "from": 10, "max": 20},
                    stageEnd={"when": "Decided", "max": "20s"})
    del doc["spec"]["stages"]
    end = parse_experiment(doc).spec.stage_end
    assert (end.min, end.max, end.shortest(20.0), end.shortest(45.0)) == (None, 20.0, 20.0, 30.0)
    written = parse_experiment(with_spec(slo={"p99": "1s"},
                                         stageEnd={"when": "Decided", "min": "10s"})).spec.stage_end
    assert written.shortest(45.0) == 10.0
    spec_schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    crd_min = spec_schema["properties"]["stageEnd"]["properties"]["min"]
    assert "default" not in crd_min and "30s" in crd_min["description"]   # the API server writes none either


def test_maximize_without_a_search_is_told_it_needs_one_and_nothing_else():
    """Before, it was also told to give spec.stages, spec.search or spec.goal, though it gave a goal."""
    doc = case_document(next(case for case in CASES if case["name"] == "goal-maximize-without-search"))
    assert problems(doc) == ["spec.goal: spec.goal.maximize compares the variants' capacities: it needs spec.search, "
                             "each variant's"]


@pytest.mark.parametrize("case", EDGES, ids=[case["name"] for case in EDGES])
def test_the_parser_accepts_each_document_at_the_edge_of_a_rule(case):
    """tests/data/valid/edges.yaml; the cluster tier dry-runs the same through the API server."""
    parse_experiment(case_document(case))
