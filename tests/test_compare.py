"""`cryptoperf list` and `cryptoperf compare` on runs made with the fake worker, whose scripted
latencies give known ratios: run 2 makes sha256 (configuration A) exactly 1.5× slower and leaves
sha512 (B) alone (see stored_runs.two_runs). Two runs share no blocks, and one run per side
cannot measure how much a whole run shifts, so compare uses Welch's interval on each run's
repetitions widened by the assumed run-to-run sd, adjusted over the matched cells."""

import json
import shutil
import sqlite3

import pytest

from conftest import TWO_CONFIG_STUDY, assert_one_line_error
from cryptoperf import compare as cmp
from cryptoperf import stats
from cryptoperf.store.db import Store
from cryptoperf.store.stored_run import load_run
from stored_runs import run_study, two_runs


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return two_runs(tmp_path_factory.mktemp("two-runs"))


@pytest.fixture(scope="module")
def comparison(store):
    with Store(store) as st:
        return cmp.compare_runs(load_run(st, 1), load_run(st, 2))


def test_known_ratio_is_found_with_its_interval(comparison):
    by_conf = {d.configuration: d for d in comparison.deltas}
    a, b = by_conf["A"], by_conf["B"]
    # A: 3036 / 2024 = 1.5 on every repetition (the drift is the same in both runs)
    assert a.status == "ok" and a.latency.ratio == pytest.approx(1.5, rel=1e-3)
    assert a.latency.low > 1 and a.latency.contains(a.latency.ratio) and a.latency.method == stats.RUN_SD_T
    # the assumed 2 % per run is in the interval: at least ±1.96·√2·2 % on the log scale
    assert a.latency.se_log >= 2 ** 0.5 * cmp.DEFAULT_RUN_SD_PCT / 100
    assert a.throughput.ratio == pytest.approx(1 / 1.5, rel=1e-3)
    assert a.verdict.kind == "slower" and a.verdict.text.startswith("p50 latency 50.0 % higher [")
    # B: unchanged, but each run's repetitions drift by ±5 %: the interval holds 1 and is
    # wider than the ±2 % margin, so it is undecided — never "no difference"
    assert b.latency.contains(1.0) and b.verdict.kind == "inconclusive"
    assert "run-to-run variation was assumed, not measured" in b.verdict.text
    assert a.backend == "openssl" and a.label == "hash" and a.size_bytes == 1024
    assert a.baseline_p50_ns == 2024 and a.p50_ns == pytest.approx(3036, abs=2)  # HdrHistogram bucket
    assert comparison.comparisons == 2 and comparison.level == pytest.approx(1 - 0.05 / 2)
    assert "run-to-run variation is unknown" in comparison.method and "Bonferroni over 2 comparisons" in comparison.method


def test_same_code_as_a_study(comparison):
    """A compare delta is analysis.compare_runs on the two cells, with the same verdict rule."""
    from cryptoperf import analysis
    a, b = comparison.a, comparison.b
    pairs = [([a.summaries[k]], [b.summaries[k]]) for k in ("openssl/hash/1024/A", "openssl/hash/1024/B")]
    deltas, m, level = analysis.compare_runs(pairs, ("run 1", "run 2"), comparison.settings,
                                             run_sd=cmp.DEFAULT_RUN_SD_PCT / 100)
    assert deltas == comparison.deltas and m == 2


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
    assert "+50.0 %" in out and "p50 latency 50.0 % higher" in out and "inconclusive" in out
    assert "no significant difference" not in out
    assert "CV 4.9 %" in out  # noise: CV of (1, 1.05, 1/1.05)
    assert "verdicts: 1 slower, 1 inconclusive" in out
    assert "unmatched, only in run 2: openssl/hash/64/A (sha256), openssl/hash/64/B (sha512)" in out


def test_cli_compare_latest_and_json(cli, store):
    res = cli("compare", "1", "latest", "--json", "--store", store)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["kind"] == "compare" and doc["baseline_run"]["id"] == 1 and doc["run"]["id"] == 2
    assert [h["field"] for h in doc["host_differences"]][:2] == ["kernel", "library openssl"]
    (a,) = [d for d in doc["deltas"] if d["configuration"] == "A"]
    assert a["latency"]["ratio"] == pytest.approx(1.5, rel=1e-3) and a["verdict"]["kind"] == "slower"
    assert doc["analysis"]["comparisons"] == 2 and doc["fail_on"] == [] and doc["failing"] == []
    assert {(u["run_id"], u["size_bytes"]) for u in doc["unmatched"]} == {(2, 64)}


def test_cli_compare_a_run_with_itself(cli, store):
    res = cli("compare", "2", "2", "--store", store)
    assert res.code == 0, res.err
    assert "host differences: none" in res.out and "unmatched" not in res.out
    assert "p50 latency 50.0 % higher" not in res.out


@pytest.fixture(scope="module")
def aa_store(tmp_path_factory):
    """Two runs of one configuration pair with 1 % noise and no change between them (A/A)."""
    d = tmp_path_factory.mktemp("aa-runs")
    store = d / "runs.sqlite"
    study = TWO_CONFIG_STUDY.format(reps=5, timeout=5)
    for name in ("r1", "r2"):
        run_study(d / name, store, study, {"noise_cv": 0.01})
    return store


def test_regression_gate_fails_a_real_regression(cli, store):
    res = cli("compare", "1", "2", "--store", store, "--fail-on", "slower")
    assert res.code == 1, res.err
    assert "regression gate (--fail-on slower): FAILED by 1 cell(s): openssl hash A" in res.out
    doc = json.loads(cli("compare", "1", "2", "--store", store, "--fail-on", "slower", "--json").out)
    assert doc["failing"] == ["openssl/hash/1024/A"] and doc["fail_on"] == ["slower"]
    # the reverse direction is faster, not slower: the gate passes
    assert cli("compare", "2", "1", "--store", store, "--fail-on", "slower").code == 0


def test_regression_gate_passes_an_aa_pair(cli, aa_store):
    res = cli("compare", "1", "2", "--store", aa_store, "--fail-on", "slower")
    assert res.code == 0, res.out
    assert "regression gate (--fail-on slower): passed" in res.out
    assert "slower" not in res.out.split("verdicts:")[1].split(";")[0]


def test_regression_gate_on_inconclusive_and_a_wider_margin(cli, store):
    """B is undecided against ±2 %: --fail-on inconclusive fails on it; with a ±20 % margin it
    is equivalent and the gate passes on B (A is still slower)."""
    assert cli("compare", "1", "2", "--store", store, "--fail-on", "inconclusive").code == 1
    doc = json.loads(cli("compare", "1", "2", "--store", store, "--margin", "20", "--json",
                         "--fail-on", "inconclusive").out)
    b = next(d for d in doc["deltas"] if d["configuration"] == "B")
    assert b["verdict"]["kind"] == "equivalent" and doc["failing"] == []


@pytest.mark.parametrize("args, fragments, code", [
    (["1", "9"], ["no run 9 in store", "see `cryptoperf list`"], 2),
    (["one", "2"], ["run id must be a number, 'latest', 'previous' or 'latest~N', got 'one'"], 2),
    (["1"], ["compare needs two runs, RUN_A RUN_B", "--by host RUN"], 2),
    (["1", "2", "--by", "host"], ["compare --by host takes one run", "drop 2"], 2),
    (["1", "2", "--baseline-host", "a"], ["--baseline-host goes with --by host RUN"], 2),
    (["1", "--by", "hosts"], ["Invalid value for '--by'"], 2),
    (["1", "2", "--bogus"], ["No such option", "--bogus"], 2),
    (["1", "2", "--fail-on", "faster"], ["Invalid value for '--fail-on'", "'slower', 'undecided', 'inconclusive'"], 2),
    (["1", "2", "--margin", "-1"], ["Invalid value for '--margin'"], 2),
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


def test_cli_compare_speed_runs_rests_on_the_assumed_run_sd(cli, fake_worker, tmp_path):
    """A `speed` run has one repetition per cell: its spread is unknown, so the interval is the
    assumed run-to-run sd alone (±1.96·√2·2 %), said so, and --run-sd 0 leaves no interval."""
    fake_worker({"latency_ns": {"sha256": 2000}})
    for _ in range(2):
        assert cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01",
                   "--warmup", "0").code == 0
    res = cli("compare", "1", "2", "--store", tmp_path / "runs.sqlite")
    assert res.code == 0, res.err
    (row,) = [l for l in res.out.splitlines() if l.startswith("│ openssl")]
    assert "2 µs" in row and "+0.0 % [-5.4, +5.7]" in row and "inconclusive" in row
    assert "run-to-run variation is unknown" in res.out and "sd of 2 %" in res.out
    res = cli("compare", "1", "2", "--store", tmp_path / "runs.sqlite", "--run-sd", "0")
    (row,) = [l for l in res.out.splitlines() if l.startswith("│ openssl")]
    assert "n/a [1]" in row and "[1] run 1: only 1 measured repetition(s); an interval needs 3 on each side" in res.out


def test_a_slowdown_inside_the_margin_does_not_fail_the_gate(comparison):
    import dataclasses
    a = next(d for d in comparison.deltas if d.configuration == "A")
    small = dataclasses.replace(a, verdict=stats.Verdict("slower", "1.1 % slower [0.3, 1.9], within the ±2 % margin",
                                                         1.1, 2.0, True))
    c = dataclasses.replace(comparison, deltas=[small])
    assert c.failing(["slower"]) == [] and c.failing(["inconclusive"]) == []
    big = dataclasses.replace(small, verdict=stats.Verdict("slower", "4.0 % slower [3.0, 5.1]", 4.0, 2.0, False))
    assert dataclasses.replace(comparison, deltas=[big]).failing(["slower"]) == [big]
    na = dataclasses.replace(a, status="n/a", verdict=None, latency=None)
    assert dataclasses.replace(comparison, deltas=[na]).failing(["inconclusive"]) == [na]
