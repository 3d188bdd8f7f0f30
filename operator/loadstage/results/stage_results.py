"""The results the LoadExperiment status holds: one per stage, from the Locust master's headline, and the
exact aggregates over a variant's stages, from the stages' merged histograms."""

from __future__ import annotations

from dataclasses import replace

from loadstage.api.types import Experiment, Stage
from loadstage.results import histograms, intervals
from loadstage.results.measurement import StageMeasurement
from loadstage.results.model import (
    Artifact,
    Latency,
    LostInjector,
    MethodFigures,
    PivotRow,
    StageResult,
    TargetFigures,
    VariantAggregate,
    VariantRecord,
)
from loadstage.results.thresholds import verdict


def stage_result(experiment: Experiment, number: int, stage: Stage, m: StageMeasurement) -> StageResult:
    s = m.summary
    requests = s["requests"]
    result = StageResult(
        stage=number, injectors=stage.injectors, users=experiment.spec.injectors.users_for(stage),
        duration_seconds=stage.duration, started_at=m.started_at, finished_at=m.finished_at,
        requests=requests, failures=s["failures"],
        error_rate=round(s["failures"] / requests, 6) if requests else 0.0,
        rps=s["rps"], mean_ms=s["meanMs"], latency=Latency.from_status(s["latencyMs"]),
        by_method={method: method_figures(row["requests"], row["failures"], row["meanMs"], row["latencyMs"]["p99"])
                   for method, row in s["byMethod"].items()},
        redis_peak_connections=m.redis_peak_connections,
        redis_connections_received=m.redis_connections_received,
        target=target_figures(m, s.get("servedRequests")),
        injector_peak_cpu_percent=s.get("injectorPeakCpuPercent"),
        injector_bound=bool(s.get("injectorBound")),
        corrected_latency=Latency.from_status(s["correctedLatencyMs"]) if "correctedLatencyMs" in s else None,
        redis_peak_covers=None if m.redis_peak_covers == "stage" else m.redis_peak_covers,
        error_kinds=s.get("errorKinds") or None,
        lost_injectors=tuple(LostInjector(e["injector"], e["at"], e["cause"]) for e in m.lost_injectors),
        endpoints_folded=s.get("endpointsFolded"), artifact_omitted=m.artifact.get("omitted"),
        intervals=intervals.of_artifacts([m.artifact.get("blocks")], seed=f"stage {number}"))
    if experiment.spec.thresholds is not None:
        result = replace(result, verdict=verdict(result, experiment.spec.thresholds))
    return result


def target_figures(m: StageMeasurement, served: int | None) -> TargetFigures:
    """A count the target kept across a restart is of two processes, or lost: it is left unknown."""
    restarted = any(p.interrupted for p in m.target_pods or ())
    return TargetFigures(m.target_peak_cpu_cores, m.target_peak_memory_bytes, None if restarted else served,
                         m.target_pods)


def method_figures(requests: int, failures: int, mean_ms: float | None, p99_ms: float | None) -> MethodFigures:
    """What the status keeps of a method: the ONS breakdown has its mean; p99 is the figure people
    compare. Every other percentile is in the stage's artifact (its per-method histogram)."""
    return MethodFigures(requests, failures, None if mean_ms is None else round(mean_ms, 3), p99_ms)


def _merged(encoded: list[str | None]) -> histograms.HdrHistogram:
    return histograms.merge_encoded(e for e in encoded if e)


def variant_aggregate(stages: list[StageResult], artifacts: list[Artifact]) -> VariantAggregate:
    """The ONS headline row of a variant over all its stages: percentiles of every request of every
    stage together (from the merged histograms, never averaged), totals, and the variant's Redis peak.
    Its intervals resample each stage's blocks on their own (stages ran at different loads), then merge."""
    requests = sum(s.requests for s in stages)
    failures = sum(s.failures for s in stages)
    max_ms = max((s.latency.max for s in stages if s.latency.max is not None), default=None)
    by_method = {}
    for method in sorted({m for s in stages for m in s.by_method}):
        rows = [s.by_method[method] for s in stages if method in s.by_method]
        n = sum(r.requests for r in rows)
        merged = _merged([a.method_histograms.get(method) for a in artifacts])
        mean = sum(r.mean_ms * r.requests for r in rows if r.mean_ms is not None) / n if n else None
        by_method[method] = method_figures(n, sum(r.failures for r in rows), mean,
                                           histograms.latency_ms(merged, max_ms)["p99"])
    peaks = [s.redis_peak_connections for s in stages if s.redis_peak_connections is not None]
    corrected = [a.corrected_histogram for a in artifacts if a.corrected_histogram]
    return VariantAggregate(
        stages=len(stages), requests=requests, failures=failures,
        error_rate=round(failures / requests, 6) if requests else 0.0,
        latency=Latency.from_status(histograms.latency_ms(_merged([a.histogram for a in artifacts]), max_ms)),
        by_method=by_method, redis_peak_connections=max(peaks) if peaks else None,
        corrected_latency=Latency.from_status(histograms.latency_ms(_merged(corrected))) if corrected else None,
        intervals=intervals.of_artifacts([a.blocks for a in artifacts], seed="variant"))


def p99_pivot(variants: list[VariantRecord]) -> list[PivotRow]:
    """The ONS "99th percentile timings per load stage": one row per stage, one p99 per variant."""
    rows = []
    for number in sorted({s.stage for v in variants for s in v.stages}):
        by_variant = tuple(next((s.latency.p99 for s in v.stages if s.stage == number), None) for v in variants)
        first = next(s for v in variants for s in v.stages if s.stage == number)
        rows.append(PivotRow(number, first.injectors, first.users, by_variant))
    return rows
