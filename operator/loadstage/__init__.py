"""loadstage: load-stage experiments for Python web apps, on one machine or through a Kopf operator.

The package is layered; each layer imports only the ones below it (`.importlinter` enforces it):

- `cli`: the `loadstage` command;
- `kube` (the operator), `local` (the local engine's backend) and `reports`: side by side;
- `engine`: the stage engine, its backend protocol and the command line of every component;
- `locust` and `samplers`: what runs inside the Locust master and injectors, and the periodic samplers;
- `results`: histograms, stage results, thresholds and the artifact codec;
- `api`: the LoadExperiment names, schema and typed model.

The names below are the public surface for code that drives loadstage from Python."""

from loadstage.api import Experiment, ValidationError, Variant, load_experiment_file, parse_experiment

__version__ = "0.1.0"
__all__ = ["Experiment", "ValidationError", "Variant", "__version__", "load_experiment_file", "parse_experiment"]
