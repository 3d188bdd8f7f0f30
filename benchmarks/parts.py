"""A benchmark that runs in parts: each part appends its seeded records to a file under benchmarks/results/, and
the report is over every record of one commit of the method.

The method is the tree of operator/loadstage at the commit the part ran on (`git rev-parse HEAD:operator/loadstage`):
any change to the operator's code starts a new method. A part refuses to record from a checkout whose operator code
is not committed, so that each record names what produced it."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from common import RESULTS, ROOT, machine


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def method() -> str:
    return _git("rev-parse", "HEAD:operator/loadstage")


def uncommitted() -> bool:
    return bool(_git("status", "--porcelain", "--", "operator/loadstage"))


def refuse_uncommitted() -> None:
    """Exits where the operator's code is not committed: no record could name the method that produced it."""
    if uncommitted():
        raise SystemExit("operator/loadstage has uncommitted changes: commit them first")


def record_seeds(name: str, seeds: list[int], run_seed: Callable[[int], list[dict]]) -> None:
    """Runs each seed and appends its records to <name>.jsonl as it ends, so that a stopped part keeps the seeds
    it finished; refuses uncommitted operator code before the first seed, not after it."""
    refuse_uncommitted()
    for seed in seeds:
        print(f"seed {seed}: appended to {append(name, run_seed(seed))}", flush=True)


def append(name: str, records: list[dict], directory: Path = RESULTS) -> Path:
    """Appends `records` to <directory>/<name>.jsonl, each with the part's method, commit, time and machine (a
    smoke writes into a directory of its own, from any checkout)."""
    if directory == RESULTS:
        refuse_uncommitted()
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.jsonl"
    stamp = {"method": method(), "commit": _git("rev-parse", "--short", "HEAD"),
             "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
             "hostSpeed": host_speed()}
    with path.open("a") as out:
        for record in records:
            out.write(json.dumps({**stamp, **record}, separators=(",", ":")) + "\n")
    return path


def host_speed(seconds: float = 0.3) -> float:
    """Millions of additions a second that a Python loop makes now: a shared host's speed changes by a third
    within hours (2.2 s, then 3.2 s, for 20 million on 2026-12-06), and a knee's capacity with it, so each
    record says how fast the machine was when it was appended."""
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(100_000):
            done += 1
    return round(done / elapsed / 1e6, 2)


def read(name: str, directory: Path = RESULTS) -> list[dict]:
    path = directory / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


def rate(events: int, of: int) -> dict:
    """A count with its Clopper-Pearson 95% interval."""
    from loadstage.results.proportions import clopper_pearson
    low, high = clopper_pearson(events, of, 0.95) if of else (0.0, 1.0)
    return {"count": events, "of": of, "low": round(low, 4), "high": round(high, 4)}


def said(figure: dict) -> str:
    return f"{figure['count']} of {figure['of']} (95%: {figure['low']:.0%}-{figure['high']:.0%})"


def seeds(text: str) -> list[int]:
    """`3` or `1-15`."""
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def stage_row(stage: dict) -> dict:
    """What a benchmark keeps of a decided stage: its load, how it ended, its verdict and what the verdict saw."""
    verdict = stage["verdict"]
    return {"load": stage.get("arrivalRate"), "endedBy": stage["endedBy"], "outcome": verdict["outcome"],
            "seconds": stage["durationSeconds"], "settleSeconds": verdict.get("settleSeconds"),
            "batches": verdict.get("batches"), "batchSeconds": verdict.get("batchSeconds"),
            "p99Ms": stage["latencyMs"]["p99"]}
