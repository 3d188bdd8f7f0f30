"""Shared by the benchmark commands: the machine they ran on, result files, and running an experiment."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    result = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release()}
    if (limit := cpu_limit()) is not None:
        result["cpuLimit"] = limit
    return result


def cpu_limit() -> float | None:
    """The CPUs this process's cgroup may use, where it is limited (a run made to stand for a slower machine)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpu" in controllers.split(","):        # v1
                base = Path("/sys/fs/cgroup/cpu") / path.lstrip("/")
                quota = int((base / "cpu.cfs_quota_us").read_text())
                return round(quota / int((base / "cpu.cfs_period_us").read_text()), 3) if quota > 0 else None
            if controllers == "":                       # v2
                quota, period = (Path("/sys/fs/cgroup") / path.lstrip("/") / "cpu.max").read_text().split()
                return None if quota == "max" else round(int(quota) / int(period), 3)
    except (OSError, ValueError):
        return None
    return None


def write_result(name: str, result: dict) -> Path:
    """Records a full run's figures with the command line and the machine that produced them."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    command = " ".join(["python", *sys.argv])
    path.write_text(json.dumps({"command": command, "machine": machine(), **result}, indent=2) + "\n")
    return path


def loadstage(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "loadstage.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})
    if check and done.returncode:
        raise SystemExit(f"loadstage {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def run_experiment(tmp: Path, doc: dict) -> dict:
    """`loadstage run` of the experiment `doc` in `tmp` (its file, result and workdir named after it); its status."""
    name = doc["metadata"]["name"]
    spec, result = tmp / f"{name}.yaml", tmp / f"{name}.json"
    spec.write_text(yaml.safe_dump(doc))
    loadstage("run", str(spec), "-q", "-o", str(result), "--workdir", str(tmp / f"{name}-work"))
    return json.loads(result.read_text())["status"]


def spread(values: list[float]) -> dict:
    """The median and the range, to 3 decimals."""
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}
