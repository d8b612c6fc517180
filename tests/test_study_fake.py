"""Whole studies against the fake worker: scripted ratios give known verdicts; the schedule is
calibrated, blocked and randomised; crashes and hangs fail their own repetitions only; disturbed
repetitions run again; sequential studies add blocks to undecided comparisons only; every
repetition lands in the store and the JSON document."""

import json
import sqlite3

import pytest

from conftest import TWO_CONFIG_STUDY, worker_rules
from cryptoperf import schedule, stats
from cryptoperf.store import stored_run as stored
from cryptoperf.study import check_against_worker
from cryptoperf.store.db import FORMAT_VERSION, Store

DRIFT = [1.0, 1.05, 0.97, 1.02, 0.99]


def run_study(cli, write_study, tmp_path, reps=5, timeout=5, extra="", args=()):
    text = TWO_CONFIG_STUDY.format(reps=reps, timeout=timeout).replace('[[configuration]]', extra + '\n[[configuration]]', 1)
    path = write_study(text)
    res = cli("study", path, "--out", tmp_path / "out", "--no-report", *args)
    docs = sorted((tmp_path / "out").glob("t-*.json"))
    doc = json.loads(docs[-1].read_text()) if docs else None
    return res, doc


def measured(doc):
    """The analysed repetitions of a study document (no calibration, no superseded attempt)."""
    return [r for r in doc["repetitions"] if r["block"] > 0 and not r["superseded"]]


def test_two_x_slower_configuration(cli, write_study, fake_worker, tmp_path):
    fake_worker({"config_factor": {"B": 2.0}, "rep_factors": DRIFT})
    res, doc = run_study(cli, write_study, tmp_path)
    assert res.code == 0, res.err
    (d,) = doc["deltas"]
    lat, tp = d["latency"], d["throughput"]
    assert lat["ratio"] == pytest.approx(2.0, rel=1e-3)
    # paired: the drift cancels; what is left is the histogram's resolution (a bucket each side)
    assert lat["ci_low"] == pytest.approx(2.0, rel=3e-3) == lat["ci_high"] and lat["ci_low"] < 2.0 < lat["ci_high"]
    assert tp["ratio"] == pytest.approx(0.5, rel=1e-3) and tp["ci_high"] < 1.0
    assert d["verdict"]["kind"] == "slower" and d["blocks"] == 5
    assert "performance delta vs baseline" in res.out and "p50 latency 2.0× higher" in res.out
    assert "noise across repetitions" in res.out
    assert doc["analysis"]["comparisons"] == 1 and "paired t" in doc["analysis"]["method"]


def test_block_drift_cancels_in_the_paired_comparison(cli, write_study, fake_worker, tmp_path):
    """A 10 % swing shared by each block's repetitions, 1 % noise, a true +5 %: paired per
    block, the interval is narrow and says slower; unpaired it would drown in the swing."""
    fake_worker({"config_factor": {"B": 1.05}, "rep_factors": [1.0, 1.1, 0.9, 1.08, 0.93], "noise_cv": 0.01})
    res, doc = run_study(cli, write_study, tmp_path, reps=5)
    (d,) = doc["deltas"]
    assert d["verdict"]["kind"] == "slower" and d["latency"]["ratio"] == pytest.approx(1.05, rel=0.02)
    assert d["latency"]["ci_high"] - d["latency"]["ci_low"] < 0.06


def test_equal_configurations_are_equivalent(cli, write_study, fake_worker, tmp_path):
    fake_worker({"rep_factors": DRIFT})
    res, doc = run_study(cli, write_study, tmp_path)
    assert res.code == 0, res.err
    (d,) = doc["deltas"]
    assert d["latency"]["ci_low"] <= 1.0 <= d["latency"]["ci_high"]
    assert d["verdict"]["kind"] == "equivalent" and d["verdict"]["text"].startswith("equivalent within ±2 %")
    assert "equivalent within ±2 %" in res.out
    for words in ("no significant difference", "too noisy"):
        assert words not in res.out


def test_noisy_equal_configurations_are_inconclusive_with_what_would_decide(cli, write_study, fake_worker, tmp_path):
    fake_worker({"noise_cv": 0.05})
    res, doc = run_study(cli, write_study, tmp_path, reps=4)
    (d,) = doc["deltas"]
    assert d["verdict"]["kind"] == "inconclusive", d["verdict"]
    assert "spans the ±2 % margin" in d["verdict"]["text"] and d["verdict"]["blocks_needed"] > 4
    assert "inconclusive" in res.out


def test_margin_flag_overrides_the_study(cli, write_study, fake_worker, tmp_path):
    fake_worker({"noise_cv": 0.05})
    res, doc = run_study(cli, write_study, tmp_path, reps=4, args=("--margin", "50"))
    (d,) = doc["deltas"]
    assert d["verdict"]["kind"] == "equivalent" and d["verdict"]["margin_pct"] == 50
    assert doc["analysis"]["settings"]["margin_pct"] == 50
    with Store(tmp_path / "runs.sqlite") as st:
        assert st.runs()[0]["analysis"]["margin_pct"] == 50


def test_intervals_reproduce(cli, write_study, fake_worker, tmp_path):
    fake_worker({"config_factor": {"B": 1.3}, "noise_cv": 0.02})
    _, doc1 = run_study(cli, write_study, tmp_path)
    (tmp_path / "out").rename(tmp_path / "out1")
    _, doc2 = run_study(cli, write_study, tmp_path)
    assert doc1["deltas"][0]["latency"] == doc2["deltas"][0]["latency"]


def test_calibration_then_randomised_blocks_all_stored(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    # the order pinned: with 6 blocks a drawn order keeps one configuration first throughout 3 % of the time
    res, doc = run_study(cli, write_study, tmp_path, reps=6, extra="seed = 1\n")
    assert res.code == 0
    cal = [r for r in doc["repetitions"] if r["block"] == 0]
    assert [r["configuration"] for r in cal] == ["A", "B"]
    runs = measured(doc)
    assert [r["block"] for r in runs] == [b for b in range(1, 7) for _ in range(2)]
    for b in range(1, 7):
        block = [r for r in runs if r["block"] == b]
        assert sorted(r["position"] for r in block) == [0, 1] and {r["configuration"] for r in block} == {"A", "B"}
    firsts = {r["configuration"] for r in runs if r["position"] == 0}
    assert firsts == {"A", "B"}  # the order is not fixed: each goes first in some block
    # one batch size for both sides, the one calibration found (fake: 10 µs / 2024 ns → 8)
    assert {r["batch"] for r in runs} == {8} and {r["result"]["batch"] for r in runs} == {8}
    assert doc["format_version"] == FORMAT_VERSION and doc["status"] == "complete"
    assert doc["study"]["name"] == "t" and "[study]" in doc["study"]["toml"]
    assert doc["host"]["libraries"]["openssl"]["library_version"] == "fake-1.0"
    assert {c["name"] for c in doc["host"]["checks"]} >= {"clocksource", "steal", "other load"}
    assert runs[0]["result"]["histogram"].startswith("HISTF") and runs[0]["latency"]["p50_ns"] > 0
    with Store(tmp_path / "runs.sqlite") as st:
        (run,) = st.runs()
        assert run["status"] == "complete" and run["study_name"] == "t"
        # the study pins no seed: the run drew one and stored it
        assert isinstance(run["seed"], int) and 0 <= run["seed"] < schedule.FRESH_SEED_MAX
        assert run["format_version"] == FORMAT_VERSION and "cpu_model" in run["host"]
        rows = list(st.results(run["id"]))
        assert len(rows) == 14 and all(r["status"] == "ok" for r in rows)
        assert [(r["block"], r["position"], r["configuration"]) for r in rows] == [
            (r["block"], r["position"], r["configuration"]) for r in doc["repetitions"]]


def test_baseline_gets_the_unmasked_vector_and_a_clear_nothing_mask(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    env = {r["result"]["capabilities"]["env"] for r in doc["repetitions"]}
    assert len(env) == 1 and env.pop().startswith("~0x0000000000000000:")


def test_an_empty_mask_variable_is_caught(cli, write_study, fake_worker, tmp_path, monkeypatch):
    """An empty OPENSSL_ia32cap clears every capability; a baseline started with it must not be
    measured as the baseline."""
    fake_worker()
    from cryptoperf import cpumask
    monkeypatch.setitem(cpumask.MASKS, "baseline", "")
    monkeypatch.setattr(cpumask, "check_hello", lambda *a, **k: None)
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    assert {r["status"] for r in doc["repetitions"]} == {"invalid"}
    assert "capability mask not applied" in doc["repetitions"][0]["reason"]


def test_crashing_configuration_fails_its_repetitions_and_the_study_goes_on(cli, write_study, fake_worker, tmp_path):
    fake_worker({"crash": ["B#1", "B#2", "B#3"]})
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    assert res.code == 1 and "compared nothing" in res.err  # every B repetition failed
    runs = measured(doc)
    assert {(r["configuration"], r["status"]) for r in runs} == {("A", "ok"), ("B", "failed")}
    failed = next(r for r in runs if r["status"] == "failed")
    assert "SIGABRT" in failed["reason"] and "crashing on purpose" in failed["stderr_tail"]
    (d,) = doc["deltas"]
    assert d["status"] == "n/a" and "this configuration: failed" in d["reason"]
    assert "n/a" in res.out and "3 of 6 repetitions failed" in res.out
    assert "crashing on purpose" in res.out  # the footnote with the stderr tail


def test_hanging_configuration_times_out(cli, write_study, fake_worker, tmp_path):
    fake_worker({"hang": ["B#1", "B#2", "B#3"]})
    res, doc = run_study(cli, write_study, tmp_path, reps=3, timeout=1)
    assert res.code == 1 and "compared nothing" in res.err  # every B repetition failed
    failed = [r for r in measured(doc) if r["status"] == "failed"]
    assert len(failed) == 3 and failed[0]["reason"].startswith("timeout: the worker did not answer within 1 s")


def test_unsupported_cells_are_found_at_calibration_and_not_repeated(cli, write_study, fake_worker, tmp_path):
    fake_worker({"unsupported": {"openssl/sha256": "no SHA-256 here"}})
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    assert res.code == 1 and "compared nothing" in res.err
    assert [(r["block"], r["configuration"]) for r in doc["repetitions"] if r["configuration"] == "A"] == [(0, "A")]
    (d,) = doc["deltas"]
    assert d["status"] == "n/a" and d["reason"] == "baseline: unsupported: no SHA-256 here"


def test_a_disturbed_repetition_runs_again_and_is_flagged_only_if_still_disturbed(cli, write_study, fake_worker,
                                                                                tmp_path):
    fake_worker({"steal_pct": {"B#2": 30.0, "A#3": 40.0}, "steal_times": 1})
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    superseded = [r for r in doc["repetitions"] if r["superseded"]]
    assert {(r["configuration"], r["block"]) for r in superseded} == {("B", 2), ("A", 3)}
    assert sorted(r["disturbed"].split(" >")[0] for r in superseded) == ["steal 30.0 %", "steal 40.0 %"]
    assert [r for r in measured(doc) if r["disturbed"]] == []  # the re-runs were clean
    assert doc["deltas"][0]["blocks"] == 3
    assert "2 repetition(s) were disturbed" in res.out


def test_a_repetition_disturbed_twice_is_kept_and_flagged(cli, write_study, fake_worker, tmp_path):
    fake_worker({"steal_pct": {"B#2": 30.0}, "steal_times": 5})
    res, doc = run_study(cli, write_study, tmp_path, reps=3)
    flagged = [r for r in measured(doc) if r["disturbed"]]
    assert [(r["configuration"], r["block"], r["attempt"]) for r in flagged] == [("B", 2, 2)]
    cell_b = next(c for c in doc["cells"] if c["configuration"] == "B")
    assert cell_b["disturbed"] == 1


SEQUENTIAL_STUDY = """\
[study]
name = "t"
baseline = "A"
backends = ["openssl"]
repetitions = 3
until = "decided"
max_repetitions = 24
seconds = 0.01
warmup_s = 0
timeout_s = 5

[[configuration]]
name = "A"
hash = "sha256"
bits = 2048

[[configuration]]
name = "B"
hash = "sha512"
bits = 4096

[[operation]]
label = "hash"
op = "{hash}"
sizes = [1024]

[[operation]]
label = "sign"
op = "rsa{bits}-sign"
"""


def test_sequential_study_adds_blocks_to_undecided_comparisons_only(cli, write_study, fake_worker, tmp_path):
    """Two groups: "sign" is 10× slower in B and decided at the first look (3 blocks); "hash"
    is the same in A and B (2 % noise), undecided at 3 blocks, so only its two cells get more
    blocks, at the looks 6, 12, 24, until it is decided or the blocks run out."""
    fake_worker({"noise_cv": 0.02, "latency_ns": {"sha256": 2000, "sha512": 2000, "rsa2048-sign": 100_000,
                                                  "rsa4096-sign": 1_000_000}})
    res = cli("study", write_study(SEQUENTIAL_STUDY), "--out", tmp_path / "out", "--no-report")
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("t-*.json")).read_text())
    by_label = {d["label"]: d for d in doc["deltas"]}
    assert by_label["sign"]["blocks"] == 3 and by_label["sign"]["verdict"]["kind"] == "slower"
    assert by_label["hash"]["blocks"] > 3
    blocks = {(r["label"], r["configuration"]): {x["block"] for x in measured(doc)
                                                 if (x["label"], x["configuration"]) == (r["label"], r["configuration"])}
              for r in measured(doc)}
    assert blocks[("sign", "A")] == blocks[("sign", "B")] == {1, 2, 3}
    assert blocks[("hash", "A")] == blocks[("hash", "B")] == set(range(1, by_label["hash"]["blocks"] + 1))
    assert by_label["hash"]["blocks"] in (6, 12, 24)  # only at a planned look
    assert doc["analysis"]["settings"]["looks"] == 4 and "and 4 looks" in doc["analysis"]["method"]
    assert by_label["hash"]["verdict"]["kind"] != "slower" or by_label["hash"]["verdict"]["within_margin"]


def test_each_repetition_is_committed_as_it_finishes(cli, write_study, fake_worker, tmp_path, monkeypatch):
    """Interrupt the study at the fourth repetition: the three before it are in the store, the
    run is marked interrupted, the JSON document is written, and the exit status is 130."""
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
    assert res.code == 130 and res.err.strip().splitlines()[-1].startswith(
        "cryptoperf: error: interrupted; the repetitions finished so far are in store ")
    assert res.err.strip().endswith(" as run 1: `cryptoperf study "
                                    f"{tmp_path / 'study.toml'} --resume 1` continues it")
    db = sqlite3.connect(tmp_path / "runs.sqlite")
    assert db.execute("SELECT count(*) FROM results").fetchone()[0] == 3
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    assert doc["status"] == "interrupted" and len(doc["repetitions"]) == 3


def test_dry_run_lists_the_schedule(cli, write_study, fake_worker):
    fake_worker()
    path = write_study(TWO_CONFIG_STUDY.format(reps=3, timeout=5))
    res = cli("study", path, "--dry-run")
    assert res.code == 0
    lines = res.out.splitlines()
    assert len(lines) == 6 and all("block" in l for l in lines)
    assert {"openssl/hash/1024/A", "openssl/hash/1024/B"} <= {l.split()[4] for l in lines[:2]}


def test_one_failed_repetition_drops_its_block_and_says_so(cli, write_study, fake_worker, tmp_path):
    fake_worker({"crash": ["B#2"], "config_factor": {"B": 1.5}, "rep_factors": DRIFT})
    res, doc = run_study(cli, write_study, tmp_path, reps=4)
    assert res.code == 0
    assert [r["status"] for r in measured(doc)].count("failed") == 1
    (d,) = doc["deltas"]
    assert d["status"] == "ok" and d["blocks"] == 3 and d["dropped"] == 1
    assert d["note"].startswith("3 of 4 blocks; 1 dropped") and "block 2" in d["note"]
    assert d["latency"]["ratio"] == pytest.approx(1.5, rel=0.01)
    cell_b = next(c for c in doc["cells"] if c["configuration"] == "B")
    assert cell_b["ok"] == 3 and cell_b["repetitions"] == 4 and cell_b["status"] == "failed"


def test_verdicts_can_be_decided_on_cpu_per_op(cli, write_study, fake_worker, tmp_path):
    """verdict_on = "cpu_per_op": the verdict is about CPU time per operation, says so, and the
    other metrics keep their intervals."""
    fake_worker({"config_factor": {"B": 1.3}, "noise_cv": 0.01})
    res, doc = run_study(cli, write_study, tmp_path, reps=4, extra='verdict_on = "cpu_per_op"\n')
    assert res.code == 0, res.err
    (d,) = doc["deltas"]
    assert d["verdict"]["metric"] == "CPU time per operation" and d["verdict"]["kind"] == "slower"
    assert d["cpu_per_op"]["ratio"] == pytest.approx(1.3, rel=0.03) and d["latency"] is not None
    assert "verdicts on CPU time per operation" in doc["analysis"]["method"]
    assert "verdict (CPU time per operation)" in " ".join(res.out.split()) or "CPU time per" in res.out


def test_each_run_draws_its_seed_and_a_pinned_one_is_kept(cli, write_study, fake_worker, tmp_path):
    """Two runs of a file without ``seed`` store two different seeds (and say which when they
    start); a file's ``seed`` is the run's, and its repetitions follow the order it gives."""
    fake_worker()
    first, _ = run_study(cli, write_study, tmp_path, reps=3)
    second, _ = run_study(cli, write_study, tmp_path, reps=3)
    pinned, doc = run_study(cli, write_study, tmp_path, reps=3, extra="seed = 12345\n")
    assert first.code == second.code == pinned.code == 0
    with Store(tmp_path / "runs.sqlite") as st:
        seeds = [r["seed"] for r in st.runs()]
    assert len(seeds) == 3 and seeds[0] != seeds[1] and seeds[2] == 12345
    assert f"block order seed {seeds[0]}" in first.err and "block order seed 12345 (the study file's)" in pinned.err
    with Store(tmp_path / "runs.sqlite") as st:
        run = stored.load_run(st, "latest")
    order = [(o.repetition.block, o.cell.key) for o in run.outcomes if o.repetition.block > 0]
    assert order == [(r.block, r.cell.key) for r in schedule.blocks(schedule.expand(check_against_worker(run.study, worker_rules())), 1, 3, 12345)]


def test_a_dry_run_states_the_designs_power(cli, write_study, fake_worker, tmp_path):
    """The smallest change the design finds 80 % of the time at CV 3 % (``stats.smallest_effect``:
    checked against the simulation in test_simulation.py), for the study's blocks and
    comparisons; the same line opens a real run."""
    fake_worker()
    res, _ = run_study(cli, write_study, tmp_path, reps=5, args=("--dry-run",))
    assert res.code == 0, res.err
    expected = stats.smallest_effect(5, 0.03, 1) * 100
    assert f"power: 80 % of the time a comparison finds a change of {expected:.1f} % at CV 3 %" in res.err, res.err
    assert "(5 blocks)" in res.err


def test_a_design_that_misses_five_percent_warns_unless_the_study_says_why(cli, write_study, fake_worker, tmp_path):
    """5 blocks of one comparison find 5.9 % at CV 3 %, not 5 %: without a ``power_note`` the dry
    run warns in one line; with one it prints the note after the figure and does not warn; 10
    blocks find 4.3 % and need neither."""
    fake_worker()
    assert stats.smallest_effect(5, 0.03) > 0.05 > stats.smallest_effect(10, 0.03)
    res, _ = run_study(cli, write_study, tmp_path, reps=5, args=("--dry-run",))
    assert res.code == 0, res.err
    (warning,) = [l for l in res.err.splitlines() if l.startswith("warning: 80 %")]
    assert f"finds a change of {stats.smallest_effect(5, 0.03) * 100:.1f} % at CV 3 %, not 5 %" in warning
    assert "power_note" in warning
    note = 'power_note = """its question is a change of 2×,\n  which 5 blocks find"""'
    res, _ = run_study(cli, write_study, tmp_path, reps=5, extra=note, args=("--dry-run",))
    assert res.code == 0, res.err
    (line,) = [l for l in res.err.splitlines() if l.startswith("power:")]
    assert line.endswith("(5 blocks); not 5 %, because its question is a change of 2×, which 5 blocks find"), line
    assert "warning: 80 %" not in res.err
    res, _ = run_study(cli, write_study, tmp_path, reps=10, extra=note, args=("--dry-run",))
    assert "because" not in res.err and "warning: 80 %" not in res.err


def test_a_sequential_dry_run_states_its_worst_case_time(cli, write_study, fake_worker, tmp_path):
    """A sequential study's plan line ends its looks with the time if every comparison ran to the
    last one: the same estimate as the first look's 'about', over the last look's blocks."""
    from cryptoperf import engine
    from cryptoperf.report.study_text import duration_text
    fake_worker()
    res, _ = run_study(cli, write_study, tmp_path, reps=5, extra='until = "decided"\nmax_repetitions = 40',
                       args=("--dry-run",))
    assert res.code == 0, res.err
    plan = engine.prepare_study(tmp_path / "study.toml", setup=False, dry_run=True)
    assert plan.looks == (5, 10, 20, 40)
    first, worst = plan.estimated_seconds(), plan.worst_case_seconds()
    assert worst == plan.estimated_seconds(40) > plan.estimated_seconds(20) > first
    assert (f"about {duration_text(first)}, then up to 40 blocks for inconclusive comparisons "
            f"(looks at 5, 10, 20, 40), at most about {duration_text(worst)};") in res.err, res.err
    fixed, _ = run_study(cli, write_study, tmp_path, reps=5, args=("--dry-run",))
    assert "at most" not in fixed.err
