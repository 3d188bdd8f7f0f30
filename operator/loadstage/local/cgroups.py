"""Resource limits of local processes, enforced the way a kubelet enforces a pod's: each local pod (a
server instance, redis-server, a Locust process) runs in a cgroup of its own, with the CPU quota (CFS,
100 ms periods), the CPU shares of its request and the memory limit of its pod. The cgroups are made
through the cgroup filesystem, v1 or v2, which needs root; without it, limits are refused (see
`unavailable`). The CPU a pod used is read from its cgroup, exact to the nanosecond."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from loadstage.api.quantities import cpu_cores, memory_bytes
from loadstage.api.types import Resources
from loadstage.results.saturation import Counters

CFS_PERIOD_US = 100_000
V1_CONTROLLERS = ("cpu", "cpuacct", "memory")
PREFIX = "loadstage-"
REMOVE_WAIT_SECONDS = 5.0
# Runs as the pod's first process: moves itself into each cgroup, then becomes the pod's command.
JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class CgroupsUnavailable(Exception):
    """Why this machine cannot give local processes resource limits."""


def _mounts(mountinfo: str) -> tuple[dict[str, tuple[Path, str]], tuple[Path, str] | None]:
    """v1 hierarchies by controller, and the v2 hierarchy: (mount point, root of the mount)."""
    v1, v2 = {}, None
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        root, mount_point, fstype, options = fields[3], Path(fields[4]), fields[dash + 1], fields[dash + 3]
        if fstype == "cgroup":
            for controller in options.split(","):
                v1[controller] = (mount_point, root)
        elif fstype == "cgroup2":
            v2 = (mount_point, root)
    return v1, v2


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """This process's cgroup in each hierarchy, by controller ('' for v2)."""
    paths = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _inside(mount: tuple[Path, str], path: str) -> Path:
    mount_point, root = mount
    relative = path[len(root):] if root != "/" and path.startswith(root) else path
    return mount_point / relative.lstrip("/")


def _keyed(text: str) -> dict[str, int]:
    """'name value' lines (cpu.stat, memory.oom_control, memory.events)."""
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            found[key] = int(value)
    return found


@dataclass
class PodCgroup:
    """One local pod's cgroup (a directory per v1 hierarchy, or one v2 directory)."""
    name: str
    directories: list[Path]
    usage_file: Path
    version: int
    cpu_stat_file: Path | None = None
    oom_file: Path | None = None      # v1 memory.oom_control, v2 memory.events: both count oom_kill

    def counters(self) -> Counters | None:
        """Its throttling and OOM kills so far; None where the kernel does not say."""
        try:
            cpu = _keyed(self.cpu_stat_file.read_text()) if self.cpu_stat_file else {}
            memory = _keyed(self.oom_file.read_text()) if self.oom_file else {}
        except OSError:
            return None
        if "nr_periods" not in cpu or "oom_kill" not in memory:
            return None
        return Counters(cpu["nr_periods"], cpu.get("nr_throttled", 0), memory["oom_kill"])

    def join_argv(self) -> list[str]:
        """The command prefix that runs a command inside this cgroup."""
        return ["sh", "-c", JOIN_SCRIPT, "loadstage-cgroup-join",
                *(str(d / "cgroup.procs") for d in self.directories), "--"]

    def cpu_seconds(self) -> float:
        """CPU time used by every process that ever ran in the cgroup."""
        text = self.usage_file.read_text()
        if self.version == 1:
            return int(text) / 1e9
        return next(int(line.split()[1]) for line in text.splitlines() if line.startswith("usage_usec")) / 1e6

    def remove(self) -> None:
        _remove(self.directories)


def _remove(directories: list[Path]) -> None:
    """rmdir, retried while the kernel still counts an exiting process; what is left then, the next run
    removes (`_remove_stale`)."""
    deadline = time.monotonic() + REMOVE_WAIT_SECONDS
    for directory in directories:
        while directory.exists():
            try:
                directory.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)


class Cgroups:
    """This run's cgroups: one directory per hierarchy, `loadstage-<pid>` under this process's own cgroup
    (v2: under the hierarchy's root, since a v2 cgroup with processes cannot have controllers below it)."""

    def __init__(self, version: int, bases: dict[str, Path]):
        self.version, self.bases = version, bases
        self.pods: list[PodCgroup] = []

    @classmethod
    def plan(cls, *, mountinfo: str | None = None, proc_cgroup: str | None = None,
             euid: int | None = None) -> Cgroups:
        """Where this run's cgroups go, nothing made yet; raises CgroupsUnavailable with the reason where this
        machine cannot make them."""
        euid = os.geteuid() if euid is None else euid
        if euid != 0:
            raise CgroupsUnavailable(f"the local engine sets limits through the cgroup filesystem, which needs root "
                                     f"(this is uid {euid})")
        mountinfo = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
        proc_cgroup = Path("/proc/self/cgroup").read_text() if proc_cgroup is None else proc_cgroup
        v1, v2 = _mounts(mountinfo)
        own = _own_paths(proc_cgroup)
        name = f"{PREFIX}{os.getpid()}"
        if all(c in v1 for c in V1_CONTROLLERS):
            return cls(1, {c: _inside(v1[c], own.get(c, "/")) / name for c in V1_CONTROLLERS})
        if v2 is not None and {"cpu", "memory"} <= set((v2[0] / "cgroup.controllers").read_text().split()):
            return cls(2, {"": v2[0] / name})
        raise CgroupsUnavailable("this machine has no cgroup hierarchy with the cpu and memory controllers")

    @classmethod
    def create(cls, **plan) -> Cgroups:
        cgroups = cls.plan(**plan)
        for base in dict.fromkeys(cgroups.bases.values()):
            _remove_stale(base.parent)
            base.mkdir(exist_ok=True)
            if cgroups.version == 2:
                _enable_controllers(base.parent)
                _enable_controllers(base)
        return cgroups

    def pod(self, name: str, resources: Resources) -> PodCgroup:
        """A cgroup with the CPU and memory limits, and the CPU shares, of `resources`."""
        requests, limits = resources.requests, resources.limits
        quota = None if limits.cpu is None else max(1000, round(cpu_cores(limits.cpu) * CFS_PERIOD_US))
        shares = None if requests.cpu is None else max(2, round(cpu_cores(requests.cpu) * 1024))
        memory = None if limits.memory is None else memory_bytes(limits.memory)
        if self.version == 1:
            directories = {c: self.bases[c] / name for c in V1_CONTROLLERS}
            for directory in dict.fromkeys(directories.values()):   # cpu and cpuacct are often one hierarchy
                directory.mkdir()
            cpu = directories["cpu"]
            if quota is not None:
                (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
                (cpu / "cpu.cfs_quota_us").write_text(str(quota))
            if shares is not None:
                (cpu / "cpu.shares").write_text(str(shares))
            if memory is not None:
                (directories["memory"] / "memory.limit_in_bytes").write_text(str(memory))
                _write_if_present(directories["memory"] / "memory.memsw.limit_in_bytes", str(memory))   # no swap
            pod = PodCgroup(name, list(dict.fromkeys(directories.values())), directories["cpuacct"] / "cpuacct.usage",
                            1, cpu / "cpu.stat", directories["memory"] / "memory.oom_control")
        else:
            directory = self.bases[""] / name
            directory.mkdir()
            if quota is not None:
                (directory / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
            if shares is not None:
                (directory / "cpu.weight").write_text(str(1 + (shares - 2) * 9999 // 262142))
            if memory is not None:
                (directory / "memory.max").write_text(str(memory))
                _write_if_present(directory / "memory.swap.max", "0")
            pod = PodCgroup(name, [directory], directory / "cpu.stat", 2, directory / "cpu.stat",
                            directory / "memory.events")
        self.pods.append(pod)
        return pod

    def remove(self) -> None:
        for pod in self.pods:
            pod.remove()
        _remove(list(dict.fromkeys(self.bases.values())))


def _write_if_present(path: Path, value: str) -> None:
    """A limit the kernel may not offer (swap accounting off): over the memory limit, a process is then killed
    rather than swapped, as in a pod."""
    if path.exists():
        path.write_text(value)


def _enable_controllers(directory: Path) -> None:
    (directory / "cgroup.subtree_control").write_text("+cpu +memory")


def _remove_stale(parent: Path) -> None:
    """The empty cgroups of runs whose process is gone (killed before it could remove them)."""
    for stale in parent.glob(f"{PREFIX}*"):
        pid = stale.name[len(PREFIX):]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            for directory in [*(d for d in stale.iterdir() if d.is_dir()), stale]:
                _try_rmdir(directory)


def _try_rmdir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


def unavailable() -> str | None:
    """Why this machine cannot give local processes resource limits, or None: a run's cgroups are made and
    removed again (a read-only or delegated cgroup filesystem refuses only then)."""
    try:
        Cgroups.create().remove()
    except CgroupsUnavailable as e:
        return str(e)
    except OSError as e:
        return f"the local engine cannot make cgroups here ({e})"
    return None
