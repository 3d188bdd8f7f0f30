"""Benchmark (b): how much load one injector process sustains on one core.

nginx (one process, pinned to core 1) answers a fixed 3-byte body; each client is pinned to
core 0 and runs for the same time, in alternating order, side by side in one run:
- wrk, 1 thread (the practical ceiling);
- one Locust worker with FastHttpUser and loadstage's results extension (a loadstage injector);
- the same without the extension (plain Locust);
- one Locust worker with stock HttpUser.
Each Locust worker has its master on core 1, as in a stage.
Requests per second are requests / (last request - first request). The server's CPU use is
read from /proc for the nginx process over each client's run.

    python benchmarks/injector_efficiency.py [--seconds 15] [--rounds 2] [--users 64] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from common import ROOT, write_result

LOCUSTFILE = "benchmarks/efficiency_locustfile.py"
EXTENSION = "injectors/loadstage_results.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(tmp: Path, port: int) -> subprocess.Popen:
    conf = tmp / "nginx.conf"
    conf.write_text(f"""
daemon off; master_process off; worker_processes 1;
pid {tmp}/nginx.pid; error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 1000000;
  client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp};
  uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
  server {{ listen 127.0.0.1:{port}; location / {{ return 200 "ok\\n"; }} }} }}
""")
    process = subprocess.Popen(["taskset", "-c", "1", "nginx", "-c", str(conf), "-p", str(tmp)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"nginx did not start; see {tmp}/error.log")


def run_wrk(url: str, seconds: int, users: int) -> float:
    out = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", f"-c{users}", f"-d{seconds}s", url],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def run_locust(url: str, seconds: int, users: int, user_class: str, extension: bool, tmp: Path) -> float:
    """One Locust worker on core 0, as an injector runs in a stage, its master on core 1 beside nginx (the master
    merges the reports: work an injector does not do)."""
    files = f"{EXTENSION},{LOCUSTFILE}" if extension else LOCUSTFILE
    summary, port = tmp / "summary.json", free_port()
    worker = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-m", "locust", "-f", files, "--worker",
                               "--master-host", "127.0.0.1", "--master-port", str(port), user_class],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    argv = ["taskset", "-c", "1", sys.executable, "-m", "locust", "-f", files, "--headless", "--master",
            "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--expect-workers", "1",
            "-u", str(users), "-r", str(users), "--run-time", f"{seconds}s", "-H", url,
            "--only-summary", "--exit-code-on-error", "0", "--stop-timeout", "0", user_class]
    argv += ["--summary-file", str(summary), "--stage-seconds", str(seconds)] if extension else ["--json"]
    try:
        out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True, timeout=seconds + 120).stdout
    finally:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    if extension:
        s = json.loads(summary.read_text())
        requests, elapsed = s["requests"], s["loadEndedAt"] - s["loadStartedAt"]
    else:
        entries = json.loads(out)
        requests = sum(e["num_requests"] for e in entries)
        elapsed = (max((e["last_request_timestamp"] or 0) for e in entries)
                   - min(e["start_time"] for e in entries)) if entries else 0
    if not requests or elapsed <= 0:
        raise RuntimeError(f"{user_class} made no requests against {url}")
    return requests / elapsed


def recorder_microseconds_per_request(requests: int = 36_000, names: int = 10) -> float:
    """The extension's own work for each request, in process: the request listener (a tally per name and per
    second) and one worker report for all of them, as at about 12,000 req/s with a report every 3 s. The best
    of five passes: unlike the rates above, it hardly moves with the machine's noise."""
    from loadstage.locust.recorder import StageRecorder
    rng = random.Random(1)
    samples = [(f"/item/{i % names}", rng.lognormvariate(0.0, 0.5)) for i in range(requests)]
    best = float("inf")
    for _ in range(5):
        recorder = StageRecorder()
        started = time.perf_counter()
        for name, ms in samples:
            recorder.on_request("GET", name, ms)
        recorder.report()
        best = min(best, (time.perf_counter() - started) / requests)
    return best * 1e6


def measure(seconds: int, rounds: int, users: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="loadstage-efficiency-") as tmp:
        tmp = Path(tmp)
        port = free_port()
        nginx = start_nginx(tmp, port)
        server = psutil.Process(nginx.pid)
        url = f"http://127.0.0.1:{port}"
        clients = {
            "wrk": lambda: run_wrk(url + "/", seconds, users),
            "loadstage FastHttpUser": lambda: run_locust(url, seconds, users, "FastProbe", True, tmp),
            "plain Locust FastHttpUser": lambda: run_locust(url, seconds, users, "FastProbe", False, tmp),
            "plain Locust HttpUser": lambda: run_locust(url, seconds, users, "StockProbe", False, tmp),
        }
        runs: dict[str, list[dict]] = {name: [] for name in clients}
        try:
            for r in range(rounds):
                order = list(clients) if r % 2 == 0 else list(reversed(clients))
                for name in order:
                    cpu_before, t0 = sum(server.cpu_times()[:2]), time.monotonic()
                    rps = clients[name]()
                    server_cores = (sum(server.cpu_times()[:2]) - cpu_before) / (time.monotonic() - t0)
                    runs[name].append({"rps": round(rps, 1), "serverCores": round(server_cores, 3)})
        finally:
            nginx.terminate()
            nginx.wait(10)
    medians = {name: statistics.median(x["rps"] for x in r) for name, r in runs.items()}
    wrk = medians["wrk"]
    recorder_us = recorder_microseconds_per_request()
    return {
        "secondsPerRun": seconds, "rounds": rounds, "connectionsOrUsers": users, "runs": runs,
        "medianRps": {k: round(v, 1) for k, v in medians.items()},
        "fractionOfWrk": {k: round(v / wrk, 4) for k, v in medians.items()},
        "extensionOverhead": round(1 - medians["loadstage FastHttpUser"] / medians["plain Locust FastHttpUser"], 4),
        # each round's two Locust runs side by side: the machine's drift between rounds cancels out
        "extensionOverheadPaired": round(1 - statistics.median(
            a["rps"] / b["rps"] for a, b in zip(runs["loadstage FastHttpUser"], runs["plain Locust FastHttpUser"])), 4),
        "recorderMicrosecondsPerRequest": round(recorder_us, 2),
        # against the time one plain FastHttpUser request took the worker's core
        "recorderShareOfPlainRequest": round(recorder_us * medians["plain Locust FastHttpUser"] / 1e6, 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="4 s per client, one round (CI; 2 s was too short)")
    args = parser.parse_args()
    for tool in ("nginx", "wrk", "taskset"):
        if shutil.which(tool) is None:
            print(f"needs {tool}: scripts/setup installs it", file=sys.stderr)
            return 2
    seconds, rounds = (4, 1) if args.smoke else (args.seconds, args.rounds)
    r = measure(seconds, rounds, args.users)
    for name, rps in r["medianRps"].items():
        cores = statistics.median(x["serverCores"] for x in r["runs"][name])
        print(f"{name:28} {rps:10,.0f} req/s  {r['fractionOfWrk'][name]:7.2%} of wrk   server CPU {cores:.2f} cores")
    print(f"results extension overhead: {r['extensionOverhead']:.2%} of plain Locust FastHttpUser's rate "
          f"(medians); {r['extensionOverheadPaired']:.2%} (the median of each round's ratio)")
    print(f"the recorder's own work: {r['recorderMicrosecondsPerRequest']} us a request, "
          f"{r['recorderShareOfPlainRequest']:.2%} of a plain FastHttpUser request's time on its core")
    if not args.smoke:
        print(f"written to {write_result('injector_efficiency', r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
