"""What a run does next, one planner per kind of run: a ladder (its plan of steps), a capacity search per
variant, a goal's pick, and goal.maximize's successive halving over searches. Each decides its next stage from
the status alone, so a run resumed after a restart repeats none; the stage engine runs what they plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from loadstage.api.status import RunStatus
from loadstage.api.types import Experiment, Variant
from loadstage.engine.steps import Step


@dataclass(frozen=True)
class Planned:
    """The next stage to run: its step; whether its target is fresh (a warm-up may go first); whether, once it has
    run, it was its variant's last (its headline row is then written); and, for the time left, the run's steps
    as known now and this one's place among them."""
    step: Step
    fresh: bool
    last: Callable[[], bool]
    steps: list[Step]
    position: int


def started_anew(variant: Variant, prepared: Variant | None, resuming: bool) -> bool:
    """Whether `variant` runs on a target started anew, so that a warm-up goes first: another variant's target was
    the one deployed (a variant that ran before had its target torn down when the run moved on). A run resumed
    goes on on the target it finds."""
    return prepared != variant and not resuming


class Planner(Protocol):
    def next(self, status: RunStatus, prepared: Variant | None, resuming: bool) -> Planned | None:
        """The next stage, None once the run is done; it may note in `status` what it decided (a pick)."""

    def finished(self, status: RunStatus, variant: Variant, repeat: int, number: int) -> Step:
        """The step of a stage the status holds, to read its artifact back."""


def planner_for(experiment: Experiment, seed: int | None) -> Planner:
    from loadstage.engine.planners.goal import GoalPlanner
    from loadstage.engine.planners.ladder import LadderPlanner
    from loadstage.engine.planners.maximize import MaximizePlanner
    from loadstage.engine.planners.search import SearchPlanner
    spec = experiment.spec
    if spec.goal and spec.goal.maximize:
        return MaximizePlanner(experiment)
    if spec.search:
        return SearchPlanner(experiment, seed)
    if spec.goal:
        return GoalPlanner(experiment)
    return LadderPlanner(experiment, seed)
