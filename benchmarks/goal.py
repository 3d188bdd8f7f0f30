"""Benchmark (j): does spec.goal pick the cheapest variant that meets the objective, in a fraction of the grid's time?

The grid: workers {1, 2} x threads {1, 2, 4} x CPU {100m, 250m} of the runner app with its `fast` delay (each
request holds a thread ~18 ms, seeded by RUNNER_DELAY_SEED) and a CPU limit that binds near the goal's rate. The
goal is 80 req/s with p99 <= 100 ms and slo.tolerance 10%. Every variant, in the truth and in each pick, first
warms up for 10 s at the goal's rate. The benchmark runs in parts (benchmarks/parts.py), each appending its
seeded records to benchmarks/results/goal-runs.jsonl:
- `truth`: every variant, one long stage at the goal's rate (30 s settled, then measured), the variants in a
  random order, one repeat a run; each variant's truth pools its repeats (benchmarks/truth.py);
- `picks`: seeded picks (`goal: {rps: 80}`, stages that end once decided). A pick is right when its winner's
  truth p99 is at most 1.1 L and its cost is at most the least cost among the variants whose truth meets the
  objective; its load time is against the grid's, one 30 s stage and its warm-up a variant;
- `report`: the figures over every record of one method, each count with its Clopper-Pearson interval, each
  pick scored against the truth of the machine it ran on (truth.machine_of), where that truth has its winner
  and every cheaper variant.

    python benchmarks/goal.py truth --seeds 1-3
    python benchmarks/goal.py truth --seeds 4-6 --matrix '{"workers": [1], "threads": [2, 4], "cpu": ["100m"]}'
    python benchmarks/goal.py picks --seeds 1-30
    python benchmarks/goal.py report
    python benchmarks/goal.py --smoke      # every part, tiny, into a directory of its own
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import parts
import truth
from common import run_experiment, spread, write_result

MATRIX = {"workers": [1, 2], "threads": [1, 2, 4], "cpu": ["100m", "250m"]}
STAGE_END = {"when": "Decided", "min": "8s", "max": "30s"}
CORES = {"100m": 0.1, "250m": 0.25}
RPS, SLO_MS, WARMUP_SECONDS, GRID_STAGE_SECONDS = 80, 100.0, 10, 30
TRUTH_SECONDS = 120
RECORDS = "goal-runs"


def experiment(name: str, delay_seed: int, matrix: dict, warmup_seconds: float, **spec) -> dict:
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"pods": 1, "env": {"RUNNER_DELAY": "fast", "RUNNER_DELAY_SEED": str(delay_seed)}},
                     "injectors": {"scenario": "hello", "maxUsersPerInjector": 60, "maxRatePerInjector": 200},
                     "warmup": {"arrivalRate": RPS, "duration": f"{warmup_seconds:g}s"}, "matrix": matrix,
                     "slo": {"p99": f"{SLO_MS:g}ms", "tolerance": "10%"}, **spec}}


def load_seconds(status: dict, warmup_seconds: float) -> float:
    """The stages' seconds and each warm-up's (one for each variant that ran a stage): both are load."""
    warmed = sum(1 for v in status["variants"] if v["stages"])
    return sum(s["durationSeconds"] for v in status["variants"] for s in v["stages"]) + warmed * warmup_seconds


def label(settings: dict) -> str:
    return f"workers={settings['workers']} threads={settings['threads']} cpu={settings['cpu']}"


def cores(settings: dict) -> float:
    return CORES[settings["cpu"]]


def grid_index(settings: dict, grid: dict) -> int:
    """A variant's index in `grid`'s cross product (its last key varying fastest), from its settings."""
    index = 0
    for key, values in grid.items():
        index = index * len(values) + values.index(settings[key])
    return index


def run_truth(tmp: Path, seed: int, matrix: dict, seconds: float, settle: float, warmup_seconds: float,
              grid: dict | None = None) -> list[dict]:
    """Each variant of `matrix` (the grid, or a part of it: each record has its index in `grid`)."""
    name = f"truth-{seed}"
    status = run_experiment(tmp, experiment(name, seed, matrix, warmup_seconds, order="Random", seed=seed,
                                            stages=[{"arrivalRate": RPS, "duration": f"{seconds:g}s"}]))
    records = []
    for variant in status["variants"]:
        blocks = truth.settled(truth.stage_blocks(tmp / f"{name}-work", 1, variant["index"] + 1), settle)
        records.append({"part": "truth", "seed": seed, "variant": grid_index(variant["settings"], grid or matrix),
                        "label": label(variant["settings"]), "cores": cores(variant["settings"]),
                        "p99Ms": truth.pooled([blocks])["p99Ms"], "blocks": blocks})
        print(f"truth seed {seed}: {records[-1]['label']} settled p99 {records[-1]['p99Ms']} ms", flush=True)
    return records


def run_pick(tmp: Path, seed: int, matrix: dict, stage_end: dict | None, warmup_seconds: float) -> dict:
    status = run_experiment(tmp, experiment(f"pick-{seed}", seed, matrix, warmup_seconds, goal={"rps": RPS},
                                            **({"stageEnd": stage_end} if stage_end else {})))
    found = status["recommendation"]
    record = {"part": "pick", "seed": seed, "winner": found.get("variant"), "sentence": found["sentence"],
              "confirmed": (found.get("winner") or {}).get("confirmed"), "equivalent": found.get("equivalent"),
              "loadSeconds": round(load_seconds(status, warmup_seconds), 1), "order": found.get("order"),
              "stagesRun": {v["index"]: [parts.stage_row(s) for s in v["stages"]] for v in status["variants"]
                            if v["stages"]}}
    print(f"pick {seed}: {found['sentence']}; {record['loadSeconds']:.0f} s of load", flush=True)
    return record


def scored(pick: dict, known: dict, labels: dict, variants: int) -> bool | None:
    """Whether a pick is right against its machine's truth (`known`, by variant): its winner's truth p99 at most
    1.1 L, and no variant cheaper than it meets; None where that truth lacks the winner or a cheaper variant."""
    winner = pick["winner"]
    cost = math.inf if winner is None else labels[winner][1]
    cheaper = [v for v in range(variants) if v not in labels or labels[v][1] < cost]
    if (winner is not None and winner not in known) or any(v not in known for v in cheaper):
        return None
    if any(truth.classify(known[v], SLO_MS) == "meets" for v in cheaper):
        return False
    return winner is None or known[winner]["p99Ms"] <= 1.1 * SLO_MS


def report(records: list[dict], method: str | None, variants: int) -> dict:
    """The picks of one method, each scored against the truth of the machine it ran on (which variant meets is
    the machine's); a pick whose machine's truth cannot score it is counted as unscored. The truth shown is
    that of the machine with the most truth records."""
    truths = [r for r in records if r["part"] == "truth"]
    machines = truth.by_machine(truths, "variant")
    machine = next(iter(machines), None)
    known = machines[machine] if machine is not None else {}
    labels = {r["variant"]: (r["label"], r["cores"]) for r in truths}
    every = [r for r in records if r["part"] == "pick"]
    method = method or (every[-1]["method"] if every else None)
    every = [r for r in every if r["method"] == method]
    verdicts = [scored(p, machines.get(truth.machine_of(p), {}), labels, variants) for p in every]
    picks = [p for p, ok in zip(every, verdicts) if ok is not None]
    judged = [ok for ok in verdicts if ok is not None]
    classes = {v: truth.classify(t, SLO_MS) for v, t in known.items()}
    least = min((labels[v][1] for v, c in classes.items() if c == "meets"), default=None)
    grid_seconds = variants * (GRID_STAGE_SECONDS + WARMUP_SECONDS)
    share = [p["loadSeconds"] / grid_seconds for p in picks]
    return {"rps": RPS, "sloMs": SLO_MS, "tolerance": 0.1, "method": method, "truthMachine": machine,
            "scoredOn": {m: sum(truth.machine_of(p) == m for p in picks) for m in sorted({truth.machine_of(p)
                                                                                        for p in picks})},
            "otherTruths": {m: {labels[v][0]: {**t, "class": truth.classify(t, SLO_MS)} for v, t in found.items()}
                            for m, found in machines.items() if m != machine},
            "unscored": len(every) - len(picks),
            "truth": {labels[v][0]: {**t, "class": classes[v], "cores": labels[v][1]} for v, t in known.items()},
            "leastCostThatMeets": least, "right": parts.rate(sum(judged), len(judged)),
            "winners": {labels[w][0] if w in labels else str(w): sum(p["winner"] == w for p in picks)
                        for w in sorted({p["winner"] for p in picks}, key=str)},
            "wrong": [{"seed": p["seed"], "sentence": p["sentence"]} for p, ok in zip(picks, judged) if not ok],
            "gridSeconds": grid_seconds, "loadShare": spread(share) if share else None}


def printed(result: dict) -> None:
    print("truth: " + "; ".join(f"{name} p99 {t['p99Ms']} ms [{t['interval'][0]}, {t['interval'][1]}] {t['class']}"
                                for name, t in result["truth"].items()))
    print(f"the least cost that meets the objective: {result['leastCostThatMeets']} cores")
    for machine, truths in result["otherTruths"].items():
        print(f"truth on {machine}: " + "; ".join(f"{name} p99 {t['p99Ms']} ms {t['class']}"
                                                  for name, t in truths.items()))
    if result["right"]["of"]:
        print(f"picks right {parts.said(result['right'])}, each against its machine's truth {result['scoredOn']}; "
              f"{result['unscored']} unscored; winners {result['winners']}; load share "
              f"{result['loadShare']['median']:.1%} of the grid (median)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=["truth", "picks", "report"])
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--method", help="report this method's records (default: the latest part's)")
    parser.add_argument("--matrix", type=json.loads, default=MATRIX,
                        help="truth: more repeats of a part of the grid, e.g. '{\"workers\": [1], \"threads\": [2, "
                             "4], \"cpu\": [\"100m\"]}'")
    parser.add_argument("--smoke", action="store_true", help="every part, tiny, into a directory of its own")
    args = parser.parse_args()
    if args.smoke:
        return smoke()
    if args.part is None:
        parser.error("name a part, or --smoke")
    with tempfile.TemporaryDirectory(prefix="loadstage-goal-") as tmp_dir:
        tmp = Path(tmp_dir)
        if args.part == "truth":
            parts.record_seeds(RECORDS, parts.seeds(args.seeds), lambda seed: run_truth(
                tmp, seed, args.matrix, TRUTH_SECONDS, truth.SETTLE_SECONDS, WARMUP_SECONDS, MATRIX))
        elif args.part == "picks":
            parts.record_seeds(RECORDS, parts.seeds(args.seeds),
                               lambda seed: [run_pick(tmp, seed, MATRIX, STAGE_END, WARMUP_SECONDS)])
    variants = len(MATRIX["workers"]) * len(MATRIX["threads"]) * len(MATRIX["cpu"])
    result = report(parts.read(RECORDS), args.method, variants)
    printed(result)
    print(f"written to {write_result('goal', result)}")
    return 0


def smoke() -> int:
    """Every part, in seconds: two variants' truth from 12 s stages, and one pick of stages that end at 12 s."""
    matrix = {"threads": [1, 4], "cpu": ["250m"]}
    with tempfile.TemporaryDirectory(prefix="loadstage-goal-") as tmp_dir:
        tmp = Path(tmp_dir)
        records = run_truth(tmp, 1, matrix, 12, 0, 2)
        # 12 s: a stage needs 10 seconds with requests for an interval (a shorter one is undecided, and runs again)
        records.append(run_pick(tmp, 1, matrix, {**STAGE_END, "max": "12s"}, 2))
        parts.append(RECORDS, records, directory=tmp / "results")
        result = report(parts.read(RECORDS, directory=tmp / "results"), None, 2)
    printed(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
