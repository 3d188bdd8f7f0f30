"""The loopback ports `loadstage run` gives its servers, its Locust master and its samplers.

By default the kernel picks each one (bind to port 0). With LOADSTAGE_LOCAL_PORTS=LOW-HIGH they come from that
range instead, in turn from a random start, each checked free before it is handed out: runs side by side in
disjoint ranges can never pick one another's port, which the kernel's choice cannot promise."""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections.abc import Iterator

from loadstage.engine.errors import ExperimentFailed

PORTS_ENV = "LOADSTAGE_LOCAL_PORTS"
LOOPBACK = "127.0.0.1"
LOWEST, HIGHEST = 1024, 65535


class PortRangeError(ValueError):
    """The range is not LOW-HIGH within LOWEST..HIGHEST; the message says so, without the variable's name."""


def port_range(text: str) -> range:
    low, dash, high = text.strip().partition("-")
    if dash and low.strip().isdecimal() and high.strip().isdecimal() and LOWEST <= int(low) <= int(high) <= HIGHEST:
        return range(int(low), int(high) + 1)
    raise PortRangeError(f"must be LOW-HIGH with {LOWEST} <= LOW <= HIGH <= {HIGHEST}, not {text!r}")


def range_problem() -> str | None:
    """What is wrong with LOADSTAGE_LOCAL_PORTS, if it is set."""
    try:
        port_range(os.environ.get(PORTS_ENV) or f"{LOWEST}-{HIGHEST}")
    except PortRangeError as error:
        return str(error)
    return None


def port_free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


_turns: dict[range, Iterator[int]] = {}


def free_port() -> int:
    text = os.environ.get(PORTS_ENV)
    if not text:
        with socket.socket() as s:
            s.bind((LOOPBACK, 0))
            return s.getsockname()[1]
    ports = port_range(text)
    if ports not in _turns:
        start = random.randrange(len(ports))
        _turns[ports] = itertools.cycle(itertools.chain(ports[start:], ports[:start]))
    for port in itertools.islice(_turns[ports], len(ports)):
        if port_free(port):
            return port
    raise ExperimentFailed("NoFreePort", f"{PORTS_ENV}={text}: every port in it is in use")
