"""Small helpers shared by the tests and the benchmarks (no pytest, no Locust)."""

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def wait_for(check, timeout=20.0, interval=0.1, explain=None):
    """check() until truthy; on timeout the error carries explain(), what the test saw at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    seen = f": {explain()}" if explain else ""
    raise AssertionError(f"condition not met within {timeout}s{seen}")
