"""Benchmark (d): what the local engine adds around the load.

Runs one variant through several stages and reports, from the result's own timestamps:
- the wall time of the whole run against the sum of the stage durations;
- the gap between stages: from the last request of one stage to the start of the next
  stage's load (stopping the stage, collecting, starting the next master and workers);
- the set-up before the first stage (redis-server, gunicorn, readiness).

    python benchmarks/local_overhead.py [--stages 4] [--duration 10s] [--injectors 2] [--smoke]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from common import loadstage, write_result
from loadstage.api.quantities import parse_duration


def measure(stages: int, duration: str, injectors: int) -> dict:
    doc = {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "overhead"},
           "spec": {"target": {"pods": 1, "workers": 2, "threads": 4},
                    "injectors": {"usersPerInjector": 10, "waitTime": {"min": "50ms", "max": "100ms"}},
                    "stages": [{"injectors": injectors, "duration": duration}] * stages}}
    with tempfile.TemporaryDirectory(prefix="loadstage-overhead-") as tmp:
        path = Path(tmp) / "exp.yaml"
        path.write_text(yaml.safe_dump(doc))
        started = time.time()
        loadstage("run", str(path), "-q", "-o", str(Path(tmp) / "result.json"), "--workdir", str(Path(tmp) / "w"))
        wall = time.time() - started
        result = json.loads((Path(tmp) / "result.json").read_text())["status"]["variants"][0]["stages"]
        summaries = [json.loads((Path(tmp) / "w" / "variant-1" / f"stage-{i}" / "summary.json").read_text())
                     for i in range(1, stages + 1)]
    gaps = [b["loadStartedAt"] - a["loadEndedAt"] for a, b in itertools.pairwise(summaries)]
    load = [s["loadEndedAt"] - s["loadStartedAt"] for s in summaries]
    total = parse_duration(duration) * stages
    return {"stages": stages, "stageDurationSeconds": parse_duration(duration), "injectors": injectors,
            "wallSeconds": round(wall, 2), "sumOfStageDurationsSeconds": total,
            "wallOverSum": round(wall / total, 3),
            "setupBeforeFirstLoadSeconds": round(summaries[0]["loadStartedAt"] - started, 2),
            "gapBetweenStagesSeconds": [round(g, 2) for g in gaps],
            "gapMedianSeconds": round(statistics.median(gaps), 2) if gaps else None,
            "loadSecondsPerStage": [round(x, 2) for x in load],
            "requests": [s["requests"] for s in result]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--duration", default="10s")
    parser.add_argument("--injectors", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="2 stages of 3 s (CI)")
    args = parser.parse_args()
    stages, duration = (2, "3s") if args.smoke else (args.stages, args.duration)
    r = measure(stages, duration, args.injectors)
    print(f"{r['stages']} stages x {duration} with {r['injectors']} injectors: wall {r['wallSeconds']} s "
          f"for {r['sumOfStageDurationsSeconds']:g} s of stages (x{r['wallOverSum']})")
    print(f"set-up before the first load: {r['setupBeforeFirstLoadSeconds']} s; "
          f"gaps between stages: {r['gapBetweenStagesSeconds']} s (median {r['gapMedianSeconds']} s)")
    print(f"load per stage: {r['loadSecondsPerStage']} s; requests: {r['requests']}")
    if not args.smoke:
        print(f"written to {write_result('local_overhead', r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
