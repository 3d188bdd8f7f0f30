"""goal.maximize: every variant's search to a coarse bracket, then the ones that may still win searched on
(engine.halving); each bracket is kept at the resolution of the round it is in."""

from __future__ import annotations

from loadstage.api.status import RunStatus
from loadstage.api.types import Experiment, Variant
from loadstage.engine import halving
from loadstage.engine.planners import Planned, started_anew
from loadstage.engine.planners.goal import note_pick
from loadstage.engine.planners.search import finished_search_step, searches_ahead
from loadstage.engine.search import progress
from loadstage.engine.steps import Step, search_step


class MaximizePlanner:
    def __init__(self, experiment: Experiment):
        self.experiment = experiment
        assert experiment.spec.search is not None
        self.fine = experiment.spec.search
        self.first_round = halving.coarse(self.fine)

    def next(self, status: RunStatus, prepared: Variant | None, resuming: bool) -> Planned | None:
        records = status.variants
        round_ = halving.halving(self.experiment, records)
        note_pick(self.experiment, status, round_.pick)
        for record in records:   # each bracket at the resolution of the round it is in, or was dropped after
            if record.stages:
                searched = self.first_round if record.dropped or round_.search == self.first_round else self.fine
                record.search = progress(searched, record.stages)[0]
        if round_.variant is None or round_.search is None:
            return None
        variant, record = round_.variant, records[round_.variant.index]
        following = progress(round_.search, record.stages)[1]
        assert following is not None
        step = search_step(self.experiment, variant, len(record.stages) + 1, following.load, following.duration,
                           following.decided_after)
        steps, position = searches_ahead(self.experiment, self.fine, self.experiment.variants(), records, step)
        return Planned(step, started_anew(variant, prepared, resuming),
                       lambda: halving.halving(self.experiment, records).variant != variant, steps, position)

    def finished(self, status: RunStatus, variant: Variant, repeat: int, number: int) -> Step:
        return finished_search_step(self.experiment, status, variant, number)
