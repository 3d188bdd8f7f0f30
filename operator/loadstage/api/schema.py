"""A small declarative schema: each node parses YAML values into Python values,
reports errors by field path, and renders itself as a Kubernetes structural
OpenAPI v3 schema. The experiment model and the CRD are both generated from it."""

from __future__ import annotations

import dataclasses
import difflib
import json
import keyword
import re
from typing import Any, Callable

MISSING = object()


class ValidationError(Exception):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("\n".join(f"{path}: {msg}" for path, msg in problems))


def show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return str(value)


class Problems:
    def __init__(self):
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise ValidationError(self.items)


class Node:
    description: str = ""
    default: Any = MISSING

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        raise NotImplementedError

    def openapi(self) -> dict:
        raise NotImplementedError

    def _with_meta(self, schema: dict) -> dict:
        if self.description:
            schema["description"] = self.description
        if self.default is not MISSING and self.default is not None:
            schema["default"] = self.default
        return schema


class Int(Node):
    def __init__(self, description, *, minimum=None, maximum=None, default=MISSING):
        self.description, self.minimum, self.maximum, self.default = description, minimum, maximum, default

    def parse(self, value, path, problems):
        if isinstance(value, bool) or not isinstance(value, int):
            problems.add(path, f"must be an integer, got {show(value)}")
            return None
        if self.minimum is not None and value < self.minimum:
            problems.add(path, f"must be >= {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            problems.add(path, f"must be <= {self.maximum}, got {value}")
        return value

    def openapi(self):
        s = {"type": "integer"}
        if self.minimum is not None:
            s["minimum"] = self.minimum
        if self.maximum is not None:
            s["maximum"] = self.maximum
        return self._with_meta(s)


class Bool(Node):
    def __init__(self, description, *, default=MISSING):
        self.description, self.default = description, default

    def parse(self, value, path, problems):
        if not isinstance(value, bool):
            problems.add(path, f"must be true or false, got {show(value)}")
        return value

    def openapi(self):
        return self._with_meta({"type": "boolean"})


class Str(Node):
    def __init__(self, description, *, enum=None, pattern=None, pattern_hint=None,
                 max_length=None, default=MISSING):
        self.description, self.enum, self.pattern, self.default = description, enum, pattern, default
        self.pattern_hint, self.max_length = pattern_hint, max_length

    def parse(self, value, path, problems):
        if not isinstance(value, str):
            problems.add(path, f"must be a string, got {show(value)}")
            return None
        if self.enum is not None and value not in self.enum:
            problems.add(path, f"must be one of {', '.join(self.enum)}, got {value!r}")
        elif self.pattern is not None and not re.fullmatch(self.pattern, value):
            problems.add(path, f"must be {self.pattern_hint or 'match ' + self.pattern}, got {value!r}")
        if self.max_length is not None and len(value) > self.max_length:
            problems.add(path, f"must be at most {self.max_length} characters, got {len(value)}")
        return value

    def openapi(self):
        s: dict = {"type": "string"}
        if self.enum is not None:
            s["enum"] = list(self.enum)
        if self.pattern is not None:
            s["pattern"] = f"^{self.pattern}$"
        if self.max_length is not None:
            s["maxLength"] = self.max_length
        return self._with_meta(s)


class ListOf(Node):
    def __init__(self, description, item: Node, *, min_items=None, max_items=None,
                 unique=False, default=MISSING):
        self.description, self.item, self.default = description, item, default
        self.min_items, self.max_items, self.unique = min_items, max_items, unique

    def parse(self, value, path, problems):
        if not isinstance(value, list):
            problems.add(path, f"must be a list, got {show(value)}")
            return None
        if self.min_items is not None and len(value) < self.min_items:
            problems.add(path, f"must have at least {self.min_items} item(s), got {len(value)}")
        if self.max_items is not None and len(value) > self.max_items:
            problems.add(path, f"must have at most {self.max_items} items, got {len(value)}")
        items = [self.item.parse(v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        if self.unique:
            seen = set()
            for i, v in enumerate(value):
                if isinstance(v, (str, int)) and v in seen:
                    problems.add(f"{path}[{i}]", f"duplicate value {show(v)}")
                if isinstance(v, (str, int)):
                    seen.add(v)
        return items

    def openapi(self):
        s = {"type": "array", "items": self.item.openapi()}
        if self.min_items is not None:
            s["minItems"] = self.min_items
        if self.max_items is not None:
            s["maxItems"] = self.max_items
        if self.unique:
            s["x-kubernetes-list-type"] = "set"
        return self._with_meta(s)


class MapOf(Node):
    def __init__(self, description, value: Node, *, key_pattern=None, key_hint=None, keys_in_cel=True,
                 default=MISSING):
        """`keys_in_cel`: the API server checks the keys too (a CEL rule, which its cost budget may not take)."""
        self.description, self.value, self.default = description, value, default
        self.key_pattern, self.key_hint, self.keys_in_cel = key_pattern, key_hint, keys_in_cel

    def parse(self, value, path, problems):
        if not isinstance(value, dict):
            problems.add(path, f"must be a mapping, got {show(value)}")
            return None
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or (self.key_pattern and not re.fullmatch(self.key_pattern, k)):
                problems.add(key_path(path, k), f"key must be {self.key_hint or 'a string'}")
                continue
            out[k] = self.value.parse(v, key_path(path, k), problems)
        return out

    def openapi(self):
        schema = {"type": "object", "additionalProperties": self.value.openapi()}
        if self.key_pattern and self.keys_in_cel:
            schema["x-kubernetes-validations"] = [{
                "rule": "self.all(k, k.matches('^(?:" + self.key_pattern.replace('\\', '\\\\') + ")$'))",
                "message": f"every key must be {self.key_hint or 'a string'}"}]
        return self._with_meta(schema)


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule across fields: `check` runs in Python, `cel` is the same rule for the API server.
    `check=None` is a transition rule (old versus new object) that only the API server can apply."""
    check: Callable[[Any], bool] | None
    message: str
    cel: str | None = None
    field: str | None = None


class Obj(Node):
    def __init__(self, cls, description, fields: dict[str, Node], *, required=(), rules=(),
                 default=MISSING):
        self.cls, self.description, self.fields = cls, description, fields
        self.required, self.rules, self.default = set(required), list(rules), default

    def parse(self, value, path, problems):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            problems.add(path, f"must be a mapping, got {show(value)}")
            return None
        for key in value:
            if key not in self.fields:
                hint = difflib.get_close_matches(str(key), list(self.fields), n=1)
                extra = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(self.fields)})"
                problems.add(key_path(path, key), f"unknown field{extra}")
        kwargs = {}
        before = len(problems.items)
        for name, node in self.fields.items():
            attr = _attr(name)
            if name in value and value[name] is not None:
                kwargs[attr] = node.parse(value[name], key_path(path, name), problems)
            elif name in self.required:
                problems.add(key_path(path, name), "is required")
                kwargs[attr] = None
            elif node.default is not MISSING:
                kwargs[attr] = node.parse(node.default, key_path(path, name), problems)
            else:
                kwargs[attr] = None
        obj = self.cls(**kwargs)
        if len(problems.items) == before:
            for rule in self.rules:
                if rule.check is not None and not rule.check(obj):
                    problems.add(key_path(path, rule.field) if rule.field else path, rule.message)
        return obj

    def openapi(self):
        s: dict = {"type": "object", "properties": {k: v.openapi() for k, v in self.fields.items()}}
        if self.required:
            s["required"] = sorted(self.required)
        cel = [r for r in self.rules if r.cel]
        if cel:
            s["x-kubernetes-validations"] = [
                {"rule": r.cel, "message": r.message, **({"fieldPath": f".{r.field}"} if r.field else {})}
                for r in cel
            ]
        return self._with_meta(s)


def _attr(name: str) -> str:
    if keyword.iskeyword(name):
        return name + "_"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def key_path(path: str, key: Any) -> str:
    """`spec.target`; a key that is not a plain name is quoted, so that an empty or dotted one still shows:
    `spec[""]`, `spec["a.b"]`."""
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_-]+", key):
        return f"{path}.{key}" if path else key
    shown = json.dumps(key) if isinstance(key, str) else str(key)
    return f"{path}[{shown}]"
