"""The SQLite store: schema, format version, commits per row, refusal of newer formats, and the
JSON documents of every format version (fixtures)."""

import json
import sqlite3
from pathlib import Path

import pytest

from cryptoperf import store
from cryptoperf.errors import StoreError

FIXTURES = Path(__file__).with_name("fixtures")


def row(**kw):
    r = {"cell": "openssl/sha/1024/A", "configuration": "A", "backend": "openssl", "label": "sha",
         "op": "sha256", "params": {}, "size_bytes": 1024, "repetition": 1, "status": "ok",
         "reason": "", "started_at": "t0", "finished_at": "t1", "result": {"histogram": "HISTF..."}}
    r.update(kw)
    return r


def test_create_write_read(tmp_path):
    path = tmp_path / "sub" / "runs.sqlite"
    with store.Store(path) as st:
        rid = st.begin_run("study", "2025-01-01T00:00:00Z", {"cpu_model": "X"}, "s", "[study]", seed=3)
        st.add_result(rid, row())
        # committed at once: another connection sees it before the run finishes
        other = sqlite3.connect(path)
        assert other.execute("SELECT count(*) FROM results").fetchone()[0] == 1
        assert other.execute("SELECT status, format_version FROM runs").fetchone() == ("running", 1)
        st.add_result(rid, row(repetition=2, status="failed", reason="crash", result=None))
        st.finish_run(rid, "2025-01-01T00:01:00Z", "complete")
        (run,) = st.runs()
        assert run["status"] == "complete" and run["seed"] == 3 and run["host"] == {"cpu_model": "X"}
        rows = list(st.results(rid))
        assert [r["status"] for r in rows] == ["ok", "failed"]
        assert rows[0]["result"] == {"histogram": "HISTF..."} and rows[1]["result"] is None
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store.FORMAT_VERSION


def test_reopen_keeps_data(tmp_path):
    path = tmp_path / "runs.sqlite"
    with store.Store(path) as st:
        st.begin_run("speed", "t", {})
    with store.Store(path) as st:
        assert len(st.runs()) == 1


def test_newer_format_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="format 99, newer than"):
        store.Store(path)


def test_not_a_database(tmp_path):
    path = tmp_path / "runs.sqlite"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(StoreError, match="--store PATH"):
        store.Store(path)


def test_default_path_is_in_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("CRYPTOPERF_DATA_DIR", raising=False)
    p = store.default_path()
    assert p.name == "runs.sqlite" and "cryptoperf" in str(p.parent)
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(tmp_path))
    assert store.default_path() == tmp_path / "runs.sqlite"


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("study-v*.json")), ids=lambda p: p.name)
def test_json_fixtures_of_every_format_version_have_the_documented_fields(fixture):
    """One fixture per format version: a reader of the current version must understand them."""
    doc = json.loads(fixture.read_text())
    assert doc["format_version"] <= store.FORMAT_VERSION and doc["kind"] == "study"
    for key in ("study", "host", "runs", "cells", "deltas"):
        assert key in doc
    run = doc["runs"][0]
    for key in ("cell", "configuration", "backend", "op", "size_bytes", "repetition", "status", "result"):
        assert key in run
    d = doc["deltas"][0]
    for key in ("latency", "throughput", "latency_verdict", "status"):
        assert key in d
