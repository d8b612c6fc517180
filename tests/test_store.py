"""The SQLite store: schema, format version, commits per row, refusal of newer formats, the
upgrade of a format-1 store (fixtures/store-v1.sqlite, written by cryptoperf 0.1), and the JSON
documents of every format version (fixtures)."""

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from hdrh.histogram import HdrHistogram

from cryptoperf.store import db as store
from cryptoperf.store import stored_run as stored
from cryptoperf.errors import StoreError
from cryptoperf.model import Cell, Outcome, Repetition, outcome_from_result
from cryptoperf.result import decode

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
        assert other.execute("SELECT status, format_version FROM runs").fetchone() == ("running", store.FORMAT_VERSION)
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
        db.execute(text("ALTER TABLE results ADD COLUMN half_done TEXT"))
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
    if doc["format_version"] >= 3:  # the machine that ran it (null: the run's host)
        assert "host" in run
    d = doc["deltas"][0]
    for key in ("latency", "throughput", "status", "latency_verdict" if doc["format_version"] == 1 else "verdict"):
        assert key in d


def test_a_format_2_store_is_upgraded_in_place_and_still_loads_and_reports(tmp_path):
    """fixtures/store-v2.sqlite was written by cryptoperf 0.2: a two-configuration study whose
    B (sha512, scripted at 2631 ns) is 1.3 × A (sha256, 2024 ns) in every block, and a speed
    run. Format 3 adds results.host_json (NULL: the run's host) and the meta table."""
    path = tmp_path / "runs.sqlite"
    shutil.copy(FIXTURES / "store-v2.sqlite", path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert "host_json" not in [r[1] for r in db.execute("PRAGMA table_info(results)")]
    db.close()
    with store.Store(path) as st:
        run = stored.load_run(st, 1)
        assert run.meta["format_version"] == 2 and run.study.name == "v2-fixture"
        assert all(o.host is None for o in run.outcomes) and len(run.outcomes) == 8
        (b,) = [d for d in run.deltas if d.configuration == "B"]
        assert b.status == "ok" and b.blocks == 3 and b.verdict.kind == "slower"
        assert b.latency.ratio == pytest.approx(2631 / 2024, rel=1e-3)
        speed = stored.load_run(st, 2)
        assert speed.study is None and [o.cell.size_bytes for o in speed.outcomes] == [64]
        from cryptoperf.report import formats
        for fmt in ("md", "json", "csv"):
            assert formats.render(run, fmt, st.location)
        # the upgraded store takes format-3 rows beside the old ones
        rid = st.begin_run("speed", "t", {"hostname": "n"})
        st.add_result(rid, row(host={"hostname": "node-2"}))
        assert [r["host"] for r in st.results(rid)] == [{"hostname": "node-2"}]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == store.FORMAT_VERSION
    assert db.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone() == (str(store.FORMAT_VERSION),)
    assert db.execute("SELECT count(*) FROM results WHERE host_json IS NULL").fetchone()[0] == 9


def test_a_format_3_store_is_upgraded_and_its_documents_name_the_process_cpu(tmp_path):
    """fixtures/store-v3.sqlite was written by cryptoperf 0.3 before format 4: a study whose B
    (sha512, scripted at 2631 ns) is 1.3 × A (sha256, 2024 ns) beside a tls-handshake at two
    levels, and a speed run. Format 4 changes no table: the worker process's CPU per operation
    is process_cpu_ns_per_op in every document (cpu_ns_per_op before)."""
    path = tmp_path / "runs.sqlite"
    shutil.copy(FIXTURES / "store-v3.sqlite", path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 3
    tables = db.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    db.close()
    from cryptoperf.report import formats
    with store.Store(path) as st:
        run = stored.load_run(st, 1)
        assert run.meta["format_version"] == 3 and run.study.name == "v3-fixture"
        (b,) = [d for d in run.deltas if d.configuration == "B" and d.op == "sha512"]
        assert b.verdict.kind == "slower" and b.latency.ratio == pytest.approx(2631 / 2024, rel=1e-3)
        doc = json.loads(formats.render(run, "json", st.location))
        assert doc["format_version"] == store.FORMAT_VERSION == 4
        rep = doc["repetitions"][0]
        assert "process_cpu_ns_per_op" in rep["throughput"] and "cpu_ns_per_op" not in rep["throughput"]
        assert formats.render(run, "csv", st.location).splitlines()[0].count("process_cpu_ns_per_op") == 1
        assert "full handshake" in formats.render(run, "md", st.location)
        speed = stored.load_run(st, 2)
        assert [o.cell.op for o in speed.outcomes] == ["sha256"]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == store.FORMAT_VERSION
    assert db.execute("SELECT name, sql FROM sqlite_master WHERE name != 'meta' ORDER BY name").fetchall() == \
        [t for t in tables if t[0] != "meta"]


def test_a_result_keeps_the_host_that_ran_it(tmp_path):
    """results.host_json: the fingerprint of the machine that ran a repetition, NULL for the
    run's own; stored.load_run gives it to the Outcome, the JSON document to the repetition."""
    from cryptoperf.store.rows import repetition_entry
    with store.Store(tmp_path / "runs.sqlite") as st:
        rid = st.begin_run("study", "t", {"hostname": "head", "cpu_model": "X"}, "s")
        st.add_result(rid, row())
        st.add_result(rid, row(block=2, host={"hostname": "node-b", "cpu_model": "Y"}))
        rows = list(st.results(rid))
        assert [r["host"] for r in rows] == [None, {"hostname": "node-b", "cpu_model": "Y"}]
        outcomes = list(st.outcomes(rid).values())
    assert [o.host for o in outcomes] == [None, {"hostname": "node-b", "cpu_model": "Y"}]
    assert [repetition_entry(o)["host"] for o in outcomes] == [None, {"hostname": "node-b", "cpu_model": "Y"}]


def _measured(block: int, **result) -> Outcome:
    hist = HdrHistogram(1, 3_600_000_000_000, 3)
    hist.record_value(2000, 500)
    message = {"type": "result", "id": f"k#{block}", "backend": "openssl", "op": "sha256", "status": "ok",
               "library": "OpenSSL", "library_version": "3.0.13", "fips": False, "params": {"size_bytes": 64},
               "threads": 1, "ops": 500, "bytes_per_op": 64, "batch": 8, "timing": "batched",
               "wall_ns": 1_000_000, "cpu_ns": [990_000], "cpu_ns_total": 990_000, "tsc_cycles": None,
               "steal_ticks": 0, "total_ticks": 200, "busy_ticks": 100,
               "histogram": hist.encode().decode("ascii"), "samples": 62, "a_newer_field": {"x": [1]}, **result}
    rep = Repetition(Cell("A", "openssl", "sha", "sha256", {"digest": "x"}, 64, "no-aesni", "fips"), block,
                     position=1, attempt=2, batch=8)
    o = outcome_from_result(rep, decode(dict(message, cpu_mask="no-aesni", fips=True)))
    o.started_at, o.finished_at, o.disturbed, o.superseded = "t0", "t1", "steal 9 %", True
    o.host = {"hostname": "node-a"}
    return o


def test_an_outcome_goes_in_and_comes_back_typed_through_one_codec(tmp_path):
    """Store.add_outcome / Store.outcomes: what a repetition was (its cell, block, order, attempt,
    batch, status, host, timestamps) and the worker's message exactly as received come back;
    latency and throughput are derived again from that message, as a study derives them."""
    o = _measured(3)
    failed = Outcome(Repetition(Cell("B", "ring", "sha", "sha256", {}, 64), 3), "failed", "worker crashed: boom")
    with store.Store(tmp_path / "runs.sqlite") as st:
        rid = st.begin_run("study", "t", {"hostname": "head"}, "s")
        ids = [st.add_outcome(rid, o), st.add_outcome(rid, failed)]
        back = st.outcomes(rid)
        (row, _) = list(st.results(rid))
    assert list(back) == ids
    got, got_failed = back.values()
    assert got.repetition == o.repetition and got.cell == o.cell and got.cell.params == {"digest": "x"}
    assert (got.status, got.reason, got.started_at, got.finished_at, got.disturbed, got.superseded, got.host) == (
        "ok", "", "t0", "t1", "steal 9 %", True, {"hostname": "node-a"})
    assert got.result == o.result and got.result.raw == o.result.raw and got.result.extras == {"a_newer_field": {"x": [1]}}
    assert got.latency == o.latency and got.throughput == o.throughput
    assert (got_failed.status, got_failed.reason, got_failed.result) == ("failed", "worker crashed: boom", None)
    # the row: the cell's columns and the message as received, nothing derived
    assert row["result"] == dict(o.result.raw) and "latency" not in row and row["cell"] == o.cell.key
    assert (row["cpu"], row["build"], row["fips"], row["block"], row["position"], row["attempt"], row["batch"]) == (
        "no-aesni", "fips", 1, 3, 1, 2, 8)


def test_a_stored_result_that_cannot_be_read_fails_its_outcome_with_the_field(tmp_path):
    with store.Store(tmp_path / "runs.sqlite") as st:
        rid = st.begin_run("study", "t", {}, "s")
        st.add_result(rid, row(result={"status": "ok", "ops": "many"}))
        st.add_result(rid, row(block=2, status="unsupported", reason="no", result={"status": "unsupported", "fips": 3}))
        ok, unsupported = st.outcomes(rid).values()
    assert ok.status == "failed" and ok.reason.startswith("stored unreadable result: ops is 'many'") and ok.result is None
    assert (unsupported.status, unsupported.reason, unsupported.result) == (
        "unsupported", "no; stored unreadable result: fips is 3 (int), not true or false", None)


def test_writable_problem_creates_nothing(tmp_path):
    assert store.writable_problem(tmp_path / "new" / "runs.sqlite") is None and not (tmp_path / "new").exists()
    assert "is a directory" in store.writable_problem(tmp_path)
    with store.Store(tmp_path / "runs.sqlite"):
        pass
    assert store.writable_problem(str(tmp_path / "runs.sqlite")) is None


def test_sqlite_store_runs_in_wal_mode_with_a_busy_timeout(tmp_path):
    """Two writers on one file wait for each other (busy timeout) instead of failing, and a
    reader never blocks a writer (write-ahead log)."""
    path = tmp_path / "runs.sqlite"
    with store.Store(path) as st:
        with st.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == store.SQLITE_BUSY_TIMEOUT_S * 1000
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        # a reader holding a snapshot open does not stop a write from committing
        reader = sqlite3.connect(path)
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        st.begin_run("speed", "t", {})
        assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 0  # its snapshot
        reader.rollback()
        assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        reader.close()


def test_a_write_waits_for_another_writer_instead_of_failing(tmp_path):
    """While another connection holds the write lock, a write waits; once that transaction
    ends, it goes through (never 'database is locked' within the busy timeout)."""
    import threading
    path = tmp_path / "runs.sqlite"
    with store.Store(path) as st:
        rid = st.begin_run("speed", "t", {})
        other = sqlite3.connect(path, check_same_thread=False)
        other.isolation_level = None
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO runs (kind, started_at, host_json, status, format_version) "
                      "VALUES ('speed', 't', '{}', 'running', 3)")
        released = threading.Event()

        def release():
            released.wait(5)
            other.execute("COMMIT")
        t = threading.Thread(target=release)
        t.start()
        waiting = threading.Timer(0.2, released.set)
        waiting.start()
        st.add_result(rid, row())  # blocks until the other transaction commits
        t.join()
        waiting.join()
        other.close()
        assert [r["kind"] for r in st.runs()] == ["speed", "speed"]
        assert len(list(st.results(rid))) == 1


def test_the_format_version_lives_in_the_meta_table_and_user_version(tmp_path):
    path = tmp_path / "runs.sqlite"
    store.Store(path).close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT key, value FROM meta").fetchall() == [("format_version", str(store.FORMAT_VERSION))]
    assert db.execute("PRAGMA user_version").fetchone()[0] == store.FORMAT_VERSION
    db.execute("UPDATE meta SET value = '7'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="format 7, newer than this cryptoperf"):
        store.Store(path)


def test_a_foreign_runs_table_is_not_taken_for_a_store(tmp_path):
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (x INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="holds a table 'runs' that cryptoperf did not make"):
        store.Store(path)


@pytest.mark.parametrize("given, shown", [
    ("postgresql://perf:s3cr3t@db.example:5432/cryptoperf", "postgresql://perf:***@db.example:5432/cryptoperf"),
    ("postgres://perf@db.example/cryptoperf", "postgres://perf@db.example/cryptoperf"),
    ("postgresql://db.example/cryptoperf?user=perf&password=s3cr3t&sslmode=require",
     "postgresql://db.example/cryptoperf?user=perf&password=***&sslmode=require"),
    ("postgresql+psycopg://perf:p%40ss@db/x", "postgresql+psycopg://perf:***@db/x"),
])
def test_a_postgresql_url_is_shown_with_its_password_masked(given, shown):
    loc = store.Location(given)
    assert loc.dialect == "postgresql" and loc.path is None and loc.shown == shown
    assert loc.url.drivername == "postgresql+psycopg"
    password = {"s3cr3t": "s3cr3t", "p%40ss": "p@ss"}.get(next((k for k in ("s3cr3t", "p%40ss") if k in given), ""))
    assert loc.secrets == ((password,) if password else ())
    if password:  # the password alone (as a driver message might quote it) is masked too
        assert password not in loc.scrub(f"FATAL: password {password} is wrong for {given}")


def test_paths_and_sqlite_urls_are_sqlite_stores(tmp_path):
    for given in (tmp_path / "a.sqlite", str(tmp_path / "a.sqlite"), f"sqlite:///{tmp_path / 'a.sqlite'}"):
        loc = store.Location(given)
        assert loc.dialect == "sqlite" and loc.path == tmp_path / "a.sqlite" and loc.shown == str(tmp_path / "a.sqlite")


@pytest.mark.parametrize("given, fragment", [
    ("mysql://perf:s3cr3t@db/x", "the scheme 'mysql' is not supported"),
    ("postgresql+psycopg2://perf:s3cr3t@db/x", "the scheme 'postgresql+psycopg2' is not supported"),
    ("sqlite://", "an in-memory SQLite database keeps nothing"),
    ("postgresql://perf:s3cr3t@db:notaport/x", "is not a URL cryptoperf can read"),
])
def test_an_unusable_url_is_one_line_without_its_password(given, fragment):
    with pytest.raises(StoreError, match=re.escape(fragment)) as e:
        store.Location(given)
    assert "s3cr3t" not in str(e.value) and "\n" not in str(e.value)


def test_the_default_store_follows_cryptoperf_store(monkeypatch, tmp_path):
    monkeypatch.delenv(store.STORE_ENV, raising=False)
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(tmp_path))
    assert store.default_location() == tmp_path / "runs.sqlite"
    monkeypatch.setenv(store.STORE_ENV, "postgresql://perf:s3cr3t@db.example/cryptoperf")
    assert store.default_location() == "postgresql://perf:s3cr3t@db.example/cryptoperf"
    assert store.shown_default() == "postgresql://perf:***@db.example/cryptoperf"


def test_a_missing_postgresql_driver_is_one_line_naming_the_fix(monkeypatch):
    import sys
    from cryptoperf.errors import MissingDependency
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(MissingDependency) as e:
        store.Store("postgresql://perf:s3cr3t@127.0.0.1:1/cryptoperf")
    msg = str(e.value)
    assert "postgresql://perf:***@127.0.0.1:1/cryptoperf" in msg and "pip install 'psycopg[binary]'" in msg
    assert "s3cr3t" not in msg


def test_stores_opened_at_once_on_a_new_file_make_one_schema(tmp_path):
    """Threads (as processes would) opening one new SQLite store at the same moment and
    writing at once: the schema is made once, every write goes through."""
    import threading
    path = tmp_path / "runs.sqlite"
    n = 4
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def open_and_write(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            with store.Store(path) as st:
                rid = st.begin_run("speed", f"t{i}", {"n": i})
                for b in range(5):
                    st.add_result(rid, row(block=b + 1))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
    threads = [threading.Thread(target=open_and_write, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with store.Store(path) as st:
        assert sorted(r["started_at"] for r in st.runs()) == [f"t{i}" for i in range(n)]
        assert {k: v["results"] for k, v in st.result_counts().items()} == {i: 5 for i in range(1, n + 1)}


def test_an_error_line_never_shows_a_url_password(cli, monkeypatch):
    """Whatever raised it, the CLI's error line masks a URL's password (here an internal
    error whose message quotes a URL)."""
    from cryptoperf.store import stored_run as stored_mod

    def boom(*a, **k):
        raise RuntimeError("lost postgresql://perf:s3cr3t@db.example/cryptoperf?password=s3cr3t")
    monkeypatch.setattr(stored_mod, "open_store", boom)
    res = cli("list")
    assert res.code == 1 and "s3cr3t" not in res.err
    assert "postgresql://perf:***@db.example/cryptoperf?password=***" in res.err
