"""A throwaway PostgreSQL server for the tests and the benchmarks: initdb and pg_ctl in a temporary
directory, listening on a free local port (and a unix socket inside that directory), stopped and
deleted when done. initdb refuses to run as root, so as root the server runs as an unprivileged
user (`nobody`, else one made with useradd) through runuser.

`PostgresUnavailable` says why no server could be started (no binaries, no unprivileged user), so
a test can skip with that reason.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy import make_url

SUPERUSER = "autotune"
_OWN_USER = "autotune-pg"   # made with useradd only where even `nobody` is missing
_START_TRIES = 3            # a free port can be taken by someone else before the server binds it


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started here; the message says why."""


def find_bindir() -> Path | None:
    """The directory of initdb, pg_ctl and postgres: `pg_config --bindir`, else the newest
    /usr/lib/postgresql/*/bin (Debian keeps them off PATH), else wherever PATH has initdb."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(Path(out.stdout.strip()))
    by_version = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                        if Path(p).parent.name.isdigit() else 0, reverse=True)
    candidates += [Path(p) for p in by_version]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(os.path.realpath(initdb)).parent)
    for bindir in candidates:
        if all((bindir / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _server_user() -> str | None:
    """None when we are not root (we run the server ourselves); else an unprivileged user."""
    if os.geteuid() != 0:
        return None
    for name in ("nobody", _OWN_USER):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _OWN_USER],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        raise PostgresUnavailable(f"running as root, and no unprivileged user for initdb: useradd said "
                                  f"{made.stderr.strip() or made.returncode}")
    return _OWN_USER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One running server; `url(name)` of a database on it, `create_database(name)` to add one."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        bindir = find_bindir()
        if bindir is None:
            raise PostgresUnavailable("no PostgreSQL server binaries (initdb, pg_ctl, postgres): neither "
                                      "`pg_config --bindir` nor /usr/lib/postgresql/*/bin has them")
        self.bindir = bindir
        self.user = _server_user()
        self.root = Path(tempfile.mkdtemp(prefix="autotune-pg-"))   # short: a unix socket path has 107 bytes
        self.root.chmod(0o755)   # the server user must reach it even when /tmp's parents are private
        self.settings = {"listen_addresses": "127.0.0.1", "unix_socket_directories": str(self.root),
                         **(settings or {})}
        self.port = 0
        try:
            self._run("initdb", "-D", str(self.root / "data"), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                      "--no-sync", "--locale=C")
            self._start()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _command(self, tool: str, *args: str) -> list[str]:
        cmd = [str(self.bindir / tool), *args]
        return cmd if self.user is None else ["runuser", "-u", self.user, "--", *cmd]

    def _run(self, tool: str, *args: str) -> None:
        if self.user is not None:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        done = subprocess.run(self._command(tool, *args), capture_output=True, text=True, check=False,
                              cwd=self.root, timeout=120)
        if done.returncode != 0:
            raise PostgresUnavailable(f"{tool} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")

    def _start(self) -> None:
        """pg_ctl start on a free port, trying another port if that one was taken meanwhile."""
        for attempt in range(_START_TRIES):
            self.port = _free_port()
            options = " ".join(f"-c {k}={v}" for k, v in {**self.settings, "port": str(self.port)}.items())
            try:
                self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "server.log"),
                          "-o", options, "-w", "-t", "60", "start")
                return
            except PostgresUnavailable:
                if attempt == _START_TRIES - 1:
                    log = self.root / "server.log"
                    raise PostgresUnavailable(f"postgres did not start: {log.read_text()[-2000:]}") from None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        self.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def execute(self, sql: str) -> None:
        """One statement outside a transaction, as the superuser on the `postgres` database."""
        import psycopg

        url = make_url(self.url())
        with psycopg.connect(host=url.host, port=url.port, user=url.username, dbname=url.database,
                             autocommit=True) as conn:
            conn.execute(sql.encode())

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far (Linux /proc), its exited backends included: the
        postmaster reaps them, so their time is in its children's counters."""
        postmaster = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        ticks = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()   # from field 3 (state) on
            except OSError:
                continue   # a process that ended while we looked
            if int(stat.parent.name) == postmaster:
                ticks += sum(int(f) for f in fields[11:15])          # utime, stime, cutime, cstime
            elif int(fields[1]) == postmaster:
                ticks += int(fields[11]) + int(fields[12])           # a live backend or helper
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Stop the server at once (nothing here needs a clean shutdown) and delete its directory."""
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
