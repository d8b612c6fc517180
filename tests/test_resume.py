"""Resume: a study stopped at any point (Ctrl-C, a crash of the orchestrator) keeps every
repetition it finished, and ``cryptoperf study FILE --resume RUN_ID`` runs only what is missing,
to the verdicts an uninterrupted run of the same blocks reaches. The fake worker's results are a
function of the request (cell, block), so "the same verdicts" can be asserted exactly here; the
real orchestrator and worker killed with SIGKILL are in test_resume_kill.py."""

import json
import os
import re
import sqlite3

import pytest

from conftest import TWO_CONFIG_STUDY, assert_one_line_error, worker_rules
from cryptoperf import engine, hostinfo, schedule
from cryptoperf.report.sections import fleet as fleet_sections
from cryptoperf.run import local
from cryptoperf.store.db import Store
from cryptoperf.store.stored_run import load_run, open_store
from cryptoperf.study import check_against_worker
from test_fleet import STUDY as FLEET_STUDY

#: Three configurations, two sizes: a block has three repetitions, so a stop can cut one in two.
THREE_CONFIGS = TWO_CONFIG_STUDY.format(reps=4, timeout=5).replace("sizes = [1024]", "sizes = [1024, 8192]") + """
[[configuration]]
name = "C"
hash = "sha384"
"""

SPEC = {"config_factor": {"B": 1.3, "C": 1.01}, "noise_cv": 0.02}

# 6 cells: calibration is repetitions 1-6, block 1 of the first group 7-9, ...; 6 + 4 × 6 = 30.
TOTAL = 30


def stop_at(monkeypatch, *calls: int) -> list[int]:
    """Make the local executor raise KeyboardInterrupt (Ctrl-C) when it starts repetition number
    ``calls`` (counted over the test, 1-based) instead of running it; returns the counter."""
    real = local.execute_one
    count = [0]

    def maybe_stop(*a, **k):
        count[0] += 1
        if count[0] in calls:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(local, "execute_one", maybe_stop)
    return count


def decided(run) -> list[tuple]:
    """What a reader acts on, per comparison: verdict, interval, blocks."""
    out = []
    for d in sorted(run.deltas, key=lambda d: (d.label, str(d.size_bytes), d.configuration)):
        v = d.verdict
        out.append((d.label, d.size_bytes, d.configuration, d.status, d.blocks,
                    v.text if v else d.reason, v.kind if v else None))
    return out


def rows(store_path) -> list[tuple]:
    db = sqlite3.connect(store_path)
    try:
        return db.execute("SELECT id, cell, block, attempt, superseded, disturbed, status FROM results "
                          "ORDER BY id").fetchall()
    finally:
        db.close()


#: (study text, fake worker's script) → what its uninterrupted run decided: the fake worker's
#: results are a function of the request, so one uninterrupted run stands for every test of it
_UNINTERRUPTED: dict[tuple[str, str | None], list[tuple]] = {}


def uninterrupted(path, tmp_path) -> list[tuple]:
    key = (path.read_text(), os.environ.get("FAKE_WORKER_SPEC"))
    if key not in _UNINTERRUPTED:
        run = engine.run_study(path, store=tmp_path / "whole.sqlite", out_dir=None)
        assert run.meta["status"] == "complete"
        _UNINTERRUPTED[key] = decided(run)
    return _UNINTERRUPTED[key]


@pytest.mark.parametrize("stops", [(1,), (8,), (30,), (5, 12), (9, 10, 31)],
                         ids=lambda s: "stop-at-" + "-".join(map(str, s)))
def test_a_stopped_study_resumes_to_the_verdicts_of_an_uninterrupted_one(stops, cli, write_study, fake_worker,
                                                                         tmp_path, monkeypatch):
    """Stops in calibration (1, 5), mid-block (8: the second repetition of a block; 9), at the
    last repetition (30), and while resuming (the later numbers count on into the resumed
    runs): every repetition finished before a stop stays in the store, unchanged; a block cut in
    two runs again whole (its finished half kept, superseded, with the reason); the resumed run
    has exactly the blocks of an uninterrupted one and its verdicts."""
    fake_worker(SPEC)
    path = write_study(THREE_CONFIGS)
    expected = uninterrupted(path, tmp_path)
    stop_at(monkeypatch, *stops)
    store = tmp_path / "runs.sqlite"
    res = cli("study", path, "--no-report", "--out", tmp_path / "out")
    assert res.code == 130
    last = res.err.strip().splitlines()[-1]
    assert f"as run 1: `cryptoperf study {path} --resume 1` continues it" in last, last
    before = rows(store)
    assert len(before) == stops[0] - 1
    for _ in stops:
        res = cli("study", path, "--no-report", "--out", tmp_path / "out", "--resume", "1")
        if res.code == 0:
            break
        assert res.code == 130, res.err
    assert res.code == 0, res.err
    assert "resuming run 1" in res.err
    # the time it states is what is left, not the whole study's
    assert re.search(r"only the missing ones run, about \d+ s left", res.err), res.err
    after = rows(store)
    # nothing finished was lost or rewritten, except being marked superseded with the reason
    by_id = {r[0]: r for r in after}
    for r in before:
        now = by_id[r[0]]
        assert now[:4] == r[:4] and now[6] == r[6]
        if now[4] and not r[4]:
            assert "the study stopped mid-block; the block ran again whole" in now[5]
    with open_store(store) as st:
        run = load_run(st, 1)
    assert run.meta["status"] == "complete"
    analysed = [o for o in run.outcomes if not o.superseded]
    keys = [(o.cell.key, o.repetition.block) for o in analysed]
    assert len(keys) == len(set(keys)) == TOTAL  # every repetition once: none twice, none missing
    assert decided(run) == expected
    # the resumed blocks follow the order of the seed the run drew when it started
    cells = schedule.expand(check_against_worker(run.study, worker_rules()))
    assert {(o.repetition.block, o.repetition.position, o.cell.key) for o in analysed if o.repetition.block > 0} \
        == {(r.block, r.position, r.cell.key) for r in schedule.blocks(cells, 1, 4, run.seed)}
    # the interrupted run's document stays; the resumed run's is written beside it
    newest = max((tmp_path / "out").glob("t-*.json"), key=lambda p: p.stat().st_mtime_ns)
    doc = json.loads(newest.read_text())
    assert doc["status"] == "complete" and doc["store"]["run_id"] == 1


def test_a_sequential_study_resumes_at_its_looks(cli, write_study, fake_worker, tmp_path, monkeypatch):
    """A study with until = "decided" stopped after its first look resumes the looks where they
    were: the blocks it adds for undecided comparisons are those an uninterrupted run adds."""
    from test_study_fake import SEQUENTIAL_STUDY
    fake_worker({"noise_cv": 0.02, "latency_ns": {"sha256": 2000, "sha512": 2000, "rsa2048-sign": 100_000,
                                                  "rsa4096-sign": 1_000_000}})
    path = write_study(SEQUENTIAL_STUDY)
    expected = uninterrupted(path, tmp_path)
    stop_at(monkeypatch, 20, 33)  # 4 cells: 4 calibration + 3 blocks × 4 = 16, then the second look
    assert cli("study", path, "--no-report", "--out", tmp_path / "out").code == 130
    assert cli("study", path, "--no-report", "--out", tmp_path / "out", "--resume", "1").code == 130
    res = cli("study", path, "--no-report", "--out", tmp_path / "out", "--resume", "1")
    assert res.code == 0, res.err
    with open_store(tmp_path / "runs.sqlite") as st:
        run = load_run(st, 1)
    assert decided(run) == expected


#: test_fleet's job study (a baseline and an RSA-4096 configuration, audit at 1-1000 targets)
#: with a FIPS configuration: 9 cells, blocks of three.
FLEET = FLEET_STUDY + """
[[configuration]]
name = "fips"
cert = "rsa2048"
fips = true
"""


def test_an_interrupted_fleet_job_study_resumes_to_the_same_summary_table(cli, write_study, fake_worker,
                                                                          tmp_path, monkeypatch):
    """The fleet-job summary table (use case, level, targets per minute, performance delta,
    verdict, note) of a study stopped twice — once in calibration, once mid-block — and resumed
    equals the table of the same study run without a stop."""
    fake_worker({"fleet_phase_factor": {"slow-connect": {"connect": 1.6}}, "noise_cv": 0.01})
    fake_worker.fips()
    path = write_study(FLEET)
    whole = engine.run_study(path, store=tmp_path / "whole.sqlite", out_dir=None)
    expected = fleet_sections.summary_rows(whole)
    assert expected and any(r["kind"] == "slower" for r in expected)
    stop_at(monkeypatch, 5, 18)  # 9 cells: 5 is in calibration; the resume runs 5 + 7 and stops in a block of 3
    assert cli("study", path, "--no-report", "--out", tmp_path / "out").code == 130
    assert cli("study", path, "--no-report", "--out", tmp_path / "out", "--resume", "1").code == 130
    res = cli("study", path, "--out", tmp_path / "out", "--resume", "1")
    assert res.code == 0, res.err
    with open_store(tmp_path / "runs.sqlite") as st:
        run = load_run(st, 1)
    assert any(o.superseded for o in run.outcomes)  # the cut block ran again whole
    assert fleet_sections.summary_rows(run) == expected
    md = max((tmp_path / "out").glob("jobs-*.md"), key=lambda p: p.stat().st_mtime_ns).read_text()
    assert "## Fleet jobs: summary" in md


# ----------------------------------------------------------------------------- refusals


def interrupted_run(cli, path, tmp_path, monkeypatch, at: int = 8) -> None:
    stop_at(monkeypatch, at)
    assert cli("study", path, "--no-report", "--out", tmp_path / "out").code == 130


def test_a_changed_study_file_is_refused(cli, write_study, fake_worker, tmp_path, monkeypatch):
    fake_worker(SPEC)
    path = write_study(THREE_CONFIGS)
    interrupted_run(cli, path, tmp_path, monkeypatch)
    path.write_text(THREE_CONFIGS.replace("repetitions = 4", "repetitions = 5"))
    assert "repetitions = 5" in path.read_text()
    line = assert_one_line_error(cli("study", path, "--resume", "1"), "changed since run 1 started",
                                 "SHA-256", "without --resume", code=2)
    assert str(path) in line
    path.write_text(THREE_CONFIGS + "# a comment is a change too: the text is what was measured\n")
    assert_one_line_error(cli("study", path, "--resume", "1"), "changed since run 1", code=2)


def test_runs_that_cannot_resume_are_refused_with_one_line(cli, write_study, fake_worker, tmp_path, monkeypatch):
    fake_worker(SPEC)
    path = write_study(THREE_CONFIGS)
    store = tmp_path / "runs.sqlite"
    assert_one_line_error(cli("study", path, "--resume", "1"), "no store at", code=1)
    assert cli("study", path, "--no-report", "--out", tmp_path / "out").code == 0
    assert_one_line_error(cli("study", path, "--resume", "1"), "run 1", "is complete: nothing to resume", code=2)
    assert_one_line_error(cli("study", path, "--resume", "9"), "no run 9", code=2)
    assert_one_line_error(cli("study", path, "--resume", "x"), "run id must be a number", code=2)
    interrupted_run(cli, path, tmp_path, monkeypatch)  # run 2
    assert_one_line_error(cli("study", path, "--resume", "2", "--margin", "5"),
                          "keeps the analysis settings", code=2)
    # still running: its process (this one) is alive
    with Store(store) as st:
        st.reopen_run(2, hostinfo.process_identity())
    assert_one_line_error(cli("study", path, "--resume", "2"), "still marked running", "alive", code=2)
    # another machine's run, or this machine's libraries changed since: not one run any more
    db = sqlite3.connect(store)
    host = json.loads(db.execute("SELECT host_json FROM runs WHERE id = 2").fetchone()[0])
    host["cpu_model"] = "Another CPU"
    db.execute("UPDATE runs SET host_json = ?, status = 'interrupted' WHERE id = 2", (json.dumps(host),))
    db.commit()
    db.close()
    assert_one_line_error(cli("study", path, "--resume", "2"), "cannot resume on this machine",
                          "cpu model was Another CPU", code=2)


def test_resume_through_the_python_api(write_study, fake_worker, tmp_path, monkeypatch):
    """``engine.run_study(..., resume=ID)`` is what the command does: the same run id, complete."""
    fake_worker(SPEC)
    path = write_study(THREE_CONFIGS)
    stop_at(monkeypatch, 10)
    with pytest.raises(KeyboardInterrupt) as e:
        engine.run_study(path, store=tmp_path / "api.sqlite", out_dir=None)
    assert e.value.run_id == 1
    run = engine.run_study(path, store=tmp_path / "api.sqlite", out_dir=None, resume=1)
    assert run.id == 1 and run.meta["status"] == "complete"
    assert sum(not o.superseded for o in run.outcomes) == TOTAL
