"""Runs as the unit of `cryptoperf compare`: several runs per side, a baseline's history, and an
assumed run-to-run sd when one run per side measures nothing.

The fake worker scripts each run's latency, so a run-level shift is known exactly: five runs of
one build whose whole-run latency moves by −3 … +3 % (the kind of shift process layout or CPU
frequency gives a real run), each with 0.2 % noise inside the run, and a sixth run 1.5× slower."""

import json

import pytest
from scipy import stats as scipy_stats

from conftest import TWO_CONFIG_STUDY, assert_one_line_error
from cryptoperf import across_runs
from cryptoperf import compare as cmp
from cryptoperf import stats
from cryptoperf.store.db import Store
from cryptoperf.store.stored_run import load_run
from stored_runs import run_study

#: whole-run factors of runs 1–5 (the same build); run 6 is 1.5× slower on sha256 (A)
SHIFTS = [1.0, 1.03, 0.97, 1.02, 0.985]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("run-sets")
    store = d / "runs.sqlite"
    study = TWO_CONFIG_STUDY.format(reps=5, timeout=5)
    for i, f in enumerate(SHIFTS + [1.0], start=1):
        slow = 1.5 if i == 6 else 1.0
        spec = {"noise_cv": 0.002, "latency_ns": {"sha256": round(2024 * f * slow), "sha512": round(2024 * f)}}
        run_study(d / f"r{i}", store, study, spec)
    return store


def test_one_run_per_side_trusting_repetitions_alone_fails_a_run_shift(cli, store):
    """The old gate: run 2 is 3 % slower as a whole, with 0.2 % noise inside; Welch on the
    repetitions alone (--run-sd 0) calls it slower beyond the margin and fails a build that did
    not change."""
    res = cli("compare", "1", "2", "--store", store, "--fail-on", "slower", "--run-sd", "0")
    assert res.code == 1, res.out


def test_the_assumed_run_sd_is_said_and_used(cli, store):
    res = cli("compare", "1", "2", "--store", store, "--fail-on", "slower")
    assert "run-to-run variation is unknown (one run per side and no history)" in res.out
    assert "sd of 2 %" in res.out
    doc = json.loads(cli("compare", "1", "2", "--store", store, "--json").out)
    assert doc["run_variation"]["assumed_run_sd_pct"] == cmp.DEFAULT_RUN_SD_PCT
    a = next(d for d in doc["deltas"] if d["configuration"] == "A")
    assert a["latency"]["method"] == stats.RUN_SD_T and a["latency"]["ci_low"] < 1.0


def test_runs_as_the_unit_pass_the_same_build_and_fail_a_regression(cli, store):
    res = cli("compare", "1,3,4,5", "2", "--store", store, "--fail-on", "slower")
    assert res.code == 0, res.out
    assert "runs as the unit" in res.out and "run 2 against runs 1, 3, 4, 5" in res.out
    res = cli("compare", "1,3,4,5", "6", "--store", store, "--fail-on", "slower")
    assert res.code == 1 and "FAILED by 1 cell(s): openssl hash A" in res.out
    doc = json.loads(cli("compare", "1,3", "4,5", "--store", store, "--json").out)
    assert doc["baseline_runs"] == [1, 3] and doc["runs"] == [4, 5] and doc["history_runs"] == []
    assert doc["run_variation"]["assumed_run_sd_pct"] is None


def test_history_adds_the_baselines_earlier_runs_of_the_same_build(cli, store):
    doc = json.loads(cli("compare", "4", "5", "--history", "3", "--store", store, "--json").out)
    assert doc["baseline_runs"] == [4, 3, 2, 1] and doc["history_runs"] == [3, 2, 1]
    assert "3 earlier runs of the same study on a comparable host and the same build" in doc["run_variation"]["method"]
    # run 6 has the history of run 5 (runs 1–4, newest first) and is still a regression
    res = cli("compare", "5", "6", "--history", "4", "--store", store, "--fail-on", "slower")
    assert res.code == 1, res.out
    # fewer earlier runs than asked: said, not an error
    res = cli("compare", "2", "3", "--history", "5", "--store", store)
    assert res.code == 0 and "history: 1 of the 5 earlier runs asked for repeat run 2" in res.out


def test_the_interval_over_runs_is_the_pooled_two_sample_t_interval(store):
    """Cross-check with scipy: the latency interval of runs 1,3,4,5 against run 2 (the
    baseline) is scipy's pooled-variance t interval on the runs' mean log p50s."""
    import math
    with Store(store) as st:
        runs = [load_run(st, i) for i in range(1, 6)]
    c = cmp.compare_run_sets([runs[1]], [runs[0], runs[2], runs[3], runs[4]], multiplicity=False)
    a = next(d for d in c.deltas if d.configuration == "A")
    means = [sum(math.log(v) for v in r.summaries["openssl/hash/1024/A"].p50_samples_ns) / 5 for r in runs]
    res = scipy_stats.ttest_ind([means[0], means[2], means[3], means[4]], [means[1]], equal_var=True)
    ci = res.confidence_interval(0.95)
    assert math.log(a.latency.ratio) == pytest.approx((ci.low + ci.high) / 2, abs=1e-9)
    assert math.log(a.latency.low) == pytest.approx(ci.low, rel=1e-6)
    assert math.log(a.latency.high) == pytest.approx(ci.high, rel=1e-6)
    assert a.latency.method == stats.RUNS_T and a.latency.df == 3


def test_run_sd_interval_adds_the_assumed_variance():
    import math
    sample, base = [1.00, 1.01, 0.99], [1.00, 1.02, 0.98]
    plain = stats.welch_log_ratio(sample, base)
    wide = across_runs.run_sd_log_ratio(sample, base, 0.02)
    assert wide.se_log == pytest.approx(math.sqrt(plain.se_log ** 2 + 2 * 0.02 ** 2))
    assert wide.df > plain.df and wide.low < plain.low and wide.high > plain.high
    one = across_runs.run_sd_log_ratio([1.0], [1.0], 0.02)
    assert one.se_log == pytest.approx(0.02 * math.sqrt(2)) and math.isclose(one.high, math.exp(1.96 * one.se_log),
                                                                            rel_tol=1e-3)
    with pytest.raises(ValueError):
        across_runs.run_sd_log_ratio([1.0], [1.0], 0.0)
    with pytest.raises(ValueError):
        across_runs.runs_log_ratio([[1.0]], [[1.0]])


@pytest.mark.parametrize("args, fragment", [
    (["1,,2", "3"], "RUN_A '1,,2': name runs by id, comma-separated"),
    (["1,1", "3"], "RUN_A '1,1' names run 1 twice"),
    (["1,2", "2,3"], "run 2 is on both sides"),
])
def test_bad_run_sets_are_one_line_errors(cli, store, args, fragment):
    assert_one_line_error(cli("compare", *args, "--store", store), fragment, code=2)


def test_speed_runs_make_one_side(cli, fake_worker, tmp_path):
    """`speed --runs 3` stores three runs and names them as one side for compare."""
    fake_worker({"latency_ns": {"sha256": 2000}, "noise_cv": 0.002})
    args = ("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0")
    res = cli(*args, "--runs", "3", "--repetitions", "2")
    assert res.code == 0, res.err
    assert "stored as runs 1,2,3 in" in res.out and "cryptoperf compare 1,2,3 <other runs>" in res.out
    assert res.err.count("run 2 of 3") == 1
    assert cli(*args, "--repetitions", "2").code == 0
    res = cli("compare", "1,2,3", "4", "--store", tmp_path / "runs.sqlite")
    assert res.code == 0 and "runs as the unit" in res.out, res.out
    doc = json.loads(cli(*args, "--runs", "2", "--json").out)
    assert len(doc["runs"]) == 2
    assert_one_line_error(cli(*args, "--runs", "2", "--no-store"), "--runs makes runs to compare later", code=2)


def test_a_history_on_other_runners_and_a_disturbed_repetition_pass_an_unchanged_build(cli, tmp_path, monkeypatch):
    """Hosted CI: each run of the study in a CI job of its own, on a runner of its own hostname,
    and the candidate's block 3 ran 3× slower (a neighbour's burst, on every cell of the block).
    The history takes the earlier runs whatever their hostname, and says it accepted it; the
    disturbed repetition is set aside and named before the run's mean is taken, so the gate
    passes; the same candidate 1.5× slower on sha256 still fails it."""
    from cryptoperf import hostinfo
    import sqlite3
    for _, names in hostinfo.CI_JOB_VARIABLES:
        for n in names:
            monkeypatch.delenv(n, raising=False)
    store = tmp_path / "ci.sqlite"
    study = TWO_CONFIG_STUDY.format(reps=5, timeout=5)

    def one_run(i: int, factor: float, slow: float = 1.0, rep_factors=None) -> None:
        monkeypatch.setenv("CI_JOB_ID", str(100 + i))
        spec = {"noise_cv": 0.002, "latency_ns": {"sha256": round(2024 * factor * slow), "sha512": round(2024 * factor)}}
        if rep_factors:
            spec["rep_factors"] = rep_factors
        run_study(tmp_path / f"r{i}", store, study, spec)
        db = sqlite3.connect(store)
        host = json.loads(db.execute("SELECT host_json FROM runs WHERE id = ?", (i,)).fetchone()[0])
        host["hostname"] = f"runner-{i}"
        db.execute("UPDATE runs SET host_json = ? WHERE id = ?", (json.dumps(host), i))
        db.commit()
        db.close()

    for i, f in enumerate(SHIFTS, start=1):
        one_run(i, f)
    one_run(6, 1.0, rep_factors=[1.0, 1.0, 3.0, 1.0, 1.0])
    one_run(7, 1.0, slow=1.5, rep_factors=[1.0, 1.0, 3.0, 1.0, 1.0])
    res = cli("compare", "5", "6", "--history", "4", "--store", store, "--fail-on", "slower")
    assert res.code == 0, res.out
    assert "history: 4 runs (4, 3, 2, 1) from 4 jobs; accepted differences: hostname (5 values)" in res.out
    doc = json.loads(cli("compare", "5", "6", "--history", "4", "--store", store, "--json").out)
    assert doc["run_variation"]["unit"] == "job" and len(doc["run_variation"]["jobs"]["baseline"]) == 5
    assert sorted((s["cell"], s["run"], s["block"]) for s in doc["set_aside"]) == [
        ("openssl/hash/1024/A", "run 6", 3), ("openssl/hash/1024/B", "run 6", 3)]
    assert all("run 6: block 3 set aside as disturbed" in d["note"] for d in doc["deltas"])
    res = cli("compare", "5", "7", "--history", "4", "--store", store, "--fail-on", "slower")
    assert res.code == 1 and "FAILED by 1 cell(s): openssl hash A" in res.out, res.out
