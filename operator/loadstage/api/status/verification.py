"""status.verification: the exported settings run at the load the export promises (docs/export.md, "Verify"),
and whether the objective held; declared once, as every part of the status."""

from __future__ import annotations

from typing import TypedDict

from loadstage.api.schema import Int, ListOf, Num, Obj, Str

VERIFICATION_PLACES = ("Local", "Cluster")
VERIFICATION_RESULTS = ("Holds", "Breaks", "Undecided")
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
                 "ladder through the exported HPA.", enum=VERIFICATION_PLACES),
    "result": Str("Holds: every step met the objective (Pass, or Near: at it within spec.slo.tolerance); "
                  "Breaks: a step failed it (reason names it); Undecided: a step could not tell.",
                  enum=VERIFICATION_RESULTS),
    "reason": Str("The result in words, with the step and figure that decided it."),
    "perPodLoad": Num("The load a pod is given: C (1 - headroom) with spec.autoscale, else the goal's rate over "
                      "the variant's pods, req/s."),
    "variant": Int("The verified variant's index (from 0)."),
    "steps": ListOf("Each load run, in order.", STEP),
}, nullable=True)
