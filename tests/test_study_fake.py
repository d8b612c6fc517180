"""Whole studies against the fake worker: scripted ratios give known verdicts; crashes and
hangs fail their own cells only; every run lands in the store and the JSON document."""

import json
import sqlite3

import pytest

from conftest import TWO_CONFIG_STUDY
from cryptoperf.store import FORMAT_VERSION, Store

DRIFT = [1.0, 1.05, 0.97, 1.02, 0.99]


def run_study(cli, write_study, tmp_path, reps=5, timeout=5):
    path = write_study(TWO_CONFIG_STUDY.format(reps=reps, timeout=timeout))
    res = cli("study", path, "--out", tmp_path / "out")
    docs = sorted((tmp_path / "out").glob("t-*.json"))
    doc = json.loads(docs[-1].read_text()) if docs else None
    return res, doc


def test_two_x_slower_configuration(cli, write_study, fake_worker, tmp_path):
    fake_worker({"config_factor": {"B": 2.0}, "rep_factors": DRIFT})
    res, doc = run_study(cli, write_study, tmp_path)
    assert res.code == 0, res.err
    (d,) = doc["deltas"]
    lat, tp = d["latency"], d["throughput"]
    assert lat["ratio"] == pytest.approx(2.0, rel=1e-3)
    assert lat["ci_low"] <= 2.0 <= lat["ci_high"] and lat["ci_low"] > 1.0
    assert tp["ratio"] == pytest.approx(0.5, rel=1e-3) and tp["ci_high"] < 1.0
    assert d["latency_verdict"]["kind"] == "slower" and d["throughput_verdict"]["kind"] == "slower"
    assert "performance delta vs baseline" in res.out and "100.0 % slower" in res.out
    assert "noise across repetitions" in res.out


def test_equal_configurations_no_significant_difference(cli, write_study, fake_worker, tmp_path):
    fake_worker({"rep_factors": DRIFT})
    res, doc = run_study(cli, write_study, tmp_path)
    assert res.code == 0, res.err
    (d,) = doc["deltas"]
    assert d["latency"]["ci_low"] <= 1.0 <= d["latency"]["ci_high"]
    assert d["latency_verdict"]["text"] == "no significant difference"
    assert "no significant difference" in res.out


def test_cis_reproduce_from_the_stored_seed(cli, write_study, fake_worker, tmp_path):
    fake_worker({"config_factor": {"B": 1.3}, "rep_factors": DRIFT})
    _, doc1 = run_study(cli, write_study, tmp_path)
    (tmp_path / "out").rename(tmp_path / "out1")
    _, doc2 = run_study(cli, write_study, tmp_path)
    assert doc1["deltas"][0]["latency"] == doc2["deltas"][0]["latency"]


def test_runs_are_interleaved_and_all_stored(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    assert res.code == 0
    order = [(r["repetition"], r["configuration"]) for r in doc["runs"]]
    assert order == [(1, "A"), (1, "B"), (2, "A"), (2, "B"), (3, "A"), (3, "B")]
    assert doc["format_version"] == FORMAT_VERSION and doc["status"] == "complete"
    assert doc["study"]["name"] == "t" and "[study]" in doc["study"]["toml"]
    assert doc["host"]["libraries"]["openssl"]["library_version"] == "fake-1.0"
    assert doc["host"]["crypto_flags"] is not None and "checks" in doc["host"]
    assert doc["runs"][0]["result"]["histogram"].startswith("HISTF")
    assert doc["runs"][0]["latency"]["p50_ns"] > 0
    with Store(tmp_path / "runs.sqlite") as st:
        (run,) = st.runs()
        assert run["status"] == "complete" and run["seed"] == 1 and run["study_name"] == "t"
        assert run["format_version"] == FORMAT_VERSION and "cpu_model" in run["host"]
        rows = list(st.results(run["id"]))
        assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
        assert rows[0]["result"]["histogram"].startswith("HISTF")
        assert rows[1]["configuration"] == "B" and rows[1]["params"] == {} and rows[1]["size_bytes"] == 1024


def test_crashing_configuration_fails_its_cells_and_the_study_goes_on(cli, write_study, fake_worker, tmp_path):
    fake_worker({"crash": ["B"]})
    res, doc = run_study(cli, write_study, tmp_path, reps=2)
    assert res.code == 0, res.err
    statuses = [(r["configuration"], r["status"]) for r in doc["runs"]]
    assert statuses == [("A", "ok"), ("B", "failed")] * 2
    failed = doc["runs"][1]
    assert "SIGABRT" in failed["reason"] and "crashing on purpose" in failed["stderr_tail"]
    (d,) = doc["deltas"]
    assert d["status"] == "n/a" and "this configuration: failed" in d["reason"]
    assert "n/a" in res.out and "2 of 4 runs failed" in res.out
    assert "crashing on purpose" in res.out  # the footnote with the stderr tail


def test_hanging_configuration_times_out(cli, write_study, fake_worker, tmp_path):
    fake_worker({"hang": ["B"]})
    res, doc = run_study(cli, write_study, tmp_path, reps=2, timeout=1)
    assert res.code == 0, res.err
    assert [r["status"] for r in doc["runs"]] == ["ok", "failed", "ok", "failed"]
    assert doc["runs"][1]["reason"].startswith("timeout: the worker did not answer within 1 s")


def test_unsupported_baseline_says_so(cli, write_study, fake_worker, tmp_path):
    fake_worker({"unsupported": {"openssl/sha256": "no SHA-256 here"}})
    res, doc = run_study(cli, write_study, tmp_path, reps=2)
    assert res.code == 0
    (d,) = doc["deltas"]
    assert d["status"] == "n/a" and d["reason"] == "baseline: unsupported: no SHA-256 here"


def test_each_run_is_committed_as_it_finishes(cli, write_study, fake_worker, tmp_path, monkeypatch):
    """Interrupt the study after the third run: the three runs are in the store, the run is
    marked interrupted, the JSON document is written, and the exit status is 130."""
    fake_worker()
    from cryptoperf.run import local
    real = local.execute_one
    calls = []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(local, "execute_one", flaky)
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    assert res.code == 130 and res.err.strip().splitlines()[-1] == (
        "cryptoperf: error: interrupted; runs finished so far are in the store")
    db = sqlite3.connect(tmp_path / "runs.sqlite")
    assert db.execute("SELECT count(*) FROM results").fetchone()[0] == 3
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    assert doc["status"] == "interrupted" and len(doc["runs"]) == 3


def test_dry_run_lists_the_plan(cli, write_study, fake_worker):
    fake_worker()
    path = write_study(TWO_CONFIG_STUDY.format(reps=2, timeout=5))
    res = cli("study", path, "--dry-run")
    assert res.code == 0
    lines = res.out.splitlines()
    assert len(lines) == 4 and "openssl/hash/1024/A" in lines[0] and "op=sha512" in lines[1]


def test_one_failed_repetition_still_gives_a_delta_with_a_note(cli, write_study, fake_worker, tmp_path):
    fake_worker({"crash": ["B#2"], "config_factor": {"B": 1.5}, "rep_factors": DRIFT})
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    assert res.code == 0
    assert [r["status"] for r in doc["runs"]] == ["ok", "ok", "ok", "failed", "ok", "ok"]
    (d,) = doc["deltas"]
    assert d["status"] == "ok" and d["note"] == "2 of 3 repetitions (config)"
    assert d["latency"]["ratio"] == pytest.approx(1.5, rel=0.05)
    cell_b = next(c for c in doc["cells"] if c["configuration"] == "B")
    assert cell_b["ok"] == 2 and cell_b["runs"] == 3 and cell_b["status"] == "failed"
