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
- injector-bound when the injectors ran out of CPU, or (an arrival rate) dropped over 1% of its arrivals and did
  not fail: the target was not what was measured, and the search ends (InjectorBound) with the bracket it had. A
  stage that dropped arrivals because every user of its pools waited on a target breaking the objective fails."""

from __future__ import annotations

from dataclasses import dataclass

from loadstage.api.status import SearchResult, StageResult
from loadstage.api.types import Search


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


@dataclass
class _Decided:
    passes: dict[int, StageResult]        # by load, the latest stage at each
    fails: dict[int, StageResult]
    near: StageResult | None = None       # a stage decided at the objective: the search has ended
    again: StageResult | None = None      # undecided once: to run again
    bound: bool = False                   # an injector-bound stage ended the search


def _decided(search: Search, stages: list[StageResult]) -> _Decided:
    passes: dict[int, StageResult] = {}
    fails: dict[int, StageResult] = {}
    undecided: dict[int, int] = {}
    again = None
    for stage in sorted(stages, key=lambda s: s.stage):
        load, found = load_of(search, stage), outcome(stage)
        again = None
        if found == "InjectorBound":
            return _Decided(passes, fails, bound=True)
        if found == "Near":
            passes.pop(load, None)
            fails.pop(load, None)
            return _Decided(passes, fails, near=stage)
        if found == "Undecided":
            undecided[load] = undecided.get(load, 0) + 1
            if undecided[load] == 1:
                again = stage
                continue
            found = "Fail"
        (passes if found == "Pass" else fails)[load] = stage
        (fails if found == "Pass" else passes).pop(load, None)
    return _Decided(passes, fails, again=again)


def progress(search: Search, stages: list[StageResult], warmup_seconds: float = 0.0
             ) -> tuple[SearchResult, NextStage | None]:
    """The search's result so far and its next stage; None once it has ended (the result's reason says why)."""
    decided = _decided(search, stages)
    passes, fails, near = decided.passes, decided.fails, decided.near
    failed = min(fails) if fails else None
    passed = max((load for load in passes if failed is None or load < failed), default=None)
    reason, following = "Searching", None
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
        reason = "Found"
    else:
        following = NextStage((passed + failed) // 2, search.seconds)
    result = SearchResult(
        search.load, passed, failed, passes[passed].rps if passed is not None else None,
        fails[failed].rps if failed is not None else None,
        round((failed - passed) / passed, 4) if passed is not None and failed is not None else None,
        len(stages), round(warmup_seconds + sum(s.duration_seconds for s in stages), 3), reason,
        None if near is None else load_of(search, near), None if near is None else near.rps)
    return result, following
