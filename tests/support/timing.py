"""Where the suite's time goes: a pytest plugin that appends one line per test to the file named by
LOADSTAGE_TEST_TIMES (JSON: id, tier, start, stop, seconds, outcome, cpuSeconds, worker), and a summary of such a
file by tier. cpuSeconds is the CPU time of the test's process and of the children it reaped during the test (its
`loadstage run`s with their servers and Locusts): not the kwok clusters' or the real node's pods'.

    python tests/support/timing.py FILE [--wall SECONDS] [--setup SECONDS] [--unit-budget CPU_SECONDS] [--slowest N]

prints each tier's busy time (the sum of its tests' setup, call and teardown), CPU time and wall time (its first
start to its last stop), the whole run's wall time, and the slowest tests; it exits 1 when the unit tier's CPU
time is over its budget."""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from collections import defaultdict
from pathlib import Path

import pytest

TIERS = ("unit", "e2e", "cluster", "realnode")
UNIT_BUDGET_CPU_SECONDS = 240   # of CPU, which a busy machine does not stretch: two workers' two minutes


def plain_id(nodeid: str) -> str:
    """The test's id without the `@group` xdist's loadgroup adds to it."""
    return nodeid[:nodeid.rfind("@")] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def tier_of(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


class TimesFile:
    """Collects each test's phases where the reports arrive (the xdist controller, or the only process)."""

    def __init__(self, path: Path):
        self.path = path
        self.tests: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report) -> None:
        test = self.tests.setdefault(report.nodeid, {
            "id": plain_id(report.nodeid), "tier": tier_of(report.nodeid), "start": report.start, "stop": report.stop,
            "seconds": 0.0, "outcome": "passed", "cpuSeconds": 0.0, "worker": worker_of(report)})
        test["start"], test["stop"] = min(test["start"], report.start), max(test["stop"], report.stop)
        test["seconds"] += report.duration
        test["cpuSeconds"] += dict(report.user_properties).get("cpuSeconds", 0.0)
        if report.outcome != "passed" and test["outcome"] == "passed":
            test["outcome"] = report.outcome
        if report.when == "teardown":
            with self.path.open("a") as out:
                out.write(json.dumps(self.tests.pop(report.nodeid)) + "\n")


def worker_of(report) -> str:
    """The xdist worker that ran it (xdist's controller sets `node` on the reports it receives)."""
    node = getattr(report, "node", None)
    return node.gateway.id if node is not None else "main"


def cpu_seconds() -> float:
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


class CpuOfEachPhase:
    """In the process that runs the test: each phase's CPU, in its report (xdist sends it to the controller)."""

    def __init__(self):
        self.started = 0.0

    def pytest_runtest_logstart(self) -> None:
        self.started = cpu_seconds()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        now = cpu_seconds()
        outcome = yield
        outcome.get_result().user_properties.append(("cpuSeconds", round(now - self.started, 3)))
        self.started = now


def pytest_configure(config) -> None:
    path = os.environ.get("LOADSTAGE_TEST_TIMES")
    if not path:
        return
    config.pluginmanager.register(CpuOfEachPhase(), "loadstage-cpu")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(TimesFile(Path(path)), "loadstage-times")


def summary(tests: list[dict], wall: float | None = None, setup: float | None = None, slowest: int = 20) -> str:
    by_tier: dict[str, list[dict]] = defaultdict(list)
    for test in tests:
        by_tier[test["tier"]].append(test)
    lines = ["tier     | tests | busy     | cpu      | wall", "---------+-------+----------+----------+---------"]
    for tier in sorted(by_tier, key=lambda t: TIERS.index(t) if t in TIERS else len(TIERS)):
        rows = by_tier[tier]
        span = tier_wall(rows, tier)
        busy, cpu = clock(sum(t["seconds"] for t in rows)), clock(sum(t.get("cpuSeconds", 0) for t in rows))
        lines.append(f"{tier:<8} | {len(rows):>5} | {busy:>8} | {cpu:>8} | {clock(span):>7}")
    if wall is not None:
        prepared = f" (set-up and the import check: {clock(setup)})" if setup is not None else ""
        lines.append(f"whole run: {len(tests)} tests, {clock(wall)} wall{prepared}")
    lines += ["", f"The {slowest} slowest tests:", "seconds | cpu s | tier     | test",
              "--------+-------+----------+-----"]
    for test in sorted(tests, key=lambda t: -t["seconds"])[:slowest]:
        lines.append(f"{test['seconds']:>7.1f} | {test.get('cpuSeconds', 0):>5.0f} | {test['tier']:<8} | {test['id']}")
    return "\n".join(lines)


def tier_wall(tests: list[dict], tier: str) -> float:
    rows = [t for t in tests if t["tier"] == tier]
    return max(t["stop"] for t in rows) - min(t["start"] for t in rows) if rows else 0.0


def clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--wall", type=float, help="the whole run's wall time, in seconds")
    parser.add_argument("--setup", type=float, help="the part of it spent before the tests, in seconds")
    parser.add_argument("--unit-budget", type=float, default=UNIT_BUDGET_CPU_SECONDS)
    parser.add_argument("--slowest", type=int, default=20)
    args = parser.parse_args(argv)
    lines = args.file.read_text().splitlines() if args.file.exists() else []
    tests = [json.loads(line) for line in lines if line.strip()]
    if not tests:
        print("no test ran")
        return 0
    print(summary(tests, args.wall, args.setup, args.slowest))
    unit = sum(t.get("cpuSeconds", 0) for t in tests if t["tier"] == "unit")
    if unit > args.unit_budget:
        print(f"\nthe unit tier took {clock(unit)} of CPU, over its budget of {clock(args.unit_budget)}: something "
              f"slow slipped in (docs/development.md, 'Adding a test')", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
