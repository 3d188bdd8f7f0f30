"""The LoadExperiment status as one typed value (RunStatus) and its one declaration (STATUS): the CRD's status
schema, the reader of a status from a cluster or a result file, and the writer's serialisation all come from
it."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from loadstage.api.conformance import audit
from loadstage.api.names import CONDITION_TYPES, PHASES
from loadstage.api.schema import Bool, Field, Int, ListOf, Num, Obj, ShapeError, Str, Written, omit_empty, omit_none
from loadstage.api.status.pick import RECOMMENDATION, Recommendation
from loadstage.api.status.scale_out import SCALE_OUT, ScaleOut
from loadstage.api.status.stage import RETRY, Retry
from loadstage.api.status.variant import PIVOT_ROW, VARIANT, PivotRow, VariantRecord
from loadstage.api.status.verification import VERIFICATION, VerificationRecord

SCHEMA_VERSION = 2   # 1: before the status said; every earlier version is read as it is


class Progress(TypedDict, total=False):
    variant: str
    repeat: str
    stage: str
    warmup: bool
    injectors: int | None
    attempt: int
    elapsedSeconds: int
    remainingSeconds: int
    remaining: str
    eta: str
    retries: list[Retry]


PROGRESS = Obj(Progress, "Where the experiment is.", {
    "variant": Str("Current variant, e.g. 1/3."),
    "repeat": Str("Current repeat, e.g. 2/5 (with spec.repeats above 1)."),
    "stage": Str("Current stage, e.g. 3/5 (a search's: 3); during a warm-up, the stages finished before it."),
    "warmup": Bool("A warm-up is running."),
    "injectors": Int("Injectors of the current stage.", nullable=True),
    "attempt": Int("The current stage's attempt, from 2 once it was disrupted and runs again."),
    "elapsedSeconds": Int("Seconds since the run started."),
    "remainingSeconds": Int("Seconds the run has left: the load to come, and each step's set-up at the rate "
                            "measured so far."),
    "remaining": Str("remainingSeconds for people, e.g. 1h05m (kubectl get lx)."),
    "eta": Str("When the run should end, as estimated at the last status write."),
    "retries": ListOf("The current stage's disrupted attempts so far.", RETRY),
}, nullable=True)


class Latest(TypedDict, total=False):
    p99Ms: float | None
    redisPeakConnections: int | None
    verdict: str
    bracket: str
    leader: str


LATEST = Obj(Latest, "The last finished stage, for kubectl get lx.", {
    "p99Ms": Num("Its p99 latency, ms.", nullable=True),
    "redisPeakConnections": Int("Its peak Redis connections.", nullable=True),
    "verdict": Str("With spec.slo: its verdict, by the objective that decided it, with its interval and their "
                   "confidence, e.g. Near: p99 29.6 [28.8, 30.9] ms (99.4%)."),
    "bracket": Str("With spec.search: the current variant's capacity bracket so far, e.g. 40-48 users (612-690 "
                   "req/s)."),
    "leader": Str("With spec.goal: the cheapest variant that met the objective so far, e.g. workers=3 threads=4 "
                  "(6 cores)."),
}, nullable=True)


class Condition(TypedDict):
    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


CONDITION = Obj(Condition, "One condition of the experiment.", {
    "type": Str("Condition type.", enum=CONDITION_TYPES),
    "status": Str("True, False or Unknown.", enum=["True", "False", "Unknown"]),
    "reason": Str("CamelCase reason."),
    "message": Str("Human-readable detail."),
    "lastTransitionTime": Str("When status last changed.", format="date-time"),
    "observedGeneration": Int("The generation it was set for."),
}, required=("type", "status"))


class Cleanup(TypedDict, total=False):
    done: bool
    at: str
    message: str


CLEANUP = Obj(Cleanup, "Whether the cleanup policy's deletions are done.", {
    "done": Bool("The Jobs, Deployments and Services are deleted."),
    "at": Str("When they were deleted."),
    "message": Str("What was deleted, or why it is still pending."),
}, nullable=True)


class InPlace(TypedDict, total=False):
    restored: bool
    at: str
    message: str


IN_PLACE = Obj(InPlace, "Whether an InPlace target (spec.target.deployment) is restored.", {
    "restored": Bool("The Deployment and its HPAs are as they were before."),
    "at": Str("When they were restored."),
    "message": Str("What was restored."),
}, nullable=True)


class HistoryRecord(TypedDict, total=False):
    recorded: bool
    at: str
    error: str
    trend: str


HISTORY = Obj(HistoryRecord, "Where the chart gives the operator a history (history.url): whether this run is "
                             "recorded in it.", {
    "recorded": Bool("The run is in the history, once, by its uid."),
    "at": Str("When it was recorded."),
    "error": Str("Why it is not recorded yet: the database's error. It is tried again until it is."),
    "trend": Str("`loadstage history check` of its series once it is recorded (kubectl get lx): ok, worse (the "
                 "first figure that got worse, e.g. worse p99 at 40 users +18%), undecided, or too few runs."),
}, nullable=True)


class ExportRecord(TypedDict, total=False):
    configMap: str
    variant: int
    files: list[str]
    measuredAt: str
    autoscaler: str
    error: str


EXPORT = Obj(ExportRecord, "With spec.goal, once it found a winner: the recommendation as files to apply "
                           "(docs/export.md), in a ConfigMap the experiment owns.", {
    "configMap": Str("The ConfigMap, <name>-recommendation: one key a file (`kubectl get cm NAME -o "
                     "jsonpath='{.data.hpa\\.yaml}'`, or `loadstage export lx/NAME`)."),
    "variant": Int("The exported variant's index (from 0)."),
    "files": ListOf("The files it holds.", Str("A file name.")),
    "measuredAt": Str("The stage its numbers come from, with their 95% intervals."),
    "autoscaler": Str("With spec.autoscale: the replicas and the CPU target derived, and from what."),
    "error": Str("Why nothing was exported (the recommended variant's settings cannot be written to its "
                 "Deployment, or the ConfigMap could not be written: then it is tried again)."),
}, nullable=True)


@dataclass
class RunStatus(Written):
    """Everything the status says: the phase and its words, when it ran, where it is, and every variant with its
    stages; the engine changes it, and kube.status (or the local run's result file) writes it."""
    phase: str = "Pending"
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    variants: list[VariantRecord] = field(default_factory=list)
    p99_by_stage: list[PivotRow] = field(default_factory=list)
    recommendation: Recommendation | None = None   # with spec.goal
    schema_version: int | None = None
    reason: str | None = None
    observed_generation: int | None = None
    seed: int | None = None
    warmed_up: str | None = None
    progress: Progress | None = None
    latest: Latest | None = None
    conditions: list[Condition] = field(default_factory=list)
    cleanup: Cleanup | None = None
    in_place: InPlace | None = None
    history: HistoryRecord | None = None
    export: ExportRecord | None = None
    verification: VerificationRecord | None = None   # with spec.verify, or `loadstage verify`
    scale_out: list[ScaleOut] = field(default_factory=list)   # with a matrix over pods or workers

    @classmethod
    def read(cls, status: Any) -> RunStatus:
        """A status from a file or a cluster, checked as it is read: raises ShapeError naming the first bad path."""
        found: RunStatus = STATUS.read(status or {}, "status")
        return found

    def to_status(self) -> dict[str, Any]:
        """The status as the API server and a result file hold it: through its one declaration (and, with
        LOADSTAGE_AUDIT_STATUS, checked against the CRD's schema)."""
        document: dict[str, Any] = STATUS.dump(self, "status")
        audit(_crd_schema(), document, "status")
        return document

    def ended(self, phase: str, reason: str | None, message: str, finished_at: str) -> RunStatus:
        """A copy of this status at its end."""
        return dataclasses.replace(self, phase=phase, reason=reason, message=message, finished_at=finished_at)

    def has_stages(self) -> bool:
        return any(v.stages for v in self.variants)

    def recorded_stages(self) -> int:
        return sum(len(v.stages) for v in self.variants)


@functools.cache
def _crd_schema() -> dict[str, Any]:
    schema: dict[str, Any] = STATUS.openapi()
    return schema


def _index(path: str, index: int, variants: int) -> None:
    if not 0 <= index < variants:
        raise ShapeError(path, f"must be the index of one of the status's variants (0 to {variants - 1}), got "
                               f"{index}")


def _consistent(status: RunStatus, raw: Mapping[str, Any], path: str) -> RunStatus:
    """What a type cannot say: each variant at its own index, a pick's indices among them, one p99 per variant."""
    count = len(status.variants)
    for i, variant in enumerate(status.variants):
        if variant.index != i:
            raise ShapeError(f"{path}.variants[{i}].index", f"must be {i}, its place in {path}.variants, got "
                                                             f"{variant.index}")
    if (pick := status.recommendation) is not None:
        for name, candidate in (("winner", pick.winner), ("runnerUp", pick.runner_up)):
            if candidate is not None:
                _index(f"{path}.recommendation.{name}.variant", candidate.variant, count)
        for i, candidate in enumerate(pick.front):
            _index(f"{path}.recommendation.front[{i}].variant", candidate.variant, count)
        for i, index in enumerate(pick.order):
            _index(f"{path}.recommendation.order[{i}]", index, count)
    for i, row in enumerate(status.p99_by_stage):
        if len(row.p99_ms_by_variant) != len(status.variants):
            raise ShapeError(f"{path}.p99ByStage[{i}].p99MsByVariant", f"must hold one value per variant "
                             f"({len(status.variants)}), holds {len(row.p99_ms_by_variant)}")
    return status


STATUS = Obj(RunStatus, "What the operator observed; written by the operator only.", {
    "schemaVersion": Field(Int("The version of this status's layout, for an operator that resumes it (absent: 1).",
                               nullable=True), omit=omit_none),
    "phase": Field(Str("Pending, Deploying, Running, Succeeded or Failed.", enum=PHASES), absent="Pending"),
    "reason": Field(Str("A CamelCase reason for the phase, e.g. TargetNotReady.", nullable=True), omit=omit_none),
    "message": Field(Str("What the experiment is doing or waiting for, in words."), absent=""),
    "observedGeneration": Field(Int("The generation last acted on.", nullable=True), omit=omit_none),
    "startedAt": Field(Str("When the first variant started.", nullable=True), omit=omit_none),
    "finishedAt": Field(Str("When the experiment ended.", nullable=True), omit=omit_none),
    "seed": Field(Int("The seed of a Random order: spec.seed, or the one the run picked.", nullable=True),
                  omit=omit_none),
    "warmedUp": Field(Str("The run id of the last warm-up that finished, so that a resumed run does not repeat "
                          "it.", nullable=True), attr="warmed_up", omit=omit_none),
    "progress": Field(PROGRESS, omit=omit_none),
    "latest": Field(LATEST, omit=omit_none),
    "recommendation": Field(RECOMMENDATION, omit=omit_none),
    "conditions": Field(ListOf("TargetReady, Running, Succeeded and Failed.", CONDITION, map_keys=("type",)),
                        absent=[], omit=omit_empty),
    "cleanup": Field(CLEANUP, omit=omit_none),
    "inPlace": Field(IN_PLACE, attr="in_place", omit=omit_none),
    "history": Field(HISTORY, omit=omit_none),
    "export": Field(EXPORT, omit=omit_none),
    "verification": Field(VERIFICATION, omit=omit_none),
    "variants": Field(ListOf("One entry per variant, with its stage results.", VARIANT), absent=[],
                      omit=omit_empty),
    "p99ByStage": Field(ListOf("The p99 latency of every stage, per variant.", PIVOT_ROW), attr="p99_by_stage",
                        absent=[], omit=omit_empty),
    "scaleOut": Field(ListOf("Where a matrix measures a setting's capacity at several pod (or worker) counts: the "
                             "scale-out law fitted to them (loadstage.results.scale_out).", SCALE_OUT),
                      attr="scale_out", absent=[], omit=omit_empty),
}, on_read=_consistent)
