"""The capacity search (spec.search): which load a variant's next stage runs at, decided from the stages it has
run so far, and nothing else, so that an operator restarted mid-search goes on where it was.

From `from`, the load doubles (up to `max`) until a stage fails spec.slo; then the bracket between the highest
pass below the lowest fail and that fail is bisected until (fail - pass) / pass is at most `resolution`, or
the two are one apart. A stage is:
- a pass when its verdict passes and its target stayed steady;
- a fail when its verdict fails, or its target restarted or lost pods (it broke under the load);
- near when its figures are decided to lie at the objective, within slo.tolerance: the search ends there (reason
  Near), the knee found at that load;
- undecided when an interval straddles its objective: it runs once more at the same load, twice as long, not
  decided on fewer seconds than it had (a breach still ends it); if it is undecided again, it counts as a fail,
  so that the bracket's low end is always a pass;
- failed once, failed: a load whose decided stages disagree is a fail. A fail is decided over a whole interval
  (at most a 2.5% chance at a load that meets), while a target near its knee passes many short stages between
  rare long excursions: a quiet stage does not outweigh an excursion seen;
- confirmed: before Found, the pass end runs a second, fresh stage, twice as long and not decided on fewer
  seconds than a stage has (progress() below): just below a knee a backlog can grow by under a request a second,
  and shows in the p99 only after tens of seconds; the fail end has failed, and no further pass could undo it.
- injector-bound when the injectors ran out of CPU, or (an arrival rate) dropped over 1% of its arrivals and did
  not fail: the target was not what was measured, and the search ends (InjectorBound) with the bracket it had. A
  stage that dropped arrivals because every user of its pools waited on a target breaking the objective fails."""

from __future__ import annotations

from dataclasses import dataclass

from loadstage.api.status import Contradiction, LimitedBy, SearchResult, StageResult
from loadstage.api.types import Search
from loadstage.results.saturation import limited_by


@dataclass(frozen=True)
class NextStage:
    load: int
    duration: float
    decided_after: float | None = None   # a rerun: not decided on fewer seconds than the undecided stage had


def load_of(search: Search, stage: StageResult) -> int:
    load = {"users": stage.users, "injectors": stage.injectors, "rps": stage.arrival_rate}[search.load]
    assert load is not None, f"a search's stage has its {search.load}"
    return load


def outcome(stage: StageResult) -> str:
    """Pass, Fail, Near, Undecided or InjectorBound. A stage bound only by its pools of users (an arrival rate's drops)
    that failed has failed: every user was waiting on the target; otherwise an injector-bound stage ends the
    search."""
    verdict = stage.verdict
    if stage.injector_bound and (stage.measured_its_injectors or verdict is None or verdict.outcome != "Fail"):
        return "InjectorBound"
    if verdict is None:
        return "Undecided"
    if stage.target.unsteady():
        return "Fail"
    return verdict.outcome


CONFIRMATIONS = 2     # passes at the bracket's pass end before it is Found


@dataclass
class _Decided:
    outcomes: dict[int, list[str]]        # by load, its decided stages' outcomes (Pass or Fail), in order
    latest: dict[int, StageResult]        # by load, its latest decided stage
    near: StageResult | None = None       # a stage decided at the objective: the search has ended
    again: StageResult | None = None      # undecided once: to run again
    bound: bool = False                   # an injector-bound stage ended the search

    def at(self, load: int) -> str:
        """A load's outcome: Fail if any of its decided stages failed."""
        return "Fail" if "Fail" in self.outcomes[load] else "Pass"


def _decided(search: Search, stages: list[StageResult]) -> _Decided:
    decided = _Decided({}, {})
    previous: StageResult | None = None
    for stage in sorted(stages, key=lambda s: s.stage):
        load, found = load_of(search, stage), outcome(stage)
        rerun = previous is not None and outcome(previous) == "Undecided" and load_of(search, previous) == load
        previous, decided.again = stage, None
        if found == "InjectorBound":
            decided.bound = True
            return decided
        if found == "Near":
            decided.near = stage
            return decided
        if found == "Undecided":
            if not rerun:
                decided.again = stage
                continue
            found = "Fail"
        decided.outcomes.setdefault(load, []).append(found)
        decided.latest[load] = stage
    return decided


def _contradictions(decided: _Decided, failed: int | None) -> tuple[Contradiction, ...]:
    """Loads whose stages disagreed, and loads that passed above the lowest that failed."""
    return tuple(Contradiction(load, tuple(found)) for load, found in sorted(decided.outcomes.items())
                 if len(set(found)) > 1 or (failed is not None and load > failed and decided.at(load) == "Pass"))


def progress(search: Search, stages: list[StageResult], warmup_seconds: float = 0.0
             ) -> tuple[SearchResult, NextStage | None]:
    """The search's result so far and its next stage; None once it has ended (the result's reason says why).

    A load that failed any decided stage has failed. Before Found, the pass end is confirmed: CONFIRMATIONS
    passes at it, the later ones fresh and twice as long. A confirmation that fails moves the bracket (noisy
    binary search, Karp & Kleinberg 2007): the pass end that now fails is the bracket's new fail end, and the
    search goes on below it; the status keeps the contradictions."""
    decided = _decided(search, stages)
    outcomes, near = decided.outcomes, decided.near
    fails = [load for load in outcomes if decided.at(load) == "Fail"]
    failed = min(fails, default=None)
    passed = max((load for load in outcomes if decided.at(load) == "Pass" and (failed is None or load < failed)),
                 default=None)
    reason, following, confirmed = "Searching", None, False
    if decided.bound:
        reason = "InjectorBound"
    elif near is not None:
        reason = "Near"
    elif decided.again is not None:
        following = NextStage(load_of(search, decided.again), 2 * search.seconds, search.seconds)
    elif not stages:
        following = NextStage(search.from_, search.seconds)
    elif passed is None:
        reason = "FloorFailed"
    elif failed is None:
        if passed >= search.max:
            reason = "CeilingPassed"
        else:
            following = NextStage(min(2 * passed, search.max), search.seconds)
    elif failed - passed <= 1 or (failed - passed) / passed <= search.resolution:
        if search.confirm and len(outcomes[passed]) < CONFIRMATIONS:
            following = NextStage(passed, 2 * search.seconds, search.seconds)
        else:
            reason, confirmed = "Found", search.confirm
    else:
        following = NextStage((passed + failed) // 2, search.seconds)
    if following is not None and len(stages) >= search.most_stages():
        reason, following = "Exhausted", None
    latest = decided.latest
    result = SearchResult(
        search.load, passed, failed, latest[passed].rps if passed is not None else None,
        latest[failed].rps if failed is not None else None,
        round((failed - passed) / passed, 4) if passed is not None and failed is not None else None,
        len(stages), round(warmup_seconds + sum(s.duration_seconds for s in stages), 3), reason,
        None if near is None else load_of(search, near), None if near is None else near.rps, confirmed,
        _contradictions(decided, failed), _limited(search, stages, near, failed, passed, decided.bound))
    return result, following


def _limited(search: Search, stages: list[StageResult], near: StageResult | None, failed: int | None,
             passed: int | None, bound: bool) -> LimitedBy | None:
    """What limited the stage at the objective: the injector-bound stage that ended the search, the Near stage, or
    the latest stage at the fail end that did not pass; its figure's jump from the latest pass at the pass end."""
    def latest(load: int | None, outcomes: tuple[str, ...]) -> StageResult | None:
        return max((s for s in stages if (load is None or load_of(search, s) == load) and outcome(s) in outcomes),
                   key=lambda s: s.stage, default=None)
    broke = latest(None, ("InjectorBound",)) if bound else \
        near or (latest(failed, ("Fail", "Undecided")) if failed is not None else None)
    if broke is None:
        return None
    return limited_by(broke, latest(passed, ("Pass",)), f"{load_of(search, broke):,} {search.load}")
