"""End to end against the real cryptoperf-worker: skipped when no built worker answers hello,
failed instead under CRYPTOPERF_REQUIRE_WORKER=1 (set by .ci/run, which installs it).

Sub-second budgets; nothing here asserts on how fast anything is.
"""

import json

import pytest

from conftest import assert_one_line_error, need_real_worker, run_subprocess
from cryptoperf import cpumask
from cryptoperf.run.worker import WorkerClient, fetch_hello, unmasked_env
from cryptoperf.store.db import FORMAT_VERSION
from real_workers import find

SPEED_FIELDS = ("backend", "library_version", "op", "size_bytes", "ops_per_s", "bytes_per_s", "p50_ns",
                "p99_ns", "process_cpu_ns_per_op", "batch", "status")
BACKENDS = ("openssl", "aws-lc", "ring", "rustcrypto")


#: The worker under test (real_workers.find: $CRYPTOPERF_WORKER when set, so a fresh build is
#: tested, else the first candidate that answers hello), or None and why.
REAL, WHY = find()


@pytest.fixture(autouse=True)
def _need_the_real_worker():
    need_real_worker(REAL, WHY)


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
    assert doc["format_version"] == FORMAT_VERSION and doc["kind"] == "speed"
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


def analysed(doc):
    """A study document's repetitions that count: all but those superseded by their re-run
    (a repetition disturbed by steal or other load runs again at once, attempt 2)."""
    superseded = [r for r in doc["repetitions"] if r["superseded"]]
    for r in superseded:
        assert r["disturbed"] and any(a["cell"] == r["cell"] and a["block"] == r["block"]
                                      and a["attempt"] == r["attempt"] + 1 for a in doc["repetitions"]), r
    return [r for r in doc["repetitions"] if not r["superseded"]]


SUBSECOND = """\
[study]
name = "subsecond"
baseline = "sha256"
backends = ["openssl"]
repetitions = 3
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
    # 4 cells (2 configurations x 2 sizes): one calibration repetition each, then 3 blocks
    # (besides any repetition the host disturbed, kept as superseded by its re-run)
    assert doc["status"] == "complete"
    runs = analysed(doc)
    assert sorted(r["block"] for r in runs) == [b for b in range(4) for _ in range(4)]
    assert all(r["status"] == "ok" for r in doc["repetitions"]), [r["reason"] for r in doc["repetitions"]]
    # every repetition of a group timed batches of one size, the one its calibration chose
    for size in (1024, 16384):
        blocks = [r for r in runs if r["size_bytes"] == size and r["block"] > 0]
        assert len({r["result"]["batch"] for r in blocks}) == 1 and blocks[0]["batch"] == blocks[0]["result"]["batch"]
    assert len(doc["deltas"]) == 2
    for d in doc["deltas"]:
        assert d["status"] == "ok" and d["blocks"] == 3
        assert d["latency"]["ci_low"] <= d["latency"]["ratio"] <= d["latency"]["ci_high"]
        assert d["verdict"]["kind"] in ("slower", "faster", "equivalent", "inconclusive")
        assert "latency_verdict" not in d and "throughput_verdict" not in d
    assert doc["host"]["libraries"]["openssl"]["library"] == "OpenSSL"


MOCK_STUDY = """\
[study]
name = "mock"
baseline = "a"
backends = ["mock:2", "mock:crash", "mock:hang"]
repetitions = 3
seconds = 0.05
warmup_s = 0
timeout_s = 1

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
    for r in doc["repetitions"]:
        by_backend.setdefault(r["backend"], set()).add(r["status"])
    assert by_backend == {"mock:2": {"ok"}, "mock:crash": {"failed"}, "mock:hang": {"failed"}}
    crash = next(r for r in doc["repetitions"] if r["backend"] == "mock:crash")
    assert "worker crashed" in crash["reason"] and crash["stderr_tail"]
    hang = next(r for r in doc["repetitions"] if r["backend"] == "mock:hang")
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


# ------------------------------------------------------------------ CPU capability masks

BASELINE_VALUE = cpumask.MASKS["baseline"]
NO_AESNI_VALUE = cpumask.MASKS["no-aesni"]
NO_SHANI_VALUE = cpumask.MASKS["no-shani"]
SHA_BIT = 1 << 29  # of the vector's second word (OPENSSL_ia32cap bit #64+29: SHA extensions)


def _hello_capabilities(backend):
    """``backend``'s capabilities in a worker started without OPENSSL_ia32cap (its hello)."""
    return next(b for b in fetch_hello(REAL).backends if b["backend"] == backend)["capabilities"]


def _needs_aesni():
    if not (_hello_capabilities("openssl").get("flags") or {}).get("aes"):
        pytest.skip("this CPU has no AES-NI (or the library does not use it): nothing to mask")


def _words(vector):
    """``0x<word0>:0x<word1>`` → (word0, word1)."""
    w0, w1 = vector.split(":")
    return int(w0, 16), int(w1, 16)


def test_python_mask_table_matches_the_worker():
    hello = fetch_hello(REAL)
    assert {m["name"]: m["openssl_ia32cap"] for m in hello.raw["cpu_masks"]} == cpumask.MASKS


def test_hello_reports_the_unmasked_vectors(monkeypatch):
    """fetch_hello starts the worker without OPENSSL_ia32cap, even with one in this process's
    environment, so the vectors hello reports are the libraries' own."""
    monkeypatch.setenv("OPENSSL_ia32cap", NO_AESNI_VALUE)
    hello = fetch_hello(REAL)
    by = {b["backend"]: b["capabilities"] for b in hello.backends}
    assert all(c["env"] is None for c in by.values()), by
    vectors = hello.unmasked_vectors()
    assert set(vectors) == {"openssl", "aws-lc"}  # ring and RustCrypto have no mask
    assert all(vectors[b] == by[b]["openssl_ia32cap"] for b in vectors)


def test_no_aesni_clears_aes_and_pclmulqdq_in_openssl_and_aws_lc(tmp_path, real_env):
    _needs_aesni()
    doc = speed_json(tmp_path, real_env, "--op", "aes-128-gcm-seal", "--size", "16384", "--cpu", "no-aesni")
    assert doc["settings"]["openssl_ia32cap"] == NO_AESNI_VALUE
    by = {r["backend"]: r for r in doc["results"]}
    for backend in ("openssl", "aws-lc"):
        r = by[backend]
        assert r["status"] == "ok", r["reason"]
        assert r["cpu_mask"] == "no-aesni"
        caps = r["capabilities"]
        assert caps["maskable"] is True and caps["env"] == NO_AESNI_VALUE
        flags = caps["flags"]
        assert flags["aes"] is False and flags["pclmulqdq"] is False, caps
        assert flags["vaes"] is False and flags["vpclmulqdq"] is False, caps
        assert {"aes", "pclmulqdq"} <= set(r["cpu_mask_cleared"])
        assert r["validation"]["kat"] == "pass"  # the software path is checked before it is timed
    for backend, library in (("ring", "ring"), ("rustcrypto", "RustCrypto")):
        assert by[backend]["status"] == "unsupported"
        assert by[backend]["reason"] == f"{library} has no runtime CPU capability mask"
        assert by[backend]["ops_per_s"] is None


def test_baseline_runs_under_its_clear_nothing_value(tmp_path, real_env):
    """Baseline's worker gets OPENSSL_ia32cap = baseline's value (a stray value in the shell is
    replaced, not inherited), and its libraries report the very vector they report without the
    variable: the worker checks that against the cpu_vector_unmasked the orchestrator sends,
    and would answer invalid otherwise."""
    doc = speed_json(tmp_path, {**real_env, "OPENSSL_ia32cap": "~0x0:~0x0"},  # stray value in the shell
                     "-b", "openssl", "-b", "aws-lc", "--op", "sha256")
    assert doc["settings"]["openssl_ia32cap"] == BASELINE_VALUE
    unmasked = fetch_hello(REAL).unmasked_vectors()
    for r in doc["results"]:
        assert r["status"] == "ok", r["reason"]
        assert r["cpu_mask"] == "baseline" and r["capabilities"]["env"] == BASELINE_VALUE
        assert r["capabilities"]["openssl_ia32cap"] == unmasked[r["backend"]]
        assert r["cpu_mask_cleared"] is None or r["cpu_mask_cleared"] == []


MASKED_STUDY = """\
[study]
name = "shani"
baseline = "base"
backends = ["openssl"]
repetitions = 3
seconds = 0.05
warmup_s = 0
timeout_s = 30

[[configuration]]
name = "base"

[[configuration]]
name = "sha-off"
cpu = "no-shani"

[[operation]]
op = "sha256"
sizes = [1024]
"""


def test_a_study_with_a_baseline_and_a_masked_configuration(tmp_path, real_env):
    """Every repetition (calibration and blocks) runs under its configuration's fixed-width
    value, baseline's included, and is measured: the worker found baseline's vector equal to
    the unmasked one from hello, and no-shani's equal to it less the SHA bit (it checks both
    against the request's cpu_vector_unmasked, and answers invalid when they differ)."""
    study = tmp_path / "shani.toml"
    study.write_text(MASKED_STUDY)
    res = run_subprocess("study", study, "--no-report", "--store", tmp_path / "s.sqlite",
                         "--out", tmp_path / "out", env=real_env)
    assert res.code == 0, res.err
    (path,) = (tmp_path / "out").glob("shani-*.json")
    doc = json.loads(path.read_text())
    assert doc["status"] == "complete"
    assert not list((tmp_path / "out").glob("*.html")) and not list((tmp_path / "out").glob("*.md"))
    assert all(r["status"] == "ok" for r in doc["repetitions"]), [r["reason"] for r in doc["repetitions"]]
    by = {"base": [], "sha-off": []}
    for r in doc["repetitions"]:  # superseded ones too: they ran under the same mask
        by[r["configuration"]].append(r)
    unmasked = fetch_hello(REAL).unmasked_vectors()["openssl"]
    for r in by["base"]:
        assert r["cpu"] == "baseline" and r["result"]["cpu_mask"] == "baseline"
        assert r["result"]["capabilities"]["env"] == BASELINE_VALUE  # set, not unset
        assert r["result"]["capabilities"]["openssl_ia32cap"] == unmasked
    w0, w1 = _words(unmasked)
    for r in by["sha-off"]:
        assert r["cpu"] == "no-shani" and r["result"]["cpu_mask"] == "no-shani"
        assert r["result"]["capabilities"]["env"] == NO_SHANI_VALUE
        assert _words(r["result"]["capabilities"]["openssl_ia32cap"]) == (w0, w1 & ~SHA_BIT)
        assert r["result"]["capabilities"]["flags"]["sha"] is False
    for name in by:  # calibration, then 3 blocks
        assert sorted(r["block"] for r in analysed(doc) if r["configuration"] == name) == [0, 1, 2, 3]
    (d,) = doc["deltas"]
    assert d["status"] == "ok" and d["cpu"] == "no-shani" and d["blocks"] == 3
    assert d["verdict"]["kind"] in ("slower", "faster", "equivalent", "inconclusive")


def _run_in(env_value, backend, mask, op="aes-128-gcm-seal", unmasked=None):
    """A run of ``op`` asking for ``mask`` in a worker started with OPENSSL_ia32cap =
    ``env_value`` (None: unset) — bypassing the orchestrator, which would set it right —
    with ``cpu_vector_unmasked`` = ``unmasked`` if given."""
    env = unmasked_env()
    if env_value is not None:
        env["OPENSSL_ia32cap"] = env_value
    request = {"type": "run", "id": "x", "backend": backend, "op": op,
               "seconds": 0.02, "warmup_s": 0, "cpu_mask": mask}
    if unmasked is not None:
        request["cpu_vector_unmasked"] = unmasked
    with WorkerClient(REAL, env=env) as w:
        w.hello()
        return w.run(request, timeout_s=30)


@pytest.mark.parametrize("backend", ["openssl", "aws-lc"])
def test_a_mask_the_library_did_not_apply_is_invalid_and_untimed(backend):
    """Honest 'ignored mask' cases with the real libraries: the worker is asked to verify
    no-aesni while the library was given no mask, baseline's value, or a different mask that
    leaves AES-NI on. Each time the library's own vector still has AES-NI, so the case must
    come back invalid and never be timed. (A library that receives the exact value and ignores
    it is covered by the worker's unit test of the check, cpu::tests.)"""
    _needs_aesni()
    for env_value in (None, BASELINE_VALUE, NO_SHANI_VALUE):
        r = _run_in(env_value, backend, "no-aesni")
        assert r.status == "invalid", r
        assert r.reason.startswith("capability mask not applied: "), r.reason
        assert "still uses aes, pclmulqdq" in r.reason, r.reason
        assert r.capabilities.flags["aes"] is True
        assert not {"ops", "histogram"} & r.raw.keys(), r  # never timed: no measurement field at all


def test_baseline_needs_exactly_its_own_value():
    """Baseline with a mask in force, with the variable unset or empty (OpenSSL then clears
    every capability), or with its value in the old short spelling, is not baseline: invalid,
    naming the variable's value. ring reads no mask: nothing to contradict."""
    for env_value, shown in ((NO_AESNI_VALUE, f"'{NO_AESNI_VALUE}'"), (None, "unset"), ("", "empty"),
                             ("~0x0:~0x0:~0x0:~0x0:~0x0", "'~0x0:~0x0:~0x0:~0x0:~0x0'")):
        r = _run_in(env_value, "openssl", "baseline", op="sha256")
        assert r.status == "invalid", (env_value, r)
        assert r.reason.startswith("capability mask not applied: "), r.reason
        assert shown in r.reason and f"not '{BASELINE_VALUE}' as baseline sets it" in r.reason, r.reason
        assert not {"ops", "histogram"} & r.raw.keys(), r  # never timed: no measurement field at all
    ring = _run_in(NO_AESNI_VALUE, "ring", "baseline", op="sha256")
    assert ring.status == "ok", ring


def test_baseline_checks_its_vector_against_the_unmasked_one():
    unmasked = fetch_hello(REAL).unmasked_vectors()["openssl"]
    ok = _run_in(BASELINE_VALUE, "openssl", "baseline", op="sha256", unmasked=unmasked)
    assert ok.status == "ok", ok
    assert ok.capabilities.openssl_ia32cap == unmasked
    w0, w1 = _words(unmasked)
    other = f"{w0 ^ 1:#x}:{w1:#x}"  # a vector the library does not use
    bad = _run_in(BASELINE_VALUE, "openssl", "baseline", op="sha256", unmasked=other)
    assert bad.status == "invalid" and "cpu_vector_unmasked" in bad.reason, bad
    assert not {"ops", "histogram"} & bad.raw.keys(), bad  # never timed
