"""End to end against the real cryptoperf-worker (skipped when no built worker answers hello).

Sub-second budgets; nothing here asserts on how fast anything is.
"""

import json
import os
from pathlib import Path

import pytest

from conftest import assert_one_line_error, run_subprocess
from cryptoperf import worker_path
from cryptoperf.errors import WorkerError
from cryptoperf.run.worker import fetch_hello

SPEED_FIELDS = ("backend", "library_version", "op", "size_bytes", "ops_per_s", "bytes_per_s", "p50_ns",
                "p99_ns", "cpu_ns_per_op", "batch", "status")
BACKENDS = ("openssl", "aws-lc", "ring", "rustcrypto")


def _real_worker():
    # $CRYPTOPERF_WORKER first, as the CLI does: an installed worker from an older build must not
    # stand in for the one under test.
    env = os.environ.get(worker_path.ENV_VAR)
    for p in ([Path(env)] if env else []) + worker_path.candidates():
        if p.is_file() and os.access(p, os.X_OK):
            try:
                fetch_hello(p, timeout_s=30)
                return p
            except WorkerError:
                continue
    return None


REAL = _real_worker()
pytestmark = pytest.mark.skipif(REAL is None, reason="no built cryptoperf-worker answers hello")


@pytest.fixture
def real_env(tmp_path):
    return {"CRYPTOPERF_WORKER": str(REAL), "HOME": str(tmp_path)}


def speed_json(tmp_path, env, *args):
    res = run_subprocess("speed", "--json", "--seconds", "0.05", "--warmup", "0.01",
                         "--store", tmp_path / "s.sqlite", *args, env=env)
    assert res.code == 0, res.err
    assert "Traceback" not in res.err
    return json.loads(res.out)


def test_hello_lists_the_four_backends():
    hello = fetch_hello(REAL)
    assert hello.protocol == 1
    assert set(BACKENDS) <= set(hello.backend_names)
    assert "rsa2048-sign" in hello.ops and "sha256" in hello.ops


def test_speed_json_has_the_fields_for_all_four_backends(tmp_path, real_env):
    doc = speed_json(tmp_path, real_env, "--op", "sha256", "--op", "x25519-derive", "--size", "1024")
    assert doc["format_version"] == 1 and doc["kind"] == "speed"
    results = doc["results"]
    assert {r["backend"] for r in results} == set(BACKENDS)
    for r in results:
        for f in SPEED_FIELDS:
            assert f in r, (f, r)
        assert r["status"] in ("ok", "unsupported", "invalid", "failed")
    openssl = next(r for r in results if r["backend"] == "openssl" and r["op"] == "sha256")
    assert openssl["status"] == "ok", openssl["reason"]
    assert openssl["size_bytes"] == 1024 and openssl["ops_per_s"] > 0 and openssl["bytes_per_s"] > 0
    assert openssl["p50_ns"] > 0 and openssl["p99_ns"] >= openssl["p50_ns"] and openssl["batch"] >= 1
    assert openssl["histogram"].startswith("HISTF")
    kx = next(r for r in results if r["backend"] == "openssl" and r["op"] == "x25519-derive")
    assert kx["status"] != "ok" or kx["bytes_per_s"] is None


def test_speed_table(tmp_path, real_env):
    res = run_subprocess("speed", "-b", "openssl", "-o", "sha256", "--seconds", "0.05", "--warmup", "0",
                         "--store", tmp_path / "s.sqlite", env=real_env)
    assert res.code == 0, res.err
    assert "cryptoperf speed" in res.out and "sha256" in res.out and "ops/s" in res.out


SUBSECOND = """\
[study]
name = "subsecond"
baseline = "sha256"
backends = ["openssl"]
repetitions = 2
seconds = 0.05
warmup_s = 0.01
timeout_s = 30

[[configuration]]
name = "sha256"
hash = "sha256"

[[configuration]]
name = "sha512"
hash = "sha512"

[[operation]]
label = "hash"
op = "{hash}"
sizes = [1024, 16384]
"""


def test_subsecond_study_on_openssl(tmp_path, real_env):
    study = tmp_path / "s.toml"
    study.write_text(SUBSECOND)
    res = run_subprocess("study", study, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out",
                         env=real_env)
    assert res.code == 0, res.err
    assert "performance delta vs baseline" in res.out and "noise across repetitions" in res.out
    (path,) = (tmp_path / "out").glob("subsecond-*.json")
    doc = json.loads(path.read_text())
    assert doc["status"] == "complete" and len(doc["runs"]) == 8
    assert all(r["status"] == "ok" for r in doc["runs"]), [r["reason"] for r in doc["runs"]]
    assert len(doc["deltas"]) == 2
    for d in doc["deltas"]:
        assert d["status"] == "ok"
        assert d["latency"]["ci_low"] <= d["latency"]["ratio"] <= d["latency"]["ci_high"]
        assert d["latency_verdict"]["kind"] in ("slower", "faster", "no significant difference",
                                                "too noisy to tell")
    assert doc["host"]["libraries"]["openssl"]["library"] == "OpenSSL"


MOCK_STUDY = """\
[study]
name = "mock"
baseline = "a"
backends = ["mock:2", "mock:crash", "mock:hang"]
repetitions = 2
seconds = 0.05
warmup_s = 0
timeout_s = 2

[[configuration]]
name = "a"
[[configuration]]
name = "b"

[[operation]]
op = "sha256"
sizes = [100]
"""


def test_crashing_and_hanging_real_worker(tmp_path, real_env):
    study = tmp_path / "m.toml"
    study.write_text(MOCK_STUDY)
    res = run_subprocess("study", study, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out",
                         env=real_env)
    assert res.code == 0, res.err
    (path,) = (tmp_path / "out").glob("mock-*.json")
    doc = json.loads(path.read_text())
    by_backend = {}
    for r in doc["runs"]:
        by_backend.setdefault(r["backend"], set()).add(r["status"])
    assert by_backend == {"mock:2": {"ok"}, "mock:crash": {"failed"}, "mock:hang": {"failed"}}
    crash = next(r for r in doc["runs"] if r["backend"] == "mock:crash")
    assert "worker crashed" in crash["reason"] and crash["stderr_tail"]
    hang = next(r for r in doc["runs"] if r["backend"] == "mock:hang")
    assert hang["reason"].startswith("timeout:")
    deltas = {d["backend"]: d for d in doc["deltas"]}
    assert deltas["mock:2"]["status"] == "ok" and deltas["mock:crash"]["status"] == "n/a"


def test_unknown_op_with_real_worker(tmp_path, real_env):
    res = run_subprocess("speed", "--op", "rsa1024-sign", env=real_env)
    assert_one_line_error(res, "unknown operation 'rsa1024-sign'", "known: sha1", code=2)


PQ_OPS = ("ml-kem-768-keygen", "ml-kem-1024-decaps", "ml-dsa-65-sign", "ml-dsa-44-verify", "x25519-keygen",
          "x25519mlkem768-encaps", "x25519mlkem768-decaps")


def test_hello_lists_the_post_quantum_ops():
    hello = fetch_hello(REAL)
    for op in PQ_OPS + ("ml-kem-512-encaps", "ml-dsa-87-keygen", "x25519mlkem768-keygen"):
        assert op in hello.ops, op


def test_post_quantum_speed_on_the_real_worker(tmp_path, real_env):
    args = [a for op in PQ_OPS for a in ("--op", op)]
    doc = speed_json(tmp_path, real_env, *args, "--size", "64")
    by = {(r["backend"], r["op"]): r for r in doc["results"]}
    for backend in ("aws-lc", "rustcrypto"):
        for op in PQ_OPS:
            r = by[(backend, op)]
            assert r["status"] == "ok", (backend, op, r["reason"])
            assert r["ops_per_s"] > 0 and r["p50_ns"] > 0
    assert by[("aws-lc", "ml-dsa-65-sign")]["size_bytes"] == 64
    assert by[("rustcrypto", "ml-kem-768-keygen")]["bytes_per_s"] is None
    for backend in ("openssl", "ring"):
        r = by[(backend, "ml-dsa-65-sign")]
        assert r["status"] == "unsupported" and "ML-DSA" in r["reason"], r["reason"]
        assert by[(backend, "x25519mlkem768-encaps")]["status"] == "unsupported"
    assert by[("openssl", "x25519-keygen")]["status"] == "ok"


def test_speed_accepts_one_ml_dsa_op(tmp_path, real_env):
    res = run_subprocess("speed", "-b", "aws-lc", "--op", "ml-dsa-65-sign", "--seconds", "0.05", "--warmup",
                         "0", "--store", tmp_path / "s.sqlite", env=real_env)
    assert res.code == 0, res.err
    assert "ml-dsa-65-sign" in res.out and "unsupported" not in res.out
