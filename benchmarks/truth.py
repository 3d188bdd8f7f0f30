"""Ground truth for the answer benchmarks: a load's steady-state p99 from long stages in repeats, and whether it
meets an objective, breaks it, or lies near it.

Each truth stage is long (SETTLE_SECONDS, then the measured seconds), and its first SETTLE_SECONDS of blocks are
dropped: a stage starts on an empty queue, and the truth is the queue it settles into. Each repeat is an
independent replication; within one, the blocks are merged in pairs while their means stay autocorrelated
(results.batch_means, the same rule a verdict's batches follow), and the batches of every repeat are pooled into
one t-interval (Law & Kelton's replication/batch means). A load:
- meets the objective L when its p99's upper bound is at most (1 - tolerance) L;
- fails it when its lower bound is at least (1 + tolerance) L;
- is near it otherwise."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

SETTLE_SECONDS = 30.0
TOLERANCE = 0.10


def settled(section: dict[str, Any], settle: float) -> dict[str, Any]:
    """A stage's blocks (its artifact's `blocks`) without those that started in its first `settle` seconds."""
    starts = [0.0, *itertools.accumulate(section["durations"])]
    keep = [i for i, start in enumerate(starts[:-1]) if start >= settle - 1e-6]
    return {"seconds": section["seconds"], "histograms": [section["histograms"][i] for i in keep],
            "failures": [section["failures"][i] for i in keep], "durations": [section["durations"][i] for i in keep]}


def stage_blocks(workdir: Path, number: int, variant: int = 1) -> dict[str, Any]:
    """The blocks of stage `number` of variant `variant` (from 1) of a local run's working directory."""
    import json
    artifact = json.loads((workdir / f"variant-{variant}" / f"stage-{number}" / "artifact.json").read_text())
    return artifact["blocks"]


def pooled(sections: list[dict[str, Any]], confidence: float = 0.95) -> dict[str, Any]:
    """The p99 of every repeat's settled blocks merged, and its interval over their pooled batches."""
    from loadstage.results import batch_means, histograms
    from loadstage.results.intervals import blocks_from_artifact

    batches, seconds, correlation = [], 0.0, 0.0
    for section in sections:
        blocks = blocks_from_artifact(section)
        found = batch_means.batches_from(blocks, float(section["seconds"])) or \
            batch_means.Batches(tuple(blocks), float(section["seconds"]))
        batches += found.batches
        seconds, correlation = max(seconds, found.seconds), max(correlation, found.correlation)
    merged = histograms.merge_encoded(h for s in sections for h in s["histograms"])
    p99 = histograms.percentiles_ns(merged, {"p99": 0.99})["p99"]
    found = batch_means.intervals(batch_means.Batches(tuple(batches), seconds, correlation), confidence)
    low, high = (found or {}).get("p99") or (0.0, math.inf)
    return {"p99Ms": round(p99 / 1e6, 2) if p99 else None, "interval": [low, None if math.isinf(high) else high],
            "requests": merged.get_total_count(), "batches": len(batches), "repeats": len(sections)}


def pooled_by(records: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    """The truth records (each with its settled `blocks`) pooled by `key` (a load, a variant)."""
    grouped: dict[Any, list[dict[str, Any]]] = {}
    for r in records:
        grouped.setdefault(r[key], []).append(r["blocks"])
    return {k: pooled(sections) for k, sections in sorted(grouped.items())}


def machine_of(record: dict[str, Any]) -> str:
    """The machine a record ran on: its CPU model and its kernel's build (two instances of one CPU model differed:
    a variant at 80-100% of a 0.1-core quota collapsed on one, never on the other, BENCHMARKS.md (j))."""
    return f"{record['machine']['cpu']}, kernel {record['machine'].get('kernel')}"


def by_machine(records: list[dict[str, Any]], key: str) -> dict[str, dict[Any, dict[str, Any]]]:
    """The truth records pooled by `key` on each machine they ran on (machine_of: a target's capacity is the
    machine's), the machine with the most records first."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        grouped.setdefault(machine_of(r), []).append(r)
    return {cpu: pooled_by(found, key) for cpu, found in sorted(grouped.items(), key=lambda g: -len(g[1]))}


def classify(truth: dict[str, Any], limit_ms: float, tolerance: float = TOLERANCE) -> str:
    low, high = truth["interval"]
    if high is not None and high <= (1 - tolerance) * limit_ms:
        return "meets"
    if low >= (1 + tolerance) * limit_ms:
        return "fails"
    return "near"


def class_at(truths: dict[float, dict[str, Any]], load: float, limit_ms: float) -> str:
    """The truth's class at a load: a measured load's own; between two, theirs where they agree, else near; below
    the lowest load, meets where it does (a lighter load queues less), above the highest, fails where it does."""
    loads = sorted(truths)
    classes = {x: classify(truths[x], limit_ms) for x in loads}
    if load in classes:
        return classes[load]
    if load < loads[0]:
        return "meets" if classes[loads[0]] == "meets" else "near"
    if load > loads[-1]:
        return "fails" if classes[loads[-1]] == "fails" else "near"
    below, above = next((b, a) for b, a in itertools.pairwise(loads) if b < load < a)
    return classes[below] if classes[below] == classes[above] else "near"


def p99_at(truths: dict[float, dict[str, Any]], load: float) -> float:
    """The truth's p99 at a load, interpolated in log p99 between the loads around it; below the lowest load, the
    lowest's (a lighter load queues less), above the highest, the highest's."""
    loads = sorted(truths)
    if load <= loads[0]:
        return truths[loads[0]]["p99Ms"]
    for below, above in itertools.pairwise(loads):
        if below <= load <= above:
            share = (load - below) / (above - below)
            lo, hi = math.log(truths[below]["p99Ms"]), math.log(truths[above]["p99Ms"])
            return math.exp(lo + share * (hi - lo))
    return truths[loads[-1]]["p99Ms"]


def knee(truths: dict[float, dict[str, Any]], limit_ms: float) -> float | None:
    """Where the truth's p99 crosses the objective, interpolated in log p99; None if it never does."""
    loads = sorted(truths)
    for below, above in itertools.pairwise(loads):
        lo, hi = truths[below]["p99Ms"], truths[above]["p99Ms"]
        if lo <= limit_ms < hi:
            share = (math.log(limit_ms) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return below + share * (above - below)
    return None
