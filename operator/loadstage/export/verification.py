"""spec.verify and `loadstage verify` (docs/export.md, "Verify"): the recommended variant's settings, run as the
export sets them, and whether the objective holds.

On this machine there is no autoscaler: the settings run at the load the export promises a pod,
- with spec.autoscale: one pod at L = C (1 - headroom), the load the HPA gives a pod before it adds another;
- without: the goal's rate on the variant's own pods, the replicas the export writes.

In a cluster (the operator, spec.verify) a copy of the target runs with the exported HPA, through a ladder of
arrival rates from spec.autoscale's minLoad to its maxLoad (LADDER_STEPS), each step twice the time a pod takes
to come back (export.autoscaler.return_seconds), and judged after that time (settled_after_reaction). Without
spec.autoscale there is no HPA: one step at the goal's rate on the exported replicas."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadstage.api.names import LABEL_EXPERIMENT, NAME_MAX
from loadstage.api.quantities import format_duration
from loadstage.api.status import RunStatus, StageResult, VerificationRecord, VerificationStep
from loadstage.api.types import NO_PROXY, Autoscale, Experiment, Slo, Variant
from loadstage.export import autoscaler
from loadstage.results.intervals import CONFIDENCE
from loadstage.results.judgement import judge

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
    source = _one_variant_run(experiment, variant, replicas, load, warmup)
    source["spec"]["stages"] = [{"arrivalRate": load, "duration": experiment.source["spec"]["stageEnd"]["max"]}]
    source["metadata"] = {"name": experiment.name}
    return source


def _one_variant_run(experiment: Experiment, variant: Variant, replicas: int, warmup_load: int,
                     warmup: str | None) -> dict[str, Any]:
    source = copy.deepcopy(experiment.source)
    spec = source["spec"]
    warmup = warmup or (spec.get("warmup") or {}).get("duration", WARMUP)
    for key in PICKING:
        spec.pop(key, None)
    spec["matrix"] = one_variant(variant, replicas)
    spec["warmup"] = {"arrivalRate": warmup_load, "duration": warmup}
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


def record(planned: Plan, ran: RunStatus, failed: str | None = None) -> VerificationRecord:
    """What the verification run says: Holds where its stage met the objective, Breaks where it failed it."""
    stages = [s for v in ran.variants for s in v.stages]
    base: VerificationRecord = {"where": "Local", "perPodLoad": round(planned.per_pod, 3), "variant": planned.variant,
                                "steps": []}
    if failed is not None or not stages:
        return {**base, "result": "Undecided", "reason": f"the verification did not run to its end: "
                                                        f"{failed or ran.message}"}
    step = step_of(stages[-1], planned.replicas, planned.load)
    return {**base, **_judged([(stages[-1], step)]), "steps": [step]}


def _judged(steps: list[tuple[StageResult, VerificationStep]]) -> VerificationRecord:
    """Holds if every step met the objective; else the first that broke it, or the first undecided."""
    def at(step: VerificationStep) -> str:
        return f"{step['replicas']} pod(s) at {step['load']:g} req/s"

    def figure(stage: StageResult) -> str:
        return stage.verdict.summary() if stage.verdict is not None else "no verdict"
    broke = next(((s, t) for s, t in steps if t["outcome"] == "Fail"), None)
    if broke is not None:
        return {"result": "Breaks", "reason": f"the objective breaks at {at(broke[1])}: {figure(broke[0])}"}
    unsure = next(((s, t) for s, t in steps if t["outcome"] not in HOLDS), None)
    if unsure is not None:
        return {"result": "Undecided", "reason": f"undecided at {at(unsure[1])} by the stage's end: "
                                                 f"{figure(unsure[0])}"}
    last_stage, last = steps[-1]
    return {"result": "Holds", "reason": f"the objective holds at {at(last)}: {figure(last_stage)}"
            if len(steps) == 1 else f"the objective holds at every step, up to {at(last)}: {figure(last_stage)}"}


LADDER_STEPS = 4
UID_CHARACTERS = 6


@dataclass(frozen=True)
class ClusterPlan:
    variant: int
    loads: tuple[int, ...]          # req/s of each step, offered to all the replicas
    step_seconds: float
    replicas: int                   # at the start: the HPA's minReplicas, or the exported replicas
    document: dict[str, Any]        # the experiment that runs the copy (its own name: its children are its own)
    hpa: dict[str, Any] | None      # the exported HPA, scaling the copy
    slo: Slo | None = None
    reaction_seconds: float = 0     # a step's seconds cut from its verdict at least: the HPA's time to add a pod

    @property
    def copy_name(self) -> str:
        return str(self.document["metadata"]["name"])

    def said(self) -> str:
        scaled = "with the exported HPA" if self.hpa else "without an autoscaler"
        return (f"verify: variant {self.variant + 1} as exported, a copy ({self.copy_name}) of {self.replicas} pod(s) "
                f"{scaled}, {len(self.loads)} step(s) of {self.step_seconds:g} s at "
                f"{', '.join(map(str, self.loads))} req/s")


def verification_name(name: str, owner_uid: str) -> str:
    """The copy's experiment name: the experiment's (shortened where too long), `-vf-` and the start of its uid,
    so that no experiment of the namespace has it (its children, labelled with it, are the copy's alone)."""
    tail = f"-vf-{owner_uid.replace('-', '')[:UID_CHARACTERS]}"
    return name[:NAME_MAX - len(tail)].rstrip("-") + tail


def ladder(low: float, high: float, steps: int = LADDER_STEPS) -> tuple[int, ...]:
    """`steps` arrival rates from `low` to `high`, evenly apart, rounded up to whole req/s."""
    return tuple(math.ceil(round(low + (high - low) * i / (steps - 1), 6)) for i in range(steps))


def in_cluster(experiment: Experiment, owner_uid: str, variant: Variant, hpa: dict[str, Any] | None) -> ClusterPlan:
    """`hpa`: the exported HPA (with spec.autoscale), retargeted here at the copy's Deployment."""
    goal, asked = experiment.spec.goal, experiment.spec.autoscale
    assert goal is not None and goal.rps is not None, "spec.verify needs spec.goal.rps (api.spec's rule)"
    name = verification_name(experiment.name, owner_uid)
    if asked is not None and hpa is not None:
        replicas, loads = hpa["spec"]["minReplicas"], ladder(asked.min_load, asked.max_load)
        reaction = autoscaler.return_seconds(asked)
        step: float = 5 * math.ceil(2 * reaction / 5)
        copied = copy.deepcopy(hpa)
        copied["metadata"]["name"] = copied["spec"]["scaleTargetRef"]["name"] = f"{name}-runner"
        copied["metadata"]["labels"] = {LABEL_EXPERIMENT: name}
    else:
        replicas, loads, copied, reaction = variant.pods, (goal.rps,), None, 0
        step = experiment.spec.stage_end.max or experiment.spec.stages[0].duration
    source = _one_variant_run(experiment, variant, replicas, loads[0], None)
    spec = source["spec"]
    spec.pop("stageEnd", None)      # each step runs its whole length: the HPA needs it
    spec["stages"] = [{"arrivalRate": load, "duration": format_duration(step)} for load in loads]
    spec["cleanup"] = "Delete"
    if spec["target"].get("deployment"):
        spec["target"]["deployment"]["mode"] = "Copy"    # the verification never touches the team's Deployment
    namespace = experiment.source["metadata"].get("namespace")
    source["metadata"] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return ClusterPlan(variant.index, loads, step, replicas, source, copied, experiment.spec.slo, reaction)


def settled_after_reaction(planned: ClusterPlan, stage: StageResult, artifact: dict[str, Any] | None) -> StageResult:
    """The step judged as its stage is (results.judgement, over the settled seconds), cutting at least the HPA's
    time to add a pod: the step's load changed at its start, and until a new pod serves, the pods before it carry
    it (the settle cut alone, at most half a stage, may keep that transient)."""
    blocks = (artifact or {}).get("blocks")
    if not blocks or planned.slo is None or not planned.reaction_seconds:
        return stage
    raised = stage.exceptions.count if stage.exceptions else 0
    return dataclasses.replace(stage, verdict=judge(planned.slo, blocks, CONFIDENCE, raised=raised,
                                                    requests=stage.requests, final=True,
                                                    settle_floor=planned.reaction_seconds))


def cluster_record(planned: ClusterPlan, ran: RunStatus, replicas: list[int], *, broke: str | None = None,
                   ended: str | None = None, running: bool = False,
                   artifacts: Mapping[tuple[int, int, int | None], dict[str, Any]] | None = None) -> VerificationRecord:
    """Its steps so far (`replicas`: the copy's ready pods at each step's end; each judged after the HPA's
    reaction, from `artifacts`, the stages' by Step.key) and, unless `running`, the result: a step that failed
    its objective breaks it, as does `broke` (the HPA could not scale); `ended`: why the run stopped before its
    last step (Undecided)."""
    stages = [settled_after_reaction(planned, s, (artifacts or {}).get((v.index, 1, s.stage)))
              for v in ran.variants for s in v.stages]
    steps = [(stage, step_of(stage, count, load)) for stage, count, load in zip(stages, replicas, planned.loads)]
    base: VerificationRecord = {"where": "Cluster", "variant": planned.variant, "copy": planned.copy_name,
                                "stepSeconds": planned.step_seconds, "steps": [step for _, step in steps]}
    if running:
        return {**base, "result": "Running", "reason": f"{len(steps)} of {len(planned.loads)} steps done"}
    if broke is not None:
        return {**base, "result": "Breaks", "reason": broke}
    judged = _judged(steps) if steps else {}
    if judged.get("result") == "Breaks" or len(steps) == len(planned.loads):
        return {**base, **judged}
    return {**base, "result": "Undecided", "reason": f"the verification ended after {len(steps)} of "
                                                     f"{len(planned.loads)} steps: {ended or ran.message}"}
