"""Benchmark scenario: each injector (Locust worker) probes one server-side latency profile,
chosen by its worker index, and logs every response time it measures (the ground truth)
to $LOADSTAGE_RAW_LOG_DIR/injector-<index>.txt when it quits."""

import os

from locust import FastHttpUser, constant, events, task
from locust.runners import WorkerRunner

PROFILES = ["fast", "slow", "bimodal"]
_samples: list[float] = []
_reported = 0  # samples already included in a stats report to the master


class Prober(FastHttpUser):
    wait_time = constant(0)

    @task
    def probe(self):
        profile = PROFILES[max(self.environment.runner.worker_index, 0) % len(PROFILES)]
        self.client.get(f"/delay/{profile}", name=f"/delay/{profile}")


@events.request.add_listener
def _record(response_time, **_kwargs):
    _samples.append(response_time)


@events.report_to_master.add_listener
def _mark_reported(**_kwargs):
    global _reported
    _reported = len(_samples)


@events.quitting.add_listener
def _write(environment, **_kwargs):
    """Writes exactly the samples the master received; requests cut off at quit are not in them."""
    directory = os.environ.get("LOADSTAGE_RAW_LOG_DIR")
    if directory and isinstance(environment.runner, WorkerRunner):
        path = os.path.join(directory, f"injector-{environment.runner.worker_index}.txt")
        with open(path, "w") as f:
            f.write("\n".join(repr(s) for s in _samples[:_reported]))
