"""`loadstage compare BASE NEW`: the same stages of two runs side by side, and a verdict.

Stages are matched by what they ran: the variant's settings, the injectors, the users and the arrival rate. A stage
regressed when its p99 or p99.9 went up, or its throughput down, by more than the tolerance (the
practical threshold) and by more than the runs' own noise (the interval of the difference, from each
stage's confidence intervals, leaves out zero; they are the noise within each run, and separate runs on a
busy machine differ by more: BENCHMARKS.md (f)), or when its error rate went up. The verdict looks at two or
three figures, so each interval is at 1 - (1 - confidence) / figures (Bonferroni), and a stage that did not
change is called regressed at most 1 - confidence of the time. A stage without intervals
(shorter than 8 s, or a result from before them) is judged by the tolerance alone. A latency change within
the histograms' resolution (3 significant digits: two values that close may be one bucket) never counts,
and neither does a p99.9 of fewer than 1,000 requests (on either side, or in one of its repeats, where it
has no interval), which is close to the maximum.

Where the runs searched for each variant's capacity (spec.search), the variants' brackets are compared too: a
capacity is lower when NEW's whole bracket lies below BASE's (NEW failed at or below the load BASE passed), which
is a regression; brackets that overlap are the same within the searches' resolution. (It is over 300 lines
because matching the stages, judging each figure and rendering the table are one command's steps.)"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadstage.api.schema import ValidationError
from loadstage.api.servers import DEFAULT_SERVER
from loadstage.api.status import Recommendation, RunStatus, SearchResult, StageResult
from loadstage.api.types import Experiment
from loadstage.reports import ons_layout, tables
from loadstage.reports.significance import percent
from loadstage.results.differences import CONFIDENCE, RESOLUTION, Difference, difference, each_figure

LATENCIES = ("p50", "p99", "p999")    # p50 is shown, not judged
NAMES = {"p50": "p50", "p99": "p99", "p999": "p99.9", "rps": "req/s", "errorRate": "errors"}


@dataclass(frozen=True)
class Change:
    figure: str
    base: float | None
    new: float | None
    verdict: str    # "regressed", "improved", "same", "noise" (beyond the tolerance, not the noise), "small"
    #                 (a significant slowdown within the tolerance), "thin" (not judged), or "" (shown only)
    difference: Difference | None = None

    @property
    def relative(self) -> float | None:
        if self.base is None or self.new is None or self.base == 0:
            return None
        return (self.new - self.base) / self.base


@dataclass
class StageComparison:
    label: str
    injectors: int
    users: int
    changes: list[Change]
    arrival_rate: int | None = None

    def with_verdict(self, verdict: str) -> list[Change]:
        return [c for c in self.changes if c.verdict == verdict]


@dataclass(frozen=True)
class CapacityChange:
    """One variant's searched capacity in both runs."""
    label: str
    base: SearchResult
    new: SearchResult

    @property
    def verdict(self) -> str:
        """lower (NEW's bracket wholly below BASE's), higher (wholly above), the same (overlapping), or "" when
        the two searched different loads."""
        base, new = self.base, self.new
        if base.load != new.load:
            return ""
        if new.failed is not None and base.passed is not None and new.failed <= base.passed:
            return "lower"
        if base.failed is not None and new.passed is not None and new.passed >= base.failed:
            return "higher"
        return "the same"


@dataclass
class Comparison:
    tolerance: float
    stages: list[StageComparison]
    confidence: float = CONFIDENCE
    only_in_base: list[str] = field(default_factory=list)
    only_in_new: list[str] = field(default_factory=list)
    differing_settings: list[tuple[str, str, str]] = field(default_factory=list)
    capacities: list[CapacityChange] = field(default_factory=list)
    recommendations: tuple[Recommendation | None, Recommendation | None] = (None, None)   # with spec.goal

    @property
    def regressed(self) -> list[StageComparison | CapacityChange]:
        return [s for s in self.stages if s.with_verdict("regressed")] + \
            [c for c in self.capacities if c.verdict == "lower"]


def _percentage(text: str, low: float, high: float, example: str) -> float:
    """'10%' or '10' (percent) as a fraction, from `low` to `high`."""
    number = text.strip().removesuffix("%")
    try:
        value = float(number) / 100
    except ValueError:
        value = -1.0
    if not low <= value <= high:
        raise ValueError(f"must be a percentage from {low * 100:g}% to {high * 100:g}%, such as {example}, "
                         f"got {text!r}")
    return value


def parse_tolerance(text: str) -> float:
    return _percentage(text, 0, 10, "10%")


def parse_confidence(text: str) -> float:
    return _percentage(text, 0.5, 0.999, "95%")


def _with_noise(verdict: str, found: Difference | None) -> str:
    """The tolerance's verdict, held against the interval of the difference where there is one."""
    if found is None:
        return verdict
    if verdict == "regressed":
        return "regressed" if found.worse else "noise"
    if verdict == "improved":
        return "improved" if found.better else "noise"
    return "small" if found.worse else verdict


def _judge_latency(base: float | None, new: float | None, tolerance: float) -> str:
    if base is None or new is None or base <= 0:
        return "same"
    change = new - base
    if abs(change) <= RESOLUTION * max(base, new) or abs(change) <= tolerance * base:
        return "same"
    return "regressed" if change > 0 else "improved"


def _judge_throughput(base: float | None, new: float | None, tolerance: float) -> str:
    if not base or new is None or abs(new - base) <= tolerance * base:
        return "same"
    return "regressed" if new < base else "improved"


def _judge_errors(base: float, new: float, tolerance: float) -> str:
    if new > base * (1 + tolerance):
        return "regressed"
    if base > 0 and new < base / (1 + tolerance):
        return "improved"
    return "same"


def compare_stage(base: StageResult, new: StageResult, tolerance: float,
                  confidence: float = CONFIDENCE) -> list[Change]:
    # p99.9 is thin from fewer than 1,000 requests, or where the intervals leave it out (a repeat that had fewer)
    thin = not (base.latency.p999_reliable and new.latency.p999_reliable) or (
        bool(base.intervals and new.intervals) and not ("p999" in (base.intervals or {}) and
                                                        "p999" in (new.intervals or {})))
    level = each_figure(confidence, 2 if thin else 3)    # p99, req/s, and p99.9 unless it is thin

    def between(figure: str, b: float | None, n: float | None) -> Difference | None:
        return difference(figure, b, base.intervals, n, new.intervals, level)
    changes = []
    for key in LATENCIES:
        b, n = base.latency.percentile(key), new.latency.percentile(key)
        found = between(key, b, n)
        if key == "p50":
            verdict = ""
        elif key == "p999" and thin:
            verdict = "thin"
        else:
            verdict = _with_noise(_judge_latency(b, n, tolerance), found)
        changes.append(Change(key, b, n, verdict, found))
    found = between("rps", base.rps, new.rps)
    changes.append(Change("rps", base.rps, new.rps,
                          _with_noise(_judge_throughput(base.rps, new.rps, tolerance), found), found))
    changes.append(Change("errorRate", base.error_rate, new.error_rate,
                          _judge_errors(base.error_rate or 0.0, new.error_rate or 0.0, tolerance)))
    return changes


def _stages(run: RunStatus) -> dict[tuple, tuple[str, StageResult]]:
    """Every finished stage by what it ran; a ladder that repeats a step counts its repeats apart."""
    found: dict[tuple, tuple[str, StageResult]] = {}
    for variant in run.variants:
        label = tables.variant_label(run, variant)
        for stage in variant.stages:
            # a result from before servers could be chosen ran gunicorn
            key = (_settings_key(variant), stage.injectors, stage.users, stage.arrival_rate)
            repeat = sum(1 for k in found if k[:4] == key)
            found[(*key, repeat)] = (label, stage)
    return found


def _describe(key: tuple) -> str:
    settings, injectors, users, rate, repeat = key
    return (" ".join(f"{k}={v}" for k, v in settings) + f", {injectors} injectors, {users:,} users"
            + (f", {rate:,} arrivals/s" if rate else "") + (f" (repeat {repeat + 1})" if repeat else ""))


_ABSENT = ons_layout.Option("", object(), "-")


def compare(base: tuple[Experiment, RunStatus], new: tuple[Experiment, RunStatus],
            tolerance: float, names: tuple[str, str] = ("BASE", "NEW"),
            confidence: float = CONFIDENCE) -> Comparison:
    base_stages, new_stages = _stages(base[1]), _stages(new[1])
    shared = [k for k in new_stages if k in base_stages]
    capacities = _capacities(base[1], new[1])
    if not shared and not capacities:
        raise ValidationError([(names[1], f"shares no finished stage with {names[0]}: stages are matched by the "
                                          f"variant's settings, injectors, users and arrival rate; {names[0]} has "
                                          f"{'; '.join(map(_describe, base_stages)) or 'none'}, {names[1]} has "
                                          f"{'; '.join(map(_describe, new_stages)) or 'none'}")])
    stages = [StageComparison(new_stages[k][0], k[1], k[2],
                              compare_stage(base_stages[k][1], new_stages[k][1], tolerance, confidence), k[3])
              for k in shared]
    base_profile = {o.name: o for o in ons_layout.profile(*base)}
    new_profile = {o.name: o for o in ons_layout.profile(*new)}
    differing = [(name, base_profile[name].text if name in base_profile else "-",
                  new_profile[name].text if name in new_profile else "-")
                 for name in dict.fromkeys([*base_profile, *new_profile])
                 if (base_profile.get(name) or _ABSENT).value != (new_profile.get(name) or _ABSENT).value]
    return Comparison(tolerance, stages, confidence,
                      only_in_base=[_describe(k) for k in base_stages if k not in new_stages],
                      only_in_new=[_describe(k) for k in new_stages if k not in base_stages],
                      differing_settings=differing, capacities=capacities,
                      recommendations=(base[1].recommendation, new[1].recommendation))


def _settings_key(variant) -> tuple:
    settings = {"server": DEFAULT_SERVER, **variant.settings}
    return tuple(sorted((k, v) for k, v in settings.items() if v is not None))


def _capacities(base: RunStatus, new: RunStatus) -> list[CapacityChange]:
    """The variants both runs searched, matched by their settings."""
    searched = {_settings_key(v): v.search for v in base.variants if v.search is not None}
    return [CapacityChange(tables.variant_label(new, v), searched[_settings_key(v)], v.search)
            for v in new.variants if v.search is not None and _settings_key(v) in searched]


def _value(figure: str, value: float | None) -> str:
    if value is None:
        return "-"
    if figure == "errorRate":
        return f"{value:.2%}"
    return tables.format_ms(value) if figure != "rps" else f"{value:,.0f}"


def _delta(change: Change) -> str:
    if change.difference is not None:
        return change.difference.text()
    relative = None if change.figure == "errorRate" else change.relative
    return "" if relative is None else f"{relative:+.1%}"


def _cell(change: Change) -> str:
    delta = _delta(change)
    return f"{_value(change.figure, change.base)} -> {_value(change.figure, change.new)}" + (f" ({delta})" if delta
                                                                                           else "")


def _verdict(stage: StageComparison, strong=lambda text: text) -> str:
    def listed(changes: list[Change]) -> str:
        return ", ".join(NAMES[c.figure] + (f" {_delta(c)}" if _delta(c) else "") for c in changes)
    if stage.with_verdict("regressed"):
        return strong("regressed") + ": " + listed(stage.with_verdict("regressed"))
    if stage.with_verdict("improved"):
        return "improved: " + listed(stage.with_verdict("improved"))
    if stage.with_verdict("noise"):
        return "ok: beyond the tolerance, within the noise: " + listed(stage.with_verdict("noise"))
    if stage.with_verdict("small"):
        return "ok: significant, within the tolerance: " + listed(stage.with_verdict("small"))
    return "ok"


HEADER = ["Variant", "Injectors", "Users", "p50 (ms)", "p99 (ms)", "p99.9 (ms)", "req/s", "errors", "Verdict"]


def rows(comparison: Comparison, strong=lambda text: text) -> list[list[str]]:
    out = []
    for stage in comparison.stages:
        by = {c.figure: c for c in stage.changes}
        p999 = _cell(by["p999"]) + (" *" if by["p999"].verdict == "thin" else "")
        users = f"{stage.users:,}" + (f" ({stage.arrival_rate:,}/s)" if stage.arrival_rate else "")
        out.append([stage.label, str(stage.injectors), users, _cell(by["p50"]), _cell(by["p99"]), p999,
                    _cell(by["rps"]), _cell(by["errorRate"]), _verdict(stage, strong)])
    return out


def summary(comparison: Comparison) -> str:
    matched = len(comparison.stages)
    regressed = sum(isinstance(r, StageComparison) for r in comparison.regressed)
    head = f"{regressed} of {matched} matched stage(s) regressed" if regressed else \
        f"no regression in {matched} matched stage(s)"
    if comparison.capacities:
        lower = sum(c.verdict == "lower" for c in comparison.capacities)
        head += f"; {lower} of {len(comparison.capacities)} capacities lower" if lower else \
            f"; no capacity lower in {len(comparison.capacities)}"
    return f"{head} (tolerance {percent(comparison.tolerance)}, {percent(comparison.confidence)} confidence)"


def notes(comparison: Comparison) -> list[str]:
    lines = [f"Capacity ({c.label}): {c.base.bracket()} -> {c.new.bracket()}" + (f": {c.verdict}" if c.verdict else "")
             for c in comparison.capacities]
    if any(c.verdict == "thin" for s in comparison.stages for c in s.changes):
        lines.append("* p99.9 of fewer than 1,000 requests on one side (or in one of its repeats): shown, not judged.")
    levels = sorted({c.difference.confidence for s in comparison.stages for c in s.changes if c.difference})
    if levels:
        each = " or ".join(percent(level) for level in levels)
        lines.append(f"[a, b]: the {each} interval of the change, so that the stage's verdict over its judged "
                     f"figures (p99, req/s, and p99.9 unless *) is {percent(comparison.confidence)} sure; a "
                     f"regression must be beyond the tolerance and leave zero out.")
    unsure = [s for s in comparison.stages if all(c.difference is None for c in s.changes)]
    if unsure:
        lines.append(f"Judged by the tolerance alone ({len(unsure)} stage(s) without intervals on one side: "
                     f"shorter than 8 s, or run before loadstage kept them).")
    lines += [f"Setting that differs: {option}: {base} -> {new}" for option, base, new in comparison.differing_settings]
    lines += _recommendation_lines(*comparison.recommendations)
    lines += [f"Only in BASE (not compared): {text}" for text in comparison.only_in_base]
    lines += [f"Only in NEW (not compared): {text}" for text in comparison.only_in_new]
    return lines


def _recommendation_lines(base: Recommendation | None, new: Recommendation | None) -> list[str]:
    """Whether the pick changed: its winner's settings, or its answer where neither has a winner."""
    if base is None and new is None:
        return []
    said = [pick.sentence if pick else "none (no spec.goal)" for pick in (base, new)]
    winners = [pick.winner.settings if pick and pick.winner else None for pick in (base, new)]
    if winners[0] == winners[1] and (winners[0] is not None or said[0] == said[1]):
        return [f"Recommendation unchanged: {said[1]}"]
    return [f"Recommendation changed: BASE {said[0]} -> NEW {said[1]}"]


def render_table(comparison: Comparison) -> str:
    return "\n".join([summary(comparison), "", tables.render(HEADER, rows(comparison)), *notes(comparison)]) + "\n"


def render_markdown(comparison: Comparison) -> str:
    from loadstage.reports.markdown import table
    verdict = "**Regression**" if comparison.regressed else "No regression"
    lines = [f"{verdict}: {summary(comparison)}.", "",
             table(HEADER, rows(comparison, lambda text: f"**{text}**"), left=("Variant", "Verdict"))]
    extra = notes(comparison)
    if extra:
        lines += ["", *(f"- {line.replace('*', chr(92) + '*', 1) if line.startswith('*') else line}" for line in extra)]
    return "\n".join(lines) + "\n"
