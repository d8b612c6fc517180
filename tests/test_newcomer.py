"""What a newcomer ran into, fixed: results never overwritten, `latest` meaning the newest
study, studies that cannot answer ending in an error, dry runs that say what will not run, and
runs left "running" by a killed process reading as interrupted."""

import json
import sqlite3

import pytest

from conftest import TWO_CONFIG_STUDY, assert_one_line_error
from cryptoperf import hostinfo
from cryptoperf.store import stored_run as stored
from cryptoperf.report.render import write_text
from cryptoperf.errors import StoreError
from cryptoperf.store.db import Store

STUDY = TWO_CONFIG_STUDY.format(reps=3, timeout=5)


def test_write_text_never_overwrites(tmp_path):
    p = tmp_path / "r.json"
    assert write_text("one", p, unique=True) == p
    assert write_text("two", p, unique=True) == tmp_path / "r-2.json"
    assert p.read_text() == "one" and (tmp_path / "r-2.json").read_text() == "two"
    with pytest.raises(StoreError, match="exists and cryptoperf never overwrites a file"):
        write_text("three", p)
    assert p.read_text() == "one" and not list(tmp_path.glob(".*.tmp"))


def test_two_studies_of_one_name_in_the_same_second_keep_both_files(cli, write_study, fake_worker, tmp_path,
                                                                     monkeypatch):
    from cryptoperf.run import local
    monkeypatch.setattr(local, "utc_now", lambda: "2026-11-23T12:00:00.000Z")
    fake_worker()
    path = write_study(STUDY)
    for _ in range(2):
        assert cli("study", path, "--out", tmp_path / "out").code == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["t-20261123T120000Z-run1.html", "t-20261123T120000Z-run1.json", "t-20261123T120000Z-run1.md",
                     "t-20261123T120000Z-run2.html", "t-20261123T120000Z-run2.json", "t-20261123T120000Z-run2.md"]
    docs = [json.loads((tmp_path / "out" / n).read_text()) for n in names if n.endswith(".json")]
    assert [d["store"]["run_id"] for d in docs] == [1, 2]


def test_report_never_overwrites_and_says_which_run(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    assert cli("study", write_study(STUDY), "--no-report").code == 0
    store = tmp_path / "runs.sqlite"
    first = cli("report", "--format", "md", "--store", store)
    second = cli("report", "--format", "md", "--store", store)
    assert first.code == second.code == 0 and first.out.strip() != second.out.strip()
    assert second.out.strip().endswith("-run1-2.md")
    assert "using run 1 (study t, started" in first.err
    taken = tmp_path / "mine.md"
    taken.write_text("keep me")
    assert_one_line_error(cli("report", "--format", "md", "-o", taken, "--store", store),
                          "exists and cryptoperf never overwrites a file", code=1)
    assert taken.read_text() == "keep me"


def test_latest_is_the_newest_study_run_not_a_speed_call(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    assert cli("study", write_study(STUDY), "--no-report").code == 0
    assert cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0").code == 0
    store = tmp_path / "runs.sqlite"
    with Store(store) as st:
        assert stored.resolve_id(st, "latest") == 1 and stored.resolve_id(st, None) == 1
        assert stored.resolve_id(st, 2) == 2
    res = cli("report", "--format", "json", "-o", "-", "--store", store)
    assert json.loads(res.out)["store"]["run_id"] == 1 and "using run 1 (study t" in res.err
    comp = cli("compare", "1", "latest", "--store", store)
    assert comp.err.count("using run 1") == 2


def test_latest_falls_back_to_the_newest_run_without_studies(cli, fake_worker, tmp_path):
    fake_worker()
    assert cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0").code == 0
    with Store(tmp_path / "runs.sqlite") as st:
        assert stored.resolve_id(st, "latest") == 1


def test_a_baseline_only_study_is_refused_before_measuring(cli, write_study, fake_worker):
    fake_worker()
    text = STUDY.replace('[[configuration]]\nname = "B"\nhash = "sha512"\n', "")
    assert_one_line_error(cli("study", write_study(text)), "has only its baseline configuration 'A'",
                          "compares nothing", code=2)


def test_a_study_whose_comparisons_are_all_unsupported_exits_non_zero(cli, write_study, fake_worker, tmp_path):
    """B's operation is unsupported: calibration finds it, no block runs, the results are
    stored and the study ends in one error line."""
    fake_worker({"unsupported": {"openssl/sha512": "no SHA-512 in this library"}})
    res = cli("study", write_study(STUDY), "--out", tmp_path / "out")
    assert res.code == 1
    last = res.err.strip().splitlines()[-1]
    assert last.startswith("cryptoperf: error: study t compared nothing") and "no SHA-512 in this library" in last
    assert "this configuration: unsupported" in last
    doc = json.loads(next((tmp_path / "out").glob("t-*.json")).read_text())
    assert {r["block"] for r in doc["repetitions"]} == {0}  # calibration only: nothing repeated
    dry = cli("study", write_study(STUDY), "--dry-run")
    assert dry.code == 1 and "UNSUPPORTED (unsupported: no SHA-512 in this library)" in dry.out
    assert "would compare nothing" in dry.err


def test_dry_run_shows_the_effective_default_size(cli, write_study, fake_worker):
    fake_worker()
    text = STUDY.replace('sizes = [1024]', '').replace('hash = "sha256"', 'hash = "ed25519-sign"').replace(
        'hash = "sha512"', 'hash = "ecdsa-p256-sign"')
    res = cli("study", write_study(text), "--dry-run")
    assert res.code == 0, res.err
    assert '"size_bytes": 32}' in res.out and "(the worker's default size)" in res.out


def test_a_run_whose_process_is_gone_reads_as_interrupted(cli, tmp_path):
    store = tmp_path / "runs.sqlite"
    alive = hostinfo.process_identity()
    with Store(store) as st:
        st.begin_run("study", "2026-11-23T12:00:00.000Z", {}, "gone", "", process=dict(alive, pid=2 ** 22 + 7))
        st.begin_run("study", "2026-11-23T12:00:01.000Z", {}, "here", "", process=alive)
        st.begin_run("study", "2026-11-23T12:00:02.000Z", {}, "rebooted", "", process=dict(alive, boot_id="x"))
    rows = json.loads(cli("list", "--json", "--store", store).out)["runs"]
    assert [(r["study"], r["status"]) for r in rows] == [("gone", "interrupted"), ("here", "running"),
                                                         ("rebooted", "interrupted")]
    # the stored status itself is left as it was: only the reading changes
    assert sqlite3.connect(store).execute("SELECT status FROM runs WHERE id = 1").fetchone()[0] == "running"
