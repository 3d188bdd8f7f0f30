"""Child processes of the local engine: each in its own process group, logged to a
file, and stopped by process group (SIGTERM, then SIGKILL). Children also get a
parent-death signal (set by util-linux's setpriv, not in a forked child of this
threaded process), so even a SIGKILLed engine leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from loadstage.local.cgroups import PodCgroup

DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "TERM", "--"]


def resolve_executable(name: str) -> str:
    """Prefer the tool installed beside this Python (the project's virtualenv)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen
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

    def start(self, name: str, argv: list[str], *, log_path: Path, env: dict[str, str] | None = None,
              cwd: Path | None = None, cgroup: PodCgroup | None = None, umask: int = -1) -> Child:
        """Starts `argv` (inside `cgroup`, with its limits, from its first instruction on); `umask`: its own,
        where it must differ from ours."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        join = cgroup.join_argv() if cgroup is not None else []
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [*DIE_WITH_PARENT, *join, resolve_executable(argv[0]), *argv[1:]], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd,
                start_new_session=True, umask=umask)
        child = Child(name, argv, process, log_path, cgroup)
        self.children.append(child)
        return child

    def stop(self, child: Child, timeout: float = 10.0) -> None:
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                pass
            try:
                child.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self._reap_group(child.pid)
        if child.cgroup is not None:
            child.cgroup.remove()
        if child in self.children:
            self.children.remove(child)

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
        for child in reversed(list(self.children)):
            self.stop(child)
