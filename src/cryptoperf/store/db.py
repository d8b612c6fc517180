"""The store: every run of every study, in SQLite or PostgreSQL, written as it happens.

Default location: ``platformdirs.user_data_dir("cryptoperf")/runs.sqlite`` (or under
``$CRYPTOPERF_DATA_DIR``); ``$CRYPTOPERF_STORE`` replaces it, ``--store`` overrides both for one
command. A location is a SQLite file's path (or ``sqlite:///PATH``) or a PostgreSQL URL
(``postgresql://USER@HOST:PORT/DATABASE``), through which a team shares one result history
(docs/shared-store.md). One row in ``runs`` per stored run (a study or a ``speed``) with the
study text, host fingerprint, seed, analysis settings and status; one row in ``results`` per
finished repetition, each committed in a transaction of its own as soon as it finishes, so a
crash loses nothing already measured and two studies writing to one store at once (two
processes, or two machines) each keep every repetition under their own run id.

A repetition goes in as an ``Outcome`` (``Store.add_outcome``) and comes back as one
(``Store.outcomes``) through one codec, ``outcome_row`` / ``row_outcome``: the row keeps what the
repetition was and the worker's message exactly as received; latency, throughput and the typed
result are derived again on reading, with the code a study uses, for rows of every format.

Both kinds of store have one schema (``METADATA``, SQLAlchemy Core) and one upgrade path
(``_UPGRADES``). A SQLite store runs in WAL mode with a busy timeout, so readers never block
and concurrent writers wait for each other instead of failing. A PostgreSQL URL's password
is never shown: ``Store.location`` and every error message mask it.

FORMAT CHANGELOG (``FORMAT_VERSION``; also the JSON documents' ``format_version``):
  1 (cryptoperf 0.1) — first version: tables runs and results.
  2 (cryptoperf 0.2) — randomised blocks: results gain ``block`` and ``position`` (the stored
    order), ``attempt``, ``superseded`` and ``disturbed`` (re-runs of disturbed repetitions),
    ``batch`` (the batch size requested), and ``cpu``, ``build`` and ``fips`` as columns (format 1
    kept the CPU mask and build only as suffixes of the cell key, which a configuration named
    ``cpu=no-aesni`` made ambiguous); runs gain ``analysis_json`` (margin, multiplicity, looks)
    and ``process_json`` (the orchestrator's pid, start time and boot id, so a run left
    "running" by a killed process reads as interrupted).
    The upgrade reads cpu, build and fips of study runs from their stored study file, and
    ``block`` = ``repetition``. In the JSON study document, the list of repetitions is called
    ``repetitions`` (format 1: ``runs``), each entry with ``block`` and ``position``, and each
    delta has one ``verdict`` (format 1: ``latency_verdict`` and ``throughput_verdict``).
  3 (cryptoperf 0.3) — PostgreSQL stores, and runs spread over several machines: results gain
    ``host_json``, the host fingerprint of the machine that ran that repetition (NULL: the
    run's host, ``runs.host_json``; every result of formats 1 and 2); the format version is
    kept in table ``meta`` (row ``format_version``) in both kinds of store (a SQLite store also
    keeps it in ``PRAGMA user_version``, where formats 1 and 2 kept it alone, so that an older
    cryptoperf refuses a newer store). In the JSON study document each repetition has
    ``host`` (that fingerprint, or null). The upgrade adds the column and the table.
    Later in format 3, without a version change (a key older readers ignore): ``process_json``
    gains ``job``, the label of the CI job that made the run (``--job`` of speed and study, else
    the CI's variables; absent when there was none), which with its ``boot_id`` (recorded since
    format 2) is the session ``compare`` counts the runs of as one unit; runs without either
    (format 1, or made in memory) are each a session of their own.
    Later in format 3, without a version change (keys older readers ignore): a study document's
    ``analysis`` gains ``cpu_masks``, ``disturbances``, ``detectable_change`` and ``workloads``
    (every workload family's points per level — transactions/s, bytes/s, latency, late share and
    each side's CPU per transaction, ``server_cpu_ns_per_tx``, ``client_cpu_ns_per_tx``,
    ``process_cpu_ns_per_tx``, with their bands —, the latency objectives, and each kind's own
    figures), and a speed document gains the same ``analysis``. The documents' JSON Schema is
    tests/fixtures/document.schema.json.
  4 (cryptoperf 0.3) — every CPU figure names whose CPU it is. The worker process's CPU per
    operation, ``cpu_ns_per_op`` in formats 1 to 3, is ``process_cpu_ns_per_op`` in the JSON
    documents (a repetition's and a summary's figures, a speed row), the CSV and
    ``cryptoperf.load()``; for a workload it is the client's process, beside the analysis'
    ``server_cpu_ns_per_tx`` and ``client_cpu_ns_per_tx``. The store's tables do not change
    (they keep the worker's counters, from which every figure is derived when a run is
    loaded): the upgrade only records the new version, so that an older cryptoperf, whose
    documents would name the figure the old way, refuses the store.
    Later in format 4, without a version change: table ``explanations`` (``store.explanations``),
    made the first time an explanation is kept — what ``cryptoperf explain`` or a study's
    ``explain = true`` found about one comparison of a run: the explain document and its
    differential flame graph; older readers ignore the table. A study document gains
    ``explanations`` (those documents, without the flame graph).
Upgrades: one function per version step in ``_UPGRADES``, run in one transaction (DDL
included: all or nothing); tests/fixtures keeps a store of every old version.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import sqlalchemy as sa
from sqlalchemy import Column, ForeignKey, Index, Integer, MetaData, Table, Text, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url

from cryptoperf.errors import MissingDependency, StoreError
from cryptoperf.model import FAILED, OK, Cell, Outcome, Repetition, outcome_from_result, speed_cell_attrs
from cryptoperf.paths import data_dir
from cryptoperf.result import UnreadableResult, decode

FORMAT_VERSION = 4

#: Environment variable naming the store every command uses when ``--store`` is not given.
STORE_ENV = "CRYPTOPERF_STORE"

#: How long a SQLite writer waits for another one to finish its transaction, in seconds.
SQLITE_BUSY_TIMEOUT_S = 60.0

#: How long connecting to a PostgreSQL server may take before the store gives up, in seconds
#: (unless the URL sets ``connect_timeout``).
PG_CONNECT_TIMEOUT_S = 10

#: The key of the PostgreSQL advisory lock held while a store's schema is created or upgraded.
_PG_SCHEMA_LOCK = 0x63727970746F70  # "cryptop"

METADATA = MetaData()

runs_table = Table(
    "runs", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", Text, nullable=False),                  # 'study' or 'speed'
    Column("started_at", Text, nullable=False),            # UTC ISO 8601
    Column("finished_at", Text),
    Column("study_name", Text),
    Column("study_toml", Text),
    Column("host_json", Text, nullable=False),             # hostinfo.fingerprint() + checks
    Column("seed", Integer),                               # seed of the block order
    Column("status", Text, nullable=False),                # running, complete, interrupted, failed
    Column("format_version", Integer, nullable=False),
    Column("analysis_json", Text),                         # analysis.Settings: margin, multiplicity, looks
    Column("process_json", Text),                          # hostinfo.process_identity() of the orchestrator
    sqlite_autoincrement=True,                             # ids are never reused
)

results_table = Table(
    "results", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("cell", Text, nullable=False),                  # backend/label/size/configuration
    Column("configuration", Text, nullable=False),
    Column("backend", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("op", Text, nullable=False),
    Column("params_json", Text, nullable=False),
    Column("size_bytes", Integer),
    Column("repetition", Integer, nullable=False),         # = block (format 1's name for it)
    Column("status", Text, nullable=False),                # ok, unsupported, invalid, failed
    Column("reason", Text, nullable=False),
    Column("started_at", Text),
    Column("finished_at", Text),
    Column("result_json", Text),                           # the worker's result message, histogram included
    Column("cpu", Text, nullable=False, server_default=text("'baseline'")),  # CPU capability mask
    Column("build", Text, nullable=False, server_default=text("'default'")),  # worker build
    Column("fips", Integer, nullable=False, server_default=text("0")),
    Column("block", Integer, nullable=False, server_default=text("1")),      # 0: calibration
    Column("position", Integer, nullable=False, server_default=text("0")),   # place in the block's random order
    Column("attempt", Integer, nullable=False, server_default=text("1")),    # 2: the re-run of a disturbed repetition
    Column("superseded", Integer, nullable=False, server_default=text("0")),  # 1: re-run, not analysed
    Column("disturbed", Text, nullable=False, server_default=text("''")),    # why the host disturbed it
    Column("batch", Integer),                              # batch size requested (NULL: calibrate)
    Column("host_json", Text),                             # the machine that ran it (NULL: the run's host)
    sqlite_autoincrement=True,
)
Index("results_run", results_table.c.run_id)

meta_table = Table(
    "meta", METADATA,
    Column("key", Text, primary_key=True),                 # 'format_version'
    Column("value", Text, nullable=False),
)


#: The worker builds format 1 knew, by a configuration's ``library`` (``fips = true`` was the
#: ``fips`` build): frozen here, as format 1 wrote them, so the upgrade reads old stores the same
#: whatever builds come later.
_FORMAT_1_BUILDS = {"openssl@system": "default", "openssl@3.6": "openssl@3.6"}


def _upgrade_1_to_2(db: Connection) -> None:
    """Format 1 → 2: the new columns, filled from what format 1 kept (see the changelog)."""
    for column in ("cpu TEXT NOT NULL DEFAULT 'baseline'", "build TEXT NOT NULL DEFAULT 'default'",
                   "fips INTEGER NOT NULL DEFAULT 0", "block INTEGER NOT NULL DEFAULT 1",
                   "position INTEGER NOT NULL DEFAULT 0", "attempt INTEGER NOT NULL DEFAULT 1",
                   "superseded INTEGER NOT NULL DEFAULT 0", "disturbed TEXT NOT NULL DEFAULT ''",
                   "batch INTEGER"):
        db.execute(text(f"ALTER TABLE results ADD COLUMN {column}"))
    db.execute(text("ALTER TABLE runs ADD COLUMN analysis_json TEXT"))
    db.execute(text("ALTER TABLE runs ADD COLUMN process_json TEXT"))
    db.execute(text("UPDATE results SET block = repetition"))
    configs_of: dict[int, dict[str, tuple[str, str]]] = {}
    for run_id, toml in db.execute(text("SELECT id, study_toml FROM runs")).all():
        configs: dict[str, tuple[str, str]] = {}
        try:
            doc = tomllib.loads(toml) if toml else {}
        except tomllib.TOMLDecodeError:
            doc = {}
        for c in doc.get("configuration") or []:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                library = str(c.get("library", "openssl@system"))
                build = "fips" if c.get("fips", False) else _FORMAT_1_BUILDS.get(library, library)
                configs[c["name"]] = (str(c.get("cpu", "baseline")), build)
        configs_of[run_id] = configs
    rows = db.execute(text("SELECT id, run_id, cell, configuration, backend, label, size_bytes, repetition "
                           "FROM results ORDER BY id")).all()
    positions: dict[tuple, int] = {}
    for rid, run_id, cell, configuration, backend, label, size, rep in rows:
        if configuration in configs_of.get(run_id, {}):
            cpu, build = configs_of[run_id][configuration]
        else:  # a speed run (no configuration name), or a configuration the file lacks
            attrs = speed_cell_attrs(cell) if not configuration else {"cpu": "baseline", "build": "default"}
            cpu, build = attrs["cpu"], attrs["build"]
        group = (run_id, rep, backend, label, size)
        pos = positions.get(group, 0)
        positions[group] = pos + 1
        db.execute(text("UPDATE results SET cpu = :cpu, build = :build, fips = :fips, position = :pos "
                        "WHERE id = :id"),
                   {"cpu": cpu, "build": build, "fips": int(build == "fips"), "pos": pos, "id": rid})


def _upgrade_2_to_3(db: Connection) -> None:
    """Format 2 → 3: results gain ``host_json`` (NULL: the run's host); the ``meta`` table
    that keeps the format version is made by ``_set_version``."""
    db.execute(text("ALTER TABLE results ADD COLUMN host_json TEXT"))


def _upgrade_3_to_4(db: Connection) -> None:
    """Format 3 → 4: no table changes (the figures' names changed in the documents, which are
    derived when a run is loaded); the new version is recorded by the caller."""


#: version n → the function that upgrades a store of version n to n + 1, given a Connection
#: inside the upgrade's transaction
_UPGRADES: dict[int, Callable[[Connection], None]] = {1: _upgrade_1_to_2, 2: _upgrade_2_to_3,
                                                      3: _upgrade_3_to_4}


def default_path() -> Path:
    """``<user data dir>/cryptoperf/runs.sqlite`` (e.g. ~/.local/share/cryptoperf/runs.sqlite);
    under ``$CRYPTOPERF_DATA_DIR`` instead when that is set (``paths.data_dir``)."""
    return data_dir() / "runs.sqlite"


def default_location() -> str | Path:
    """The store a command uses without ``--store``: ``$CRYPTOPERF_STORE`` when set (a path or
    a URL), else ``default_path()``."""
    return os.environ.get(STORE_ENV) or default_path()


def shown_default() -> str:
    """``default_location()`` as it may be printed (a URL's password masked), for help texts."""
    return mask(str(default_location()))


_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_USERINFO_RE = re.compile(r"(://[^/@:?#]*):[^@/?#]*@")
_SECRET_PARAM_RE = re.compile(r"((?:^|[?&;\s])[A-Za-z_]*password[A-Za-z_]*=)([^&;\s]*)", re.IGNORECASE)


def mask(location: str) -> str:
    """``location`` with any password in it replaced by ``***``: the one in a URL's user
    information (``postgresql://perf:***@db/cryptoperf``) and the value of every query
    parameter whose name contains ``password``. Anything else is returned as given."""
    out = _USERINFO_RE.sub(r"\1:***@", location)
    return _SECRET_PARAM_RE.sub(r"\1***", out)


def is_url(location: str | os.PathLike | None) -> bool:
    """True when ``location`` is a URL (``scheme://...``) rather than a file path."""
    return location is not None and bool(_URL_RE.match(str(location)))


class Location:
    """Where a store is: a SQLite file or a PostgreSQL database, parsed from what a user gave.

    Attributes:
        url: the SQLAlchemy URL connected to (``sqlite:///PATH`` or
            ``postgresql+psycopg://...``, password included: never print it).
        path: the SQLite file, or None for a PostgreSQL store.
        shown: the location as it may be printed, stored or rendered: the file's path, or the
            URL as the user spelt it with its password masked.
        dialect: ``sqlite`` or ``postgresql``.

    Raises StoreError (one line, password masked) for a URL this cryptoperf cannot use.
    """

    def __init__(self, location: str | os.PathLike | None = None):
        raw = default_location() if location is None else location
        value = str(raw)
        self.secrets: tuple[str, ...] = ()
        if not is_url(value):
            self.path: Path | None = Path(value)
            self.url = URL.create("sqlite", database=str(self.path))
            self.shown, self.dialect = str(self.path), "sqlite"
            return
        shown = mask(value)
        try:
            url = make_url(value)
        except (sa.exc.ArgumentError, ValueError):
            raise StoreError(f"store {shown} is not a URL cryptoperf can read; write "
                             "postgresql://USER@HOST:PORT/DATABASE, or give a SQLite file's path") from None
        scheme = url.drivername.lower()
        if scheme in ("sqlite", "sqlite+pysqlite"):
            if not url.database or url.database == ":memory:":
                raise StoreError(f"store {shown}: an in-memory SQLite database keeps nothing; give a file, "
                                 "e.g. sqlite:///runs.sqlite or just runs.sqlite")
            self.path = Path(url.database)
            self.url = URL.create("sqlite", database=url.database)
            self.shown, self.dialect = str(self.path), "sqlite"
            return
        if scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
            raise StoreError(f"store {shown}: the scheme '{url.drivername}' is not supported; give a SQLite "
                             "file's path (or sqlite:///PATH) or a postgresql://USER@HOST:PORT/DATABASE URL "
                             "(cryptoperf connects with psycopg 3)")
        self.path = None
        self.url = url.set(drivername="postgresql+psycopg")
        self.shown, self.dialect = shown, "postgresql"
        secrets = [url.password] if url.password else []
        secrets += [str(v) for k, v in url.query.items() if "password" in k.lower() and isinstance(v, str) and v]
        self.secrets = tuple(s for s in secrets if s)

    def scrub(self, message: str) -> str:
        """``message`` with this location's passwords masked, wherever they appear."""
        out = mask(message)
        for s in self.secrets:
            out = out.replace(s, "***")
        return out


def _reason(e: BaseException) -> str:
    """A database error's own words, on one line (the driver's message, without SQLAlchemy's
    statement, parameters and background link)."""
    orig = getattr(e, "orig", None)
    msg = str(orig if orig is not None else e)
    msg = re.sub(r"\(Background on this error at:[^)]*\)", "", msg)
    msg = msg.split("\n[SQL:")[0]
    return " ".join(msg.split()) or type(e).__name__


def _pg_fix(reason: str) -> str:
    """What to do about a PostgreSQL error, by its message."""
    r = reason.lower()
    if "password authentication failed" in r or "no password supplied" in r or "authentication failed" in r:
        return ("check the user and its password (PGPASSWORD, ~/.pgpass, or the URL); "
                "or pass --store with another store")
    if "does not exist" in r and "database" in r:
        return "create the database first (createdb, or CREATE DATABASE), or fix the URL's database name"
    if any(w in r for w in ("connection refused", "timeout", "timed out", "could not translate host name",
                            "name or service not known", "no route to host", "could not connect",
                            "connection failed", "no such file or directory")):
        return ("check that the server runs and is reachable at that host and port "
                "(postgresql://USER@HOST:PORT/DATABASE); or pass --store with another store")
    if "permission denied" in r:
        return "grant the user CREATE and USAGE on the database's public schema, or use another database"
    return "check the URL (postgresql://USER@HOST:PORT/DATABASE); or pass --store with another store"


def _pg_connect_args(where: Location) -> dict[str, Any]:
    """The driver arguments of a PostgreSQL connection: the application name, and the
    connect timeout unless the URL sets one."""
    args: dict[str, Any] = {"application_name": "cryptoperf"}
    if "connect_timeout" not in where.url.query:
        args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    return args


def writable_problem(location: str | os.PathLike | Location | None) -> str | None:
    """Why the store at ``location`` (as ``Store`` takes it, or a parsed ``Location``) could
    not be written, found without creating or changing anything, or None. A SQLite store:
    the path is a directory, or an existing file does not open for writing (a read-only
    filesystem) — whether its directory takes new files is the caller's to probe. A
    PostgreSQL store: the server is in read-only mode (a standby, or
    ``default_transaction_read_only``), or the role may not insert into the store's tables
    (or, with none yet, create them).

    Raises StoreError (one line, password masked, with the fix) when a PostgreSQL server
    cannot be reached or refuses the login, as opening the store would; MissingDependency
    without the PostgreSQL driver."""
    where = location if isinstance(location, Location) else Location(location)
    if where.path is not None:
        if where.path.is_dir():
            return f"store {where.path} is a directory; give a SQLite file's path"
        if where.path.exists():
            try:
                with open(where.path, "r+b"):
                    pass
            except OSError as e:
                return f"store {where.path} is not writable: {e.strerror or e}"
        return None
    try:
        engine = sa.create_engine(where.url, connect_args=_pg_connect_args(where))
    except ImportError:
        raise MissingDependency(f"cannot use store {where.shown}: the PostgreSQL driver psycopg is not "
                                "installed; pip install 'psycopg[binary]' (or cryptoperf's "
                                "'postgresql' extra)") from None
    try:
        with engine.connect() as conn:
            return _pg_write_problem(conn, where.shown)
    except sa.exc.SQLAlchemyError as e:
        reason = where.scrub(_reason(e))
        raise StoreError(f"cannot open store {where.shown}: {reason}; {_pg_fix(reason)}") from None
    finally:
        engine.dispose()


def _pg_write_problem(conn: Connection, shown: str) -> str | None:
    read_only = conn.execute(text("SELECT current_setting('transaction_read_only')")).scalar()
    if read_only == "on":
        return (f"store {shown} is read-only (a standby server, or default_transaction_read_only "
                "= on); give the primary's URL")
    tables = conn.execute(text(
        "SELECT has_table_privilege(c.oid, 'INSERT') AND has_table_privilege(c.oid, 'UPDATE') "
        "FROM pg_class c WHERE c.oid = to_regclass('results') OR c.oid = to_regclass('runs')")).scalars().all()
    if tables and not all(tables):
        return (f"store {shown}: the role may not insert into its tables runs and results; "
                "GRANT INSERT, UPDATE on them, or use another role")
    if not tables and not conn.execute(text("SELECT has_schema_privilege(current_schema(), 'CREATE')")).scalar():
        return (f"store {shown}: the role may not create the store's tables in its schema; "
                "grant CREATE on the schema, or use another database")
    return None


class Store:
    """An open store, SQLite or PostgreSQL. Use as a context manager or call ``close()``.

    Args:
        location: a SQLite file's path, ``sqlite:///PATH``, or a ``postgresql://`` URL (the
            password in it, in ``PGPASSWORD`` or in ``~/.pgpass``); None for
            ``default_location()``.
        create: make the store (the SQLite file, or the tables in an empty PostgreSQL
            database) when there is none; False raises StoreError instead (reading never
            creates a store).

    Attributes: ``location`` (printable: the path, or the URL with its password masked),
    ``path`` (the SQLite file; None for PostgreSQL), ``dialect`` (``sqlite``/``postgresql``),
    ``engine`` (the SQLAlchemy engine).

    A store of an older format is upgraded in place when opened. Raises StoreError (naming
    the store, password masked, and the fix) when it cannot be reached, opened, created,
    upgraded or written; MissingDependency when the PostgreSQL driver (psycopg) is missing.
    """

    def __init__(self, location: str | os.PathLike | None = None, *, create: bool = True):
        self._where = Location(location)
        self.location = self._where.shown
        self.path = self._where.path
        self.dialect = self._where.dialect
        self.engine = self._engine()
        try:
            self._prepare(create)
        except BaseException:
            self.engine.dispose()
            raise

    # ------------------------------------------------------------------ connecting

    def _engine(self) -> Engine:
        if self.dialect == "sqlite":
            assert self.path is not None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create store {self.location}: {e.strerror or e}; "
                                 "pass --store PATH to use another file") from None
            engine = sa.create_engine(self._where.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
            event.listen(engine, "connect", _sqlite_connect)
            event.listen(engine, "begin", _sqlite_begin)
            return engine
        try:
            return sa.create_engine(self._where.url, pool_pre_ping=True, connect_args=_pg_connect_args(self._where))
        except ImportError:
            raise MissingDependency(f"cannot use store {self.location}: the PostgreSQL driver psycopg is not "
                                    "installed; pip install 'psycopg[binary]' (or cryptoperf's "
                                    "'postgresql' extra)") from None
        except sa.exc.SQLAlchemyError as e:  # e.g. a URL parameter the driver cannot take
            raise self.error(e, "use") from None

    def error(self, e: BaseException, doing: str) -> StoreError:
        """The StoreError to raise for ``e`` met while ``doing`` something (``"read"``, ``"write
        an explanation to"``): one line saying what failed, on which store (password masked),
        and the fix. For the store's own modules (``explanations``) as for this class."""
        reason = self._where.scrub(_reason(e))
        if self.dialect == "sqlite":
            fix = "pass --store PATH to use another file"
        else:
            fix = _pg_fix(reason)
        return StoreError(f"cannot {doing} store {self.location}: {reason}; {fix}")

    def writing(self) -> Any:
        """A connection context in a write transaction (SQLite: BEGIN IMMEDIATE, so that it
        waits for another writer up front instead of failing halfway); what every write to the
        store goes through, this class's and its tables' modules' (``explanations``)."""
        return self.engine.execution_options(cryptoperf_write=True).begin()

    # ------------------------------------------------------------------ schema

    def _version(self, conn: Connection, peek: bool = False) -> int:
        """The store's format version; 0 when it holds no cryptoperf store.

        Raises StoreError when the store holds a table 'runs' without a format version — unless
        ``peek``, which returns -1 instead: the lock-free first look reads the catalog in several
        statements, and another process's schema can commit between them (it then looks
        foreign); only the second look, under the schema lock, can tell."""
        inspector = sa.inspect(conn)
        if inspector.has_table("meta"):
            value = conn.execute(sa.select(meta_table.c.value).where(meta_table.c.key == "format_version")).scalar()
            if value is not None:
                return int(value)
        if self.dialect == "sqlite":
            version = int(conn.exec_driver_sql("PRAGMA user_version").scalar() or 0)
            if version:
                return version
        if inspector.has_table("runs"):
            if peek:
                return -1
            raise StoreError(f"store {self.location} holds a table 'runs' that cryptoperf did not make "
                             "(no format version); use another "
                             + ("file" if self.dialect == "sqlite" else "database"))
        return 0

    def _set_version(self, conn: Connection, version: int) -> None:
        meta_table.create(conn, checkfirst=True)
        conn.execute(sa.delete(meta_table).where(meta_table.c.key == "format_version"))
        conn.execute(sa.insert(meta_table).values(key="format_version", value=str(version)))
        if self.dialect == "sqlite":
            conn.exec_driver_sql(f"PRAGMA user_version = {int(version)}")

    def _prepare(self, create: bool) -> None:
        """Check the store's format; create or upgrade it (under a lock: two processes opening
        one store at once make or upgrade it once)."""
        try:
            with self.engine.connect() as conn:
                version = self._version(conn, peek=True)
            if version == FORMAT_VERSION:
                return
            if version > FORMAT_VERSION:
                raise self._newer(version)
            if version == 0 and not create:
                raise StoreError(f"store {self.location} holds no runs yet (no cryptoperf tables); run "
                                 "`cryptoperf study FILE` with this --store first")
            with self.writing() as conn:
                if self.dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})
                version = self._version(conn)  # again, under the lock
                if version > FORMAT_VERSION:
                    raise self._newer(version)
                if version == 0:
                    METADATA.create_all(conn)
                    self._set_version(conn, FORMAT_VERSION)
                while 0 < version < FORMAT_VERSION:
                    _UPGRADES[version](conn)
                    version += 1
                    self._set_version(conn, version)
        except StoreError:
            raise
        except (sa.exc.SQLAlchemyError, sqlite3.Error) as e:
            raise self.error(e, "use") from None
        except OSError as e:
            raise StoreError(f"cannot create store {self.location}: {e.strerror or e}; "
                             "pass --store PATH to use another file") from None

    def _newer(self, version: int) -> StoreError:
        other = "file" if self.dialect == "sqlite" else "database"
        return StoreError(f"store {self.location} has format {version}, newer than this cryptoperf "
                          f"understands ({FORMAT_VERSION}); upgrade cryptoperf or use --store with another {other}")

    # ------------------------------------------------------------------ API

    def close(self) -> None:
        """Close every connection (a SQLite store's write-ahead log is folded back into its
        file when the last one closes)."""
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self, statement: Any) -> int:
        """Run one statement in a transaction of its own, committed; the new row's id for an
        insert (else 0)."""
        try:
            with self.writing() as conn:
                result = conn.execute(statement)
                key = result.inserted_primary_key if result.is_insert else None
            return int(key[0]) if key else 0
        except (sa.exc.SQLAlchemyError, sqlite3.Error) as e:
            raise self.error(e, "write to") from None

    def _read(self, statement: Any) -> list[Mapping[str, Any]]:
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(statement).mappings().all())
        except (sa.exc.SQLAlchemyError, sqlite3.Error) as e:
            raise self.error(e, "read") from None

    def begin_run(self, kind: str, started_at: str, host: Mapping[str, Any],
                  study_name: str | None = None, study_toml: str | None = None,
                  seed: int | None = None, analysis: Mapping[str, Any] | None = None,
                  process: Mapping[str, Any] | None = None) -> int:
        """Insert a ``runs`` row with status ``running``; return its id. ``analysis`` is the
        run's ``analysis.Settings.as_dict()`` (margin, multiplicity, looks); ``process`` the
        orchestrator's ``hostinfo.process_identity()`` (with the CI job's label, ``job``)."""
        return self._write(sa.insert(runs_table).values(
            kind=kind, started_at=started_at, study_name=study_name, study_toml=study_toml,
            host_json=json.dumps(host), seed=seed, status="running", format_version=FORMAT_VERSION,
            analysis_json=json.dumps(dict(analysis)) if analysis is not None else None,
            process_json=json.dumps(dict(process)) if process is not None else None))

    def add_outcome(self, run_id: int, outcome: Outcome) -> int:
        """Insert and commit one repetition's outcome as a ``results`` row, in a transaction of
        its own (``outcome_row``: the worker's message as received, never the derived figures);
        return the row's id."""
        return self.add_result(run_id, outcome_row(outcome))

    def add_result(self, run_id: int, row: Mapping[str, Any]) -> int:
        """Insert and commit one ``results`` row given as ``results`` gives rows back (its
        columns, ``params``, ``result`` and ``host`` decoded; ``outcome_row`` makes one from an
        Outcome), in a transaction of its own; return its id. For copying rows between runs;
        a repetition is stored with ``add_outcome``."""
        r = row
        host = r.get("host")
        return self._write(sa.insert(results_table).values(
            run_id=run_id, cell=r["cell"], configuration=r["configuration"], backend=r["backend"],
            label=r["label"], op=r["op"], params_json=json.dumps(r["params"]), size_bytes=r["size_bytes"],
            repetition=r["block"], status=r["status"], reason=r["reason"],
            started_at=r.get("started_at"), finished_at=r.get("finished_at"),
            result_json=json.dumps(r["result"]) if r.get("result") is not None else None,
            cpu=r["cpu"], build=r["build"], fips=int(bool(r["fips"])), block=r["block"],
            position=r.get("position", 0), attempt=r.get("attempt", 1),
            superseded=int(bool(r.get("superseded"))), disturbed=r.get("disturbed") or "",
            batch=r.get("batch"), host_json=json.dumps(dict(host)) if host is not None else None))

    def supersede(self, run_id: int, result_ids: list[int], why: str) -> None:
        """Mark results ``result_ids`` (ids ``add_result`` returned) of run ``run_id`` as
        superseded, with ``why`` in ``disturbed``: the Ray executor's repetitions of a block
        whose node was lost mid-block and that ran again whole (no schema change: the columns
        a disturbed re-run uses)."""
        if result_ids:
            self._write(sa.update(results_table)
                        .where(results_table.c.run_id == run_id, results_table.c.id.in_(list(result_ids)))
                        .values(superseded=1, disturbed=why))

    def reopen_run(self, run_id: int, process: Mapping[str, Any]) -> None:
        """Mark run ``run_id`` ``running`` again, by the orchestrator ``process``
        (``hostinfo.process_identity()``), with no ``finished_at``: a study resuming it
        (``cryptoperf study FILE --resume RUN_ID``)."""
        self._write(sa.update(runs_table).where(runs_table.c.id == run_id)
                    .values(status="running", finished_at=None, process_json=json.dumps(dict(process))))

    def finish_run(self, run_id: int, finished_at: str, status: str) -> None:
        """Set a run's ``finished_at`` and final ``status`` (complete, interrupted, failed)."""
        self._write(sa.update(runs_table).where(runs_table.c.id == run_id)
                    .values(finished_at=finished_at, status=status))

    def runs(self) -> list[dict[str, Any]]:
        """Every ``runs`` row as a dict (``host``, ``analysis`` and ``process`` decoded), oldest
        first."""
        out = []
        for row in self._read(sa.select(runs_table).order_by(runs_table.c.id)):
            d = dict(row)
            d["host"] = json.loads(d.pop("host_json"))
            aj = d.pop("analysis_json", None)
            d["analysis"] = json.loads(aj) if aj else None
            pj = d.pop("process_json", None)
            d["process"] = json.loads(pj) if pj else None
            out.append(d)
        return out

    def result_counts(self) -> dict[int, dict[str, int]]:
        """Per run id: ``cells`` (distinct cells), ``results`` (analysed repetitions: neither
        calibration nor superseded) and ``ok`` (measured ones), without decoding any result;
        runs without results are absent."""
        r = results_table.c
        analysed = sa.and_(r.block > 0, r.superseded == 0)
        rows = self._read(sa.select(
            r.run_id.label("run_id"), sa.func.count(sa.distinct(r.cell)).label("cells"),
            sa.func.sum(sa.case((analysed, 1), else_=0)).label("results"),
            sa.func.sum(sa.case((sa.and_(analysed, r.status == "ok"), 1), else_=0)).label("ok"),
        ).group_by(r.run_id))
        return {int(x["run_id"]): {"cells": int(x["cells"]), "results": int(x["results"] or 0),
                                   "ok": int(x["ok"] or 0)} for x in rows}

    def results(self, run_id: int) -> Iterator[dict[str, Any]]:
        """The ``results`` rows of one run as dicts, in the order they were stored: ``params``,
        ``result`` and ``host`` (None: the run's host) decoded from JSON, nothing else (what
        ``add_result`` takes back)."""
        rows = self._read(sa.select(results_table).where(results_table.c.run_id == run_id)
                          .order_by(results_table.c.id))
        for row in rows:
            d = dict(row)
            d["params"] = json.loads(d.pop("params_json"))
            rj = d.pop("result_json")
            d["result"] = json.loads(rj) if rj else None
            hj = d.pop("host_json", None)
            d["host"] = json.loads(hj) if hj else None
            yield d

    def outcomes(self, run_id: int) -> dict[int, Outcome]:
        """The outcomes of one run, typed (``row_outcome``), by their ``results`` row id, in
        the order they were stored; rows of every format version read alike."""
        return {int(row["id"]): row_outcome(row, i) for i, row in enumerate(self.results(run_id))}


# --------------------------------------------------------------------------- the codec


def outcome_row(o: Outcome) -> dict[str, Any]:
    """The ``results`` row of an outcome (as ``Store.results`` gives rows back): its cell's
    columns (``cell`` its key), its repetition's (``block``, ``position``, ``attempt``,
    ``batch`` requested), ``status``, ``reason``, timestamps, ``superseded``, ``disturbed``,
    ``result`` (the worker's message exactly as received, ``WorkerResult.raw``; None without
    one) and ``host`` (None: the run's host). Derived figures are not stored: ``row_outcome``
    derives them again, with the code a study uses."""
    c, rep = o.cell, o.repetition
    return {"cell": c.key, "configuration": c.configuration, "backend": c.backend, "label": c.label,
            "op": c.op, "params": dict(c.params), "size_bytes": c.size_bytes, "cpu": c.cpu, "build": c.build,
            "fips": c.fips, "block": rep.block, "position": rep.position, "attempt": rep.attempt,
            "batch": rep.batch, "status": o.status, "reason": o.reason, "started_at": o.started_at,
            "finished_at": o.finished_at, "superseded": o.superseded, "disturbed": o.disturbed,
            "result": dict(o.result.raw) if o.result is not None else None,
            "host": dict(o.host) if o.host is not None else None}


def row_outcome(row: Mapping[str, Any], index: int) -> Outcome:
    """The Outcome of a ``results`` row (``Store.results``'s shape, of any format version),
    ``index`` its place in the run (``Repetition.index``): the worker's message decoded
    (``result.decode``) and, for a measured one, latency and throughput derived again
    (``model.outcome_from_result``). A stored message that cannot be decoded leaves the
    outcome without a result: ``failed`` with why if it was ``ok``; any other status is kept,
    why added to its reason."""
    cell = Cell(configuration=row["configuration"], backend=row["backend"], label=row["label"],
                op=row["op"], params=row["params"] or {}, size_bytes=row["size_bytes"],
                cpu=row["cpu"], build=row["build"])
    rep = Repetition(cell=cell, block=int(row["block"]), position=int(row["position"]), index=index,
                     attempt=int(row["attempt"]), batch=row["batch"])
    status, reason = row["status"], row["reason"]
    try:
        result = decode(row["result"]) if row["result"] is not None else None
    except UnreadableResult as e:
        result = None
        if status == OK:
            status, reason = FAILED, f"stored {e}"
        else:  # its own reason first: that is what the outcome was
            reason = f"{reason}; stored {e}" if reason else f"stored {e}"
    if status == OK and result is not None:
        o = outcome_from_result(rep, result)
    else:
        o = Outcome(rep, status, reason, result)
    o.started_at = row.get("started_at") or ""
    o.finished_at = row.get("finished_at") or ""
    o.disturbed = row.get("disturbed") or ""
    o.superseded = bool(row.get("superseded"))
    o.host = row.get("host")
    return o


def _sqlite_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    """Every SQLite connection: SQLAlchemy emits BEGIN itself (``_sqlite_begin``; the driver's
    own would leave DDL outside the transaction), foreign keys on, write-ahead logging (readers
    never block, and a writer waits for another up to the busy timeout)."""
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA foreign_keys = ON")
    try:
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError:
        pass  # a read-only file keeps its journal mode; reading it still works


def _sqlite_begin(conn: Connection) -> None:
    """BEGIN IMMEDIATE for a write transaction (it takes the write lock first, waiting for
    another writer, so it never fails halfway for a lock), BEGIN for a read."""
    write = conn.get_execution_options().get("cryptoperf_write")
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
