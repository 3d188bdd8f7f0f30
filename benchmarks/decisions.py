"""Benchmark (f): can `loadstage compare` tell a real slowdown from noise?

Four local runs of one configuration, each a ladder of the same stage several times (compare matches the
stages apart, so each run is several stages' worth of pairs), each ladder run --repeats times
(spec.repeats: with 3 or more, every interval comes from the spread between the repeats):
- A and A again: every pair is an A/A comparison; a regression there is a false alarm;
- A with the runner app's delay 10% longer, and 30% longer (RUNNER_DELAY_SCALE): how often compare
  catches each, against A.
The runs go A, A+10%, A again, A+30%, so that a drift of the machine does not favour one side.

It also reports the coverage of the intervals: across A's stages, how often one stage's 95% interval
contains the median of the other stages' figures; and how many runs a decision like the ONS study's
(threads=3 against threads=2, p99 1.4% apart) would need on this machine.

With --aa-runs K it runs only A, K times in pairs (A, A again, A, A again, ...), and gives the false
regression rate over all K x stages pairs with its exact (Clopper-Pearson) 95% interval.

With --aa-tables K it runs K experiments of two variants that are one configuration (the same memory limit,
written two ways), in `Interleaved` order, and counts how often the report's tables mark a best variant:
in the row over all stages (the headline's `^` and the "Between variants" lines) and at each stage (the
stage rows' `^` and the p99 pivot's). Every mark there is a false one.

    python benchmarks/decisions.py [--stages 10] [--duration 10s] [--repeats 3] [--aa-runs K | --aa-tables K]
                                   [--smoke]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

from common import loadstage, write_result

FIGURES = ("p50", "p99", "mean", "rps")


def experiment(stages: int, duration: str, scale: float, repeats: int) -> dict:
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "decisions"},
            "spec": {"target": {"pods": 1, "workers": 2, "threads": 4,
                                "env": {"RUNNER_DELAY": "fast", "RUNNER_DELAY_SCALE": str(scale)}},
                     "injectors": {"usersPerInjector": 10, "waitTime": {"min": "20ms", "max": "60ms"}},
                     "stages": [{"injectors": 2, "duration": duration}] * stages, "repeats": repeats}}


def twins(stages: int, duration: str, repeats: int) -> dict:
    """Two variants of one configuration in effect: memory limits 1 MiB apart, which the app never nears.

    The same limit written twice (1Gi and 1024Mi) is refused as two identical variants."""
    doc = experiment(stages, duration, 1.0, repeats)
    doc["spec"].update(matrix={"memory": ["1Gi", "1025Mi"]}, order="Interleaved")
    return doc


def run(tmp: Path, name: str, stages: int, duration: str, scale: float, repeats: int,
        doc: dict | None = None) -> Path:
    spec = tmp / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(doc or experiment(stages, duration, scale, repeats)))
    result = tmp / f"{name}.json"
    loadstage("run", str(spec), "-q", "-o", str(result))
    print(f"{name}: done", flush=True)
    return result


def compared(base: Path, new: Path) -> tuple[list[str], str]:
    """compare's verdict per matched stage, and what the command printed."""
    from loadstage.api.status import RunStatus
    from loadstage.reports import compare, sources
    runs = []
    for path in (base, new):
        document = sources.load_document(str(path), None)
        runs.append((sources.experiment_of(str(path), document), RunStatus.from_status(document["status"])))
    comparison = compare.compare(runs[0], runs[1], compare.parse_tolerance("10%"))
    done = loadstage("compare", str(base), str(new), check=False)
    if done.returncode != (4 if comparison.regressed else 0):
        raise SystemExit(done.stdout + done.stderr)
    return [compare.rows(comparison)[i][-1] for i in range(len(comparison.stages))], done.stdout


def stages_of(result: Path) -> list[dict]:
    return json.loads(result.read_text())["status"]["variants"][0]["stages"]


def single_runs(result: Path) -> list[dict]:
    """Every stage of every repeat, each as one run measured it."""
    variant = json.loads(result.read_text())["status"]["variants"][0]
    return [h for r in variant.get("repeats", []) for h in r["stages"]] or variant["stages"]


def figure(stage: dict, name: str) -> float | None:
    if name in ("rps", "mean"):
        return stage["rps"] if name == "rps" else stage["meanMs"]
    return stage["latencyMs"][name]


def coverage(stages: list[dict]) -> dict:
    """How often a stage's interval holds the median of the other stages' figures."""
    found = {}
    for name in FIGURES:
        held = tried = 0
        for i, stage in enumerate(stages):
            bounds = (stage.get("intervals") or {}).get(name)
            if not bounds:
                continue
            others = [figure(s, name) for j, s in enumerate(stages) if j != i]
            tried += 1
            held += bounds[0] <= statistics.median(others) <= bounds[1]
        found[name] = {"held": held, "of": tried, "rate": round(held / tried, 3) if tried else None}
    return found


def runs_needed(stages: list[dict], difference: float = 0.014, power: float = 0.8) -> dict:
    """Runs per side for a two-sided 95% test to find `difference` in p99 with `power`, from the run-to-run
    spread of log p99 among A's stages."""
    from statistics import NormalDist
    logs = [math.log(figure(s, "p99")) for s in stages]
    sigma = statistics.stdev(logs)
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(power)
    return {"p99LogStdev": round(sigma, 4), "difference": difference, "power": power,
            "runsPerSide": math.ceil(2 * (z * sigma / math.log(1 + difference)) ** 2)}


def tally(verdicts: list[str]) -> dict:
    return {"pairs": len(verdicts), "regressed": sum(v.startswith("regressed") for v in verdicts),
            "withinNoise": sum("within the noise" in v for v in verdicts), "verdicts": verdicts}


def aa_only(tmp: Path, runs: int, stages: int, duration: str, repeats: int) -> dict:
    """A/A only: `runs` pairs of runs, each pair compared stage by stage."""
    verdicts = []
    for i in range(runs):
        base = run(tmp, f"a{i}", stages, duration, 1.0, repeats)
        again = run(tmp, f"a{i}-again", stages, duration, 1.0, repeats)
        found, output = compared(base, again)
        verdicts += found
        print(f"pair {i + 1}/{runs}: {tally(found)['regressed']} false regression(s)\n{output}", flush=True)
    aa = tally(verdicts)
    found = rate(aa["regressed"], aa["pairs"])
    return {"stages": stages, "stageDuration": duration, "repeats": repeats, "runPairs": runs,
            "aa": {**aa, "rate": found["rate"], "rate95": found["rate95"]}}


def rate(marked: int, of: int) -> dict:
    from loadstage.results.proportions import clopper_pearson
    low, high = clopper_pearson(marked, of, 0.95)
    return {"marked": marked, "of": of, "rate": round(marked / of, 4) if of else None,
            "rate95": [round(low, 4), round(high, 4)]}


def table_marks(result: Path) -> dict:
    """The best marks the report gives two identical variants: in the row over all stages, and per stage."""
    from loadstage.api.status import RunStatus
    from loadstage.reports import sources, tables
    from loadstage.reports.significance import between_variants
    run = RunStatus.from_status(sources.load_document(str(result), None)["status"])
    labels = [tables.variant_label(run, v) for v in run.variants]
    lines = between_variants(run, labels)
    headline = any(tables.headline_marks(run)) or any(" is best" in line for line in lines)
    stages = [s.stage for s in run.variants[0].stages]
    pivot = tables.pivot_rows(run, users=False)[1]
    per_stage = [any(tables.stage_marks(run, v, s) for v in run.variants for s in v.stages if s.stage == n)
                 or any(cell.endswith(tables.BEST) for cell in row)
                 for n, row in zip(stages, pivot)]
    return {"headline": headline, "stages": per_stage, "lines": lines}


def aa_tables(tmp: Path, runs: int, stages: int, duration: str, repeats: int) -> dict:
    """`runs` experiments of two identical variants: how often their tables mark a best."""
    found = []
    for i in range(runs):
        marks = table_marks(run(tmp, f"twins{i}", stages, duration, 1.0, repeats, twins(stages, duration, repeats)))
        found.append(marks)
        print(f"experiment {i + 1}/{runs}: headline {'marked' if marks['headline'] else 'not marked'}, "
              f"{sum(marks['stages'])} of {len(marks['stages'])} stage(s) marked\n  " + "\n  ".join(marks["lines"]),
              flush=True)
    every_stage = [m for f in found for m in f["stages"]]
    return {"stages": stages, "stageDuration": duration, "repeats": repeats, "experiments": runs,
            "headline": rate(sum(f["headline"] for f in found), runs),
            "perStage": rate(sum(every_stage), len(every_stage)), "found": found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=10)
    parser.add_argument("--duration", default="10s")
    parser.add_argument("--repeats", type=int, help="each run's repeats (default 3)")
    parser.add_argument("--aa-runs", type=int, help="only A/A: this many pairs of runs")
    parser.add_argument("--aa-tables", type=int, help="only A/A of the tables: this many experiments of twins")
    parser.add_argument("--smoke", action="store_true", help="1 stage of 3 s per run")
    args = parser.parse_args()
    stages, duration = (1, "3s") if args.smoke else (args.stages, args.duration)
    repeats = args.repeats or 3
    with tempfile.TemporaryDirectory(prefix="loadstage-decisions-") as tmp_name:
        tmp = Path(tmp_name)
        if args.aa_tables:
            result = aa_tables(tmp, args.aa_tables, stages, duration, repeats)
            for name, what in (("headline", "rows over all stages"), ("perStage", "stages")):
                r = result[name]
                print(f"A/A tables: a best marked in {r['marked']} of {r['of']} {what}: {r['rate']:.1%}, "
                      f"95% interval {r['rate95'][0]:.1%} to {r['rate95'][1]:.1%}")
            if not args.smoke:
                print(f"written to {write_result('decisions-aa-tables', result)}")
            return 0
        if args.aa_runs:
            result = aa_only(tmp, args.aa_runs, stages, duration, repeats)
            aa = result["aa"]
            print(f"A/A: {aa['regressed']} false regression(s) in {aa['pairs']} pairs: {aa['rate']:.1%}, "
                  f"95% interval {aa['rate95'][0]:.1%} to {aa['rate95'][1]:.1%}")
            if not args.smoke:
                print(f"written to {write_result('decisions-aa', result)}")
            return 0
        a = run(tmp, "a", stages, duration, 1.0, repeats)
        slower10 = run(tmp, "a-plus-10", stages, duration, 1.1, repeats)
        again = run(tmp, "a-again", stages, duration, 1.0, repeats)
        slower30 = run(tmp, "a-plus-30", stages, duration, 1.3, repeats)
        result: dict = {"stages": stages, "stageDuration": duration, "repeats": repeats}
        for name, new in (("aa", again), ("plus10", slower10), ("plus30", slower30)):
            verdicts, output = compared(a, new)
            result[name] = tally(verdicts)
            print(f"\n== compare a.json {new.name} ==\n{output}")
        a_stages = stages_of(a) + stages_of(again)
        result["coverage"] = coverage(a_stages)
        result["examples"] = {"a": stages_of(a)[0].get("intervals"), "plus30": stages_of(slower30)[0].get("intervals")}
        result["method"] = (stages_of(a)[0].get("intervals") or {}).get("method")
        if len(a_stages) >= 3:
            result["onsDecision"] = runs_needed(single_runs(a) + single_runs(again))
    print(f"A/A: {result['aa']['regressed']} false regression(s) in {result['aa']['pairs']} pair(s); "
          f"+10%: {result['plus10']['regressed']} of {result['plus10']['pairs']} caught; "
          f"+30%: {result['plus30']['regressed']} of {result['plus30']['pairs']} caught")
    print(f"coverage of {result['method'] or 'no'} 95% intervals ({repeats} repeat(s) a run): " + ", ".join(
        f"{name} {c['held']}/{c['of']}" for name, c in result["coverage"].items()))
    if "onsDecision" in result:
        print(f"a 1.4% p99 difference at 80% power needs {result['onsDecision']['runsPerSide']} run(s) per side "
              f"(stdev of log p99 between runs {result['onsDecision']['p99LogStdev']})")
    if not args.smoke:
        print(f"written to {write_result('decisions', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
