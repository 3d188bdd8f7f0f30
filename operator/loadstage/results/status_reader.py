"""Reading a status (or an artifact) that may be damaged: a result file cut short or edited, an old layout.
The model's `from_status` methods read through `Fields`, which knows where in the document it is: a key that
is missing, a mapping that is not one, or a value of a kind its field's type does not allow raises ShapeError
naming the first bad path (`status.variants[0].stages[1].latencyMs: missing`), never a KeyError or a TypeError
three calls later."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Callable, Mapping

_where: dict[str, Any] = {"path": "", "mapping": False}   # the last value read: where, and whether a mapping


class ShapeError(ValueError):
    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _wrap(value: Any, path: str) -> Any:
    _where.update(path=path, mapping=isinstance(value, dict))
    if isinstance(value, dict):
        return Fields(value, path)
    if isinstance(value, list):
        return Items(value, path)
    return value


class Fields(dict):
    """A mapping of the document that knows its path."""

    def __init__(self, raw: Mapping, path: str):
        super().__init__(raw)
        self.path = path

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def __getitem__(self, key):
        if key not in self:
            raise ShapeError(self._at(key), "missing")
        return _wrap(super().__getitem__(key), self._at(key))

    def get(self, key, default=None):
        return _wrap(super().__getitem__(key), self._at(key)) if key in self else default

    def items(self):
        return [(k, _wrap(v, self._at(k))) for k, v in super().items()]

    def values(self):
        return [v for _, v in self.items()]


class Items(list):
    """A list of the document that knows its path."""

    def __init__(self, raw: list, path: str):
        super().__init__(raw)
        self.path = path

    def __iter__(self):
        for i, value in enumerate(list.__iter__(self)):
            yield _wrap(value, f"{self.path}[{i}]")

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list.__getitem__(self, i)
        return _wrap(list.__getitem__(self, i), f"{self.path}[{i}]")


def read(raw: Any, path: str) -> Any:
    """`raw` as the model's readers should see it."""
    return _wrap(raw, path)


def _allows(hint: Any, value: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_allows(h, value) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is tuple and len(args := typing.get_args(hint)) > 1 and args[1] is not ...:   # JSON has lists
        return isinstance(value, (list, tuple)) and len(value) == len(args) and all(map(_allows, args, value))
    if origin in (tuple, list, dict):
        if not isinstance(value, origin):
            return False
        args = typing.get_args(hint)
        if origin is dict:
            return len(args) < 2 or all(_allows(args[1], v) for v in value.values())
        return not args or all(_allows(args[0], item) for item in value)
    if dataclasses.is_dataclass(hint):
        return isinstance(value, hint)
    if hint in (list, dict, tuple):   # a bare container: of any items
        return isinstance(value, list if hint is tuple else hint)
    return True


def checked(value: Any, entries: dict[str, Any], required: tuple[str, ...] = (), optional: bool = True) -> Any:
    """A mapping whose known entries must be of their types (the rest are kept as they are), the `required` ones
    present; None stays None if the mapping is `optional`."""
    if value is None and optional:
        return None
    if not isinstance(value, Mapping):
        raise ShapeError(_where["path"], f"must be a mapping, got {_shown(value)}")
    for key in required:
        if key not in value:
            raise ShapeError(value._at(key) if isinstance(value, Fields) else key, "missing")
    for key, hint in entries.items():
        if key in value and not _allows(hint, dict.__getitem__(value, key)):
            at = value._at(key) if isinstance(value, Fields) else key
            raise ShapeError(at, f"must be {_kind(hint)}, got {_shown(dict.__getitem__(value, key))}")
    return dict(value)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def reads_status(method: Callable) -> classmethod:
    """Around a dataclass's `from_status(cls, d)`: `d` must be a mapping, and every field it fills must be of
    its type. A bad field is named by its key in `d` (the one holding the very value, or the field's own name)."""
    @functools.wraps(method)
    def reader(cls, d, *args, **kwargs):
        if not isinstance(d, Mapping):
            if _where["mapping"]:    # its keys, read as a list's items
                raise ShapeError(_where["path"], "must be a list, got a mapping")
            raise ShapeError(_where["path"] or "(document)", f"must be a mapping, got {_shown(d)}")
        try:
            instance = method(cls, d, *args, **kwargs)
        except (TypeError, ValueError, AttributeError, IndexError) as e:
            if isinstance(e, ShapeError):
                raise
            raise ShapeError(getattr(d, "path", "") or "(document)", f"cannot be read: {e}") from None
        if isinstance(d, Fields):
            hints = typing.get_type_hints(cls)
            for f in dataclasses.fields(cls):
                value = getattr(instance, f.name)
                hint = hints[f.name]
                if not _allows(hint, value):
                    key = next((k for k in (_camel(f.name), *d) if k in d and dict.__getitem__(d, k) is value),
                               _camel(f.name))
                    if isinstance(value, dict) and typing.get_origin(_optional(hint)) is dict:
                        entry = typing.get_args(_optional(hint))[1]
                        bad = next(k for k, v in value.items() if not _allows(entry, v))
                        raise ShapeError(f"{d._at(key)}.{bad}", f"must be {_kind(entry)}, got {_shown(value[bad])}")
                    raise ShapeError(d._at(key), f"must be {_kind(hint)}, got {_shown(value)}")
        return instance
    return classmethod(reader)


def _optional(hint: Any) -> Any:
    """X of `X | None`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [h for h in typing.get_args(hint) if h is not type(None)]
        return rest[0] if len(rest) == 1 else hint
    return hint


def _kind(hint: Any) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null"}
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_kind(h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is tuple and len(args := typing.get_args(hint)) > 1 and args[1] is not ...:
        return f"a list of {len(args)} numbers" if all(a is float for a in args) else f"a list of {len(args)}"
    if typing.get_origin(hint) in (tuple, list):
        return "a list"
    if typing.get_origin(hint) is dict:
        return "a mapping"
    return names.get(hint, getattr(hint, "__name__", str(hint)))
