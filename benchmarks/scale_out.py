"""Benchmark (l): how far off is the scale-out law's prediction? Capacities are measured at 1, 2, 3, 4 and 6 worker
processes of one target (each worker one gthread thread, each request held ~18 ms by the runner app's `fast`
delay, so that a worker serves ~55 req/s and the CPU has room), each by a capacity search over an arrival rate
(an open model: a p99 of 100 ms, stages ending once decided); the law is fitted on 1, 2 and 3 workers only, and
its predictions at 4 and 6 with their intervals are held against the capacities measured there (each bracket's
middle). Each run appends one record to benchmarks/results/scale-out-runs.jsonl (benchmarks/parts.py).

    python benchmarks/scale_out.py run --seeds 1-3
    python benchmarks/scale_out.py run --seeds 1 --realnode   # (root) through the operator on the real node
    python benchmarks/scale_out.py report [--where realnode]

On the real node the chart is installed as `scripts/demo --cluster` installs it, and the same experiment runs in
pods, the target's one pod with a CPU limit of 1 core (workers are processes in it); the node is stopped after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

import parts
from common import ROOT, run_experiment, write_result
from loadstage.api.status import ScalePoint
from loadstage.results.scale_out import fit, predicted

RECORDS = "scale-out-runs"
FITTED, PREDICTED = (1, 2, 3), (4, 6)
SEARCH = {"load": "rps", "from": 40, "max": 640, "resolution": "10%"}


def experiment(seed: int) -> dict:
    return {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": f"scale-{seed}"},
            "spec": {"target": {"pods": 1, "threads": 1, "env": {"RUNNER_DELAY": "fast",
                                                                  "RUNNER_DELAY_SEED": str(seed)}},
                     "injectors": {"scenario": "hello", "maxUsersPerInjector": 80, "maxRatePerInjector": 400},
                     "warmup": {"arrivalRate": 20, "duration": "3s"},
                     "matrix": {"workers": [*FITTED, *PREDICTED]}, "predict": {"workers": PREDICTED[-1]},
                     "slo": {"p99": "100ms", "tolerance": "10%"}, "search": SEARCH,
                     "stageEnd": {"when": "Decided", "min": "8s", "max": "30s"}}}


def run(tmp: Path, seed: int) -> dict:
    return recorded(run_experiment(tmp, experiment(seed)), seed, "local")


def on_the_real_node(seed: int) -> dict:
    """The experiment through the operator on the real node; its status."""
    def sh(*argv: str, **kwargs) -> str:
        return subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, text=True, **kwargs).stdout
    sh("scripts/realnode", "images")
    sh("scripts/realnode", "up")
    exported = dict(part.split("=", 1) for part in sh("scripts/realnode", "env").split()[1:])
    env = {**os.environ, "KUBECONFIG": exported["KUBECONFIG"],
           "PATH": exported["PATH"].replace("$PATH", os.environ["PATH"])}

    def kubectl(*argv: str, **kwargs) -> str:
        return sh("kubectl", *argv, env=env, **kwargs)
    prefix, name, namespace = "localhost:5000", f"scale-{seed}", "loadstage-bench"
    for ns in ("loadstage-system", namespace):
        subprocess.run(["kubectl", "create", "namespace", ns], env=env, capture_output=True)
        kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
    kubectl("apply", "-f", "crds/")
    sh("helm", "upgrade", "--install", "loadstage", "charts/loadstage", "--namespace", "loadstage-system", "--wait",
       "--timeout", "3m", "--set", f"image.repository={prefix}/loadstage/operator",
       "--set", f"runnerImage.repository={prefix}/loadstage/runner-app",
       "--set", f"injectorImage.repository={prefix}/loadstage/injector",
       "--set", f"redisImage.repository={prefix}/loadstage-node/redis", "--set-string", "redisImage.tag=7.0-bookworm",
       "--set", "rbac.nodeMetrics=true", env=env)
    kubectl("-n", "loadstage-system", "rollout", "restart", "deployment/loadstage")
    kubectl("-n", "loadstage-system", "rollout", "status", "deployment/loadstage", "--timeout=120s")
    kubectl("delete", "lx", name, "-n", namespace, "--ignore-not-found", "--wait")
    doc = experiment(seed)
    doc["spec"]["target"]["resources"] = {"limits": {"cpu": "1", "memory": "512Mi"}}
    kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    deadline = time.monotonic() + 90 * 60
    while time.monotonic() < deadline:
        status = json.loads(kubectl("get", "lx", name, "-n", namespace, "-o", "json")).get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            break
        time.sleep(10)
    sh("scripts/realnode", "down")
    if status.get("phase") != "Succeeded":
        raise SystemExit(f"{name} did not succeed on the real node: {status.get('phase')}: {status.get('message')}")
    return status


def recorded(status: dict, seed: int, where: str) -> dict:
    (law,) = status["scaleOut"]
    measured = {p["size"]: p for p in law["points"]}
    fitted = [ScalePoint(n, measured[n]["rps"], measured[n]["low"], measured[n]["high"]) for n in FITTED]
    fitted_law = fit(list(FITTED), [p.rps for p in fitted])
    record = {"seed": seed, "where": where, "measured": measured, "fittedOn": list(FITTED),
              "law": {"alpha": fitted_law.alpha, "beta": fitted_law.beta, "gamma": fitted_law.gamma},
              "predicted": {}}
    for n in PREDICTED:
        if n not in measured:
            continue
        found = predicted(fitted, fitted_law, n)
        truth = measured[n]
        record["predicted"][str(n)] = {"rps": found.rps, "interval": list(found.interval), "measured": truth["rps"],
                                       "error": round(found.rps / truth["rps"] - 1, 4),
                                       "held": found.interval[0] <= truth["high"] and truth["low"] <= found.interval[1]}
        print(f"{where} seed {seed}: at {n} workers predicted {found.rps:,.0f} req/s [{found.interval[0]:,.0f}, "
              f"{found.interval[1]:,.0f}], measured {truth['rps']:,.0f} [{truth['low']:,.0f}, {truth['high']:,.0f}]",
              flush=True)
    return record


def report(records: list[dict], method: str | None, where: str = "local") -> dict:
    records = [r for r in records if r.get("where", "local") == where]
    method = method or (records[-1]["method"] if records else None)
    mine = [r for r in records if r["method"] == method]
    result: dict = {"method": method, "where": where, "runs": len(mine)}
    for n in PREDICTED:
        found = [r["predicted"][str(n)] for r in mine if str(n) in r["predicted"]]
        if not found:
            continue
        errors = [f["error"] for f in found]
        result[f"at{n}"] = {"errors": errors, "medianAbsError": round(statistics.median(abs(e) for e in errors), 4),
                            "held": parts.rate(sum(f["held"] for f in found), len(found))}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["run", "report"])
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--method")
    parser.add_argument("--realnode", action="store_true", help="run: through the operator on the real node (root)")
    parser.add_argument("--where", choices=["local", "realnode"], help="report: which runs (default: as run)")
    args = parser.parse_args()
    where = args.where or ("realnode" if args.realnode else "local")
    if args.part == "run":
        with tempfile.TemporaryDirectory(prefix="loadstage-scale-") as tmp:
            parts.record_seeds(RECORDS, parts.seeds(args.seeds), lambda seed: [
                recorded(on_the_real_node(seed), seed, "realnode") if args.realnode else run(Path(tmp), seed)])
    result = report(parts.read(RECORDS), args.method, where)
    for n in PREDICTED:
        if f"at{n}" in result:
            figure = result[f"at{n}"]
            print(f"at {n} workers: median |error| {figure['medianAbsError']:.1%} (errors {figure['errors']}); "
                  f"interval held the measured bracket {parts.said(figure['held'])}")
    print(f"written to {write_result('scale-out' if where == 'local' else 'scale-out-realnode', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
