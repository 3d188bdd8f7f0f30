"""Benchmark (a): are loadstage's percentiles right?

Runs a real local experiment whose injectors each load a different server-side latency
profile (fast, slow, bimodal), keeps every request's latency on the injector side, and
compares p50..p99.9 against the exact nearest-rank values of those raw samples, for:
- loadstage: the merged HDR histograms (3 significant digits);
- the Locust dict: Locust's own merged response-time dict, which rounds every time to 2
  significant digits (what loadstage used before);
- the spreadsheet method: per-injector percentiles averaged, weighted by request count.

    python benchmarks/fidelity.py [--injectors 10] [--duration 60s] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml
from locust.stats import bucket_response_time

from common import ROOT, loadstage, write_result
from loadstage.results.histograms import LEVELS
from reference_methods import exact_percentile, merge, percentile, weighted_average_percentile

TARGET = 0.001   # 0.1% relative error


def experiment(injectors: int, duration: str, users: int) -> dict:
    return {
        "apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "fidelity"},
        "spec": {
            "target": {"pods": 1, "workers": 2, "workerClass": "gevent"},
            "injectors": {"usersPerInjector": users,
                          "locustfile": {"path": str(ROOT / "benchmarks" / "fidelity_locustfile.py")}},
            "stages": [{"injectors": injectors, "duration": duration}],
        },
    }


def measure(injectors: int, duration: str, users: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="loadstage-fidelity-") as tmp:
        tmp = Path(tmp)
        raw = tmp / "raw"
        raw.mkdir()
        (tmp / "exp.yaml").write_text(yaml.safe_dump(experiment(injectors, duration, users)))
        loadstage("run", str(tmp / "exp.yaml"), "-q", "-o", str(tmp / "result.json"),
                  env={"LOADSTAGE_RAW_LOG_DIR": str(raw)})
        stage = json.loads((tmp / "result.json").read_text())["status"]["variants"][0]["stages"][0]
        per_injector = [[float(x) for x in p.read_text().split()] for p in sorted(raw.glob("injector-*.txt"))]
    everything = [s for samples in per_injector for s in samples]
    locust_dict = merge([{bucket_response_time(x): 1} for x in everything])
    rows = {}
    for name, q in LEVELS.items():
        exact = exact_percentile(everything, q)
        merged = stage["latencyMs"][name]
        rounded = percentile(locust_dict, q)
        averaged = weighted_average_percentile([(len(s), exact_percentile(s, q)) for s in per_injector if s])
        rows[name] = {
            "exactMs": round(exact, 3), "loadstageMs": merged, "locustDictMs": rounded,
            "weightedAverageMs": round(averaged, 2),
            "loadstageError": round(abs(merged - exact) / exact, 6),
            "locustDictError": round(abs(rounded - exact) / exact, 6),
            "weightedAverageError": round(abs(averaged - exact) / exact, 4),
            "withinTarget": abs(merged - exact) <= TARGET * exact,
        }
    return {"injectors": len(per_injector), "rawSamples": len(everything), "loadstageRequests": stage["requests"],
            "requestsPerInjector": [len(s) for s in per_injector], "percentiles": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--injectors", type=int, default=10)
    parser.add_argument("--duration", default="60s")
    parser.add_argument("--users", type=int, default=4, help="users per injector")
    parser.add_argument("--smoke", action="store_true", help="3 injectors for 5 s (CI)")
    args = parser.parse_args()
    injectors, duration = (3, "5s") if args.smoke else (args.injectors, args.duration)
    result = measure(injectors, duration, args.users)
    print(f"{result['injectors']} injectors, {result['rawSamples']:,} raw samples "
          f"(loadstage counted {result['loadstageRequests']:,})")
    print(f"{'':6} {'exact':>10} {'loadstage':>10} {'error':>8} {'Locust dict':>12} {'error':>8} "
          f"{'weighted avg':>13} {'error':>8}  target (0.1%)")
    for name, r in result["percentiles"].items():
        print(f"{name:6} {r['exactMs']:10.3f} {r['loadstageMs']:10.3f} {r['loadstageError']:8.3%} "
              f"{r['locustDictMs']:12.1f} {r['locustDictError']:8.3%} "
              f"{r['weightedAverageMs']:13.1f} {r['weightedAverageError']:8.2%}  "
              f"{'met' if r['withinTarget'] else 'MISSED'}")
    if not args.smoke:
        print(f"written to {write_result('fidelity', result)}")
    return 0 if all(r["withinTarget"] for r in result["percentiles"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
