"""Where the history is: `--history URL`, $LOADSTAGE_HISTORY, or the default SQLite file under the user's data
directory; each URL parsed, or refused naming what is wrong, before anything opens it."""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Location:
    scheme: str     # sqlite or postgresql
    target: str     # a file's path, or a libpq connection string
    shown: str      # for people: without a password

    def problem(self) -> str | None:
        """Why a run could not record here, found before any load runs (a server is only tried by connecting)."""
        if self.scheme != "sqlite":
            return None
        path = Path(self.target)
        if path.is_dir():
            return f"{path} is a directory"
        if path.exists():
            return None if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK) else \
                f"cannot write {path} (or beside it, where SQLite keeps its journal)"
        existing = path.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        return None if existing.is_dir() and os.access(existing, os.W_OK) else f"cannot make {path}"


def location(url: str) -> Location:
    """`sqlite:///an/absolute/path`, `sqlite:relative/path`, a bare path, or `postgresql://…` (also
    `postgres://`); raises ValueError naming what is wrong."""
    if not url.strip():
        raise ValueError("an empty URL: give sqlite:///PATH or postgresql://HOST/DB")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme in ("postgresql", "postgres"):
        if not (parsed.hostname or parsed.path.strip("/") or parsed.query):
            raise ValueError(f"{url!r} names no server or database")
        hidden = parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":***@")
                                 if parsed.password else parsed.netloc)
        return Location("postgresql", url, urllib.parse.urlunsplit(hidden))
    if parsed.scheme == "sqlite":
        path = url.removeprefix("sqlite:").removeprefix("//")
        if not path or path.endswith("/"):
            raise ValueError(f"{url!r} names no file: sqlite:///an/absolute/path or sqlite:relative/path")
        try:
            found = Path(path).expanduser()
        except RuntimeError as e:   # ~someone who is not a user here
            raise ValueError(f"{url!r}: {e}") from None
        return Location("sqlite", str(found), f"sqlite:{found}")
    if parsed.scheme and len(parsed.scheme) > 1:   # not a Windows drive letter
        raise ValueError(f"unknown scheme {parsed.scheme!r}: sqlite or postgresql")
    return location(f"sqlite:{url}")


def default_location(environ: dict[str, str] | os._Environ[str] = os.environ) -> Location:
    """$LOADSTAGE_HISTORY, else $XDG_DATA_HOME/loadstage/history.sqlite (~/.local/share by default)."""
    if environ.get("LOADSTAGE_HISTORY"):
        return location(environ["LOADSTAGE_HISTORY"])
    data = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return location(f"sqlite:{Path(data) / 'loadstage' / 'history.sqlite'}")


