"""The report on a terminal: every table, the capacity lines, the cross-check of Locust's count against
the target's own, and the progress line of a running stage."""

from __future__ import annotations

from typing import Any

from loadstage.api.quantities import format_duration
from loadstage.api.status import LimitedBy, RunStatus, VariantRecord, last_injector_bound
from loadstage.api.types import Stage
from loadstage.reports.significance import between_variants
from loadstage.reports.tables import (
    REPEATS_TITLE,
    footnotes,
    format_ms,
    headline_rows,
    mib,
    number,
    pivot_rows,
    render,
    repeat_rows,
    resource_rows,
    stage_rows,
    target_cpu,
    variant_label,
)


def render_table(run: RunStatus) -> str:
    return render(*stage_rows(run))


def render_report(run: RunStatus) -> str:
    """Every table, with the footnotes of the flags that appear."""
    stages_header, stage_table = stage_rows(run)
    parts = [render(stages_header, stage_table)]
    headline_header, headline_table = headline_rows(run)
    if headline_table:
        parts += ["", "Per variant, over all its stages:", render(headline_header, headline_table)]
    repeats_header, repeats_table = repeat_rows(run)
    if repeats_table:
        parts += ["", f"{REPEATS_TITLE}:", render(repeats_header, repeats_table, left=("Variant", "Repeat"))]
    decided = between_variants(run, [variant_label(run, v) for v in run.variants])
    if decided:
        parts += ["", "Between variants, over all their stages:", *decided]
    pivot_header, pivot_table = pivot_rows(run)
    if len(run.variants) > 1 and pivot_table:
        parts += ["", "99th percentile per stage (ms):", render(pivot_header, pivot_table, left=())]
    resources_header, resources_table = resource_rows(run)
    if resources_table:
        parts += ["", "Errors and target resources per stage (peaks while the stage ran):",
                  render(resources_header, resources_table)]
    notes = footnotes([c for rows in (stage_table, headline_table, pivot_table, resources_table)
                       for row in rows for c in row])
    if notes:
        parts += ["", *notes]
    return "\n".join(parts)


SEARCH_ENDS = {"Found": "found to its resolution", "Near": "at the objective there, within slo.tolerance",
               "CeilingPassed": "passed even at search.max",
               "FloorFailed": "failed already at search.from", "Searching": "still searching",
               "Exhausted": "not confirmed: its stages kept contradicting each other"}


def search_end(variant: VariantRecord) -> str:
    """Why a variant's search ended, in words; where its injectors ran out, at which load and of what."""
    search = variant.search
    assert search is not None
    stage = last_injector_bound(variant.stages)
    if search.confirmed:
        return f"{SEARCH_ENDS[search.reason]}, its pass end confirmed"
    if search.reason != "InjectorBound" or stage is None:
        return SEARCH_ENDS.get(search.reason, "stopped: its injectors, not its target, ran out")
    load = {"users": stage.users, "injectors": stage.injectors, "rps": stage.arrival_rate}[search.load]
    return f"stopped at {load or 0:,} {search.load}: {stage.injectors_ran_out()}"


DROPPED_SHOWN = 20


def render_recommendation(run: RunStatus) -> list[str]:
    """spec.goal's answer, and why each other variant is out, the first DROPPED_SHOWN of them."""
    pick = run.recommendation
    if pick is None:
        return []
    lines = [f"Recommendation: {pick.sentence}"]
    if pick.margin is not None:
        lines.append(f"  margin: {pick.margin.describe()}")
    if pick.winner is not None and pick.winner.limited_by is not None:
        lines.append(f"  its limit: {limited(pick.winner.limited_by).removeprefix('; limited by ')}")
    ran = [(v, v.dropped) for v in run.variants if v.dropped is not None and v.dropped.after]
    for variant, dropped in ran[:DROPPED_SHOWN]:
        lines.append(f"  dropped variant {variant.index + 1} after {dropped.after} stage(s): {dropped.reason}"
                     + limited(dropped.limited_by))
    if len(ran) > DROPPED_SHOWN:
        lines.append(f"  and {len(ran) - DROPPED_SHOWN} more dropped (status.variants[].dropped)")
    if pick.front:
        lines.append("  the front, none cheaper serves more: " + "; ".join(
            f"{c.label} on {c.cost.describe()}: {c.capacity_rps:,.0f} req/s at least"
            for c in pick.front))
    never = [str(v.index + 1) for v in run.variants if v.dropped is not None and not v.dropped.after]
    if never:
        shown = ", ".join(never[:DROPPED_SHOWN]) + (", ..." if len(never) > DROPPED_SHOWN else "")
        lines.append(f"  not run, {len(never)} variant(s) dearer than two that met the objective: {shown}")
    return lines


def render_verification(run: RunStatus) -> list[str]:
    """spec.verify's (or `loadstage verify`'s) answer: Holds, Breaks or Undecided, and each step's figures."""
    checked = run.verification
    if checked is None:
        return []
    lines = [f"Verification ({checked.get('where', 'Local')}): {checked.get('result')}: {checked.get('reason')}"]
    for step in checked.get("steps", []):
        bounds = step.get("p99IntervalMs")
        p99 = step.get("p99Ms")
        lines.append(f"  {step['replicas']} pod(s) at {step['load']:g} req/s: {step['outcome']}, p99 "
                     f"{'-' if p99 is None else f'{p99:g}'} ms"
                     f"{f' [{bounds[0]:g}, {bounds[1]:g}]' if bounds else ''} over {step.get('seconds', 0):g} s")
    return lines


def render_capacity(run: RunStatus) -> list[str]:
    if run.recommendation is not None:
        return render_recommendation(run)
    lines = []
    for variant in run.variants:
        settings = ", ".join(f"{k}={v}" for k, v in variant.settings.items() if v is not None)
        if (search := variant.search) is not None:
            width = f", width {search.resolution:.1%}" if search.resolution is not None else ""
            contradicted = "; ".join(f"{c.load:,} {search.load} {', '.join(c.outcomes)}"
                                     for c in search.contradictions)
            lines.append(f"Capacity ({settings}): {search.bracket()}; {search_end(variant)}{width}, "
                         f"{search.stages} stages, {format_duration(int(search.load_seconds))} of load"
                         + (f"; contradictions: {contradicted}" if contradicted else "") + limited(search.limited_by))
            continue
        if not variant.judged:
            continue
        cap = variant.capacity
        if cap is None:
            passed = [s for s in variant.stages if s.verdict and s.verdict.passed]
            bound = [s for s in passed if s.injector_bound]
            cause = "CPU-bound" if all(s.measured_its_injectors for s in bound) else \
                "bound (by their CPU, or dropped arrivals)"
            numbers = ", ".join(str(s.stage) for s in bound)
            unsteady = [str(s.stage) for s in passed if s.target.unsteady()]
            why = "; ".join([*([f"stage {numbers} passed, but its injectors were {cause}"] if bound else []),
                             *([f"stage {', '.join(unsteady)} passed, but its target was not steady"]
                               if unsteady else [])]) or "no stage met every threshold"
            lines.append(f"Capacity ({settings}): none; {why}")
            continue
        knee = f"; stage {cap.first_failed_stage} was the first to fail" if cap.first_failed_stage else ""
        lines.append(f"Capacity ({settings}): {cap.injectors} injectors, {cap.users} users, "
                     f"{number(cap.rps, '.0f')} req/s (stage {cap.stage}{knee})" + limited(cap.limited_by))
    return lines


def render_scale_out(run: RunStatus) -> list[str]:
    """'Scale-out over pods (threads=2): C(N) = ...; contention 5%, coherency 0.12%, peak at 28 pods; at 50 pods
    1,530 req/s [1,210, 1,800]'; or the note why there is no law."""
    lines = []
    for s in run.scale_out:
        measured = ", ".join(f"{p.size}: {p.rps:,.0f}" for p in s.points)
        head = f"Scale-out over {s.axis} ({s.settings}; req/s at {measured})"
        if s.per_unit is None or s.contention is None or s.coherency is None:
            lines.append(f"{head}: {s.note}")
            continue
        peak = f", peak at {s.peak_size:,.0f} {s.axis}" if s.peak_size is not None else ""
        at = f"; at {s.prediction.size:,} {s.axis} {s.prediction.rps:,.0f} req/s [{s.prediction.interval[0]:,.0f}, " \
             f"{s.prediction.interval[1]:,.0f}]" if s.prediction else ""
        lines.append(f"{head}: {s.law()}; contention {s.contention:.2%}, coherency {s.coherency:.3%}{peak}{at}"
                     + (f"; {s.note}" if s.note else ""))
    return lines


def limited(by: LimitedBy | None) -> str:
    """'; limited by Cpu, a cliff: CPU 0.98 of 1 core (98%) at 97 rps; ...; to move it: more CPU ...'."""
    if by is None:
        return ""
    return f"; limited by {by.resource}{', a cliff' if by.cliff else ''}: {by.evidence}; to move it: {by.remedy}"


def render_cross_check(run: RunStatus) -> list[str]:
    lines = []
    for variant in run.variants:
        for s in variant.stages:
            if s.request_goal is not None:
                goal = s.request_goal * s.repeats
                lines.append(f"variant {variant.index + 1} stage {s.stage}: {s.requests:,} of {goal:,} requests in "
                             f"{s.duration_seconds:g}s" + ("" if s.requests >= goal else
                                                          ", stopped by its time limit (its duration)"))
            if unsteady := s.target.unsteady():
                pods = "; ".join(p.describe() for p in s.target.pods or ())
                lines.append(f"variant {variant.index + 1} stage {s.stage}: target {unsteady} ({pods})")
            served = s.target.served_requests
            if served is None:
                continue
            lines.append(f"variant {variant.index + 1} stage {s.stage}: Locust counted {s.requests:,}, "
                         f"the target served {served:,}; target peak CPU "
                         f"{target_cpu(variant, s.target.peak_cpu_cores)} cores, peak RSS "
                         f"{number(mib(s.target.peak_memory_bytes), '.0f')} MiB; "
                         f"Redis connections opened {s.redis_connections_received}; "
                         f"injector peak CPU {format_ms(s.injector_peak_cpu_percent)}%")
    return lines


def render_alarms(run: RunStatus) -> list[str]:
    """What must not pass unseen, last: tasks that raised, and stages where nothing succeeded."""
    lines = []
    for variant in run.variants:
        for s in variant.stages:
            if s.exceptions:
                lines.append(f"variant {variant.index + 1} stage {s.stage}: {s.exceptions.describe()}")
            if nothing := s.nothing_succeeded():
                lines.append(f"variant {variant.index + 1} stage {s.stage}: {nothing}")
    return lines


def progress_line(label: str, elapsed: float, stage: Stage, snapshot: dict[str, Any],
                  run_left: float | None = None) -> str:
    rps = snapshot.get("currentRps")
    p99 = snapshot.get("currentP99Ms")
    done = f"{snapshot.get('requests', 0):,}/{stage.requests:,} requests in {format_duration(int(elapsed))}" \
        if stage.requests else f"{format_duration(int(elapsed))}/{format_duration(stage.duration)}"
    return (f"{label}: {done}"
            f"  users {snapshot.get('users', 0)}  workers {snapshot.get('workers', 0)}"
            f"  {rps if rps is not None else 0:.0f} req/s  p99 {format_ms(p99)} ms"
            + (f"  run left {format_duration(int(max(0.0, run_left)))}" if run_left is not None else ""))


def render_status(run: RunStatus, with_phase: bool = True) -> str:
    """The terminal report of a run: the tables, the capacity and cross-check lines, and the phase
    unless the run Succeeded."""
    lines = []
    if run.has_stages():
        lines.append(render_report(run))
    lines += render_capacity(run) + render_verification(run) + render_scale_out(run) + render_cross_check(run) + \
        render_alarms(run)
    if with_phase and run.phase != "Succeeded":
        lines.append(f"{run.phase}: {run.message}")
    return "".join(line + "\n" for line in lines)
