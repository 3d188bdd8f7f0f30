"""Server-side delays for tests and benchmarks:
- named delay distributions, seeded per process (RUNNER_DELAY_SEED), so that benchmarks can load the
  app with a known and different latency shape per endpoint;
- a delay on every request (RUNNER_DELAY=slow): one draw of that profile, times RUNNER_DELAY_SCALE (default
  1; 1.1 is 10% more), to make the same app slower or faster between two runs (a regression to catch);
- stalls (RUNNER_STALL="every=20s,for=2s"): in the first 2 s of every 20 s of wall-clock time, every
  request waits until the stall is over, in every process at once, as a stop-the-world pause would."""

from __future__ import annotations

import os
import random
import re
import threading
import time

_local = threading.local()


def _rng() -> random.Random:
    if getattr(_local, "pid", None) != os.getpid():
        seed = int(os.environ.get("RUNNER_DELAY_SEED", "1")) * 1_000_003 + os.getpid()
        _local.rng, _local.pid = random.Random(seed + threading.get_ident()), os.getpid()
    return _local.rng


PROFILES = {
    "fast": lambda r: r.lognormvariate(-4.0, 0.3),         # ~18 ms
    "slow": lambda r: r.lognormvariate(-1.7, 0.35),        # ~180 ms
    "bimodal": lambda r: r.uniform(0.003, 0.008) if r.random() < 0.9 else r.uniform(0.6, 1.2),
}


def draw(profile: str) -> float | None:
    sample = PROFILES.get(profile)
    return None if sample is None else sample(_rng())


def _request_profile() -> str | None:
    name = os.environ.get("RUNNER_DELAY") or None
    if name is not None and name not in PROFILES:
        raise ValueError(f"RUNNER_DELAY must be one of {', '.join(PROFILES)}, got {name!r}")
    return name


REQUEST_PROFILE = _request_profile()


def _request_scale() -> float:
    text = os.environ.get("RUNNER_DELAY_SCALE") or "1"
    try:
        scale = float(text)
    except ValueError:
        scale = -1.0
    if not 0 < scale <= 100:
        raise ValueError(f"RUNNER_DELAY_SCALE must be a number above 0 and at most 100, got {text!r}")
    return scale


REQUEST_SCALE = _request_scale()


def request_delay() -> float:
    """One draw of RUNNER_DELAY's profile, scaled; 0 when it is not set."""
    return 0.0 if REQUEST_PROFILE is None else draw(REQUEST_PROFILE) * REQUEST_SCALE


def wait_request_delay() -> float:
    """Sleeps for one draw of RUNNER_DELAY's profile, if it is set; returns the seconds slept."""
    seconds = request_delay()
    if seconds:
        time.sleep(seconds)
    return seconds


def _stall() -> tuple[float, float] | None:
    spec = os.environ.get("RUNNER_STALL", "")
    match = re.fullmatch(r"every=(\d+(?:\.\d+)?)s,for=(\d+(?:\.\d+)?)s", spec)
    if spec and not match:
        raise ValueError(f"RUNNER_STALL must look like every=20s,for=2s, got {spec!r}")
    return (float(match[1]), float(match[2])) if match else None


STALL = _stall()


def stall_left(now: float | None = None) -> float:
    """The seconds until the current stall is over; 0 when none is on."""
    if STALL is None:
        return 0.0
    every, duration = STALL
    into = (time.time() if now is None else now) % every
    return 0.0 if into >= duration else duration - into


def wait_out_stall(now: float | None = None) -> float:
    """Sleeps until the current stall is over, if one is on; returns the seconds slept."""
    seconds = stall_left(now)
    if seconds:
        time.sleep(seconds)
    return seconds
