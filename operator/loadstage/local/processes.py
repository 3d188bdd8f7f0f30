"""Child processes of the local engine: each in its own process group, logged to a
file, and stopped by process group (SIGTERM, then SIGKILL). Children also get a
parent-death signal (set by util-linux's setpriv, not in a forked child of this
threaded process), so even a SIGKILLed engine leaves no process behind."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from loadstage.local.cgroups import PodCgroup

DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "TERM", "--"]


def resolve_executable(name: str) -> str:
    """Prefer the tool installed beside this Python (the project's virtualenv)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


class Forked:
    """A process the warm launcher forked, as much of a Popen as the supervisor uses: its exit code comes from
    the launcher, which reaps it."""

    def __init__(self, pid: int, argv: list[str]):
        self.pid, self.args = pid, argv
        self.returncode: int | None = None
        self._ended = threading.Event()

    def end(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class WarmLauncher:
    """The engine's side of loadstage.locust.launcher: starts it (its imports overlap the target's start) and
    asks it for Locust processes. Should it be gone, `spawn` says so with None and the caller starts the
    process afresh."""

    READY_SECONDS = 60.0

    def __init__(self, log_path: Path, cwd: Path):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [*DIE_WITH_PARENT, sys.executable, "-m", "loadstage.locust.launcher"]
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=cwd,
                                            start_new_session=True)
        self.child = Child("warm launcher", argv, self.process, log_path)
        self.ready = threading.Event()
        self._lock = threading.Lock()
        self._next_id = 0
        self._replies: dict[int, tuple[queue.Queue, list[str]]] = {}
        self._forked: dict[int, Forked] = {}
        self._gone = False
        threading.Thread(target=self._read, name="warm-launcher", daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            words = raw.decode().split()
            if words == ["ready"]:
                self.ready.set()
            elif words[:1] == ["started"]:   # always read before the same process's "exited"
                with self._lock:
                    reply, argv = self._replies.pop(int(words[1]))
                    forked = self._forked[int(words[2])] = Forked(int(words[2]), argv)
                reply.put(forked)
            elif words[:1] == ["exited"]:
                with self._lock:
                    ended = self._forked.pop(int(words[1]), None)
                if ended is not None:
                    ended.end(int(words[2]))
        with self._lock:   # the launcher is gone, and with it (SIGTERM) whatever it forked
            self._gone = True
            gone, self._forked = list(self._forked.values()), {}
            waiting = [reply for reply, _ in self._replies.values()]
        for forked in gone:
            forked.end(-signal.SIGTERM)
        for reply in waiting:
            reply.put(None)
        self.ready.set()

    def spawn(self, argv: list[str], *, log_path: Path, cwd: Path | None,
              cgroup: PodCgroup | None, env: dict[str, str] | None) -> Forked | None:
        if not self.ready.wait(self.READY_SECONDS):
            return None
        reply: queue.Queue = queue.Queue()
        with self._lock:
            if self._gone:
                return None
            self._next_id += 1
            ident = self._next_id
            self._replies[ident] = (reply, argv)
        request = {"id": ident, "argv": argv, "cwd": str(cwd or os.getcwd()), "log": str(log_path),
                   "cgroups": [str(d / "cgroup.procs") for d in cgroup.directories] if cgroup else [],
                   "env": env or {}}
        try:
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
            return reply.get(timeout=self.READY_SECONDS)
        except (OSError, queue.Empty):
            return None

    def close_input(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | Forked
    log_path: Path
    cgroup: PodCgroup | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 8) -> str:
        """The end of the log, led by the last exception line (the cause, when a traceback follows)."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        causes = [line for line in text if re.match(r"^[\w.]*(Error|Exception)\b.*: ", line)]
        end = text[-lines:]
        lead = [f"cause: {causes[0]}"] if causes else []
        return "\n".join(lead + end)


class Supervisor:
    def __init__(self):
        self.children: list[Child] = []
        self.launcher: WarmLauncher | None = None
        self._terminated: set[int] = set()   # told to stop (SIGTERM), not yet waited for

    def warm_up(self, log_path: Path, cwd: Path) -> None:
        """From now on Locust processes (`start(..., warm=True)`) are forked from a warm launcher."""
        self.launcher = WarmLauncher(log_path, cwd)

    def start(self, name: str, argv: list[str], *, log_path: Path, env: dict[str, str] | None = None,
              cwd: Path | None = None, cgroup: PodCgroup | None = None, umask: int = -1,
              warm: bool = False) -> Child:
        """Starts `argv` (inside `cgroup`, with its limits, from its first instruction on); `umask`: its own,
        where it must differ from ours; `warm`: a Locust command line, forked from the warm launcher if there
        is one."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        if warm and self.launcher is not None and umask == -1:
            forked = self.launcher.spawn(argv, log_path=log_path, cwd=cwd, cgroup=cgroup, env=env)
            if forked is not None:
                child = Child(name, argv, forked, log_path, cgroup)
                self.children.append(child)
                return child
        join = cgroup.join_argv() if cgroup is not None else []
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [*DIE_WITH_PARENT, *join, resolve_executable(argv[0]), *argv[1:]], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd,
                start_new_session=True, umask=umask)
        child = Child(name, argv, process, log_path, cgroup)
        self.children.append(child)
        return child

    def stop(self, child: Child, timeout: float = 10.0, *, at_once: bool = False) -> None:
        """SIGTERM, and SIGKILL after `timeout`; `at_once`: SIGKILL, for a process with nothing left to do."""
        self.stop_together([child], timeout, at_once=at_once)

    def terminate(self, children: list[Child]) -> None:
        """SIGTERM to each, once, without waiting: `stop` or `stop_together` waits for them later."""
        for child in children:
            if child.pid not in self._terminated:
                self._terminated.add(child.pid)
                self._signal(child, signal.SIGTERM)

    @staticmethod
    def _signal(child: Child, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sig)

    def stop_together(self, children: list[Child], timeout: float = 10.0, *, at_once: bool = False) -> None:
        """Stops `children` as `stop` does, all at once: each has the same `timeout` from now."""
        left = list(children)
        if not at_once:
            self.terminate(left)
            left = self._wait(left, timeout)
        for child in left:
            self._signal(child, signal.SIGKILL)
        self._wait(left, 5.0)
        for child in children:
            self._reap_group(child.pid)
            self._terminated.discard(child.pid)
            if child.cgroup is not None:
                child.cgroup.remove()
            if child in self.children:
                self.children.remove(child)

    @staticmethod
    def _wait(children: list[Child], seconds: float) -> list[Child]:
        """Waits up to `seconds` in all for `children` to exit; returns those still running."""
        deadline = time.monotonic() + seconds
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(max(0.0, deadline - time.monotonic()))
        return [child for child in children if child.alive()]

    @staticmethod
    def _reap_group(pgid: int) -> None:
        # A group leader can exit before its children (gunicorn workers); kill any left.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def stop_all(self) -> None:
        self.stop_together(list(reversed(self.children)))
        if self.launcher is not None:   # what it forked is stopped by now: SIGTERM spares Python's own shutdown
            self.stop(self.launcher.child, timeout=5.0)
            self.launcher.close_input()
            self.launcher = None
