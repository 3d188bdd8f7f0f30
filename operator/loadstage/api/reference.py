"""The experiment field reference (docs/reference.md), generated from the same schemas the CRD is: every
field of the spec with its type, default, rules and description, and every rule across fields; then every
field of the status. A test checks that the page is current."""

from __future__ import annotations

import json
import re
from typing import Any

from loadstage.api import servers
from loadstage.api.names import API_GROUP, API_VERSION, KIND, SINGULAR
from loadstage.api.quantities import DURATION_PATTERN, PERCENT_PATTERN
from loadstage.api.spec import SPEC
from loadstage.api.status import STATUS

NAMED_PATTERNS = {f"^{DURATION_PATTERN}$": "a duration (90s, 20m, 1h30m, 250ms)",
                  f"^{PERCENT_PATTERN}$": "a percentage ('1%', '0.5%')"}


def _type(schema: dict[str, Any]) -> str:
    kind: str = schema.get("type", "object")
    if kind == "array":
        return f"list of {_type(schema['items'])}"
    if kind == "object" and "additionalProperties" in schema:
        return f"map of {_type(schema['additionalProperties'])}"
    if kind == "string" and schema.get("pattern") in NAMED_PATTERNS:
        return "duration" if "duration" in NAMED_PATTERNS[schema["pattern"]] else "percentage"
    return kind


def _rules(schema: dict[str, Any]) -> list[str]:
    rules = []
    if "enum" in schema:
        rules.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    if "minimum" in schema or "maximum" in schema:
        rules.append(" to ".join(str(schema[k]) for k in ("minimum", "maximum") if k in schema)
                     if "minimum" in schema and "maximum" in schema
                     else (f">= {schema['minimum']}" if "minimum" in schema else f"<= {schema['maximum']}"))
    pattern = schema.get("pattern")
    if pattern and pattern not in NAMED_PATTERNS:
        rules.append(f"matches `{pattern}`")
    if "maxLength" in schema and pattern not in NAMED_PATTERNS:
        rules.append(f"at most {schema['maxLength']} characters")
    if "minItems" in schema or "maxItems" in schema:
        rules.append(f"{schema.get('minItems', 0)} to {schema['maxItems']} items" if "maxItems" in schema
                     else f"at least {schema['minItems']} items")
    if schema.get("x-kubernetes-list-type") == "set":
        rules.append("no duplicates")
    if schema.get("type") != "object":
        rules += [v["message"] for v in schema.get("x-kubernetes-validations", [])]
    item = schema.get("items", {})
    if item.get("type") not in (None, "object") and _rules(item):
        rules.append("each: " + ", ".join(_rules(item)))
    return rules


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(schema: dict[str, Any]) -> str:
    if "default" not in schema or schema["default"] in ({}, []):
        return ""
    return f"`{json.dumps(schema['default'])}`"


def _sections(path: str, schema: dict[str, Any], out: list[str], seen: dict[str, str] | None = None) -> None:
    """A table of the object's fields, then a section for each object below it; an object met before (the
    status's candidates) points at its first section instead of repeating it."""
    seen = {} if seen is None else seen
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    out += [f"## `{path}`", "", schema.get("description", ""), ""]
    out += ["| Field | Type | Default | Rules | Description |", "|---|---|---|---|---|"]
    nested = []
    for name, field in properties.items():
        item, value = field.get("items", {}), field.get("additionalProperties", {})
        below = (f"{path}.{name}", field) if field.get("type", "object") == "object" and "properties" in field \
            else (f"{path}.{name}[]", item) if item.get("type") == "object" and "properties" in item \
            else (f"{path}.{name}.*", value) if isinstance(value, dict) and "properties" in value else None
        description = field.get("description", "")
        if below is not None:
            key = json.dumps({k: v for k, v in below[1].items() if k != "nullable"}, sort_keys=True)
            if key in seen:
                description += f" As [`{seen[key]}`](#{_anchor(seen[key])})."
            else:
                seen[key] = below[0]
                nested.append(below)
        rules = (["required"] if name in required else []) + _rules(field)
        out.append(f"| `{name}` | {_type(field)} | {_default(field)} | {_cell('; '.join(rules))} | "
                   f"{_cell(description)} |")
    checks = [v["message"] for v in schema.get("x-kubernetes-validations", [])]
    if checks:
        out += ["", "Rules across these fields:", "", *(f"- {_cell(c)}" for c in checks)]
    out.append("")
    for sub_path, sub in nested:
        _sections(sub_path, sub, out, seen)


def _anchor(path: str) -> str:
    """GitHub's anchor of the heading `path`."""
    return re.sub(r"[^\w\- ]", "", f"`{path}`".lower()).replace(" ", "-")


def _servers(out: list[str]) -> None:
    """Each server's entry (api/servers.py): its command line per pod, and what workers and threads are to it."""
    out += ["## Servers", "", "`spec.target.server` and `spec.matrix.server`, from each server's entry in "
            "`operator/loadstage/api/servers.py`: the command line a pod and the local engine run (W workers, T "
            "threads, C the worker class), and what workers and threads are to the server.", "",
            "| server | command line (per pod) | workers | threads | worker classes | refuses |",
            "|---|---|---|---|---|---|"]
    for e in servers.ENTRIES:
        argv = e.command(servers.Launch("APP", "W", "T", e.classes[0] if e.classes else None, ("HOST:PORT",)))
        if e.worker_classes:
            argv = ["C" if a == e.classes[0] else a for a in argv]
        refuses = servers.refusals(e)
        out.append(f"| `{e.name}` ({_cell(e.about)}) | `{_cell(' '.join(argv))}` | {_cell(e.workers_are)} | "
                   f"{_cell(e.threads_are)} | {', '.join(f'`{c}`' for c in e.classes) or '-'} | "
                   f"{'; '.join(refuses) or '-'} |")
    out.append("")


def render_reference() -> str:
    out = ["# Experiment reference", "",
           "<!-- Generated by `loadstage reference` from operator/loadstage/api/spec.py and api/status; do not "
           "edit. -->", "",
           f"Every field of a `{KIND}` (`apiVersion: {API_GROUP}/{API_VERSION}`), from the schema that both "
           "`loadstage run` and the API server (through the CRD) enforce. A wrong value is refused with the "
           "field's path and the rule it breaks.", ""]
    _sections("spec", SPEC.openapi(), out)
    _servers(out)
    out += ["# Status reference", "",
            f"What the operator (and `loadstage run -o`) writes in a `{KIND}`'s status, from the declaration in "
            "`operator/loadstage/api/status/`, which also gives the CRD's status schema (`kubectl explain "
            f"{SINGULAR}.status...`), the reader of a result file and the one writer. A null is left out.", ""]
    _sections("status", STATUS.openapi(), out)
    return "\n".join(out).rstrip() + "\n"
