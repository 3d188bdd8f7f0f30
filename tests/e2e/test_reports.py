"""`loadstage report` in every format and `loadstage compare`, on real local runs: the same
experiment against the fast and then the slow delay profile of the runner app."""

import json
import re
import subprocess
import sys

import pandas
import pytest
import yaml

from loadstage.api.load import parse_experiment
from loadstage.reports import tables as report
from support.browser import CHROMIUM, Browser
from support.documents import BASE
from support.histories import keep, played_documents
from support.played import SLO_MS, RateBackend, run
from support.waiting import ROOT, wait_for

SEEDS_HEADLINE = "| threads | 50th | 90th | 95th | 99th | 99.9th | total requests | Redis connections (peak) |"
SEEDS_BREAKDOWN = ("| Load injector instances | 50th | 90th | 95th | 99th | 99.9th | GETs Average | POSTs Average "
                   "| Total Requests |")
SEEDS_PIVOT = "| Load injector instances | threads=1 | threads=4 |"


def cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "loadstage.cli", *map(str, args)], capture_output=True, text=True,
                          **kwargs)


def experiment_doc(delay):
    return {**BASE, "metadata": {"name": "reports"}, "spec": {
        "target": {"pods": 1, "workers": 2, "env": {"RUNNER_DELAY": delay}},
        "injectors": {"usersPerInjector": 10, "waitTime": {"min": "10ms", "max": "50ms"}},
        "stages": [{"injectors": 1, "duration": "4s"}, {"injectors": 2, "duration": "4s"}],
        "matrix": {"threads": [1, 4]}}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real runs, fast then slow; the fast one followed by `report --follow` while it runs."""
    directory = tmp_path_factory.mktemp("reports")
    results = {}
    for delay in ("fast", "slow"):
        spec, result = directory / f"{delay}.yaml", directory / f"{delay}.json"
        spec.write_text(yaml.safe_dump(experiment_doc(delay)))
        run = subprocess.Popen([sys.executable, "-m", "loadstage.cli", "run", spec, "-o", result, "-q",
                                "--workdir", directory / f"{delay}-work"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        follow = None
        if delay == "fast":
            wait_for(result.exists, timeout=60)
            follow = subprocess.Popen([sys.executable, "-m", "loadstage.cli", "report", "--follow", result],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        if follow is not None:
            out, follow_err = follow.communicate(timeout=30)
            results["follow"] = (follow.returncode, out, follow_err)
        results[delay] = result
    return results


@pytest.mark.e2e
def test_markdown_has_the_seeds_layout_and_the_runs_figures(runs):
    done = cli("report", runs["fast"], "--format", "markdown")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    status = json.loads(runs["fast"].read_text())["status"]
    assert lines.count(SEEDS_HEADLINE) == 1 and lines.count(SEEDS_PIVOT) == 1 and lines.count(SEEDS_BREAKDOWN) == 2
    assert lines.index("## Benchmark profile") < lines.index(SEEDS_HEADLINE) < lines.index(SEEDS_PIVOT)
    section = lines[lines.index("## Benchmark profile"):lines.index("## Results per variant")]
    profile = dict(re.fullmatch(r"\| (.+?) \| (.+) \|", line).groups() for line in section if line.startswith("| "))
    assert profile.pop("Option") == "Value" and profile.pop("---") == "---"
    assert profile["Threads per worker"] == "1, 4 (one variant each)"
    assert profile["Load injector ladder"] == "1, 2" and profile["Users per stage"] == "10, 20"
    assert profile["Stage duration"] == "4s" and profile["Target environment"] == "RUNNER_DELAY=fast"
    assert profile["Wait time"] == "10ms to 50ms"
    # the headline rows are the variants' aggregates over every request of all their stages
    headline = lines[lines.index(SEEDS_HEADLINE) + 2:lines.index(SEEDS_HEADLINE) + 4]
    for row, variant in zip(headline, status["variants"]):
        cells = [c.strip() for c in row.strip("|").split("|")]
        aggregate = variant["aggregate"]
        assert cells[0] == str(variant["settings"]["threads"])
        assert cells[4] == report.format_ms(aggregate["latencyMs"]["p99"])
        assert cells[6] == f"{aggregate['requests']:,}" and cells[7] == str(aggregate["redisPeakConnections"])
    # one breakdown per variant, one row per stage, with the methods' means
    second = lines.index("## threads=4")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[second + 4:second + 6]]
    for cells, stage in zip(rows, status["variants"][1]["stages"]):
        assert cells[0] == str(stage["injectors"]) and cells[-1] == f"{stage['requests']:,}"
        assert cells[6] == report.format_ms(stage["byMethod"]["GET"]["meanMs"])


@pytest.mark.e2e
def test_csv_loads_into_pandas_as_numbers_one_row_per_stage_and_variant(runs, tmp_path):
    done = cli("report", runs["fast"], "-o", tmp_path / "fast.csv")
    assert done.returncode == 0, done.stderr
    table = pandas.read_csv(tmp_path / "fast.csv")
    status = json.loads(runs["fast"].read_text())["status"]
    assert len(table) == 4 and list(table["threads"]) == [1, 1, 4, 4] and list(table["injectors"]) == [1, 2, 1, 2]
    for column in ("requests", "p50Ms", "p99Ms", "p999Ms", "rps", "redisPeakConnections", "targetPeakCpuCores",
                   "getMeanMs", "postP99Ms", "waitMinSeconds", "durationSeconds"):
        assert pandas.api.types.is_numeric_dtype(table[column]), column
    assert table["p999Reliable"].dtype == bool and table["pacingSeconds"].isna().all()
    stages = [s for v in status["variants"] for s in v["stages"]]
    assert list(table["requests"]) == [s["requests"] for s in stages]
    assert list(table["p99Ms"]) == [s["latencyMs"]["p99"] for s in stages]
    assert table["waitMaxSeconds"].eq(0.05).all() and table["usersPerInjector"].eq(10).all()


@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup --browser)")
def test_html_report_renders_every_chart_in_a_real_browser_offline(runs, tmp_path):
    page = tmp_path / "fast.html"
    done = cli("report", runs["fast"], "-o", page)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "<script" not in text and not re.search(r"""(src|href)=["']?(https?:|//)""", text)
    browser = Browser()
    try:
        visit = browser.visit(page.as_uri(), CHART_PROBE)
    finally:
        browser.close()
    screenshot = ROOT / "artifacts" / "html-report.png"
    screenshot.parent.mkdir(exist_ok=True)
    screenshot.write_bytes(visit.screenshot)
    assert visit.screenshot.startswith(b"\x89PNG") and len(visit.screenshot) > 50_000
    assert visit.requests == [page.as_uri()], visit.requests
    assert [m for m in visit.console if m["level"] in ("error", "warning", "assert")] == [], visit.console
    charts = {c["id"]: c for c in visit.result}
    assert set(charts) == {"chart-latency", "chart-throughput", "chart-redis", "chart-target",
                           "chart-series-v1", "chart-series-v2"}
    for chart in charts.values():
        assert chart["width"] > 300 and chart["height"] > 200, chart
        assert chart["drawn"] >= 2, chart               # data lines with a length on screen, not a blank box
    assert charts["chart-latency"]["drawn"] >= 5 * 2    # five percentiles, a line per variant
    for series in ("chart-series-v1", "chart-series-v2"):
        assert charts[series]["drawn"] >= 2 * 3         # per stage: requests per second, p50, p99


@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup --browser)")
def test_the_front_of_capacity_against_cost_is_drawn_in_a_real_browser(tmp_path):
    """A goal.maximize run on played targets (support.played): three variants that serve the same per core,
    each at twice the cost and twice the capacity of the one before, so that all three are on the front."""
    doc = {**BASE, "metadata": {"name": "front"}, "spec": {
        "target": {"pods": 1}, "goal": {"maximize": "capacityPerCore"}, "slo": {"p99": f"{SLO_MS:g}ms"},
        "search": {"load": "users", "from": 10, "max": 320, "resolution": "10%", "duration": "20s"},
        "matrix": {"cpu": ["250m", "500m", "1"]}}}
    final = run(parse_experiment(doc), RateBackend(knee=[20, 40, 80]))[-1]
    assert [c["variant"] for c in final["recommendation"]["front"]] == [0, 1, 2], final["recommendation"]
    result, page = tmp_path / "front.json", tmp_path / "front.html"
    result.write_text(json.dumps({**doc, "status": final}))
    done = cli("report", result, "-o", page)
    assert done.returncode == 0, done.stderr
    browser = Browser()
    try:
        visit = browser.visit(page.as_uri(), CHART_PROBE)
    finally:
        browser.close()
    assert [m for m in visit.console if m["level"] in ("error", "warning", "assert")] == [], visit.console
    front = next(c for c in visit.result if c["id"] == "chart-front")
    assert front["width"] > 300 and front["height"] > 200 and front["drawn"] >= 1, front   # the front's line
    assert "Capacity against cost" in page.read_text()


@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup --browser)")
def test_a_history_page_draws_each_figure_over_the_runs_in_a_real_browser(tmp_path):
    url, page = f"sqlite:{tmp_path}/h.sqlite", tmp_path / "history.html"
    keep(url, played_documents(), [30] * 6 + [20] * 2)   # the p99 at 40 users climbs from 23.7 to 80 ms
    done = cli("history", "shop", "--history", url, "--format", "html", "-o", page)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "<script" not in text and "WORSE: p99 at 40 users" in text and "version=1.7" in text
    browser = Browser()
    try:
        visit = browser.visit(page.as_uri(), CHART_PROBE)
    finally:
        browser.close()
    assert visit.requests == [page.as_uri()] and not [m for m in visit.console if m["level"] == "error"]
    charts = {c["id"]: c for c in visit.result}
    assert len(charts) == 4, charts   # capacity (the last two runs found a knee), p99 at 10, 20 and 40 users
    for chart in charts.values():
        assert chart["width"] > 300 and chart["height"] > 150 and chart["drawn"] >= 1, chart


CHART_PROBE = """(() => Array.from(document.querySelectorAll('figure.chart')).map(f => {
  const svg = f.querySelector('svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const lengths = Array.from(f.querySelectorAll('g[id*="-data-"] path')).map(p => p.getTotalLength());
  return {id: f.id, width: box.width, height: box.height, drawn: lengths.filter(l => l > 10).length};
}))()"""


@pytest.mark.e2e
def test_compare_catches_the_slow_run_and_passes_the_same_run(runs):
    slower = cli("compare", runs["fast"], runs["slow"])
    assert slower.returncode == 4, slower.stdout + slower.stderr
    assert slower.stdout.startswith("4 of 4 matched stage(s) regressed (tolerance 10%, 95% confidence)")
    # 4 s stages are too short for intervals (8 one-second blocks, even when a slow machine stretches a stage
    # to 7): the tolerance alone judges, and the output says so
    assert "Judged by the tolerance alone (4 stage(s) without intervals on one side" in slower.stdout
    rows = [line for line in slower.stdout.splitlines() if line.startswith("threads=")]
    assert len(rows) == 4 and all("regressed: p99 +" in row for row in rows)
    assert "Setting that differs: Target environment: RUNNER_DELAY=fast -> RUNNER_DELAY=slow" in slower.stdout
    pr = cli("compare", runs["fast"], runs["slow"], "--format", "markdown", "--tolerance", "25%")
    assert pr.returncode == 4 and pr.stdout.startswith("**Regression**: 4 of 4 matched stage(s) regressed "
                                                       "(tolerance 25%, 95% confidence).")
    assert "| Variant | Injectors | Users | p50 (ms) | p99 (ms) | p99.9 (ms) | req/s | errors | Verdict |" in pr.stdout
    assert pr.stdout.count("| **regressed**: ") == 4
    same = cli("compare", runs["fast"], runs["fast"])
    assert same.returncode == 0 and same.stdout.startswith("no regression in 4 matched stage(s)"), same.stdout
    faster = cli("compare", runs["slow"], runs["fast"])
    assert faster.returncode == 0 and faster.stdout.count("improved: ") == 4, faster.stdout


@pytest.mark.e2e
def test_follow_prints_the_table_again_as_each_stage_finishes(runs):
    code, out, err = runs["follow"]
    assert code == 0, err
    headers = re.findall(r"^== \d\d:\d\d:\d\d (\w+): (\d) of 4 stage\(s\) finished ==$", out, re.M)
    finished = [int(n) for _, n in headers]
    assert finished == sorted(finished) and finished[-1] == 4 and len(set(finished)) >= 3, headers
    assert headers[-1][0] == "Succeeded" and out.count("Per variant, over all its stages:") >= 2


def test_bad_input_exits_2_naming_the_source_and_the_problem(tmp_path):
    missing = cli("report", tmp_path / "nope.json")
    assert missing.returncode == 2 and f"error: {tmp_path / 'nope.json'}: cannot read: No such file" in missing.stderr
    truncated = tmp_path / "cut.json"
    truncated.write_text('{"apiVersion": "loadstage.io/v1alpha1", "status": {"variants": [{"stages": [')
    for args in (("report", truncated), ("report", truncated, "--format", "html"), ("compare", truncated, truncated)):
        done = cli(*args)
        assert done.returncode == 2 and "not valid JSON (truncated?)" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    other = tmp_path / "other.yaml"
    other.write_text("kind: ConfigMap\ndata: {}\n")
    done = cli("report", other, "--format", "markdown")
    assert done.returncode == 2 and "has no LoadExperiment status with variants" in done.stderr
    unknown = cli("report", other, "-o", tmp_path / "out.xlsx")
    assert unknown.returncode == 2 and "error: --format: cannot tell the format from" in unknown.stderr
    follow = cli("report", other, "--follow", "--format", "html")
    assert follow.returncode == 2 and "error: --follow: prints the table" in follow.stderr
    tolerance = cli("compare", other, other, "--tolerance", "ten")
    assert tolerance.returncode == 2 and "must be a percentage from 0% to 1000%" in tolerance.stderr


@pytest.mark.e2e
def test_compare_refuses_runs_that_share_no_stage(runs, tmp_path):
    document = json.loads(runs["fast"].read_text())
    for variant in document["status"]["variants"]:
        for stage in variant["stages"]:
            stage["injectors"] += 10
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(document))
    done = cli("compare", runs["fast"], elsewhere)
    assert done.returncode == 2, done.stdout
    assert f"error: {elsewhere}: shares no finished stage with {runs['fast']}: stages are matched by" in done.stderr


@pytest.mark.e2e
def test_a_ladder_by_users_shows_users_beside_injectors_in_the_markdown(runs, tmp_path):
    document = json.loads(runs["fast"].read_text())
    document["spec"]["injectors"]["maxUsersPerInjector"] = 10
    document["spec"]["stages"] = [{"users": 10, "duration": "6s"}, {"users": 20, "duration": "6s"}]
    by_users = tmp_path / "by-users.json"
    by_users.write_text(json.dumps(document))
    done = cli("report", by_users, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("| Load injector instances | Users | 50th | 90th | 95th | 99th | 99.9th | GETs Average "
                             "| POSTs Average | Total Requests |") == 2
    assert "| Most users per injector (stages given in users) | 10 |" in done.stdout
