"""Stores of finished runs made with the fake worker, for the tests of list, compare, plan and
cryptoperf.load(). Each run is a real ``cryptoperf study`` against fake_worker.py, whose
scripted latencies make every figure known in advance: a run's latency, wall time per op and
CPU time per op all equal the scripted latency (× the repetition's drift factor)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import TWO_CONFIG_STUDY, fake_worker_script
from cryptoperf.cli import main

#: block b runs at DRIFT[(b-1) % 3] × the scripted latency; symmetric on the log scale, so the
#: geometric mean over 3 blocks is exactly the scripted latency
DRIFT = [1.0, 1.05, 1 / 1.05]

# the economics example: an RSA-2048 private-key (CRT) operation costing 13 ms of CPU in an old
# library version and 3 ms in the next (figures from a published comparison of two library
# generations on one machine; docs/methodology.md, "Economics")
ECON_STUDY = """\
[study]
name = "rsa-upgrade"
baseline = "old"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0
timeout_s = 5

[[configuration]]
name = "old"
bits = "2048"

[[configuration]]
name = "new"
bits = "2048"

[[operation]]
label = "rsa"
op = "rsa{bits}-sign"
"""


def fake_worker_wrapper(directory: Path) -> Path:
    """A shell script that runs fake_worker.py (what CRYPTOPERF_WORKER points at)."""
    return fake_worker_script(directory / "fake-cryptoperf-worker")


def run_study(directory: Path, store: Path, study_text: str, spec: dict) -> None:
    """Run ``cryptoperf study`` on ``study_text`` with the fake worker scripted by ``spec``,
    recording into ``store``; fails the test if the study fails."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "study.toml"
    path.write_text(study_text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CRYPTOPERF_WORKER", str(fake_worker_wrapper(directory)))
        mp.setenv("FAKE_WORKER_SPEC", json.dumps(spec))
        code = main(["study", str(path), "--store", str(store), "--out", str(directory / "out")])
    assert code == 0, f"study failed with exit status {code}"


def two_runs(directory: Path) -> Path:
    """Store with two runs of the two-configuration study (A = sha256, B = sha512, 1 KiB):

    - run 1: every latency the fake worker's default, 1000 + 1024 = 2024 ns;
    - run 2: sha256 scripted at 3036 ns = 1.5 × 2024 (so A is 1.5× slower: +50 %), sha512
      unchanged (B: no difference), plus a 64-byte size only run 2 has (unmatched cells), on a
      host with another kernel and OpenSSL version (edited into the store).
    """
    store = directory / "runs.sqlite"
    study = TWO_CONFIG_STUDY.format(reps=3, timeout=5)
    run_study(directory / "r1", store, study, {"rep_factors": DRIFT})
    run_study(directory / "r2", store, study.replace("sizes = [1024]", "sizes = [1024, 64]"),
              {"rep_factors": DRIFT, "latency_ns": {"sha256": 3036}})
    db = sqlite3.connect(store)
    host = json.loads(db.execute("SELECT host_json FROM runs WHERE id = 2").fetchone()[0])
    host["kernel"] = "Linux 9.9.9-test #1 SMP"
    host["libraries"]["openssl"]["library_version"] = "fake-2.0"
    db.execute("UPDATE runs SET host_json = ? WHERE id = 2", (json.dumps(host),))
    db.commit()
    db.close()
    return store


def econ_run(directory: Path) -> Path:
    """Store with one run of ECON_STUDY: configuration 'old' at 13 ms of CPU per RSA-2048 sign,
    'new' at 3 ms (config_factor 3/13), repetitions drifting by DRIFT, so the median CPU time
    per operation is exactly 13 ms and 3 ms."""
    store = directory / "runs.sqlite"
    run_study(directory / "econ", store, ECON_STUDY,
              {"rep_factors": DRIFT, "latency_ns": {"rsa2048-sign": 13_000_000},
               "config_factor": {"new": 3 / 13}})
    return store


# a TLS 1.3 server's CPU per full handshake: sign the CertificateVerify, make the key share,
# derive the secret; the certificate's signature is RSA-2048 in configuration 'rsa' and ECDSA
# P-256 in 'ecdsa' (the label 'sign' names either). Illustrative scripted latencies (= CPU per op)
TLS_STUDY = """\
[study]
name = "tls-server"
baseline = "rsa"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0
timeout_s = 5

[[configuration]]
name = "rsa"
cert = "rsa2048"

[[configuration]]
name = "ecdsa"
cert = "ecdsa-p256"

[[operation]]
label = "sign"
op = "{cert}-sign"

[[operation]]
op = "x25519-keygen"

[[operation]]
op = "x25519-derive"
"""

#: CPU ns per operation of tls_run's cells (before the blocks' DRIFT)
TLS_CPU_NS = {"rsa2048-sign": 1_000_000, "ecdsa-p256-sign": 25_000, "x25519-keygen": 30_000,
              "x25519-derive": 40_000}


def tls_run(directory: Path) -> Path:
    """Store with one run of TLS_STUDY: every operation's CPU time per op is TLS_CPU_NS × the
    block's DRIFT factor (the same factor for every cell of a block), so a full handshake costs
    exactly 1.07 ms of server CPU in 'rsa' (1 ms + 30 µs + 40 µs) and 95 µs in 'ecdsa'."""
    store = directory / "runs.sqlite"
    run_study(directory / "tls", store, TLS_STUDY, {"rep_factors": DRIFT, "latency_ns": TLS_CPU_NS})
    return store


#: the two machines of two_host_run (only what tells them apart differs from the test host's)
NODE_A = {"hostname": "node-a", "cpu_model": "Fake CPU A"}
NODE_B = {"hostname": "node-b", "cpu_model": "Fake CPU B", "kernel": "Linux 9.9.9-test #1 SMP"}


def two_host_run(directory: Path) -> Path:
    """Store whose run 3 ran on two machines, written through the store API as a run spread
    over nodes stores itself: every result row carries the fingerprint of the machine that ran
    it (``host``). Runs 1 and 2 are two_runs' studies without the 64-byte size (run 1 at the
    fake worker's default latencies, run 2 with sha256 at 1.5×); run 3 is run 1's calibration
    and blocks 1-3 on node-a followed by run 2's blocks as blocks 4-6 on node-b. So on node-b
    configuration A (sha256) is exactly 1.5× slower than on node-a, and B unchanged."""
    from cryptoperf.store.db import Store
    store = directory / "runs.sqlite"
    study = TWO_CONFIG_STUDY.format(reps=3, timeout=5)
    run_study(directory / "r1", store, study, {"rep_factors": DRIFT})
    run_study(directory / "r2", store, study, {"rep_factors": DRIFT, "latency_ns": {"sha256": 3036}})
    with Store(store) as st:
        first = st.runs()[0]
        host_a = dict(first["host"], **NODE_A)
        host_b = dict(first["host"], **NODE_B)
        rid = st.begin_run("study", first["started_at"], first["host"], study_name=first["study_name"],
                           study_toml=first["study_toml"], seed=first["seed"], analysis=first["analysis"])
        for source, host, shift in ((1, host_a, 0), (2, host_b, 3)):
            for r in st.results(source):
                if source == 2 and r["block"] == 0:
                    continue  # one calibration per cell, as a run has
                row = dict(r, host=host, block=r["block"] + shift if r["block"] else 0)
                st.add_result(rid, row)
        st.finish_run(rid, first["finished_at"], "complete")
    return store
