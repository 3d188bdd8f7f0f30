"""The runner app under every WSGI server loadstage names, with a real redis-server."""

import shutil
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
import redis

from loadstage.api.load import parse_experiment
from loadstage.api.servers import ENTRIES
from loadstage.launch import argv as commands
from loadstage.local.ports import free_port
from loadstage.local.target import closed_to_apache_workers, pod_env, project_root
from loadstage.locust.served_count import scrape_served_requests, served_between
from support.documents import BASE
from support.processes import start_redis
from support.waiting import wait_for

pytestmark = pytest.mark.e2e


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


opener = urllib.request.build_opener(NoRedirect)


def call(url, data=None):
    try:
        with opener.open(urllib.request.Request(url, data=data), timeout=5) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


# the HTTP servers, spoken to directly (flup, FastCGI, serves this app behind a proxy in test_local_engine); each
# worker class that serves another interface or runs another event loop (gunicorn's uvicorn class: the ASGI app;
# hypercorn's trio), and each interface a server can be given (granian's asgi)
@pytest.fixture(params=[(e, None, None) for e in ENTRIES if e.protocol == "http"]
                + [(e, c.name, None) for e in ENTRIES for c in e.worker_classes if c.kind or c.name == "trio"]
                + [(e, None, i) for e in ENTRIES for i in e.interfaces[1:]],
                ids=lambda p: "-".join(filter(None, (p[0].name, *p[1:]))))
def app(request, supervisor, tmp_path):
    redis_port, port = free_port(), free_port()
    redis_child = start_redis(supervisor, tmp_path, redis_port)
    entry, worker_class, interface = request.param
    server = entry.name
    if server == "mod_wsgi" and (closed := closed_to_apache_workers()):
        pytest.skip(f"Apache, started by root, runs mod_wsgi's app as nobody, who cannot enter {closed}")
    experiment = parse_experiment({**BASE, "spec": {**BASE["spec"], "target": {
        "server": server, "workers": entry.default_workers(), "threads": 3 if entry.threads else 1,
        **({"workerClass": worker_class} if worker_class else {}),
        **({"interface": interface} if interface else {})}}})
    variant = experiment.variants()[0]
    env, scratch = pod_env(experiment, variant, f"redis://127.0.0.1:{redis_port}/0", tmp_path / "m", "runner-app-")
    argv = commands.runner_command(experiment, variant, binds=[f"127.0.0.1:{port}"])
    target = supervisor.start(server, argv, env=env, log_path=tmp_path / f"{server}.log", cwd=project_root())
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: call_or_none(f"{base}/readyz") == 200, timeout=30)
    yield {"base": base, "redis_port": redis_port, "redis": redis_child, "target": target}
    supervisor.stop(target)
    if scratch:
        shutil.rmtree(scratch)


def call_or_none(url):
    try:
        return call(url)[0]
    except OSError:
        return None


def walk_questionnaire(base):
    status, headers, _ = call(f"{base}/surveys", data=b"")
    assert status == 303
    location = headers["Location"]
    pages = 0
    while not location.endswith("/done"):
        status, _, body = call(base + location)
        assert status == 200 and "Question" in body
        status, headers, _ = call(base + location, data=b"answer=yes")
        assert status == 303
        location = headers["Location"]
        pages += 1
    assert call(base + location)[0] == 200
    return location.split("/")[2], pages


def test_respondent_walks_every_page_and_answers_land_in_redis(app):
    sid, pages = walk_questionnaire(app["base"])
    assert pages == 5
    session = redis.Redis(port=app["redis_port"], decode_responses=True).hgetall(f"survey:{sid}")
    assert session["page"] == "6"
    assert [session[f"answer:{p}"] for p in range(1, 6)] == ["yes"] * 5
    assert int(session["views"]) == 6


def test_metrics_merge_every_worker_and_count_by_route(app):
    metrics = [f"{app['base']}/metrics"]
    before = scrape_served_requests(metrics)
    for _ in range(6):
        walk_questionnaire(app["base"])
    call(f"{app['base']}/healthz")
    assert served_between(before, scrape_served_requests(metrics)) == 6 * 12
    _, _, text = call(f"{app['base']}/metrics")
    pages = [line for line in text.splitlines() if line.startswith("runner_request_duration_seconds_count")
             and 'route="/surveys/<sid>/pages/<int:page>"' in line]
    assert sorted(float(line.split()[-1]) for line in pages) == [30.0, 30.0]
    assert "healthz" not in text


def test_hello_and_readbody_answer_without_redis_and_are_counted(app):
    metrics = [f"{app['base']}/metrics"]
    before = scrape_served_requests(metrics)
    assert call(f"{app['base']}/hello")[::2] == (200, "Hello world\n")
    body = bytes(range(256)) * 280                      # 70 KiB, as the readbody scenario sends
    with opener.open(urllib.request.Request(f"{app['base']}/readbody", data=body), timeout=5) as r:
        assert (r.status, r.read()) == (200, body)
    assert served_between(before, scrape_served_requests(metrics)) == 2


def test_unknown_session_and_page_are_404(app):
    sid, _ = walk_questionnaire(app["base"])
    assert call(f"{app['base']}/surveys/nosuchsession/pages/1")[0] == 404
    assert call(f"{app['base']}/surveys/{sid}/pages/9")[0] == 404


def test_redis_outage_gives_fast_503_and_the_app_recovers(app, supervisor, tmp_path):
    supervisor.stop(app["redis"])
    started = time.monotonic()
    status, headers, _ = call(f"{app['base']}/surveys", data=b"")
    assert status == 503 and headers["Retry-After"] == "1"
    assert time.monotonic() - started < 1.0
    assert call(f"{app['base']}/readyz")[0] == 503
    assert call(f"{app['base']}/healthz")[0] == 200
    assert app["target"].alive()
    start_redis(supervisor, tmp_path, app["redis_port"])
    wait_for(lambda: call(f"{app['base']}/readyz")[0] == 200)
    assert walk_questionnaire(app["base"])[1] == 5


@pytest.mark.parametrize("server,threads,most", [("uvicorn", 2, 2), ("uvicorn", 8, 8), ("granian", 2, 2)])
def test_an_asgi_apps_threads_bound_its_sync_endpoints_in_flight(supervisor, tmp_path, server, threads, most):
    """threads is the ASGI app's sync thread pool: 8 requests at once to a sync endpoint (~180 ms each) start
    at most that many of AnyIO's worker threads, and with a pool of 8 most of the 8 run side by side."""
    port = free_port()
    experiment = parse_experiment({**BASE, "spec": {**BASE["spec"], "target": {
        "server": server, "workers": 1, "threads": threads, **({"interface": "asgi"} if server == "granian" else {})}}})
    variant = experiment.variants()[0]
    env, _ = pod_env(experiment, variant, None, tmp_path / "m", "runner-app-")
    argv = commands.runner_command(experiment, variant, binds=[f"127.0.0.1:{port}"])
    target = supervisor.start(server, argv, env=env, log_path=tmp_path / f"{server}.log", cwd=project_root())
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: call_or_none(f"{base}/healthz") == 200, timeout=30)
    (worker,) = [p for p in [psutil.Process(target.pid), *psutil.Process(target.pid).children(recursive=True)]
                 if p.children() == [] and p.pid != target.pid] or [psutil.Process(target.pid)]
    before = worker.num_threads()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: call(f"{base}/delay/slow")[0], range(8)))
    assert answers == [200] * 8
    started = worker.num_threads() - before          # AnyIO keeps an idle worker thread for 10 s
    assert (threads // 2 if threads > 2 else 1) <= started <= most, (before, started)
    supervisor.stop(target)
