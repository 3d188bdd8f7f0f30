"""Local resource limits: where the cgroups go on a v1 and a v2 machine, what is written into them, and what
a machine that cannot make them refuses. A v2 hierarchy cannot exist beside this machine's v1 controllers,
so v2 is checked against a directory laid out like one (the real v1 path runs in tests/e2e)."""

import pytest

from loadstage.api.load import parse_experiment
from loadstage.api.types import ResourceList, Resources
from loadstage.local.cgroups import Cgroups, CgroupsUnavailable
from loadstage.local.target import local_problems
from support.documents import BASE

V1_MOUNTS = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_OWN = "4:memory:/process_api/job7\n2:cpuacct:/\n1:cpu:/\n0::/\n"


def test_v1_cgroups_sit_under_this_process_in_each_hierarchy():
    cgroups = Cgroups.plan(mountinfo=V1_MOUNTS, proc_cgroup=V1_OWN, euid=0)
    assert cgroups.version == 1
    name = cgroups.bases["cpu"].name
    assert name.startswith("loadstage-") and name[len("loadstage-"):].isdigit()
    assert {c: str(p.parent) for c, p in cgroups.bases.items()} == {
        "cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct",
        "memory": "/sys/fs/cgroup/memory/process_api/job7"}


def test_cpu_and_cpuacct_in_one_hierarchy_make_one_directory(tmp_path):
    mount = tmp_path / "cpu,cpuacct"
    memory = tmp_path / "memory"
    mount.mkdir()
    memory.mkdir()
    mounts = (f"32 31 0:29 / {mount} rw - cgroup cgroup rw,cpu,cpuacct\n"
              f"35 31 0:32 / {memory} rw - cgroup cgroup rw,memory\n")
    cgroups = Cgroups.create(mountinfo=mounts, proc_cgroup="2:cpu,cpuacct:/\n4:memory:/\n", euid=0)
    assert cgroups.bases["cpu"] == cgroups.bases["cpuacct"]
    pod = cgroups.pod("v1-pod-1", Resources(ResourceList("250m"), ResourceList("500m", "256Mi")))
    directory = cgroups.bases["cpu"] / "v1-pod-1"
    assert (directory / "cpu.cfs_quota_us").read_text() == "50000" and (directory / "cpu.shares").read_text() == "256"
    assert (memory / directory.parent.name / "v1-pod-1" / "memory.limit_in_bytes").read_text() == str(256 * 2**20)
    assert pod.join_argv()[4:-1] == [str(directory / "cgroup.procs"),
                                     str(memory / directory.parent.name / "v1-pod-1" / "cgroup.procs")]


def test_v2_cgroups_get_the_quota_the_weight_and_the_memory_limit(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mounts = f"30 23 0:27 / {tmp_path} rw,nosuid - cgroup2 cgroup2 rw\n"
    cgroups = Cgroups.create(mountinfo=mounts, proc_cgroup="0::/user.slice/session-1.scope\n", euid=0)
    base = cgroups.bases[""]
    assert cgroups.version == 2 and base.parent == tmp_path   # a v2 cgroup with processes has no children
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert (base / "cgroup.subtree_control").read_text() == "+cpu +memory"
    pod = cgroups.pod("v1-pod-1", Resources(ResourceList("250m", "128Mi"), ResourceList("500m", "512Mi")))
    directory = base / "v1-pod-1"
    assert (directory / "cpu.max").read_text() == "50000 100000"
    assert (directory / "memory.max").read_text() == str(512 * 2**20)
    assert (directory / "cpu.weight").read_text() == str(1 + (256 - 2) * 9999 // 262142)
    assert pod.join_argv()[-2:] == [str(directory / "cgroup.procs"), "--"]
    (directory / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    assert pod.cpu_seconds() == 2.5


def test_no_cgroups_without_root_or_without_the_controllers():
    with pytest.raises(CgroupsUnavailable, match=r"needs root \(this is uid 1000\)"):
        Cgroups.plan(mountinfo=V1_MOUNTS, proc_cgroup=V1_OWN, euid=1000)
    with pytest.raises(CgroupsUnavailable, match="no cgroup hierarchy with the cpu and memory controllers"):
        Cgroups.plan(mountinfo=V1_MOUNTS.replace("rw,memory", "rw,pids"), proc_cgroup=V1_OWN, euid=0)


def test_a_limit_this_machine_cannot_enforce_is_refused_naming_each_field():
    spec = {**BASE["spec"], "target": {"resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}},
            "matrix": {"cpu": ["1", "2"]}, "injectors": {"resources": {"requests": {"cpu": "1"}}}}
    experiment = parse_experiment({**BASE, "spec": spec})
    why = "the local engine sets limits through the cgroup filesystem, which needs root (this is uid 1000)"
    assert local_problems(experiment, cgroups_unavailable=lambda: why) == [
        (field, f"{why}, so it cannot enforce this limit; run loadstage as root, or the experiment in a cluster")
        for field in ("spec.target.resources.limits", "spec.matrix.cpu")]
    assert local_problems(experiment, cgroups_unavailable=lambda: None) == []
    requests_only = parse_experiment({**BASE, "spec": {**BASE["spec"], "injectors": {
        "resources": {"requests": {"cpu": "1"}}}}})
    assert local_problems(requests_only, cgroups_unavailable=lambda: why) == []


def test_the_local_engine_refuses_an_existing_deployment():
    experiment = parse_experiment({**BASE, "spec": {**BASE["spec"], "redis": {"deploy": False},
                                                    "target": {"deployment": {"name": "shop"}}}})
    assert local_problems(experiment, cgroups_unavailable=lambda: None) == [
        ("spec.target.deployment", "an existing Deployment runs only in a cluster; the local engine serves "
                                   "spec.target.app")]
