"""How scripts/test divides a run (a pytest plugin):

- `--tiers unit,e2e`: only those folders of tests/ are collected;
- `--alone exclude|only`: leaves out, or runs only, the tests marked `alone` (they measure CPU or timing, so
  they run by themselves after the parallel pass);
- xdist groups (`--dist loadgroup`): a test that uses a module-scoped fixture (the real node, a played ladder,
  two recorded runs) runs on the worker that holds that fixture; a test marked `fair_cpu` runs on the real
  node's worker, after the real node's tests, with the CPU first (support/cpu_first.py); any other test runs
  wherever a worker is free.
- each worker's own loopback ports (LOADSTAGE_LOCAL_PORTS, for free_port and the `loadstage run`s it starts):
  the kernel's choice of port 0 may give two workers the same port, one after the other, and a test's client
  then reaches another test's server;
- the order: the real node's tests first (the longest chain, on one worker), then the kwok tests, then the
  local end-to-end ones; within a tier the tests marked `long` first, so that the short tests fill the gaps at
  the end;
- a worker's kwok cluster goes down once its next test is of another tier, not at the session's end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loadstage.local.ports import PORTS_ENV
from support.cpu_first import cpu_first
from support.timing import TIERS

ORDER = {"realnode": 0, "cluster": 1, "e2e": 2, "unit": 3}
# Below kwokctl's ports (from 32767 downwards) and above the stoppable clusters' (tests/support/kube.py), and
# below the kernel's own (ip_local_port_range starts at 32768), so that no client's port is ever among them.
WORKER_PORTS_FROM, WORKER_PORTS_TO = 30100, 32399


def pytest_addoption(parser) -> None:
    parser.addoption("--tiers", default=None,
                     help=f"comma-separated folders of tests/ to collect ({', '.join(TIERS)}); default: all")
    parser.addoption("--alone", choices=("exclude", "only"), default=None,
                     help="leave out, or run only, the tests marked `alone`")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "alone: measures CPU or timing; scripts/test runs it by itself, after the "
                                       "parallel pass")
    config.addinivalue_line("markers", "fair_cpu: decides on latencies near its target's capacity, so it needs a "
                                       "fair share of the CPU: it runs after the real node's tests, on their "
                                       "worker, never beside the real node's pods (which get the CPU first), "
                                       "one at a time with the other fair_cpu tests, its processes getting the "
                                       "CPU before the other workers' (support/cpu_first.py)")
    config.addinivalue_line("markers", "long: takes a minute or so; runs first in its tier, so that it does not "
                                       "start last and hold the run's end")
    tiers = config.getoption("--tiers")
    unknown = set(tiers.split(",")) - set(TIERS) if tiers else set()
    if unknown:
        raise pytest.UsageError(f"--tiers: unknown tier {', '.join(sorted(unknown))} (tiers: {', '.join(TIERS)})")
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):    # not the controller's range, which it inherits
        os.environ[PORTS_ENV] = worker_ports(worker, int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    else:
        os.environ.setdefault(PORTS_ENV, worker_ports("gw0", 1))


def worker_ports(worker: str, workers: int) -> str:
    """`gw1` of 3: the second third of the range."""
    size = (WORKER_PORTS_TO - WORKER_PORTS_FROM + 1) // workers
    low = WORKER_PORTS_FROM + int(worker.removeprefix("gw")) * size
    return f"{low}-{low + size - 1}"


def tier_of_path(path: Path, root: Path) -> str | None:
    try:
        parts = path.relative_to(root / "tests").parts
    except ValueError:
        return None
    return parts[0] if parts and parts[0] in TIERS else None


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    tiers = config.getoption("--tiers")
    tier = tier_of_path(collection_path, config.rootpath)
    if tiers and tier is not None and tier not in tiers.split(","):
        return True
    return None


def _module_group(item) -> str | None:
    """The module's own name, where the test uses a fixture of module scope (`_fixtureinfo` is pytest's)."""
    definitions = item._fixtureinfo.name2fixturedefs
    if any(definitions[name][-1].scope == "module" for name in item.fixturenames if name in definitions):
        return item.nodeid.split("::")[0]
    return None


@pytest.hookimpl(tryfirst=True)   # before xdist reads the groups
def pytest_collection_modifyitems(config, items: list) -> None:
    alone = config.getoption("--alone")
    if alone:
        wanted = alone == "only"
        deselected = [i for i in items if (i.get_closest_marker("alone") is not None) != wanted]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [i for i in items if (i.get_closest_marker("alone") is not None) == wanted]
    items.sort(key=lambda i: (ORDER.get(tier_of_path(Path(i.path), config.rootpath), len(ORDER)),
                              i.get_closest_marker("long") is None))
    groups = {item: _module_group(item) for item in items}
    real_node = next((g for i, g in groups.items() if g and tier_of_path(Path(i.path), config.rootpath) == "realnode"),
                     "fair_cpu")
    for item, group in groups.items():
        group = real_node if item.get_closest_marker("fair_cpu") else group
        if group and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)   # after xdist has named each test's group
def pytest_collection_finish(session) -> None:
    """A group xdist did not take would bring up a module's fixture (the real node) on two workers at once."""
    if not getattr(session.config.option, "loadgroup", False):   # set in each worker under --dist loadgroup
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(f"--dist loadgroup did not group {lost[0]} (and {len(lost) - 1} more): this "
                                f"pytest-xdist cannot set this pytest's node ids (see pyproject.toml)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if item.get_closest_marker("fair_cpu") is None:
        return (yield)
    with cpu_first():
        return (yield)


session_cluster: list = []   # the `cluster` fixture's (tests/conftest.py) definition and request, while it is up


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    value = yield
    if fixturedef.argname == "cluster" and fixturedef.scope == "session":
        session_cluster[:] = [fixturedef, request]
    return value


@pytest.hookimpl(trylast=True)   # after pytest's own teardown of the item's fixtures
def pytest_runtest_teardown(item, nextitem):
    """The tiers run in order, so a process whose next test is not of the cluster tier has run its last that
    needs the kwok cluster: an idle control plane costs a twentieth of a core until the run's end. Were the
    cluster asked for again, pytest would bring it up again."""
    if session_cluster and nextitem is not None and tier_of_path(Path(nextitem.path), item.config.rootpath) != \
            "cluster":
        fixturedef, request = session_cluster
        session_cluster.clear()
        fixturedef.finish(request)
