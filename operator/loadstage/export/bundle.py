"""One export, whoever asks for it (`loadstage export`, or the operator's ConfigMap): the variant chosen, the
autoscaler derived for it, and the files, as dicts, in one of three shapes:

- kustomize: a patch of the team's Deployment, the kustomization over it, and the HPA;
- helm: a values fragment in `helm create`'s shape;
- manifests: whole objects, for the app that loadstage deployed (the Deployment as it ran, and the HPA)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import yaml

from loadstage.api.status import RunStatus
from loadstage.api.types import Autoscale, Experiment
from loadstage.export import autoscaler, files, linearity
from loadstage.export.choice import Chosen, ExportRefused, choose
from loadstage.kube import manifests

FORMATS = ("kustomize", "helm", "manifests")


@dataclass(frozen=True)
class Own:
    """The Deployment the export sets: its name and its container (the team's, or one named only)."""
    name: str
    container: dict[str, Any]


@dataclass(frozen=True)
class Bundle:
    chosen: Chosen
    asked: Autoscale | None
    scaler: autoscaler.Autoscaler | None
    note: str                               # where its numbers come from
    files: dict[str, dict[str, Any]]        # file name -> its one object

    def texts(self) -> dict[str, str]:
        """Each file as it is written: a comment saying where its numbers come from, then its YAML."""
        return {name: f"# loadstage export: {self.note}\n" + yaml.safe_dump(content, sort_keys=False)
                for name, content in self.files.items()}

    def lines(self) -> list[str]:
        """What the export says it did, above the files it wrote."""
        said = [self.chosen.title(), f"measured at {self.chosen.evidence.line()}"]
        if self.scaler is not None and self.asked is not None:
            if not self.chosen.evidence.at_capacity:
                said.append("that stage met the objective at the load it was given, not at its capacity: a pod may "
                            "serve more (a search finds how much)")
            said += self.scaler.lines(self.asked)
        return said


def cpu_request(experiment: Experiment, chosen: Chosen, shape: str, own: Own,
                defaults: manifests.Defaults) -> str | None:
    """The CPU a pod requests once the export is applied (an HPA's utilisation is of it): the variant's request
    or limit; for whole manifests, over the operator's defaults; else the team's container's own."""
    if shape == "manifests":
        target = manifests.pod_resources(experiment, chosen.variant, defaults.resources).target
    else:
        declared = own.container.get("resources") or {}
        target = chosen.variant.resources
        if not (target.requests.cpu or target.limits.cpu):
            return (declared.get("requests") or {}).get("cpu") or (declared.get("limits") or {}).get("cpu")
    return target.requests.cpu or target.limits.cpu


def scaler_for(asked: Autoscale | None, status: RunStatus, chosen: Chosen,
               request: str | None) -> autoscaler.Autoscaler | None:
    """The autoscaler of `asked`'s loads from the chosen variant's stage (or, where the run measured its settings
    at other pod counts and a pod served less there, from the lowest: export.linearity); refused without a
    measured rate and CPU there."""
    if asked is None:
        return None
    evidence, found = linearity.sized_from(status, chosen)
    if evidence.rps_per_pod is None or not evidence.cpu_per_pod:
        raise ExportRefused(f"stage {evidence.stage.stage} at {evidence.pods} pod(s) of the chosen settings has no "
                            f"measured rate and CPU to size an autoscaler from")
    scaler = autoscaler.derive(asked, evidence.rps_per_pod, evidence.cpu_per_pod, request)
    return dataclasses.replace(scaler, notes=(*found, *scaler.notes))


def build(experiment: Experiment, status: RunStatus, *, source: str, shape: str, own: Own,
          defaults: manifests.Defaults, number: int | None = None, asked: Autoscale | None = None,
          base: str = "../base") -> Bundle:
    """The files of one export; raises ExportRefused (nothing to export) or SettingsNotSettable (a server that
    reads its settings only from a command line the export does not have)."""
    chosen = choose(experiment, status, number)
    scaler = scaler_for(asked, status, chosen, cpu_request(experiment, chosen, shape, own, defaults))
    note = files.provenance(chosen, source)
    made: dict[str, dict[str, Any]]
    if shape == "helm":
        made = {"values.yaml": files.helm_values(own.container, chosen, scaler)}
    elif shape == "manifests":
        if experiment.spec.target.deployment is not None:
            raise ExportRefused("--as manifests writes the Deployment loadstage deployed; a target that is your "
                                "own Deployment (spec.target.deployment) is exported --as kustomize, a patch of it")
        made = {"deployment.yaml": files.whole_deployment(experiment, chosen, scaler, note, defaults)}
    else:
        made = {"deployment-patch.yaml": files.deployment_patch(own.name, own.container, chosen, scaler, note),
                "kustomization.yaml": files.kustomization(base, scaler is not None)}
    if scaler is not None and asked is not None and shape != "helm":
        target = made["deployment.yaml"]["metadata"]["name"] if shape == "manifests" else own.name
        made["hpa.yaml"] = autoscaler.hpa(target, scaler, note, asked)
    return Bundle(chosen, asked, scaler, note, made)
