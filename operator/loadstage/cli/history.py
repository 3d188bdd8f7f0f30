"""`loadstage history` and `loadstage history check`, and a local run's record in the history."""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

from loadstage.api.schema import ValidationError
from loadstage.cli.parser import EXIT_OK, EXIT_REGRESSION
from loadstage.history.locations import Location, default_location, location
from loadstage.history.records import record_of
from loadstage.history.store import HistoryError, Store, StoredRun
from loadstage.history.trends import Checked, check
from loadstage.history.views import as_csv, as_html, as_json, as_table, check_lines

ATTEMPTS = (0.0, 1.0, 3.0)   # a record's write, and the waits before its retries
HISTORY_PREFIX = "history:"


def where(args: Any) -> tuple[Location, str]:
    """The history the options name, and the option that named it (for its errors)."""
    try:
        if args.history:
            return location(args.history), "--history"
        if os.environ.get("LOADSTAGE_HISTORY"):
            return default_location(), "LOADSTAGE_HISTORY"
        return default_location(), "the default history ($XDG_DATA_HOME/loadstage/history.sqlite)"
    except ValueError as e:
        raise ValidationError([("--history" if args.history else "LOADSTAGE_HISTORY", str(e))]) from None


def opened(found: Location, option: str, writing: bool = False) -> Store:
    if writing and (problem := found.problem()):
        raise ValidationError([(option, problem)])
    try:
        return Store(found)
    except HistoryError as e:
        raise ValidationError([(option, str(e))]) from None


def prepared(args: Any) -> Location | None:
    """Before a run: the history it records into, made or brought up to date, or the option's error."""
    if args.no_history:
        return None
    found, option = where(args)
    with opened(found, option, writing=True) as store:
        try:
            store.check_writable()
        except HistoryError as e:
            raise ValidationError([(option, str(e))]) from None
    return found


def record(found: Location, document: dict[str, Any], *, uid: str, labels: dict[str, str]) -> str:
    """After a run: its record, retried; a line that says what was kept, or why not."""
    made = record_of(document, uid=uid, source="local", labels=labels)
    error = None
    for wait in ATTEMPTS:
        time.sleep(wait)
        try:
            with Store(found) as store:
                added = store.record(made, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        except HistoryError as e:
            error = str(e)
            continue
        said = "recorded" if added else "already recorded"
        return (f"history: {said} run {uid[:8]} of series {made.run.series!r} ({len(made.variants)} variant(s), "
                f"{len(made.stages)} stage(s), with their histograms) in {found.shown}; "
                f"`loadstage history {made.run.series}` lists its runs")
    return f"history: NOT recorded after {len(ATTEMPTS)} attempts: {error}; the result file keeps the run"


def cmd_history(args: Any) -> int:
    words = list(args.words)
    checking = bool(words) and words[0] == "check"
    if checking:
        words = words[1:]
    if len(words) > 1:
        raise ValidationError([("history", f"one series at most, got {len(words)}: {' '.join(words)}")])
    found, option = where(args)
    if found.scheme == "sqlite" and not Path(found.target).exists():
        raise ValidationError([(option, f"{found.shown}: no history there yet (a run records into it)")])
    try:
        return _listed(args, words, checking, found, option)
    except HistoryError as e:
        raise ValidationError([(option, str(e))]) from None


def _listed(args: Any, words: list[str], checking: bool, found: Location, option: str) -> int:
    with opened(found, option) as store:
        every = store.series()
        names = [s for s, _, _ in every]
        if words and words[0] not in names:
            known = ", ".join(names[:10]) or "none"
            raise ValidationError([("SERIES", f"no series {words[0]!r} in {found.shown}; it has: {known}")])
        if checking:
            return _check(store, words or names, args)
        if not words and len(names) != 1:
            _write(args, "\n".join([f"{len(names)} series in {found.shown}:"] + [
                f"  {name}: {count} run(s), the last ended {last or 'unknown'}" for name, count, last in every])
                + "\n")
            return EXIT_OK
        series = words[0] if words else names[0]
        runs = store.runs(series, last=args.last)
    text = as_html(series, runs, _checked(runs, args)) if args.format == "html" else \
        {"table": lambda r: as_table(r) + "\n", "csv": as_csv, "json": as_json}[args.format](runs)
    _write(args, text)
    return EXIT_OK


def _check(store: Store, names: list[str], args: Any) -> int:
    worse = 0
    for name in names:
        runs = store.runs(name, last=args.last)
        checked = _checked(runs, args)
        worse += len(checked.worse())
        print("\n".join(check_lines(name, runs, checked)))
    if worse:
        print(f"{worse} figure(s) worse: exit {EXIT_REGRESSION}")
        return EXIT_REGRESSION
    return EXIT_OK


def _checked(runs: list[StoredRun], args: Any) -> Checked:
    return check(runs, p_value=args.p_value, min_change=args.min_change, min_error_change=args.min_error_change,
                 recent=args.recent)


def _write(args: Any, text: str) -> None:
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)


def kept_document(source: str, args: Any) -> dict[str, Any]:
    """`history:SERIES`, `history:SERIES~N` or `history:UID` (`loadstage compare`): that run's result document."""
    found, option = where(args)
    try:
        with opened(found, option) as store:
            return store.document(source.removeprefix(HISTORY_PREFIX))[1]
    except HistoryError as e:
        raise ValidationError([(source, str(e))]) from None
