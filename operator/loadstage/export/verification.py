"""spec.verify and `loadstage verify` on this machine (docs/export.md, "Verify"): the recommended variant's
settings, run as the export sets them at the load it promises a pod, and whether the objective holds there.

- with spec.autoscale: one pod at L = C (1 - headroom), the load the HPA gives a pod before it adds another;
- without: the goal's rate on the variant's own pods, the replicas the export writes.

There is no autoscaler here: a cluster's verification drives a ladder through the exported HPA instead."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from loadstage.api.status import RunStatus, StageResult, VerificationRecord, VerificationStep
from loadstage.api.types import NO_PROXY, Autoscale, Experiment, Variant
from loadstage.export import autoscaler

WARMUP = "10s"   # a start-up transient (a first burst of work, slow under a CPU limit) falls in it, not the stage
HOLDS = ("Pass", "Near")
# the spec's parts that chose and sized the variant: the verification runs it, once, at one load
PICKING = ("goal", "search", "autoscale", "verify", "stages", "repeats", "order", "seed", "predict", "matrix",
           "warmup")


@dataclass(frozen=True)
class Plan:
    variant: int            # the verified variant's index
    replicas: int
    per_pod: float          # req/s a pod is given
    load: int               # req/s offered to them all: per_pod x replicas, rounded up
    document: dict[str, Any]   # the experiment that runs it

    def said(self) -> str:
        return (f"verify: variant {self.variant + 1} as exported, {self.replicas} pod(s) at {self.load} req/s "
                f"({self.per_pod:.4g} req/s a pod)")


def plan(experiment: Experiment, variant: Variant, scaler: autoscaler.Autoscaler | None,
         asked: Autoscale | None, warmup: str | None = None) -> Plan:
    """`warmup`: the warm-up's length (default: the run's warm-up's, else WARMUP)."""
    goal = experiment.spec.goal
    assert goal is not None and goal.rps is not None, "spec.verify needs spec.goal.rps (api.spec's rule)"
    if scaler is not None and asked is not None:
        replicas, per_pod = 1, scaler.per_pod * (1 - asked.headroom)
    else:
        replicas = variant.pods
        per_pod = goal.rps / replicas
    load = max(1, math.ceil(round(per_pod * replicas, 6)))
    return Plan(variant.index, replicas, per_pod, load, document(experiment, variant, replicas, load, warmup))


def document(experiment: Experiment, variant: Variant, replicas: int, load: int,
             warmup: str | None = None) -> dict[str, Any]:
    """The experiment of one variant (a matrix of one value an axis: the same parser makes the same target) and
    one stage at `load`, ended as the goal's stages are, after a warm-up at that load."""
    source = copy.deepcopy(experiment.source)
    spec = source["spec"]
    warmup = warmup or (spec.get("warmup") or {}).get("duration", WARMUP)
    longest = spec["stageEnd"]["max"]
    for key in PICKING:
        spec.pop(key, None)
    spec["matrix"] = one_variant(variant, replicas)
    spec["warmup"] = {"arrivalRate": load, "duration": warmup}
    spec["stages"] = [{"arrivalRate": load, "duration": longest}]
    source["metadata"] = {"name": experiment.name}
    return source


def one_variant(variant: Variant, replicas: int) -> dict[str, list[Any]]:
    axes: dict[str, Any] = {"server": variant.server, "pods": replicas, "workers": variant.workers,
                            "threads": variant.threads, "workerClass": variant.worker_class, "cpu": variant.cpu,
                            "memory": variant.memory, "proxy": variant.proxy or NO_PROXY,
                            "socket": variant.socket if variant.proxy else None}
    return {axis: [value] for axis, value in axes.items() if value is not None}


def step_of(stage: StageResult, replicas: int, load: int) -> VerificationStep:
    """The step's p99 as its verdict judged it: over the stage's settled seconds (results.steady), where known."""
    verdict = stage.verdict
    settled = stage.duration_seconds - ((verdict.settle_seconds or 0) if verdict else 0)
    step: VerificationStep = {"load": load, "replicas": replicas,
                              "outcome": verdict.outcome if verdict else "Undecided", "seconds": round(settled, 2)}
    judged = next((o for o in verdict.objectives if o.name == "p99"), None) if verdict else None
    p99 = judged.value if judged is not None else stage.latency.p99
    bounds = judged.interval if judged is not None else (stage.intervals or {}).get("p99")
    if p99 is not None:
        step["p99Ms"] = p99
    if isinstance(bounds, (list, tuple)) and bounds[1] is not None:
        step["p99IntervalMs"] = [float(bounds[0]), float(bounds[1])]
    return step


def refused(why: str) -> VerificationRecord:
    return {"where": "Local", "result": "Undecided", "reason": f"nothing to verify: {why}", "steps": []}


# what the operator records for spec.verify, until a cluster's ladder through the exported HPA is built
NOT_IN_A_CLUSTER: VerificationRecord = {
    "where": "Cluster", "result": "Undecided", "steps": [],
    "reason": "not run: a cluster's verification (a ladder through the exported HPA) is not built yet; `loadstage "
              "verify` runs the export on one machine from a result file (docs/export.md)"}


def record(planned: Plan, ran: RunStatus, failed: str | None = None) -> VerificationRecord:
    """What the verification run says: Holds where its stage met the objective, Breaks where it failed it."""
    stages = [s for v in ran.variants for s in v.stages]
    base: VerificationRecord = {"where": "Local", "perPodLoad": round(planned.per_pod, 3), "variant": planned.variant,
                                "steps": []}
    if failed is not None or not stages:
        return {**base, "result": "Undecided", "reason": f"the verification did not run to its end: "
                                                        f"{failed or ran.message}"}
    step = step_of(stages[-1], planned.replicas, planned.load)
    verdict = stages[-1].verdict
    figure = verdict.summary() if verdict is not None else "no verdict"
    at = f"{planned.replicas} pod(s) at {planned.load} req/s"
    if step["outcome"] in HOLDS:
        result, reason = "Holds", f"the objective holds at {at}: {figure}"
    elif step["outcome"] == "Fail":
        result, reason = "Breaks", f"the objective breaks at {at}: {figure}"
    else:
        result, reason = "Undecided", f"undecided at {at} by the stage's end: {figure}"
    return {**base, "result": result, "reason": reason, "steps": [step]}
