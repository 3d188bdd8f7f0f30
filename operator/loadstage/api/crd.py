"""The LoadExperiment CustomResourceDefinition, generated from the model's schema.
`crds/` holds its rendering; a test proves the two are the same."""

from __future__ import annotations

from typing import Any

import yaml

from loadstage.api.names import (
    API_GROUP,
    API_VERSION,
    CONDITION_TYPES,
    KIND,
    NAME_MAX,
    PHASES,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
)
from loadstage.api.spec import POD_RESOURCES, SPEC


def _string(description: str, **extra) -> dict:
    return {"type": "string", "description": description, **extra}


def status_schema() -> dict[str, Any]:
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "type": "object",
        "description": "What the operator observed; written by the operator only.",
        "properties": {
            "schemaVersion": {"type": "integer", "description": "The version of this status's layout, for an operator "
                                                                "that resumes it (absent: 1)."},
            "phase": _string("Pending, Deploying, Running, Succeeded or Failed.", enum=PHASES),
            "reason": _string("A CamelCase reason for the phase, e.g. TargetNotReady."),
            "message": _string("What the experiment is doing or waiting for, in words."),
            "observedGeneration": {"type": "integer", "description": "The generation last acted on."},
            "startedAt": _string("When the first variant started."),
            "finishedAt": _string("When the experiment ended."),
            "seed": {"type": "integer", "description": "The seed of a Random order: spec.seed, or the one the run "
                                                       "picked."},
            "warmedUp": _string("The run id of the last warm-up that finished, so that a resumed run does not "
                                "repeat it."),
            "progress": {"type": "object", "description": "Where the experiment is.", "properties": {
                "variant": _string("Current variant, e.g. 1/3."),
                "repeat": _string("Current repeat, e.g. 2/5 (with spec.repeats above 1)."),
                "stage": _string("Current stage, e.g. 3/5 (a search's: 3); during a warm-up, the stages finished "
                                 "before it."),
                "warmup": {"type": "boolean", "description": "A warm-up is running."},
                "injectors": {"type": "integer", "description": "Injectors of the current stage."},
                "attempt": {"type": "integer", "description": "The current stage's attempt, from 2 once it was "
                                                              "disrupted and runs again."},
                "elapsedSeconds": {"type": "integer", "description": "Seconds since the run started."},
                "remainingSeconds": {"type": "integer", "description": "Seconds the run has left: the load to "
                                     "come, and each step's set-up at the rate measured so far."},
                "remaining": _string("remainingSeconds for people, e.g. 1h05m (kubectl get lx)."),
                "eta": _string("When the run should end, as estimated at the last status write."),
                "retries": {"type": "array", "description": "The current stage's disrupted attempts so far.",
                            "items": {"type": "object", "properties": {
                                "attempt": {"type": "integer"}, "at": _string("When it was disrupted."),
                                "cause": _string("What took its pods away.")}}},
            }},
            "latest": {"type": "object", "description": "The last finished stage.", "properties": {
                "p99Ms": {"type": "number", "description": "Its p99 latency, ms."},
                "redisPeakConnections": {"type": "integer", "description": "Its peak Redis connections."},
                "bracket": _string("With spec.search: the current variant's capacity bracket so far, e.g. "
                                   "40-48 users (612-690 req/s)."),
                "leader": _string("With spec.goal: the cheapest variant that met the objective so far, e.g. "
                                  "workers=3 threads=4 (6 cores)."),
            }},
            "recommendation": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                "description": "With spec.goal: the cheapest variant that met spec.slo at the goal's load, and the "
                               "runner-up.",
                "properties": {
                    "sentence": _string("The answer in words, as the reports print it."),
                    "reason": _string("Found, NonePassed, or Searching while variants are left to run."),
                    "variant": {"type": "integer", "nullable": True,
                                "description": "The winner's index in status.variants."},
                    "margin": {"type": "object", "nullable": True, "x-kubernetes-preserve-unknown-fields": True,
                               "description": "The runner-up against the winner: figure (p99, ..., or perCore), "
                                              "relative, and its interval low and high (at confidence; from "
                                              "the searches' brackets where confidence is null)."},
                }},
            "conditions": {
                "type": "array", "description": "TargetReady, Running, Succeeded and Failed.",
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "required": ["type", "status"], "properties": {
                    "type": _string("Condition type.", enum=CONDITION_TYPES),
                    "status": _string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
                    "reason": _string("CamelCase reason."),
                    "message": _string("Human-readable detail."),
                    "lastTransitionTime": _string("When status last changed.", format="date-time"),
                    "observedGeneration": {"type": "integer"},
                }}},
            "cleanup": {"type": "object", "description": "Whether the cleanup policy's deletions are done.",
                        "properties": {
                            "done": {"type": "boolean", "description": "The Jobs, Deployments and Services "
                                                                       "are deleted."},
                            "at": _string("When they were deleted."),
                            "message": _string("What was deleted, or why it is still pending."),
                        }},
            "inPlace": {"type": "object", "description": "Whether an InPlace target (spec.target.deployment) is "
                                                         "restored.",
                        "properties": {
                            "restored": {"type": "boolean", "description": "The Deployment and its HPAs are as "
                                                                           "they were before."},
                            "at": _string("When they were restored."),
                            "message": _string("What was restored."),
                        }},
            "variants": {"type": "array", "description": "One entry per variant, with its stage results.",
                         "items": open_object},
            "p99ByStage": {"type": "array", "description": "The p99 latency of every stage, per variant.",
                           "items": {"type": "object", "properties": {
                               "stage": {"type": "integer", "description": "Stage number."},
                               "injectors": {"type": "integer", "description": "Injectors of the stage."},
                               "users": {"type": "integer", "description": "Users of the stage."},
                               "p99MsByVariant": {"type": "array", "description": "p99 in ms, by variant.",
                                                  "items": {"type": "number", "nullable": True}},
                           }}},
        },
    }


PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Variant", "type": "string", "jsonPath": ".status.progress.variant"},
    {"name": "Stage", "type": "string", "jsonPath": ".status.progress.stage"},
    {"name": "Repeat", "type": "string", "jsonPath": ".status.progress.repeat", "priority": 1},
    {"name": "Injectors", "type": "integer", "jsonPath": ".status.progress.injectors"},
    {"name": "Remaining", "type": "string", "jsonPath": ".status.progress.remaining"},
    {"name": "P99 (ms)", "type": "number", "jsonPath": ".status.latest.p99Ms"},
    {"name": "Redis peak", "type": "integer", "jsonPath": ".status.latest.redisPeakConnections"},
    {"name": "Bracket", "type": "string", "jsonPath": ".status.latest.bracket"},
    {"name": "Leader", "type": "string", "jsonPath": ".status.latest.leader"},
    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def build_crd() -> dict[str, Any]:
    spec_schema = SPEC.openapi()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "singular": SINGULAR, "shortNames": SHORT_NAMES,
                      "categories": ["loadstage"]},
            "scope": "Namespaced",
            "versions": [{
                "name": API_VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": PRINTER_COLUMNS,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A load-stage experiment: a gunicorn target, Redis, Locust injectors "
                                   "and a ladder of stages.",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec_schema,
                        "status": status_schema(),
                    },
                    "x-kubernetes-validations": [{
                        "rule": f"self.metadata.name.size() <= {NAME_MAX}",
                        "message": f"metadata.name must be at most {NAME_MAX} characters "
                                   f"(child object names add suffixes)"}],
                }},
            }],
        },
    }


def render_crd() -> str:
    header = "# Generated by `loadstage crd` from operator/loadstage/api/spec.py; do not edit.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=120)


def json_schema(openapi: Any) -> Any:
    """A schema of the model as JSON Schema (the chart's values.schema.json): the Kubernetes extensions and
    CEL rules dropped, and no unknown keys."""
    if isinstance(openapi, list):
        return [json_schema(item) for item in openapi]
    if not isinstance(openapi, dict):
        return openapi
    schema = {k: json_schema(v) for k, v in openapi.items() if not k.startswith("x-kubernetes-")}
    if schema.get("type") == "object" and "properties" in schema:
        schema["additionalProperties"] = False
    return schema


def experiment_resources_values_schema() -> dict[str, Any]:
    """The chart value experimentResources, from the same schema the operator parses it with."""
    return json_schema(POD_RESOURCES.openapi())
