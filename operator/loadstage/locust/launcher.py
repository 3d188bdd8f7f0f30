"""The local engine's warm launcher (loadstage.local.processes starts it): one process per local run that
imports Locust, and what loadstage's extension needs, once while the target starts, then forks every Locust
master and worker of the run from itself. A forked process skips the interpreter's start and those imports
(most of a stage's start-up: about 0.4 s here, over a second on a slower machine) and runs Locust's own
`main()` with the command line a container would run.

The engine talks to it over its stdin and stdout, a line each:
  -> {"id": n, "argv": [...], "cwd": ..., "log": ..., "cgroups": [cgroup.procs, ...], "env": {...}}
  <- "ready" once, then "started n PID" and, when a forked process ends, "exited PID CODE"
Each forked process leads its own process group, joins its cgroups before Locust starts, and gets SIGTERM
should the launcher die (which itself dies with the engine)."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import traceback
from pathlib import Path

from setproctitle import setproctitle

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _run(request: dict, launcher: int) -> None:
    """In the forked process: becomes the command line's Locust process, and exits with its code."""
    code = 1
    try:
        os.setsid()
        _die_with_parent()
        if os.getppid() != launcher:   # the launcher died before the line above: nobody would stop this
            return
        for procs in request.get("cgroups") or []:
            Path(procs).write_text(str(os.getpid()))
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(nothing)
        os.chdir(request["cwd"])
        os.environ.update(request.get("env") or {})
        sys.argv = list(request["argv"])
        setproctitle(" ".join(sys.argv))   # what ps shows: the command line, not the launcher's
        from locust.main import main
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)   # as Python itself does at exit
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    import gevent.pywsgi  # noqa: F401  (each import below is paid here, once)
    import hdrh.histogram  # noqa: F401
    import locust.contrib.fasthttp
    import locust.main  # noqa: F401
    import prometheus_client  # noqa: F401
    import psutil  # noqa: F401
    from gevent import monkey
    from gevent.os import fork_gevent

    import loadstage.locust.live
    import loadstage.locust.recorder
    import loadstage.locust.served_count
    import loadstage.locust.summary
    import loadstage.results.artifact
    import loadstage.results.live_series  # noqa: F401
    waitpid = monkey.get_original("os", "waitpid")
    select = monkey.get_original("select", "select")

    def say(line: str) -> None:
        os.write(1, (line + "\n").encode())

    launcher = os.getpid()
    say("ready")
    pending = b""
    while True:
        readable, _, _ = select([0], [], [], 0.1)
        if readable:
            chunk = os.read(0, 65536)
            if not chunk:
                return          # the engine is gone; what was forked gets SIGTERM as this exits
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = fork_gevent()
                if pid == 0:
                    _run(request, launcher)
                say(f"started {request['id']} {pid}")
        while True:
            try:
                pid, status = waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            say(f"exited {pid} {os.waitstatus_to_exitcode(status)}")


if __name__ == "__main__":
    serve()
