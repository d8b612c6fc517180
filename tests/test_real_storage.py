"""The storage workload against the real cryptoperf-worker: every scheme's file holds ciphertext
that another library decrypts back (the worker's validation, reported before anything is timed),
and the files a study writes are gone after a normal end, after Ctrl-C and after the worker is
killed with SIGKILL mid-repetition (the orchestrator removes the repetition's directory).

Skipped when no built worker answers hello, failed instead under CRYPTOPERF_REQUIRE_WORKER=1
(set by .ci/run). Tiny files and windows; nothing asserts on how fast anything is.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SRC, as_a_terminal_starts_it, need_real_worker
from cryptoperf.result import WorkerResult
from cryptoperf.run.worker import WorkerClient
from real_workers import find

REAL, WHY = find()
SCHEMES = ("clear", "aes-128-xts", "aes-256-xts", "aes-256-gcm")


@pytest.fixture(autouse=True)
def _need_the_real_worker():
    need_real_worker(REAL, WHY)


def run(backend: str, params: dict, tmp_path: Path, seconds: float = 0.05) -> WorkerResult:
    """One storage run request to a fresh real worker, its files in a directory of tmp_path."""
    d = tmp_path / f"io-{backend}-{params.get('scheme')}"
    d.mkdir()
    with WorkerClient(REAL) as w:
        w.hello()
        result = w.run({"type": "run", "id": "t", "backend": backend, "op": "storage",
                        "params": {"file_bytes": 1 << 20, "block_bytes": 65536, "dir": str(d), **params},
                        "seconds": seconds, "warmup_s": 0.0}, timeout_s=120)
    assert list(d.iterdir()) == [], "the worker left files behind"
    return result


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_writes_ciphertext_another_library_decrypts(scheme, tmp_path):
    measured = 0
    for backend in ("openssl", "aws-lc", "ring", "rustcrypto"):
        r = run(backend, {"scheme": scheme, "direction": "write", "load": "closed:2"}, tmp_path)
        if r.status == "unsupported":
            assert r.reason and "\n" not in r.reason
            continue
        assert r.status == "ok", (backend, r.reason)
        v = r.validation
        if scheme == "clear":
            assert v.checks["on_disk"] == "pass: sectors 0 and 255 on disk are the plaintext written", v
        else:
            assert v.kat == "pass" and v.kat_source, v
            assert v.checks["on_disk"] == "pass: sectors 0 and 255 on disk differ from the plaintext written", v
            assert v.checks["cross_decrypt"].startswith("pass: "), v
            # decrypted by a library other than the one measured, from the raw file
            other = v.cross_checks[0].with_
            assert other != backend and v.cross_checks[0].status == "pass", v
            assert "read raw from the file, to the plaintext written" in v.checks["cross_decrypt"], v
        st = r.extras["storage"]
        assert st["writes"] == r.ops and st["bytes_written"] == r.ops * 65536
        measured += 1
    assert measured >= 2  # OpenSSL and RustCrypto have every scheme


def test_a_cached_read_does_no_crypto_and_a_cold_one_does(tmp_path):
    cold = run("openssl", {"scheme": "aes-256-xts", "load": "closed:1"}, tmp_path)
    cached = run("openssl", {"scheme": "aes-256-gcm", "cache": "cached", "load": "closed:1"}, tmp_path)
    assert cold.status == cached.status == "ok", (cold.reason, cached.reason)
    assert cached.extras["storage"]["cache"] == "cached" and cached.extras["storage"]["reads"] == cached.ops


def test_the_dm_crypt_layer_says_why_it_cannot_run_here(tmp_path):
    if Path("/dev/mapper/control").exists():
        pytest.skip("this host has device-mapper: the dm-crypt layer may run here")
    r = run("openssl", {"scheme": "aes-256-xts", "layer": "dm-crypt", "load": "closed:1"}, tmp_path)
    assert r.status == "unsupported"
    assert r.reason.startswith("dm-crypt layer unavailable") and "\n" not in r.reason


# ------------------------------------------------------------------ files gone on every end

STUDY = """\
[study]
name = "storage-cleanup"
baseline = "clear"
backends = ["openssl"]
repetitions = 3
seconds = {seconds}
warmup_s = 0
timeout_s = 120
work_dir = "{work}"

[[configuration]]
name = "clear"
scheme = "clear"

[[configuration]]
name = "aes-256-xts"
scheme = "aes-256-xts"

[[operation]]
label = "random write"
op = "storage"
params = {{ scheme = "{{scheme}}", pattern = "random", direction = "write", file_bytes = "4MiB" }}
loads = ["closed:2"]
"""


def _start(tmp_path: Path, seconds: float) -> tuple[subprocess.Popen, Path, Path]:
    work, store = tmp_path / "work", tmp_path / "runs.sqlite"
    study = tmp_path / "s.toml"
    study.write_text(STUDY.format(seconds=seconds, work=work))
    env = {**os.environ, "PYTHONPATH": str(SRC), "CRYPTOPERF_WORKER": str(REAL)}
    p = subprocess.Popen([sys.executable, "-m", "cryptoperf", "study", str(study), "--store", str(store),
                          "--out", str(tmp_path / "out"), "--no-report"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=as_a_terminal_starts_it)
    return p, work, store


def _wait_for_data_file(work: Path, p: subprocess.Popen, timeout_s: float = 60) -> Path:
    """The first repetition directory holding a file, once one exists (the worker is writing)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for d in work.glob("cryptoperf-io-*"):
            try:
                if any(d.iterdir()):
                    return d
            except FileNotFoundError:
                pass
        assert p.poll() is None, p.communicate()
        time.sleep(0.01)
    raise AssertionError("no repetition directory with a file appeared")


def _worker_pid(parent: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"cryptoperf-worker" in cmd:
            return int(entry.name)
    return None


def test_files_are_gone_after_a_normal_end(tmp_path):
    p, work, _ = _start(tmp_path, seconds=0.05)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert work.is_dir() and list(work.iterdir()) == []


def test_files_are_gone_after_ctrl_c_and_finished_repetitions_are_kept(tmp_path):
    p, work, store = _start(tmp_path, seconds=1.0)
    _wait_for_data_file(work, p)
    time.sleep(0.2)
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group: worker too
    out, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert "Traceback" not in err
    assert list(work.glob("cryptoperf-io-*")) == [], "a repetition's directory survived Ctrl-C"
    with sqlite3.connect(store) as db:
        (status,) = db.execute("SELECT status FROM runs").fetchone()
    assert status == "interrupted"


def test_files_are_gone_after_the_worker_is_killed_and_the_study_goes_on(tmp_path):
    p, work, store = _start(tmp_path, seconds=0.5)
    _wait_for_data_file(work, p)
    pid = None
    deadline = time.monotonic() + 10
    while pid is None and time.monotonic() < deadline:
        pid = _worker_pid(p.pid)
    assert pid is not None, "found no worker process under the orchestrator"
    os.kill(pid, signal.SIGKILL)
    out, err = p.communicate(timeout=300)
    assert "Traceback" not in err
    assert list(work.glob("cryptoperf-io-*")) == [], "the killed worker's directory survived"
    with sqlite3.connect(store) as db:
        reasons = [r for (r,) in db.execute("SELECT reason FROM results WHERE status = 'failed'")]
        ok = db.execute("SELECT count(*) FROM results WHERE status = 'ok'").fetchone()[0]
    assert any("worker crashed" in r for r in reasons), reasons
    assert ok >= 6  # every other repetition measured (2 configurations × 3 blocks, + calibration)


def test_after_the_orchestrator_is_killed_resume_sweeps_what_it_left(tmp_path):
    """SIGKILL of the orchestrator mid-write: nothing of it can clean up, and its worker ends
    with its repetition, so a repetition directory may stay; the resumed study removes it (its
    pid is dead) and ends with the work directory empty."""
    p, work, store = _start(tmp_path, seconds=1.0)
    left = _wait_for_data_file(work, p)
    assert left.name.startswith(f"cryptoperf-io-{p.pid}-")
    worker = _worker_pid(p.pid)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.monotonic() + 30
    while worker is not None and Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the worker finishes its repetition and ends (its output pipe is gone)
    assert left.is_dir(), "nothing was left to sweep"
    env = {**os.environ, "PYTHONPATH": str(SRC), "CRYPTOPERF_WORKER": str(REAL)}
    res = subprocess.run([sys.executable, "-m", "cryptoperf", "study", str(tmp_path / "s.toml"), "--store",
                          str(store), "--out", str(tmp_path / "out"), "--no-report", "--resume", "1"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert list(work.iterdir()) == []

