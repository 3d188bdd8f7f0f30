"""Benchmark (i): is the capacity search right about a knee that is known, and its verdicts at the objective's edges?

Two targets whose capacity is their own design (the runner app's `fast` delay holds a thread ~19 ms, seeded by
RUNNER_DELAY_SEED), each one gthread worker, loaded at an arrival rate (an open model, so the queue and the p99
climb with the rate whatever the answers): KNEES, 2 threads (~100 req/s at most) and 4 threads. The objective is
p99 <= 100 ms with slo.tolerance 10%. The benchmark runs in parts (benchmarks/parts.py), each appending its
seeded records to benchmarks/results/search-runs.jsonl:
- `truth`: long stages (30 s settled, then measured) at loads around a knee, in a random order, one repeat a
  run; the truth of each load pools its repeats (benchmarks/truth.py);
- `searches`: seeded searches (`search: {load: rps}`, stages that end once decided, `from` varied by the seed);
  a search is right when the truth's p99 at its pass end is at most 1.1 L and at its fail end at least 0.9 L
  (a Near load: within both), the truth of its own machine (its CPU model; a search where the knee has none is
  counted as unscored), and its load time is against a fixed ladder's at the same resolution; a search is also
  counted unrefuted where the truth's intervals leave its answer possible (its pass end no load that fails);
- `verdicts`: stages at one load of the truth, with the objective set so that the truth's p99 sits at 0.9x, 1.1x,
  0.8x or 1.25x it: at 0.9x and 0.8x a Fail is wrong, at 1.1x and 1.25x a Pass, at 0.8x and 1.25x a Near too;
- `overload`: stages at a load past the target's capacity (utilisation >= 1): any Pass is wrong;
- `report`: the figures over every record of one method, each count with its Clopper-Pearson interval.

    python benchmarks/search.py truth --knee two-threads --seeds 1-3
    python benchmarks/search.py searches --knee two-threads --seeds 1-15
    python benchmarks/search.py verdicts --knee two-threads --factor 0.9 --stages 30 --seeds 1
    python benchmarks/search.py overload --knee two-threads --stages 20 --seeds 1
    python benchmarks/search.py report
    python benchmarks/search.py --smoke      # every part, tiny, into a directory of its own
"""

from __future__ import annotations

import argparse
import collections
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path

import parts
import truth
from common import machine, run_experiment, spread, write_result

SLO_MS = 100.0
KNEES = {
    "two-threads": {"threads": 2, "loads": [84, 88, 92, 96, 100, 104], "verdictLoad": 92, "overload": 115,
                    "search": {"load": "rps", "max": 160, "resolution": "10%"}, "from": [20, 25, 30, 35, 40]},
    "four-threads": {"threads": 4, "loads": [182, 186, 190, 194, 198, 202], "verdictLoad": 186, "overload": 230,
                     "search": {"load": "rps", "max": 320, "resolution": "10%"}, "from": [40, 50, 60, 70, 80]},
}
STAGE_END = {"when": "Decided", "min": "8s", "max": "30s"}
TRUTH_SECONDS = 120
RECORDS = "search-runs"
WRONG = {0.8: ("Fail", "Near"), 0.9: ("Fail",), 1.1: ("Pass",), 1.25: ("Pass", "Near")}


def experiment(name: str, seed: int, threads: int, **spec) -> dict:
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": name},
            "spec": {"target": {"pods": 1, "workers": 1, "threads": threads,
                                "env": {"RUNNER_DELAY": "fast", "RUNNER_DELAY_SEED": str(seed)}},
                     "injectors": {"scenario": "hello", "maxUsersPerInjector": 60, "maxRatePerInjector": 400},
                     "warmup": {"arrivalRate": 10, "duration": "3s"}, **spec}}


def slo(limit_ms: float = SLO_MS) -> dict:
    return {"p99": f"{limit_ms:.3f}ms", "tolerance": "10%"}


def run_truth(tmp: Path, knee: str, seed: int, loads: list[float], seconds: float, settle: float) -> list[dict]:
    """One repeat: every load once, in an order drawn from the seed."""
    order = list(loads)
    random.Random(seed).shuffle(order)
    name = f"truth-{knee}-{seed}"
    status = run_experiment(tmp, experiment(name, seed, KNEES[knee]["threads"], stages=[
        {"arrivalRate": load, "duration": f"{seconds:g}s"} for load in order]))
    records = []
    for number, (load, stage) in enumerate(zip(order, status["variants"][0]["stages"]), 1):
        blocks = truth.settled(truth.stage_blocks(tmp / f"{name}-work", number), settle)
        records.append({"part": "truth", "knee": knee, "seed": seed, "load": load, "stageSeconds": seconds,
                        "settleSeconds": settle, "rps": stage["rps"], "p99Ms": truth.pooled([blocks])["p99Ms"],
                        "blocks": blocks})
        print(f"truth {knee} seed {seed}: {load}/s served {stage['rps']:.1f}/s, settled p99 "
              f"{records[-1]['p99Ms']} ms", flush=True)
    return records


def run_search(tmp: Path, knee: str, seed: int, search: dict, stage_end: dict | None) -> dict:
    spec = KNEES[knee]
    status = run_experiment(tmp, experiment(f"search-{knee}-{seed}", seed, spec["threads"], slo=slo(),
                                            search=search, **({"stageEnd": stage_end} if stage_end else {})))
    variant = status["variants"][0]
    found = variant["search"]
    record = {"part": "search", "knee": knee, "seed": seed, "search": search, "stageEnd": stage_end,
              **{k: found.get(k) for k in ("pass", "fail", "near", "reason", "stages", "loadSeconds", "resolution",
                                           "confirmed", "contradictions")},
              "stagesRun": [parts.stage_row(s) for s in variant["stages"]]}
    print(f"search {knee} seed {seed} from {search['from']}: {found['pass']}-{found['fail']} rps "
          f"({found['reason']}{', near ' + str(found['near']) if found.get('near') else ''}), {found['stages']} "
          f"stages, {found['loadSeconds']:.0f} s of load, contradictions {found.get('contradictions') or []}",
          flush=True)
    return record


def run_verdicts(tmp: Path, knee: str, seed: int, load: float, limit_ms: float, stages: int, stage_end: dict | None,
                 seconds: str, factor: float | None) -> list[dict]:
    name = f"verdicts-{knee}-{round(factor * 100) if factor else 'overload'}-{seed}"
    status = run_experiment(tmp, experiment(name, seed, KNEES[knee]["threads"], slo=slo(limit_ms),
                                            **({"stageEnd": stage_end} if stage_end else {}),
                                            stages=[{"arrivalRate": load, "duration": seconds}] * stages))
    rows = [parts.stage_row(s) for s in status["variants"][0]["stages"]]
    print(f"verdicts {knee} at {load}/s, objective {limit_ms:.1f} ms ({f'{factor}x' if factor else 'overload'}): "
          + ", ".join(r["outcome"] for r in rows), flush=True)
    return [{"part": "overload" if factor is None else "verdict", "knee": knee, "seed": seed, "factor": factor,
             "limitMs": limit_ms, **row} for row in rows]


def truths(records: list[dict], knee: str) -> dict[str, dict[float, dict]]:
    """Each machine's truth of the knee (truth.by_machine): a search is scored against its own machine's only."""
    return truth.by_machine([r for r in records if r["part"] == "truth" and r["knee"] == knee], "load")


def right(record: dict, known: dict[float, dict], limit_ms: float = SLO_MS, tolerance: float = 0.1) -> bool:
    if record.get("near") is not None:
        return (1 - tolerance) * limit_ms <= truth.p99_at(known, record["near"]) <= (1 + tolerance) * limit_ms
    if record["pass"] is None or record["fail"] is None:
        return False
    return truth.p99_at(known, record["pass"]) <= (1 + tolerance) * limit_ms and \
        truth.p99_at(known, record["fail"]) >= (1 - tolerance) * limit_ms


def unrefuted(record: dict, known: dict[float, dict], limit_ms: float = SLO_MS) -> bool:
    """Whether the truth's intervals leave the search's answer possible: its pass end not a load that fails, its
    fail end not one that meets (a Near load: one that is near); looser than right(), which reads the truth's
    p99 where its interval is too wide to tell a load from the objective."""
    if record.get("near") is not None:
        return truth.class_at(known, record["near"], limit_ms) == "near"
    if record["pass"] is None or record["fail"] is None:
        return False
    return truth.class_at(known, record["pass"], limit_ms) != "fails" and \
        truth.class_at(known, record["fail"], limit_ms) != "meets"


def fixed_ladder_seconds(search: dict, stage_seconds: float) -> float:
    """A geometric ladder over [from, max] whose steps are the search's resolution, every stage run whole."""
    step = 1 + float(search["resolution"].rstrip("%")) / 100
    return (math.ceil(math.log(search["max"] / search["from"]) / math.log(step)) + 1) * stage_seconds


def report(records: list[dict], method: str | None) -> dict:
    measured = [r for r in records if r["part"] != "truth"]
    method = method or (measured[-1]["method"] if measured else None)
    measured = [r for r in measured if r["method"] == method]
    result: dict = {"sloMs": SLO_MS, "tolerance": 0.1, "method": method, "knees": {}}
    all_searches, all_right, all_unrefuted, shares = [], 0, 0, []
    for knee in KNEES:
        by_machine = truths(records, knee)
        if not by_machine:
            continue
        searched = [r for r in measured if r["part"] == "search" and r["knee"] == knee]
        searches = [r for r in searched if truth.machine_of(r) in by_machine]
        # the truth shown: that of the machine most of the method's searches ran on (each is scored on its own)
        machine = collections.Counter(truth.machine_of(r) for r in searches).most_common(1)[0][0] if searches \
            else next(iter(by_machine))
        known = by_machine[machine]
        own = [by_machine[truth.machine_of(r)] for r in searches]   # each search's own machine's truth
        judged = [right(r, t) for r, t in zip(searches, own)]
        possible = [unrefuted(r, t) for r, t in zip(searches, own)]
        stage_seconds = float(STAGE_END["max"].rstrip("s"))
        share = [r["loadSeconds"] / fixed_ladder_seconds(r["search"], stage_seconds) for r in searches]
        all_searches += searches
        all_right += sum(judged)
        all_unrefuted += sum(possible)
        shares += share
        result["knees"][knee] = {
            "truthMachine": machine, "otherMachines": sorted(set(by_machine) - {machine}),
            "unscored": len(searched) - len(searches),   # run where the knee has no truth
            "truth": {str(load): {**t, "class": truth.classify(t, SLO_MS)} for load, t in known.items()},
            "kneeRps": truth.knee(known, SLO_MS),
            "searches": {"right": parts.rate(sum(judged), len(judged)),
                         "unrefuted": parts.rate(sum(possible), len(possible)),
                         "brackets": sorted({(r["pass"], r["fail"], r["near"]) for r in searches}, key=str),
                         "loadShare": spread(share) if share else None,
                         "wrong": [{**{k: r[k] for k in ("seed", "pass", "fail", "near", "reason")},
                                    "truthP99Ms": {end: round(truth.p99_at(t, r[end]), 1)
                                                   for end in ("pass", "fail", "near") if r.get(end) is not None}}
                                   for r, t, ok in zip(searches, own, judged) if not ok]},
            "verdicts": verdict_figures([r for r in measured if r["part"] == "verdict" and r["knee"] == knee]),
            "overload": overload_figures([r for r in measured if r["part"] == "overload" and r["knee"] == knee])}
    result["searches"] = {"right": parts.rate(all_right, len(all_searches)),
                          "unrefuted": parts.rate(all_unrefuted, len(all_searches)),
                          "loadShare": spread(shares) if shares else None}
    return result


def verdict_figures(rows: list[dict]) -> dict:
    figures = {}
    for factor, wrong in sorted(WRONG.items()):
        at = [r["outcome"] for r in rows if r["factor"] == factor]
        if at:
            figures[f"{factor:g}x"] = {"wrong": parts.rate(sum(o in wrong for o in at), len(at)),
                                       "near": parts.rate(at.count("Near"), len(at)),
                                       "decided": parts.rate(sum(o != "Undecided" for o in at), len(at)),
                                       "outcomes": {o: at.count(o) for o in sorted(set(at))}}
    return figures


def overload_figures(rows: list[dict]) -> dict | None:
    if not rows:
        return None
    outcomes = [r["outcome"] for r in rows]
    return {"passed": parts.rate(outcomes.count("Pass"), len(rows)),
            "outcomes": {o: outcomes.count(o) for o in sorted(set(outcomes))},
            "medianSeconds": statistics.median(r["seconds"] for r in rows)}


def printed(result: dict) -> None:
    for knee, figures in result["knees"].items():
        print(f"{knee}: knee {figures['kneeRps'] and round(figures['kneeRps'], 1)}/s on {figures['truthMachine']}; "
              f"{figures['unscored']} searches on a machine without its truth; truth " + ", ".join(
            f"{load}/s p99 {t['p99Ms']} ms [{t['interval'][0]}, {t['interval'][1]}] {t['class']}"
            for load, t in figures["truth"].items()))
        s = figures["searches"]
        if s["right"]["of"]:
            print(f"{knee}: searches right {parts.said(s['right'])}, unrefuted by the truth's intervals "
                  f"{parts.said(s['unrefuted'])}; load share {s['loadShare']['median']:.1%} (median); brackets "
                  f"{s['brackets']}")
        for factor, v in figures["verdicts"].items():
            print(f"{knee}: at {factor} wrong {parts.said(v['wrong'])}, near {parts.said(v['near'])}, decided "
                  f"{parts.said(v['decided'])}")
        if figures["overload"]:
            print(f"{knee}: overload passed {parts.said(figures['overload']['passed'])}")
    if result["searches"]["right"]["of"]:
        print(f"searches right {parts.said(result['searches']['right'])}, unrefuted "
              f"{parts.said(result['searches']['unrefuted'])}; load share "
              f"{result['searches']['loadShare']['median']:.1%} of a fixed ladder (median)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=["truth", "searches", "verdicts", "overload", "report"])
    parser.add_argument("--knee", choices=list(KNEES), default="two-threads")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--loads", help="the truth's loads (default: the knee's)")
    parser.add_argument("--factor", type=float, choices=sorted(WRONG))
    parser.add_argument("--stages", type=int, default=10)
    parser.add_argument("--method", help="report this method's records (default: the latest part's)")
    parser.add_argument("--smoke", action="store_true", help="every part, tiny, into a directory of its own")
    args = parser.parse_args()
    if args.smoke:
        return smoke()
    if args.part is None:
        parser.error("name a part, or --smoke")
    knee = KNEES[args.knee]
    with tempfile.TemporaryDirectory(prefix="loadstage-search-") as tmp_dir:
        tmp = Path(tmp_dir)
        def run_seed(seed: int) -> list[dict]:
            if args.part == "truth":
                loads = [int(x) for x in args.loads.split(",")] if args.loads else knee["loads"]
                return run_truth(tmp, args.knee, seed, loads, TRUTH_SECONDS, truth.SETTLE_SECONDS)
            if args.part == "searches":
                search = {**knee["search"], "from": knee["from"][seed % len(knee["from"])]}
                return [run_search(tmp, args.knee, seed, search, STAGE_END)]
            return measured_verdicts(tmp, args, seed)
        if args.part != "report":
            parts.record_seeds(RECORDS, parts.seeds(args.seeds), run_seed)
    result = report(parts.read(RECORDS), args.method)
    printed(result)
    print(f"written to {write_result('search', result)}")
    return 0


def measured_verdicts(tmp: Path, args: argparse.Namespace, seed: int) -> list[dict]:
    knee = KNEES[args.knee]
    if args.part == "overload":
        return run_verdicts(tmp, args.knee, seed, knee["overload"], SLO_MS, args.stages, STAGE_END, STAGE_END["max"],
                            None)
    if args.factor is None:
        raise SystemExit("verdicts needs --factor")
    known = truths(parts.read(RECORDS), args.knee).get(machine()["cpu"], {})
    if knee["verdictLoad"] not in known:
        raise SystemExit(f"no truth at {knee['verdictLoad']}/s for {args.knee} on this machine: run its truth part "
                         f"first")
    limit = known[knee["verdictLoad"]]["p99Ms"] / args.factor
    return run_verdicts(tmp, args.knee, seed, knee["verdictLoad"], limit, args.stages, STAGE_END, STAGE_END["max"],
                        args.factor)


def smoke() -> int:
    """Every part, in seconds: the truth at two loads, one search, one verdict at 0.9x, one overload."""
    with tempfile.TemporaryDirectory(prefix="loadstage-search-") as tmp_dir:
        tmp = Path(tmp_dir)
        knee = "two-threads"
        records = run_truth(tmp, knee, 1, [40, 200], 12, 2)
        records.append(run_search(tmp, knee, 1, {"load": "rps", "from": 40, "max": 80, "resolution": "50%",
                                                 "duration": "3s"}, None))
        known = truth.pooled_by(records[:-1], "load")   # the truth's records, before they name their machine
        records += run_verdicts(tmp, knee, 1, 40, known[40]["p99Ms"] / 0.9, 1, None, "3s", 0.9)
        records += run_verdicts(tmp, knee, 1, 200, SLO_MS, 1, None, "3s", None)
        parts.append(RECORDS, records, directory=tmp / "results")
        result = report(parts.read(RECORDS, directory=tmp / "results"), None)
    printed(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
