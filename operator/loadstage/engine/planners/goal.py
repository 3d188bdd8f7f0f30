"""spec.goal's pick: each variant's stage at the goal's load, cheapest first (engine.recommend); the pick so far
is noted in the status before each stage. With spec.autoscale, once the pick is found, the winner's capacity
is searched from the goal's rate up (winner_search): what a pod serves at the objective, which its exported
autoscaler is sized from; the pick reads only the stages at the goal's load."""

from __future__ import annotations

from dataclasses import replace

from loadstage.api.status import RunStatus, StageResult, VariantRecord
from loadstage.api.types import MAX_INJECTORS, MAX_VARIANTS, Experiment, Search, Stage, Variant, load_stage
from loadstage.engine import recommend
from loadstage.engine.planners import Planned, started_anew
from loadstage.engine.search import progress
from loadstage.engine.steps import Step, decided_step, goal_step

WINNER_RESOLUTION = 0.1   # the winner's search ends once its bracket is this narrow


def winner_search(experiment: Experiment) -> Search | None:
    """With spec.autoscale and a goal in req/s: the search of the winner's capacity, from the goal's rate (where
    it passed) to spec.autoscale.maxLoad, or twice the goal's rate if that is more (at most what the injectors
    can offer), each stage ended as the goal's are."""
    spec, goal = experiment.spec, experiment.spec.goal
    if spec.autoscale is None or goal is None or goal.rps is None:
        return None
    ceiling = min(max(spec.autoscale.max_load, 2 * goal.rps), MAX_INJECTORS * spec.injectors.max_rate_per_injector)
    return Search("rps", goal.rps, ceiling, WINNER_RESOLUTION, recommend.stage_seconds_of(experiment)) \
        if ceiling > goal.rps else None


def at_goal_load(experiment: Experiment, records: list[VariantRecord]) -> list[VariantRecord]:
    """The records as the pick reads them: only their stages at the goal's load (not the winner's search)."""
    goal = recommend.goal_of(experiment)
    if goal.rps is None:
        return records
    return [replace(r, stages=[s for s in r.stages if s.arrival_rate == goal.rps]) for r in records]


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
        pick = recommend.progress(self.experiment, at_goal_load(self.experiment, records))
        note_pick(self.experiment, status, pick)
        following = pick.following
        if following is None:
            return self._winner_searched(status, pick, prepared, resuming)
        variant, record = following.variant, records[following.variant.index]
        step = goal_step(self.experiment, variant, len(record.stages) + 1, following.duration,
                         following.decided_after)
        steps, position = self._ahead(status, step)
        fresh = not record.stages or started_anew(variant, prepared, resuming)
        return Planned(step, fresh, lambda: self._last(status, variant), steps, position)

    def _winner_searched(self, status: RunStatus, pick: recommend.Pick, prepared: Variant | None,
                         resuming: bool) -> Planned | None:
        """The winner's next search stage (winner_search), None once it is done or there is none."""
        search, winner = winner_search(self.experiment), pick.recommendation.winner
        if search is None or winner is None:
            return None
        variant, record = self.experiment.variants()[winner.variant], status.variants[winner.variant]
        record.search, following = progress(search, record.stages)
        if following is None:
            return None
        step = decided_step(self.experiment, variant, len(record.stages) + 1,
                            search.stage(following.load, following.duration), following.decided_after)
        done = [self.finished(status, v, 1, s.stage) for v in self.experiment.variants()
                for s in status.variants[v.index].stages]
        ahead = [step] * max(1, search.most_stages() // 2 - len(record.stages))
        return Planned(step, started_anew(variant, prepared, resuming),
                       lambda: progress(search, record.stages)[1] is None, done + ahead, len(done))

    def _last(self, status: RunStatus, variant: Variant) -> bool:
        pick = recommend.progress(self.experiment, at_goal_load(self.experiment, status.variants))
        if pick.following is None and winner_search(self.experiment) is not None and \
                pick.recommendation.variant == variant.index:
            return False    # its search follows
        return pick.following is None or pick.following.variant != variant

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
        return decided_step(self.experiment, variant, number, _stage_of(self.experiment, stage))


def _stage_of(experiment: Experiment, stage: StageResult) -> Stage:
    """The stage a result ran: at the goal's load, or at its own rate in the winner's search."""
    goal = recommend.goal_of(experiment)
    if goal.rps is not None and stage.arrival_rate is not None:
        return load_stage("rps", stage.arrival_rate, stage.duration_seconds)
    return goal.stage(stage.duration_seconds)
