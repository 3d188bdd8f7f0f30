"""Timestamps as the status writes them: UTC, to the second, with a Z."""

from __future__ import annotations

import datetime as dt


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def now() -> str:
    return iso(dt.datetime.now(dt.UTC))


def parse(stamp: str) -> dt.datetime:
    """A status timestamp (or any RFC 3339 time with a Z) as an aware datetime."""
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
