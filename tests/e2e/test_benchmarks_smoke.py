"""Every benchmark runs in a small version so none of them rots. No timing is asserted:
only that each runs to the end, and the fidelity one's correctness target."""

import json
import subprocess
import sys

import pytest

from support.waiting import ROOT

pytestmark = pytest.mark.benchmark_smoke


def run(script, *args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--smoke", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_fidelity_smoke_meets_the_target_at_every_percentile():
    result = run("fidelity.py")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("p")]
    assert [line.split()[0] for line in lines] == ["p50", "p90", "p95", "p99", "p999"]
    assert all(line.endswith("met") for line in lines), result.stdout
    samples, counted = result.stdout.split(" raw samples (loadstage counted ")
    assert samples.split(", ")[1] == counted.split(")")[0]  # the master got every sample


def test_injector_efficiency_smoke_runs():
    result = run("injector_efficiency.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "loadstage FastHttpUser" in result.stdout and "results extension overhead" in result.stdout


def test_local_overhead_smoke_runs():
    result = run("local_overhead.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gaps between stages" in result.stdout


def test_master_merge_smoke_counts_every_synthetic_request_exactly():
    result = run("master_merge.py")
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout)
    assert figures["masterFinished"] and figures["requestsSent"] > 0
    assert figures["requestsCounted"] == figures["requestsInHistograms"] == figures["requestsSent"]
    assert 0 <= figures["masterLagSecondsPeak"] < 3 and figures["masterCpuPercent"] is not None


@pytest.mark.long
def test_decisions_smoke_runs_every_comparison():
    result = run("decisions.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "A/A: " in result.stdout and "coverage of repeats 95% intervals (3 repeat(s) a run): p50 " in result.stdout


def test_decisions_aa_smoke_gives_the_false_alarm_rate_with_its_exact_interval():
    result = run("decisions.py", "--aa-runs", "1", "--repeats", "1")   # one repeat: the other smokes run three
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    # one pair: 0 of 1 has the Clopper-Pearson interval [0, 97.5%]; 1 of 1, [2.5%, 100%]
    assert last in ("A/A: 0 false regression(s) in 1 pairs: 0.0%, 95% interval 0.0% to 97.5%",
                    "A/A: 1 false regression(s) in 1 pairs: 100.0%, 95% interval 2.5% to 100.0%"), result.stdout


def test_decisions_aa_tables_smoke_counts_the_best_marks_given_to_twin_variants():
    result = run("decisions.py", "--aa-tables", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert "p99: " in result.stdout and "(95% over " in result.stdout   # the "Between variants" lines, with repeats
    for line, what in zip(lines[-2:], ("rows over all stages", "stages")):
        assert line in (f"A/A tables: a best marked in 0 of 1 {what}: 0.0%, 95% interval 0.0% to 97.5%",
                        f"A/A tables: a best marked in 1 of 1 {what}: 100.0%, 95% interval 2.5% to 100.0%"), line


@pytest.mark.cluster
def test_operator_cost_smoke_runs_and_leaves_no_file_behind():
    result = run("operator_cost.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 experiment(s): 1 finished" in result.stdout
    assert not (ROOT / "dump.rdb").exists(), "the benchmark's redis-server saved its data into the checkout"


@pytest.mark.cluster
def test_operator_scale_smoke_runs():
    result = run("operator_scale.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 experiments: all Running" in result.stdout and "20 worker pods Running" in result.stdout, result.stdout


@pytest.mark.long
def test_goal_smoke_runs_the_truth_a_pick_and_its_report():
    result = run("goal.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "truth seed 1: workers=" in result.stdout and "truth: workers=" in result.stdout, result.stdout
    assert "the least cost that meets the objective: " in result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("picks right ") and " of 1 (95%: " in last and " of the grid (median)" in last, last


@pytest.mark.long
def test_search_smoke_runs_every_part_and_its_report():
    result = run("search.py")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "truth two-threads seed 1: 40/s served " in out and "two-threads: knee " in out, out
    assert "two-threads: at 0.9x wrong " in out and "two-threads: overload passed " in out, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("searches right ") and " of 1 (95%: " in last and "of a fixed ladder (median)" in last


def test_regression_gate_smoke_rates_each_figure_from_the_kept_real_runs():
    result = run("regression_gate.py")
    assert result.returncode == 0, result.stdout + result.stderr
    rated = {line.split(" {")[0]: json.loads(line[line.index("{"):]) for line in result.stdout.splitlines()
             if line.startswith(("p99", "capacity"))}
    assert list(rated) == ["p99 x 1.10", "p99, real runs 1.1 x slower", "capacity / 1.10"], result.stdout
    for figures in rated.values():
        assert all(r["caught"]["of"] == r["falseAlarms"]["of"] == 20 for r in figures.values()), figures
