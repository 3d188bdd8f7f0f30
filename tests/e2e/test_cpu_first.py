"""The suite's fair_cpu tests get the CPU first (tests/support/cpu_first.py): they and what they start sit in a
cgroup that outweighs the other workers' processes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadstage.local.cgroups import _own_paths
from support.cpu_first import SHARES, cpu_first, cpu_hierarchy

pytestmark = pytest.mark.e2e


def cpu_cgroup() -> str:
    return _own_paths(Path("/proc/self/cgroup").read_text())["cpu"]


@pytest.mark.skipif(os.geteuid() != 0 or cpu_hierarchy() is None, reason="cgroup v1 and root")
def test_a_fair_cpu_tests_process_and_its_children_weigh_32_processes_and_are_put_back_after():
    before, own = cpu_cgroup(), cpu_hierarchy()
    first = own / f"loadstage-cpu-first-{os.getpid()}"
    with cpu_first():
        assert cpu_cgroup() == f"{before.rstrip('/')}/{first.name}"
        child = subprocess.run([sys.executable, "-c", "print(open('/proc/self/cgroup').read())"],
                               capture_output=True, text=True, check=True).stdout
        assert f"/{first.name}\n" in child
        assert (first / "cpu.shares").read_text().strip() == str(SHARES) == "32768"
    assert cpu_cgroup() == before
    assert not first.exists()
