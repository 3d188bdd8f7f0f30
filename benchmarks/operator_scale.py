"""Benchmark (h): the operator at full scale on the kwok cluster, the driver playing the kubelet.

- `--experiments N` one-stage experiments created at once: the time until every one is Running with its stage's
  pods Running, the operator's threads, resident memory and CPU then, and the time until all have Succeeded
  once every stage is finished;
- one experiment whose stage has `--injectors N` workers: the time until every worker pod is Running.

The cluster tests run the same code (tests/support/scale.py) at a size that proves the property (60
experiments, 250 injectors); this gives the figure at the size users run: 300 experiments, and 1,000
injectors, the most the CRD allows.

    python benchmarks/operator_scale.py [--experiments 300] [--injectors 1000] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from common import ROOT, write_result

sys.path.insert(0, str(ROOT / "tests"))
from loadstage.local.processes import Supervisor
from loadstage.local.target import free_port
from support.kube import Cluster, OperatorProcess, RealStage
from support.processes import start_redis
from support.scale import many_at_once, one_big_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=300)
    parser.add_argument("--injectors", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="5 experiments and 20 injectors; nothing recorded")
    args = parser.parse_args()
    experiments, injectors = (5, 20) if args.smoke else (args.experiments, args.injectors)
    data = ROOT / "tests" / "data"
    stage = RealStage(json.loads((data / "stage-summary.json").read_text()),
                      json.loads((data / "stage-artifact.json").read_text()))
    supervisor = Supervisor()
    with tempfile.TemporaryDirectory(prefix="loadstage-scale-") as tmp, Cluster.running("scale") as cluster:
        tmp = Path(tmp)
        sampler = free_port()
        start_redis(supervisor, tmp, sampler, "--save", "")
        try:
            figures = {}
            for what in ("atOnce", "bigStage"):
                namespace = f"scale-{what.lower()}"
                cluster.core.create_namespace({"metadata": {"name": namespace}})
                op = OperatorProcess(cluster.kubeconfig, ["-n", namespace], f"redis://127.0.0.1:{sampler}/0",
                                     tmp / f"operator-{what}.log", free_port())
                try:
                    result = (many_at_once(cluster, namespace, op.process.pid, stage, experiments)
                              if what == "atOnce" else one_big_stage(cluster, namespace, stage, injectors))
                finally:
                    op.kill()
                print(result.line())
                figures[what] = {k: v for k, v in asdict(result).items() if k not in ("last_status", "stage")}
        finally:
            supervisor.stop_all()
    if not args.smoke:
        print(f"recorded in {write_result('operator_scale', figures)}")


if __name__ == "__main__":
    main()
