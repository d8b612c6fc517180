"""Two studies writing to one store at the same time — two `cryptoperf study` processes on the
fake worker, into one SQLite file and into one PostgreSQL database (a real server,
tests/pg_server.py) — both complete, every repetition stored once under its own run id,
nothing mixed.

The two processes are held at a gate until both have started (their first worker waits for
a file the test creates once both wait), so they open the store, create its schema and write
their repetitions at the same time; the test checks that their results did interleave."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FAKE_WORKER_EXEC, SRC, TWO_CONFIG_STUDY
from cryptoperf.store.db import Store
from pg_server import pg_database, pg_server, pg_url  # noqa: F401 (fixtures)

REPS = 6
#: study name → its only message size: a repetition of one stored under the other's run would show
STUDIES = {"alpha": 1024, "beta": 64}
#: how long the test waits for both processes to reach the gate, and for each to finish, in s
WAIT_S = 120


def gated_worker(directory: Path) -> Path:
    """A worker wrapper that, before running the fake worker, says its orchestrator (its parent
    process) is ready and waits (at most WAIT_S) for ``directory/go``."""
    script = directory / "gated-worker"
    script.write_text(
        "#!/bin/sh\n"
        f'touch "{directory}/ready.$PPID"\n'
        f"n=0; while [ ! -e \"{directory}/go\" ] && [ $n -lt {WAIT_S * 20} ]; do sleep 0.05; n=$((n+1)); done\n"
        f'{FAKE_WORKER_EXEC}\n')
    script.chmod(0o755)
    return script


def run_two_studies_at_once(tmp_path: Path, store: str) -> dict[str, subprocess.CompletedProcess]:
    gate = tmp_path / "gate"
    gate.mkdir()
    env = dict(os.environ, CRYPTOPERF_WORKER=str(gated_worker(gate)), FAKE_WORKER_SPEC="{}",
               PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = {}
    for name, size in STUDIES.items():
        study = tmp_path / f"{name}.toml"
        study.write_text(TWO_CONFIG_STUDY.format(reps=REPS, timeout=30)
                         .replace('name = "t"', f'name = "{name}"').replace("sizes = [1024]", f"sizes = [{size}]"))
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "cryptoperf", "study", str(study), "--store", store, "--out",
             str(tmp_path / f"out-{name}"), "--no-report"],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while not all((gate / f"ready.{p.pid}").exists() for p in procs.values()):
            assert time.monotonic() < deadline, "the two studies did not both start"
            assert all(p.poll() is None for p in procs.values()), "a study ended before the gate"
            time.sleep(0.05)
        (gate / "go").touch()
        out = {}
        for name, p in procs.items():
            stdout, stderr = p.communicate(timeout=WAIT_S)
            out[name] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
        return out
    finally:
        (gate / "go").touch()
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def check_both_complete(store: str, done: dict[str, subprocess.CompletedProcess], tmp_path: Path) -> None:
    for name, res in done.items():
        assert res.returncode == 0, f"{name}: {res.stderr}"
    with Store(store) as st:
        runs = {r["study_name"]: r for r in st.runs()}
        assert sorted(runs) == sorted(STUDIES) and all(r["status"] == "complete" for r in runs.values())
        ids = {}
        for name, size in STUDIES.items():
            rows = list(st.results(runs[name]["id"]))
            # every repetition once: 2 cells × (calibration + REPS blocks), all of this study
            assert len(rows) == 2 * (REPS + 1)
            assert {r["size_bytes"] for r in rows} == {size}
            assert sorted((r["configuration"], r["block"]) for r in rows) == sorted(
                (c, b) for c in "AB" for b in range(REPS + 1))
            ids[name] = [r["id"] for r in rows]
            doc = json.loads(next((tmp_path / f"out-{name}").glob("*.json")).read_text())
            assert doc["store"]["run_id"] == runs[name]["id"] and len(doc["repetitions"]) == 2 * (REPS + 1)
        counts = st.result_counts()
    assert {runs[n]["id"]: counts[runs[n]["id"]]["results"] for n in STUDIES} == {
        runs[n]["id"]: 2 * REPS for n in STUDIES}
    a, b = ids["alpha"], ids["beta"]
    assert min(a) < max(b) and min(b) < max(a), "the two studies did not write at the same time"


def test_two_studies_at_once_into_one_sqlite_store(tmp_path):
    store = str(tmp_path / "shared.sqlite")
    check_both_complete(store, run_two_studies_at_once(tmp_path, store), tmp_path)


def test_two_studies_at_once_into_one_postgresql_store(tmp_path, pg_url):  # noqa: F811
    check_both_complete(pg_url, run_two_studies_at_once(tmp_path, pg_url), tmp_path)
