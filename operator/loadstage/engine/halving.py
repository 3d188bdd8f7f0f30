"""goal.maximize: capacityPerCore, by successive halving over the variants' capacity searches. Every variant's
search first runs to a coarse bracket (COARSE_RESOLUTION); a variant whose capacity per core, at its bracket's high
end, is below the best's low end is dropped; the rest are searched on to spec.search.resolution. The winner has
the highest low end. Decided from the stages run so far and nothing else, as engine.recommend is."""

from __future__ import annotations

from dataclasses import dataclass, replace

from loadstage.api.status import (
    Candidate,
    Cost,
    Dropped,
    LimitedBy,
    Margin,
    Recommendation,
    SearchResult,
    StageResult,
    VariantRecord,
    last_injector_bound,
)
from loadstage.api.types import Experiment, Search, Variant
from loadstage.engine import search
from loadstage.engine.recommend import Pick, declared_cost, goal_of, measured_cost, search_of, slo_of, varying_labels

COARSE_RESOLUTION = 0.5   # goal.maximize's first round: each variant's bracket to within 50% of its low end


def coarse(fine: Search) -> Search:
    """The first round's search: unconfirmed, unless it is the last round too."""
    return replace(fine, resolution=max(fine.resolution, COARSE_RESOLUTION),
                   confirm=fine.resolution >= COARSE_RESOLUTION)


@dataclass(frozen=True)
class Halving:
    """goal.maximize so far: the pick, and the variant whose search runs next with which resolution (None once
    decided)."""
    pick: Pick
    variant: Variant | None
    search: Search | None


def per_core(result: SearchResult, cost: Cost) -> tuple[float, float | None] | None:
    """The search's bracket in req/s a core of its cost: [pass, fail]; the high end None where none failed."""
    if cost.cores and result.near is not None:   # the knee found at the objective: one point
        at = round((result.near_rps or 0.0) / cost.cores, 1)
        return at, at
    if not cost.cores or result.passed is None:
        return None
    low = (result.passed_rps or 0.0) / cost.cores
    high = None if result.failed is None else max(low, (result.failed_rps or 0.0) / cost.cores)
    return round(low, 1), None if high is None else round(high, 1)


def _first_round(rough: Search, stages: list[StageResult]) -> list[StageResult] | None:
    """The stages of the variant's coarse search, once it has ended (None before)."""
    ordered = sorted(stages, key=lambda s: s.stage)
    for count in range(1, len(ordered) + 1):
        if search.progress(rough, ordered[:count])[1] is None:
            return ordered[:count]
    return None


def halving(experiment: Experiment, records: list[VariantRecord]) -> Halving:
    """Successive halving over the variants' searches: a coarse round for every variant; the variants whose
    capacity per core is, at its bracket's high end, below the best's low end are dropped; the rest searched on
    to spec.search.resolution. The winner has the highest low end."""
    variants = experiment.variants()
    labels = varying_labels(variants)
    fine = search_of(experiment)
    first_round = coarse(fine)
    dropped = {r.index: r.dropped for r in records if r.dropped is not None}
    for variant in variants:
        if variant.index not in dropped and _first_round(first_round, records[variant.index].stages) is None:
            return Halving(_maximized(experiment, records, labels, dropped, first_round, done=False), variant,
                           first_round)
    bounds: dict[int, tuple[int, tuple[float, float | None]]] = {}   # by index: (its stages, its bounds)
    limits: dict[int, LimitedBy | None] = {}   # by index: what limited its coarse search
    for variant in variants:
        if variant.index in dropped:
            continue
        first = _first_round(first_round, records[variant.index].stages) or []
        result = search.progress(first_round, first)[0]
        limits[variant.index] = result.limited_by
        found = per_core(result, _cost(variant, first, result, first_round))
        if found is None:
            bound = last_injector_bound(first)
            why = bound.injectors_ran_out() if result.reason == "InjectorBound" and bound else \
                f"it failed the objective already at search.from ({fine.from_:,} {fine.load})"
            dropped[variant.index] = Dropped(len(first), why, result.limited_by)
        else:
            bounds[variant.index] = len(first), found
    best = max((low for _, (low, _) in bounds.values()), default=0.0)
    for index, (ran, (_, high)) in bounds.items():
        if high is not None and high < best:
            dropped[index] = Dropped(ran, f"at most {high:,.1f} req/s per core, under the best's {best:,.1f} at "
                                          f"least, after its coarse search", limits[index])
    for variant in variants:
        if variant.index not in dropped and search.progress(fine, records[variant.index].stages)[1] is not None:
            return Halving(_maximized(experiment, records, labels, dropped, fine, done=False), variant, fine)
    return Halving(_maximized(experiment, records, labels, dropped, fine, done=True), None, None)


def _passes(searched: Search, stages: list[StageResult], result: SearchResult) -> list[StageResult]:
    """The stages at the search's highest pass, or at its load at the objective."""
    at = result.passed if result.near is None else result.near
    return [s for s in stages if search.load_of(searched, s) == at]


def _cost(variant: Variant, stages: list[StageResult], result: SearchResult, searched: Search) -> Cost:
    """Declared, or measured at the search's highest pass."""
    declared = declared_cost(variant)
    if declared is not None:
        return declared
    passed = _passes(searched, stages, result)
    return measured_cost(passed[-1]) if passed else Cost(None, "measured")


def _maximized(experiment: Experiment, records: list[VariantRecord], labels: dict[int, str],
               dropped: dict[int, Dropped], searched: Search, done: bool) -> Pick:
    variants = experiment.variants()
    met: dict[int, Candidate] = {}
    costs: dict[int, Cost] = {}
    bracketed: list[Candidate] = []
    for variant in variants:
        stages = records[variant.index].stages
        if not stages:
            continue
        result = search.progress(coarse(searched) if variant.index in dropped else searched, stages)[0]
        cost = costs[variant.index] = _cost(variant, stages, result, searched)
        bounds = per_core(result, cost)
        if bounds is None:
            continue
        passed = _passes(searched, stages, result)
        objectives = passed[-1].verdict.objectives if passed and passed[-1].verdict else ()
        bracketed.append(Candidate(variant.index, variant.settings(), labels[variant.index], cost, 0.0,
                                   tuple(objectives), bounds, limited_by=result.limited_by))
        if variant.index not in dropped:
            met[variant.index] = bracketed[-1]
    best = sorted(met.values(), key=lambda c: (-c.bounds[0], c.variant))
    winner, runner_up = ([*best, None, None])[:2]
    reason = "Found" if done and winner else "NonePassed" if done else "Searching"
    order = tuple(v.index for v in variants if records[v.index].stages)
    front = tuple(c for c in bracketed if not any(_dominates(o, c) for o in bracketed))
    sentence = _maximized_sentence(experiment, winner, runner_up, reason)
    return Pick(Recommendation(goal_of(experiment).describe(), winner, runner_up, order, reason, sentence,
                               tuple(sorted(front, key=lambda c: (c.cost.cores or 0, c.variant))),
                               per_core_margin(winner, runner_up)),
                None, dropped, met, costs)


def _dominates(one: Candidate, other: Candidate) -> bool:
    """No dearer, and serves no less at its bracket's low end (to the per-core figures' rounding); better in
    one of the two."""
    cost, served = (one.cost.cores or 0.0), one.capacity_rps
    its_cost, its_served = (other.cost.cores or 0.0), other.capacity_rps
    same = abs(served - its_served) <= 0.001 * max(served, its_served, 1.0)
    return cost <= its_cost and (same or served > its_served) and (cost < its_cost or not same)


def _maximized_sentence(experiment: Experiment, winner: Candidate | None, runner_up: Candidate | None,
                        reason: str) -> str:
    """'threads=4 serves the most per core under p99 <= 300ms: 840-880 req/s per core on 1 core; the next,
    threads=2, 610-650'."""
    def span(c: Candidate) -> str:
        low, high = c.bounds
        return f">= {low:,.0f}" if high is None else f"{low:,.0f}" if round(high) == round(low) else \
            f"{low:,.0f}-{high:,.0f}"
    slo = slo_of(experiment).describe()
    if winner is None:
        return "searching" if reason == "Searching" else f"no variant met {slo} at search.from"
    said = f"{winner.label} serves the most per core under {slo}: {span(winner)} req/s per core on " \
           f"{winner.cost.describe()}"
    if reason == "Searching":
        return f"so far {said}; the searches are not finished"
    return said + (f"; the next, {runner_up.label}, {span(runner_up)}" if runner_up else "; every other was dropped")


def per_core_margin(winner: Candidate | None, runner_up: Candidate | None) -> Margin | None:
    """The runner-up's capacity per core against the winner's, by their brackets' low ends; its bounds are the
    brackets' extremes (r_low / w_high, r_high / w_low)."""
    if winner is None or runner_up is None or not winner.bounds[0]:
        return None
    (ours_low, ours_high), (their_low, their_high) = winner.bounds, runner_up.bounds
    return Margin("perCore", round(their_low / ours_low - 1, 4),
                  None if not ours_high else round(their_low / ours_high - 1, 4),
                  None if their_high is None else round(their_high / ours_low - 1, 4), None)
