"""A small declarative schema. Each node renders itself as a Kubernetes structural OpenAPI v3 schema and:
- for a document people write (the spec), parses it, reporting every error by its field path;
- for a document loadstage writes (the status, what crosses a process), reads it back, stopping at the first
  bad path (ShapeError), and dumps a typed value to it, refusing a key or a value its declaration lacks.
The spec, the status, their CRD schemas and their reference are all generated from it. (It is over 300 lines
because each node keeps its four operations side by side.)"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import json
import keyword
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

MISSING: Any = object()


class ValidationError(Exception):
    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("\n".join(f"{path}: {msg}" for path, msg in problems))


class ShapeError(ValueError):
    """A document loadstage wrote (a status, a result file, an artifact) that does not have its declared shape."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise ValidationError(self.items)


class Node:
    description: str = ""
    default: Any = MISSING
    nullable: bool = False
    noun: str = "a value"     # what a value must be, in an error

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        raise NotImplementedError

    def openapi(self) -> dict[str, Any]:
        raise NotImplementedError

    def fits(self, value: Any) -> bool:
        """Whether `value` (not None) is of this node's JSON type."""
        return True

    def read(self, value: Any, path: str) -> Any:
        """`value` of a document loadstage wrote, as its typed value; raises ShapeError at the first bad path."""
        if value is None and self.nullable:
            return None
        if value is None or not self.fits(value):
            raise ShapeError(path, f"must be {self.expected()}, got {shown(value)}")
        return self.check(value, path)

    def check(self, value: Any, path: str) -> Any:
        return value

    def dump(self, value: Any, path: str) -> Any:
        """The typed `value` as JSON; raises ShapeError where it is not of its declared kind."""
        return self.read(value, path)

    def expected(self) -> str:
        return self.noun + (" or null" if self.nullable else "")

    def _with_meta(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.description:
            schema["description"] = self.description
        if self.default is not MISSING and self.default is not None:
            schema["default"] = self.default
        if self.nullable:
            schema["nullable"] = True
        return schema


class Int(Node):
    noun = "an integer"

    def __init__(self, description: str, *, minimum: int | None = None, maximum: int | None = None,
                 default: Any = MISSING, nullable: bool = False) -> None:
        self.description, self.minimum, self.maximum, self.default = description, minimum, maximum, default
        self.nullable = nullable

    def fits(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.add(path, f"must be an integer, got {show(value)}")
            return None
        if self.minimum is not None and value < self.minimum:
            problems.add(path, f"must be >= {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            problems.add(path, f"must be <= {self.maximum}, got {value}")
        return value

    def openapi(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "integer"}
        if self.minimum is not None:
            s["minimum"] = self.minimum
        if self.maximum is not None:
            s["maximum"] = self.maximum
        return self._with_meta(s)


class Num(Node):
    """A number; `above` and `below` are exclusive bounds."""
    noun = "a number"

    def __init__(self, description: str, *, above: float | None = None, below: float | None = None,
                 nullable: bool = False) -> None:
        self.description, self.above, self.below, self.nullable = description, above, below, nullable

    def fits(self, value: Any) -> bool:
        return is_number(value)

    def _outside(self, value: Any) -> str | None:
        if (self.above is not None and value <= self.above) or (self.below is not None and value >= self.below):
            bounds = [f"above {self.above:g}" if self.above is not None else "",
                      f"below {self.below:g}" if self.below is not None else ""]
            return f"must be {' and '.join(b for b in bounds if b)}, got {value}"
        return None

    def check(self, value: Any, path: str) -> Any:
        if (outside := self._outside(value)) is not None:
            raise ShapeError(path, outside)
        return value

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        if value is not None and not self.fits(value):
            problems.add(path, f"must be a number, got {show(value)}")
        elif value is not None and (outside := self._outside(value)) is not None:
            problems.add(path, outside)
        return value

    def openapi(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "number"}
        if self.above is not None:
            s.update(minimum=self.above, exclusiveMinimum=True)
        if self.below is not None:
            s.update(maximum=self.below, exclusiveMaximum=True)
        return self._with_meta(s)


class Pair(Node):
    """[low, high]: two numbers, read as a tuple."""
    noun = "a list of 2 numbers"

    def __init__(self, description: str, *, nullable: bool = False) -> None:
        self.description, self.nullable = description, nullable

    def fits(self, value: Any) -> bool:
        return isinstance(value, (list, tuple)) and len(value) == 2 and all(is_number(v) for v in value)

    def read(self, value: Any, path: str) -> Any:
        found = super().read(value, path)
        return None if found is None else (found[0], found[1])

    def dump(self, value: Any, path: str) -> Any:
        found = super().read(value, path)
        return None if found is None else [found[0], found[1]]

    def openapi(self) -> dict[str, Any]:
        return self._with_meta({"type": "array", "items": {"type": "number", "description": "A bound."},
                                "minItems": 2, "maxItems": 2})


class OpenPair(Pair):
    """[low, high], high null where nothing bounds it from above."""

    def fits(self, value: Any) -> bool:
        return isinstance(value, (list, tuple)) and len(value) == 2 and is_number(value[0]) and \
            (value[1] is None or is_number(value[1]))

    def openapi(self) -> dict[str, Any]:
        bound = {"type": "number", "nullable": True, "description": "A bound."}
        return self._with_meta({"type": "array", "items": bound, "minItems": 2, "maxItems": 2})


class Json(Node):
    """Any JSON value: only for documents that never reach the API server (an artifact's rows)."""

    def __init__(self, description: str, *, nullable: bool = True) -> None:
        self.description, self.nullable = description, nullable

    def openapi(self) -> dict[str, Any]:
        return self._with_meta({"x-kubernetes-preserve-unknown-fields": True})


class Bool(Node):
    noun = "true or false"

    def __init__(self, description: str, *, default: Any = MISSING, nullable: bool = False) -> None:
        self.description, self.default, self.nullable = description, default, nullable

    def fits(self, value: Any) -> bool:
        return isinstance(value, bool)

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, bool):
            problems.add(path, f"must be true or false, got {show(value)}")
        return value

    def openapi(self) -> dict[str, Any]:
        return self._with_meta({"type": "boolean"})


class Str(Node):
    noun = "a string"

    def __init__(self, description: str, *, enum: Sequence[str] | None = None, pattern: str | None = None,
                 pattern_hint: str | None = None, max_length: int | None = None, default: Any = MISSING,
                 nullable: bool = False, format: str | None = None) -> None:
        self.description, self.enum, self.pattern, self.default = description, enum, pattern, default
        self.pattern_hint, self.max_length, self.nullable, self.format = pattern_hint, max_length, nullable, format

    def fits(self, value: Any) -> bool:
        return isinstance(value, str)

    def check(self, value: Any, path: str) -> Any:
        if self.enum is not None and value not in self.enum:
            raise ShapeError(path, f"must be one of {', '.join(self.enum)}, got {value!r}")
        return value

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
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

    def openapi(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "string"}
        if self.enum is not None:
            s["enum"] = list(self.enum)
        if self.pattern is not None:
            s["pattern"] = f"^{self.pattern}$"
        if self.max_length is not None:
            s["maxLength"] = self.max_length
        if self.format is not None:
            s["format"] = self.format
        return self._with_meta(s)


class ListOf(Node):
    noun = "a list"

    def __init__(self, description: str, item: Node, *, min_items: int | None = None, max_items: int | None = None,
                 unique: bool = False, default: Any = MISSING, nullable: bool = False,
                 map_keys: Sequence[str] | None = None) -> None:
        """`map_keys`: its items are objects identified by these keys (a list-type map, as conditions are)."""
        self.description, self.item, self.default = description, item, default
        self.min_items, self.max_items, self.unique = min_items, max_items, unique
        self.nullable, self.map_keys = nullable, map_keys

    def fits(self, value: Any) -> bool:
        return isinstance(value, (list, tuple))

    def read(self, value: Any, path: str) -> Any:
        if isinstance(value, Mapping):
            raise ShapeError(path, "must be a list, got a mapping")
        found = super().read(value, path)
        return None if found is None else [self.item.read(v, f"{path}[{i}]") for i, v in enumerate(found)]

    def dump(self, value: Any, path: str) -> Any:
        if value is None or not self.fits(value):
            return super().read(value, path)
        return [self.item.dump(v, f"{path}[{i}]") for i, v in enumerate(value)]

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
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

    def openapi(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "array", "items": self.item.openapi()}
        if self.min_items is not None:
            s["minItems"] = self.min_items
        if self.max_items is not None:
            s["maxItems"] = self.max_items
        if self.unique:
            s["x-kubernetes-list-type"] = "set"
        if self.map_keys:
            s.update({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(self.map_keys)})
        return self._with_meta(s)


class MapOf(Node):
    noun = "a mapping"

    def __init__(self, description: str, value: Node, *, key_pattern: str | None = None, key_hint: str | None = None,
                 keys_in_cel: bool = True, default: Any = MISSING, nullable: bool = False) -> None:
        """`keys_in_cel`: the API server checks the keys too (a CEL rule, which its cost budget may not take)."""
        self.description, self.value, self.default = description, value, default
        self.key_pattern, self.key_hint, self.keys_in_cel = key_pattern, key_hint, keys_in_cel
        self.nullable = nullable

    def fits(self, value: Any) -> bool:
        return isinstance(value, Mapping)

    def read(self, value: Any, path: str) -> Any:
        found = super().read(value, path)
        return None if found is None else {k: self.value.read(v, key_path(path, k)) for k, v in found.items()}

    def dump(self, value: Any, path: str) -> Any:
        if value is None or not self.fits(value):
            return super().read(value, path)
        return {k: self.value.dump(v, key_path(path, k)) for k, v in value.items()}

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
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

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "additionalProperties": self.value.openapi()}
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
    detail: Callable[[Any], str | None] | None = None   # the parser's message adds it, in parentheses


class Written:
    """A dataclass of a document loadstage writes, read and dumped through the one Obj declaring it."""
    __wire__: ClassVar[Obj]

    @classmethod
    def from_status(cls, raw: Any, path: str = "") -> Self:
        value: Self = cls.__wire__.read(raw, path)
        return value

    def to_status(self) -> dict[str, Any]:
        value: dict[str, Any] = self.__wire__.dump(self, "")
        return value


def omit_none(value: Any, owner: Any) -> bool:
    return value is None


def omit_empty(value: Any, owner: Any) -> bool:
    return not value


@dataclasses.dataclass(frozen=True)
class Field:
    """How an Obj of a document loadstage writes holds one of its fields:
    - `attr`: the attribute of its class (by default the key in snake case);
    - `absent`: its value where a document lacks it (an older layout), unless the Obj requires it;
    - `omit(value, owner)`: whether a dump leaves the key out (by default it writes null);
    - `derived`: written from a property of the owner, never read back;
    - `description`: where the node is shared, what it is here."""
    node: Node
    attr: str | None = None
    absent: Any = None
    omit: Callable[[Any, Any], bool] | None = None
    derived: bool = False
    description: str | None = None


class Obj(Node):
    """An object. As a spec's, its fields parse into `cls` by keyword (`rules` across them). As a written
    document's, `cls` is a dataclass (each field a `Field` or a node) or a TypedDict (then the keys are the
    fields, and an absent key stays absent); `on_read(value, raw, path)` may check or complete what was read."""
    noun = "a mapping"

    def __init__(self, cls: Any, description: str, fields: Mapping[str, Node | Field], *,
                 required: Iterable[str] = (), rules: Iterable[Rule] = (), default: Any = MISSING,
                 nullable: bool = False, on_read: Callable[[Any, Mapping[str, Any], str], Any] | None = None) -> None:
        self.cls, self.description = cls, description
        self.fields = {k: f.node if isinstance(f, Field) else f for k, f in fields.items()}
        self.wire = {k: f if isinstance(f, Field) else Field(f) for k, f in fields.items()}
        self.required, self.rules, self.default = set(required), list(rules), default
        self.nullable, self.on_read = nullable, on_read
        self.keyed = typing.is_typeddict(cls) or cls is dict
        self._tuples: set[str] | None = None
        if isinstance(cls, type) and issubclass(cls, Written):
            cls.__wire__ = self

    def attr(self, key: str) -> str:
        return self.wire[key].attr or _attr(key)

    def not_null(self) -> Obj:
        """This object where null is not one (an item of a list of them)."""
        found = copy.copy(self)
        found.nullable = False
        return found

    def fits(self, value: Any) -> bool:
        return isinstance(value, Mapping)

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
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
                    at = functools.reduce(key_path, rule.field.split("."), path) if rule.field else path
                    problems.add(at, f"{rule.message} ({rule.detail(obj)})" if rule.detail else rule.message)
        return obj

    def openapi(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "object", "properties": {k: _described(v.openapi(), self.wire[k].description)
                                                    for k, v in self.fields.items()}}
        if self.required:
            s["required"] = sorted(self.required)
        cel = [r for r in self.rules if r.cel]
        if cel:
            s["x-kubernetes-validations"] = [
                {"rule": r.cel, "message": r.message, **({"fieldPath": f".{r.field}"} if r.field else {})}
                for r in cel
            ]
        return self._with_meta(s)

    def read(self, value: Any, path: str) -> Any:
        found = super().read(value, path)
        if found is None:
            return None
        for key in self.required:
            if key not in found:
                raise ShapeError(key_path(path, key), "missing")
        if self.keyed:
            read = {k: self.fields[k].read(v, key_path(path, k)) for k, v in found.items() if k in self.fields}
            return self._done(read, found, path)
        tuples = self._tuple_attrs()
        kwargs = {}
        for key, field in self.wire.items():
            if field.derived:
                continue
            attr = self.attr(key)
            if key in found:
                item = field.node.read(found[key], key_path(path, key))
                kwargs[attr] = tuple(item) if attr in tuples and isinstance(item, list) else item
            else:
                kwargs[attr] = copy.copy(field.absent) if isinstance(field.absent, (list, dict)) else field.absent
        return self._done(self.cls(**kwargs), found, path)

    def _done(self, value: Any, raw: Mapping[str, Any], path: str) -> Any:
        return value if self.on_read is None else self.on_read(value, raw, path)

    def dump(self, value: Any, path: str) -> Any:
        if value is None:
            return super().read(value, path)
        if self.keyed:
            if not isinstance(value, Mapping):
                raise ShapeError(path, f"must be {self.expected()}, got {shown(value)}")
            for key in value:
                if key not in self.fields:
                    raise ShapeError(key_path(path, key), "is not declared")
            return {k: node.dump(value[k], key_path(path, k)) for k, node in self.fields.items() if k in value}
        if not isinstance(value, self.cls):
            raise ShapeError(path, f"must be a {self.cls.__name__}, got {shown(value)}")
        out = {}
        for key, field in self.wire.items():
            item = getattr(value, self.attr(key))
            if field.omit is None or not field.omit(item, value):
                out[key] = field.node.dump(item, key_path(path, key))
        return out

    def _tuple_attrs(self) -> set[str]:
        """The attributes of `cls` declared as tuples: a list read into one becomes a tuple."""
        if self._tuples is None:
            def tuple_typed(hint: Any) -> bool:
                if typing.get_origin(hint) in (typing.Union, types.UnionType):
                    return any(tuple_typed(h) for h in typing.get_args(hint))
                return typing.get_origin(hint) is tuple
            hints = typing.get_type_hints(self.cls)
            self._tuples = {name for name, hint in hints.items() if tuple_typed(hint)}
        return self._tuples


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    return schema if description is None else {**schema, "description": description}


@functools.cache
def _attr(name: str) -> str:
    if keyword.iskeyword(name):
        return name + "_"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def key_path(path: str, key: Any) -> str:
    """`spec.target`; a key that is not a plain name is quoted, so that an empty or dotted one still shows:
    `spec[""]`, `spec["a.b"]`."""
    if isinstance(key, str) and _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    shown = json.dumps(key) if isinstance(key, str) else str(key)
    return f"{path}[{shown}]"
