"""The PostgreSQL store against a real server (tests/pg_server.py: PostgreSQL from the Debian
package, started on loopback from a private data directory): a run stored there is listed,
reported, compared and loaded like the same run in SQLite; the one upgrade path runs there
too; the URL's password reaches no artefact; a server that cannot be used is one line."""

import json

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from conftest import TWO_CONFIG_STUDY, assert_one_line_error
from cryptoperf.store import db as store_mod
from cryptoperf.store import stored_run as stored
from cryptoperf.errors import StoreError
from cryptoperf.store.db import Store
from pg_server import ROLE, pg_database, pg_server, pg_url  # noqa: F401 (fixtures)
from stored_runs import DRIFT, run_study
from test_store import FIXTURES

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

# the block order pinned, so that the SQLite and PostgreSQL runs hold the same repetitions in order
STUDY = TWO_CONFIG_STUDY.format(reps=3, timeout=5).replace("[[configuration]]", "seed = 1\n\n[[configuration]]", 1)


def two_runs(directory, store):
    """Runs 1 and 2 of stored_runs.two_runs (without the edited host) into ``store``: in run
    2, sha256 (configuration A) is exactly 1.5× slower."""
    run_study(directory / "r1", store, STUDY, {"rep_factors": DRIFT})
    run_study(directory / "r2", store, STUDY, {"rep_factors": DRIFT, "latency_ns": {"sha256": 3036}})


def without(doc, *keys):
    """``doc`` without the keys that differ between two stores (times, the store's name)."""
    if isinstance(doc, dict):
        return {k: without(v, *keys) for k, v in doc.items() if k not in keys}
    if isinstance(doc, list):
        return [without(v, *keys) for v in doc]
    return doc


def verdict_lines(text):
    """The lines of a report that give verdicts."""
    return [line for line in text.splitlines()
            if any(w in line for w in ("faster", "slower", "equivalent", "inconclusive"))]


def test_a_run_in_postgresql_is_listed_reported_and_compared_like_a_sqlite_one(cli, pg_url, tmp_path):
    sqlite = tmp_path / "runs.sqlite"
    two_runs(tmp_path / "pg", pg_url)
    two_runs(tmp_path / "sqlite", sqlite)
    docs = {}
    for name, where in (("pg", pg_url), ("sqlite", sqlite)):
        listed = cli("list", "--store", where, "--json")
        assert listed.code == 0, listed.err
        compared = cli("compare", "1", "2", "--store", where, "--json")
        assert compared.code == 0, compared.err
        reports = {}
        for fmt in ("json", "md", "csv", "html"):
            res = cli("report", "2", "--store", where, "--format", fmt, "-o", "-")
            assert res.code == 0 and "using run 2 (study t" in res.err, res.err
            reports[fmt] = res.out
        docs[name] = (json.loads(listed.out), json.loads(compared.out), reports)
    (pg_list, pg_cmp, pg_rep), (sq_list, sq_cmp, sq_rep) = docs["pg"], docs["sqlite"]
    # listed like a SQLite one: same runs, statuses, cells and counts
    assert pg_list["store"] == store_mod.mask(pg_url) and sq_list["store"] == str(sqlite)
    assert [(r["id"], r["status"], r["cells"], r["results"], r["ok"]) for r in pg_list["runs"]] == [
        (1, "complete", 2, 6, 6), (2, "complete", 2, 6, 6)]
    assert without(pg_list["runs"], "started_at", "finished_at") == without(sq_list["runs"], "started_at", "finished_at")
    # compared like a SQLite one: the same deltas and verdicts
    a = next(d for d in pg_cmp["deltas"] if d["configuration"] == "A")
    assert a["verdict"]["kind"] == "slower" and a["latency"]["ratio"] == pytest.approx(1.5, rel=1e-3)
    assert pg_cmp["deltas"] == sq_cmp["deltas"] and pg_cmp["analysis"] == sq_cmp["analysis"]
    # reported like a SQLite one: the same figures in every format
    pg_doc, sq_doc = json.loads(pg_rep["json"]), json.loads(sq_rep["json"])
    assert pg_doc["store"] == {"path": store_mod.mask(pg_url), "run_id": 2}
    for key in ("cells", "deltas", "analysis"):
        assert pg_doc[key] == sq_doc[key]
    assert without(pg_doc["repetitions"], "started_at", "finished_at") == \
        without(sq_doc["repetitions"], "started_at", "finished_at")
    assert len(pg_rep["csv"].splitlines()) == len(sq_rep["csv"].splitlines()) > 6
    assert verdict_lines(pg_rep["md"]) == verdict_lines(sq_rep["md"]) and "p50 latency" in pg_rep["md"] and "% lower [" in pg_rep["md"]
    for fmt in ("md", "csv", "html"):  # nothing of the store's own but its name
        assert str(sqlite) not in sq_rep[fmt] and store_mod.mask(pg_url) not in pg_rep[fmt]
    assert pg_rep["html"].lstrip().lower().startswith("<!doctype html")


def test_cryptoperf_load_reads_a_postgresql_store(pg_url, tmp_path):
    pytest.importorskip("pandas")
    import cryptoperf
    two_runs(tmp_path, pg_url)
    df = cryptoperf.load([1, 2], store=pg_url)
    assert len(df) == 12 and set(df["run_id"]) == {1, 2}
    a = df[(df.configuration == "A")].groupby("run_id")["p50_ns"].median()
    assert a[2] / a[1] == pytest.approx(1.5, rel=2e-3)


def test_the_same_upgrade_path_runs_on_postgresql(pg_url, tmp_path):
    """The format-1 fixture's tables copied into PostgreSQL as format 1 are upgraded there
    by the same steps as in SQLite, and load with the same figures."""
    import shutil
    path = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURES / "store-v1.sqlite", path)
    source = sa.create_engine(f"sqlite:///{path}")
    old = sa.MetaData()
    old.reflect(source)
    target = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with source.connect() as src, target.begin() as dst:
        old.create_all(dst)
        for table in old.sorted_tables:
            rows = [dict(r) for r in src.execute(table.select()).mappings()]
            if rows:
                dst.execute(table.insert(), rows)
        store_mod.meta_table.create(dst)
        dst.execute(store_mod.meta_table.insert().values(key="format_version", value="1"))
    target.dispose()
    source.dispose()
    with Store(pg_url) as pg, Store(path) as sq:
        for run_id in (1, 2):
            p, s = stored.load_run(pg, run_id), stored.load_run(sq, run_id)
            assert p.meta["format_version"] == 1
            assert [(o.cell, o.repetition.block, o.repetition.position) for o in p.outcomes] == \
                [(o.cell, o.repetition.block, o.repetition.position) for o in s.outcomes]
            assert p.deltas == s.deltas
        with pg.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT value FROM meta")).scalar() == str(store_mod.FORMAT_VERSION)
            assert conn.execute(sa.text("SELECT count(*) FROM results WHERE host_json IS NULL")).scalar() == 49


def test_the_password_reaches_no_artefact(cli, pg_server, pg_database, tmp_path, write_study):  # noqa: F811
    """A study stored with the password in its URL: the password is in nothing it stores,
    prints, writes or renders — runs and results rows, the JSON document and the reports
    beside it, every report format, list, compare, and error lines."""
    url = pg_server.url(pg_database)
    secret = pg_server.password
    study = write_study(STUDY)
    seen: dict[str, str] = {}
    res = cli("study", study, "--store", url, "--out", tmp_path / "out")
    assert res.code == 0, res.err
    seen["study"] = res.out + res.err
    res = cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0",
              "--store", url)
    assert res.code == 0, res.err
    seen["speed"] = res.out + res.err
    for args in (("list",), ("list", "--json"), ("compare", "1", "2"), ("compare", "1", "2", "--json"),
                 ("compare", "--by", "host", "1"), ("report", "9"), ("plan", "--op", "hash", "--rate", "10"),
                 *(("report", "1", "--format", f, "-o", "-") for f in ("json", "md", "csv", "html"))):
        r = cli(*args, "--store", url)
        seen[" ".join(args)] = r.out + r.err
        if args[:2] == ("report", "1") and "json" in args:
            report_doc = json.loads(r.out)
    r = cli("list", "--store", pg_server.url(pg_database, password=secret + "x"))
    seen["wrong password"] = r.out + r.err
    for f in (tmp_path / "out").iterdir():
        seen[f.name] = f.read_text()
    with Store(url) as st:
        with st.engine.connect() as conn:
            for table in ("runs", "results", "meta"):
                for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                    seen[f"{table} row"] = seen.get(f"{table} row", "") + repr(tuple(row))
    assert sorted(f.suffix for f in (tmp_path / "out").iterdir()) == [".html", ".json", ".md"]
    leaked = [name for name, text in seen.items() if secret in text]
    assert leaked == []
    # the check is not vacuous: the artefacts do name the store, masked
    masked = store_mod.mask(url)
    assert masked in seen["list"] and masked in seen["list --json"] and masked in seen["report 9"]
    assert masked in seen["study"] and report_doc["store"]["path"] == masked
    assert "password authentication failed" in seen["wrong password"]


def test_credentials_may_come_from_pgpassword_or_pgpass(pg_server, pg_database, tmp_path, monkeypatch):  # noqa: F811
    url = pg_server.url(pg_database, password=None)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "pgpass"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(StoreError, match="(password authentication failed|no password supplied).*PGPASSWORD, ~/.pgpass"):
        Store(url)
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    with Store(url) as st:
        assert st.location == url and st.begin_run("speed", "t", {}) == 1
    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{pg_server.host}:{pg_server.port}:{pg_database}:{ROLE}:{pg_server.password}\n")
    pgpass.chmod(0o600)
    with Store(url) as st:
        assert [r["id"] for r in st.runs()] == [1]


def test_a_store_that_cannot_be_used_is_one_line(cli, pg_server, pg_database, tmp_path):  # noqa: F811
    import port_for
    secret = pg_server.password
    free = port_for.get_port(None)
    cases = [
        (pg_server.url(pg_database, password="wrong-" + secret),
         ["password authentication failed", "check the user and its password (PGPASSWORD, ~/.pgpass, or the URL)"]),
        (pg_server.url(pg_database).replace(f":{pg_server.port}/", f":{free}/"),
         ["check that the server runs and is reachable at that host and port"]),
        (pg_server.url("no_such_database"), ["does not exist", "create the database first"]),
        (pg_server.url(pg_database), ["holds no runs yet (no cryptoperf tables)", "`cryptoperf study FILE` with this --store first"]),
    ]
    for url, fragments in cases:
        for args in (("list",), ("report",), ("compare", "1", "2"), ("plan", "--op", "x", "--rate", "1")):
            line = assert_one_line_error(cli(*args, "--store", url), store_mod.mask(url), *fragments, code=1)
            assert secret not in line


def test_stores_opened_at_once_on_an_empty_database_make_one_schema(pg_url):
    """Processes (here threads) opening one new PostgreSQL store at the same moment: one
    creates the tables under the schema lock, the others find them made."""
    import threading
    n = 4
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def open_and_write(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            with Store(pg_url) as st:
                st.begin_run("speed", f"t{i}", {"n": i})
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
    threads = [threading.Thread(target=open_and_write, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with Store(pg_url) as st:
        assert sorted(r["started_at"] for r in st.runs()) == [f"t{i}" for i in range(n)]
        with st.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM meta")).scalar() == 1


def test_a_postgresql_store_publishes_like_a_sqlite_one_without_its_credentials(cli, pg_url, tmp_path):
    two_runs(tmp_path / "pg", pg_url)
    res = cli("publish", tmp_path / "site", "--store", pg_url)
    assert res.code == 0, res.err
    site = tmp_path / "site"
    assert (site / "runs" / "2.html").is_file() and list((site / "compare").glob("*.html"))
    url = make_url(pg_url)
    index = (site / "index.html").read_text()
    assert f"{url.host}:{url.port}/{url.database}" in index  # the store is named...
    for page in site.rglob("*"):
        if page.is_file():
            text = page.read_text(errors="replace")
            assert url.password not in text and f"{url.username}@" not in text, page  # ...without credentials
