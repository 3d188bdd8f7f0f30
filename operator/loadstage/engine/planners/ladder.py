"""A ladder: every stage of every repeat of every variant, in spec.order (engine.steps.plan); a stage the status
holds is not run again."""

from __future__ import annotations

from loadstage.api.status import RunStatus
from loadstage.api.types import Experiment, Variant
from loadstage.engine.planners import Planned
from loadstage.engine.steps import Step, plan, stage_step, starts_block


class LadderPlanner:
    def __init__(self, experiment: Experiment, seed: int | None):
        self.experiment = experiment
        self.steps = plan(experiment, seed)

    def next(self, status: RunStatus, prepared: Variant | None, resuming: bool) -> Planned | None:
        records = status.variants
        for index, step in enumerate(self.steps):
            if records[step.variant.index].done(step.repeat, step.number or 0):
                continue
            last = not any(later.variant == step.variant for later in self.steps[index + 1:])
            return Planned(step, starts_block(self.steps, index), (lambda: True) if last else (lambda: False),
                           self.steps, index)
        return None

    def finished(self, status: RunStatus, variant: Variant, repeat: int, number: int) -> Step:
        return stage_step(self.experiment, variant, repeat, number)
