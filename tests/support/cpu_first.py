"""The CPU first for a test's processes, as the real node's pods have it (tools/cluster/realnode/up.sh): the
test's process moves into a cgroup of its own with a large `cpu.shares`, and what it starts (its `loadstage
run`s, their servers and Locusts, and the cgroups those make for their pods) goes below it, so that together
they weigh 32 of the root cgroup's processes. cgroup v1 and root only: elsewhere the test runs where it is."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from loadstage.local.cgroups import _inside, _mounts, _own_paths

SHARES = 16 * 2 * 1024    # as the real node's kubepods: 16 times two cores' worth


def cpu_hierarchy() -> Path | None:
    """This process's cgroup in the v1 hierarchy of the cpu controller, where it is mounted (read as the local
    engine reads it for its pods' cgroups)."""
    v1, _ = _mounts(Path("/proc/self/mountinfo").read_text())
    own = _own_paths(Path("/proc/self/cgroup").read_text())
    return _inside(v1["cpu"], own["cpu"]) if "cpu" in v1 and "cpu" in own else None


@contextlib.contextmanager
def cpu_first():
    own = cpu_hierarchy() if os.geteuid() == 0 else None
    if own is None:
        yield
        return
    first = own / f"loadstage-cpu-first-{os.getpid()}"
    first.mkdir(exist_ok=True)
    (first / "cpu.shares").write_text(str(SHARES))
    (first / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        (own / "cgroup.procs").write_text(str(os.getpid()))
        with contextlib.suppress(OSError):    # a child the test left running keeps it; the next test reuses it
            first.rmdir()
