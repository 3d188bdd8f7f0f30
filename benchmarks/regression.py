"""A real regression, caught end to end (docs/history.md): one experiment run BEFORE times with the runner app as it
is, then AFTER times with every request's delay SLOWER times longer (RUNNER_DELAY_SCALE), each run recorded into a
fresh SQLite history, and `loadstage history check` after each run from the fourth on. Prints each check's exit
code and lines, and appends a record to benchmarks/results/regression-runs.jsonl (benchmarks/parts.py), with each
run's p99 and merged histogram as the history kept them (benchmarks/regression_gate.py draws series from them).

    python benchmarks/regression.py [--before 6] [--after 3] [--slower 1.2] [--seconds 20] [--rate 120]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

import parts
from common import loadstage
from loadstage.history.locations import location
from loadstage.history.store import Store

RECORDS = "regression-runs"


def experiment(scale: str, seconds: int, rate: int) -> dict:
    """An open model well under the target's capacity (8 threads of ~18 ms: ~440 req/s): its p99 is the
    requests' own delay."""
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "checkout"},
            "spec": {"target": {"pods": 1, "workers": 2, "threads": 4,
                                "env": {"RUNNER_DELAY": "fast", "RUNNER_DELAY_SCALE": scale}},
                     "injectors": {"scenario": "hello", "maxUsersPerInjector": 60, "maxRatePerInjector": 300},
                     "warmup": {"arrivalRate": rate, "duration": "3s"},
                     "stages": [{"arrivalRate": rate, "duration": f"{seconds}s"}]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=int, default=6)
    parser.add_argument("--after", type=int, default=3)
    parser.add_argument("--slower", default="1.2", help="RUNNER_DELAY_SCALE of the runs after the change")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rate", type=int, default=120)
    args = parser.parse_args()
    checks = []
    with tempfile.TemporaryDirectory(prefix="loadstage-regression-") as tmp_dir:
        tmp = Path(tmp_dir)
        history = f"sqlite:{tmp / 'history.sqlite'}"
        for number in range(1, args.before + args.after + 1):
            slower = number > args.before
            path = tmp / f"run-{number}.yaml"
            scale = args.slower if slower else "1"
            path.write_text(yaml.safe_dump(experiment(scale, args.seconds, args.rate)))
            loadstage("run", str(path), "-q", "--workdir", str(tmp / f"work-{number}"), "--history", history,
                      "--label", f"run={number:02d}", "--label", f"delay={scale}")
            if number < 4:
                continue
            done = loadstage("history", "check", "checkout", "--history", history, check=False)
            print(f"after run {number} ({'slower' if slower else 'as it is'}): exit {done.returncode}")
            print(done.stdout, end="", flush=True)
            checks.append({"run": number, "slower": slower, "exit": done.returncode, "output": done.stdout})
        table = loadstage("history", "checkout", "--history", history).stdout
        print(table)
        with Store(location(history)) as store:
            runs = [{"run": int(r.run.labels["run"]), "scale": r.run.labels["delay"], "requests": stage.requests,
                     "p99": stage.latency_ms["p99"], "histogram": stage.histogram}
                    for r in store.runs("checkout", histograms=True) for stage in r.stages]
    parts.append(RECORDS, [{"before": args.before, "after": args.after, "slower": args.slower,
                            "seconds": args.seconds, "rate": args.rate, "checks": checks, "table": table,
                            "runs": sorted(runs, key=lambda r: r["run"])}])
    return 0


if __name__ == "__main__":
    sys.exit(main())
