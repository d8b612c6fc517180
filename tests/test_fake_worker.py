"""The tests' fake worker has the real worker's rules: its fixture (tests/fixtures/worker-hello.json)
is a snapshot of the real worker's hello, and it refuses what the real worker refuses, with the
same error code. Skipped when no real worker is built — failed instead under
CRYPTOPERF_REQUIRE_WORKER=1 (set by .ci/run)."""

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import WORKER_HELLO, need_real_worker
from cryptoperf import cpumask
from cryptoperf.errors import WorkerRequestError
from cryptoperf.run.worker import WorkerClient
from real_workers import find

REAL, WHY = find()
FIXTURES = Path(__file__).with_name("fixtures")
LIMITS = WORKER_HELLO["limits"]


def _refresh_module():
    spec = importlib.util.spec_from_file_location("refresh_worker_hello", FIXTURES / "refresh_worker_hello.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _need_the_real_worker():
    need_real_worker(REAL, WHY)


def test_the_fixture_is_the_real_workers_hello():
    """The rules the fake worker (and worker_rules()) use are the real worker's, in its order."""
    refresh = _refresh_module()
    snap = refresh.snapshot(str(REAL))
    assert set(snap) == set(refresh.FIELDS) and set(WORKER_HELLO) == set(refresh.FIELDS)
    differ = [k for k in refresh.FIELDS if snap[k] != WORKER_HELLO[k]]
    assert not differ, (f"tests/fixtures/worker-hello.json differs from the hello of {REAL} in "
                        f"{', '.join(differ)}; if the worker changed on purpose, refresh it with "
                        f"`python3 tests/fixtures/refresh_worker_hello.py {REAL}` and commit it")
    # the order matters too (worker_rules().ops, the fake's hello): compare the JSON text
    assert json.dumps(snap, sort_keys=True) == json.dumps(WORKER_HELLO, sort_keys=True), (
        f"refresh with `python3 tests/fixtures/refresh_worker_hello.py {REAL}`")


def _request(**kw):
    req = {"type": "run", "id": "openssl/sha256/64/A#1", "backend": "openssl", "op": "sha256",
           "params": {"size_bytes": 64}, "threads": 1, "warmup_s": 0, "seconds": 0.01, "batch": None}
    req.update(kw)
    return req


#: Requests the real worker refuses; the fake must refuse each with the same error code.
REFUSED = {
    "warmup above max_warmup_s": _request(warmup_s=LIMITS["max_warmup_s"] + 1),
    "seconds above max_seconds": _request(seconds=LIMITS["max_seconds"] + 1),
    "threads above max_threads": _request(threads=LIMITS["max_threads"] + 1),
    "a digest on sha256": _request(params={"size_bytes": 64, "digest": "sha256"}),
    "an unknown digest": _request(op="rsa2048-sign", params={"digest": "md5"}),
    "an unknown padding": _request(op="rsa2048-sign", params={"padding": "oaep"}),
    "a padding on ecdsa": _request(op="ecdsa-p256-sign", params={"padding": "pss"}),
    "a size on x25519": _request(op="x25519-derive", params={"size_bytes": 64}),
    "size 0": _request(params={"size_bytes": 0}),
    "size above max_size_bytes": _request(params={"size_bytes": LIMITS["max_size_bytes"] + 1}),
    "batch 0": _request(batch=0),
    "batch above max_batch": _request(batch=LIMITS["max_batch"] + 1),
    "an unknown backend": _request(backend="boringssl"),
    "an unknown op": _request(op="sha257"),
    "an unknown cpu_mask": _request(cpu_mask="no-sha"),
    "a malformed cpu_vector_unmasked": _request(cpu_mask="baseline", cpu_vector_unmasked="fffa:0x0"),
    "cpu_vector_unmasked without cpu_mask": _request(cpu_vector_unmasked="0x1:0x0"),
    "negative warmup": _request(warmup_s=-1),
    "zero seconds": _request(seconds=0),
    "zero threads": _request(threads=0),
    # a level of a kind the workload's spec does not take, or above the hello's limits
    "a job level on a time workload": _request(op="tls-handshake", backend="aws-lc", params={"load": "targets:3"}),
    "a time level on a job": _request(op="fleet-job", backend="aws-lc", params={"load": "closed:1"}),
    "more connections than max_concurrency": _request(
        op="tls-handshake", backend="aws-lc", params={"load": f"closed:{LIMITS['max_concurrency'] + 1}"}),
    "more targets than max_targets": _request(
        op="fleet-job", backend="aws-lc", params={"load": f"targets:{LIMITS['max_targets'] + 1}"}),
}

#: Requests both accept (the boundaries included), and answer with the same status.
ACCEPTED = {
    "sha256": _request(),
    "the largest batch": _request(batch=LIMITS["max_batch"], seconds=0.001),
    "rsa with digest and padding": _request(op="rsa2048-verify", params={"digest": "sha384", "padding": "pss"}),
    "x25519 without a size": _request(op="x25519-derive", params={}),
    "baseline": _request(cpu_mask="baseline"),
    "ring cannot be masked": _request(backend="ring", cpu_mask="no-aesni"),
}


def _answer(path, request):
    """``("error", code)`` or ``("result", status)`` of ``request`` in a fresh worker at ``path``,
    started under baseline's OPENSSL_ia32cap as the orchestrator starts it."""
    with WorkerClient(path, env=cpumask.worker_env("baseline")) as w:
        w.hello()
        try:
            return ("result", w.run(request, timeout_s=60).status)
        except WorkerRequestError as e:
            return ("error", e.code)


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_fake_refuses_what_the_real_worker_refuses(fake_worker, case):
    real = _answer(REAL, REFUSED[case])
    assert real[0] == "error", (case, real)  # else this case belongs in ACCEPTED
    assert _answer(fake_worker(), REFUSED[case]) == real, case


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_the_fake_accepts_what_the_real_worker_accepts(fake_worker, case):
    real = _answer(REAL, ACCEPTED[case])
    assert real[0] == "result", (case, real)
    assert _answer(fake_worker(), ACCEPTED[case]) == real, case
