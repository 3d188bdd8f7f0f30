"""`loadstage export`: a run's recommended variant as files to apply (docs/export.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from loadstage.api.schema import ValidationError
from loadstage.api.types import Autoscale, Experiment
from loadstage.cli.parser import DEFAULT_IMAGES, EXIT_OK
from loadstage.export import bundle
from loadstage.export.choice import ExportRefused
from loadstage.kube.server_settings import SettingsNotSettable
from loadstage.reports import sources


def _own_container(args) -> tuple[str, dict[str, Any]]:
    """The Deployment's name and the container to set: from --deployment's manifest, else named only."""
    if args.deployment is None:
        return args.name, {"name": args.container or "app"}
    try:
        docs = [d for d in yaml.safe_load_all(Path(args.deployment).read_text()) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError) as e:
        raise ValidationError([("--deployment", f"{args.deployment}: {e}")]) from None
    found = [d for d in docs if d.get("kind") == "Deployment"]
    if len(found) != 1:
        raise ValidationError([("--deployment", f"{args.deployment} holds {len(found)} Deployments: give a file "
                                                f"with one")])
    deployment = found[0]
    try:
        name = deployment["metadata"]["name"]
        containers = deployment["spec"]["template"]["spec"]["containers"]
        names = [str(c["name"]) for c in containers]
    except (KeyError, TypeError) as e:
        raise ValidationError([("--deployment", f"{args.deployment}: no {e} (metadata.name and spec.template.spec."
                                                f"containers[].name)")]) from None
    if not names or not isinstance(name, str):
        raise ValidationError([("--deployment", f"{args.deployment}: a Deployment needs metadata.name and a "
                                                f"container")])
    wanted = args.container or names[0]
    if wanted not in names:
        raise ValidationError([("--container", f"{wanted!r} is not a container of Deployment {name} "
                                               f"({', '.join(names)})")])
    own = containers[names.index(wanted)]
    where = f"{args.deployment}: container {wanted}"
    for key in ("command", "args"):
        listed = own.get(key) or []
        if not isinstance(listed, list) or not all(isinstance(a, str) for a in listed):
            raise ValidationError([("--deployment", f"{where}: {key} must be a list of strings")])
    env = own.get("env") or []
    if not isinstance(env, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in env):
        raise ValidationError([("--deployment", f"{where}: env must be a list of {{name, value}}")])
    return name, own


def _asked(args, experiment: Experiment) -> Autoscale | None:
    """--autoscale's loads, else the run's spec.autoscale."""
    if args.autoscale is None:
        return experiment.spec.autoscale
    low, high = args.autoscale
    return Autoscale(low, high, args.headroom, args.growth, args.ready_seconds)


def cmd_export(args) -> int:
    document = sources.load_document(args.source, args.namespace)
    experiment = sources.experiment_of(args.source, document)
    name, own = _own_container(args)
    try:
        made = bundle.build(experiment, sources.results_of(args.source, document), source=args.source,
                            shape=args.format, own=bundle.Own(name or experiment.name, own),
                            defaults=DEFAULT_IMAGES, number=args.variant, asked=_asked(args, experiment),
                            base=args.base)
    except ExportRefused as e:
        raise ValidationError([(args.source, str(e))]) from None
    except SettingsNotSettable as e:
        hint = "" if args.deployment else "; give --deployment FILE, your Deployment's manifest"
        raise ValidationError([("--deployment" if args.deployment else args.source, e.message + hint)]) from None
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file, text in made.texts().items():
        (path := out / file).write_text(text)
        written.append(path)
    for line in made.lines():
        print(line)
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK
