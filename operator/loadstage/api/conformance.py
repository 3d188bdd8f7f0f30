"""Whether a document conforms to a structural OpenAPI schema as the API server applies it: a field the schema
does not declare (which the API server would prune without a word), a value of the wrong type, a null where
none is allowed, a value outside its enum, a required field missing. With LOADSTAGE_AUDIT_STATUS set (the
tests set it), every status loadstage writes is checked against the CRD's before it is written."""

from __future__ import annotations

import os
from typing import Any

AUDIT_ENV = "LOADSTAGE_AUDIT_STATUS"

_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list, tuple), "string": (str,),
                                       "integer": (int,), "number": (int, float), "boolean": (bool,)}


def violations(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Every place where `value` breaks `schema`, as 'path: what'."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null, and not nullable"]
    kind = schema.get("type")
    if kind and (not isinstance(value, _TYPES[kind]) or (kind in ("integer", "number") and isinstance(value, bool))):
        return [f"{path}: {type(value).__name__}, not {kind}"]
    found = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if kind == "array":
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            found.append(f"{path}: {len(value)} items")
        found += [v for i, item in enumerate(value) for v in violations(schema.get("items", {}), item, f"{path}[{i}]")]
    if kind == "object":
        declared = schema.get("properties")
        found += [f"{path}.{key}: required" for key in schema.get("required", []) if key not in value]
        for key, item in value.items():
            if declared is not None and key in declared:
                found += violations(declared[key], item, f"{path}.{key}")
            elif "additionalProperties" in schema:
                found += violations(schema["additionalProperties"], item, f"{path}.{key}")
            else:
                found.append(f"{path}.{key}: not declared (the API server would prune it)")
    return found


def audit(schema: dict[str, Any], document: dict[str, Any], path: str) -> None:
    """With LOADSTAGE_AUDIT_STATUS set, raises ValueError naming every violation of `document`."""
    if os.environ.get(AUDIT_ENV) and (found := violations(schema, document, path)):
        raise ValueError(f"{AUDIT_ENV}: the status written breaks the CRD's schema: " + "; ".join(found[:10]))
