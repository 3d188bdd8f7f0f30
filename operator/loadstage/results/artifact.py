"""A stage's artifact (every histogram, the endpoint and error rows, the time series) on its way from
the Locust master to where it is kept (compact JSON, one line of a pod's log, and a ConfigMap's budget), and
read back, checked, as a typed value."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from loadstage.api.schema import Int, Json, ListOf, MapOf, Num, Obj, ShapeError, Str, Written
from loadstage.results import histograms
from loadstage.results.intervals import MIN_BLOCKS

ARTIFACT_MARKER = "LOADSTAGE-ARTIFACT "   # a log line: this, then base64 of the zlib-compressed JSON
ARTIFACT_BUDGET = 1_000_000               # a ConfigMap holds at most 1 MiB


def encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def artifact_line(artifact: dict[str, Any]) -> str:
    """The artifact as one line of a pod's log."""
    return ARTIFACT_MARKER + base64.b64encode(zlib.compress(encode(artifact), 9)).decode()


class UnreadableArtifact(ValueError):
    """An artifact line that does not decode: cut short or garbled on its way."""


def artifact_from_log(log: str) -> dict[str, Any] | None:
    """The last artifact line of a log, decoded; None if there is none."""
    for line in reversed(log.splitlines()):
        if line.startswith(ARTIFACT_MARKER):
            unreadable = f"its artifact line ({len(line)} characters) cannot be read"
            try:
                artifact = json.loads(zlib.decompress(base64.b64decode(line[len(ARTIFACT_MARKER):], validate=True)))
            except (ValueError, zlib.error) as e:
                raise UnreadableArtifact(f"{unreadable}: {type(e).__name__}: {e}") from None
            if not isinstance(artifact, dict):
                raise UnreadableArtifact(f"{unreadable}: it holds a {type(artifact).__name__}, not an object")
            return artifact
    return None


def coarser(blocks: dict[str, Any]) -> dict[str, Any]:
    """The intervals' blocks merged in pairs: half as many, twice as long (longer blocks only make an interval
    more cautious)."""
    def pairs(values: list[Any]) -> list[list[Any]]:
        return [values[i:i + 2] for i in range(0, len(values), 2)]
    return {**blocks, "seconds": blocks["seconds"] * 2,
            "histograms": [histograms.encode(histograms.merge_encoded(pair)) for pair in pairs(blocks["histograms"])],
            "failures": [sum(pair) for pair in pairs(blocks["failures"])],
            "durations": [round(sum(pair), 3) for pair in pairs(blocks["durations"])]}


def fit_artifact(artifact: dict[str, Any], budget: int = ARTIFACT_BUDGET) -> str:
    """The artifact as JSON of at most `budget` bytes: if it is larger, the intervals' blocks are merged in
    pairs (down to twice the fewest a stage needs), then the time series goes, then the blocks, then the
    histograms of the least requested endpoints, then the endpoint and the error rows themselves (the stage's
    and each method's histograms stay); `omitted` says what was left out."""
    artifact = json.loads(encode(artifact))
    text = encode(artifact)
    omitted = {"series": False, "endpointHistograms": 0}
    endpoints = sorted(artifact.get("endpoints", []), key=lambda e: e["requests"])
    while len(text) > budget:
        blocks = artifact.get("blocks")
        if blocks and len(blocks["histograms"]) >= 4 * MIN_BLOCKS:
            artifact["blocks"] = coarser(blocks)
            omitted["blocksMerged"] = omitted.get("blocksMerged", 0) + 1
        elif artifact.get("series") and not omitted["series"]:
            artifact["series"], omitted["series"] = [], True
        elif blocks:
            del artifact["blocks"]
            omitted["blocks"] = True
        elif omitted["endpointHistograms"] < len(endpoints):
            endpoint = endpoints[omitted["endpointHistograms"]]
            endpoint.pop("histogram", None)
            endpoint.pop("correctedHistogram", None)
            omitted["endpointHistograms"] += 1
        elif artifact.get("endpoints"):
            omitted["endpoints"], artifact["endpoints"] = len(artifact["endpoints"]), []
        elif artifact.get("errors"):
            omitted["errors"], artifact["errors"] = len(artifact["errors"]), []
        else:
            break
        artifact["omitted"] = omitted
        text = encode(artifact)
    return text.decode()


@dataclass(frozen=True)
class Window(Written):
    """One second of a stage's time series: its requests, their rate, p50 and p99."""
    start: float
    seconds: float
    requests: int
    rps: float
    p50_ms: float | None
    p99_ms: float | None


WINDOW = Obj(Window, "One window of the stage's time series.", {
    "start": Num("Its start, seconds into the stage."),
    "seconds": Num("Its length, seconds."),
    "requests": Int("Requests completed in it."),
    "rps": Num("Requests a second."),
    "p50Ms": Num("Its p50 latency, ms.", nullable=True),
    "p99Ms": Num("Its p99 latency, ms.", nullable=True),
}, required=("start", "seconds", "requests", "rps"))


class Histograms(TypedDict, total=False):
    histogram: str
    correctedHistogram: str


_HISTOGRAM = Str("HdrHistogram's compressed encoding, in ns.", nullable=True)
_ROWS = ListOf("Rows as the master wrote them.", MapOf("A row.", Json("A value.")), nullable=True)
STORED = Obj(dict, "A stage's artifact.", {
    "histogram": _HISTOGRAM,
    "correctedHistogram": _HISTOGRAM,
    "byMethod": MapOf("Each method's histograms.", Obj(Histograms, "", {"histogram": _HISTOGRAM,
                                                                        "correctedHistogram": _HISTOGRAM}),
                      nullable=True),
    "endpoints": _ROWS,
    "errors": _ROWS,
    "series": ListOf("The time series.", WINDOW, nullable=True),
    "blocks": MapOf("What the confidence intervals resample (results.intervals).", Json("A value."),
                    nullable=True),
})


@dataclass(frozen=True)
class Artifact:
    """A stage's artifact: its merged histogram and each method's (HdrHistogram's compressed encoding,
    in ns), the endpoint and error rows as the master wrote them, and the time series."""
    histogram: str | None = None
    corrected_histogram: str | None = None
    method_histograms: dict[str, str] = field(default_factory=dict)
    corrected_method_histograms: dict[str, str] = field(default_factory=dict)
    endpoints: tuple[Mapping[str, Any], ...] = ()
    errors: tuple[Mapping[str, Any], ...] = ()
    series: tuple[Window, ...] = ()
    blocks: dict[str, Any] | None = None   # what the confidence intervals resample (results.intervals)

    @classmethod
    def from_artifact(cls, d: Mapping[str, Any] | None) -> Artifact:
        return cls._parse(d or {}, "artifact")

    @classmethod
    def read(cls, raw: Any, path: str) -> Artifact:
        """An artifact from a file or a ConfigMap, checked as it is read, its histograms decoded once: raises
        ShapeError naming the first bad path."""
        artifact = cls._parse(raw, path)
        encoded = {"histogram": artifact.histogram, "correctedHistogram": artifact.corrected_histogram,
                   **{f"byMethod.{m}.histogram": h for m, h in artifact.method_histograms.items()},
                   **{f"byMethod.{m}.correctedHistogram": h for m, h in artifact.corrected_method_histograms.items()}}
        for key, value in encoded.items():
            if value is not None and not histograms.decodes(value):
                raise ShapeError(f"{path}.{key}", "is not an encoded HDR histogram")
        return artifact

    @classmethod
    def _parse(cls, raw: Any, path: str) -> Artifact:
        d = STORED.read(raw, path)
        by_method = d.get("byMethod") or {}
        return cls(d.get("histogram"), d.get("correctedHistogram"),
                   {m: h["histogram"] for m, h in by_method.items() if h.get("histogram")},
                   {m: h["correctedHistogram"] for m, h in by_method.items() if h.get("correctedHistogram")},
                   tuple(d.get("endpoints") or ()), tuple(d.get("errors") or ()), tuple(d.get("series") or ()),
                   d.get("blocks"))
