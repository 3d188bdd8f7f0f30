"""spec.goal's order of the variants that met the objective: cheapest first; within a cost, the most headroom
first, except among variants whose figures lie within slo.tolerance of each other (equivalent: which one is better
is noise), which goal.prefer orders."""

from __future__ import annotations

from loadstage.api.status import Candidate, StageResult
from loadstage.api.types import DEFAULT_PREFER


def headroom(stage: StageResult) -> float:
    """The least share by which a figure of the deciding look stays within its objective."""
    shares = []
    for o in stage.verdict.objectives if stage.verdict else ():
        if o.value is None:
            continue
        if o.name == "minRps":
            shares.append(o.value / o.limit - 1)
        elif o.limit > 0:
            shares.append(1 - o.value / o.limit)
    return round(min(shares), 4) if shares else 0.0


def equivalent(one: Candidate, other: Candidate, tolerance: float) -> bool:
    """Whether two variants' figures (each latency objective's, and the rate's) lie within `tolerance` of each
    other, relatively: which one is better is then noise."""
    figures = {o.name: o.value for o in one.objectives if o.name != "errorRate" and o.value is not None}
    theirs = {o.name: o.value for o in other.objectives if o.name in figures and o.value is not None}
    return bool(theirs) and len(theirs) == len(figures) and all(
        abs(figures[name] - value) <= tolerance * max(abs(figures[name]), abs(value)) for name, value in theirs.items())


def alike(winner: Candidate, other: Candidate, tolerance: float) -> bool:
    """At the winner's cost, and equivalent to it."""
    return other.cost.cores == winner.cost.cores and equivalent(winner, other, tolerance)


def preference(candidate: Candidate, prefer: tuple[str, ...]) -> tuple[float, ...]:
    """goal.prefer's order (GOAL_PREFERENCES), then the matrix's."""
    settings = candidate.settings
    pods = settings.get("pods") or 1
    keys = {"fewerProcesses": pods * (settings.get("workers") or 1), "fewerPods": pods,
            "fewerThreads": settings.get("threads") or 1, "moreHeadroom": -candidate.headroom}
    return (*(keys[p] for p in prefer), candidate.variant)


def ranked(passes: list[Candidate], tie: float, tolerance: float = 0.0,
           prefer: tuple[str, ...] = DEFAULT_PREFER) -> list[Candidate]:
    """Cheapest first; within a tier of costs up to (1 + tie) x its cheapest, the most headroom first, except that
    the variants equivalent (within `tolerance`) to the best left go in `prefer`'s order."""
    rest, order = sorted(passes, key=lambda c: (c.cost.cores or 0.0, c.variant)), []
    while rest:
        tier = [c for c in rest if (c.cost.cores or 0.0) <= (rest[0].cost.cores or 0.0) * (1 + tie) + 1e-9]
        by_headroom = sorted(tier, key=lambda c: (-c.headroom, c.variant))
        while by_headroom:
            group = [c for c in by_headroom if c is by_headroom[0] or equivalent(by_headroom[0], c, tolerance)]
            order += sorted(group, key=lambda c: preference(c, prefer))
            by_headroom = [c for c in by_headroom if c not in group]
        rest = [c for c in rest if c not in tier]
    return order
