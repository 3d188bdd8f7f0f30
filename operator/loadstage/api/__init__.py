"""The LoadExperiment API: its names, the schema of its spec, the typed model it parses into, and the
CRD generated from that schema. It imports nothing else from loadstage."""

from loadstage.api.load import load_experiment_file, parse_experiment
from loadstage.api.quantities import format_duration, parse_duration
from loadstage.api.schema import ValidationError
from loadstage.api.types import Experiment, Stage, Variant

__all__ = ["Experiment", "Stage", "ValidationError", "Variant", "format_duration", "load_experiment_file",
           "parse_duration", "parse_experiment"]
