"""scripts/test's summary of where the time went (tests/support/timing.py): per tier, and the unit tier's budget."""

import contextlib
import json
import time
from types import SimpleNamespace

from support.timing import CpuOfEachPhase, main, plain_id


def times_file(tmp_path, *tests):
    path = tmp_path / "times.jsonl"
    path.write_text("".join(json.dumps({"id": f"tests/{tier}/test_x.py::{name}", "tier": tier, "start": start,
                                        "stop": stop, "seconds": stop - start, "outcome": "passed",
                                        "cpuSeconds": (stop - start) / 2}) + "\n"
                            for tier, name, start, stop in tests))
    return path


def test_each_tier_gets_its_busy_and_wall_time_and_the_slowest_tests_are_listed(tmp_path, capsys):
    path = times_file(tmp_path, ("unit", "a", 0, 10), ("unit", "b", 5, 15), ("cluster", "c", 0, 100),
                      ("realnode", "d", 20, 620))
    assert main([str(path), "--wall", "700", "--setup", "40"]) == 0
    out = capsys.readouterr().out
    assert "unit     |     2 |      20s |      10s |     15s" in out   # busy 10 + 10, wall from 0 to 15
    assert "realnode |     1 |   10m00s |    5m00s |  10m00s" in out
    assert "whole run: 4 tests, 11m40s wall (set-up and the import check: 40s)" in out
    assert out.index("realnode | tests/realnode/test_x.py::d") < out.index("cluster  | tests/cluster/test_x.py::c")


def test_a_unit_tier_over_its_cpu_budget_fails_the_run_naming_it(tmp_path, capsys):
    path = times_file(tmp_path, ("unit", "slow", 0, 482), ("e2e", "e", 0, 5000))   # CPU: half of each
    assert main([str(path)]) == 1
    assert "the unit tier took 4m01s of CPU, over its budget of 4m00s" in capsys.readouterr().err
    within = times_file(tmp_path, ("unit", "waits", 0, 470), ("e2e", "e", 0, 5000))
    assert main([str(within)]) == 0


def test_a_groups_name_is_not_part_of_a_tests_id():
    assert plain_id("tests/realnode/test_realnode.py::test_x@tests/realnode/test_realnode.py") == \
        "tests/realnode/test_realnode.py::test_x"
    assert plain_id("tests/unit/test_x.py::test_y[a@b]") == "tests/unit/test_x.py::test_y[a@b]"


def test_each_phase_reports_the_cpu_its_process_spent_in_it():
    plugin = CpuOfEachPhase()
    plugin.pytest_runtest_logstart()
    started = time.process_time()
    while time.process_time() - started < 0.2:   # a fixed amount of work, not a share of the machine
        pass
    reports = []
    for _ in ("setup", "call"):
        report = SimpleNamespace(user_properties=[])
        hook = plugin.pytest_runtest_makereport(item=None, call=None)
        next(hook)
        with contextlib.suppress(StopIteration):
            hook.send(SimpleNamespace(get_result=lambda report=report: report))
        reports.append(dict(report.user_properties)["cpuSeconds"])
    assert reports[0] >= 0.2 and reports[1] < 0.1, reports    # the second phase did almost nothing
