"""A real PostgreSQL server for the tests: Debian's package, a cluster made by initdb in a temporary directory, the
server listening on a Unix socket there only (no TCP port at all), stopped by its own PID. As root it runs as the
package's `postgres` user: PostgreSQL refuses to run as root."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from support.waiting import wait_for

PORT = 5432   # only names the socket file: .s.PGSQL.5432 in the directory


def binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: scripts/setup installs Debian's postgresql package")
    return Path(found[-1]).parent


class Postgres:
    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="ls-pg-", dir="/tmp"))
        self.data, self.socket = self.home / "data", self.home / "socket"
        self.socket.mkdir()
        as_root = os.geteuid() == 0
        owner = pwd.getpwnam("postgres") if as_root else None
        if owner is not None:
            os.chown(self.home, owner.pw_uid, owner.pw_gid)
            os.chown(self.socket, owner.pw_uid, owner.pw_gid)
        user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []} if owner else {}
        bin_dir = binaries()
        subprocess.run([bin_dir / "initdb", "-D", self.data, "-U", "loadstage", "--auth=trust", "-E", "UTF8",
                        "--no-sync"], check=True, capture_output=True, cwd=self.home, **user)
        self.user, self.bin_dir = user, bin_dir
        self.log = (self.home / "postgres.log").open("a")
        self.start()
        subprocess.run([bin_dir / "createdb", "-h", self.socket, "-p", str(PORT), "-U", "loadstage", "history"],
                       check=True, capture_output=True, cwd=self.home, **user)

    def start(self) -> None:
        """The server on its data directory: at first, or again after a kill (it recovers as after a crash)."""
        self.process = subprocess.Popen(
            [self.bin_dir / "postgres", "-D", self.data, "-k", self.socket, "-p", str(PORT), "-c",
             "listen_addresses=", "-c", "fsync=off", "-c", "max_connections=50"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.home, start_new_session=True, **self.user)
        wait_for(lambda: self.process.poll() is not None or self.ready(), timeout=60)
        if self.process.poll() is not None:
            raise RuntimeError(f"postgres exited: {(self.home / 'postgres.log').read_text()}")

    def ready(self) -> bool:
        """pg_isready: the socket accepts, and the server is out of recovery."""
        return subprocess.run([self.bin_dir / "pg_isready", "-q", "-h", self.socket, "-p", str(PORT)]).returncode == 0

    def url(self, database: str = "history") -> str:
        return f"postgresql://loadstage@/{database}?host={self.socket}&port={PORT}"

    def kill(self) -> None:
        """As a crash would: the server and its backends (its own process group), SIGKILL."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)   # a fast shutdown
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)
