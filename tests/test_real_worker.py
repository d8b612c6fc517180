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
    """The worker under test: $CRYPTOPERF_WORKER when set (so a fresh build is tested, not an
    older installed one that worker_path.candidates() would find first), else the first
    candidate that answers hello."""
    env = os.environ.get(worker_path.ENV_VAR)
    candidates = [Path(env)] if env else worker_path.candidates()
    for p in candidates:
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


def test_fake_worker_knows_the_real_operations():
    """The fake worker's operation list (which tests and the shipped-study check use) is the
    real worker's, in its order."""
    from fake_worker import DEFAULT_OPS
    assert list(fetch_hello(REAL).ops) == DEFAULT_OPS


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


# ------------------------------------------------------------------ CPU capability masks


def _unmasked_flags(backend):
    """The capability flags ``backend`` uses in an unmasked worker (from its hello)."""
    from cryptoperf import cpumask
    from cryptoperf.run.worker import WorkerClient
    with WorkerClient(REAL, env=cpumask.worker_env("baseline")) as w:
        hello = w.hello()
    caps = next(b for b in hello.backends if b["backend"] == backend)["capabilities"]
    return caps.get("flags") or {}


def _needs_aesni():
    if not _unmasked_flags("openssl").get("aes"):
        pytest.skip("this CPU has no AES-NI (or the library does not use it): nothing to mask")


def test_python_mask_table_matches_the_worker():
    from cryptoperf import cpumask
    hello = fetch_hello(REAL)
    assert {m["name"]: m["openssl_ia32cap"] for m in hello.raw["cpu_masks"]} == cpumask.MASKS


def test_no_aesni_clears_aes_and_pclmulqdq_in_openssl_and_aws_lc(tmp_path, real_env):
    _needs_aesni()
    doc = speed_json(tmp_path, real_env, "--op", "aes-128-gcm-seal", "--size", "16384", "--cpu", "no-aesni")
    by = {r["backend"]: r for r in doc["results"]}
    for backend in ("openssl", "aws-lc"):
        r = by[backend]
        assert r["status"] == "ok", r["reason"]
        assert r["cpu_mask"] == "no-aesni"
        caps = r["capabilities"]
        assert caps["maskable"] is True and caps["env"] == "~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0"
        flags = caps["flags"]
        assert flags["aes"] is False and flags["pclmulqdq"] is False, caps
        assert flags["vaes"] is False and flags["vpclmulqdq"] is False, caps
        assert {"aes", "pclmulqdq"} <= set(r["cpu_mask_cleared"])
        assert r["validation"]["kat"] == "pass"  # the software path is checked before it is timed
    for backend, library in (("ring", "ring"), ("rustcrypto", "RustCrypto")):
        assert by[backend]["status"] == "unsupported"
        assert by[backend]["reason"] == f"{library} has no runtime CPU capability mask"
        assert by[backend]["ops_per_s"] is None


def test_baseline_reports_the_unmasked_vector(tmp_path, real_env):
    doc = speed_json(tmp_path, {**real_env, "OPENSSL_ia32cap": "~0x0:~0x0"},  # stray value in the shell
                     "-b", "openssl", "-b", "aws-lc", "--op", "sha256")
    for r in doc["results"]:
        assert r["status"] == "ok", r["reason"]  # the orchestrator removed the stray variable
        assert r["cpu_mask"] == "baseline" and r["capabilities"]["env"] is None
        assert r["cpu_mask_cleared"] is None or r["cpu_mask_cleared"] == []


def _run_in(env_value, backend, mask):
    """A run of aes-128-gcm-seal asking for ``mask`` in a worker started with OPENSSL_ia32cap =
    ``env_value`` (None: unset) — bypassing the orchestrator, which would set it right."""
    from cryptoperf import cpumask
    from cryptoperf.run.worker import WorkerClient
    env = cpumask.worker_env("baseline")
    if env_value is not None:
        env["OPENSSL_ia32cap"] = env_value
    request = {"type": "run", "id": "x", "backend": backend, "op": "aes-128-gcm-seal",
               "seconds": 0.02, "warmup_s": 0, "cpu_mask": mask}
    with WorkerClient(REAL, env=env) as w:
        w.hello()
        return w.run(request, timeout_s=30)


@pytest.mark.parametrize("backend", ["openssl", "aws-lc"])
def test_a_mask_the_library_did_not_apply_is_invalid_and_untimed(backend):
    """Honest 'ignored mask' cases with the real libraries: the worker is asked to verify
    no-aesni while the library was given no mask, or a different one that leaves AES-NI on.
    Either way the library's own vector still has AES-NI, so the case must come back invalid
    and never be timed. (A library that receives the exact value and ignores it is covered
    by the worker's unit test of the check, cpu::tests.)"""
    _needs_aesni()
    for env_value in (None, "~0x0:~0x20000000:~0x0:~0x0:~0x0"):
        r = _run_in(env_value, backend, "no-aesni")
        assert r["status"] == "invalid", r
        assert r["reason"].startswith("capability mask not applied: "), r["reason"]
        assert "still uses aes, pclmulqdq" in r["reason"], r["reason"]
        assert r["capabilities"]["flags"]["aes"] is True
        assert "ops" not in r and "histogram" not in r


def test_baseline_with_a_mask_in_force_is_invalid():
    r = _run_in("~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0", "openssl", "baseline")
    assert r["status"] == "invalid" and "baseline asks for no mask" in r["reason"]
    ring = _run_in("~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0", "ring", "baseline")
    assert ring["status"] == "ok", ring  # ring reads no mask: nothing to contradict
