"""What crosses a process boundary, declared once and read and written from its declaration on both sides:
- the stage's headline, which the Locust master writes (loadstage.locust.summary and the master's extension) and
  the engine reads (loadstage.results.stage_results), as a file or a pod's termination message;
- spec.slo as the master's --slo argument (written by the command line's builder, read by the extension)."""

from __future__ import annotations

import json
from typing import NotRequired, TypedDict

from loadstage.api.schema import Bool, Field, Int, ListOf, MapOf, Num, Obj, Str, omit_none
from loadstage.api.status.figures import LATENCY, OBJECTIVE, TASK_EXCEPTIONS, Latency, Objective, TaskExceptions
from loadstage.api.status.stage import ENDED_BY
from loadstage.api.types import PERCENTILES, Slo


class MethodRow(TypedDict, total=False):
    requests: int
    failures: int
    meanMs: float | None
    latencyMs: Latency
    correctedLatencyMs: Latency


METHOD_ROW = Obj(MethodRow, "One HTTP method's requests.", {
    "requests": Int("Requests of this method."),
    "failures": Int("Of which failed."),
    "meanMs": Num("Their mean latency, ms.", nullable=True),
    "latencyMs": LATENCY,
    "correctedLatencyMs": LATENCY,
}, required=("requests", "failures", "meanMs", "latencyMs"))


class Decision(TypedDict):
    atSeconds: float
    confidence: float
    objectives: list[Objective]
    settleSeconds: NotRequired[int]
    batchSeconds: NotRequired[float]
    batches: NotRequired[int]


DECISION = Obj(Decision, "The look that decided the stage: its verdict is the stage's.", {
    "atSeconds": Num("Seconds into the stage."),
    "confidence": Num("The look's confidence level.", above=0, below=1),
    "objectives": ListOf("Each objective against its figure at that look.", OBJECTIVE),
    "settleSeconds": Int("The seconds cut from the stage's start before that look's verdict (results.steady)."),
    "batchSeconds": Num("The length of the batches its intervals were drawn over (results.batch_means)."),
    "batches": Int("How many batches."),
}, required=("atSeconds", "confidence", "objectives"))


class StageHeadline(TypedDict, total=False):
    requests: int
    failures: int
    meanMs: float | None
    latencyMs: Latency
    correctedLatencyMs: Latency
    rps: float
    elapsedSeconds: float
    loadStartedAt: float
    loadEndedAt: float
    injectors: int | None
    servedRequests: int | None
    injectorPeakCpuPercent: float | None
    injectorBound: bool
    masterLagSeconds: float | None
    masterBound: bool
    byMethod: dict[str, MethodRow]
    errorKinds: int
    arrivals: int
    droppedArrivals: int
    injectorCpuBound: bool
    exceptions: TaskExceptions
    endpointsFolded: int
    endedBy: str
    looks: int
    decision: Decision


HEADLINE = Obj(StageHeadline, "A stage's headline, as its Locust master writes it: small enough for a pod's "
                              "termination message.", {
    "requests": Int("Requests completed, failed ones included."),
    "failures": Int("Failed requests."),
    "meanMs": Num("Mean latency, ms.", nullable=True),
    "latencyMs": LATENCY,
    "correctedLatencyMs": LATENCY,
    "rps": Num("Requests a second, from the load's start to its last answer."),
    "elapsedSeconds": Num("From the load's start to its last answer, seconds."),
    "loadStartedAt": Num("When the load began, epoch seconds."),
    "loadEndedAt": Num("When the last request completed, epoch seconds."),
    "injectors": Int("The workers the master saw.", nullable=True),
    "servedRequests": Int("The target's own count of the stage's requests.", nullable=True),
    "injectorPeakCpuPercent": Num("The busiest injector's peak CPU, percent.", nullable=True),
    "injectorBound": Bool("An injector ran out of CPU, or of users at an arrival rate."),
    "masterLagSeconds": Num("The latest the master merged a worker's report, seconds.", nullable=True),
    "masterBound": Bool("The master fell behind by a report interval."),
    "byMethod": MapOf("Each method's requests.", METHOD_ROW),
    "errorKinds": Int("Distinct errors."),
    "arrivals": Int("At an arrival rate: the arrivals scheduled."),
    "droppedArrivals": Int("... of which found no free user."),
    "injectorCpuBound": Bool("... whether the injectors' CPU (not only their pools) bound it."),
    "exceptions": TASK_EXCEPTIONS,
    "endpointsFolded": Int("Request names folded into the artifact's (other) row."),
    "endedBy": Str("With --slo: Decided, Breached or MaxDuration.", enum=ENDED_BY),
    "looks": Int("With --slo: the looks at its intervals."),
    "decision": DECISION,
}, required=("requests", "failures", "rps", "meanMs", "latencyMs", "byMethod"))


SLO_ARGUMENT = Obj(Slo, "spec.slo as the master's --slo takes it: latencies in seconds, the error rate a fraction.", {
    **{p: Field(Num(f"The {p} objective, seconds.", nullable=True), omit=omit_none) for p in PERCENTILES},
    "errorRate": Field(Num("The error rate's objective, a fraction.", nullable=True), omit=omit_none),
    "minRps": Field(Num("The least requests a second.", nullable=True), omit=omit_none),
    "tolerance": Num("How near a limit a figure is at it, a fraction."),
})


def slo_argument(slo: Slo) -> str:
    return json.dumps(SLO_ARGUMENT.dump(slo, "--slo"), separators=(",", ":"))


def read_slo_argument(text: str) -> Slo:
    slo: Slo = SLO_ARGUMENT.read(json.loads(text), "--slo")
    return slo


def headline_json(headline: StageHeadline) -> bytes:
    """The headline as the master writes it."""
    return json.dumps(HEADLINE.dump(headline, "headline"), separators=(",", ":"), sort_keys=True).encode()


def read_headline(raw: object) -> StageHeadline:
    headline: StageHeadline = HEADLINE.read(raw, "headline")
    return headline
