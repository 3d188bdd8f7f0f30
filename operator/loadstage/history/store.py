"""The history's database: SQLite (the standard library's, the default: a file under the user's data directory) or
PostgreSQL (psycopg 3), one schema and the same SQL on both.

The schema has a version, kept in its own table, and the migrations to reach it are a list of SQL statements
here, each step applied in one transaction under a lock (SQLite's write lock, or a PostgreSQL advisory lock), so
that two processes opening a new database at once make it once. Alembic would need SQLAlchemy for a handful of
tables; a database of a later version than this code knows is refused, not changed.

A run is keyed by its uid: recording it again does nothing, so that a retried write, a restarted operator or a
second replica never records it twice; its variants and stages are written in the same transaction, so that a
reader never sees half a run."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadstage.api.names import API_GROUP, API_VERSION, KIND
from loadstage.history.locations import Location
from loadstage.history.records import Record, RunRow, StageRow, VariantRow

SCHEMA_VERSION = 1
LOCK_KEY = 0x6C6F6164   # the PostgreSQL advisory lock of migrations: "load"
TIMEOUT_SECONDS = 10

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (   # 1: runs, their variants and their stages
        """CREATE TABLE runs (
            uid TEXT PRIMARY KEY, series TEXT NOT NULL, name TEXT NOT NULL, namespace TEXT,
            started_at TEXT, finished_at TEXT, recorded_at TEXT NOT NULL, phase TEXT NOT NULL, reason TEXT,
            labels TEXT NOT NULL, image TEXT, source TEXT NOT NULL, spec TEXT NOT NULL, recommendation TEXT,
            status TEXT NOT NULL)""",
        "CREATE INDEX runs_by_series ON runs (series, finished_at)",
        """CREATE TABLE variants (
            run_uid TEXT NOT NULL REFERENCES runs (uid) ON DELETE CASCADE, variant INTEGER NOT NULL,
            label TEXT NOT NULL, settings TEXT NOT NULL, search TEXT, capacity_rps DOUBLE PRECISION,
            capacity_low DOUBLE PRECISION, capacity_high DOUBLE PRECISION, cores DOUBLE PRECISION, limited_by TEXT,
            PRIMARY KEY (run_uid, variant))""",
        """CREATE TABLE stages (
            run_uid TEXT NOT NULL REFERENCES runs (uid) ON DELETE CASCADE, variant INTEGER NOT NULL,
            stage INTEGER NOT NULL, load TEXT NOT NULL, requests BIGINT NOT NULL, failures BIGINT NOT NULL,
            error_rate DOUBLE PRECISION, rps DOUBLE PRECISION, latency_ms TEXT NOT NULL, intervals TEXT,
            outcome TEXT, redis_peak INTEGER, histogram TEXT, PRIMARY KEY (run_uid, variant, stage))""",
    ),
)


class HistoryError(Exception):
    """The history cannot be used: the message says why, and where."""


@dataclass(frozen=True)
class StoredRun:
    run: RunRow
    recorded_at: str
    variants: tuple[VariantRow, ...]
    stages: tuple[StageRow, ...]


class Store:
    """One connection to the history, its schema made or brought up to date on opening."""

    def __init__(self, where: Location):
        self.where = where
        self.postgres = where.scheme == "postgresql"
        try:
            if self.postgres:
                import psycopg  # only where a PostgreSQL history is used
                self.connection: Any = psycopg.connect(where.target, autocommit=True,
                                                       connect_timeout=TIMEOUT_SECONDS)
            else:
                Path(where.target).parent.mkdir(parents=True, exist_ok=True)
                self.connection = sqlite3.connect(where.target, timeout=TIMEOUT_SECONDS, isolation_level=None)
                self.connection.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except HistoryError:
            self.close()
            raise
        except Exception as e:   # psycopg's and sqlite3's errors alike: said, never a traceback
            self.close()
            raise HistoryError(f"{where.shown}: {_reason(e)}") from None

    def close(self) -> None:
        connection = getattr(self, "connection", None)
        if connection is not None:
            connection.close()
            self.connection = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    def _execute(self, statement: str, values: Sequence[Any] = ()) -> Any:
        return self.connection.execute(self._sql(statement), tuple(values))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.postgres:
            with self.connection.transaction():
                yield
            return
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def _version(self) -> int:
        exists = self._execute(
            "SELECT 1 FROM information_schema.tables WHERE table_name = 'loadstage_schema'" if self.postgres
            else "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loadstage_schema'").fetchone()
        if not exists:
            return 0
        row = self._execute("SELECT version FROM loadstage_schema").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        if self._version() == SCHEMA_VERSION:
            return
        with self._transaction():
            if self.postgres:
                self._execute(f"SELECT pg_advisory_xact_lock({LOCK_KEY})")
            version = self._version()   # again, under the lock: another process may have made it meanwhile
            if version > SCHEMA_VERSION:
                raise HistoryError(f"{self.where.shown}: its schema is version {version}, newer than this "
                                   f"loadstage's {SCHEMA_VERSION}: use a newer loadstage, or another history")
            if version == 0:
                self._execute("CREATE TABLE loadstage_schema (version INTEGER NOT NULL)")
                self._execute("INSERT INTO loadstage_schema (version) VALUES (0)")
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[number - 1]:
                    self._execute(statement)
            self._execute("UPDATE loadstage_schema SET version = ?", (SCHEMA_VERSION,))

    def check_writable(self) -> None:
        """A write, rolled back: a file opened read-only, or a role without the right, fails here, not after a run."""
        try:
            self.connection.execute("BEGIN")
            try:
                self._execute("UPDATE loadstage_schema SET version = version")
            finally:
                self.connection.execute("ROLLBACK")
        except Exception as e:
            raise HistoryError(f"{self.where.shown}: cannot write: {_reason(e)}") from None

    def record(self, record: Record, recorded_at: str) -> bool:
        """Keep a run, with its variants and stages; False where its uid was kept already."""
        run = record.run
        try:
            with self._transaction():
                added = self._execute(
                    "INSERT INTO runs (uid, series, name, namespace, started_at, finished_at, recorded_at, phase, "
                    "reason, labels, image, source, spec, recommendation, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?, ?, ?, ?, ?) ON CONFLICT (uid) DO NOTHING",
                    (run.uid, run.series, run.name, run.namespace, run.started_at, run.finished_at, recorded_at,
                     run.phase, run.reason, _json(run.labels), run.image, run.source, _json(run.spec),
                     _json(run.recommendation), _json(record.status))).rowcount
                if not added:
                    return False
                for v in record.variants:
                    self._execute(
                        "INSERT INTO variants (run_uid, variant, label, settings, search, capacity_rps, "
                        "capacity_low, capacity_high, cores, limited_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (run.uid, v.variant, v.label, _json(v.settings), _json(v.search), v.capacity_rps,
                         v.capacity_low, v.capacity_high, v.cores, v.limited_by))
                for s in record.stages:
                    self._execute(
                        "INSERT INTO stages (run_uid, variant, stage, load, requests, failures, error_rate, rps, "
                        "latency_ms, intervals, outcome, redis_peak, histogram) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
                        "?, ?, ?, ?)",
                        (run.uid, s.variant, s.stage, s.load, s.requests, s.failures, s.error_rate, s.rps,
                         _json(s.latency_ms), _json(s.intervals), s.outcome, s.redis_peak, s.histogram))
        except Exception as e:
            raise HistoryError(f"{self.where.shown}: {_reason(e)}") from None
        return True

    def series(self) -> list[tuple[str, int, str | None]]:
        """Each series with its runs and its latest end."""
        try:
            return self._series()
        except Exception as e:
            raise HistoryError(f"{self.where.shown}: {_reason(e)}") from None

    def runs(self, series: str, *, histograms: bool = False, last: int | None = None) -> list[StoredRun]:
        """A series' runs, oldest first (by their end, then by when they were recorded)."""
        try:
            return self._runs(series, histograms, last)
        except Exception as e:
            raise HistoryError(f"{self.where.shown}: {_reason(e)}") from None

    def document(self, reference: str) -> tuple[str, dict[str, Any]]:
        """One run as a result document ({metadata, spec, status}, no artifacts), and its uid: by `SERIES` (its
        newest run), `SERIES~N` (N runs before it), or the start of a uid. Raises HistoryError naming what is
        not there."""
        series, _, back = reference.partition("~")
        try:
            if back and not back.isdigit():
                raise HistoryError(f"{reference!r}: after ~ comes how many runs back, e.g. {series}~1")
            rows = self._execute("SELECT uid, name, namespace, spec, status FROM runs WHERE series = ? ORDER BY "
                                 "COALESCE(finished_at, recorded_at) DESC, recorded_at DESC", (series,)).fetchall()
            if not rows and not back:
                rows = self._execute("SELECT uid, name, namespace, spec, status FROM runs WHERE uid LIKE ?",
                                     (reference + "%",)).fetchall()
                if len(rows) > 1:
                    raise HistoryError(f"{reference!r} starts {len(rows)} runs' uids: give more of it")
        except HistoryError:
            raise
        except Exception as e:
            raise HistoryError(f"{self.where.shown}: {_reason(e)}") from None
        at = int(back or 0)
        if len(rows) <= at:
            raise HistoryError(f"no run {reference!r} in {self.where.shown}" + (
                f": the series has {len(rows)}" if rows else ": neither a series nor the start of a uid"))
        uid, name, namespace, spec, status = rows[at]
        return uid, {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND,
                     "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
                     "spec": json.loads(spec), "status": json.loads(status)}

    def _series(self) -> list[tuple[str, int, str | None]]:
        rows = self._execute("SELECT series, COUNT(*), MAX(finished_at) FROM runs GROUP BY series "
                             "ORDER BY series").fetchall()
        return [(str(s), int(n), last) for s, n, last in rows]

    def _runs(self, series: str, histograms: bool, last: int | None) -> list[StoredRun]:
        order = "ORDER BY COALESCE(finished_at, recorded_at) DESC, recorded_at DESC"
        rows = self._execute(
            "SELECT uid, series, name, namespace, started_at, finished_at, phase, reason, labels, image, source, "
            f"spec, recommendation, recorded_at FROM runs WHERE series = ? {order}"
            + (f" LIMIT {int(last)}" if last else ""), (series,)).fetchall()
        kept = {row[0] for row in rows}
        variants: dict[str, list[VariantRow]] = {uid: [] for uid in kept}
        stages: dict[str, list[StageRow]] = {uid: [] for uid in kept}
        for v in self._execute(
                "SELECT v.run_uid, v.variant, v.label, v.settings, v.search, v.capacity_rps, v.capacity_low, "
                "v.capacity_high, v.cores, v.limited_by FROM variants v JOIN runs r ON r.uid = v.run_uid "
                "WHERE r.series = ? ORDER BY v.variant", (series,)).fetchall():
            if v[0] in kept:
                variants[v[0]].append(VariantRow(int(v[1]), v[2], json.loads(v[3]), _loaded(v[4]), *v[5:10]))
        for s in self._execute(
                "SELECT s.run_uid, s.variant, s.stage, s.load, s.requests, s.failures, s.error_rate, s.rps, "
                "s.latency_ms, s.intervals, s.outcome, s.redis_peak, " + ("s.histogram" if histograms else "NULL")
                + " FROM stages s JOIN runs r ON r.uid = s.run_uid WHERE r.series = ? ORDER BY s.variant, s.stage",
                (series,)).fetchall():
            if s[0] in kept:
                stages[s[0]].append(StageRow(int(s[1]), int(s[2]), s[3], int(s[4]), int(s[5]), s[6], s[7],
                                             json.loads(s[8]), _loaded(s[9]), s[10], s[11], s[12]))
        found = [StoredRun(RunRow(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                                  json.loads(row[8]), row[9], row[10], json.loads(row[11]), _loaded(row[12])),
                           row[13], tuple(variants[row[0]]), tuple(stages[row[0]])) for row in reversed(rows)]
        return found


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _loaded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _reason(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__).removeprefix("connection failed: ")
