"""A capacity search per variant, one variant after the other (in spec.order): each next load from the stages the
variant ran (engine.search)."""

from __future__ import annotations

from dataclasses import replace

from loadstage.api.status import RunStatus, SearchResult, VariantRecord
from loadstage.api.types import Experiment, Search, Variant
from loadstage.engine.planners import Planned
from loadstage.engine.search import NextStage, load_of, progress
from loadstage.engine.steps import Step, search_order, search_step


def searched(experiment: Experiment, record: VariantRecord) -> tuple[SearchResult, NextStage | None]:
    """The variant's search so far (its warm-up counted in its load time), and its next stage."""
    spec = experiment.spec
    assert spec.search is not None
    warmed = spec.warmup.duration if spec.warmup is not None and record.stages else 0.0
    return progress(spec.search, record.stages, warmed)


def searches_ahead(experiment: Experiment, search: Search, order: list[Variant], records: list[VariantRecord],
                   step: Step) -> tuple[list[Step], int]:
    """The steps of the searches for the time left: each stage run so far, then the current variant's stages to its
    typical count (doubling, then bisecting, none undecided), and as many for every variant after it; and where
    `step` is among them."""
    typical = search.most_stages() // 2
    done = [search_step(experiment, v, s.stage, load_of(search, s), s.duration_seconds)
            for v in order for s in records[v.index].stages]
    position = order.index(step.variant)
    ahead = [step] * max(1, typical - len(records[step.variant.index].stages)) + \
        [replace(step, variant=v) for v in order[position + 1:] for _ in range(typical)]
    return done + ahead, len(done)


def finished_search_step(experiment: Experiment, status: RunStatus, variant: Variant, number: int) -> Step:
    search = experiment.spec.search
    assert search is not None
    stage = next(s for s in status.variants[variant.index].stages if s.stage == number)
    return search_step(experiment, variant, number, load_of(search, stage), stage.duration_seconds)


class SearchPlanner:
    def __init__(self, experiment: Experiment, seed: int | None):
        self.experiment = experiment
        assert experiment.spec.search is not None
        self.search = experiment.spec.search
        self.order = search_order(experiment, seed)

    def next(self, status: RunStatus, prepared: Variant | None, resuming: bool) -> Planned | None:
        records = status.variants
        for variant in self.order:
            record = records[variant.index]
            record.search, following = searched(self.experiment, record)
            if following is None:
                continue
            step = search_step(self.experiment, variant, len(record.stages) + 1, following.load, following.duration,
                               following.decided_after)
            steps, position = searches_ahead(self.experiment, self.search, self.order, records, step)
            # a search resumed mid-way goes on on its target, with no warm-up
            def last(record: VariantRecord = record) -> bool:
                return record.search is not None and record.search.done
            return Planned(step, not record.stages, last, steps, position)
        return None

    def finished(self, status: RunStatus, variant: Variant, repeat: int, number: int) -> Step:
        return finished_search_step(self.experiment, status, variant, number)
