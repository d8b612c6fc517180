"""The store: every run of every study, in SQLite, written as it happens.

Default location: ``platformdirs.user_data_dir("cryptoperf")/runs.sqlite`` (or under
``$CRYPTOPERF_DATA_DIR``); ``--store PATH`` overrides. One row in ``runs`` per stored run (a
study or a ``speed``) with the study text, host fingerprint, seed, analysis settings and status;
one row in ``results`` per finished repetition, committed as soon as it finishes, so a crash
loses nothing already measured.

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
Upgrades: one function per version step in ``_UPGRADES``; tests/fixtures keeps a store of
every old version.
"""

from __future__ import annotations

import json
import sqlite3
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from cryptoperf import builds
from cryptoperf.builds import data_dir
from cryptoperf.errors import StoreError
from cryptoperf.model import speed_cell_attrs

FORMAT_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT NOT NULL,            -- 'study' or 'speed'
    started_at     TEXT NOT NULL,            -- UTC ISO 8601
    finished_at    TEXT,
    study_name     TEXT,
    study_toml     TEXT,
    host_json      TEXT NOT NULL,            -- hostinfo.fingerprint() + checks
    seed           INTEGER,                  -- seed of the block order
    status         TEXT NOT NULL,            -- running, complete, interrupted, failed
    format_version INTEGER NOT NULL,
    analysis_json  TEXT,                     -- analysis.Settings: margin, multiplicity, looks
    process_json   TEXT                      -- hostinfo.process_identity() of the orchestrator
);
CREATE TABLE IF NOT EXISTS results (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id         INTEGER NOT NULL REFERENCES runs(id),
    cell           TEXT NOT NULL,            -- backend/label/size/configuration
    configuration  TEXT NOT NULL,
    backend        TEXT NOT NULL,
    label          TEXT NOT NULL,
    op             TEXT NOT NULL,
    params_json    TEXT NOT NULL,
    size_bytes     INTEGER,
    repetition     INTEGER NOT NULL,         -- = block (format 1's name for it)
    status         TEXT NOT NULL,            -- ok, unsupported, invalid, failed
    reason         TEXT NOT NULL,
    started_at     TEXT,
    finished_at    TEXT,
    result_json    TEXT,                     -- the worker's result message, histogram included
    cpu            TEXT NOT NULL DEFAULT 'baseline',  -- CPU capability mask
    build          TEXT NOT NULL DEFAULT 'default',   -- worker build
    fips           INTEGER NOT NULL DEFAULT 0,
    block          INTEGER NOT NULL DEFAULT 1,        -- 0: calibration
    position       INTEGER NOT NULL DEFAULT 0,        -- place in the block's random order
    attempt        INTEGER NOT NULL DEFAULT 1,        -- 2: the re-run of a disturbed repetition
    superseded     INTEGER NOT NULL DEFAULT 0,        -- 1: re-run, not analysed
    disturbed      TEXT NOT NULL DEFAULT '',          -- why the host disturbed it
    batch          INTEGER                            -- batch size requested (NULL: calibrate)
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
"""


def _upgrade_1_to_2(db: sqlite3.Connection) -> None:
    """Format 1 → 2: the new columns, filled from what format 1 kept (see the changelog)."""
    for column in ("cpu TEXT NOT NULL DEFAULT 'baseline'", "build TEXT NOT NULL DEFAULT 'default'",
                   "fips INTEGER NOT NULL DEFAULT 0", "block INTEGER NOT NULL DEFAULT 1",
                   "position INTEGER NOT NULL DEFAULT 0", "attempt INTEGER NOT NULL DEFAULT 1",
                   "superseded INTEGER NOT NULL DEFAULT 0", "disturbed TEXT NOT NULL DEFAULT ''",
                   "batch INTEGER"):
        db.execute(f"ALTER TABLE results ADD COLUMN {column}")
    db.execute("ALTER TABLE runs ADD COLUMN analysis_json TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN process_json TEXT")
    db.execute("UPDATE results SET block = repetition")
    configs_of: dict[int, dict[str, tuple[str, str]]] = {}
    for run_id, toml in db.execute("SELECT id, study_toml FROM runs").fetchall():
        configs: dict[str, tuple[str, str]] = {}
        try:
            doc = tomllib.loads(toml) if toml else {}
        except tomllib.TOMLDecodeError:
            doc = {}
        for c in doc.get("configuration") or []:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                build = builds.for_configuration(bool(c.get("fips", False)),
                                                 str(c.get("library", builds.SYSTEM_LIBRARY)))
                configs[c["name"]] = (str(c.get("cpu", "baseline")), build)
        configs_of[run_id] = configs
    rows = db.execute("SELECT id, run_id, cell, configuration, backend, label, size_bytes, repetition "
                      "FROM results ORDER BY id").fetchall()
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
        db.execute("UPDATE results SET cpu = ?, build = ?, fips = ?, position = ? WHERE id = ?",
                   (cpu, build, int(build == builds.FIPS), pos, rid))


#: version n → the function that upgrades a store of version n to n + 1
_UPGRADES: dict[int, Callable[[sqlite3.Connection], None]] = {1: _upgrade_1_to_2}


def default_path() -> Path:
    """``<user data dir>/cryptoperf/runs.sqlite`` (e.g. ~/.local/share/cryptoperf/runs.sqlite);
    under ``$CRYPTOPERF_DATA_DIR`` instead when that is set (``builds.data_dir``)."""
    return data_dir() / "runs.sqlite"


class Store:
    """An open SQLite store. Use as a context manager or call ``close()``.

    Raises StoreError (naming the path and the ``--store`` fix) when the file cannot be opened,
    created, upgraded or written.
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path)
            self.db.execute("PRAGMA foreign_keys = ON")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                self.db.executescript(_SCHEMA)
                self.db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
                self.db.commit()
            elif version > FORMAT_VERSION:
                raise StoreError(f"store {self.path} has format {version}, newer than this cryptoperf "
                                 f"understands ({FORMAT_VERSION}); upgrade cryptoperf or use --store "
                                 "with another file")
            elif version < FORMAT_VERSION:
                self.db.execute("BEGIN")  # one transaction, DDL included: all or nothing
                try:
                    while version < FORMAT_VERSION:
                        _UPGRADES[version](self.db)
                        version += 1
                        self.db.execute(f"PRAGMA user_version = {version}")
                    self.db.commit()
                except BaseException:
                    self.db.rollback()
                    raise
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot use store {self.path}: {e}; pass --store PATH to use another file") from None
        except OSError as e:
            raise StoreError(f"cannot create store {self.path}: {e.strerror or e}; "
                             "pass --store PATH to use another file") from None

    def close(self) -> None:
        """Close the database."""
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self, sql: str, args: tuple) -> int:
        try:
            cur = self.db.execute(sql, args)
            self.db.commit()
            return int(cur.lastrowid or 0)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot write to store {self.path}: {e}; "
                             "pass --store PATH to use another file") from None

    def begin_run(self, kind: str, started_at: str, host: Mapping[str, Any],
                  study_name: str | None = None, study_toml: str | None = None,
                  seed: int | None = None, analysis: Mapping[str, Any] | None = None,
                  process: Mapping[str, Any] | None = None) -> int:
        """Insert a ``runs`` row with status ``running``; return its id. ``analysis`` is the
        run's ``analysis.Settings.as_dict()`` (margin, multiplicity, looks); ``process`` the
        orchestrator's ``hostinfo.process_identity()``."""
        return self._write(
            "INSERT INTO runs (kind, started_at, study_name, study_toml, host_json, seed, status, "
            "format_version, analysis_json, process_json) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
            (kind, started_at, study_name, study_toml, json.dumps(host), seed, FORMAT_VERSION,
             json.dumps(dict(analysis)) if analysis is not None else None,
             json.dumps(dict(process)) if process is not None else None))

    def add_result(self, run_id: int, outcome_row: Mapping[str, Any]) -> int:
        """Insert and commit one ``results`` row. ``outcome_row`` has the keys ``cell``,
        ``configuration``, ``backend``, ``label``, ``op``, ``params``, ``size_bytes``, ``cpu``,
        ``build``, ``fips``, ``block``, ``position``, ``attempt``, ``superseded``,
        ``disturbed``, ``batch``, ``status``, ``reason``, ``started_at``, ``finished_at``,
        ``result`` (the worker's message or None) — as made by ``report.json.outcome_dict``."""
        r = outcome_row
        return self._write(
            "INSERT INTO results (run_id, cell, configuration, backend, label, op, params_json, "
            "size_bytes, repetition, status, reason, started_at, finished_at, result_json, cpu, "
            "build, fips, block, position, attempt, superseded, disturbed, batch) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, r["cell"], r["configuration"], r["backend"], r["label"], r["op"],
             json.dumps(r["params"]), r["size_bytes"], r["block"], r["status"], r["reason"],
             r.get("started_at"), r.get("finished_at"),
             json.dumps(r["result"]) if r.get("result") is not None else None,
             r["cpu"], r["build"], int(bool(r["fips"])), r["block"], r.get("position", 0),
             r.get("attempt", 1), int(bool(r.get("superseded"))), r.get("disturbed") or "", r.get("batch")))

    def supersede(self, run_id: int, result_ids: list[int], why: str) -> None:
        """Mark results ``result_ids`` (ids ``add_result`` returned) of run ``run_id`` as
        superseded, with ``why`` in ``disturbed``: the Ray executor's repetitions of a block
        whose node was lost mid-block and that ran again whole (no schema change: the columns
        a disturbed re-run uses)."""
        for rid in result_ids:
            self._write("UPDATE results SET superseded = 1, disturbed = ? WHERE run_id = ? AND id = ?",
                        (why, run_id, rid))

    def finish_run(self, run_id: int, finished_at: str, status: str) -> None:
        """Set a run's ``finished_at`` and final ``status`` (complete, interrupted, failed)."""
        self._write("UPDATE runs SET finished_at = ?, status = ? WHERE id = ?", (finished_at, status, run_id))

    def runs(self) -> list[dict[str, Any]]:
        """Every ``runs`` row as a dict (host decoded), oldest first."""
        cur = self.db.execute("SELECT * FROM runs ORDER BY id")
        names = [d[0] for d in cur.description]
        out = []
        for row in cur:
            d = dict(zip(names, row))
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
        cur = self.db.execute("SELECT run_id, COUNT(DISTINCT cell), "
                              "SUM(CASE WHEN block > 0 AND superseded = 0 THEN 1 ELSE 0 END), "
                              "SUM(CASE WHEN status = 'ok' AND block > 0 AND superseded = 0 THEN 1 ELSE 0 END) "
                              "FROM results GROUP BY run_id")
        return {int(r): {"cells": int(c), "results": int(n or 0), "ok": int(ok or 0)} for r, c, n, ok in cur}

    def results(self, run_id: int) -> Iterator[dict[str, Any]]:
        """The ``results`` rows of one run as dicts (params and result decoded), in order."""
        cur = self.db.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run_id,))
        names = [d[0] for d in cur.description]
        for row in cur:
            d = dict(zip(names, row))
            d["params"] = json.loads(d.pop("params_json"))
            rj = d.pop("result_json")
            d["result"] = json.loads(rj) if rj else None
            yield d
