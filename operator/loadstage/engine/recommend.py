"""spec.goal: which variant runs next, and which one is recommended, decided from the stages run so far and
nothing else, so that an operator restarted mid-way goes on where it was. With maximize: capacityPerCore, see
engine.halving; with a load:

Each variant runs one stage at the goal's load, ended once decided (spec.stageEnd). Its outcome is the capacity
search's (engine.search.outcome): undecided, it runs once more, twice as long; undecided again, or failed, or
injector-bound, the variant is dropped. Where every variant declares its CPU (a limit, or a request), the
variants run cheapest first (ties in matrix order): once one passes and a second one does, every dearer variant
left is not run. Otherwise every variant runs, and its cost is the CPU its target measured (measured_cost); costs within
MEASURED_TIE of each other are a tie. The winner is the cheapest pass, a tie going to the most headroom, except
among variants whose figures lie within slo.tolerance of each other (equivalent: the difference is noise), where
goal.prefer chooses; the runner-up is the next by the same order. Before Found, the winner (and a runner-up
equivalent to it) runs a second, fresh stage, as the search confirms: failing it, it is dropped; passing it, it
is ranked by the worse of its two stages (its first look's luck is no headroom), and a new winner is confirmed.
It is over 300 lines: the pick, its confirmation, its costs and its sentence read together."""

from __future__ import annotations

from dataclasses import dataclass

from loadstage.api.quantities import cpu_cores, memory_bytes
from loadstage.api.status import Candidate, Cost, Dropped, Margin, Objective, Recommendation, StageResult, VariantRecord
from loadstage.api.types import DEFAULT_PREFER, PERCENTILES, Experiment, Goal, Search, Slo, Variant
from loadstage.engine.ranking import alike, headroom, ranked
from loadstage.engine.search import outcome
from loadstage.results.differences import difference
from loadstage.results.saturation import limited_by

MEASURED_TIE = 0.10    # measured costs this close (relative) are the same cost: headroom decides


@dataclass(frozen=True)
class NextGoalStage:
    variant: Variant
    duration: float
    decided_after: float | None = None   # a rerun: not decided on fewer seconds than the undecided stage had


@dataclass(frozen=True)
class Pick:
    """The goal's pick so far: its recommendation, its next stage (None once decided), and by variant index, the
    variants dropped, those that met the objective, and every cost known."""
    recommendation: Recommendation
    following: NextGoalStage | None
    dropped: dict[int, Dropped]
    met: dict[int, Candidate]
    costs: dict[int, Cost]


def goal_of(experiment: Experiment) -> Goal:
    assert experiment.spec.goal is not None, "a pick has a goal"
    return experiment.spec.goal


def slo_of(experiment: Experiment) -> Slo:
    assert experiment.spec.slo is not None, "a pick has an objective"
    return experiment.spec.slo


def search_of(experiment: Experiment) -> Search:
    assert experiment.spec.search is not None, "goal.maximize searches"
    return experiment.spec.search


def stage_seconds_of(experiment: Experiment) -> float:
    seconds = experiment.spec.stage_end.max
    assert seconds is not None, "a pick's stages end once decided, at most at stageEnd.max"
    return seconds


def declared_cost(variant: Variant) -> Cost | None:
    """The variant's pods x each one's CPU limit, or request; None when it sets neither."""
    limits, requests = variant.resources.limits, variant.resources.requests
    cpu = limits.cpu or requests.cpu
    if cpu is None:
        return None
    memory = limits.memory or requests.memory
    return Cost(round(variant.pods * cpu_cores(cpu), 3), "limit" if limits.cpu else "request",
                variant.pods * memory_bytes(memory) if memory else None)


def cheapest_first(variants: list[Variant]) -> tuple[list[Variant], dict[int, Cost | None], bool]:
    """The order a load goal runs the variants in: by declared cost (ties in matrix order) where every variant
    declares one, else as listed; with each one's declared cost, and whether every one has it."""
    declared = {v.index: declared_cost(v) for v in variants}
    cores = {i: c.cores for i, c in declared.items() if c is not None and c.cores is not None}
    by_cost = len(cores) == len(declared)
    ordered = sorted(variants, key=lambda v: (cores[v.index], v.index)) if by_cost else list(variants)
    return ordered, declared, by_cost


WARMUP_ADVISED_SECONDS = 10


def warmup_note(experiment: Experiment) -> str | None:
    """With a load goal whose warm-up is none, or lighter than the goal's load: why that costs (a one-off start-up
    transient lands in each variant's stage instead, measured in docs/experiment.md) and what to do."""
    spec = experiment.spec
    goal, warmup = spec.goal, spec.warmup
    if goal is None or goal.load is None:
        return None
    if warmup is not None:
        at = {"rps": warmup.arrival_rate, "injectors": warmup.injectors,
              "users": None if warmup.arrival_rate else spec.injectors.users_for(warmup)}[goal.load]
        if at is not None and at >= goal.amount and warmup.duration >= WARMUP_ADVISED_SECONDS:
            return None
    said = "there is no warm-up" if warmup is None else "the warm-up is lighter or shorter than the goal's load"
    return (f"{said}: a variant's start-up transient (a first burst of work, slow under a CPU limit) then falls in "
            f"its stage, which may be undecided and run again; a warm-up at {goal.describe()} for "
            f"{WARMUP_ADVISED_SECONDS} s or more avoids it")


def measured_cost(stage: StageResult) -> Cost:
    """The target's mean CPU over the stage's settled seconds; its peak where no reading lay within them."""
    cores = stage.target.cpu_cores
    return Cost(None if cores is None else round(cores, 3), "measured", stage.target.peak_memory_bytes)


def varying_labels(variants: list[Variant]) -> dict[int, str]:
    """Each variant by the settings that differ between variants: 'workers=2 threads=4 cpu=500m'."""
    settings = {v.index: v.settings() for v in variants}
    keys = [k for k in settings[variants[0].index] if len({repr(s.get(k)) for s in settings.values()}) > 1]
    return {i: " ".join(f"{k}={value}" for k in keys if (value := s.get(k)) is not None) or "the only settings"
            for i, s in settings.items()}


def _failure(stage: StageResult, found: str) -> str:
    if found == "InjectorBound":
        return f"at the goal's load {stage.injectors_ran_out()}: the stage measured them, not its target"
    if found == "Undecided":
        return "undecided twice at the goal's load"
    broken = [o for o in stage.verdict.objectives if o.holds is False] if stage.verdict else []
    said = ", ".join(_beyond(o) for o in broken if o.value is not None)
    unsteady = stage.target.unsteady()
    how = "broke it by far" if stage.ended_by == "Breached" else "failed"
    return f"{how} at the goal's load" + (f": {said}" if said else "") + (f" (target: {unsteady})" if unsteady else "")


def _beyond(o: Objective) -> str:
    """'p99 270 ms > 30 ms', 'errorRate 5% > 1%', 'minRps 40 < 50'."""
    if o.name == "minRps":
        return f"minRps {o.value:.4g} < {o.limit:g}"
    if o.name == "errorRate":
        return f"errorRate {o.value:.2%} > {o.limit:.2%}"
    return f"{o.name} {o.value:.4g} ms > {o.limit:g} ms"


def _decided(stages: list[StageResult]) -> tuple[list[tuple[StageResult, str]], bool]:
    """A variant's decided stages with their outcomes (an undecided stage's rerun counts, undecided or not), and
    whether its last stage was undecided once (it runs again, twice as long)."""
    decided: list[tuple[StageResult, str]] = []
    again = False
    for stage in sorted(stages, key=lambda s: s.stage):
        found = outcome(stage)
        if found == "Undecided" and not again:
            again = True
            continue
        decided.append((stage, found))
        again = False
    return decided, again


MEETS = ("Pass", "Near")   # Near: at the objective, within slo.tolerance
GOAL_LOAD = "the goal's load"


def progress(experiment: Experiment, records: list[VariantRecord]) -> Pick:
    """The pick so far, from the records: their stages, or where those were left out of the status, what was
    kept of them (dropped, met)."""
    goal, duration, slo = goal_of(experiment), stage_seconds_of(experiment), slo_of(experiment)
    variants, declared, by_cost = cheapest_first(experiment.variants())
    by_index = {v.index: v for v in variants}
    labels = varying_labels(variants)
    passes: list[Candidate] = []
    dropped: dict[int, Dropped] = {}
    costs: dict[int, Cost] = {i: c for i, c in declared.items() if c is not None}
    ran: list[int] = []
    following = None
    for variant in variants:
        i, record = variant.index, records[variant.index]
        if record.dropped is not None and record.dropped.after:   # final, its stages in the status or not
            dropped[i] = record.dropped
            ran.append(i)
            continue
        if record.met is not None and not record.stages:
            passes.append(record.met)
            ran.append(i)
            continue
        own = declared[i]
        if by_cost and len(passes) >= 2 and own is not None and (own.cores or 0.0) > (passes[0].cost.cores or 0.0):
            first, second = ranked(passes, 0.0)[:2]
            dropped[i] = Dropped(0, f"it costs {own.describe()}, more than {first.label} and {second.label}, "
                                    f"which met the objective")
            continue
        decided, again = _decided(record.stages)
        if not decided:
            following = NextGoalStage(variant, 2 * duration, duration) if again else NextGoalStage(variant, duration)
            break
        ran.append(i)
        first_stage, found = decided[0]
        cost = costs.setdefault(i, measured_cost(first_stage))
        if found not in MEETS:
            dropped[i] = Dropped(len(record.stages), _failure(first_stage, found),
                                 limited_by(first_stage, None, GOAL_LOAD))
        elif len(decided) > 1 and decided[1][1] not in MEETS:
            stage, found = decided[1]
            dropped[i] = Dropped(len(record.stages), "met the objective at its first stage, then "
                                                     f"{_failure(stage, found)} at its second",
                                 limited_by(stage, None, GOAL_LOAD))
        else:
            worst = min((s for s, _ in decided[:2]), key=headroom)   # its confirmation's, if that was slower
            passes.append(Candidate(i, variant.settings(), labels[i], cost, headroom(worst),
                                    worst.verdict.objectives if worst.verdict else (), confirmed=len(decided) > 1,
                                    limited_by=limited_by(first_stage, None, GOAL_LOAD)))
    prefer = tuple(goal.prefer or DEFAULT_PREFER)
    best = ranked(passes, 0.0 if by_cost else MEASURED_TIE, slo.tolerance, prefer)
    if following is None:
        following = _confirmed(best, records, by_index, duration, slo.tolerance)
    winner, runner_up = ([*best, None, None])[:2]
    reason = "Searching" if following else "Found" if winner else "NonePassed"
    left = sum(1 for v in variants if v.index not in ran and v.index not in dropped)
    equivalents = [c for c in best[1:] if winner is not None and alike(winner, c, slo.tolerance)]
    recommendation = Recommendation(goal.describe(), winner, runner_up, tuple(ran), reason,
                                    _sentence(experiment, winner, runner_up, reason, len(ran), left, equivalents),
                                    margin=latency_margin(records, winner, runner_up),
                                    equivalent=tuple(c.variant for c in equivalents))
    return Pick(recommendation, following, dropped, {c.variant: c for c in best}, costs)


def _confirmed(best: list[Candidate], records: list[VariantRecord], by_index: dict[int, Variant], duration: float,
               tolerance: float) -> NextGoalStage | None:
    """The next confirming stage: of the winner, then of a runner-up equivalent to it; None once both met the
    objective at a second, fresh stage (a variant that failed it was dropped before the ranking). As the search's
    (engine.search): twice as long, and not decided on fewer seconds than a stage has, for a pass at a first look
    is what it is there to doubt."""
    for position, candidate in enumerate(best[:2]):
        if position == 1 and not alike(best[0], candidate, tolerance):
            break
        if not candidate.confirmed and records[candidate.variant].stages:   # else kept from before they were left out
            return NextGoalStage(by_index[candidate.variant], 2 * duration, duration)
    return None


def latency_margin(records: list[VariantRecord], winner: Candidate | None,
                   runner_up: Candidate | None) -> Margin | None:
    """The runner-up's latency against the winner's, in the figure the winner is nearest its objective in, from
    each one's passing stage and its interval; None where a stage was left out of the status."""
    if winner is None or runner_up is None:
        return None
    latencies = [o for o in winner.objectives if o.name in PERCENTILES and o.value is not None and o.limit > 0]
    stages = [max(records[c.variant].stages, key=lambda s: s.stage, default=None) for c in (winner, runner_up)]
    if not latencies or None in stages:
        return None
    figure = max(latencies, key=lambda o: (o.value or 0.0) / o.limit).name
    ours, theirs = stages
    assert ours is not None and theirs is not None
    found = difference(figure, ours.latency.percentile(figure), ours.intervals,
                       theirs.latency.percentile(figure), theirs.intervals)
    return None if found is None else Margin(figure, round(found.relative, 4), round(found.low, 4),
                                             round(found.high, 4), found.confidence)


def _meets(candidate: Candidate, slo: Slo) -> str:
    """'meets', or where an objective was decided at its limit (Near), 'is at (within 10%)'."""
    return f"is at (within {slo.tolerance:.0%})" if any(o.near for o in candidate.objectives) else "meets"


def _sentence(experiment: Experiment, winner: Candidate | None, runner_up: Candidate | None, reason: str,
              ran: int, left: int, equivalents: list[Candidate]) -> str:
    """'workers=3 threads=4 cpu=1 meets p99 <= 300ms at 2,000 req/s with 6 cores; the next cheapest, workers=2
    threads=8 cpu=1, needs 8 cores'; while variants are left to run (or the run stopped), 'so far ...'."""
    slo, goal = slo_of(experiment).describe(), goal_of(experiment).describe()
    if reason == "Searching":
        so_far = "searching" if winner is None else \
            f"so far {winner.label} {_meets(winner, slo_of(experiment))} {slo} at {goal} with " \
            f"{winner.cost.describe()}"
        return f"{so_far}; {left} variant(s) not yet run" if left or winner is None else \
            f"{so_far}; confirming it at a second stage"
    if winner is None:
        return f"no variant meets {slo} at {goal}: each of the {ran} run failed it or was dropped"
    said = f"{winner.label} {_meets(winner, slo_of(experiment))} {slo} at {goal} with {winner.cost.describe()}"
    if equivalents:
        tolerance, prefer = slo_of(experiment).tolerance, goal_of(experiment).prefer or DEFAULT_PREFER
        verb = "is" if len(equivalents) == 1 else "are"
        return said + f"; {', '.join(c.label for c in equivalents)} {verb} equivalent (figures within " \
                      f"{tolerance:.0%}, at the same cost): goal.prefer chose ({', '.join(prefer)})"
    if runner_up is None:
        return said + "; no other variant met it"
    if runner_up.cost.cores == winner.cost.cores and runner_up.headroom == winner.headroom:
        return said + f"; {runner_up.label} costs as much, with as much headroom (the matrix's order decided)"
    if runner_up.cost.cores == winner.cost.cores:
        shown = ".0%" if f"{runner_up.headroom:.0%}" != f"{winner.headroom:.0%}" else ".2%"
        return said + f"; {runner_up.label} costs as much, with less headroom ({runner_up.headroom:{shown}} " \
                      f"against {winner.headroom:{shown}})"
    return said + f"; the next cheapest, {runner_up.label}, needs {runner_up.cost.describe()}"
