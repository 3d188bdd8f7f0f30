import copy

import pytest

from loadstage.api.load import load_experiment_file, parse_experiment
from loadstage.api.quantities import cpu_cores, format_duration, memory_bytes, parse_duration
from loadstage.api.schema import ValidationError
from loadstage.api.types import Stage
from support.documents import BASE
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
    alone, given, closed = spec.stages
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


SEARCH = {"load": "users", "from": 10, "max": 2000, "resolution": "5%", "duration": "1m"}
GOAL, SLO, TWO = {"rps": 100}, {"p99": "300ms"}, {"threads": [1, 2]}
DECIDED = {"when": "Decided", "max": "1m"}
EXACTLY_ONE = ("spec: give spec.stages (a ladder), spec.search (a capacity search) or spec.goal (the cheapest variant "
               "that meets the objective): exactly one of them")

BAD = [
    ({"stages": [{"injectors": 1, "duration": "10s"}, {"injectors": 2, "duration": "10s"},
                 {"injectors": 0, "duration": "10s"}]},
     "spec.stages[2].injectors: must be >= 1, got 0"),
    ({"stages": []}, "spec.stages: must have at least 1 item(s), got 0"),
    ({"stages": [{"injectors": 1}]}, "spec.stages[0]: set duration, requests, or both (duration is then the time limit)"),
    ({"stages": [{"injectors": 1, "duration": "20 minutes"}]},
     "spec.stages[0].duration: must be a duration such as 90s, 20m or 1h30m, got '20 minutes'"),
    ({"stages": [{"injectors": 1, "duration": 600}]},
     "spec.stages[0].duration: must be a duration such as 90s, 20m or 1h30m, got 600"),
    ({"stages": [{"injectors": 1, "duration": "25h"}]}, "spec.stages[0].duration: must be at most 24h, got 25h"),
    ({"stages": [{"injectors": "ten", "duration": "1m"}]},
     "spec.stages[0].injectors: must be an integer, got 'ten'"),
    ({"target": {"threads": 0}}, "spec.target.threads: must be >= 1, got 0"),
    ({"target": {"workerClass": "eventlet"}},
     "spec.target.workerClass: must be one of gthread, sync, gevent, uvicorn, threaded, prefork, asyncio, uvloop, got 'eventlet'"),
    ({"target": {"podz": 3}}, "spec.target.podz: unknown field (did you mean 'pods'?)"),
    ({"target": {"app": "not an app"}}, "spec.target.app: must be module:callable, got 'not an app'"),
    ({"target": {"env": {"1BAD": "x"}}}, "spec.target.env.1BAD: key must be an environment variable name"),
    ({"redis": {"deploy": True, "url": "redis://x:6379"}}, "spec.redis: set either deploy: true or url, not both"),
    ({"redis": {"deploy": False}},
     "spec.redis.deploy: the bundled runner app (runner_app.app:app) keeps its sessions in Redis: deploy one, or "
     "give a url; deploy: false without a url is for an app of your own that uses no Redis"),
    ({"target": {"app": "mine:app"}, "redis": {"deploy": False, "passwordSecret": {"name": "s"}}},
     "spec.redis: passwordSecret needs a Redis: deploy one, or give a url"),
    ({"target": {"readinessProbe": {"httpGet": {"path": "/ok"}, "tcpSocket": {}}}},
     "spec.target.readinessProbe: set exactly one of httpGet, tcpSocket or exec"),
    ({"target": {"livenessProbe": {"periodSeconds": 5}}},
     "spec.target.livenessProbe: set exactly one of httpGet, tcpSocket or exec"),
    ({"target": {"readinessProbe": {"httpGet": {"path": "ok"}}}},
     "spec.target.readinessProbe.httpGet.path: must be a path starting with /, got 'ok'"),
    ({"target": {"readinessProbe": {"tcpSocket": {"port": 70000}}}},
     "spec.target.readinessProbe.tcpSocket.port: must be <= 65535, got 70000"),
    ({"target": {"readinessProbe": {"httpGet": {}}}}, "spec.target.readinessProbe.httpGet.path: is required"),
    ({"target": {"metrics": {"counter": "requests-total"}}},
     "spec.target.metrics.counter: must be a Prometheus metric name, got 'requests-total'"),
    ({"redis": {"url": "http://x"}}, "spec.redis.url: must be a redis:// or rediss:// URL, got 'http://x'"),
    ({"injectors": {"waitTime": {"min": "3s", "max": "1s"}}}, "spec.injectors.waitTime: min must be <= max"),
    ({"injectors": {"usersPerInjector": -5}}, "spec.injectors.usersPerInjector: must be >= 1, got -5"),
    ({"injectors": {"scenario": "respondent", "locustfile": {"path": "x.py"}}},
     "spec.injectors: set either scenario or locustfile, not both"),
    ({"injectors": {"locustfile": {}}}, "spec.injectors.locustfile: set exactly one of path or configMap"),
    ({"matrix": {"threads": [2, 3, 2]}}, "spec.matrix.threads[2]: duplicate value 2"),
    ({"matrix": {"threads": []}}, "spec.matrix.threads: must have at least 1 item(s), got 0"),
    ({"matrix": {"workers": list(range(1, 12)), "threads": list(range(1, 11))}},
     "spec.matrix: at most 100 variants (the product of all list lengths), or 1000 with spec.goal"),
    ({"thresholds": {"p99": 1000}}, "spec.thresholds.p99: must be a duration such as 90s, 20m or 1h30m, got 1000"),
    ({"thresholds": {"errorRate": 0.01}}, "spec.thresholds.errorRate: must be a percentage such as '1%' or '0.5%', got 0.01"),
    ({"thresholds": {"errorRate": "150%"}},
     "spec.thresholds.errorRate: must be a percentage such as '1%' or '0.5%', got '150%'"),
    ({"warmup": {"injectors": 1}}, "spec.warmup.duration: is required"),
    ({"injectors": {"pacing": "5ms"}}, "spec.injectors.pacing: must be at least 10ms, got 5ms"),
    ({"injectors": {"pacing": 1}}, "spec.injectors.pacing: must be a duration such as 90s, 20m or 1h30m, got 1"),
    ({"matrix": {"workers": list(range(1, 11)), "threads": list(range(1, 11))},
      "stages": [{"injectors": n, "duration": "1m"} for n in range(1, 7)]},
     "spec: at most 500 stages in all (variants x stages x repeats), so that the status stays small"),
    ({"stages": [{"injectors": 2, "users": 50, "duration": "1m"}]},
     "spec.stages[0]: set either injectors or users, not both"),
    ({"stages": [{"duration": "1m"}]}, "spec.stages[0]: set injectors, users or arrivalRate"),
    ({"warmup": {"users": 5, "injectors": 1, "duration": "5s"}, "stages": [{"users": 5, "duration": "1m"}]},
     "spec.warmup: set either injectors or users, not both"),
    ({"stages": [{"users": 5, "arrivalRate": 100, "duration": "1m"}]},
     "spec.stages[0].arrivalRate: users (a closed model) and arrivalRate (an open model) are two loads: set one of "
     "them"),
    ({"stages": [{"arrivalRate": 100, "requests": 1000}]},
     "spec.stages[0].requests: arrivalRate starts tasks on a schedule for the stage's duration: it cannot also end "
     "at a count of requests"),
    ({"stages": [{"arrivalRate": 0, "duration": "1m"}]}, "spec.stages[0].arrivalRate: must be >= 1, got 0"),
    ({"stages": [{"arrivalRate": 2.5, "duration": "1m"}]}, "spec.stages[0].arrivalRate: must be an integer, got 2.5"),
    ({"stages": [{"injectors": 2, "arrivalRate": 100, "duration": "1m"}], "injectors": {"pacing": "1s"}},
     "spec: spec.injectors.pacing and an arrivalRate (a stage's, spec.search.load: rps or spec.goal.rps) are "
     "two open models: give one of them"),
    ({"stages": [{"arrivalRate": 500_001, "duration": "1m"}]},
     "spec: a stage given in users or in arrivalRate alone needs at most 1000 injectors: users / "
     "injectors.maxUsersPerInjector and arrivalRate / injectors.maxRatePerInjector must be <= 1000"),
    ({"injectors": {"maxRatePerInjector": 0}}, "spec.injectors.maxRatePerInjector: must be >= 1, got 0"),
    ({"stages": [{"users": 0, "duration": "1m"}]}, "spec.stages[0].users: must be >= 1, got 0"),
    ({"injectors": {"maxUsersPerInjector": 10}, "stages": [{"users": 10001, "duration": "1m"}]},
     "spec: a stage given in users or in arrivalRate alone needs at most 1000 injectors: users / "
     "injectors.maxUsersPerInjector and arrivalRate / injectors.maxRatePerInjector must be <= 1000"),
    ({"target": {"server": "tornado"}},
     "spec.target.server: must be one of gunicorn, uwsgi, waitress, cheroot, granian, bjoern, meinheld, mod_wsgi, flup, "
     "uvicorn, hypercorn, got 'tornado'"),
    ({"target": {"threads": 2}, "matrix": {"server": ["gunicorn", "meinheld"]}},
     "spec.target.threads: meinheld (spec.matrix.server) serves one request at a time per process, so threads must "
     "be 1, got 2; use workers or pods instead"),
    ({"target": {"server": "waitress", "workers": 4}},
     "spec.target.workers: waitress (spec.target.server) runs one process, so workers must be 1, got 4; "
     "use threads or pods instead"),
    ({"target": {"workers": 2}, "matrix": {"server": ["gunicorn", "cheroot"]}},
     "spec.target.workers: cheroot (spec.matrix.server) runs one process, so workers must be 1, got 2; "
     "use threads or pods instead"),
    ({"matrix": {"server": ["gunicorn", "waitress"], "workers": [1, 2]}},
     "spec.matrix.workers: waitress (spec.matrix.server) runs one process, so workers must be 1, got 1, 2; "
     "use threads or pods instead"),
    ({"target": {"server": "uwsgi", "workerClass": "gevent"}},
     "spec.target.workerClass: a worker class is a gunicorn or a flup or a hypercorn setting; uwsgi (spec.target.server) has none"),
    ({"matrix": {"server": ["uwsgi", "granian"], "workerClass": ["sync", "gthread"]}},
     "spec.matrix.workerClass: a worker class is a gunicorn or a flup or a hypercorn setting; uwsgi, granian (spec.matrix.server) "
     "has none"),
    ({"matrix": {"server": ["gunicorn", "flup"], "workerClass": ["sync", "prefork"]}, "target": {"proxy": {"server": "nginx"}}},
     "spec.matrix.workerClass: prefork is not a worker class of gunicorn (spec.matrix.server); its classes are "
     "gthread, sync, gevent, uvicorn"),
    ({"target": {"server": "gunicorn", "workerClass": "prefork"}},
     "spec.target.workerClass: prefork is not a worker class of gunicorn (spec.target.server); its classes are "
     "gthread, sync, gevent, uvicorn"),
    ({"target": {"server": "flup", "workerClass": "prefork", "threads": 4, "proxy": {"server": "nginx"}}},
     "spec.target.threads: flup's prefork class (spec.target.workerClass) serves one request at a time per "
     "process, so threads must be 1, got 4"),
    ({"target": {"server": "flup"}},
     "spec.target.server: flup speaks FastCGI, which Locust does not: it needs a front proxy (spec.target.proxy: "
     "nginx or httpd)"),
    ({"matrix": {"server": ["gunicorn", "flup"], "proxy": ["none", "nginx"]}},
     "spec.matrix.server: flup speaks FastCGI, which Locust does not: it needs a front proxy (spec.matrix.proxy: "
     "nginx or httpd)"),
    ({"matrix": {"proxy": ["none", "httpd"], "socket": ["tcp", "unix"]}},
     "spec.matrix.socket: unix joins a proxy to the server, and spec.matrix.proxy has none: the injectors speak "
     "TCP; list unix only where every variant has a proxy"),
    ({"matrix": {"socket": ["tcp", "unix"]}},
     "spec.matrix.socket: joins a proxy to the server, and no variant has one: set spec.target.proxy or "
     "spec.matrix.proxy"),
    ({"target": {"server": "mod_wsgi", "proxy": {"server": "nginx", "socket": "unix"}}},
     "spec.target.proxy.socket: mod_wsgi (spec.target.server) listens on TCP only: "
     "use tcp"),
    ({"target": {"proxy": {"server": "haproxy"}}},
     "spec.target.proxy.server: must be one of nginx, httpd, got 'haproxy'"),
    ({"target": {"proxy": {"socket": "unix"}}}, "spec.target.proxy.server: is required"),
    ({"target": {"command": ["srv", "--port", "{port}"], "proxy": {"server": "nginx", "socket": "unix"}}},
     "spec.target.command: with a unix socket it must listen on {bind}, which is then unix:PATH ({host} and "
     "{port} are empty)"),
    ({"target": {"deployment": {"name": "web"}, "proxy": {"server": "nginx"}}, "redis": {"deploy": False}},
     "spec.target.proxy: spec.target.deployment runs its own pods, and loadstage adds no proxy to them: put the "
     "proxy in the Deployment"),
    ({"target": {"server": "uwsgi", "command": ["srv", "--port", "{port}"]}},
     "spec.target.server: spec.target.command replaces the server: set one of them, not both"),
    ({"target": {"command": ["srv", "--port", "{prot}"]}},
     "spec.target.command[2]: unknown placeholder {prot} (known: {app}, {host}, {port}, {bind}, {workers}, "
     "{threads})"),
    ({"target": {"command": ["srv", "--listen", "{bind"]}},
     "spec.target.command[2]: expected '}' before end of string in '{bind'; write {{ and }} for a literal brace"),
    ({"target": {"command": ["srv", "{app}"]}},
     "spec.target.command: must listen on {port} or {bind}: the target's port comes from loadstage"),
    ({"target": {"command": []}}, "spec.target.command: must have at least 1 item(s), got 0"),
    ({"matrix": {"server": ["uwsgi", "uwsgi"]}}, "spec.matrix.server[1]: duplicate value 'uwsgi'"),
    ({"target": {"resources": {"limits": {"cpu": "2 cores"}}}},
     "spec.target.resources.limits.cpu: must be a CPU quantity such as 500m or 2, got '2 cores'"),
    ({"target": {"resources": {"requests": {"cpu": 0.5}}}},
     "spec.target.resources.requests.cpu: must be a CPU quantity such as 500m or 2 (write a fraction as a string, "
     "e.g. '0.5'), got 0.5"),
    ({"target": {"resources": {"limits": {"memory": "512MB"}}}},
     "spec.target.resources.limits.memory: must be a memory quantity such as 512Mi or 1Gi, got '512MB'"),
    ({"target": {"resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}, "limits": {"cpu": 1}}}},
     "spec.target.resources: a request must not be above its limit"),
    ({"target": {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}},
     "spec.target.resources: a request must not be above its limit"),
    ({"target": {"resources": {"limit": {"cpu": 1}}}},
     "spec.target.resources.limit: unknown field (did you mean 'limits'?)"),
    ({"matrix": {"cpu": ["5m"]}}, "spec.matrix.cpu[0]: must be at least 10m, got 5m"),
    ({"matrix": {"memory": ["4Ti"]}}, "spec.matrix.memory[0]: must be at most 1Ti, got 4Ti"),
    ({"injectors": {"resources": {"limits": {"cpu": "500m"}}}},
     "spec.injectors.resources.limits.cpu: must be at least 1, got 500m"),
    ({"injectors": {"masterResources": {"limits": {"cpu": "200m"}}}},
     "spec.injectors.masterResources.limits.cpu: must be at least 1, got 200m"),
    ({"redis": {"resources": {"requests": {"memory": "1Mi"}}}},
     "spec.redis.resources.requests.memory: must be at least 16Mi, got 1Mi"),
    ({"target": {"deployment": {"name": "shop"}, "image": "shop:7"}, "redis": {"deploy": False}},
     "spec.target: spec.target.deployment runs the Deployment's own container, with its own probes: set none of "
     "image, app, command, readinessProbe or livenessProbe"),
    ({"target": {"deployment": {"name": "shop"}, "readinessProbe": {"tcpSocket": {}}}, "redis": {"deploy": False}},
     "spec.target: spec.target.deployment runs the Deployment's own container, with its own probes: set none of "
     "image, app, command, readinessProbe or livenessProbe"),
    ({"target": {"deployment": {"name": "shop"}}},
     "spec: spec.target.deployment brings its own Redis settings: give spec.redis.url to sample its Redis, or "
     "spec.redis.deploy: false"),
    ({"target": {"deployment": {"name": "shop", "mode": "Patch"}}, "redis": {"deploy": False}},
     "spec.target.deployment.mode: must be one of Copy, InPlace, got 'Patch'"),
    ({"target": {"deployment": {"name": "Shop_1"}}, "redis": {"deploy": False}},
     "spec.target.deployment.name: must be a Kubernetes object name, got 'Shop_1'"),
    ({"target": {"deployment": {"name": "shop"}, "workers": 3}, "redis": {"deploy": False}},
     "spec: spec.target.server must say which server the Deployment's container runs, for loadstage to set its "
     "workers, threads or worker class the way that server reads them"),
    ({"target": {"deployment": {"name": "shop"}, "server": "gunicorn"}, "redis": {"deploy": False},
      "matrix": {"server": ["gunicorn", "uwsgi"]}},
     "spec: spec.target.deployment runs one container, with one server: spec.matrix.server cannot vary it"),
    ({"search": SEARCH, "slo": {"p99": "300ms"}},
     EXACTLY_ONE),
    ({"stages": None}, EXACTLY_ONE),
    ({"stages": None, "search": SEARCH},
     "spec: spec.search needs spec.slo: a search looks for the load at which the objective breaks"),
    ({"slo": {"p99": "300ms"}, "thresholds": {"p99": "300ms"}},
     "spec: spec.slo and spec.thresholds are both objectives: give one of them"),
    ({"slo": {}}, "spec.slo: give at least one objective"),
    ({"slo": {"p99": "300ms", "minRps": 0}}, "spec.slo.minRps: must be >= 1, got 0"),
    ({"stages": None, "search": SEARCH, "slo": {"p99": "300ms"}, "repeats": 3},
     "spec: spec.search runs each variant's own search once, its intervals from each stage's blocks: spec.repeats "
     "must be 1 with it"),
    ({"stages": None, "search": SEARCH, "slo": {"p99": "300ms"}, "order": "Interleaved"},
     "spec: spec.search decides each variant's next stage from its last: order Interleaved cannot take turns "
     "between searches (use Sequential or Random)"),
    ({"stages": None, "search": {**SEARCH, "max": 10}, "slo": {"p99": "300ms"}},
     "spec.search.max: max must be above from"),
    ({"stages": None, "search": {**SEARCH, "resolution": "0%"}, "slo": {"p99": "300ms"}},
     "spec.search.resolution: resolution must be above 0%"),
    ({"stages": None, "search": {**SEARCH, "load": "bytes"}, "slo": {"p99": "300ms"}},
     "spec.search.load: must be one of users, injectors, rps, got 'bytes'"),
    ({"stages": None, "search": {**SEARCH, "load": "rps", "max": 500_001}, "slo": {"p99": "300ms"}},
     "spec: a stage given in users or in arrivalRate alone needs at most 1000 injectors: users / "
     "injectors.maxUsersPerInjector and arrivalRate / injectors.maxRatePerInjector must be <= 1000"),
    ({"stages": None, "search": {**SEARCH, "load": "rps"}, "slo": {"p99": "300ms"}, "injectors": {"pacing": "1s"}},
     "spec: spec.injectors.pacing and an arrivalRate (a stage's, spec.search.load: rps or spec.goal.rps) are "
     "two open models: give one of them"),
    ({"stages": None, "search": {**SEARCH, "load": "injectors", "max": 1001}, "slo": {"p99": "300ms"}},
     "spec.search.max: a search over injectors goes up to at most 1000"),
    ({"stages": None, "search": {**SEARCH, "max": 2001}, "slo": {"p99": "300ms"},
      "injectors": {"maxUsersPerInjector": 2}},
     "spec: a stage given in users or in arrivalRate alone needs at most 1000 injectors: users / "
     "injectors.maxUsersPerInjector and arrivalRate / injectors.maxRatePerInjector must be <= 1000"),
    ({"stages": None, "search": {k: v for k, v in SEARCH.items() if k != "duration"}, "slo": {"p99": "300ms"}},
     "spec: spec.search.duration is required, unless spec.stageEnd (when: Decided) gives a max"),
    ({"stageEnd": {"when": "Decided"}},
     "spec: spec.stageEnd.when: Decided needs spec.slo: a stage ends once its verdict by the objective is decided"),
    ({"stageEnd": {"when": "Decided", "min": "2m", "max": "1m"}, "slo": {"p99": "1s"}},
     "spec.stageEnd.min: min must be at most max"),
    ({"stageEnd": {"when": "Decided"}, "slo": {"p99": "1s"}, "repeats": 3},
     "spec: spec.stageEnd.when: Decided judges each stage at its own looks: spec.repeats must be 1 with it"),
    ({"stageEnd": {"when": "Early"}}, "spec.stageEnd.when: must be one of Duration, Decided, got 'Early'"),
    ({"stageEnd": {"when": "Decided", "min": "2s"}, "slo": {"p99": "1s"}},
     "spec.stageEnd.min: must be at least 8s, got 2s"),
    ({"goal": GOAL, "slo": SLO, "stageEnd": DECIDED, "matrix": TWO}, EXACTLY_ONE),
    ({"stages": None, "goal": GOAL, "stageEnd": DECIDED, "matrix": TWO},
     "spec.goal: spec.goal needs spec.slo: the variant it picks is the cheapest that meets the objective"),
    ({"stages": None, "goal": GOAL, "slo": SLO, "stageEnd": DECIDED},
     "spec.matrix: spec.goal picks one of spec.matrix's variants: the matrix needs at least two"),
    ({"stages": None, "goal": GOAL, "slo": SLO, "stageEnd": {"when": "Decided"}, "matrix": TWO},
     "spec.stageEnd: spec.goal runs each variant one stage at its load, ended once decided: spec.stageEnd needs "
     "when: Decided and a max"),
    ({"stages": None, "goal": {"rps": 100, "users": 10}, "slo": SLO, "stageEnd": DECIDED, "matrix": TWO},
     "spec.goal: give one load (rps, users or injectors), or maximize"),
    ({"stages": None, "goal": {"maximize": "capacityPerCore"}, "slo": SLO, "matrix": TWO},
     "spec.goal: spec.goal.maximize compares the variants' capacities: it needs spec.search, each variant's"),
    ({"stages": None, "goal": {"maximize": "capacityPerCore", "rps": 10}, "search": SEARCH, "slo": SLO,
      "matrix": TWO}, "spec.goal: give one load (rps, users or injectors), or maximize"),
    ({"stages": None, "goal": {"maximize": "cost"}, "search": SEARCH, "slo": SLO, "matrix": TWO},
     "spec.goal.maximize: must be one of capacityPerCore, got 'cost'"),
    ({"stages": None, "goal": {"maximize": "capacityPerCore"}, "search": SEARCH, "slo": SLO},
     "spec.matrix: spec.goal picks one of spec.matrix's variants: the matrix needs at least two"),
    ({"stages": None, "goal": {}, "slo": SLO, "stageEnd": DECIDED, "matrix": TWO},
     "spec.goal: give one load (rps, users or injectors), or maximize"),
    ({"stages": None, "goal": GOAL, "slo": SLO, "stageEnd": DECIDED, "matrix": TWO, "order": "Random"},
     "spec.order: spec.goal picks the variants' order itself: leave spec.order out (Sequential)"),
    ({"stages": None, "goal": GOAL, "slo": SLO, "stageEnd": DECIDED, "matrix": TWO, "injectors": {"pacing": "1s"}},
     "spec: spec.injectors.pacing and an arrivalRate (a stage's, spec.search.load: rps or spec.goal.rps) are "
     "two open models: give one of them"),
    ({"stages": None, "goal": {"users": 2001}, "slo": SLO, "stageEnd": DECIDED, "matrix": TWO,
      "injectors": {"maxUsersPerInjector": 2}},
     "spec: a stage given in users or in arrivalRate alone needs at most 1000 injectors: users / "
     "injectors.maxUsersPerInjector and arrivalRate / injectors.maxRatePerInjector must be <= 1000"),
    ({"stages": None, "goal": GOAL, "slo": SLO, "stageEnd": DECIDED,
      "matrix": {"threads": list(range(1, 12)), "workers": list(range(1, 11)), "pods": list(range(1, 11))}},
     "spec.matrix: at most 100 variants (the product of all list lengths), or 1000 with spec.goal"),
    ({"stages": None, "search": {**SEARCH, "resolution": "1%"}, "slo": {"p99": "300ms"},
      "matrix": {"threads": list(range(1, 11)), "workers": [1, 2]}},
     "spec: at most 500 stages in all, so that the status stays small: variants x the most stages one search can "
     "run (2 x (log2(max / from) + 1 + log2(1 / resolution)), rounded up)"),
]


@pytest.mark.parametrize("spec,message", BAD, ids=[m.split(":")[0] + f"-{i}" for i, (_, m) in enumerate(BAD)])
def test_bad_input_names_the_field_and_the_rule(spec, message):
    assert message in problems(with_spec(**spec))


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
    with pytest.raises(ValidationError, match="spec.injectors.locustfile.path: file not found"):
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
    from loadstage.engine.argv import locust_master_command
    argv = locust_master_command(e, e.spec.stages[2], host="http://x", summary_file="s", artifact_file="a",
                                 target_metrics=[])
    options = dict(zip(argv, argv[1:]))
    assert (options["--users"], options["--expect-workers"]) == ("251", "2")
    # scaling shrinks a stage's users and may need fewer injectors; the written spec says so and parses back
    small = e.scaled(users_scale=0.1)
    assert [(s.injectors, s.users) for s in small.spec.stages] == [(1, 10), (1, 25), (1, 25), (1, 100), (3, None)]
    assert parse_experiment(small.source).spec == small.spec


def test_every_document_the_api_server_refuses_the_parser_refuses_naming_the_same_field():
    """The cluster tier's list (support.invalid_documents), through the parser: the other half of each rule."""
    from support.invalid_documents import INVALID
    assert len(INVALID) >= 80
    for doc, expected in INVALID:
        found = problems(copy.deepcopy(doc))
        field = expected.split(": ", 1)[0]
        if field != "spec":    # a rule across fields is named by its message, which differs between the halves
            assert any(p.split(": ", 1)[0].startswith(field.split("[")[0]) for p in found), (expected, found)
