"""Named server-side delay distributions, seeded per process (RUNNER_DELAY_SEED), so that
benchmarks can load the app with a known and different latency shape per endpoint."""

from __future__ import annotations

import os
import random
import threading

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
