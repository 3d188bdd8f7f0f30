"""How long a run has left: the load still to come in the plan, plus each step's set-up (deploying, rolling,
starting Locust, a warm-up, collecting) at the rate the run has measured so far."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from loadstage.api.quantities import format_duration
from loadstage.api.status import Progress
from loadstage.engine.clock import iso
from loadstage.engine.steps import Step


@dataclass(frozen=True)
class Estimate:
    elapsed: float
    remaining: float

    def to_progress(self, at: dt.datetime) -> Progress:
        return {"elapsedSeconds": int(self.elapsed), "remainingSeconds": int(self.remaining),
                "remaining": format_duration(int(self.remaining)),
                "eta": iso(at + dt.timedelta(seconds=self.remaining))}


def estimate(steps: list[Step], position: int, started: dt.datetime, at: dt.datetime,
             into_step: float = 0.0) -> Estimate:
    """At `at`, `into_step` seconds into steps[position] of a run that started at `started`. Every step takes
    its load plus the overhead per step that the finished steps took beyond their load; before any finished,
    none is known, so the first estimate is of the load alone. A request-goal stage counts its time limit."""
    elapsed = max(0.0, (at - started).total_seconds())
    finished_load = sum(s.stage.duration for s in steps[:position])
    overhead = max(0.0, elapsed - into_step - finished_load) / position if position else 0.0
    ahead = steps[position:]
    total = sum(s.stage.duration for s in ahead) + overhead * len(ahead)
    return Estimate(elapsed, max(0.0, total - into_step))
