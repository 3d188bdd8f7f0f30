"""Benchmark (j): does spec.goal pick the cheapest variant that meets the objective, in a fraction of the grid's time?

The grid: workers {1, 2} x threads {1, 2, 4} x CPU {100m, 250m} of the runner app with its `fast` delay (each
request holds a thread ~18 ms, seeded by RUNNER_DELAY_SEED) and a CPU limit that binds near the goal's rate. In
one run:
1. the reference: every variant of the grid, one --reference-seconds stage at the goal's rate, judged by the
   same objective over the whole stage; the reference optimum is the cheapest variant that passed (a tie: the
   most headroom under the objective);
2. --runs picks (`goal: {rps: ...}`, stages that end once decided), each with its own seed: a pick is right
   when its winner costs what the reference optimum costs and passed in the reference too (a variant of the
   same cost that the reference also passed is within the noise); its load time against the grid's.

    python benchmarks/goal.py [--runs 10] [--rps 80] [--slo-ms 100] [--reference-seconds 30s] [--smoke]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from common import run_experiment, spread, write_result

MATRIX = {"workers": [1, 2], "threads": [1, 2, 4], "cpu": ["100m", "250m"]}
STAGE_END = {"when": "Decided", "min": "8s", "max": "20s"}
CORES = {"100m": 0.1, "250m": 0.25}


def experiment(name: str, seed: int, matrix: dict, warmup: dict, **spec) -> dict:
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"pods": 1, "env": {"RUNNER_DELAY": "fast", "RUNNER_DELAY_SEED": str(seed)}},
                     "injectors": {"scenario": "hello", "maxUsersPerInjector": 60, "maxRatePerInjector": 200},
                     "warmup": warmup, "matrix": matrix, **spec}}


def load_seconds(status: dict, warmup_seconds: float) -> float:
    """The stages' seconds and each warm-up's (one for each variant that ran a stage): both are load."""
    warmed = sum(1 for v in status["variants"] if v["stages"])
    return sum(s["durationSeconds"] for v in status["variants"] for s in v["stages"]) + warmed * warmup_seconds


def label(settings: dict) -> str:
    return f"workers={settings['workers']} threads={settings['threads']} cpu={settings['cpu']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rps", type=int, default=80)
    parser.add_argument("--slo-ms", type=float, default=100.0)
    parser.add_argument("--reference-seconds", default="30s")
    parser.add_argument("--warmup-seconds", type=int, default=10, help="each variant's warm-up, at the goal's rate")
    parser.add_argument("--smoke", action="store_true", help="2 variants, 1 pick, 12 s stages")
    args = parser.parse_args()
    slo = {"p99": f"{args.slo_ms:g}ms"}
    matrix, stage_end = MATRIX, STAGE_END
    if args.smoke:
        args.runs, args.reference_seconds, args.warmup_seconds = 1, "4s", 2
        # 12 s: a stage needs 10 seconds with requests for an interval (a shorter one is undecided, and runs again)
        matrix, stage_end = {"threads": [1, 4], "cpu": ["250m"]}, {**STAGE_END, "max": "12s"}
    with tempfile.TemporaryDirectory(prefix="loadstage-goal-") as tmp_dir:
        tmp = Path(tmp_dir)
        warmup = {"arrivalRate": args.rps, "duration": f"{args.warmup_seconds}s"}
        grid = run_experiment(tmp, experiment("grid", 1, matrix, warmup, slo=slo, stages=[{"arrivalRate": args.rps,
                                                                 "duration": args.reference_seconds}]))
        reference = []
        for variant in grid["variants"]:
            (stage,) = variant["stages"]
            reference.append({"variant": variant["index"], "label": label(variant["settings"]),
                              "cores": CORES[variant["settings"]["cpu"]], "p99Ms": stage["latencyMs"]["p99"],
                              "outcome": stage["verdict"]["outcome"]})
        passed = [r for r in reference if r["outcome"] == "Pass"]
        optimum = min(passed, key=lambda r: (r["cores"], r["p99Ms"], r["variant"])) if passed else None
        grid_seconds = load_seconds(grid, args.warmup_seconds)
        print("reference: " + "; ".join(f"{r['label']} p99 {r['p99Ms']:.0f} ms {r['outcome']}" for r in reference)
              + f"; optimum {optimum and optimum['label']}", flush=True)
        picks = []
        for seed in range(1, args.runs + 1):
            status = run_experiment(tmp, experiment(f"pick-{seed}", seed, matrix, warmup, slo=slo,
                                                    goal={"rps": args.rps}, stageEnd=stage_end))
            found = status["recommendation"]
            winner = found["variant"]
            seconds = load_seconds(status, args.warmup_seconds)
            right = optimum is not None and winner is not None and \
                reference[winner]["cores"] == optimum["cores"] and reference[winner]["outcome"] == "Pass"
            picks.append({"seed": seed, "winner": winner, "label": reference[winner]["label"] if winner is not None
                          else None, "right": right, "loadSeconds": round(seconds, 1),
                          "stages": sum(len(v["stages"]) for v in status["variants"]),
                          "variantsRun": len(found["order"]), "sentence": found["sentence"]})
            print(f"pick {seed}: {found['sentence']}; {seconds:.0f} s of load, {picks[-1]['stages']} stages; "
                  f"right: {right}", flush=True)
    result = {"rps": args.rps, "sloMs": args.slo_ms, "matrix": matrix, "stageEnd": stage_end, "warmup": warmup,
              "reference": {"stageSeconds": args.reference_seconds, "variants": reference,
                            "optimum": optimum, "loadSeconds": grid_seconds},
              "picks": picks, "right": sum(p["right"] for p in picks), "of": len(picks),
              "loadSeconds": spread([p["loadSeconds"] for p in picks]),
              "loadShare": spread([p["loadSeconds"] / grid_seconds for p in picks])}
    print(f"right in {result['right']} of {result['of']} picks; load time {result['loadSeconds']['median']:.0f} s "
          f"(median) against {grid_seconds:.0f} s for the grid ({result['loadShare']['median']:.1%})")
    if not args.smoke:
        print(f"written to {write_result('goal', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
