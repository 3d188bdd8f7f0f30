"""The LoadExperiment status, declared once: each type beside its declaration (figures, stage, pick, variant,
run). Import from here."""

from loadstage.api.schema import ShapeError
from loadstage.api.status.figures import (
    FIGURES,
    OUTCOMES,
    ExceptionCount,
    Headline,
    Intervals,
    Latency,
    MethodFigures,
    Objective,
    TaskExceptions,
    Verdict,
)
from loadstage.api.status.pick import Candidate, Cost, Dropped, Margin, Recommendation, Settings
from loadstage.api.status.run import (
    SCHEMA_VERSION,
    STATUS,
    Cleanup,
    Condition,
    HistoryRecord,
    InPlace,
    Latest,
    Progress,
    RunStatus,
)
from loadstage.api.status.saturation import RESOURCES, LimitedBy, Saturation
from loadstage.api.status.scale_out import ScaleOut, ScalePoint, ScalePrediction
from loadstage.api.status.stage import LostInjector, Retry, StageResult, last_injector_bound
from loadstage.api.status.target import TargetFigures, TargetPodHealth
from loadstage.api.status.variant import (
    SEARCH_REASONS,
    Capacity,
    Contradiction,
    PivotRow,
    RepeatRecord,
    SearchResult,
    VariantAggregate,
    VariantRecord,
)

__all__ = [
    "FIGURES", "OUTCOMES", "RESOURCES", "SCHEMA_VERSION", "SEARCH_REASONS", "STATUS", "Candidate",
    "Capacity", "Cleanup", "Condition", "Contradiction", "Cost", "Dropped", "ExceptionCount", "Headline",
    "HistoryRecord", "InPlace",
    "Intervals", "Latency", "Latest", "LimitedBy", "LostInjector", "Margin", "MethodFigures", "Objective",
    "PivotRow", "Progress",
    "Recommendation", "RepeatRecord", "Retry", "RunStatus", "Saturation", "ScaleOut", "ScalePoint",
    "ScalePrediction", "SearchResult", "Settings", "ShapeError",
    "StageResult", "TargetFigures", "TargetPodHealth", "TaskExceptions", "VariantAggregate", "VariantRecord",
    "Verdict", "last_injector_bound",
]
