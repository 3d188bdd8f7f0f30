"""What a run will do, printed before it starts (and by `loadstage validate`): its variants, its stages or its
search or pick, and about how long its load lasts."""

from __future__ import annotations

from loadstage.api.quantities import format_duration, format_percent
from loadstage.api.types import Experiment
from loadstage.engine import halving, recommend
from loadstage.engine.steps import plan, starts_block


def _search(experiment: Experiment, out) -> None:
    spec, search = experiment.spec, experiment.spec.search
    assert search is not None
    variants = experiment.variants()
    typical, most = search.most_stages() // 2, search.most_stages()
    warmup = spec.warmup.duration if spec.warmup else 0.0
    length = format_duration(search.seconds) + " a stage"
    if spec.stage_end.decided:
        length = f"{format_duration(spec.stage_end.shortest(search.seconds))} to {length}, ending once decided"
    out.write(f"{experiment.name}: {len(variants)} variant(s), a capacity search each: {search.load} from "
              f"{search.from_:,} up to {search.max:,}, to {format_percent(search.resolution)}, {length}; "
              f"about {typical} stages a variant (at most {most}), {'up to' if spec.stage_end.decided else 'about'} "
              f"{format_duration(int(len(variants) * (typical * search.seconds + warmup)))} of load\n")
    if spec.goal is not None:
        out.write(f"  then the most capacity per core: every search first to within "
                  f"{format_percent(halving.COARSE_RESOLUTION)}, the variants that cannot reach the best's "
                  f"dropped, the rest searched on to {format_percent(search.resolution)}\n")
    for v in variants:
        out.write(f"  variant {v.index + 1}: {v.label()}\n")


def _goal(experiment: Experiment, out) -> None:
    spec = experiment.spec
    assert spec.slo is not None and spec.goal is not None and spec.stage_end.max is not None   # a pick's rules
    order, costs, declared = recommend.cheapest_first(experiment.variants())
    warmup = spec.warmup.duration if spec.warmup else 0.0
    out.write(f"{experiment.name}: {len(order)} variant(s), the cheapest that meets {spec.slo.describe()} at "
              f"{spec.goal.describe()}: one stage each at that load, "
              f"{format_duration(spec.stage_end.shortest(spec.stage_end.max))} to "
              f"{format_duration(spec.stage_end.max)}, ending once decided; "
              + ("cheapest first, by their CPU limits or requests" if declared else
                 "every variant, each costed by its measured CPU (not all set a CPU limit or request)")
              + f"; at most {format_duration(int(len(order) * (spec.stage_end.max + warmup)))} of load, "
                f"undecided stages aside\n")
    for v in order:
        cost = costs[v.index]
        out.write(f"  variant {v.index + 1}: {v.label()}" + (f", {cost.describe()}" if declared and cost else "")
                  + "\n")
    if note := recommend.warmup_note(experiment):
        out.write(f"  note: {note}\n")


def print_plan(experiment: Experiment, out) -> None:
    spec = experiment.spec
    if spec.search is not None:
        return _search(experiment, out)
    if spec.goal is not None and spec.goal.load is not None:
        return _goal(experiment, out)
    variants = experiment.variants()
    steps = plan(experiment, spec.seed)
    starts = sum(starts_block(steps, i) for i in range(len(steps)))
    total = sum(s.stage.duration for s in steps) + (spec.warmup.duration * starts if spec.warmup else 0)
    repeats = f" x {spec.repeats} repeats ({spec.order})" if spec.repeats > 1 else ""
    at_most = "at most " if any(s.requests for s in spec.stages) else "about "
    out.write(f"{experiment.name}: {len(variants)} variant(s) x {len(spec.stages)} stage(s){repeats}, "
              f"{at_most}{format_duration(int(total))} of load\n")
    for v in variants:
        out.write(f"  variant {v.index + 1}: {v.label()}\n")
    for i, s in enumerate(spec.stages, 1):
        load = f"{s.arrival_rate:,} arrivals a second (a pool of {spec.injectors.max_users_per_injector} users " \
               f"each)" if s.arrival_rate else f"{spec.injectors.users_for(s)} users"
        length = f"{s.requests:,} requests (at most {format_duration(s.duration)})" if s.requests \
            else format_duration(s.duration)
        out.write(f"  stage {i}: {s.injectors} injector(s), {load}, {length}\n")
