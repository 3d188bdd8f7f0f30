"""Benchmark (g): can one Locust master keep up with 1,000 injectors?

One real master (the command a stage runs, with loadstage's extension) is driven by synthetic workers that speak
Locust's own protocol (ZeroMQ, msgpack) from one process: each connects, says it is ready, answers the spawn,
sends a heartbeat every second and a report every 3 s, and answers the end of the stage. Each report is what a
real worker sends for `--rate` requests a second over `--names` request names: Locust's own statistics and
loadstage's histograms, made by Locust's and loadstage's own code. The driver makes a few reports every second
and sends each worker one of them, stamped with its sending time.

Reported: the master's CPU over the steady part of the stage (a core = 100%), how late it merged the reports
(the extension's own measure, from each report's sending time), and whether its totals are exact (every
request the driver sent, in Locust's count and in the histograms).

    python benchmarks/master_merge.py [--workers 1000] [--names 50] [--rate 100] [--seconds 60] [--plain]
    [--smoke]

--plain sends Locust's statistics only (no loadstage histograms): what plain Locust's master costs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack
import psutil
import zmq
from locust import __version__ as locust_version
from locust.stats import RequestStats

from common import ROOT, write_result
from loadstage.api.load import parse_experiment
from loadstage.launch.argv import locust_master_command
from loadstage.local.processes import resolve_executable
from loadstage.local.target import free_port
from loadstage.locust.recorder import REPORT_KEY, StageRecorder

REPORT_SECONDS, HEARTBEAT_SECONDS = 3.0, 1.0
TEMPLATES_PER_SECOND = 8
SENT_AT_PLACEHOLDER = 0.0    # a float64 at the very end of the packed report, overwritten at each send


def master_argv(workers: int, seconds: float, port: int, workdir: Path) -> list[str]:
    experiment = parse_experiment({
        "apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "master-merge"},
        "spec": {"target": {"pods": 1, "workers": 1, "threads": 1},
                 "injectors": {"usersPerInjector": 1, "maxUsersPerInjector": 1},
                 "stages": [{"injectors": workers, "duration": f"{seconds:g}s"}]}})
    argv = locust_master_command(experiment, experiment.spec.stages[0], host="http://127.0.0.1:9",
                                 summary_file=str(workdir / "summary.json"),
                                 artifact_file=str(workdir / "artifact.json"), target_metrics=[],
                                 bind_host="127.0.0.1", bind_port=port)
    return [resolve_executable(argv[0]), *argv[1:]]


class Reports:
    """The reports of the current second: Locust's statistics and loadstage's histograms of `rate` * 3 s
    requests over `names` names, each packed once, with its sending time as the last value."""

    def __init__(self, names: int, rate: float, plain: bool, rng: random.Random):
        self.names = [f"/item/{i}" for i in range(names)]
        self.per_report = round(rate * REPORT_SECONDS)
        self.plain, self.rng = plain, rng
        self.second, self.packed = -1, []

    def _one(self, now: float) -> tuple[bytes, int]:
        stats, recorder = RequestStats(), StageRecorder()
        for i in range(self.per_report):
            name = self.names[i % len(self.names)]
            ms = self.rng.lognormvariate(3.0, 0.6)       # a median of 20 ms, a long tail
            at = now - self.rng.uniform(0, REPORT_SECONDS)
            stats.log_request("GET", name, ms, 120)
            recorder.record("GET", name, ms, at=at)
        data = {"stats": stats.serialize_stats(), "stats_total": stats.total.get_stripped_report(),
                "errors": stats.serialize_errors(), "user_count": 1, "user_classes_count": {"Respondent": 1}}
        # --plain: the sending time only, for the extension's measure of the master's lag
        data[REPORT_KEY] = {**({} if self.plain else recorder.report()), "sentAt": SENT_AT_PLACEHOLDER}
        packed = msgpack.packb(data)
        assert packed[-9] == 0xcb, "the sending time must be the packed report's last value"
        return packed[:-8], self.per_report

    def pick(self, now: float) -> tuple[bytes, int]:
        if int(now) != self.second:
            self.second, self.packed = int(now), [self._one(now) for _ in range(TEMPLATES_PER_SECOND)]
        return self.rng.choice(self.packed)


def message(kind: str, data, node_id: str) -> bytes:
    return msgpack.packb((kind, data, node_id))


class Driver:
    def __init__(self, port: int, workers: int, reports: Reports, rng: random.Random):
        self.context = zmq.Context()
        self.reports, self.rng = reports, rng
        self.ids = [f"synthetic-{i}_{os.getpid()}" for i in range(workers)]
        self.sockets = []
        for node_id in self.ids:
            s = self.context.socket(zmq.DEALER)
            s.setsockopt(zmq.IDENTITY, node_id.encode())
            s.setsockopt(zmq.LINGER, 0)
            s.connect(f"tcp://127.0.0.1:{port}")
            self.sockets.append(s)
        # a worker's state, as its heartbeat says it: ready until spawned (the master counts the ready ones)
        self.heartbeats = {state: [message("heartbeat", {"state": state, "current_cpu_usage": 10.0,
                                                         "current_memory_usage": 50_000_000}, i) for i in self.ids]
                           for state in ("ready", "running")}
        self.next_report: list[float | None] = [None] * workers
        self.reporting = [False] * workers
        self.spawned = self.sent_requests = 0
        self.quit = 0

    def _send_report(self, index: int, now: float) -> None:
        body, requests = self.reports.pick(now)
        tail = msgpack.packb(self.ids[index])
        self.sockets[index].send(b"\x93" + msgpack.packb("stats") + body + struct.pack(">d", time.time()) + tail)
        self.sent_requests += requests

    def _handle(self, index: int, kind: str, data) -> None:
        node_id, s = self.ids[index], self.sockets[index]
        if kind == "spawn":
            s.send(message("spawning", None, node_id))
            s.send(message("spawning_complete", {"user_classes_count": data["user_classes_count"],
                                                 "user_count": sum(data["user_classes_count"].values())}, node_id))
            if self.next_report[index] is None and not self.reporting[index]:
                self.reporting[index] = True
                self.spawned += 1
                self.next_report[index] = time.time() + self.rng.uniform(0, REPORT_SECONDS)
        elif kind == "loadstage_flush":
            self._send_report(index, time.time())
            self.next_report[index] = None
            s.send(message("loadstage_flushed", None, node_id))
        elif kind == "quit":
            self.next_report[index] = None
            self.quit += 1

    def run(self, deadline: float, window: SteadyWindow, master: subprocess.Popen) -> None:
        for node_id, s in zip(self.ids, self.sockets):
            s.send(message("client_ready", locust_version, node_id))
        poller = zmq.Poller()
        by_socket = {}
        for index, s in enumerate(self.sockets):
            poller.register(s, zmq.POLLIN)
            by_socket[s] = index
        next_heartbeat = time.time()
        while time.time() < deadline and self.quit < len(self.sockets) and master.poll() is None:
            for s, _ in poller.poll(timeout=50):
                while True:
                    try:
                        raw = s.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    kind, data, _node = msgpack.unpackb(raw, raw=False, strict_map_key=False)
                    self._handle(by_socket[s], kind, data)
            with contextlib.suppress(psutil.Error):   # the master has exited
                window.tick(self.spawned == len(self.sockets))
            now = time.time()
            if now >= next_heartbeat:
                for index, s in enumerate(self.sockets):
                    s.send(self.heartbeats["running" if self.reporting[index] else "ready"][index])
                next_heartbeat += HEARTBEAT_SECONDS
            for index, due in enumerate(self.next_report):
                if due is not None and now >= due:
                    self._send_report(index, now)
                    self.next_report[index] = due + REPORT_SECONDS

    def close(self) -> None:
        for s in self.sockets:
            s.close(linger=0)
        self.context.term()


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def measure(workers: int, names: int, rate: float, seconds: float, plain: bool) -> dict:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="loadstage-master-merge-") as tmp:
        workdir, port = Path(tmp), free_port()
        log = open(workdir / "master.log", "wb")
        master = subprocess.Popen(master_argv(workers, seconds, port, workdir), cwd=ROOT, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        driver = None
        try:
            process = psutil.Process(master.pid)
            driver = Driver(port, workers, Reports(names, rate, plain, rng), rng)
            window = SteadyWindow(process, seconds)
            driver.run(deadline=time.time() + seconds + 150, window=window, master=master)
            with contextlib.suppress(subprocess.TimeoutExpired):
                master.wait(timeout=30)
            summary = json.loads((workdir / "summary.json").read_text()) if (workdir / "summary.json").exists() \
                else None
            if summary is None:
                tail = (workdir / "master.log").read_text(errors="replace").splitlines()[-15:]
                print("the master wrote no summary; its log ends:\n" + "\n".join(tail), file=sys.stderr)
        finally:
            if master.poll() is None:
                os.killpg(master.pid, signal.SIGKILL)
                master.wait()
            log.close()
            if driver is not None:
                driver.close()
        summary = summary or {"latencyMs": {"n": None}}
        hdr_total = summary["latencyMs"]["n"]
        return {"workers": workers, "names": names, "requestsPerSecondPerWorker": rate,
                "plainLocust": plain, "stageSeconds": seconds,
                "connectAndSpawnSeconds": round(window.load_started - window.started, 1)
                if window.load_started else None,
                "masterCpuPercent": window.cpu_percent,
                "steadySeconds": round(window.closed - window.opened, 1) if window.closed else None,
                "masterLagSecondsPeak": summary.get("masterLagSeconds"),
                "masterCpuPercentEach10s": window.each_10s,
                "masterFinished": summary.get("requests") is not None,
                "requestsSent": driver.sent_requests, "requestsCounted": summary.get("requests"),
                "requestsInHistograms": hdr_total,
                "exact": summary.get("requests") == driver.sent_requests
                         and (plain or hdr_total == driver.sent_requests)}


class SteadyWindow:
    """The master's CPU over the steady part of the stage: from one report round after every worker was
    spawned to a report round before the stage ends."""

    def __init__(self, process: psutil.Process, seconds: float):
        self.process, self.seconds = process, seconds
        self.started = time.monotonic()
        self.load_started = self.opened = self.closed = None
        self.cpu_percent = None
        self.each_10s: list[float] = []
        self.last = (self.started, cpu_seconds(process))

    def tick(self, everyone_spawned: bool) -> None:
        now = time.monotonic()
        if now - self.last[0] >= 10:
            used = cpu_seconds(self.process)
            self.each_10s.append(round(100 * (used - self.last[1]) / (now - self.last[0]), 1))
            self.last = (now, used)
        if self.load_started is None:
            if everyone_spawned:
                self.load_started = now
        elif self.opened is None:
            if now >= self.load_started + REPORT_SECONDS + 1:
                self.opened, self.opened_cpu = now, cpu_seconds(self.process)
        elif self.closed is None and now >= self.load_started + self.seconds - REPORT_SECONDS - 1:
            self.closed = now
            self.cpu_percent = round(100 * (cpu_seconds(self.process) - self.opened_cpu) / (now - self.opened), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--names", type=int, default=50)
    parser.add_argument("--rate", type=float, default=100.0, help="requests a second per worker")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--plain", action="store_true", help="Locust's statistics only")
    parser.add_argument("--smoke", action="store_true", help="20 workers, 5 names, 10 s (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.workers, args.names, args.seconds = 20, 5, 10.0
    r = measure(args.workers, args.names, args.rate, args.seconds, args.plain)
    print(json.dumps(r, indent=2))
    if not args.smoke:
        name = "master_merge_plain" if args.plain else "master_merge"
        print(f"written to {write_result(name, r)}")
    return 0 if r["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
