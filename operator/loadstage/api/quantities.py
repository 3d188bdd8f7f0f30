"""Durations ("90s", "20m", "1h30m", "250ms") and percentages ("1%"): how they parse, print, and
appear in the schema."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from loadstage.api.schema import MISSING, Node, Problems, show

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
DURATION_PATTERN = r"(\d+(\.\d+)?(ms|s|m|h))+"
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration such as '90s', '20m', '1h30m' or '250ms'."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))


def format_duration(seconds: float) -> str:
    if seconds and (seconds < 1 or seconds != int(seconds)):
        return f"{round(seconds * 1000)}ms"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


class Duration(Node):
    """A Go-style duration string; parses to seconds (float)."""

    def __init__(self, description: str, *, minimum: str | None = None, maximum: str | None = None,
                 default: Any = MISSING) -> None:
        self.description, self.default = description, default
        self.minimum, self.maximum = minimum, maximum

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, str) or not re.fullmatch(DURATION_PATTERN, value):
            problems.add(path, f"must be a duration such as 90s, 20m or 1h30m, got {show(value)}")
            return None
        seconds = parse_duration(value)
        if self.minimum is not None and seconds < parse_duration(self.minimum):
            problems.add(path, f"must be at least {self.minimum}, got {value}")
        if self.maximum is not None and seconds > parse_duration(self.maximum):
            problems.add(path, f"must be at most {self.maximum}, got {value}")
        return seconds

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "pattern": f"^{DURATION_PATTERN}$", "maxLength": 20}
        rules = ([{"rule": f"duration(self) >= duration('{self.minimum}')",
                   "message": f"must be at least {self.minimum}"}] if self.minimum else []) + \
                ([{"rule": f"duration(self) <= duration('{self.maximum}')",
                   "message": f"must be at most {self.maximum}"}] if self.maximum else [])
        if rules:
            schema["x-kubernetes-validations"] = rules
        return self._with_meta(schema)


PERCENT_PATTERN = r"\d{1,3}(\.\d+)?%"   # at most 100% is a rule, so that it can say so


class Percent(Node):
    """'1%' or '0.5%'; parses to a fraction (0.01)."""

    def __init__(self, description: str, *, default: Any = MISSING, maximum: str = "100%") -> None:
        self.description, self.default, self.maximum = description, default, maximum

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, str) or not re.fullmatch(PERCENT_PATTERN, value):
            problems.add(path, f"must be a percentage such as '1%' or '0.5%', got {show(value)}")
            return None
        fraction = float(value[:-1]) / 100
        if fraction > float(self.maximum[:-1]) / 100:
            problems.add(path, f"must be at most {self.maximum}, got {value}")
        return fraction

    def openapi(self) -> dict[str, Any]:
        limit = float(self.maximum[:-1])
        return self._with_meta({"type": "string", "pattern": f"^{PERCENT_PATTERN}$", "maxLength": 10,
                                "x-kubernetes-validations": [{"rule": f"double(self.replace('%', '')) <= {limit}",
                                                              "message": f"must be at most {self.maximum}"}]})


def format_percent(fraction: float) -> str:
    """0.005 -> '0.5%': a written percentage, as written."""
    return f"{fraction * 100:.6g}%"


CPU_PATTERN = r"\d+(\.\d+)?m?"
MEMORY_PATTERN = r"\d+(\.\d+)?(Ki|Mi|Gi|Ti|k|M|G|T)?"
_MEMORY_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                 "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def cpu_cores(text: str) -> float:
    """Cores in a Kubernetes CPU quantity: '250m' is 0.25, '2' is 2."""
    if not re.fullmatch(CPU_PATTERN, text):
        raise ValueError(f"not a CPU quantity: {text!r}")
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def memory_bytes(text: str) -> int:
    """Bytes in a Kubernetes memory quantity: '512Mi', '1Gi', '500M' or a plain number of bytes."""
    match = re.fullmatch(MEMORY_PATTERN, text)
    if not match:
        raise ValueError(f"not a memory quantity: {text!r}")
    found = re.fullmatch(r"([\d.]+)(\D*)", text)
    assert found is not None, text   # a quantity the schema's pattern let through
    number, unit = found.groups()
    return int(float(number) * _MEMORY_UNITS[unit])


class Quantity(Node):
    """A Kubernetes quantity of CPU ('500m', 2) or memory ('512Mi'), written as a string or a number;
    parses to its string form, as a pod spec takes it."""

    KINDS: ClassVar[dict[str, tuple[str, Callable[[str], float], str]]] = {
             "cpu": (CPU_PATTERN, cpu_cores, "a CPU quantity such as 500m or 2"),
             "memory": (MEMORY_PATTERN, memory_bytes, "a memory quantity such as 512Mi or 1Gi")}

    def __init__(self, description: str, kind: str, *, minimum: str, maximum: str) -> None:
        self.description, self.quantity, self.minimum, self.maximum = description, kind, minimum, maximum

    def parse(self, value: Any, path: str, problems: Problems) -> Any:
        pattern, amount, hint = self.KINDS[self.quantity]
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(text, str) or not re.fullmatch(pattern, text):
            quote = " (write a fraction as a string, e.g. '0.5')" if isinstance(value, float) else ""
            problems.add(path, f"must be {hint}{quote}, got {show(value)}")
            return None
        if amount(text) < amount(self.minimum):
            problems.add(path, f"must be at least {self.minimum}, got {text}")
        elif amount(text) > amount(self.maximum):
            problems.add(path, f"must be at most {self.maximum}, got {text}")
        return text

    def openapi(self) -> dict[str, Any]:
        pattern = self.KINDS[self.quantity][0]
        return self._with_meta({
            "anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True,
            "pattern": f"^{pattern}$", "maxLength": 20,
            "x-kubernetes-validations": [
                {"rule": f"quantity(string(self)).compareTo(quantity('{self.minimum}')) >= 0",
                 "message": f"must be at least {self.minimum}"},
                {"rule": f"quantity(string(self)).compareTo(quantity('{self.maximum}')) <= 0",
                 "message": f"must be at most {self.maximum}"}]})
