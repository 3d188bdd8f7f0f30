"""Which variant an export writes, and the stage its numbers come from: the capacity stage (a ladder's last stage
that met the objective, a search's pass end), else the last stage that passed."""

from __future__ import annotations

from dataclasses import dataclass

from loadstage.api.status import RunStatus, StageResult, VariantRecord
from loadstage.api.types import Experiment, Variant
from loadstage.reports.tables import variant_label


class ExportRefused(Exception):
    """Nothing to export, and why: the command line exits 2 with it."""


@dataclass(frozen=True)
class Evidence:
    stage: StageResult
    pods: int
    at_capacity: bool       # the stage is the variant's knee at the objective (one above it failed), not only a
    #                         stage that met it

    @property
    def rps_per_pod(self) -> float | None:
        return None if self.stage.rps is None else self.stage.rps / self.pods

    @property
    def rps_interval_per_pod(self) -> tuple[float, float] | None:
        bounds = (self.stage.intervals or {}).get("rps")
        return (bounds[0] / self.pods, bounds[1] / self.pods) if isinstance(bounds, (list, tuple)) else None

    @property
    def cpu_per_pod(self) -> float | None:
        """Cores a pod used at that stage (the target's figure counts the pods together)."""
        cores = self.stage.target.cpu_cores
        return None if cores is None else cores / self.pods

    def line(self) -> str:
        """'stage 1 at 120 rps: 119.8 req/s [101, 133.9], p99 39.42 ms [37.49, 44.27], CPU 0.192 cores'."""
        s, intervals = self.stage, self.stage.intervals or {}

        def said(value: float | None, key: str, unit: str) -> str:
            bounds = intervals.get(key)
            around = f" [{bounds[0]:g}, {bounds[1]:g}]" if isinstance(bounds, (list, tuple)) else ""
            return "?" if value is None else f"{value:g} {unit}{around}"
        cpu = s.target.cpu_cores
        return (f"stage {s.stage} at {s.offered_label()}: {said(s.rps, 'rps', 'req/s')}, p99 "
                f"{said(s.latency.p99, 'p99', 'ms')}, CPU {'?' if cpu is None else f'{cpu:g}'} cores "
                f"({'its capacity at the objective' if self.at_capacity else 'met the objective'}"
                f"{'; 95% intervals' if intervals else ''})")


@dataclass(frozen=True)
class Chosen:
    variant: Variant
    record: VariantRecord
    label: str      # the settings that vary between the run's variants: "threads=4 cpu=250m"
    why: str
    evidence: Evidence

    def title(self) -> str:
        return f"variant {self.variant.index + 1} ({self.label}), {self.why}"


def choose(experiment: Experiment, status: RunStatus, number: int | None) -> Chosen:
    """`number` (from 1), else the recommended variant; refused where there is none or it has no stage to size
    from."""
    variants = experiment.variants()
    if number is None:
        if status.recommendation is None or status.recommendation.variant is None:
            raise ExportRefused(f"the run has no recommendation (spec.goal picks one): give --variant N (1 to "
                                f"{len(variants)})")
        index, why = status.recommendation.variant, f"recommended: {status.recommendation.sentence}"
    elif not 1 <= number <= len(variants):
        raise ExportRefused(f"--variant {number}: the run has variants 1 to {len(variants)}")
    else:
        index, why = number - 1, "as asked"
    record = next((v for v in status.variants if v.index == index), None)
    if record is None:
        raise ExportRefused(f"variant {index + 1} did not run (a goal runs the cheapest variants first)")
    evidence = evidence_of(record)
    if evidence is None:
        raise ExportRefused(f"variant {index + 1} has no stage that met the objective: nothing to size from")
    return Chosen(variants[index], record, variant_label(status, record), why, evidence)


def evidence_of(record: VariantRecord) -> Evidence | None:
    """The stage a variant is sized from: its capacity stage, else its last stage that met the objective."""
    at = record.capacity_stage()
    stage = at or next((s for s in reversed(record.stages) if s.verdict is not None and s.verdict.passed), None)
    if stage is None:
        return None
    return Evidence(stage, int(record.settings.get("pods") or 1), at is not None and _bounded(record))


def _bounded(record: VariantRecord) -> bool:
    """Whether its capacity stage is a knee: a stage above it failed (or a search ended at the objective)."""
    if record.capacity is not None:
        return record.capacity.first_failed_stage is not None
    return record.search is not None and (record.search.failed is not None or record.search.near is not None)
