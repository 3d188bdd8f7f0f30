"""The order of a run, as Steps: every (variant, repeat, stage) once, in spec.order, and a warm-up wherever a
variant's target is started for a block of its steps. The engine walks the plan; a backend that prepares
the next stage early reads `following`."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from loadstage.api.types import Experiment, Stage, Variant, resolve_stage
from loadstage.results.live_series import stage_labels


@dataclass(frozen=True)
class Step:
    variant: Variant
    variants: int
    stage: Stage
    number: int | None      # 1-based stage number; None for the warm-up
    stages: int
    attempt: int = 1        # a stage disrupted and run again is the same stage, attempt 2, 3...
    repeat: int = 1
    repeats: int = 1
    precedes: int = 1       # a warm-up's: the number of the stage it runs before
    following: Step | None = field(default=None, compare=False, repr=False)   # the next step on the same target
    searching: bool = False  # a capacity search's stage: `stages` is 0 (not known), and more may follow on its target

    @property
    def stage_number(self) -> int:
        """The number of a stage that is not a warm-up."""
        assert self.number is not None, "a warm-up has no stage number"
        return self.number

    @property
    def warmup(self) -> bool:
        return self.number is None

    @property
    def run_id(self) -> str:
        """The step's short name in its processes and objects: v1-s2, v1-r2-s2 in a second repeat, v1-warmup
        (v1-r2-w3 before stage 3 of repeat 2), and v1-s2-a2 for a retry. Kubernetes names end in it, so it
        stays as short as NAME_MAX allows for."""
        where = f"v{self.variant.index + 1}" + (f"-r{self.repeat}" if self.repeat > 1 else "")
        if self.warmup and self.repeat == 1 and self.precedes == 1:
            where += "-warmup"
        else:
            where += f"-w{self.precedes}" if self.warmup else f"-s{self.number}"
        return where + (f"-a{self.attempt}" if self.attempt > 1 else "")

    @property
    def key(self) -> tuple[int, int, int | None]:
        return self.variant.index, self.repeat, self.number

    def again(self) -> Step:
        return replace(self, attempt=self.attempt + 1)

    @property
    def last_on_target(self) -> bool:
        """Whether the target can stop once this step's load ends."""
        return self.following is None and not self.searching

    def label(self) -> str:
        which = "warm-up" if self.warmup else f"stage {self.number}" + ("" if self.searching else f"/{self.stages}")
        which += f", repeat {self.repeat}/{self.repeats}" if self.repeats > 1 else ""
        which += f", attempt {self.attempt}" if self.attempt > 1 else ""
        return f"variant {self.variant.index + 1}/{self.variants} ({self.variant.label()}), {which}"


def series_labels(experiment: Experiment, step: Step) -> dict[str, str]:
    """The labels of a step's live series."""
    return stage_labels(experiment=experiment.name, namespace=experiment.metadata.namespace or "",
                        variant=step.variant.index + 1, settings=step.variant.label(), repeat=step.repeat,
                        stage=step.number)


def stage_step(experiment: Experiment, variant: Variant, repeat: int, number: int) -> Step:
    stages = experiment.spec.stages
    return Step(variant, len(experiment.variants()), stages[number - 1], number, len(stages),
                repeat=repeat, repeats=experiment.spec.repeats)


def search_step(experiment: Experiment, variant: Variant, number: int, load: int, duration: float,
                decided_after: float | None = None) -> Step:
    """Stage `number` of the variant's capacity search, at `load` (users, injectors or rps) for `duration`."""
    search = experiment.spec.search
    assert search is not None
    stage = search.stage(load, duration)
    return decided_step(experiment, variant, number, stage, decided_after)


def goal_step(experiment: Experiment, variant: Variant, number: int, duration: float,
              decided_after: float | None = None) -> Step:
    """Stage `number` of the variant at spec.goal's load, for `duration`."""
    goal = experiment.spec.goal
    assert goal is not None
    stage = goal.stage(duration)
    return decided_step(experiment, variant, number, stage, decided_after)


def decided_step(experiment: Experiment, variant: Variant, number: int, stage: Stage,
                 decided_after: float | None = None) -> Step:
    """A stage chosen from the ones before it: how many follow is not known."""
    stage = replace(stage, decided_after=decided_after) if decided_after is not None else stage
    return Step(variant, len(experiment.variants()), resolve_stage(stage, experiment.spec.injectors), number, 0,
                searching=True)


def search_order(experiment: Experiment, seed: int | None = None) -> list[Variant]:
    """The variants in the order their searches run: as listed, or shuffled by the seed (order Random)."""
    variants = experiment.variants()
    if experiment.spec.order == "Random":
        random.Random(seed).shuffle(variants)
    return variants


def warmup_before(experiment: Experiment, step: Step) -> Step | None:
    """The warm-up to run before `step` on a freshly started target, if the spec has one."""
    warmup = experiment.spec.warmup
    if warmup is None:
        return None
    return replace(step, stage=warmup, number=None, precedes=step.number or 1, following=step)


def plan(experiment: Experiment, seed: int | None = None) -> list[Step]:
    """Every stage of every repeat of every variant, in spec.order. Random shuffles whole ladders (a variant's
    repeat), so that each still climbs; `seed` makes its order reproducible."""
    spec = experiment.spec
    variants, repeats, numbers = experiment.variants(), range(1, spec.repeats + 1), range(1, len(spec.stages) + 1)
    if spec.order == "Interleaved":
        order = [(v, r, n) for r in repeats for n in numbers for v in variants]
    else:
        ladders = [(v, r) for v in variants for r in repeats]
        if spec.order == "Random":
            random.Random(seed).shuffle(ladders)
        order = [(v, r, n) for v, r in ladders for n in numbers]
    stages = spec.stages
    steps = [Step(v, len(variants), stages[n - 1], n, len(stages), repeat=r, repeats=spec.repeats) for v, r, n in order]
    for i in reversed(range(len(steps) - 1)):   # from the end, so that each `following` is final
        if steps[i + 1].variant == steps[i].variant:
            steps[i] = replace(steps[i], following=steps[i + 1])
    return steps


def starts_block(steps: list[Step], index: int) -> bool:
    """Whether steps[index] runs on a target started for it: the first step, or after another variant's."""
    return index == 0 or steps[index - 1].variant != steps[index].variant
