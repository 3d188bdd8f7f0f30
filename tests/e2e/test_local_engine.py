"""`loadstage run` end to end: real redis-server, gunicorn and Locust processes."""

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from loadstage.history.locations import default_location
from loadstage.history.store import Store
from loadstage.local.ports import free_port
from loadstage.local.target import closed_to_apache_workers
from loadstage.results import histograms
from support.documents import BASE
from support.processes import alive, descendants, start_redis
from support.processes import listening as listening_on
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.e2e



def locust_workers(proc):
    """The Locust worker processes below a local run."""
    return [p for p in alive(descendants(proc.pid)) if "--worker" in " ".join(p.cmdline())]

def spec_doc(**spec):
    return {**BASE, "spec": {**spec}}


def start_cli(*args, cwd=None, tmpdir=None):
    env = {**os.environ, "TMPDIR": str(tmpdir)} if tmpdir else None
    return subprocess.Popen([sys.executable, "-m", "loadstage.cli", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def scratch():
    """The run's own temporary directory (its TMPDIR), which the proxies' and Apache's workers may enter as they
    may enter /tmp: what is left in it is the run's, whatever the tests beside it leave in /tmp. Its name is
    short: mod_wsgi's daemon sockets go three directories below it, and a Unix socket's path has 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="ls-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def finish(proc, timeout):
    """Waits for the CLI while recording every process it started."""
    seen = {}
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.send_signal(signal.SIGINT)     # it stops what it started, as on Ctrl-C
            out, err = proc.communicate(timeout=60)
            raise AssertionError(f"loadstage run did not finish in {timeout}s:\n{out}\n{err}")
        for p in descendants(proc.pid):
            p = seen.setdefault(p.pid, p)
            try:   # read again while it lives: one first seen between its fork and its exec had its parent's
                argv = p.cmdline()
            except psutil.Error:
                argv = []
            p.argv = argv or getattr(p, "argv", [])   # still known once it has exited
        time.sleep(0.2)
    out, err = proc.communicate()
    return proc.returncode, out, err, list(seen.values())


@pytest.mark.long   # half a minute or more: started early, so that the short tests fill the end
def test_small_experiment_two_stages_two_variants(write_experiment, tmp_path):
    path = write_experiment(spec_doc(
        target={"pods": 1, "workers": 2},
        injectors={"usersPerInjector": 20, "maxUsersPerInjector": 20, "waitTime": {"min": "20ms", "max": "50ms"}},
        # 30 users: 2 injectors; the first stage is as long as the stored one it is compared with (tests/data)
        stages=[{"injectors": 1, "duration": "10s"}, {"users": 30, "duration": "5s"}],
        matrix={"threads": [1, 4]}))
    out_file = tmp_path / "result.json"
    code, out, err, started = finish(start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w"), 240)
    assert code == 0, err
    assert len(started) >= 6 and not alive(started)
    doc = json.loads(out_file.read_text())
    status = doc["status"]
    assert status["phase"] == "Succeeded"
    peaks = {}
    for variant in status["variants"]:
        assert [s["injectors"] for s in variant["stages"]] == [1, 2]
        for stage in variant["stages"]:
            lat = stage["latencyMs"]
            assert stage["requests"] > 0
            assert lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["p999"] <= lat["max"]
            assert stage["redisPeakConnections"] > 0
            assert stage["byMethod"]["GET"]["requests"] > 0 and stage["byMethod"]["POST"]["requests"] > 0
            served = stage["target"]["servedRequests"]
            assert abs(served - stage["requests"]) <= 0.005 * stage["requests"], (served, stage["requests"])
            assert stage["target"]["peakCpuCores"] > 0 and stage["target"]["peakMemoryBytes"] > 0
            assert 0 < stage["injectorPeakCpuPercent"] < 90 and stage["injectorBound"] is False
        peaks[variant["settings"]["threads"]] = max(s["redisPeakConnections"] for s in variant["stages"])
    assert peaks[4] > peaks[1]
    # the tables: one row per stage and variant, one headline row per variant, the p99 pivot, and one row
    # per stage and variant of errors and target resources
    assert "Injectors | Users | 50th | 90th | 95th | 99th | 99.9th | GETs avg | GETs p99 | POSTs avg | POSTs p99 | " \
           "Total Requests | Redis peak" in " ".join(out.split())   # a column marked ^ is padded wider
    assert len([line for line in out.splitlines() if line.startswith("threads=")]) == 4 + 2 + 4
    assert "Per variant, over all its stages:" in out and "99th percentile per stage (ms):" in out
    assert "req/s" in err and "variant 2/2" in err
    second_stage = status["variants"][0]["stages"][1]
    assert (second_stage["injectors"], second_stage["users"]) == (2, 30)
    assert "stage 2: 2 injector(s), 30 users, 5s" in err
    # every stage's histograms are kept in the result file, and recompute the status's figures
    for variant, kept in zip(status["variants"], doc["artifacts"]):
        assert len(kept["stages"]) == 2
        for stage, artifact in zip(variant["stages"], kept["stages"]):
            recomputed = histograms.latency_ms(histograms.decode(artifact["histogram"]), stage["latencyMs"]["max"])
            assert recomputed == stage["latencyMs"]
            assert {e["method"] for e in artifact["endpoints"]} == {"GET", "POST"} and artifact["series"]
        aggregate = variant["aggregate"]
        assert aggregate["requests"] == sum(s["requests"] for s in variant["stages"]) == aggregate["latencyMs"]["n"]
        assert aggregate["redisPeakConnections"] == max(s["redisPeakConnections"] for s in variant["stages"])
    assert [row["injectors"] for row in status["p99ByStage"]] == [1, 2]
    exported = subprocess.run([sys.executable, "-m", "loadstage.cli", "artifacts", str(out_file), "-o",
                               str(tmp_path / "exported")], capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 4
    hgrm = (tmp_path / "exported" / "variant-2" / "stage-2.hgrm").read_text()
    assert "Percentile" in hgrm and "1/(1-Percentile)" in hgrm
    # recorded in the default history ($XDG_DATA_HOME/loadstage/history.sqlite), with every stage's histogram
    said = next(line for line in err.splitlines() if line.startswith("history: recorded run "))
    assert f"in sqlite:{os.environ['XDG_DATA_HOME']}/loadstage/history.sqlite" in said, said
    with Store(default_location()) as store:
        (kept,) = [r for r in store.runs("demo", histograms=True) if r.run.uid.startswith(said.split()[3])]
    assert [v.label for v in kept.variants] == ["threads=1", "threads=4"] and kept.run.phase == "Succeeded"
    assert [histograms.decode(s.histogram).get_total_count() for s in kept.stages] == [
        s["requests"] for v in status["variants"] for s in v["stages"]]
    # the stage the kwok tests play as a finished master (tests/data) has the shape a real master writes
    for name in ("summary", "artifact"):
        fresh = json.loads((tmp_path / "w" / "variant-1" / "stage-1" / f"{name}.json").read_text())
        kept = json.loads((ROOT / "tests" / "data" / f"stage-{name}.json").read_text())
        assert fresh.keys() == kept.keys(), name


def progress(stage_dir):
    """What the stage's Locust master last wrote of its progress ({} before its first write)."""
    try:
        return json.loads((stage_dir / "progress.json").read_text())
    except (OSError, ValueError):
        return {}


def _name(arg: str) -> str:
    """A program's name, from its path or from the title it gave itself ("gunicorn: master [app]",
    "granian wsgi 127.0.0.1:8000 app worker-1"), which ps shows once the process has set it."""
    return (arg.rsplit("/", 1)[-1].split(":")[0].split() or [""])[0]


def run_servers(write_experiment, tmp_path, servers, target, scratch=None, **matrix):
    """One real 5 s stage of 20 users per server (and `matrix`'s other axes). Each served it without an error,
    the app's own /metrics (merged over the server's processes) saw the requests Locust sent, and one Redis pool
    per process held at most workers x threads connections, plus the sampler's. Returns what `finish` does, and
    the status."""
    path = write_experiment(spec_doc(
        target=target, injectors={"usersPerInjector": 20, "waitTime": {"min": "50ms", "max": "100ms"}},
        stages=[{"users": 20, "duration": "5s"}], matrix={"server": servers, **matrix}))
    out_file = tmp_path / "result.json"
    code, out, err, started = finish(start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w",
                                               tmpdir=scratch), 300)
    assert code == 0, err
    assert not alive(started)
    result = json.loads(out_file.read_text())
    status = result["status"]
    assert list(dict.fromkeys(v["settings"]["server"] for v in status["variants"])) == servers
    for variant, kept in zip(status["variants"], result["artifacts"]):
        (stage,) = variant["stages"]
        settings = variant["settings"]
        server = settings["server"]
        # a connection the server closed as a request was sent on it (keep-alive, on a machine busy with the tests
        # beside) has no status: 2 of 5,279 once, 3 POSTs of 836 another time (Apache's event MPM closes a
        # connection idle 2 s: a user the busy machine stalled). Any answer that is an error fails the test.
        dropped = sum(e["occurrences"] for e in kept["stages"][0]["errors"] if re.search(r"got 0\b", e["error"]))
        assert stage["requests"] > 200 and stage["failures"] == dropped <= 0.005 * stage["requests"], \
            (server, stage["requests"], kept["stages"][0]["errors"])
        served = stage["target"]["servedRequests"]
        assert abs(served - stage["requests"]) <= 0.005 * stage["requests"], (server, served, stage["requests"])
        assert 1 <= stage["redisPeakConnections"] <= settings["workers"] * settings["threads"] + 1, (server, stage)
        assert stage["target"]["peakCpuCores"] > 0 and stage["target"]["peakMemoryBytes"] > 0
    return out, started, status


@pytest.mark.long   # half a minute or more: started early, so that the short tests fill the end
def test_every_server_runs_a_real_stage(write_experiment, tmp_path):
    servers = ["gunicorn", "uwsgi", "waitress", "cheroot", "granian"]
    out, started, status = run_servers(write_experiment, tmp_path, servers, {"threads": 4})
    by_server = {_name(arg) for p in started for arg in p.argv[:2]}
    assert {"gunicorn", "uwsgi", "waitress-serve", "cheroot", "granian"} <= by_server, by_server
    assert [v["settings"]["workers"] for v in status["variants"]] == [2, 2, 1, 1, 2]
    lines = [line for line in out.splitlines() if line.startswith("server=")]
    assert {line.split()[0] for line in lines} == {f"server={s}" for s in servers}


def test_the_studies_other_servers_run_a_real_stage_and_a_single_threaded_one_refuses_threads(
        write_experiment, tmp_path, scratch):
    # Apache, started by root, runs mod_wsgi's app as nobody, who must be able to enter this checkout
    apache = closed_to_apache_workers() is None
    servers = ["bjoern", "meinheld", *(["mod_wsgi"] if apache else [])]
    out, started, status = run_servers(write_experiment, tmp_path, servers, {"workers": 2}, scratch)
    programs = {_name(arg) for p in started for arg in p.argv[:2]}
    # mod_wsgi-express becomes Apache (apache2), which starts the daemon processes that run the app
    assert "loadstage-prefork" in programs
    assert not apache or {"apache2", "(wsgi"} <= {p.split()[0].split(":")[0] for p in programs if p}
    assert [(v["settings"]["server"], v["settings"]["threads"]) for v in status["variants"]] == [
        ("bjoern", 1), ("meinheld", 1), ("mod_wsgi", 2)][:len(servers)]
    for variant in status["variants"]:
        (stage,) = variant["stages"]
        server, target = variant["settings"]["server"], stage["target"]
        # per process: the launcher and its 2 workers; Apache, its workers and 2 daemon processes
        assert target["processes"] == 3 if server != "mod_wsgi" else target["processes"] >= 4, (server, target)
        assert 20 * 2**20 < target["peakProcessRssBytes"] < target["peakMemoryBytes"], (server, target)
        assert len(stage["hostCpuPerCore"]) == os.cpu_count() and 0 < max(stage["hostCpuPerCore"]) <= 100
    assert "| Processes | RSS/process (MiB) | CPU per core (%) |" in out
    # mod_wsgi-express's server root and the app's metrics went under a directory of the run's, now gone
    assert not list(scratch.iterdir())
    refused = write_experiment(spec_doc(target={"server": "bjoern", "threads": 4},
                                        stages=[{"users": 5, "duration": "5s"}]), name="refused.yaml")
    code, out, err, started = finish(start_cli("run", refused), 30)
    assert code == 2 and started == []
    assert ("error: spec.target.threads: bjoern (spec.target.server) serves one request at a time per process, so "
            "threads must be 1, got 4; use workers or pods instead") in err


@pytest.mark.long   # half a minute or more: started early, so that the short tests fill the end
def test_each_proxy_over_each_socket_serves_flup_in_fastcgi_and_is_measured_apart(write_experiment, tmp_path,
                                                                                  scratch):
    """gunicorn and uWSGI behind both proxies over both sockets, in HTTP, run in test_studies
    (uwsgi-vs-gunicorn); here flup, in FastCGI."""
    # flup's threaded class closes a connection it has no free thread for, and either process may take all
    # 20 users' connections: 25 threads each
    out, started, status = run_servers(write_experiment, tmp_path, ["flup"], {"threads": 25}, scratch,
                                       proxy=["nginx", "httpd"], socket=["tcp", "unix"])
    assert [(v["settings"]["proxy"], v["settings"]["socket"]) for v in status["variants"]] == [
        ("nginx", "tcp"), ("nginx", "unix"), ("httpd", "tcp"), ("httpd", "unix")]
    # the server listened where its proxy forwarded: on loopback TCP or on a Unix socket only
    binds = [argv[argv.index("--bind") + 1] for argv in (p.argv for p in started)
             if "loadstage-prefork" in map(_name, argv[:2])]
    assert sorted({b.split(":")[0] for b in binds}) == ["127.0.0.1", "unix"], binds
    assert all(b.startswith(f"unix:{scratch}/") for b in binds if b.startswith("unix:")), binds
    for number, variant in enumerate(status["variants"], 1):
        assert "emerg" not in (tmp_path / "w" / f"variant-{number}" / "proxy-1.log").read_text()
        target = variant["stages"][0]["target"]
        # the server's figures leave the proxy out: its processes are the launcher and its 2 workers
        assert target["proxyPeakCpuCores"] > 0 and target["proxyPeakMemoryBytes"] > 2 * 2**20, target
        assert target["processes"] == 3, (variant["settings"], target)
    assert "| Proxy CPU (cores) | Proxy memory (MiB) |" in out
    assert not list(scratch.iterdir())      # the sockets and the proxies' configurations went with their pods
    # the prefork class: each process serves one request at a time, the rest wait in the socket's backlog
    out, started, status = run_servers(write_experiment, tmp_path / "prefork", ["flup"],
                                       {"workerClass": "prefork", "proxy": {"server": "nginx", "socket": "unix"}})
    assert status["variants"][0]["settings"]["threads"] == 1


def test_local_pods_share_a_port_only_where_the_server_can(write_experiment, tmp_path):
    path = write_experiment(spec_doc(target={"server": "granian", "pods": 2}, stages=[{"users": 5, "duration": "5s"}]))
    code, _, err, started = finish(start_cli("run", path), 30)
    assert code == 2 and started == []
    assert ("error: spec.target.pods: the local engine runs granian as one instance (it cannot listen on a shared "
            "port and a port of its own), so pods must be 1; a cluster runs any number of pods") in err
    path = write_experiment(spec_doc(
        target={"server": "uwsgi", "pods": 2, "workers": 1, "threads": 2},
        injectors={"usersPerInjector": 10, "waitTime": {"min": "20ms", "max": "50ms"}},
        stages=[{"users": 10, "duration": "5s"}]))
    code, _out, err, started = finish(start_cli("run", path, "-o", tmp_path / "r.json",
                                                "--workdir", tmp_path / "w"), 120)
    assert code == 0, err
    (stage,) = json.loads((tmp_path / "r.json").read_text())["status"]["variants"][0]["stages"]
    served = stage["target"]["servedRequests"]   # the sum of both instances' /metrics on their own ports
    assert abs(served - stage["requests"]) <= 0.005 * stage["requests"] and stage["failures"] == 0
    instances = [p.argv for p in started if "uwsgi" in map(_name, p.argv[:2]) and "--master" in p.argv]
    binds = {tuple(argv[i + 1] for i, arg in enumerate(argv) if arg == "--http-socket") for argv in instances}
    assert len(binds) == 2 and len({shared for shared, _ in binds}) == 1, binds   # two instances, one shared port


def test_sigterm_keeps_finished_stages_and_leaves_no_process(write_experiment, tmp_path):
    path = write_experiment(spec_doc(
        injectors={"usersPerInjector": 5, "waitTime": {"min": "10ms", "max": "50ms"}},
        stages=[{"injectors": 1, "duration": "4s"}, {"injectors": 1, "duration": "60s"}]))
    out_file = tmp_path / "result.yaml"
    proc = start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w")

    def second_stage_running():
        import yaml
        try:
            status = yaml.safe_load(out_file.read_text())["status"]
        except (OSError, TypeError, KeyError):
            return False
        return status["phase"] == "Running" and len(status["variants"][0]["stages"]) == 1
    wait_for(second_stage_running, timeout=90)
    wait_for(lambda: any("--worker" in " ".join(p.cmdline()) for p in alive(descendants(proc.pid))), timeout=30)
    started = descendants(proc.pid)
    assert len(started) >= 4  # redis, gunicorn (+ workers), locust master and worker
    # the Locust processes were forked from the warm launcher; ps shows their own command lines, and each
    # leads its own process group, by which the engine stops it
    (launcher,) = [p for p in alive(started) if "loadstage.locust.launcher" in p.cmdline()]
    locusts = [p for p in alive(started) if " ".join(p.cmdline()).startswith("locust -f ")]
    assert {" ".join(p.cmdline()).split(" --")[1].split()[0] for p in locusts} >= {"master", "worker"}
    assert {p.ppid() for p in locusts} == {launcher.pid} and all(os.getpgid(p.pid) == p.pid for p in locusts)
    listening = listening_on(started)
    assert len(listening) >= 3, listening  # redis, gunicorn, the Locust master
    assert all(ipaddress.ip_address(a.ip).is_loopback for a in listening), listening
    proc.send_signal(signal.SIGTERM)
    code, out, _err, _ = finish(proc, 60)
    assert code == 128 + signal.SIGTERM
    wait_for(lambda: not alive(started), timeout=10)
    import yaml
    status = yaml.safe_load(out_file.read_text())["status"]
    assert status["phase"] == "Failed" and status["reason"] == "Interrupted"
    assert "interrupted by SIGTERM" in status["message"]
    assert len(status["variants"][0]["stages"]) == 1 and status["variants"][0]["stages"][0]["requests"] > 0
    rows = [line.split("|") for line in out.splitlines() if line.count("|") >= 9]
    assert [cells[0].strip() for cells in rows][:2] == ["Injectors", "1"]   # the finished stage
    assert [cells[0].strip() for cells in rows][2] == "Variant"             # and its variant's headline row


def test_ctrl_c_mid_stage_exits_130_stops_everything_and_keeps_the_result_file(write_experiment, tmp_path):
    path = write_experiment(spec_doc(injectors={"usersPerInjector": 3, "waitTime": {"min": "50ms", "max": "100ms"}},
                                     stages=[{"injectors": 1, "duration": "60s"}]))
    proc = start_cli("run", path, "-q", "-o", tmp_path / "r.json", "--workdir", tmp_path / "w")
    wait_for(lambda: any("--worker" in " ".join(p.cmdline()) for p in alive(descendants(proc.pid))), timeout=60)
    started = descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    code, _out, err, _ = finish(proc, 60)
    assert code == 130, err
    wait_for(lambda: not alive(started), timeout=10)
    status = json.loads((tmp_path / "r.json").read_text())["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Interrupted")
    assert status["message"] == "interrupted by SIGINT; finished stages are kept" and "Traceback" not in err


def test_a_sigkilled_engine_leaves_no_process(write_experiment, tmp_path):
    path = write_experiment(spec_doc(
        injectors={"usersPerInjector": 5, "waitTime": {"min": "10ms", "max": "50ms"}},
        stages=[{"injectors": 2, "duration": "60s"}]))
    proc = start_cli("run", path, "-q", "--workdir", tmp_path / "w")
    wait_for(lambda: len(locust_workers(proc)) == 2, timeout=60)
    started = descendants(proc.pid)
    proc.kill()
    proc.communicate()
    wait_for(lambda: not alive(started), timeout=15)


def test_bad_input_exits_2_with_the_field_and_rule_and_starts_nothing(write_experiment):
    path = write_experiment(spec_doc(stages=[{"injectors": 1, "duration": "5s"}, {"injectors": 1, "duration": "5s"},
                                             {"injectors": 0, "duration": "5s"}]))
    code, _out, err, started = finish(start_cli("run", path), 30)
    assert code == 2
    assert "error: spec.stages[2].injectors: must be >= 1, got 0" in err
    assert "Traceback" not in err and started == []


def test_redis_password_secret_is_refused_locally_with_the_field(write_experiment):
    path = write_experiment(spec_doc(redis={"passwordSecret": {"name": "auth"}},
                                     stages=[{"injectors": 1, "duration": "5s"}]))
    code, _out, err, started = finish(start_cli("run", path), 30)
    assert code == 2 and started == []
    assert "error: spec.redis.passwordSecret: Secrets exist only in a cluster" in err


def test_target_that_cannot_start_fails_with_its_log_and_no_orphans(write_experiment, tmp_path):
    path = write_experiment(spec_doc(target={"app": "no_such_module:app"},
                                     stages=[{"injectors": 1, "duration": "5s"}]))
    code, _out, err, started = finish(start_cli("run", path, "-o", tmp_path / "r.json",
                                                "--workdir", tmp_path / "w"), 60)
    assert code == 1
    assert "gunicorn pod 1 exited with code" in err and "No module named 'no_such_module'" in err
    assert "Traceback (most recent call last):\n  File \"" not in err.split("end of")[0]
    assert not alive(started)
    status = json.loads((tmp_path / "r.json").read_text())["status"]
    assert status["phase"] == "Failed" and status["reason"] == "ComponentFailed"


def test_custom_locustfile_external_redis_and_warmup(write_experiment, tmp_path, supervisor):
    redis_port = free_port()
    start_redis(supervisor, tmp_path, redis_port)
    (tmp_path / "mine.py").write_text(
        "from locust import HttpUser, task\n\n"
        "class Starter(HttpUser):\n"
        "    @task\n"
        "    def begin(self):\n"
        "        self.client.post('/surveys', name='start a survey', allow_redirects=False)\n")
    path = write_experiment(spec_doc(
        redis={"url": f"redis://127.0.0.1:{redis_port}/0"},
        injectors={"usersPerInjector": 3, "locustfile": {"path": "mine.py"},
                   "waitTime": {"min": "100ms", "max": "200ms"}},
        warmup={"injectors": 1, "duration": "2s"},
        stages=[{"injectors": 2, "duration": "5s"}]))
    workdir = tmp_path / "w"
    # a relative --workdir: the injectors, forked elsewhere, still find their files
    code, _out, err, _ = finish(start_cli("run", path, "-o", "r.json", "--workdir", "w", cwd=tmp_path), 120)
    assert code == 0, err
    result = json.loads((tmp_path / "r.json").read_text())
    stages = result["status"]["variants"][0]["stages"]
    assert len(stages) == 1 and stages[0]["injectors"] == 2
    assert stages[0]["target"]["servedRequests"] == stages[0]["requests"]
    (endpoint,) = result["artifacts"][0]["stages"][0]["endpoints"]   # the warm-up keeps none
    assert (endpoint["method"], endpoint["name"]) == ("POST", "start a survey")
    # 6 users waiting 100-200 ms for 5 s: the experiment's waitTime applied to the user's class
    assert 60 < stages[0]["requests"] < 400
    assert stages[0]["redisPeakConnections"] > 0
    assert (workdir / "variant-1" / "warmup" / "summary.json").is_file()
    assert not (workdir / "variant-1" / "redis.log").exists()


HOLD_INIT = """
import time

import gevent
from locust import HttpUser, task
from locust.runners import WorkerRunner


class Reader(HttpUser):
    @task
    def begin(self):
        self.client.post("/surveys", allow_redirects=False)


connected = WorkerRunner.connect_to_master


def connect_until_spawned(self):
    # WorkerRunner's constructor starts its message loop, then waits here for the master's ack; a busy worker's
    # loop may handle the master's spawn (and fire test_start) before the constructor returns, so before
    # Environment holds the runner and main() fires init. This makes it so, every time.
    connected(self)
    deadline = time.monotonic() + 20
    while self.worker_state not in ("spawning", "running") and time.monotonic() < deadline:
        gevent.sleep(0.01)


WorkerRunner.connect_to_master = connect_until_spawned
"""


def test_a_worker_that_handles_its_spawn_before_it_fires_init_runs_its_stage(write_experiment, tmp_path):
    """Locust's start race (issue 35): its test_start came before its init (the extension's set-up was in init),
    and before Environment held the runner (so the set-up took the worker for a standalone process: its
    requests never reached the master). The held constructor above makes the race happen in every run."""
    (tmp_path / "held.py").write_text(HOLD_INIT)
    path = write_experiment(spec_doc(
        injectors={"usersPerInjector": 3, "locustfile": {"path": "held.py"},
                   "waitTime": {"min": "50ms", "max": "100ms"}},
        stages=[{"injectors": 2, "duration": "3s"}]))
    code, _out, err, _ = finish(start_cli("run", path, "-o", tmp_path / "r.json", "--workdir", tmp_path / "w"), 120)
    assert code == 0, err
    (stage,) = json.loads((tmp_path / "r.json").read_text())["status"]["variants"][0]["stages"]
    assert stage["injectors"] == 2 and stage["requests"] > 20 and stage["failures"] == 0, stage
    assert stage["target"]["servedRequests"] == stage["requests"]      # each worker's requests were recorded
    assert stage["injectorPeakCpuPercent"] > 0, stage                   # and its CPU sampled
    logs = [(tmp_path / "w" / "variant-1" / "stage-1" / f"worker-{n}.log").read_text() for n in (1, 2)]
    assert not [log for log in logs if "Traceback" in log], logs


def test_a_task_that_raises_is_counted_and_a_stage_where_every_request_failed_exits_5(write_experiment, tmp_path):
    """Issue 35: it ended Succeeded with 0 errors and exit 0, the tracebacks only in the worker's log."""
    (tmp_path / "raising.py").write_text(
        "from locust import HttpUser, task\n\n"
        "class Raising(HttpUser):\n"
        "    @task\n"
        "    def lookup(self):\n"
        "        self.client.get('/no-such-page')\n"
        "        raise ValueError('no survey')\n")
    path = write_experiment(spec_doc(injectors={"usersPerInjector": 3, "locustfile": {"path": "raising.py"},
                                                "waitTime": {"min": "50ms", "max": "100ms"}},
                                     stages=[{"injectors": 1, "duration": "3s"}]))
    code, out, err, started = finish(start_cli("run", path, "-o", tmp_path / "r.json", "--workdir", tmp_path / "w"), 90)
    assert code == 5, err
    status = json.loads((tmp_path / "r.json").read_text())["status"]
    (stage,) = status["variants"][0]["stages"]
    assert status["phase"] == "Succeeded" and stage["failures"] == stage["requests"] > 10 and stage["errorRate"] == 1
    raised = stage["exceptions"]
    assert raised["top"] == [{"message": "ValueError: no survey", "count": raised["count"]}]
    assert stage["requests"] - 3 <= raised["count"] <= stage["requests"]    # a task stopped mid-way raises nothing
    assert out.splitlines()[-2:] == [
        f"variant 1 stage 1: {raised['count']:,} exception(s) in tasks, most often ValueError: no survey "
        f"({raised['count']})", "variant 1 stage 1: every request failed"]
    assert "1§" in out and "§ its tasks raised exceptions" in out
    assert not alive(started)


@pytest.mark.parametrize("retries", [1, 0])
def test_a_redis_server_killed_mid_stage_reruns_the_stage_or_fails_the_run_naming_redis(write_experiment, tmp_path,
                                                                                         retries):
    """Issue 35: the stage went on with 40% errors, the next one with 100%, and the run Succeeded."""
    path = write_experiment(spec_doc(stageRetries=retries, injectors={"usersPerInjector": 3, "waitTime": {
        "min": "50ms", "max": "100ms"}}, stages=[{"injectors": 1, "duration": "4s"}]))
    proc = start_cli("run", path, "-q", "-o", tmp_path / "r.json", "--workdir", tmp_path / "w")
    redis_server = wait_for(lambda: next((p for p in alive(descendants(proc.pid)) if p.name() == "redis-server"
                                          and (tmp_path / "w" / "variant-1" / "stage-1" / "progress.json").exists()),
                                         None), timeout=60)
    redis_server.kill()                                  # the engine's own child, by its PID
    code, _out, err, started = finish(proc, 90)
    status = json.loads((tmp_path / "r.json").read_text())["status"]
    lost = f"redis-server (pid {redis_server.pid}) exited with code -9; its log: {tmp_path}/w/variant-1/redis.log"
    if retries:
        assert code == 0, err
        (stage,) = status["variants"][0]["stages"]
        (retry,) = stage["retries"]
        assert retry["reason"] == "RedisLost" and retry["cause"].startswith(f"{lost} after ") and stage["attempts"] == 2
        assert stage["failures"] == 0 and stage["redisPeakConnections"] > 0     # a new redis-server served it
    else:
        assert code == 1 and status["phase"] == "Failed" and status["reason"] == "RedisLost"
        assert status["message"].startswith(f"variant 1/1 (gunicorn pods=1 workers=2 threads=2 gthread), stage 1/1: "
                                            f"{lost} after ")
        assert status["message"].endswith("; no retry left (spec.stageRetries: 0)")
        assert status["variants"][0]["stages"] == []
    assert not alive(started)


CRASHING_WORKERS = """
import os

answered = 0


def app(environ, start_response):
    global answered
    answered += 1
    if answered > 20:
        os._exit(7)         # a worker that dies every 20 requests: gunicorn starts another
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""


def test_gunicorn_workers_that_die_mid_stage_are_restarts_and_the_stage_is_not_steady(write_experiment, tmp_path):
    """Issue 35: the pod's log said `Worker (pid:...) exited with code 7` three times, and the run was steady."""
    (tmp_path / "crashing.py").write_text(CRASHING_WORKERS)
    (tmp_path / "reader.py").write_text("from locust import HttpUser, task\n\n"
                                        "class Reader(HttpUser):\n"
                                        "    @task\n"
                                        "    def page(self):\n"
                                        "        self.client.get('/')\n")
    path = write_experiment(spec_doc(
        target={"app": "crashing:app", "env": {"PYTHONPATH": str(tmp_path)}}, thresholds={"p99": "10s"},
        injectors={"usersPerInjector": 3, "waitTime": {"min": "20ms", "max": "50ms"},
                   "locustfile": {"path": "reader.py"}},
        stages=[{"injectors": 1, "duration": "4s"}]))
    code, out, err, _started = finish(start_cli("run", path, "-o", tmp_path / "r.json",
                                                "--workdir", tmp_path / "w"), 90)
    assert code == 0, err
    (variant,) = json.loads((tmp_path / "r.json").read_text())["status"]["variants"]
    (stage,) = variant["stages"]
    (pod,) = stage["target"]["pods"]
    assert pod["pod"] == "gunicorn pod 1" and stage["target"]["restarts"] == pod["restarts"] >= 2
    assert pod["causes"] == [f"Worker exited with code 7 ({pod['restarts']} times)"], pod
    assert stage["verdict"]["passed"] is True and variant["capacity"] is None     # it passed, but does not count
    assert "1†" in out and "† the target was not steady during the stage" in out
    assert f"variant 1 stage 1: target {pod['restarts']} restart(s)" in out


def test_a_crashing_injector_fails_the_stage_with_its_cause(write_experiment, tmp_path):
    (tmp_path / "broken.py").write_text(
        "from locust import HttpUser, task\n\n"
        "class Broken(HttpUser):\n"
        "    @task\n"
        "    def start(self):  # shadows User.start: every user fails to spawn\n"
        "        pass\n")
    path = write_experiment(spec_doc(injectors={"locustfile": {"path": "broken.py"}},
                                     stages=[{"injectors": 1, "duration": "3s"}]))
    code, _out, err, started = finish(start_cli("run", path, "-o", tmp_path / "r.json",
                                                "--workdir", tmp_path / "w"), 90)
    assert code == 1
    assert "locust worker 1 exited with code 2" in err
    assert "cause: TypeError: Broken.start() takes 1 positional argument but 2 were given" in err
    assert not alive(started)
    status = json.loads((tmp_path / "r.json").read_text())["status"]
    assert status["phase"] == "Failed" and status["variants"][0]["stages"] == []
    assert status["reason"] == "InjectorLost"


@pytest.mark.parametrize("on_lost", ["Fail", "Continue"])
def test_an_injector_lost_mid_stage_fails_the_stage_or_is_recorded(write_experiment, tmp_path, on_lost):
    path = write_experiment(spec_doc(
        injectors={"usersPerInjector": 5, "waitTime": {"min": "10ms", "max": "50ms"}, "onLost": on_lost},
        stages=[{"injectors": 2, "duration": "8s"}]))
    proc = start_cli("run", path, "-o", tmp_path / "r.json", "--workdir", tmp_path / "w")
    workers = wait_for(lambda: locust_workers(proc)[1:], timeout=60)
    wait_for(lambda: progress(tmp_path / "w" / "variant-1" / "stage-1").get("requests", 0) > 0, timeout=30)
    workers[0].kill()
    killed_at = time.monotonic()
    code, _out, err, _ = finish(proc, 60)
    status = json.loads((tmp_path / "r.json").read_text())["status"]
    if on_lost == "Fail":
        assert code == 1 and time.monotonic() - killed_at < 30
        assert status["phase"] == "Failed" and status["reason"] == "InjectorLost"
        assert "stage 1/1: locust worker" in status["message"] and "exited with code -9" in status["message"]
    else:
        assert code == 0, err
        (stage,) = status["variants"][0]["stages"]
        assert stage["requests"] > 0 and stage["lostInjectors"]["count"] == 1
        (lost,) = stage["lostInjectors"]["injectors"]
        assert lost["injector"].startswith("locust worker ") and lost["cause"].startswith("exited with code -9 after ")


@pytest.mark.alone   # its figures need the CPU to itself
def test_pacing_shows_the_stall_that_the_closed_model_hides(write_experiment, tmp_path):
    """A target that stops the world for 2 s in every 10 s. In a closed model each user has one request
    waiting through a stall, so few samples are slow; measured from each task's intended start, every
    slot the stall made late counts. (Stalls follow the wall clock: with one in every 10 s, a 20 s stage
    holds a whole one at least 8 s before its end wherever it starts. One in every 20 s could fall in the
    stage's last seconds, where the late slots are never run, and the test failed so once.)"""
    path = write_experiment(spec_doc(
        target={"pods": 1, "workers": 1, "threads": 8, "env": {"RUNNER_STALL": "every=10s,for=2s"}},
        injectors={"usersPerInjector": 5, "pacing": "50ms"},
        stages=[{"injectors": 1, "duration": "20s"}]))
    out_file = tmp_path / "result.json"
    code, _out, err, _ = finish(start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w"), 180)
    assert code == 0, err
    stage = json.loads(out_file.read_text())["status"]["variants"][0]["stages"][0]
    raw, corrected = stage["latencyMs"], stage["correctedLatencyMs"]
    assert 1500 <= stage["requests"] <= 2100, stage["requests"]   # 5 users x 20 s / 50 ms, minus the stall
    assert raw["max"] >= 900, raw                # a request did wait through a stall...
    assert raw["p99"] < 100, raw                 # ...but so few that the raw p99 does not show it
    assert corrected["p99"] > 500 and corrected["p99"] > 10 * raw["p99"], (raw, corrected)
    assert corrected["n"] == raw["n"] == stage["requests"]


@pytest.mark.alone   # its figures need the CPU to itself
def test_an_injector_that_saturates_its_cpu_marks_the_stage_and_gets_no_capacity(write_experiment, tmp_path):
    (tmp_path / "heavy.py").write_text(
        "import hashlib\n"
        "from locust import FastHttpUser, constant, task\n\n"
        "class HeavyClient(FastHttpUser):\n"
        "    wait_time = constant(0)\n\n"
        "    @task\n"
        "    def page(self):\n"
        "        self.client.get('/surveys/none/pages/1', name='/page')\n"
        "        hashlib.sha256(b'x' * 8_000_000).digest()  # as parsing a large page would\n")
    path = write_experiment(spec_doc(
        target={"pods": 1, "workers": 1, "threads": 4},
        injectors={"usersPerInjector": 20, "locustfile": {"path": "heavy.py"}},
        stages=[{"injectors": 1, "duration": "8s"}], thresholds={"p99": "500ms"}))
    out_file = tmp_path / "result.json"
    code, out, err, _ = finish(start_cli("run", path, "-o", out_file, "--workdir", tmp_path / "w"), 120)
    assert code == 0, err
    variant = json.loads(out_file.read_text())["status"]["variants"][0]
    stage = variant["stages"][0]
    assert stage["injectorPeakCpuPercent"] > 90 and stage["injectorBound"] is True, stage
    assert stage["saturation"]["injectorCpuShare"] > 0.9 and stage["saturation"]["crossed"][0] == "Injectors", \
        stage["saturation"]
    assert stage["verdict"]["passed"] is True and variant["capacity"] is None
    assert "pass (injector-bound)" in out and "its injectors were CPU-bound" in out
    print("\n" + "\n".join(line for line in out.splitlines() if "Injectors" in line or "injector-bound" in line))


def test_interleaved_repeats_restart_each_variants_target_and_merge_the_repeats(write_experiment, tmp_path):
    path = write_experiment(spec_doc(
        target={"workers": 1}, repeats=3, order="Interleaved",
        injectors={"usersPerInjector": 5, "waitTime": {"min": "5ms", "max": "20ms"}},
        stages=[{"injectors": 1, "duration": "2s"}], matrix={"threads": [1, 4]}))
    workdir = tmp_path / "w"
    code, out, err, started = finish(start_cli("run", path, "-o", tmp_path / "r.json", "--workdir", workdir), 240)
    assert code == 0, err
    assert not alive(started)
    # the order the stages ran in: each variant's stage in turn, once per repeat, each on a target of its own
    ran = sorted(workdir.glob("variant-*/**/stage-1/summary.json"), key=lambda f: f.stat().st_mtime_ns)
    assert [str(f.parent.relative_to(workdir)) for f in ran] == [
        "variant-1/stage-1", "variant-2/stage-1", "variant-1/repeat-2/stage-1", "variant-2/repeat-2/stage-1",
        "variant-1/repeat-3/stage-1", "variant-2/repeat-3/stage-1"]
    assert all((workdir / f"variant-{v}" / target / "pod-1.log").is_file()
               for v in (1, 2) for target in ("", "target-2", "target-3"))
    result = json.loads((tmp_path / "r.json").read_text())
    for variant in result["status"]["variants"]:
        (stage,) = variant["stages"]
        repeats = [r["stages"][0] for r in variant["repeats"]]
        assert len(repeats) == 3 and all(r["requests"] > 0 for r in repeats)
        assert stage["repeats"] == 3 and stage["requests"] == sum(r["requests"] for r in repeats)
        assert stage["latencyMs"]["n"] == stage["requests"]          # one merged histogram of every repeat
        p99s = sorted(r["latencyMs"]["p99"] for r in repeats)
        assert stage["trimmedMean"]["p99"] == pytest.approx(p99s[1], rel=1e-3)
        intervals = stage["intervals"]
        assert intervals["method"] == "repeats" and intervals["p99"][0] <= p99s[1] <= intervals["p99"][1]
        assert variant["aggregate"]["intervals"]["method"] == "repeats"
    assert [(a["variant"], a.get("repeat", 1)) for a in result["artifacts"]] == \
        [(v, r) for v in (1, 2) for r in (1, 2, 3)]
    assert "Per repeat" in out
