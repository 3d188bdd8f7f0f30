"""Benchmark (i): does the capacity search find a knee that is known, in a fraction of a fixed ladder's time?

The target's capacity is its own design: one gthread worker of 2 threads, each request held ~19 ms (the runner
app's `fast` delay, seeded by RUNNER_DELAY_SEED), so at most ~100 req/s; the load is an arrival rate (an open
model), so that the queue, and the p99, climb with the rate whatever the answers. In one run:
1. the reference: a fixed, fine ladder of arrival rates around the knee, each stage --reference-seconds long;
   the knee is where its p99 crosses the objective (interpolated between the two stages around it);
2. --runs searches (`search: {load: rps}`, stages that end once decided), each with its own seed: how often the
   bracket contains the reference knee; how often it is right with the tolerance (slo.tolerance, 10%): the
   reference's p99 at its pass end at most 1.1 x the objective and at its fail end at least 0.9 x (a Near load:
   within both); and the search's load time against a fixed ladder's at the same resolution over the same range,
   each stage at the searches' stageEnd.max;
3. an A/A check of the verdicts: a low rate (next to no queueing) whose p99 is measured once over a long stage,
   then --verdict-stages stages with the objective set so that this p99 sits at 0.8x it (every Fail is wrong),
   and --verdict-stages with it at 1.25x (every Pass is wrong).

    python benchmarks/search.py [--runs 10] [--slo-ms 100] [--verdict-stages 10] [--smoke]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
from pathlib import Path

from common import run_experiment, spread, write_result

# from 20/s: at 10/s a 30 s stage has 300 requests, and none of them over the objective is compatible with 1.1%
# over it at 95%: its p99 cannot pass (undecided twice, the search would fail at its floor)
SEARCH = {"load": "rps", "from": 20, "max": 160, "resolution": "10%"}
STAGE_END = {"when": "Decided", "min": "8s", "max": "30s"}
LOW_RATE = 30


def experiment(name: str, seed: int, **spec) -> dict:
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"pods": 1, "workers": 1, "threads": 2,
                                "env": {"RUNNER_DELAY": "fast", "RUNNER_DELAY_SEED": str(seed)}},
                     "injectors": {"scenario": "hello", "maxUsersPerInjector": 60, "maxRatePerInjector": 400},
                     "warmup": {"arrivalRate": 10, "duration": "3s"}, **spec}}


def run(tmp: Path, doc: dict) -> dict:
    return run_experiment(tmp, doc)["variants"][0]


def crossing(stages: list[dict], slo_ms: float) -> float | None:
    """The rate at which the ladder's p99 first crosses the objective, interpolated in log p99 between the
    last stage under it and the first over it; None if it never does."""
    ordered = sorted(stages, key=lambda s: s["arrivalRate"])
    for below, above in itertools.pairwise(ordered):
        lo, hi = below["latencyMs"]["p99"], above["latencyMs"]["p99"]
        if lo <= slo_ms < hi:
            share = (math.log(slo_ms) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return below["arrivalRate"] + share * (above["arrivalRate"] - below["arrivalRate"])
    return None


def reference_p99(stages: list[dict], rate: float) -> float:
    """The reference ladder's p99 at a rate, interpolated in log p99 between the stages around it (beyond the
    ladder, its nearest stage's)."""
    ordered = sorted(stages, key=lambda s: s["arrivalRate"])
    if rate <= ordered[0]["arrivalRate"]:
        return float(ordered[0]["latencyMs"]["p99"])
    for below, above in itertools.pairwise(ordered):
        if below["arrivalRate"] <= rate <= above["arrivalRate"]:
            share = (rate - below["arrivalRate"]) / (above["arrivalRate"] - below["arrivalRate"])
            lo, hi = math.log(below["latencyMs"]["p99"]), math.log(above["latencyMs"]["p99"])
            return math.exp(lo + share * (hi - lo))
    return float(ordered[-1]["latencyMs"]["p99"])


def right(result: dict, ladder: list[dict], slo_ms: float, tolerance: float = 0.1) -> bool:
    """Right within the tolerance: a pass end the reference holds within 1.1 x the objective, a fail end it breaks
    beyond 0.9 x, or a Near load within both."""
    if result.get("near") is not None:
        return (1 - tolerance) * slo_ms <= reference_p99(ladder, result["near"]) <= (1 + tolerance) * slo_ms
    if result["pass"] is None or result["fail"] is None:
        return False
    return reference_p99(ladder, result["pass"]) <= (1 + tolerance) * slo_ms and \
        reference_p99(ladder, result["fail"]) >= (1 - tolerance) * slo_ms


def fixed_ladder_seconds(search: dict, stage_seconds: float) -> float:
    """A geometric ladder over [from, max] whose steps are the search's resolution, every stage run whole."""
    step = 1 + float(search["resolution"].rstrip("%")) / 100
    return (math.ceil(math.log(search["max"] / search["from"]) / math.log(step)) + 1) * stage_seconds


def verdicts(tmp: Path, name: str, seed: int, slo_ms: float, stages: int, stage_end: dict | None,
             seconds: str) -> list[str]:
    doc = experiment(name, seed, slo={"p99": f"{slo_ms:.3f}ms"}, **({"stageEnd": stage_end} if stage_end else {}),
                     stages=[{"arrivalRate": LOW_RATE, "duration": seconds}] * stages)
    return [s["verdict"]["outcome"] for s in run(tmp, doc)["stages"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slo-ms", type=float, default=100.0)
    parser.add_argument("--reference", default="60,64,68,72,76,80,84,88,92,96,100,104",
                        help="the reference ladder's arrival rates")
    parser.add_argument("--reference-seconds", default="30s")
    parser.add_argument("--verdict-stages", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="1 search of 3 s stages, 2 reference stages, no looks")
    args = parser.parse_args()
    search, stage_end = dict(SEARCH), dict(STAGE_END)
    rates, reference_seconds = [int(r) for r in args.reference.split(",")], args.reference_seconds
    stage_seconds = stage_end["max"]
    if args.smoke:
        args.runs, args.verdict_stages, rates, reference_seconds = 1, 1, [40, 200], "3s"
        search.update({"from": 40, "max": 80, "resolution": "50%", "duration": "3s"})
        stage_end, stage_seconds = None, "3s"
    slo = {"p99": f"{args.slo_ms:g}ms"}
    with tempfile.TemporaryDirectory(prefix="loadstage-search-") as tmp_dir:
        tmp = Path(tmp_dir)
        ladder = run(tmp, experiment("reference", 1, slo=slo, stages=[
            {"arrivalRate": r, "duration": reference_seconds} for r in rates]))["stages"]
        knee = crossing(ladder, args.slo_ms)
        print("reference ladder: " + ", ".join(f"{s['arrivalRate']}/s p99 {s['latencyMs']['p99']:.0f} ms"
                                                 for s in ladder) + f"; knee {knee and round(knee, 1)}/s", flush=True)
        searches = []
        for seed in range(1, args.runs + 1):
            found = run(tmp, experiment(f"search-{seed}", seed, slo=slo, search=search,
                                        **({"stageEnd": stage_end} if stage_end else {})))
            result = found["search"]
            contains = knee is not None and result["pass"] is not None and result["fail"] is not None \
                and result["pass"] <= knee <= result["fail"]
            searches.append({"seed": seed, **{k: result.get(k) for k in (
                                 "pass", "fail", "near", "reason", "stages", "loadSeconds", "resolution", "confirmed",
                                 "contradictions")},
                             "containsKnee": contains, "right": right(result, ladder, args.slo_ms),
                             "stagesRun": [[s["arrivalRate"], s["endedBy"], s["verdict"]["outcome"],
                                            s["durationSeconds"], s["verdict"].get("settleSeconds"),
                                            s["verdict"].get("batches"), s["verdict"].get("batchSeconds")]
                                           for s in found["stages"]]})
            print(f"search {seed}: {result['pass']}-{result['fail']} rps ({result['reason']}"
                  f"{', near ' + str(result['near']) if result.get('near') else ''}), {result['stages']} stages, "
                  f"{result['loadSeconds']:.0f} s of load; contains the knee: {contains}; right within 10%: "
                  f"{searches[-1]['right']}; contradictions: {result.get('contradictions', [])}", flush=True)
        fixed = fixed_ladder_seconds(search, float(stage_seconds.rstrip("s")))
        truth = run(tmp, experiment("truth", 1, stages=[{"arrivalRate": LOW_RATE, "duration": reference_seconds}]))
        true_p99 = truth["stages"][0]["latencyMs"]["p99"]
        # every Fail is wrong at 0.8x, every Pass at 1.25x
        under = verdicts(tmp, "under", 2, true_p99 / 0.8, args.verdict_stages, stage_end, stage_seconds)
        over = verdicts(tmp, "over", 3, true_p99 / 1.25, args.verdict_stages, stage_end, stage_seconds)
    wrong = under.count("Fail") + over.count("Pass")
    result = {
        "sloMs": args.slo_ms, "search": search, "stageEnd": stage_end,
        "reference": {"rates": rates, "stageSeconds": reference_seconds, "kneeRps": knee,
                      "p99Ms": [s["latencyMs"]["p99"] for s in ladder]},
        "searches": searches,
        "bracketContainsKnee": sum(s["containsKnee"] for s in searches), "of": len(searches),
        "rightWithinTolerance": sum(s["right"] for s in searches),
        "loadSeconds": spread([s["loadSeconds"] for s in searches]),
        "fixedLadderSeconds": fixed,
        "loadShare": spread([s["loadSeconds"] / fixed for s in searches]),
        "bracketWidth": spread([s["resolution"] for s in searches if s["resolution"] is not None] or [0.0]),
        "verdicts": {"lowRate": LOW_RATE, "trueP99Ms": true_p99, "atPoint8": under, "at1Point25": over,
                     "wrong": wrong, "of": len(under) + len(over)},
    }
    print(f"bracket contains the reference knee in {result['bracketContainsKnee']} of {result['of']} searches, "
          f"right within 10% in {result['rightWithinTolerance']}; "
          f"load time {result['loadSeconds']['median']:.0f} s (median) against {fixed:.0f} s for a fixed ladder "
          f"({result['loadShare']['median']:.1%}); wrong verdicts {wrong} of {result['verdicts']['of']} "
          f"(p99 {true_p99:.1f} ms at 0.8x: {under}; at 1.25x: {over})")
    if not args.smoke:
        print(f"written to {write_result('search', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
