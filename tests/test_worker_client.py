"""The protocol client against the fake worker: hello, run, crash, hang, mismatch, lookup."""

import time

import pytest

from cryptoperf import plan, worker_path
from cryptoperf.errors import (ProtocolMismatch, WorkerCrashed, WorkerError, WorkerNotFound,
                               WorkerRequestError, WorkerTimeout)
from cryptoperf.run import local
from cryptoperf.run.worker import WorkerClient, fetch_hello


def req(backend="openssl", op="sha256", size=1024, rid="openssl/sha256/1024/A#1", seconds=0.01):
    return {"type": "run", "id": rid, "backend": backend, "op": op, "params": {"size_bytes": size},
            "threads": 1, "warmup_s": 0, "seconds": seconds, "batch": None}


def test_hello_and_run(fake_worker):
    path = fake_worker({"latency_ns": {"sha256": 500}})
    with WorkerClient(path) as w:
        hello = w.hello()
        assert hello.protocol == 1 and "openssl" in hello.backend_names and "sha256" in hello.ops
        assert hello.library_versions()["openssl"] == "OPENSSL fake-1.0"
        result = w.run(req(), timeout_s=10)
    assert result["status"] == "ok" and result["id"] == "openssl/sha256/1024/A#1"
    out = local.outcome_from_result(plan.Run(plan.Cell("A", "openssl", "h", "sha256"), 1, 0), result)
    assert out.ok and out.latency.p50_ns == 500 and out.throughput.ops_per_s == pytest.approx(2e6)


def test_error_answer_raises_request_error(fake_worker):
    with WorkerClient(fake_worker()) as w:
        w.hello()
        with pytest.raises(WorkerRequestError) as e:
            w.run(req(backend="nope"), timeout_s=10)
        assert e.value.code == "unknown_backend" and "known: openssl" in str(e.value)
        # the worker keeps going after an error
        assert w.run(req(), timeout_s=10)["status"] == "ok"


def test_crash_reports_signal_and_stderr_tail(fake_worker):
    with pytest.raises(WorkerCrashed) as e:
        with WorkerClient(fake_worker()) as w:
            w.hello()
            w.run(req(backend="mock:crash"), timeout_s=10)
    assert "SIGABRT" in str(e.value) and "crashing on purpose" in str(e.value)
    assert "crashing on purpose" in e.value.stderr_tail
    assert w._proc.poll() is not None


def test_hang_times_out_and_kills(fake_worker):
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as e:
        with WorkerClient(fake_worker()) as w:
            w.hello()
            w.run(req(backend="mock:hang"), timeout_s=1.0)
    assert time.monotonic() - t0 < 10
    assert e.value.timeout_s == 1.0 and "hanging on purpose" in e.value.stderr_tail
    assert w._proc.poll() is not None  # killed


def test_protocol_mismatch_is_refused(fake_worker):
    with pytest.raises(ProtocolMismatch, match="speaks protocol 2"):
        fetch_hello(fake_worker({"protocol": 2}))


def test_garbage_on_stdout_is_a_worker_error(tmp_path):
    bad = tmp_path / "bad-worker"
    bad.write_text("#!/bin/sh\necho 'hello world'\nsleep 5\n")
    bad.chmod(0o755)
    with pytest.raises(WorkerError, match="not JSON"):
        fetch_hello(bad)


def test_worker_that_exits_at_once(tmp_path):
    bad = tmp_path / "dead-worker"
    bad.write_text("#!/bin/sh\necho 'missing library libfoo.so' >&2\nexit 127\n")
    bad.chmod(0o755)
    with pytest.raises(WorkerCrashed) as e:
        fetch_hello(bad)
    assert "missing library libfoo.so" in str(e.value)


def test_execute_one_turns_failures_into_failed_outcomes(fake_worker):
    path = fake_worker()
    settings = plan.Settings(seconds=0.01, warmup_s=0, threads=1, timeout_s=1.0)
    crash = local.execute_one(path, plan.Run(plan.Cell("A", "mock:crash", "h", "sha256", {}, 64), 1, 0), settings)
    assert crash.status == "failed" and "worker crashed" in crash.reason and "crashing" in crash.stderr_tail
    hang = local.execute_one(path, plan.Run(plan.Cell("A", "mock:hang", "h", "sha256", {}, 64), 1, 0), settings)
    assert hang.status == "failed" and hang.reason.startswith("timeout:")
    refused = local.execute_one(path, plan.Run(plan.Cell("A", "nope", "h", "sha256"), 1, 0), settings)
    assert refused.status == "failed" and "unknown_backend" in refused.reason
    ok = local.execute_one(path, plan.Run(plan.Cell("A", "openssl", "h", "sha256"), 1, 0), settings)
    assert ok.ok and ok.started_at.endswith("Z")


def test_unsupported_and_invalid_are_answers(fake_worker):
    path = fake_worker({"unsupported": {"ring/sha1": "ring has no SHA-1 digest"},
                        "invalid": {"openssl/sha1": "KAT failed"}})
    settings = plan.Settings(seconds=0.01, warmup_s=0, threads=1, timeout_s=5)
    u = local.execute_one(path, plan.Run(plan.Cell("", "ring", "sha1", "sha1"), 1, 0), settings)
    assert (u.status, u.reason) == ("unsupported", "ring has no SHA-1 digest")
    i = local.execute_one(path, plan.Run(plan.Cell("", "openssl", "sha1", "sha1"), 1, 0), settings)
    assert (i.status, i.reason) == ("invalid", "KAT failed")


def test_find_worker_env_and_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("CRYPTOPERF_WORKER", str(tmp_path / "nope"))
    with pytest.raises(WorkerNotFound, match="CRYPTOPERF_WORKER=.*not an executable"):
        worker_path.find_worker()
    monkeypatch.delenv("CRYPTOPERF_WORKER")
    monkeypatch.setattr(worker_path, "candidates", lambda build="default": [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(WorkerNotFound, match=r"reinstall with `pip install .` or set CRYPTOPERF_WORKER"):
        worker_path.find_worker()
    exe = tmp_path / "b"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert worker_path.find_worker() == exe


def test_candidates_order():
    c = worker_path.candidates()
    import sysconfig
    assert c[0].parent == __import__("pathlib").Path(sysconfig.get_path("scripts"))
    assert {p.parent.name for p in c[-2:]} == {"release", "debug"}
