"""A real PostgreSQL server for the tests and the benchmarks (docs/cluster.md, issue 23).

One throwaway cluster per pytest worker: ``initdb`` into a temporary directory, ``postgres``
listening on 127.0.0.1 at a free port (no Unix socket), trust authentication, and durability
switched off (``fsync``, ``synchronous_commit``, ``full_page_writes``) because the data dies
with the test run anyway. ``max_connections`` is 200: multi-process tests run several
gateways, each with its own pool.

The binaries are looked up on ``PATH``, then in ``/usr/lib/postgresql/<version>/bin`` (where
Debian's ``postgresql`` package puts them). ``initdb`` refuses to run as root, and the suite
runs as root here and in CI: then every server command runs as the ``postgres`` system user
(created when missing) through ``runuser``. A missing PostgreSQL is an error naming the fix
(``make postgres``), never a skip.

Outside pytest (bench/): ``async with running_postgres() as server: server.url("db")``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

SERVER_USER = "postgres"
SUPERUSER = "postgres"
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
MISSING_FIX = (
    "PostgreSQL is needed by the tests: initdb was found neither on PATH nor in "
    f"{DEBIAN_BIN_GLOB}. Run `make postgres` (Debian/Ubuntu: apt-get install postgresql)."
)
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "max_wal_size": "256MB",
    "log_min_messages": "warning",
}
START_TIMEOUT = 60


class PostgresMissing(RuntimeError):
    """PostgreSQL is not installed (or cannot be run): the message names the fix."""


def find_bindir(path: str | None = None, debian_glob: str = DEBIAN_BIN_GLOB) -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``: ``PATH`` (or
    ``path``) first, then the newest ``/usr/lib/postgresql/*/bin``; :class:`PostgresMissing`
    naming the fix when neither has it."""
    on_path = shutil.which("initdb", path=path)
    if on_path is not None:
        return Path(on_path).resolve().parent
    for candidate in sorted(glob.glob(debian_glob), key=_version_key, reverse=True):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    raise PostgresMissing(MISSING_FIX.replace(DEBIAN_BIN_GLOB, debian_glob))


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _server_user() -> pwd.struct_passwd | None:
    """The account the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        _create_system_user()
        return pwd.getpwnam(SERVER_USER)


def _create_system_user() -> None:
    command = ["useradd", "--system", "--user-group", "--no-create-home", SERVER_USER]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PostgresMissing(
            f"running as root, PostgreSQL needs the {SERVER_USER!r} system user and "
            f"`{' '.join(command)}` failed: {done.stderr.strip()}"
        )


@dataclass
class PostgresServer:
    """One throwaway PostgreSQL cluster: ``start()``, ``url(dbname)``, ``stop()``."""

    label: str = "pg"
    bindir: Path = field(default_factory=find_bindir)
    host: str = "127.0.0.1"
    port: int = 0
    base: Path | None = None
    _account: pwd.struct_passwd | None = None
    _names: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def datadir(self) -> Path:
        assert self.base is not None, "the server is not started"
        return self.base / "data"

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL for database ``dbname`` as the superuser (no password: trust)."""
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/{dbname}"

    def start(self) -> None:
        """initdb, write the settings, start on a free port; retried on a port race."""
        self._account = _server_user()
        self.base = Path(tempfile.mkdtemp(prefix=f"commonos-{self.label}-"))
        if self._account is not None:
            os.chown(self.base, self._account.pw_uid, self._account.pw_gid)
        atexit.register(self.stop)  # even when the session ends without its teardown
        self._initdb()
        for attempt in range(3):
            self.port = free_port()
            if self._pg_ctl_start(last=attempt == 2):
                return

    def stop(self) -> None:
        """Stop the server (immediately: nothing needs to survive) and remove its files, in
        the background: a worker's databases (~8 MB each) take seconds to delete, and the
        session's end need not wait for them."""
        if self.base is None:
            return
        if (self.datadir / "postmaster.pid").exists():
            self._run([self._bin("pg_ctl"), "-D", str(self.datadir), "-m", "immediate",
                       "-w", "stop"], check=False)  # fmt: skip
        _remove_in_background(self.base)
        self.base = None

    def halt(self) -> None:
        """Stop the server (fast shutdown), keeping its files: :meth:`resume` brings the same
        databases back on the same port (an outage, tests/cluster/outage.py)."""
        self._run([self._bin("pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"],
                  check=True)  # fmt: skip

    def resume(self) -> None:
        """Start a :meth:`halt`-ed server again on its port."""
        if not self._pg_ctl_start(last=True):
            raise PostgresMissing("PostgreSQL did not start again")

    async def create_database(self, dbname: str | None = None, template: str | None = None) -> str:
        """Create database ``dbname`` (default: a new ``t_<n>``), optionally a copy of
        ``template``, and return its name."""
        name = dbname or f"t_{next(self._names)}"
        clause = f" TEMPLATE {_ident(template)}" if template else ""
        admin = await asyncpg.connect(self.url("postgres"))
        try:
            await admin.execute(f"CREATE DATABASE {_ident(name)}{clause}")
        finally:
            await admin.close()
        return name

    def _initdb(self) -> None:
        command = [self._bin("initdb"), "-D", str(self.datadir), "-U", SUPERUSER,
                   "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"]  # fmt: skip
        done = self._run(command, check=False)
        if done.returncode != 0:
            raise PostgresMissing(f"initdb failed ({done.returncode}): {done.stderr.strip()}")
        with (self.datadir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# commonos tests\n")
            conf.writelines(f"{key} = {value}\n" for key, value in SETTINGS.items())

    def _pg_ctl_start(self, *, last: bool) -> bool:
        log = self.datadir / "server.log"
        command = [self._bin("pg_ctl"), "-D", str(self.datadir), "-l", str(log), "-w",
                   "-t", str(START_TIMEOUT), "-o", f"-p {self.port}", "start"]  # fmt: skip
        done = self._run(command, check=False)
        if done.returncode == 0:
            return True
        if last:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PostgresMissing(f"PostgreSQL did not start: {done.stderr.strip()}\n{tail}")
        return False

    def _bin(self, name: str) -> str:
        return str(self.bindir / name)

    def _run(self, command: Sequence[str], *, check: bool) -> subprocess.CompletedProcess[str]:
        argv = list(command)
        if self._account is not None:
            argv = ["runuser", "-u", self._account.pw_name, "--", *argv]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return subprocess.run(
            argv, cwd=self.base, env=env, capture_output=True, text=True, check=check
        )


_REMOVALS: list[subprocess.Popen[bytes]] = []
"""The ``rm -rf`` of stopped servers' directories, still running or done."""


def _remove_in_background(directory: Path) -> None:
    """``rm -rf directory`` in its own session, not waited for (it outlives pytest)."""
    quiet = subprocess.DEVNULL
    argv = ["rm", "-rf", "--", str(directory)]
    removal = subprocess.Popen(
        argv, stdin=quiet, stdout=quiet, stderr=quiet, start_new_session=True
    )
    _REMOVALS.append(removal)


EMPTYING_QUERIES = (
    "SELECT tablename AS name FROM pg_tables"
    " WHERE schemaname = current_schema() AND tablename <> 'schema_version'",
    "SELECT sequencename AS name FROM pg_sequences WHERE schemaname = current_schema()",
)


async def emptying_sql(conn: asyncpg.Connection) -> str:
    """One script that empties every table of the connection's database but
    ``schema_version`` and restarts its sequences (foreign keys not checked meanwhile):
    a migrated database as good as new in ~10 ms, where ``CREATE DATABASE`` takes ~150."""
    tables, sequences = [await conn.fetch(query) for query in EMPTYING_QUERIES]
    return "; ".join(
        [
            "SET session_replication_role = replica",
            *(f"DELETE FROM {_ident(row['name'])}" for row in tables),
            *(f"ALTER SEQUENCE {_ident(row['name'])} RESTART" for row in sequences),
            "SET session_replication_role = origin",
        ]
    )


def _ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@contextlib.asynccontextmanager
async def running_postgres(label: str = "bench") -> AsyncIterator[PostgresServer]:
    """A started server for code outside pytest (bench/); stopped and removed after."""
    server = PostgresServer(label=label)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)
