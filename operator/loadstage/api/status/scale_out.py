"""Scale-out from a few sizes, as the status holds it (status.scaleOut): each setting's capacities at its sizes, the
Universal Scalability Law fitted to them, and the capacity predicted at spec.predict's size; each type beside its
declaration. How: loadstage.results.scale_out."""

from __future__ import annotations

from dataclasses import dataclass

from loadstage.api.schema import Field, Int, ListOf, Num, Obj, Pair, Str, Written, omit_none


@dataclass(frozen=True)
class ScalePoint(Written):
    """One size's capacity, req/s, and its bracket."""
    size: int
    rps: float
    low: float
    high: float


SCALE_POINT = Obj(ScalePoint, "One size's capacity and its bracket.", {
    "size": Int("Pods, or workers."),
    "rps": Num("Its capacity, req/s: a search's pass end (or its Near load), a ladder's knee."),
    "low": Num("Its bracket's low end, req/s."),
    "high": Num("Its bracket's high end, req/s: the fail end, or a ladder's first failed stage."),
}, required=("size", "rps", "low", "high"))


@dataclass(frozen=True)
class ScalePrediction(Written):
    size: int
    rps: float
    interval: tuple[float, float]


SCALE_PREDICTION = Obj(ScalePrediction, "The capacity the law gives at spec.predict's size.", {
    "size": Int("spec.predict's size."),
    "rps": Num("The law's capacity there, req/s."),
    "interval": Pair("Its 95% interval: the 2.5th and 97.5th percentiles of 200 refits to capacities drawn within "
                     "each bracket, req/s."),
}, required=("size", "rps", "interval"), nullable=True)


@dataclass(frozen=True)
class ScaleOut(Written):
    """A setting's capacities over one axis; the law's terms where 3 sizes or more were measured, else a note."""
    axis: str
    settings: str
    points: tuple[ScalePoint, ...]
    contention: float | None = None    # alpha
    coherency: float | None = None     # beta
    per_unit: float | None = None      # gamma: one pod's (or worker's) capacity, req/s
    peak_size: float | None = None     # where the law's capacity is highest, sqrt((1 - alpha) / beta)
    prediction: ScalePrediction | None = None
    note: str | None = None

    def law(self) -> str:
        """'C(N) = 104 N / (1 + 0.05 (N - 1) + 0.0012 N (N - 1))'."""
        return f"C(N) = {self.per_unit:,.4g} N / (1 + {self.contention:.3g} (N - 1) + {self.coherency:.3g} N (N - 1))"


SCALE_OUT = Obj(ScaleOut, "A setting's capacity at several pod (or worker) counts, and the Universal Scalability "
                          "Law fitted to it: C(N) = perUnit N / (1 + contention (N - 1) + coherency N (N - 1)).", {
    "axis": Str("What the sizes count: pods or workers.", enum=("pods", "workers")),
    "settings": Str("The setting's other values, e.g. server=gunicorn threads=4."),
    "points": ListOf("Each size measured, in order.", SCALE_POINT),
    "contention": Field(Num("alpha: the share of the work that serializes (queueing on a shared resource).",
                            nullable=True), omit=omit_none),
    "coherency": Field(Num("beta: the cost of keeping the units consistent, which grows with their pairs.",
                           nullable=True), omit=omit_none),
    "perUnit": Field(Num("gamma: one unit's capacity, req/s.", nullable=True), attr="per_unit", omit=omit_none),
    "peakSize": Field(Num("The size where the law's capacity peaks, sqrt((1 - alpha) / beta); absent with no "
                          "coherency.", nullable=True), omit=omit_none),
    "prediction": Field(SCALE_PREDICTION, omit=omit_none),
    "note": Field(Str("Why there is no law or no prediction, or that a prediction is wide.", nullable=True),
                  omit=omit_none),
}, required=("axis", "settings", "points"))
