"""`cryptoperf list` and `cryptoperf compare` on runs made with the fake worker, whose scripted
latencies give known ratios: run 2 makes sha256 (configuration A) exactly 1.5× slower and leaves
sha512 (B) alone (see stored_runs.two_runs)."""

import json
import shutil
import sqlite3

import pytest

from conftest import assert_one_line_error
from cryptoperf import compare as cmp
from cryptoperf.store import Store
from cryptoperf.stored import load_run
from stored_runs import two_runs


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return two_runs(tmp_path_factory.mktemp("two-runs"))


@pytest.fixture(scope="module")
def comparison(store):
    with Store(store) as st:
        return cmp.compare_runs(load_run(st, 1), load_run(st, 2))


def test_known_ratio_is_found_with_its_ci(comparison):
    by_conf = {d.configuration: d for d in comparison.deltas}
    a, b = by_conf["A"], by_conf["B"]
    # A: 3036 / 2024 = 1.5 on every repetition (the drift is the same in both runs)
    assert a.status == "ok" and a.latency.ratio == pytest.approx(1.5, rel=1e-3)
    assert a.latency.low > 1 and a.latency.contains(a.latency.ratio)
    assert a.throughput.ratio == pytest.approx(1 / 1.5, rel=1e-3)
    assert a.latency_verdict.kind == "slower" and a.latency_verdict.text == "50.0 % slower"
    # B: unchanged → the CI contains 1
    assert b.latency.contains(1.0) and b.latency_verdict.kind == "no significant difference"
    assert a.backend == "openssl" and a.label == "hash" and a.size_bytes == 1024
    assert a.baseline_p50_ns == 2024 and a.p50_ns == pytest.approx(3036, abs=2)  # HdrHistogram bucket
    assert comparison.seed == 1 and comparison.resamples == 10000


def test_same_code_as_a_study(comparison):
    """A compare delta is analysis.compare on the two cells with the study's key and seed."""
    from cryptoperf import analysis
    a, b = comparison.a, comparison.b
    s_a, s_b = a.summaries["openssl/hash/1024/A"], b.summaries["openssl/hash/1024/A"]
    d = analysis.compare(s_a, s_b, configuration="A", baseline="A", seed=1, key="openssl/hash/1024/A",
                         base_name="run 1", name="run 2")
    assert d == next(x for x in comparison.deltas if x.configuration == "A")


def test_unmatched_cells_are_listed(comparison):
    assert comparison.only_a == []
    assert sorted(s.cell.key for s in comparison.only_b) == ["openssl/hash/64/A", "openssl/hash/64/B"]


def test_host_differences():
    a = {"cpu_model": "X", "crypto_flags": ["aes"], "kernel": "Linux 6.1 #1", "hypervisor": {"present": False},
         "libraries": {"openssl": {"library": "OpenSSL", "library_version": "3.0.13", "fips": False}},
         "checks": [{"name": "steal", "state": "ok", "value": "0.1 %"},
                    {"name": "cpu governor", "state": "ok", "value": "performance"}]}
    b = {"cpu_model": "X", "crypto_flags": ["aes", "vaes"], "kernel": "Linux 6.8 #1",
         "hypervisor": {"present": True, "type": "kvm"},
         "libraries": {"openssl": {"library": "OpenSSL", "library_version": "3.0.13", "fips": True},
                       "ring": {"library": "ring", "library_version": "0.17"}},
         "checks": [{"name": "steal", "state": "ok", "value": "0.7 %"},
                    {"name": "cpu governor", "state": "warning", "value": "powersave"}]}
    diffs = [(d.field, d.a, d.b) for d in cmp.host_differences(a, b)]
    assert diffs == [("crypto flags", "aes", "aes vaes"), ("kernel", "Linux 6.1 #1", "Linux 6.8 #1"),
                     ("hypervisor", "none", "kvm"),
                     ("library openssl", "OpenSSL 3.0.13", "OpenSSL 3.0.13 (FIPS)"),
                     ("library ring", "—", "ring 0.17"),
                     ("check cpu governor", "performance", "powersave")]
    assert cmp.host_differences(a, a) == []


def test_cli_compare_host_differences_first_then_table(cli, store):
    res = cli("compare", "1", "2", "--store", store)
    assert res.code == 0, res.err
    out = res.out
    assert out.index("host differences") < out.index("run 2 vs run 1 (baseline)")
    assert "kernel" in out and "Linux 9.9.9-test #1 SMP" in out
    assert "library openssl" in out and "OPENSSL fake-2.0" in out
    assert "+50.0 %" in out and "50.0 % slower" in out and "no significant difference" in out
    assert "CV 4.0 %" in out  # noise: CV of (1, 1.05, 0.97) = 0.0403
    assert "unmatched, only in run 2: openssl/hash/64/A (sha256), openssl/hash/64/B (sha512)" in out


def test_cli_compare_latest_and_json(cli, store):
    res = cli("compare", "1", "latest", "--json", "--store", store)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["kind"] == "compare" and doc["baseline_run"]["id"] == 1 and doc["run"]["id"] == 2
    assert [h["field"] for h in doc["host_differences"]][:2] == ["kernel", "library openssl"]
    (a,) = [d for d in doc["deltas"] if d["configuration"] == "A"]
    assert a["latency"]["ratio"] == pytest.approx(1.5, rel=1e-3) and a["latency_verdict"]["kind"] == "slower"
    assert {(u["run_id"], u["size_bytes"]) for u in doc["unmatched"]} == {(2, 64)}


def test_cli_compare_a_run_with_itself(cli, store):
    res = cli("compare", "2", "2", "--store", store)
    assert res.code == 0, res.err
    assert "host differences: none" in res.out and "unmatched" not in res.out
    assert "50.0 % slower" not in res.out


@pytest.mark.parametrize("args, fragments, code", [
    (["1", "9"], ["no run 9 in store", "see `cryptoperf list`"], 2),
    (["one", "2"], ["run id must be a number or 'latest', got 'one'"], 2),
    (["1"], ["Missing argument 'RUN_B'"], 2),
    (["1", "2", "--bogus"], ["No such option", "--bogus"], 2),
])
def test_cli_compare_bad_ids_and_flags(cli, store, args, fragments, code):
    assert_one_line_error(cli("compare", *args, "--store", store), *fragments, code=code)


def test_cli_compare_missing_store(cli, tmp_path):
    assert_one_line_error(cli("compare", "1", "2", "--store", tmp_path / "none.sqlite"), "no store at", code=1)
    assert not (tmp_path / "none.sqlite").exists()  # reading never creates a store


def future_copy(store, tmp_path, run_id):
    """A copy of ``store`` whose run ``run_id`` claims format version 99."""
    future = tmp_path / "future.sqlite"
    shutil.copy(store, future)
    db = sqlite3.connect(future)
    db.execute("UPDATE runs SET format_version = 99 WHERE id = ?", (run_id,))
    db.commit()
    db.close()
    return future


def test_cli_compare_future_format_version(cli, store, tmp_path):
    future = future_copy(store, tmp_path, 2)
    assert_one_line_error(cli("compare", "1", "2", "--store", future),
                          "run 2 in", "format version 99 is not supported", code=1)


def test_cli_list(cli, store):
    res = cli("list", "--store", store)
    assert res.code == 0, res.err
    rows = [l for l in res.out.splitlines() if l.startswith("│")]
    assert len(rows) == 2
    assert "9.9.9-test" in rows[1] and "complete" in rows[0] and "12/12" in rows[1] and "6/6" in rows[0]
    assert " t " in rows[0]


def test_cli_list_json(cli, store):
    res = cli("list", "--json", "--store", store)
    assert res.code == 0, res.err
    runs = json.loads(res.out)["runs"]
    assert [(r["id"], r["study"], r["cells"], r["results"], r["ok"], r["status"], r["kernel"])
            for r in runs][1] == (2, "t", 4, 12, 12, "complete", "9.9.9-test")
    assert runs[0]["cells"] == 2 and runs[0]["supported"] and runs[0]["started_at"].endswith("Z")


def test_cli_list_empty_and_missing(cli, tmp_path):
    Store(tmp_path / "empty.sqlite").close()
    res = cli("list", "--store", tmp_path / "empty.sqlite")
    assert res.code == 0 and "no runs in store" in res.out
    assert_one_line_error(cli("list", "--store", tmp_path / "nope.sqlite"), "no store at", code=1)


def test_cli_list_marks_a_future_format(cli, store, tmp_path):
    res = cli("list", "--store", future_copy(store, tmp_path, 1))
    assert res.code == 0 and "format 99: not supported" in res.out


def test_cli_compare_speed_runs_shows_medians_without_ci(cli, fake_worker, tmp_path):
    """A `speed` run has one repetition per cell: no CI, but both p50s and their point change."""
    fake_worker({"latency_ns": {"sha256": 2000}})
    for _ in range(2):
        assert cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01",
                   "--warmup", "0").code == 0
    res = cli("compare", "1", "2", "--store", tmp_path / "runs.sqlite")
    assert res.code == 0, res.err
    (row,) = [l for l in res.out.splitlines() if l.startswith("│ openssl")]
    assert "2 µs" in row and "+0.0 %" in row and "n/a [1]" in row
    assert "[1] run 1: only 1 measured repetition(s); a CI needs 2" in res.out
