"""The order of a run: every variant's warm-up and then its ladder of stages, as Steps. The engine walks
it; a backend that prepares the next stage early asks it what comes next."""

from __future__ import annotations

from dataclasses import dataclass, replace

from loadstage.api.types import Experiment, Stage, Variant


@dataclass(frozen=True)
class Step:
    variant: Variant
    variants: int
    stage: Stage
    number: int | None      # 1-based stage number; None for the warm-up
    stages: int
    attempt: int = 1        # a stage disrupted and run again is the same stage, attempt 2, 3...

    @property
    def warmup(self) -> bool:
        return self.number is None

    @property
    def run_id(self) -> str:
        """The step's short name in its processes and objects: v1-warmup, v1-s2, and v1-s2-a2 for its retry."""
        return (f"v{self.variant.index + 1}-" + ("warmup" if self.warmup else f"s{self.number}")
                + (f"-a{self.attempt}" if self.attempt > 1 else ""))

    def again(self) -> Step:
        return replace(self, attempt=self.attempt + 1)

    def label(self) -> str:
        which = "warm-up" if self.warmup else f"stage {self.number}/{self.stages}"
        which += f", attempt {self.attempt}" if self.attempt > 1 else ""
        return f"variant {self.variant.index + 1}/{self.variants} ({self.variant.label()}), {which}"


def stage_step(experiment: Experiment, variant: Variant, number: int) -> Step:
    """Stage `number` (1-based) of the variant's ladder."""
    stages = experiment.spec.stages
    return Step(variant, len(experiment.variants()), stages[number - 1], number, len(stages))


def warmup_step(experiment: Experiment, variant: Variant) -> Step | None:
    spec = experiment.spec
    if spec.warmup is None:
        return None
    return Step(variant, len(experiment.variants()), spec.warmup, None, len(spec.stages))


def next_step(experiment: Experiment, step: Step) -> Step | None:
    """The step after `step` in the same variant, or None after its last stage."""
    number = 1 if step.warmup else step.number + 1
    return stage_step(experiment, step.variant, number) if number <= step.stages else None
