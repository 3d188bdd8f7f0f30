"""`loadstage export`: a run's recommended variant as files to apply (docs/export.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from loadstage.api.schema import ValidationError
from loadstage.cli.parser import EXIT_OK
from loadstage.export import autoscaler, files
from loadstage.export.choice import Chosen, ExportRefused, choose
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


def _asked(args) -> autoscaler.Asked | None:
    if args.autoscale is None:
        return None
    low, high = args.autoscale
    return autoscaler.Asked(low, high, args.headroom, args.growth, args.ready_seconds)


def _scaler(asked: autoscaler.Asked | None, chosen: Chosen) -> autoscaler.Autoscaler | None:
    if asked is None:
        return None
    evidence = chosen.evidence
    if evidence.rps_per_pod is None or not evidence.cpu_per_pod:
        raise ValidationError([("--autoscale", f"stage {evidence.stage.stage} of variant "
                                               f"{chosen.variant.index + 1} has no measured rate and CPU to size "
                                               f"an autoscaler from")])
    return autoscaler.derive(asked, evidence.rps_per_pod, evidence.cpu_per_pod,
                             chosen.variant.resources.requests.cpu or chosen.variant.resources.limits.cpu)


def _write(directory: Path, name: str, note: str, content: dict[str, Any]) -> Path:
    path = directory / name
    path.write_text(f"# loadstage export: {note}\n" + yaml.safe_dump(content, sort_keys=False))
    return path


def cmd_export(args) -> int:
    document = sources.load_document(args.source, args.namespace)
    experiment = sources.experiment_of(args.source, document)
    try:
        chosen = choose(experiment, sources.results_of(args.source, document), args.variant)
    except ExportRefused as e:
        raise ValidationError([(args.source, str(e))]) from None
    name, own = _own_container(args)
    asked = _asked(args)
    scaler = _scaler(asked, chosen)
    note = files.provenance(chosen, args.source)
    try:
        if args.format == "helm":
            made = {"values.yaml": files.helm_values(own, chosen, scaler)}
        else:
            name = name or experiment.name
            made = {"deployment-patch.yaml": files.deployment_patch(name, own, chosen, scaler, note),
                    "kustomization.yaml": files.kustomization(args.base, scaler is not None)}
            if scaler is not None:
                made["hpa.yaml"] = autoscaler.hpa(name, scaler, note)
    except SettingsNotSettable as e:
        hint = "" if args.deployment else "; give --deployment FILE, your Deployment's manifest"
        raise ValidationError([("--deployment" if args.deployment else args.source, e.message + hint)]) from None
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    written = [_write(out, file, note, content) for file, content in made.items()]
    print(chosen.title())
    print(f"measured at {chosen.evidence.line()}")
    if scaler is not None and asked is not None:
        if not chosen.evidence.at_capacity:
            print("that stage met the objective at the load it was given, not at its capacity: a pod may serve "
                  "more (a search finds how much)")
        for line in scaler.lines(asked):
            print(line)
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK
