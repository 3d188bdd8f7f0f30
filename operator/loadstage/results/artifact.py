"""A stage's artifact (every histogram, the endpoint and error rows, the time series) on its way from
the Locust master to where it is kept: compact JSON, one line of a pod's log, and a ConfigMap's budget."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

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
    def pairs(values: list) -> list[list]:
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
