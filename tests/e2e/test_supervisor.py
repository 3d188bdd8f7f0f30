"""The local engine's supervisor stops a target's processes together: each is told to stop before any is
waited on, so a variant's end costs the slowest process's shutdown, not their sum."""

import sys

import pytest

from loadstage.local.processes import Supervisor
from support.waiting import wait_for

pytestmark = pytest.mark.e2e

SLOW_TO_STOP = """
import signal, sys, time
def on_term(*_):
    print("term", time.time(), flush=True)
    time.sleep(1.0)
    print("exit", time.time(), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("up", flush=True)
time.sleep(60)
"""


def test_processes_stopped_together_are_each_told_before_any_is_waited_on(tmp_path):
    supervisor = Supervisor()
    children = [supervisor.start(f"slow {i}", [sys.executable, "-c", SLOW_TO_STOP], log_path=tmp_path / f"{i}.log")
                for i in range(3)]
    try:
        for child in children:
            wait_for(lambda child=child: "up" in child.log_path.read_text(), explain=child.tail)
        supervisor.stop_together(children, timeout=10.0)
    finally:
        supervisor.stop_all()
    assert [c.process.returncode for c in children] == [0, 0, 0]   # each finished its own shutdown
    said = [dict(line.split() for line in c.log_path.read_text().splitlines() if " " in line) for c in children]
    assert max(float(s["term"]) for s in said) < min(float(s["exit"]) for s in said), said
    assert supervisor.children == []
