"""The command line's argument types: each turns one option's text into its value, or refuses it naming the
rule (argparse prints that with the option's name)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from loadstage.api.quantities import Duration
from loadstage.api.schema import Node, Problems
from loadstage.api.spec import HISTORY_LABEL_KEY, STAGE
from loadstage.reports import compare

LABEL_KEY = re.compile(HISTORY_LABEL_KEY)


def port_arg(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text!r}")
    return int(text)


def node_arg(node: Node) -> Callable[[str], Any]:
    """An option parsed by the schema node of the field it stands for, under the same rules."""
    def parse(text: str) -> Any:
        problems = Problems()
        value = node.parse(text, "", problems)
        if problems.items:
            raise argparse.ArgumentTypeError("; ".join(message for _, message in problems.items))
        return value
    return parse


stage_duration_arg = node_arg(STAGE.fields["duration"])
hold_arg = node_arg(Duration("", maximum="1h"))


def scale_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"must be a number > 0 and <= 100, got {text!r}")
    return value


def tolerance_arg(text: str) -> float:
    try:
        return compare.parse_tolerance(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def confidence_arg(text: str) -> float:
    try:
        return compare.parse_confidence(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def label_arg(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not LABEL_KEY.fullmatch(key):
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, KEY letters, digits, '.', '_', '/' or '-', got {text!r}")
    return key, value


def positive_arg(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return int(text)


def share_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, got {text!r}")
    return value


def percent_arg(text: str) -> float:
    try:
        value = float(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        value = -1
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be a share from 0% to under 100% (e.g. 5%), got {text!r}")
    return value


def loads_arg(text: str) -> tuple[float, float]:
    low, colon, high = text.partition(":")
    try:
        loads = (float(low), float(high))
    except ValueError:
        loads = (-1.0, -1.0)
    if not colon or not 0 < loads[0] <= loads[1]:
        raise argparse.ArgumentTypeError(f"must be MIN:MAX req/s, 0 < MIN <= MAX (e.g. 50:600), got {text!r}")
    return loads


def seconds_arg(text: str) -> float:
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be seconds, 0 or more (e.g. 30s), got {text!r}")
    return value
