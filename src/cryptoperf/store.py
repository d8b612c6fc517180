"""The store: every run of every study, in SQLite, written as it happens.

Default location: ``platformdirs.user_data_dir("cryptoperf")/runs.sqlite`` (or under
``$CRYPTOPERF_DATA_DIR``); ``--store PATH`` overrides. One row in ``runs`` per invocation (a
study or a ``speed``) with the study text, host fingerprint, seed and status; one row in
``results`` per finished worker run, committed as soon as it finishes, so a crash loses nothing
already measured.

FORMAT CHANGELOG (``FORMAT_VERSION``; also the JSON documents' ``format_version``):
  1 (cryptoperf 0.1) — first version: tables runs and results as below.
Upgrades: one function per version step in ``_UPGRADES``; the test fixtures keep a file of
every old version.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator, Mapping

from cryptoperf.builds import data_dir
from cryptoperf.errors import StoreError

FORMAT_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT NOT NULL,            -- 'study' or 'speed'
    started_at     TEXT NOT NULL,            -- UTC ISO 8601
    finished_at    TEXT,
    study_name     TEXT,
    study_toml     TEXT,
    host_json      TEXT NOT NULL,            -- hostinfo.fingerprint() + checks
    seed           INTEGER,                  -- bootstrap seed: CIs reproduce from it
    status         TEXT NOT NULL,            -- running, complete, interrupted, failed
    format_version INTEGER NOT NULL
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
    repetition     INTEGER NOT NULL,
    status         TEXT NOT NULL,            -- ok, unsupported, invalid, failed
    reason         TEXT NOT NULL,
    started_at     TEXT,
    finished_at    TEXT,
    result_json    TEXT                      -- the worker's result message, histogram included
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
"""

# version n → n+1 upgrade steps (none yet: format 1 is the first)
_UPGRADES: dict[int, str] = {}


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
            else:
                while version < FORMAT_VERSION:
                    self.db.executescript(_UPGRADES[version])
                    version += 1
                    self.db.execute(f"PRAGMA user_version = {version}")
                self.db.commit()
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
                  seed: int | None = None) -> int:
        """Insert a ``runs`` row with status ``running``; return its id."""
        return self._write(
            "INSERT INTO runs (kind, started_at, study_name, study_toml, host_json, seed, status, "
            "format_version) VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
            (kind, started_at, study_name, study_toml, json.dumps(host), seed, FORMAT_VERSION))

    def add_result(self, run_id: int, outcome_row: Mapping[str, Any]) -> int:
        """Insert and commit one ``results`` row. ``outcome_row`` has the keys ``cell``,
        ``configuration``, ``backend``, ``label``, ``op``, ``params``, ``size_bytes``,
        ``repetition``, ``status``, ``reason``, ``started_at``, ``finished_at``, ``result``
        (the worker's message or None) — as made by ``report.json.outcome_dict``."""
        r = outcome_row
        return self._write(
            "INSERT INTO results (run_id, cell, configuration, backend, label, op, params_json, "
            "size_bytes, repetition, status, reason, started_at, finished_at, result_json) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, r["cell"], r["configuration"], r["backend"], r["label"], r["op"],
             json.dumps(r["params"]), r["size_bytes"], r["repetition"], r["status"], r["reason"],
             r.get("started_at"), r.get("finished_at"),
             json.dumps(r["result"]) if r.get("result") is not None else None))

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
            out.append(d)
        return out

    def result_counts(self) -> dict[int, dict[str, int]]:
        """Per run id: ``cells`` (distinct cells), ``results`` (worker runs) and ``ok`` (measured
        ones), without decoding any result; runs without results are absent."""
        cur = self.db.execute("SELECT run_id, COUNT(DISTINCT cell), COUNT(*), "
                              "SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) FROM results GROUP BY run_id")
        return {int(r): {"cells": int(c), "results": int(n), "ok": int(ok or 0)} for r, c, n, ok in cur}

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
