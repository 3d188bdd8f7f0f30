"""status.verification: the exported settings run at the load the export promises (docs/export.md, "Verify"),
and whether the objective held; declared once, as every part of the status."""

from __future__ import annotations

from typing import TypedDict

from loadstage.api.schema import Int, ListOf, Num, Obj, Str

VERIFICATION_PLACES = ("Local", "Cluster")
VERIFICATION_RESULTS = ("Holds", "Breaks", "Undecided", "Running")
STEP_OUTCOMES = ("Pass", "Near", "Fail", "Undecided")


class VerificationStep(TypedDict, total=False):
    load: float
    replicas: int
    outcome: str
    p99Ms: float
    p99IntervalMs: list[float]
    seconds: float


class VerificationRecord(TypedDict, total=False):
    where: str
    result: str
    reason: str
    perPodLoad: float
    variant: int
    copy: str
    stepSeconds: float
    steps: list[VerificationStep]


STEP = Obj(VerificationStep, "One load the verification ran, and the objective's verdict there.", {
    "load": Num("The arrival rate offered to all the replicas, req/s."),
    "replicas": Int("The replicas that served it (locally: the exported pods; in a cluster: the HPA's)."),
    "outcome": Str("The objective's verdict over the step's measured seconds.", enum=STEP_OUTCOMES),
    "p99Ms": Num("Its p99 latency, ms."),
    "p99IntervalMs": ListOf("The p99's 95% interval, ms.", Num("A bound, ms.")),
    "seconds": Num("Its measured seconds."),
})

VERIFICATION = Obj(VerificationRecord, "With spec.verify, or `loadstage verify`: the exported settings run at the "
                                       "load the export promises, and whether the objective held.", {
    "where": Str("Local: one run of the exported pods at the load they are given (no autoscaler); Cluster: a "
                 "copy of the target with the exported HPA, through a ladder of arrival rates from "
                 "spec.autoscale.minLoad to maxLoad.", enum=VERIFICATION_PLACES),
    "result": Str("Holds: every step met the objective (Pass, or Near: at it within spec.slo.tolerance); "
                  "Breaks: a step failed it, or the HPA could not scale (reason names it); Undecided: a step "
                  "could not tell; Running: a cluster's ladder under way.", enum=VERIFICATION_RESULTS),
    "reason": Str("The result in words, with the step and figure that decided it."),
    "perPodLoad": Num("The load a pod is given: C (1 - headroom) with spec.autoscale, else the goal's rate over "
                      "the variant's pods, req/s."),
    "variant": Int("The verified variant's index (from 0)."),
    "copy": Str("In a cluster: the copy's experiment name; its objects carry the label "
                "loadstage.io/experiment=<copy>, and are deleted when the verification ends (its steps' results "
                "ConfigMaps stay, owned by the LoadExperiment)."),
    "stepSeconds": Num("In a cluster: each step's length, twice the time the HPA needs to bring a pod (its sync, "
                       "metrics' resolution, spec.autoscale.readySeconds), so that the verdict's settle cut can "
                       "drop the scale-up."),
    "steps": ListOf("Each load run, in order.", STEP),
}, nullable=True)
