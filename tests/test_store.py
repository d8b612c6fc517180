"""The SQLite store: schema, format version, commits per row, refusal of newer formats, the
upgrade of a format-1 store (fixtures/store-v1.sqlite, written by cryptoperf 0.1), and the JSON
documents of every format version (fixtures)."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from cryptoperf import store, stored
from cryptoperf.errors import StoreError

FIXTURES = Path(__file__).with_name("fixtures")


def row(**kw):
    r = {"cell": "openssl/sha/1024/A", "configuration": "A", "backend": "openssl", "label": "sha",
         "op": "sha256", "params": {}, "size_bytes": 1024, "cpu": "baseline", "build": "default",
         "fips": False, "block": 1, "position": 0, "attempt": 1, "superseded": False, "disturbed": "",
         "batch": 4, "status": "ok", "reason": "", "started_at": "t0", "finished_at": "t1",
         "result": {"histogram": "HISTF..."}}
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
        assert other.execute("SELECT status, format_version FROM runs").fetchone() == ("running", 2)
        st.add_result(rid, row(block=2, position=1, status="failed", reason="crash", result=None,
                               cpu="no-aesni", build="fips", fips=True))
        st.finish_run(rid, "2025-01-01T00:01:00Z", "complete")
        (run,) = st.runs()
        assert run["status"] == "complete" and run["seed"] == 3 and run["host"] == {"cpu_model": "X"}
        rows = list(st.results(rid))
        assert [r["status"] for r in rows] == ["ok", "failed"]
        assert rows[0]["result"] == {"histogram": "HISTF..."} and rows[1]["result"] is None
        assert [(r["block"], r["position"], r["cpu"], r["build"], r["fips"]) for r in rows] == [
            (1, 0, "baseline", "default", 0), (2, 1, "no-aesni", "fips", 1)]
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


def test_a_format_1_store_is_upgraded_in_place_and_still_loads_and_reports(tmp_path):
    """fixtures/store-v1.sqlite was written by cryptoperf 0.1: a 4-configuration study (one of
    them named 'cpu=no-aesni', which format 1's cell key made look masked, and one really
    masked) and a speed run. Format 2 reads masks from the stored study file instead."""
    path = tmp_path / "runs.sqlite"
    shutil.copy(FIXTURES / "store-v1.sqlite", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1
    with store.Store(path) as st:
        run = stored.load_run(st, 1)
        assert run.meta["format_version"] == 1
        cpu = {s.cell.configuration: s.cell.cpu for s in run.summaries.values()}
        assert cpu == {"A": "baseline", "B": "baseline", "cpu=no-aesni": "baseline", "masked": "no-aesni"}
        assert all(s.blocks_run == (1, 2, 3) for s in run.summaries.values())
        b = next(d for d in run.deltas if d.configuration == "B" and d.backend == "openssl" and d.size_bytes == 1024)
        assert b.status == "ok" and b.blocks == 3 and b.verdict.kind == "slower"
        assert b.latency.ratio == pytest.approx(1.3, rel=0.01)
        speed = stored.load_run(st, 2)
        assert speed.study is None and [o.cell.cpu for o in speed.outcomes] == ["baseline"]
        from cryptoperf.report import formats
        for fmt in ("md", "json", "csv"):
            assert formats.render(run, fmt, path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store.FORMAT_VERSION


def test_a_failed_upgrade_leaves_the_store_untouched(tmp_path, monkeypatch):
    path = tmp_path / "runs.sqlite"
    shutil.copy(FIXTURES / "store-v1.sqlite", path)

    def broken(db):
        db.execute("ALTER TABLE results ADD COLUMN half_done TEXT")
        raise RuntimeError("upgrade failed halfway")
    monkeypatch.setitem(store._UPGRADES, 1, broken)
    with pytest.raises(RuntimeError):
        store.Store(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "half_done" not in [r[1] for r in db.execute("PRAGMA table_info(results)")]


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("study-v*.json")), ids=lambda p: p.name)
def test_json_fixtures_of_every_format_version_have_the_documented_fields(fixture):
    """One fixture per format version: a reader of the current version must understand them."""
    doc = json.loads(fixture.read_text())
    assert doc["format_version"] <= store.FORMAT_VERSION and doc["kind"] == "study"
    for key in ("study", "host", "runs" if doc["format_version"] == 1 else "repetitions", "cells", "deltas"):
        assert key in doc
    run = doc["runs" if doc["format_version"] == 1 else "repetitions"][0]
    for key in ("cell", "configuration", "backend", "op", "size_bytes", "status", "result"):
        assert key in run
    assert ("repetition" if doc["format_version"] == 1 else "block") in run
    d = doc["deltas"][0]
    for key in ("latency", "throughput", "status", "latency_verdict" if doc["format_version"] == 1 else "verdict"):
        assert key in d
