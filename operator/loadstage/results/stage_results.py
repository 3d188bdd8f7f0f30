"""The results the LoadExperiment status holds: one per stage, from the Locust master's headline, and the
exact aggregates over a variant's stages, from the stages' merged histograms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hdrh.histogram import HdrHistogram

from loadstage.api.status import (
    Headline,
    Intervals,
    Latency,
    LostInjector,
    MethodFigures,
    PivotRow,
    StageResult,
    TargetFigures,
    TaskExceptions,
    VariantAggregate,
    VariantRecord,
    Verdict,
)
from loadstage.api.status.saturation import Saturation
from loadstage.api.types import Experiment, Stage, Variant
from loadstage.api.wire import Decision, read_headline
from loadstage.results import cpu_use, histograms, intervals, saturation
from loadstage.results.artifact import Artifact
from loadstage.results.intervals import CONFIDENCE
from loadstage.results.judgement import judge
from loadstage.results.measurement import StageMeasurement, load_window
from loadstage.results.repeats import between_repeats, trimmed_mean
from loadstage.results.sequential import Looks
from loadstage.results.thresholds import judged, slo_verdict, verdict_of

Number = int | float


def stage_result(experiment: Experiment, number: int, stage: Stage, m: StageMeasurement,
                 variant: Variant | None = None) -> StageResult:
    """The stage's figures, its verdict, and (given its variant) its saturation."""
    s = read_headline(m.summary)
    requests = s["requests"]
    raised = s.get("exceptions") or None
    ended_by = s.get("endedBy") or ("Requests" if stage.requests and requests >= stage.requests else "Duration")
    found = intervals.of_artifacts([m.artifact.get("blocks")], seed=f"stage {number}")
    result = StageResult(
        stage=number, injectors=stage.count, users=experiment.spec.injectors.users_for(stage),
        duration_seconds=s["elapsedSeconds"] if stage.requests or ended_by in EARLY else stage.duration,
        started_at=m.started_at, finished_at=m.finished_at,
        requests=requests, failures=s["failures"],
        error_rate=_error_rate(s["failures"], requests, _count(raised)),
        rps=s["rps"], mean_ms=s["meanMs"], latency=s["latencyMs"],
        by_method={method: method_figures(row["requests"], row["failures"], row["meanMs"], row["latencyMs"].p99)
                   for method, row in s["byMethod"].items()},
        redis_peak_connections=m.redis_peak_connections,
        redis_connections_received=m.redis_connections_received,
        target=target_figures(m, s.get("servedRequests")),
        injector_peak_cpu_percent=s.get("injectorPeakCpuPercent"),
        injector_bound=bool(s.get("injectorBound")),
        corrected_latency=s.get("correctedLatencyMs"),
        redis_peak_covers=None if m.redis_peak_covers == "stage" else m.redis_peak_covers,
        error_kinds=s.get("errorKinds") or None,
        lost_injectors=tuple(LostInjector(e["injector"], e["at"], e["cause"]) for e in m.lost_injectors),
        endpoints_folded=s.get("endpointsFolded"), artifact_omitted=m.artifact.get("omitted"),
        intervals=_without_error_rate(found, _count(raised)),
        request_goal=stage.requests, host_cpu_per_core=m.host_cpu_per_core or None,
        master_lag_seconds=s.get("masterLagSeconds"), master_bound=bool(s.get("masterBound")), exceptions=raised,
        ended_by=ended_by, looks=s.get("looks"), arrival_rate=stage.arrival_rate, arrivals=s.get("arrivals"),
        dropped_arrivals=s.get("droppedArrivals"), injector_cpu_bound=s.get("injectorCpuBound"))
    judged = replace(result, verdict=_judged(experiment, stage, result, m.artifact.get("blocks"), found,
                                             s.get("decision")))
    result = replace(judged, target=_with_mean_cpu(judged.target, m, judged.verdict))
    if variant is None:
        return result
    return replace(result, saturation=saturation.completed(m.saturation or Saturation(),
                                                           saturation.capacities(variant), result))


def _with_mean_cpu(target: TargetFigures, m: StageMeasurement, verdict: Verdict | None) -> TargetFigures:
    """The target's mean CPU from its settle cut (the verdict's; none without one) to the stage's last second: the
    readings whose span lies within."""
    window = load_window(m.artifact)
    if not m.target_cpu_readings or window is None:
        return target
    start = window[0] + ((verdict.settle_seconds or 0) if verdict else 0) + m.target_cpu_span
    found = cpu_use.settled_mean(m.target_cpu_readings, start, window[1], CONFIDENCE)
    if found is None:
        return target
    mean, interval = found
    return replace(target, mean_cpu_cores=round(mean, 3),
                   mean_cpu_interval=None if interval is None else (round(interval[0], 3), round(interval[1], 3)))


EARLY = ("Decided", "Breached")   # a stage that ended before its duration


def _judged(experiment: Experiment, stage: Stage, result: StageResult, blocks: dict[str, Any] | None,
            found: Intervals | None, decision: Decision | None) -> Verdict | None:
    """The stage's verdict, `found` its 95% intervals. A stage that could end once decided is judged at its looks'
    confidence: by the look that ended it (the master's `decision`), else at its end over its settled seconds
    (results.judgement); one that ended on a breach has failed."""
    spec = experiment.spec
    raised = _count(result.exceptions)
    if spec.slo is None:
        return judged(result, spec)
    if decision is not None:
        verdict = verdict_of(decision["objectives"], settle_seconds=decision.get("settleSeconds"),
                             confidence=decision["confidence"], batch_seconds=decision.get("batchSeconds"),
                             batches=decision.get("batches"))
    elif blocks:
        confidence = Looks.schedule(stage.duration).last if spec.stage_end.decided else CONFIDENCE
        verdict = judge(spec.slo, blocks, confidence, raised=raised, requests=result.requests, final=True)
    else:
        verdict = slo_verdict(result, spec.slo, intervals.with_exceptions(found, raised, result.requests) or {})
    if result.ended_by == "Breached" and not verdict.violations:   # its last seconds cannot undo the breach
        verdict = replace(verdict, passed=False, violations=("broke the objective by far at a look",))
    return verdict


def _count(raised: TaskExceptions | None) -> int:
    return raised.count if raised else 0


def _without_error_rate(found: Intervals | None, raised: int) -> Intervals | None:
    """The blocks time requests, and an exception is not one: with exceptions, no interval of the error rate."""
    if found is None or not raised:
        return found
    kept = Intervals(**found)
    kept.pop("errorRate", None)
    return kept


def target_figures(m: StageMeasurement, served: int | None) -> TargetFigures:
    """A count the target kept across a restart is of two processes, or lost: it is left unknown."""
    restarted = any(p.interrupted for p in m.target_pods or ())
    return TargetFigures(m.target_peak_cpu_cores, m.target_peak_memory_bytes, None if restarted else served,
                         m.target_pods, m.target_processes, m.target_peak_process_rss_bytes,
                         m.proxy_peak_cpu_cores, m.proxy_peak_memory_bytes)


def method_figures(requests: int, failures: int, mean_ms: float | None, p99_ms: float | None) -> MethodFigures:
    """What the status keeps of a method: the ONS breakdown has its mean; p99 is the figure people
    compare. Every other percentile is in the stage's artifact (its per-method histogram)."""
    return MethodFigures(requests, failures, None if mean_ms is None else round(mean_ms, 3), p99_ms)


def _merged(encoded: Sequence[str | None]) -> HdrHistogram:
    return histograms.merge_encoded(e for e in encoded if e)


def _methods(stages: list[StageResult], artifacts: list[Artifact], max_ms: float | None) -> dict[str, MethodFigures]:
    """Each method over several stages (or repeats of one): summed counts, the request-weighted mean, and the
    p99 of the merged histograms."""
    by_method = {}
    for method in sorted({m for s in stages for m in s.by_method}):
        rows = [s.by_method[method] for s in stages if method in s.by_method]
        n = sum(r.requests for r in rows)
        merged = _merged([a.method_histograms.get(method) for a in artifacts])
        mean = sum(r.mean_ms * r.requests for r in rows if r.mean_ms is not None) / n if n else None
        by_method[method] = method_figures(n, sum(r.failures for r in rows), mean,
                                           histograms.latency_ms(merged, max_ms)["p99"])
    return by_method


def _latencies(artifacts: list[Artifact], max_ms: float | None) -> tuple[Latency, Latency | None]:
    """The latency of every request of the artifacts together, and the corrected one where they have it."""
    corrected = [a.corrected_histogram for a in artifacts if a.corrected_histogram]
    return (Latency.from_status(histograms.latency_ms(_merged([a.histogram for a in artifacts]), max_ms)),
            Latency.from_status(histograms.latency_ms(_merged(corrected))) if corrected else None)


def _error_rate(failures: int, requests: int, exceptions: int = 0) -> float:
    """Failed requests, and tasks that raised (each a request that failed, as its user saw it), of them all."""
    attempts = requests + exceptions
    return round((failures + exceptions) / attempts, 6) if attempts else 0.0


def _mean_ms(rows: list[StageResult] | list[Headline], requests: int) -> float | None:
    """The request-weighted mean of the rows' means."""
    weighted = [(r.mean_ms, r.requests) for r in rows if r.mean_ms is not None]
    return round(sum(m * n for m, n in weighted) / requests, 3) if weighted and requests else None


def _intervals(repeats: Sequence[Headline], artifacts: list[Artifact], seed: str) -> Intervals | None:
    """From the spread between enough whole repeats; else a bootstrap of the artifacts' blocks."""
    return between_repeats(repeats) or intervals.of_artifacts([a.blocks for a in artifacts], seed=seed)


def _max(*values: Number | None) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _sum(*values: int | None) -> int | None:
    present = [v for v in values if v is not None]
    return None if len(present) < len(values) else sum(present)


def variant_aggregate(stages: list[StageResult], artifacts: list[Artifact],
                      repeats: Sequence[Headline] = ()) -> VariantAggregate:
    """The ONS headline row of a variant over all its stages: percentiles of every request of every
    stage together (from the merged histograms, never averaged), totals, and the variant's Redis peak.
    Its intervals resample each stage's blocks on their own (stages ran at different loads), then merge; with
    whole `repeats` of its ladder (each one's headline), they come from the variation between them."""
    requests = sum(s.requests for s in stages)
    failures = sum(s.failures for s in stages)
    raised = sum(_count(s.exceptions) for s in stages)
    max_ms = _max(*(s.latency.max for s in stages))
    latency, corrected = _latencies(artifacts, max_ms)
    return VariantAggregate(
        stages=len(stages), requests=requests, failures=failures, exceptions=raised,
        error_rate=_error_rate(failures, requests, raised),
        latency=latency, by_method=_methods(stages, artifacts, max_ms),
        redis_peak_connections=_max(*(s.redis_peak_connections for s in stages)), corrected_latency=corrected,
        intervals=_without_error_rate(_intervals(repeats, artifacts, "variant"), raised),
        trimmed_mean=trimmed_mean(repeats))


def merged_repeats(experiment: Experiment, before: StageResult, new: StageResult, artifacts: list[Artifact],
                   repeats: list[Headline]) -> StageResult:
    """A stage over its repeats: `before` (the repeats so far, merged) with the `new` one. Counts add up,
    latencies come from the merged histograms of every repeat's `artifacts`, peaks are the highest; the
    intervals come from the repeats' headlines once there are enough of them, else from all their blocks."""
    requests, failures = before.requests + new.requests, before.failures + new.failures
    raised = before.exceptions + new.exceptions if before.exceptions else new.exceptions
    count = before.repeats + 1
    max_ms = _max(before.latency.max, new.latency.max)
    latency, corrected = _latencies(artifacts, max_ms)
    rps = None if before.rps is None or new.rps is None else round((before.rps * before.repeats + new.rps) / count, 3)
    old, now = before.target, new.target
    merged = replace(
        new, started_at=before.started_at, requests=requests, failures=failures,
        error_rate=_error_rate(failures, requests, _count(raised)), exceptions=raised,
        rps=rps, mean_ms=_mean_ms([before, new], requests),
        latency=latency, corrected_latency=corrected, by_method=_methods([before, new], artifacts, max_ms),
        redis_peak_connections=_max(before.redis_peak_connections, new.redis_peak_connections),
        redis_connections_received=_sum(before.redis_connections_received, new.redis_connections_received),
        redis_peak_covers=new.redis_peak_covers or before.redis_peak_covers,
        target=TargetFigures(_max(old.peak_cpu_cores, now.peak_cpu_cores),
                             _max(old.peak_memory_bytes, now.peak_memory_bytes),
                             _sum(old.served_requests, now.served_requests),
                             None if old.pods is None and now.pods is None else (*(old.pods or ()), *(now.pods or ())),
                             _max(old.processes, now.processes),
                             _max(old.peak_process_rss_bytes, now.peak_process_rss_bytes),
                             _max(old.proxy_peak_cpu_cores, now.proxy_peak_cpu_cores),
                             _max(old.proxy_peak_memory_bytes, now.proxy_peak_memory_bytes)),
        injector_peak_cpu_percent=_max(before.injector_peak_cpu_percent, new.injector_peak_cpu_percent),
        injector_bound=before.injector_bound or new.injector_bound,
        arrivals=_sum(before.arrivals, new.arrivals),
        dropped_arrivals=_sum(before.dropped_arrivals, new.dropped_arrivals),
        injector_cpu_bound=None if new.injector_cpu_bound is None else bool(before.measured_its_injectors
                                                                            or new.measured_its_injectors),
        master_lag_seconds=_max(before.master_lag_seconds, new.master_lag_seconds),
        master_bound=before.master_bound or new.master_bound,
        error_kinds=_max(before.error_kinds, new.error_kinds),
        lost_injectors=before.lost_injectors + new.lost_injectors, retries=before.retries + new.retries,
        endpoints_folded=_max(before.endpoints_folded, new.endpoints_folded),
        artifact_omitted=new.artifact_omitted or before.artifact_omitted,
        intervals=_without_error_rate(_intervals(repeats, artifacts, f"stage {new.stage}"), _count(raised)),
        repeats=count,
        trimmed_mean=trimmed_mean(repeats))
    return replace(merged, verdict=judged(merged, experiment.spec))


def ladder_headline(experiment: Experiment, stages: list[Headline], artifacts: list[Artifact]) -> Headline:
    """One repeat of a variant's whole ladder: its stages' totals, their rates weighted by their durations,
    and the percentiles of their merged histograms."""
    requests, failures = sum(s.requests for s in stages), sum(s.failures for s in stages)
    raised = sum(s.exceptions for s in stages)
    timed = [(s.rps, _seconds(experiment.spec.stages[(s.stage or 1) - 1], s)) for s in stages]
    seconds = sum(d for _, d in timed)
    rated = [(r, d) for r, d in timed if r is not None]
    return Headline(None, requests, failures, _error_rate(failures, requests, raised),
                    None if len(rated) < len(timed) or not seconds else
                    round(sum(r * d for r, d in rated) / seconds, 3),
                    _mean_ms(stages, requests), _latencies(artifacts, None)[0], raised)


def _seconds(stage: Stage, headline: Headline) -> float:
    """How long a stage ran: its duration, or for a request goal, how long its requests took."""
    if not stage.requests:
        return stage.duration
    return headline.requests / headline.rps if headline.rps else 0.0


def p99_pivot(variants: list[VariantRecord]) -> list[PivotRow]:
    """The ONS "99th percentile timings per load stage": one row per stage, one p99 per variant."""
    rows = []
    for number in sorted({s.stage for v in variants for s in v.stages}):
        by_variant = tuple(next((s.latency.p99 for s in v.stages if s.stage == number), None) for v in variants)
        first = next(s for v in variants for s in v.stages if s.stage == number)
        rows.append(PivotRow(number, first.injectors, first.users, by_variant))
    return rows
