"""A server's log read for its workers: deaths without their pids, counted per pod from where a stage began (the
local engine's restarts); boots alone are not restarts."""

from dataclasses import dataclass
from pathlib import Path

from loadstage.api.status import TargetPodHealth
from loadstage.samplers.worker_log import log_size, worker_deaths, worker_restarts, workers_started

GUNICORN = """[2026-11-26 13:10:01 +0000] [11] [INFO] Booting worker with pid: 12
[2026-11-26 13:10:01 +0000] [11] [INFO] Booting worker with pid: 13
"""
GUNICORN_STAGE = """[2026-11-26 13:10:09 +0000] [11] [ERROR] Worker (pid:12) exited with code 7
[2026-11-26 13:10:09 +0000] [11] [INFO] Booting worker with pid: 30
[2026-11-26 13:10:09 +0000] [11] [ERROR] Worker (pid:30) exited with code 7
[2026-11-26 13:10:09 +0000] [11] [INFO] Booting worker with pid: 31
[2026-11-26 13:10:10 +0000] [11] [CRITICAL] WORKER TIMEOUT (pid:13)
[2026-11-26 13:10:10 +0000] [11] [ERROR] Worker (pid:13) was sent SIGKILL! Perhaps out of memory?
[2026-11-26 13:10:10 +0000] [11] [INFO] Booting worker with pid: 32
"""
UWSGI_STAGE = """DAMN ! worker 1 (pid: 4412) died, killed by signal 9 :( trying respawn ...
Respawned uWSGI worker 1 (new pid: 4460)
DAMN ! worker 2 (pid: 4413) died :( trying respawn ...
"""

UVICORN = """INFO:     Started parent process [2922]
INFO:     Started server process [2926]
INFO:     Started server process [2925]
INFO:     Child process [2925] died
INFO:     Started server process [2995]
"""
HYPERCORN = """[2026-11-27 02:11:06 +0000] [3006] [INFO] Running on http://127.0.0.1:18124 (CTRL + C to quit)
[2026-11-27 02:11:06 +0000] [3007] [INFO] Running on http://127.0.0.1:18124 (CTRL + C to quit)
"""


@dataclass
class Pod:
    name: str
    log_path: Path


def test_deaths_are_named_without_their_pids():
    assert worker_deaths("uwsgi", UWSGI_STAGE) == ["worker 1 died, killed by signal 9", "worker 2 died"]
    assert worker_deaths("granian", GUNICORN_STAGE) == []
    assert worker_deaths("uvicorn", UVICORN) == ["Child process died"]


def test_the_asgi_servers_logs_count_their_workers():
    # real lines: uvicorn --workers 2 with a worker killed (it starts another); hypercorn --workers 2
    assert workers_started("uvicorn", UVICORN) == 3 and workers_started("hypercorn", HYPERCORN) == 2


def test_only_what_the_log_says_after_the_stage_began_counts(tmp_path):
    quiet, crashing = tmp_path / "pod-1.log", tmp_path / "pod-2.log"
    quiet.write_text(GUNICORN)
    crashing.write_text(GUNICORN)
    pods = [Pod("gunicorn pod 1", quiet), Pod("gunicorn pod 2", crashing)]
    began = [log_size(quiet), log_size(crashing)]
    with crashing.open("a") as log:
        log.write(GUNICORN_STAGE)
    assert worker_restarts("gunicorn", pods, began) == (TargetPodHealth(
        "gunicorn pod 2", 4, 0.0, ("Worker exited with code 7 (2 times)", "WORKER TIMEOUT",
                                   "Worker was sent SIGKILL! Perhaps out of memory?")),)
    # the workers booted after a ready server (its first worker answered the probe) died nowhere
    assert worker_restarts("gunicorn", [Pod("gunicorn pod 1", quiet)], [0]) == ()
    assert worker_restarts("bjoern", pods, began) is None                  # its log does not tell


def test_a_log_that_says_its_server_calls_the_app_in_the_other_interface_names_it(tmp_path):
    """The lines real servers logged (gunicorn and granian over WSGI on an ASGI app; uvicorn and granian over
    ASGI on a WSGI app)."""
    from loadstage.samplers.worker_log import interface_mismatch

    @dataclass
    class Pod:
        name: str
        log_path: Path
    lines = {
        "TypeError: asgi_app() missing 1 required positional argument: 'send'": "an ASGI app, which its server calls "
                                                                                "as WSGI",
        "TypeError: wsgi_app() missing 1 required positional argument: 'start_response'": "a WSGI app, which its "
                                                                                          "server calls as ASGI",
        "TypeError: wsgi_app() takes 2 positional arguments but 3 were given": "a WSGI app, which its server calls as "
                                                                               "ASGI",
    }
    for n, (line, what) in enumerate(lines.items()):
        path = tmp_path / f"pod-{n}.log"
        path.write_text(f"{line}\n")
        assert interface_mismatch([Pod("pod 1", path)], [0]) == f"the app is {what} (pod 1's log: {line})"
        assert interface_mismatch([Pod("pod 1", path)], [len(line) + 1]) is None   # before the stage: not its
    path.write_text(GUNICORN + GUNICORN_STAGE)
    assert interface_mismatch([Pod("pod 1", path)], [0]) is None
