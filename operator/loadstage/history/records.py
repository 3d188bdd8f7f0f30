"""What the history keeps of one run, made from its result document (a `loadstage run` result file, or the
resource with its status and its stages' artifacts in a cluster): the run, each variant with its capacity, each
stage with its figures, intervals, verdict and merged histogram. Pure: no database here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadstage.api.status import RunStatus, StageResult, VariantRecord
from loadstage.reports.tables import cpu_limit_cores, variant_label
from loadstage.results.scale_out import point


@dataclass(frozen=True)
class RunRow:
    uid: str
    series: str
    name: str
    namespace: str | None
    started_at: str | None
    finished_at: str | None
    phase: str
    reason: str | None
    labels: dict[str, str]
    image: str | None
    source: str            # local or cluster
    spec: dict[str, Any]
    recommendation: dict[str, Any] | None


@dataclass(frozen=True)
class VariantRow:
    variant: int           # from 1, as the report counts them
    label: str
    settings: dict[str, Any]
    search: dict[str, Any] | None
    capacity_rps: float | None       # the bracket's middle (a search), or the knee's req/s (a ladder)
    capacity_low: float | None
    capacity_high: float | None
    cores: float | None              # the pods' CPU limits, else the target's mean CPU at its capacity
    limited_by: str | None


@dataclass(frozen=True)
class StageRow:
    variant: int
    stage: int
    load: str                        # "40 users", "3 injectors", "120 rps"
    requests: int
    failures: int
    error_rate: float | None
    rps: float | None
    latency_ms: dict[str, float]     # p50 to p999
    intervals: dict[str, Any] | None
    outcome: str | None              # Pass, Fail, Near, Undecided, Unsteady (with an objective)
    redis_peak: int | None
    histogram: str | None            # the stage's merged HDR histogram, encoded


@dataclass(frozen=True)
class Record:
    run: RunRow
    variants: tuple[VariantRow, ...]
    stages: tuple[StageRow, ...]
    status: dict[str, Any]           # the whole status, for `loadstage compare` of two kept runs


def _outcome(stage: StageResult) -> str | None:
    if stage.verdict is None:
        return None
    return stage.verdict.outcome or ("Pass" if stage.verdict.passed else "Fail")


def _cores(variant: VariantRecord, at: StageResult | None) -> float | None:
    limit = cpu_limit_cores(variant)
    if limit is not None:
        return round(limit, 3)
    measured = None if at is None else at.target.cpu_cores
    return None if not measured else round(measured, 3)


def variant_row(variant: VariantRecord, label: str, search: dict[str, Any] | None) -> VariantRow:
    found = point(0, variant)
    limited = (variant.search.limited_by if variant.search is not None
               else variant.capacity.limited_by if variant.capacity is not None else None)
    return VariantRow(variant.index + 1, label, dict(variant.settings),
                      search,
                      None if found is None else found.rps, None if found is None else found.low,
                      None if found is None else found.high, _cores(variant, variant.capacity_stage()),
                      None if limited is None else limited.resource)


def stage_row(variant: int, stage: StageResult, intervals: dict[str, Any] | None, histogram: str | None) -> StageRow:
    latency = {k: v for k, v in (("p50", stage.latency.p50), ("p90", stage.latency.p90), ("p95", stage.latency.p95),
                                 ("p99", stage.latency.p99), ("p999", stage.latency.p999)) if v is not None}
    return StageRow(variant, stage.stage, stage.offered_label(), stage.requests, stage.failures, stage.error_rate,
                    stage.rps, latency, intervals,
                    _outcome(stage), stage.redis_peak_connections, histogram)


def record_of(document: dict[str, Any], *, uid: str, source: str, labels: dict[str, str] | None = None,
              image: str | None = None) -> Record:
    """The history's record of a result document; `labels` add to (and override) spec.history.labels."""
    metadata, spec, raw = document.get("metadata") or {}, document.get("spec") or {}, document.get("status") or {}
    status = RunStatus.read(raw)
    history = spec.get("history") or {}
    run = RunRow(uid, history.get("series") or metadata.get("name", ""), metadata.get("name", ""),
                 metadata.get("namespace"), status.started_at, status.finished_at, status.phase, status.reason,
                 {**(history.get("labels") or {}), **(labels or {})}, image, source, spec, raw.get("recommendation"))
    histograms = {(a["variant"], n): s.get("histogram") for a in document.get("artifacts") or []
                  if "repeat" not in a for n, s in enumerate(a.get("stages") or [], 1)}
    raw_variants = raw.get("variants") or []
    variants = tuple(variant_row(v, variant_label(status, v), raw_v.get("search"))
                     for v, raw_v in zip(status.variants, raw_variants, strict=True))
    stages = tuple(stage_row(v.index + 1, s, raw_s.get("intervals"), histograms.get((v.index + 1, s.stage)))
                   for v, raw_v in zip(status.variants, raw_variants, strict=True)
                   for s, raw_s in zip(v.stages, raw_v.get("stages") or [], strict=True))
    return Record(run, variants, stages, raw)


def cluster_document(resource: dict[str, Any], artifacts: list[tuple[int, int, int, dict[str, Any]]]) -> dict[str, Any]:
    """A LoadExperiment with its status, and its stages' artifacts from their ConfigMaps ((variant, repeat, stage,
    artifact), kube.stored_results), as a result document: the first repeat's, as `loadstage run -o` writes."""
    by_variant: dict[int, dict[int, dict[str, Any]]] = {}
    for variant, repeat, stage, artifact in artifacts:
        if repeat == 1:
            by_variant.setdefault(variant, {})[stage] = artifact
    metadata = resource.get("metadata") or {}
    return {"metadata": {k: metadata.get(k) for k in ("name", "namespace", "uid")},
            "spec": resource.get("spec") or {}, "status": resource.get("status") or {},
            "artifacts": [{"variant": v, "stages": [stages.get(n, {}) for n in range(1, max(stages) + 1)]}
                          for v, stages in sorted(by_variant.items())]}
