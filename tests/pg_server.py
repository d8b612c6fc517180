"""A real PostgreSQL server for the store's tests, started on loopback from a private data
directory by pytest-postgresql's executor (``pg_ctl initdb``, ``pg_ctl start -w``, stopped and
removed at the end of the session), with the Debian package's binaries.

The server trusts its superuser ``postgres`` on loopback (to set things up) and asks every
other role for a password: the tests connect as ``cryptoperf_test`` with a password made for
the session (``PgServer.password``), over TCP, as a team's store would be reached. Each test
gets a database of its own (``pg_database``), owned by that role and dropped afterwards.

Where PostgreSQL is not installed the tests that need it skip saying so — unless
CRYPTOPERF_REQUIRE_POSTGRES=1 (set by .ci/run), where they fail instead.
As root (CI), the server runs as the unprivileged ``postgres`` user: initdb refuses root.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRE = "CRYPTOPERF_REQUIRE_POSTGRES"
ROLE = "cryptoperf_test"
SERVER_USER = "postgres"


def _unavailable(why: str) -> None:
    """Skip the test saying ``why`` PostgreSQL is missing, or fail it under CI."""
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{REQUIRE}=1 but {why}", pytrace=False)
    pytest.skip(why)


def find_pg_ctl() -> str | None:
    """The server's pg_ctl: the newest Debian package's (/usr/lib/postgresql/N/bin), else one
    on PATH; None when PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return found[-1] if found else shutil.which("pg_ctl")


@dataclass
class PgServer:
    """A running server: ``host`` and ``port`` on loopback, the role ``ROLE`` and its
    ``password``."""

    host: str
    port: int
    password: str

    def url(self, dbname: str, password: str | None = "") -> str:
        """``postgresql://ROLE:PASSWORD@HOST:PORT/DBNAME`` (``password`` None: no password in
        the URL; '' : the server's)."""
        pw = self.password if password == "" else password
        auth = f"{ROLE}:{pw}" if pw is not None else ROLE
        return f"postgresql://{auth}@{self.host}:{self.port}/{dbname}"


@pytest.fixture(scope="session")
def pg_server():
    """Start a private PostgreSQL server for the session (see the module doc)."""
    try:
        import port_for
        import psycopg
        from psycopg import sql
        from pytest_postgresql.executors import PostgreSQLExecutor
    except ImportError as e:
        _unavailable(f"the PostgreSQL test dependencies are not installed ({e.name}); "
                     "pip install 'psycopg[binary]' pytest-postgresql")
    pg_ctl = find_pg_ctl()
    if pg_ctl is None:
        _unavailable("PostgreSQL is not installed (no pg_ctl); apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="cryptoperf-pg-"))
    executable = pg_ctl
    if os.geteuid() == 0:
        try:
            server_user = pwd.getpwnam(SERVER_USER)
        except KeyError:
            _unavailable(f"running as root, and there is no '{SERVER_USER}' user to run the server as")
        os.chown(root, server_user.pw_uid, server_user.pw_gid)
        executable = str(root / "pg_ctl")
        Path(executable).write_text(f'#!/bin/sh\nexec runuser -u {SERVER_USER} -- "{pg_ctl}" "$@"\n')
        os.chmod(executable, 0o755)
    port = port_for.get_port(None)
    executor = PostgreSQLExecutor(
        executable=executable, host="127.0.0.1", port=port, datadir=str(root / "data"),
        unixsocketdir=str(root), logfile=str(root / "server.log"), startparams="-w", dbname="postgres",
        user=SERVER_USER, timeout=120,
        # loopback only; durability is not what these tests are about
        postgres_options="-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                         "-c full_page_writes=off")
    try:
        executor.start()
    except Exception as e:  # noqa: BLE001 - report why the server did not start, with its log
        log = (root / "server.log").read_text(errors="replace")[-2000:] if (root / "server.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start with {pg_ctl}: {e}\n{log}", pytrace=False)
    password = "pw-" + secrets.token_hex(12)
    try:
        hba = root / "data" / "pg_hba.conf"
        # first match wins: the test role must give its password, even on loopback
        hba.write_text(f"host all {ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        with _connect_when_ready(psycopg, port, root) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEDB PASSWORD {}").format(
                sql.Identifier(ROLE), sql.Literal(password)))
            conn.execute("SELECT pg_reload_conf()")
        yield PgServer("127.0.0.1", port, password)
    finally:
        try:
            executor.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _connect_when_ready(psycopg, port: int, root: Path, timeout_s: float = 120.0):
    """A superuser connection to the new server, retried while it is still starting.

    ``pg_ctl start -w`` can return (or report "could not start server") while the server is
    still in its start-up on a busy 2-core runner; its first connection then fails with
    "the database system is starting up". Retried every 0.5 s up to ``timeout_s``; after that
    the test fails with the server's log.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return psycopg.connect(host="127.0.0.1", port=port, user=SERVER_USER, dbname="postgres",
                                   autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as e:
            if time.monotonic() > deadline:
                log = root / "server.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                pytest.fail(f"PostgreSQL did not accept a connection within {timeout_s:.0f} s: {e}\n{tail}",
                            pytrace=False)
            time.sleep(0.5)


@pytest.fixture
def pg_database(pg_server):
    """A new, empty database for one test, owned by ``ROLE`` (created and dropped with
    pytest-postgresql's DatabaseJanitor); returns its name."""
    from pytest_postgresql.janitor import DatabaseJanitor
    name = "cryptoperf_" + uuid.uuid4().hex[:12]
    janitor = DatabaseJanitor(user=ROLE, password=pg_server.password, host=pg_server.host,
                              port=pg_server.port, dbname=name)
    janitor.init()
    try:
        yield name
    finally:
        janitor.drop()


@pytest.fixture
def pg_url(pg_server, pg_database) -> str:
    """The URL of a new, empty database (password included) for one test."""
    return pg_server.url(pg_database)
