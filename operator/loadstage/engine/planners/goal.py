"""spec.goal's pick: each variant's stage at the goal's load, cheapest first (engine.recommend); the pick so far
is noted in the status before each stage."""

from __future__ import annotations

from dataclasses import replace

from loadstage.api.status import RunStatus
from loadstage.api.types import MAX_VARIANTS, Experiment, Variant
from loadstage.engine import recommend
from loadstage.engine.planners import Planned
from loadstage.engine.steps import Step, goal_step


def note_pick(experiment: Experiment, status: RunStatus, pick: recommend.Pick) -> None:
    """The pick so far into the variants and the status. Beyond MAX_VARIANTS, only the winner and runner-up so
    far keep their stages: every other variant is one line (dropped, or met)."""
    found = pick.recommendation
    finalists = {c.variant for c in (found.winner, found.runner_up) if c is not None}
    goal = experiment.spec.goal
    compact = len(status.variants) > MAX_VARIANTS and goal is not None and goal.load is not None   # a search needs them
    for record in status.variants:
        record.cost = pick.costs.get(record.index, record.cost)
        record.dropped, record.met = pick.dropped.get(record.index), pick.met.get(record.index)
        if compact and record.index not in finalists and (record.dropped or record.met):
            record.stages, record.aggregate = [], None
    status.recommendation = found
    if found.winner is not None:
        status.latest = {**(status.latest or {}), "leader": f"{found.winner.label} ({found.winner.cost.describe()})"}


class GoalPlanner:
    def __init__(self, experiment: Experiment):
        self.experiment = experiment

    def next(self, status: RunStatus, prepared: Variant | None, resuming: bool) -> Planned | None:
        records = status.variants
        pick = recommend.progress(self.experiment, records)
        note_pick(self.experiment, status, pick)
        following = pick.following
        if following is None:
            return None
        variant, record = following.variant, records[following.variant.index]
        step = goal_step(self.experiment, variant, len(record.stages) + 1, following.duration,
                         following.decided_after)
        steps, position = self._ahead(status, step)
        return Planned(step, not record.stages, lambda: self._last(status, variant), steps, position)

    def _last(self, status: RunStatus, variant: Variant) -> bool:
        following = recommend.progress(self.experiment, status.variants).following
        return following is None or following.variant != variant

    def _ahead(self, status: RunStatus, step: Step) -> tuple[list[Step], int]:
        """The time left of a goal's pick, as steps: each stage run so far, this one, and one for every variant
        neither run nor dropped yet (as if every one were run)."""
        variants, records = self.experiment.variants(), status.variants
        done = [goal_step(self.experiment, v, s.stage, s.duration_seconds)
                for v in variants for s in records[v.index].stages]
        ahead = [step] + [replace(step, variant=v) for v in variants
                          if v != step.variant and not records[v.index].stages and records[v.index].dropped is None]
        return done + ahead, len(done)

    def finished(self, status: RunStatus, variant: Variant, repeat: int, number: int) -> Step:
        stage = next(s for s in status.variants[variant.index].stages if s.stage == number)
        return goal_step(self.experiment, variant, number, stage.duration_seconds)
