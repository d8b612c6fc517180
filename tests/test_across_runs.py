"""Comparisons across runs (``cryptoperf.across_runs``): the session a run records, jobs as the
unit, the screen of disturbed repetitions, the detectable change, ``previous``/``latest~N``
among runs of one kind, and ``speed``'s disturbed repetitions run again.

Speed runs are made with the fake worker, whose noise is drawn from each repetition's id, so two
runs differ only by what a test scripts: a whole-run factor (``latency_ns``), a block's factor
(``rep_factors``), a repetition's steal (``steal_pct``)."""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np
import pytest
from scipy import stats as scipy_stats

from conftest import assert_one_line_error
from cryptoperf import across_runs, hostinfo, stats
from cryptoperf.store.db import Store

ARGS = ("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0")


@pytest.fixture(autouse=True)
def no_ci(monkeypatch):
    """The tests' own runs are of no CI job unless a test says so."""
    for _, names in hostinfo.CI_JOB_VARIABLES:
        for n in names:
            monkeypatch.delenv(n, raising=False)


def test_the_job_label_comes_from_the_ci_or_the_option():
    env = {"GITHUB_RUN_ID": "9876543210", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_JOB": "bench"}
    assert hostinfo.ci_job(environ=env) == "github:9876543210.2.bench"
    assert hostinfo.ci_job(environ={"CI_JOB_ID": "4242"}) == "gitlab:4242"
    assert hostinfo.ci_job(environ={"BUILD_TAG": "jenkins-perf-17", "BUILD_ID": "17"}) == "jenkins:jenkins-perf-17"
    assert hostinfo.ci_job(environ={"BUILD_ID": "17"}) is None  # BUILD_ID alone is no Jenkins
    assert hostinfo.ci_job(environ={"JENKINS_URL": "http://ci", "BUILD_ID": "17"}) == "jenkins:17"
    assert hostinfo.ci_job(environ={"BUILDKITE_JOB_ID": "b-1"}) == "buildkite:b-1"
    assert hostinfo.ci_job(environ={"CIRCLE_WORKFLOW_JOB_ID": "c-1"}) == "circleci:c-1"
    assert hostinfo.ci_job(environ={}) is None
    assert hostinfo.ci_job("nightly 7", environ=env) == "nightly 7" and hostinfo.ci_job("", environ=env) is None
    with pytest.raises(ValueError):
        hostinfo.ci_job("two\nlines")


def test_a_run_records_its_session(cli, fake_worker, tmp_path, monkeypatch):
    fake_worker({"latency_ns": {"sha256": 2000}, "noise_cv": 0.002})
    monkeypatch.setenv("CI_JOB_ID", "4242")
    assert cli(*ARGS, "--repetitions", "3").code == 0
    assert cli(*ARGS, "--repetitions", "3", "--job", "mine").code == 0
    with Store(tmp_path / "runs.sqlite") as st:
        runs = st.runs()
    sessions = [across_runs.Session.of(r) for r in runs]
    assert [s.job for s in sessions] == ["gitlab:4242", "mine"]
    boot = hostinfo._read("/proc/sys/kernel/random/boot_id")
    assert all(s.boot_id == boot for s in sessions) and sessions[0].key != sessions[1].key
    # a run stored before sessions were recorded is a session of its own
    old = across_runs.Session.of({"id": 3, "process": None})
    assert not old.known and old.key == "run 3" and old.text == "unknown session"
    res = cli(*ARGS, "--job", "x" * 201)
    assert_one_line_error(res, "--job: a job label is one line", code=2)


def test_speed_runs_a_disturbed_repetition_again_and_says_so(cli, fake_worker, tmp_path):
    """A study's rule in `speed`: block 2's steal (50 %) is above the 10 % default, so it is run
    again (clean), the first attempt stored as superseded; a block disturbed twice is kept,
    flagged."""
    fake_worker({"latency_ns": {"sha256": 2000}, "steal_pct": {"#2": 50.0}})
    res = cli(*ARGS, "--repetitions", "3")
    assert res.code == 0, res.err
    assert "run again (block 2: steal 50.0 % > 10 %)" in res.out, res.out
    with Store(tmp_path / "runs.sqlite") as st:
        rows = list(st.results(1))
    assert [(r["block"], r["superseded"], bool(r["disturbed"])) for r in rows if r["block"] == 2] == [
        (2, 1, True), (2, 0, False)]
    fake_worker({"latency_ns": {"sha256": 2000}, "steal_pct": {"#3": 50.0}, "steal_times": 2})
    res = cli(*ARGS, "--repetitions", "3")
    assert res.code == 0 and "1 kept disturbed, its re-run disturbed too (block 3" in res.out, res.out


@pytest.fixture
def mixed_store(cli, fake_worker, tmp_path, write_study):
    """runs 1-2 speed, 3 a study, 4-5 speed (the newest a speed run)."""
    from conftest import TWO_CONFIG_STUDY
    fake_worker({"latency_ns": {"sha256": 2000}, "noise_cv": 0.002})
    for _ in range(2):
        assert cli(*ARGS, "--repetitions", "3").code == 0
    assert cli("study", write_study(TWO_CONFIG_STUDY.format(reps=3, timeout=5)), "--out", tmp_path / "o").code == 0
    for _ in range(2):
        assert cli(*ARGS, "--repetitions", "3").code == 0
    return tmp_path / "runs.sqlite"


def test_previous_and_latest_count_runs_of_the_compared_kind(cli, mixed_store):
    doc = json.loads(cli("compare", "previous", "latest", "--store", mixed_store, "--json").out)
    assert doc["baseline_run"]["id"] == 4 and doc["run"]["id"] == 5
    doc = json.loads(cli("compare", "latest~2", "latest", "--store", mixed_store, "--json").out)
    assert (doc["baseline_run"]["id"], doc["baseline_run"]["kind"]) == (2, "speed")
    # a number names the kind: the study run 3 against the newest study run is itself
    assert_one_line_error(cli("compare", "previous", "3", "--store", mixed_store),
                          "'previous' names the study run 1 before the newest", "holds 1 study run", code=2)
    assert_one_line_error(cli("compare", "1", "3", "--store", mixed_store),
                          "run 1 is a speed run and run 3 a study run: compare runs of one kind", code=2)


def _speed_runs(cli, fake_worker, store, factors, job_of, reps=3, extra=None):
    """One speed run per factor (the whole run's latency × factor), each with --job job_of(i)."""
    for i, f in enumerate(factors):
        fake_worker({"latency_ns": {"sha256": round(2000 * f), "sha512": round(3000 * f)}, "noise_cv": 0.002,
                     **(extra(i) if extra else {})})
        res = cli(*ARGS, "--op", "sha512", "--repetitions", str(reps), "--store", store, "--job", job_of(i))
        assert res.code == 0, res.err


def test_jobs_are_the_unit_and_one_job_per_side_is_assumed_and_said(cli, fake_worker, tmp_path):
    store = tmp_path / "jobs.sqlite"
    # the baseline: 3 runs back to back in one job (0.3 % apart), the candidate in another job
    _speed_runs(cli, fake_worker, store, [1.0, 1.003, 0.997, 1.01], lambda i: "main-1" if i < 3 else "pr-1")
    doc = json.loads(cli("compare", "previous", "latest", "--history", "5", "--store", store, "--json").out)
    v = doc["run_variation"]
    assert v["unit"] == "job" and v["jobs"] == {"baseline": [[3, 2, 1]], "candidate": [[4]]}
    assert v["assumed_job_sd_pct"] == across_runs.DEFAULT_JOB_SD_PCT and v["assumed_run_sd_pct"] is None
    assert "between-job variation is unknown (one job per side)" in v["method"]
    d = doc["deltas"][0]
    assert d["latency"]["method"] == stats.JOB_SD_T
    assert "the between-job variation was assumed, not measured" in d["verdict"]["text"]
    # its standard error is at least the assumed √2 · 4 %
    assert d["latency"]["se_log"] >= math.sqrt(2) * across_runs.DEFAULT_JOB_SD_PCT / 100
    # three more main jobs (and the first candidate's, of the same build): 5 jobs against 1 —
    # the spread between jobs is measured
    _speed_runs(cli, fake_worker, store, [1.02, 0.985, 1.0], lambda i: f"main-{i + 2}")
    _speed_runs(cli, fake_worker, store, [1.005], lambda i: "pr-2")
    res = cli("compare", "previous", "latest", "--history", "6", "--store", store, "--fail-on", "slower")
    assert res.code == 0, res.out
    assert "jobs as the unit" in res.out and "1 job (run 8) against 5 jobs (run 7; run 6; run 5; run 4; runs 3, 2, 1)" in res.out
    assert "between-job sd:" in res.out and "measured" in res.out
    assert "detectable change: a slowdown of" in res.out
    doc = json.loads(cli("compare", "previous", "latest", "--history", "6", "--store", store, "--json",
                         "--fail-on", "slower").out)
    assert doc["deltas"][0]["latency"]["method"] == stats.JOBS_T and doc["deltas"][0]["latency"]["df"] == 4
    assert doc["detectable_change"]["unit"] == "job" and doc["detectable_change"]["units_a"] == 5
    assert doc["detectable_change"]["pct"] > 0


def test_a_history_wider_than_the_assumption_is_a_warning(cli, fake_worker, tmp_path):
    store = tmp_path / "wide.sqlite"
    _speed_runs(cli, fake_worker, store, [1.0, 1.04, 0.965, 1.035, 0.96, 1.04, 0.97, 1.0], lambda i: f"job-{i}")
    res = cli("compare", "previous", "latest", "--history", "6", "--store", store, "--job-sd", "2")
    assert res.code == 0, res.err
    line = next(l for l in res.out.splitlines() if l.startswith("warning: the jobs compared vary"))
    assert "more than the 2 % assumed when one job per side is compared (--job-sd)" in line
    doc = json.loads(cli("compare", "previous", "latest", "--history", "6", "--store", store, "--json").out)
    assert doc["run_variation"]["spread"]["warning"] is None  # the default 4 % is not below it beyond doubt
    assert 2.5 < doc["run_variation"]["spread"]["sd_pct"] < 4


def test_units_log_ratio_is_the_pooled_t_interval_on_job_means():
    a = [[[1.00, 1.01], [1.02]], [[0.97]], [[1.03, 1.03, 1.02]]]
    b = [[[1.10], [1.12, 1.11]], [[1.07]]]
    ci = across_runs.units_log_ratio(b, a, 0.95)

    def means(units):
        return [np.mean([np.mean(np.log(r)) for r in u]) for u in units]
    res = scipy_stats.ttest_ind(means(b), means(a), equal_var=True).confidence_interval(0.95)
    assert math.log(ci.low) == pytest.approx(res.low) and math.log(ci.high) == pytest.approx(res.high)
    assert ci.df == 3 and ci.method == stats.JOBS_T
    with pytest.raises(ValueError):
        across_runs.units_log_ratio([[[1.0]]], [[[1.0], [1.1]]])
    # one job per side: the spread between the runs of each, plus twice the assumed job variance
    j = across_runs.job_sd_log_ratio([[1.0], [1.02]], [[1.0], [0.98], [1.01]], 0.04)
    ms, mb = np.log([1.0, 1.02]), np.log([1.0, 0.98, 1.01])
    sw2 = (((ms - ms.mean()) ** 2).sum() + ((mb - mb.mean()) ** 2).sum()) / 3
    assert j.se_log == pytest.approx(math.sqrt(sw2 * (1 / 2 + 1 / 3) + 2 * 0.04 ** 2))


def test_the_screen_sets_a_far_repetition_aside_and_keeps_a_shifted_run():
    rng = np.random.default_rng(1)
    runs = [{b: 1000 * math.exp(rng.normal(0, 0.01)) for b in (1, 2, 3)} for _ in range(7)]
    runs[6][2] *= 3.0                                      # one repetition ×3 in the newest run
    runs[3] = {b: v * 1.06 for b, v in runs[3].items()}    # a whole run 6 % slower: not a disturbance
    found = across_runs.disturbed_repetitions(runs, 0.0025 * 0.05)
    assert [(i, b) for i, b, _ in found] == [(6, 2)] and found[0][2] == pytest.approx(3.0, rel=0.03)
    runs[6][2] /= 3.0 / 1.3                                # ×1.3 instead
    assert [(i, b) for i, b, _ in across_runs.disturbed_repetitions(runs, 0.0025 * 0.05)] == [(6, 2)]
    # two values per run cannot tell which one is far out
    assert across_runs.disturbed_repetitions([{1: 1.0, 2: 3.0}] * 6, 0.01) == []


def test_the_detectable_change_matches_its_power():
    """At the change it names, the noncentral-t power is 80 %; with a known sd it is the
    normal z_(1-α/2m) + z_0.8 standard errors."""
    d = across_runs.detectable_change(0.01, 6, 1, comparisons=2)
    se = 0.01 * math.sqrt(1 / 6 + 1)
    q = stats.t_quantile(stats.adjusted_level(0.95, 2), 5)
    assert scipy_stats.nct.sf(q, 5, math.log1p(d) / se) == pytest.approx(0.8, abs=1e-4)
    assert across_runs.detectable_change(0.01, 12, 1) < across_runs.detectable_change(0.01, 6, 1)
    known = across_runs.detectable_change(0.02, 1, 1, df=math.inf)
    z = scipy_stats.norm.ppf(0.975) + scipy_stats.norm.ppf(0.8)
    assert math.log1p(known) == pytest.approx(z * 0.02 * math.sqrt(2))
    with pytest.raises(ValueError):
        across_runs.detectable_change(0.01, 1, 1)


def test_a_history_differing_in_the_kernel_leaves_it_out_and_says_why(cli, fake_worker, tmp_path):
    store = tmp_path / "kernel.sqlite"
    _speed_runs(cli, fake_worker, store, [1.0, 1.01, 0.99, 1.0], lambda i: f"job-{i}")
    db = sqlite3.connect(store)
    host = json.loads(db.execute("SELECT host_json FROM runs WHERE id = 2").fetchone()[0])
    host["kernel"] = "Linux 9.9.9-test #1 SMP"
    db.execute("UPDATE runs SET host_json = ? WHERE id = 2", (json.dumps(host),))
    db.commit()
    db.close()
    res = cli("compare", "previous", "latest", "--history", "5", "--store", store)
    assert "history: 1 of the 5 earlier runs asked for repeat run 3" in res.out
    assert "left out: run 2 (kernel differs)" in res.out, res.out


def test_runs_stored_before_sessions_are_each_a_job_of_their_own_and_said(cli, tmp_path):
    """A format-1 store (no process, so neither job nor boot): a copy of its study run compared
    with it is two jobs of one run each, the between-job sd assumed, and the output says why."""
    import shutil
    from conftest import ROOT
    store = tmp_path / "v1.sqlite"
    shutil.copy(ROOT / "tests" / "fixtures" / "store-v1.sqlite", store)
    db = sqlite3.connect(store)
    cols = [r[1] for r in db.execute("PRAGMA table_info(runs)") if r[1] != "id"]
    db.execute(f"INSERT INTO runs ({', '.join(cols)}) SELECT {', '.join(cols)} FROM runs WHERE id = 1")
    new = db.execute("SELECT max(id) FROM runs").fetchone()[0]
    rcols = [r[1] for r in db.execute("PRAGMA table_info(results)") if r[1] not in ("id", "run_id")]
    db.execute(f"INSERT INTO results (run_id, {', '.join(rcols)}) SELECT ?, {', '.join(rcols)} FROM results "
               "WHERE run_id = 1 ORDER BY id", (new,))
    db.commit()
    db.close()
    doc = json.loads(cli("compare", "1", str(new), "--store", store, "--json").out)
    v = doc["run_variation"]
    assert v["unit"] == "job" and v["assumed_job_sd_pct"] == across_runs.DEFAULT_JOB_SD_PCT
    assert v["sessions"] == {"1": {"job": None, "boot_id": None}, str(new): {"job": None, "boot_id": None}}
    assert f"runs 1, {new} recorded no job or boot (stored before cryptoperf recorded them)" in v["method"]
