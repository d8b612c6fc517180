"""No lost result, with the real parts: a real ``cryptoperf study`` process and its real
cryptoperf-worker children are killed mid-study — the orchestrator with SIGKILL, one worker with
SIGKILL, the whole process group with SIGINT (Ctrl-C at a terminal) at random moments — and the
store keeps every repetition finished before, stays consistent (SQLite integrity check, no
repetition twice) and ``--resume`` completes the run. The same on a real PostgreSQL server.

Skipped when no built worker answers hello, failed instead under CRYPTOPERF_REQUIRE_WORKER=1
(set by .ci/run). Tiny windows; nothing asserts on how fast anything is.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SRC, TWO_CONFIG_STUDY, as_a_terminal_starts_it, need_real_worker
from pg_server import pg_database, pg_server, pg_url  # noqa: F401 (fixtures)
from cryptoperf.store.stored_run import load_run, open_store
from real_workers import find

REAL, WHY = find()

# 2 configurations × 2 sizes = 4 cells; 4 calibration + 4 blocks × 4 = 20 repetitions.
STUDY = TWO_CONFIG_STUDY.format(reps=4, timeout=30).replace("sizes = [1024]", "sizes = [64, 4096]").replace(
    "seconds = 0.01", "seconds = 0.05")
TOTAL = 20


@pytest.fixture(autouse=True)
def _need_the_real_worker():
    need_real_worker(REAL, WHY)


def start(study: Path, store: str, out: Path) -> subprocess.Popen:
    """``cryptoperf study`` in a process group of its own (as a shell starts a foreground job)."""
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "CRYPTOPERF_WORKER": str(REAL)}
    args = [sys.executable, "-m", "cryptoperf", "study", str(study), "--store", store, "--out", str(out),
            "--no-report"]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=as_a_terminal_starts_it)


def resume(study: Path, store: str, out: Path, run_id: int = 1) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "CRYPTOPERF_WORKER": str(REAL)}
    return subprocess.run([sys.executable, "-m", "cryptoperf", "study", str(study), "--store", store,
                           "--out", str(out), "--no-report", "--resume", str(run_id)],
                          env=env, capture_output=True, text=True, timeout=300)


def results(store: str) -> list[tuple]:
    """Every results row as (id, cell, block, attempt, status, superseded), read through the
    store (SQLite or PostgreSQL)."""
    with open_store(store) as st:
        return [(int(r["id"]), r["cell"], int(r["block"]), int(r["attempt"]), r["status"], int(r["superseded"]))
                for rid in [int(x["id"]) for x in st.runs()] for r in st.results(rid)]


def wait_for_results(store: str, p: subprocess.Popen, n: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert p.poll() is None, f"the study ended early: {p.communicate()}"
        try:
            if len(results(store)) >= n:
                return
        except Exception:
            pass  # the store is being created
        time.sleep(0.05)
    raise AssertionError(f"no {n} results within {timeout_s} s")


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def gone(pids: list[int], timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def check_complete(store: str, before: list[tuple]) -> None:
    """Every row of ``before`` is still there, the same repetition (superseded at most, when
    its block ran again whole), and the run ended complete with every repetition once."""
    after = {r[0]: r for r in results(store)}
    for r in before:
        assert r[0] in after, f"lost: {r}"
        assert after[r[0]][:5] == r[:5], (r, after[r[0]])
    with open_store(store) as st:
        run = load_run(st, 1)
    assert run.meta["status"] == "complete"
    keys = [(o.cell.key, o.repetition.block) for o in run.outcomes if not o.superseded]
    assert len(keys) == len(set(keys)) == TOTAL
    assert any(d.verdict is not None for d in run.deltas)


def sqlite_ok(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


def test_kill_9_of_the_orchestrator_loses_nothing_and_the_run_resumes(tmp_path):
    study = tmp_path / "kill.toml"
    study.write_text(STUDY)
    store = tmp_path / "runs.sqlite"
    p = start(study, str(store), tmp_path / "out")
    wait_for_results(str(store), p, 9)
    workers = children(p.pid)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    # its worker does not outlive it by more than the repetition it was running
    assert gone(workers), f"workers {workers} still running after the orchestrator was killed"
    sqlite_ok(store)
    before = results(str(store))
    assert len(before) >= 9
    listed = subprocess.run([sys.executable, "-m", "cryptoperf", "list", "--store", str(store), "--json"],
                            env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True)
    assert '"status": "interrupted"' in listed.stdout, listed.stdout + listed.stderr
    res = resume(study, str(store), tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert "resuming run 1" in res.stderr
    sqlite_ok(store)
    check_complete(str(store), before)


def test_kill_9_of_a_worker_fails_only_its_repetition(tmp_path):
    study = tmp_path / "kill.toml"
    study.write_text(STUDY)
    store = tmp_path / "runs.sqlite"
    p = start(study, str(store), tmp_path / "out")
    wait_for_results(str(store), p, 6)
    # every repetition is a short-lived worker: one seen may be gone (or done, a zombie) before
    # the kill lands, so read the store first, then kill the first worker still running; a kill
    # that came after its repetition's result was sent fails nothing, so try again
    killed, before = 0, []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        before = results(str(store))
        if any(r[4] == "failed" for r in before):
            break
        live = [c for c in children(p.pid) if "cryptoperf-worker" in _cmdline(c) and _state(c) not in "ZX"]
        if not live:
            time.sleep(0.01)
            continue
        try:
            os.kill(live[0], signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed += 1
        # the orchestrator records the killed repetition (failed, or done if the kill came late)
        # before the next one's result
        n, until = len(before), time.monotonic() + 20
        while len(results(str(store))) <= n and p.poll() is None and time.monotonic() < until:
            time.sleep(0.05)
        if p.poll() is not None:
            break
    assert killed, "no live worker child seen"
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    rows = results(str(store))
    assert {r[0] for r in before} <= {r[0] for r in rows}
    failed = [r for r in rows if r[4] == "failed"]
    assert len(failed) == 1
    with open_store(str(store)) as st:
        run = load_run(st, 1)
    reason = next(o.reason for o in run.outcomes if o.status == "failed")
    assert "worker crashed" in reason and "\n" not in reason
    assert "1 of" in out and "repetitions failed" in out
    sqlite_ok(store)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def ctrl_c_at_random_moments(study: Path, store: str, out: Path, seed: int, stops: int) -> list[tuple]:
    """Start the study, and ``stops`` times send SIGINT to its process group at a random moment
    while it measures (0-1 s after it stored its next repetition), then resume; returns the rows
    seen before the last resume."""
    rng = random.Random(seed)
    p = start(study, store, out)
    before: list[tuple] = []
    for i in range(stops):
        try:
            wait_for_results(store, p, len(before) + 1)
        except AssertionError:
            break  # it finished
        time.sleep(rng.uniform(0.0, 1.0))
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
        if p.returncode == 0:
            break  # it finished before the stop
        assert p.returncode == 130, err
        assert "--resume 1` continues it" in err.strip().splitlines()[-1], err
        rows = results(store)
        assert {r[0] for r in before} <= {r[0] for r in rows}  # nothing finished was lost
        before = rows
        env = {**os.environ, "PYTHONPATH": str(SRC), "CRYPTOPERF_WORKER": str(REAL)}
        p = subprocess.Popen([sys.executable, "-m", "cryptoperf", "study", str(study), "--store", store,
                              "--out", str(out), "--no-report", "--resume", "1"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             preexec_fn=as_a_terminal_starts_it)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return before


@pytest.mark.parametrize("seed", [1, 2])
def test_ctrl_c_at_random_moments_then_resume(seed, tmp_path):
    study = tmp_path / "kill.toml"
    study.write_text(STUDY)
    store = tmp_path / "runs.sqlite"
    before = ctrl_c_at_random_moments(study, str(store), tmp_path / "out", seed, stops=3)
    assert before, "no Ctrl-C landed while the study measured"
    sqlite_ok(store)
    check_complete(str(store), before)


def test_a_postgresql_store_survives_kill_9_and_resumes(tmp_path, pg_url):
    study = tmp_path / "kill.toml"
    study.write_text(STUDY)
    p = start(study, pg_url, tmp_path / "out")
    wait_for_results(pg_url, p, 7)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    before = results(pg_url)
    res = resume(study, pg_url, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    check_complete(pg_url, before)
