"""A real Prometheus (Debian's) scrapes `loadstage run --metrics-port` every second, on loopback: every query
of the shipped Grafana dashboard has data over the run, and each stage's counters end at the status's
totals."""

import http.server
import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from loadstage.api.load import parse_experiment
from loadstage.engine.steps import series_labels, stage_step
from loadstage.launch import argv
from loadstage.local.ports import free_port
from loadstage.local.processes import resolve_executable
from support.documents import BASE
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.e2e
DASHBOARD = ROOT / "charts" / "loadstage" / "dashboards" / "loadstage.json"


def queries() -> list[str]:
    """Every PromQL expression of the dashboard, its variables as Grafana would fill them for this run."""
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in board["annotations"]["list"]]
    return [e.replace("$namespace", ".*").replace("$experiment", "live").replace("$__rate_interval", "5s")
            for e in exprs]


@pytest.fixture
def prometheus(tmp_path):
    port, scraped = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                                      "scrape_configs": [{"job_name": "loadstage",
                                                          "static_configs": [{"targets": [f"127.0.0.1:{scraped}"]}]}]}))
    process = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
                               stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    api = f"http://127.0.0.1:{port}"

    def ready():
        try:
            return urllib.request.urlopen(f"{api}/-/ready", timeout=1).status == 200
        except OSError:
            return False
    try:
        wait_for(ready, timeout=30)
        yield api, scraped
    finally:
        process.terminate()
        process.wait(timeout=30)


def query(api: str, path: str, **params) -> list:
    url = f"{api}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
    body = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert body["status"] == "success", body
    return body["data"]["result"] if isinstance(body["data"], dict) else body["data"]


@pytest.mark.long
def test_prometheus_scrapes_a_local_run_every_dashboard_query_has_data_and_the_counters_end_at_the_totals(
        prometheus, write_experiment, tmp_path):
    api, port = prometheus
    experiment = write_experiment({**BASE, "metadata": {"name": "live"}, "spec": {
        "target": {"workers": 1},
        "matrix": {"threads": [1, 2]},
        "injectors": {"usersPerInjector": 10, "waitTime": {"min": "50ms", "max": "150ms"}},   # the rate is not checked
        # the latency gauge covers the 10 s before the newest report could have come (3 s ago), and goes when the
        # stage ends: in a stage of 4 s it lived a moment, which scrapes each second could miss
        "stages": [{"injectors": 1, "duration": "6s"}, {"injectors": 2, "duration": "6s"}]}})
    began = time.time()
    run = subprocess.run([sys.executable, "-m", "loadstage.cli", "run", str(experiment), "-o", str(tmp_path / "r.json"),
                          "--metrics-port", str(port), "--metrics-hold", "3s", "-q", "--workdir", str(tmp_path / "w")],
                         capture_output=True, text=True, timeout=180)
    ended = time.time()
    assert run.returncode == 0, run.stderr
    assert f"live series: http://127.0.0.1:{port}/metrics" in run.stderr
    status = json.loads((tmp_path / "r.json").read_text())["status"]

    empty = [q for q in queries() if not query(api, "query_range", query=q, start=began, end=ended, step=1)]
    assert not empty, f"no data over the run for: {empty}"
    # each injector's CPU is sampled, not Locust's heartbeat figure (measured every 5 s from 0: 0 in 6 s stages)
    busiest = query(api, "query_range", query='max(loadstage_injector_cpu_ratio{experiment="live"})',
                    start=began, end=ended, step=1)[0]["values"]
    assert max(float(v) for _, v in busiest) > 0
    assert "live" in query(api, "label/experiment/values", **{"match[]": "loadstage_experiment_info"})

    # the final values, scraped while the run held them: the last sample of each (a scrape that timed out on a
    # busy machine marks every series stale, and an instant query then finds none)
    for variant in status["variants"]:
        for stage in variant["stages"]:
            where = f'experiment="live", variant="{variant["index"] + 1}", stage="{stage["stage"]}"'
            (requests,) = query(api, "query", query=f"sum(last_over_time(loadstage_stage_requests_total{{{where}}}"
                                                      f"[15s]))", time=ended)
            (failures,) = query(api, "query", query=f"sum(last_over_time(loadstage_stage_failures_total{{{where}}}"
                                                      f"[15s]))", time=ended)
            assert int(float(requests["value"][1])) == stage["requests"] > 0
            assert int(float(failures["value"][1])) == stage["failures"]
    # the time left counted down to 0
    left = query(api, "query_range", query='loadstage_experiment_remaining_seconds{experiment="live"}',
                 start=began, end=ended, step=1)[0]["values"]
    assert float(left[0][1]) > float(left[-1][1]) == 0.0


def local(command: list[str]) -> list[str]:
    return [resolve_executable(command[0]), *command[1:]]


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_a_stages_locust_master_serves_its_live_series_on_its_metrics_port(tmp_path):
    """The master's own endpoint (a pod's `metrics` port), from the same command line as in a pod."""
    target = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    exp = parse_experiment({**BASE, "metadata": {"name": "live", "namespace": "perf"}, "spec": {
        "injectors": {"scenario": "hello", "usersPerInjector": 4, "waitTime": {"min": "10ms", "max": "20ms"}},
        "stages": [{"injectors": 1, "duration": "8s"}]}})
    step = stage_step(exp, exp.variants()[0], 1, 1)
    master_port, metrics_port = free_port(), free_port()
    master = subprocess.Popen(local(argv.locust_master_command(
        exp, step.stage, host=f"http://127.0.0.1:{target.server_port}", summary_file=str(tmp_path / "summary.json"),
        artifact_file=str(tmp_path / "artifact.json"), target_metrics=[], bind_host="127.0.0.1",
        bind_port=master_port, metrics_labels=series_labels(exp, step), metrics_port=metrics_port)),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(tmp_path / "master.log").open("w"))
    worker = subprocess.Popen(local(argv.locust_worker_command(exp, master_host="127.0.0.1", master_port=master_port)),
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(tmp_path / "worker.log").open("w"))
    labels = {"experiment": "live", "namespace": "perf", "variant": "1", "settings": exp.variants()[0].label(),
              "repeat": "1", "stage": "1"}
    try:
        def scraped():
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1).read().decode()
            except OSError:
                return None
            found = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
            return found if "loadstage_stage_latency_seconds" in found and "loadstage_stage_requests_total" in found \
                else None
        found = wait_for(scraped, timeout=20, interval=0.5)
        assert found["loadstage_stage_requests_total"].labels == {**labels, "method": "GET", "name": "/hello"}
        assert found["loadstage_stage_requests_total"].value > 0
        assert found["loadstage_stage_users"].value == 4 and found["loadstage_stage_injectors"].value == 1
        assert 0 < found["loadstage_stage_latency_seconds"].value < 1
        assert found["loadstage_stage_started_timestamp_seconds"].value <= time.time()
        assert master.wait(timeout=30) == 0 and worker.wait(timeout=30) == 0
        assert json.loads((tmp_path / "summary.json").read_text())["requests"] > 0
    finally:
        for process in (worker, master):
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
        target.shutdown()


def test_a_metrics_port_in_use_is_refused_naming_the_option_before_anything_starts(tmp_path):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "loadstage.cli", "run", str(ROOT / "examples" / "quickstart.yaml"),
                              "--metrics-port", str(port), "--workdir", str(tmp_path / "work")],
                             capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert f"--metrics-port: cannot listen on 127.0.0.1:{port}: Address already in use" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "work").exists()
