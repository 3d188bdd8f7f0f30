"""Durations ("90s", "20m", "1h30m", "250ms") and percentages ("1%"): how they parse, print, and
appear in the schema."""

from __future__ import annotations

import re

from loadstage.api.schema import MISSING, Node, show

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

    def __init__(self, description, *, minimum=None, maximum=None, default=MISSING):
        self.description, self.default = description, default
        self.minimum, self.maximum = minimum, maximum

    def parse(self, value, path, problems):
        if not isinstance(value, str) or not re.fullmatch(DURATION_PATTERN, value):
            problems.add(path, f"must be a duration such as 90s, 20m or 1h30m, got {show(value)}")
            return None
        seconds = parse_duration(value)
        if self.minimum is not None and seconds < parse_duration(self.minimum):
            problems.add(path, f"must be at least {self.minimum}, got {value}")
        if self.maximum is not None and seconds > parse_duration(self.maximum):
            problems.add(path, f"must be at most {self.maximum}, got {value}")
        return seconds

    def openapi(self):
        schema = {"type": "string", "pattern": f"^{DURATION_PATTERN}$", "maxLength": 20}
        rules = ([{"rule": f"duration(self) >= duration('{self.minimum}')",
                   "message": f"must be at least {self.minimum}"}] if self.minimum else []) + \
                ([{"rule": f"duration(self) <= duration('{self.maximum}')",
                   "message": f"must be at most {self.maximum}"}] if self.maximum else [])
        if rules:
            schema["x-kubernetes-validations"] = rules
        return self._with_meta(schema)


PERCENT_PATTERN = r"(100(\.0+)?|\d{1,2}(\.\d+)?)%"


class Percent(Node):
    """'1%' or '0.5%'; parses to a fraction (0.01)."""

    def __init__(self, description, *, default=MISSING):
        self.description, self.default = description, default

    def parse(self, value, path, problems):
        if not isinstance(value, str) or not re.fullmatch(PERCENT_PATTERN, value):
            problems.add(path, f"must be a percentage such as '1%' or '0.5%', got {show(value)}")
            return None
        fraction = float(value[:-1]) / 100
        if fraction > 1:
            problems.add(path, f"must be at most 100%, got {value}")
        return fraction

    def openapi(self):
        return self._with_meta({"type": "string", "pattern": f"^{PERCENT_PATTERN}$", "maxLength": 10})
