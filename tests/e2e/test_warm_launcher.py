"""The local engine's warm launcher (loadstage.locust.launcher) with real Locust command lines: exit codes
and logs come back as from a started process, and a launcher that is gone takes what it forked with it and
leaves the engine to start processes afresh."""

import os
import signal
import time

import psutil
import pytest

from loadstage.local.processes import Forked, Supervisor
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.e2e


def _supervisor(tmp_path) -> Supervisor:
    supervisor = Supervisor()
    supervisor.warm_up(tmp_path / "launcher.log", ROOT)
    assert supervisor.launcher is not None and supervisor.launcher.ready.wait(60)
    return supervisor


def test_a_forked_locust_command_line_exits_and_logs_as_the_same_command_line_started_afresh(tmp_path):
    supervisor = _supervisor(tmp_path)
    try:
        for argv, code in ((["locust", "--version"], 0), (["locust", "-f", "no-such-file.py", "--headless"], 1)):
            forked = supervisor.start("forked", argv, log_path=tmp_path / "forked.log", cwd=ROOT, warm=True)
            afresh = supervisor.start("afresh", argv, log_path=tmp_path / "afresh.log", cwd=ROOT)
            assert isinstance(forked.process, Forked) and not isinstance(afresh.process, Forked)
            assert forked.process.wait(30) == afresh.process.wait(30) == code, argv
            said = [(tmp_path / f"{name}.log").read_text().splitlines()[-1] for name in ("forked", "afresh")]
            assert said[0] == said[1] and ("locust 2." in said[0] or "no-such-file.py" in said[0]), said
            for name in ("forked", "afresh"):
                (tmp_path / f"{name}.log").unlink()
    finally:
        supervisor.stop_all()


def test_a_launcher_that_is_gone_ends_what_it_forked_and_processes_start_afresh(tmp_path):
    supervisor = _supervisor(tmp_path)
    try:
        waiting = supervisor.start("waiting", ["locust", "-f", "injectors/hello.py", "--worker", "--master-port",
                                               "9", "--master-host", "127.0.0.1"],
                                   log_path=tmp_path / "worker.log", cwd=ROOT, warm=True)
        forked = psutil.Process(waiting.pid)
        wait_for(lambda: "--worker" in " ".join(forked.cmdline()), timeout=10)   # ps shows its command line
        assert os.getpgid(waiting.pid) == waiting.pid
        launcher = supervisor.launcher.process
        os.killpg(launcher.pid, signal.SIGKILL)
        assert waiting.process.wait(10) == -signal.SIGTERM
        wait_for(lambda: not psutil.pid_exists(waiting.pid) or forked.status() == psutil.STATUS_ZOMBIE, timeout=10)
        began = time.monotonic()
        afresh = supervisor.start("afresh", ["locust", "--version"], log_path=tmp_path / "a.log", cwd=ROOT,
                                  warm=True)
        assert not isinstance(afresh.process, Forked) and time.monotonic() - began < 5
        assert afresh.process.wait(30) == 0
    finally:
        supervisor.stop_all()
