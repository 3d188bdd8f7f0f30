"""Benchmark (k): how often `loadstage history check` catches a regression within three runs, how often it alarms
on runs that did not change, and how long it takes over 1,000 stored runs.

Series are drawn from real runs (benchmarks/regression.py's newest record, which keeps each run's merged
histogram): a run's p99 is the p99 of REQUESTS latencies drawn from the merged histogram of its regime (as it is,
or slower), so that runs vary as much as real runs of that many requests do. Capacities are drawn from the ten
real searches of benchmark (i) (the pass end of each bracket); one step down is / 1.10. Each figure is judged by
the gate's own rule (results.change_points.newest_change), at each p-value given; the first is the default's.

    python benchmarks/regression_gate.py [--series 1000] [--seed 1] [--p-values P,...] [--timing RUNS]
        [--requests N] [--otava /tmp/otava-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import parts
from common import ROOT
from loadstage.results import change_points, histograms

RECORDS = "regression-gate"
BEFORE = 27          # runs as they are before a change: with WITHIN, a series as long as LONG
WITHIN = 3           # runs after it, the gate checked after each
LONG = 30            # runs of a series that never changes, the gate checked after each from the fourth
SHIFT = 1.10


def regimes() -> tuple[dict[str, np.ndarray], dict]:
    """The newest real record's runs: for each regime ('1' as it is, else slower) the merged histogram's values
    (ms) and their probabilities; and the record."""
    record = next(r for r in reversed(parts.read("regression-runs")) if r.get("runs"))
    merged: dict[str, dict[int, int]] = {}
    for run in record["runs"]:
        for item in histograms.decode(run["histogram"]).get_recorded_iterator():
            counts = merged.setdefault(run["scale"], {})
            counts[item.value_iterated_to] = counts.get(item.value_iterated_to, 0) + item.count_at_value_iterated_to
    drawn = {}
    for scale, counts in merged.items():
        values = np.array(sorted(counts), dtype=float) / 1e6
        weights = np.array([counts[v] for v in sorted(counts)], dtype=float)
        drawn[scale] = np.stack([values, weights / weights.sum()])
    return drawn, record


def p99_runs(rng: np.random.Generator, regime: np.ndarray, runs: int, requests: int, factor: float = 1.0) -> list:
    """Each run's p99 (the nearest-rank p99 of `requests` draws), times `factor`."""
    cumulative = np.cumsum(regime[1])
    draws = regime[0][np.minimum(np.searchsorted(cumulative, rng.random((runs, requests))), regime.shape[1] - 1)]
    rank = math.ceil(0.99 * requests) - 1
    return list(np.partition(draws, rank, axis=1)[:, rank] * factor)


def capacities(rng: np.random.Generator, measured: list[float], runs: int, factor: float = 1.0) -> list:
    return list(rng.choice(measured, size=runs) * factor)


def caught(values: list[float], higher_is_worse: bool, p_value: float, checks: range) -> bool:
    """Whether the gate says Worse at any of the checks (a check after run i sees the first i runs)."""
    for i in checks:
        change = change_points.newest_change(values[:i], higher_is_worse=higher_is_worse, p_value=p_value)
        if change is not None and change.outcome == "Worse":
            return True
    return False


AFTER_CHANGE = range(BEFORE + 1, BEFORE + WITHIN + 1)
UNCHANGED = range(change_points.FEWEST_RUNS, LONG + 1)


def rates(draw: Callable[[bool], list[float]], higher_is_worse: bool, p_values: list[float], series: int,
          otava: str | None) -> dict:
    """For each p-value (and Otava's defaults, given its venv's python): series caught within WITHIN runs of a
    change, and series of LONG unchanged runs alarmed."""
    changed = [draw(True) for _ in range(series)]
    steady = [draw(False) for _ in range(series)]
    out = {}
    for p in p_values:
        hits = sum(caught(v, higher_is_worse, p, AFTER_CHANGE) for v in changed)
        alarms = sum(caught(v, higher_is_worse, p, UNCHANGED) for v in steady)
        out[str(p)] = {"caught": parts.rate(hits, series), "falseAlarms": parts.rate(alarms, series)}
    if otava:
        asked = {"recent": change_points.RECENT, "minChange": change_points.MIN_CHANGE, "series": [
            {"values": [float(x) for x in v], "higherIsWorse": higher_is_worse, "checks": list(checks)}
            for values, checks in ((changed, AFTER_CHANGE), (steady, UNCHANGED)) for v in values]}
        said = json.loads(subprocess.run([otava, str(ROOT / "benchmarks" / "otava_gate.py")], input=json.dumps(asked),
                                         capture_output=True, text=True, check=True).stdout)
        out["otava"] = {"caught": parts.rate(sum(said[:series]), series),
                        "falseAlarms": parts.rate(sum(said[series:]), series)}
    return out


def spread(values: list[float]) -> float:
    return float(np.std(np.log(values), ddof=1))


def timing(runs: int) -> dict:
    """The check over `runs` stored runs (played ladders of three stages, the last two runs' p99 worse: it finds
    that change): in process and as the command, best of three, in SQLite and in a real PostgreSQL."""
    sys.path.insert(0, str(ROOT / "tests"))
    from loadstage.history.locations import location
    from loadstage.history.records import record_of
    from loadstage.history.store import Store
    from loadstage.history.trends import check
    from support.histories import played_documents
    from support.postgres import Postgres
    documents = played_documents()
    server = Postgres()
    out = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for kind, url in (("sqlite", f"sqlite:{tmp}/history.sqlite"), ("postgresql", server.url())):
                with Store(location(url)) as store:
                    for i in range(runs):
                        knee = 20 if i >= runs - 2 else 30
                        store.record(record_of(documents[knee], uid=f"run-{i}", source="local"),
                                     f"2026-11-28T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00")

                def in_process(url: str = url) -> None:
                    with Store(location(url)) as store:
                        check(store.runs("shop"))
                command = [sys.executable, "-m", "loadstage.cli", "history", "check", "shop", "--history", url]
                out[kind] = {"inProcess": best_of(in_process),
                             "command": best_of(lambda c=command: subprocess.run(c, capture_output=True))}
    finally:
        server.stop()
    return out


def best_of(action: Callable[[], object], times: int = 3) -> float:
    best = math.inf
    for _ in range(times):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return round(best, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--p-values", default=f"{change_points.P_VALUE},0.001,0.01")
    parser.add_argument("--timing", type=int, default=0, metavar="RUNS", help="also time the check over RUNS runs")
    parser.add_argument("--requests", type=int, help="a run's requests (default: as many as the real runs had)")
    parser.add_argument("--otava", metavar="PYTHON", help="a python with apache-otava 0.8.0: compare its defaults")
    parser.add_argument("--smoke", action="store_true", help="20 series, into a temporary directory")
    args = parser.parse_args()
    series = 20 if args.smoke else args.series
    p_values = [float(p) for p in args.p_values.split(",")]
    rng = np.random.default_rng(args.seed)
    drawn, record = regimes()
    slower = next(s for s in drawn if s != "1")
    requests = args.requests or int(np.median([r["requests"] for r in record["runs"]]))
    searches = [float(r["pass"]) for r in parts.read("search-runs") if r.get("part") == "search" and r["pass"]]
    figures = {
        f"p99 x {SHIFT:.2f}": (lambda shift: p99_runs(rng, drawn["1"], BEFORE, requests) + p99_runs(
            rng, drawn["1"], WITHIN, requests, SHIFT) if shift else p99_runs(rng, drawn["1"], LONG, requests), True),
        f"p99, real runs {slower} x slower": (lambda shift: p99_runs(rng, drawn["1"], BEFORE, requests) + p99_runs(
            rng, drawn[slower], WITHIN, requests) if shift else p99_runs(rng, drawn["1"], LONG, requests), True),
        f"capacity / {SHIFT:.2f}": (lambda shift: capacities(rng, searches, BEFORE) + capacities(
            rng, searches, WITHIN, 1 / SHIFT) if shift else capacities(rng, searches, LONG), False),
    }
    real = {scale: [r["p99"] for r in record["runs"] if r["scale"] == scale] for scale in drawn}
    result = {"series": series, "seed": args.seed, "requests": requests, "before": BEFORE, "within": WITHIN,
              "long": LONG, "realRuns": {s: len(v) for s, v in real.items()},
              "realSpread": {s: round(spread(v), 4) for s, v in real.items() if len(v) > 1},
              "drawnSpread": round(spread(p99_runs(rng, drawn["1"], 1000, requests)), 4),
              "searches": searches, "figures": {}}
    for name, (draw, higher_is_worse) in figures.items():
        result["figures"][name] = rates(draw, higher_is_worse, p_values, series, args.otava)
        print(name, json.dumps(result["figures"][name]), flush=True)
    if args.timing:
        result["timing"] = {"runs": args.timing, **timing(args.timing)}
        print("check time", json.dumps(result["timing"]))
    print(json.dumps({k: v for k, v in result.items() if k != "figures"}))
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="loadstage-gate-smoke-") as tmp:
            parts.append(RECORDS, [result], Path(tmp))
    else:
        parts.append(RECORDS, [result])
    return 0


if __name__ == "__main__":
    sys.exit(main())
