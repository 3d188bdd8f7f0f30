"""Whether a local target instance is up: its processes alive, and its readiness probe (httpGet or tcpSocket, on
its own loopback port) passing, as a kubelet's would."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Callable

from loadstage.api.types import Probe
from loadstage.engine.errors import ExperimentFailed
from loadstage.local.ports import LOOPBACK
from loadstage.local.processes import Child

PROBE_TIMEOUT_SECONDS = 2
READY_POLL_SECONDS = 0.05   # a refused connection costs little; each poll's wait is set-up time


class LocalRunError(ExperimentFailed):
    """A component failed; the message says which and shows the end of its log."""

    def __init__(self, message: str):
        super().__init__("ComponentFailed", message)


def check_alive(process: Child) -> None:
    if not process.alive():
        raise LocalRunError(f"{process.name} exited with code {process.process.returncode}; "
                            f"end of {process.log_path}:\n{process.tail()}")


def probe_once(probe: Probe, port: int) -> str | None:
    """None if the probe passes on this loopback port (the probe's own port, if it names one), else why not:
    httpGet wants a status from 200 to 399 (a redirect is not followed), tcpSocket an open connection."""
    timeout = probe.timeout_seconds or PROBE_TIMEOUT_SECONDS
    try:
        if probe.http_get is not None:
            connection = http.client.HTTPConnection(LOOPBACK, probe.http_get.port or port, timeout=timeout)
            try:
                connection.request("GET", probe.http_get.path)
                status = connection.getresponse().status
            finally:
                connection.close()
            return None if 200 <= status < 400 else f"GET {probe.http_get.path} answered {status}"
        with socket.create_connection((LOOPBACK, _tcp_port(probe, port)), timeout=timeout):
            return None
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def _describe(probe: Probe, port: int) -> str:
    if probe.http_get is not None:
        return f"http://{LOOPBACK}:{probe.http_get.port or port}{probe.http_get.path}"
    return f"tcp {LOOPBACK}:{_tcp_port(probe, port)}"


def _tcp_port(probe: Probe, port: int) -> int:
    return (probe.tcp_socket.port if probe.tcp_socket else None) or port


def wait_until_ready(processes: list[Child], probe: Probe, port: int, deadline: float,
                      check_cancel: Callable[[], None]) -> None:
    """`processes`: the pod's server, and its proxy (which the probe passes through), if any."""
    start = time.monotonic()
    while time.monotonic() - start < (probe.initial_delay_seconds or 0):   # the probe's initialDelaySeconds
        check_cancel()
        time.sleep(0.2)
    while True:
        check_cancel()
        for process in processes:
            check_alive(process)
        why = probe_once(probe, port)
        if why is None:
            return
        if time.monotonic() > deadline:
            logs = "".join(f"; end of {p.log_path}:\n{p.tail()}" for p in processes)
            raise LocalRunError(f"{processes[0].name} was not ready within spec.target.readyTimeout (readiness "
                                f"probe {_describe(probe, port)}: {why}){logs}")
        time.sleep(READY_POLL_SECONDS)
