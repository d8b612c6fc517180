"""The protocol client against the fake worker: hello, run, crash, hang, mismatch, lookup."""

import json
import time

import pytest

from conftest import WORKER_HELLO, fake_worker_script, worker_rules
from cryptoperf import builds, cpumask
from cryptoperf.errors import (ProtocolMismatch, WorkerCrashed, WorkerError, WorkerNotFound,
                               WorkerRequestError, WorkerTimeout)
from cryptoperf.model import Cell, Repetition, outcome_from_result
from cryptoperf.run import local
from cryptoperf.hello import LIMITS, WorkerRules
from cryptoperf.run.worker import WorkerClient, fetch_hello, unmasked_env
from cryptoperf.schedule import Settings


def rep(backend, op="sha256", size=None, config="A", block=1, label="h", **kw):
    """A repetition of one cell (the old ``plan.Run(plan.Cell(...), 1, 0)``)."""
    return Repetition(Cell(config, backend, label, op, {}, size, **kw), block)


def req(backend="openssl", op="sha256", size=1024, rid="openssl/sha256/1024/A#1", seconds=0.01):
    return {"type": "run", "id": rid, "backend": backend, "op": op, "params": {"size_bytes": size},
            "threads": 1, "warmup_s": 0, "seconds": seconds, "batch": None}


def test_hello_and_run(fake_worker):
    path = fake_worker({"latency_ns": {"sha256": 500}})
    with WorkerClient(path) as w:
        hello = w.hello()
        assert hello.protocol == 1 and "openssl" in hello.backend_names and "sha256" in hello.ops
        assert {b["backend"]: b["library_version"] for b in hello.backends}["openssl"] == "fake-1.0"
        result = w.run(req(), timeout_s=10)
    assert result.status == "ok" and result.id == "openssl/sha256/1024/A#1"
    out = outcome_from_result(rep("openssl"), result)
    assert out.ok and out.latency.p50_ns == 500 and out.throughput.ops_per_s == pytest.approx(2e6)
    assert out.cell.backend == "openssl" and out.repetition.block == 1


def test_hello_announces_the_real_workers_rules(fake_worker):
    """The fake's hello carries the real worker's rules (its fixture), which WorkerRules reads."""
    hello = fetch_hello(fake_worker())
    for key in ("ops", "op_params", "param_values", "limits", "cpu_masks"):
        assert hello.raw[key] == WORKER_HELLO[key], key
    rules = hello.rules
    assert rules.backends == ("openssl", "aws-lc", "ring", "rustcrypto") and rules.ops == tuple(WORKER_HELLO["ops"])
    assert rules.takes_message("sha256") and not rules.takes_message("x25519-derive")
    assert rules.takes("rsa2048-sign", "digest") and not rules.takes("sha256", "digest")
    assert rules.default_size_bytes["sha256"] == 1024 and rules.default_size_bytes["x25519-derive"] is None
    assert rules.param_values["padding"] == ("pkcs1", "pss")
    assert rules.limits == {k: float(WORKER_HELLO["limits"][k]) for k in LIMITS}
    assert rules.limits["max_concurrency"] == 1024 and rules.limits["open_threads"] == 32


def test_each_workload_is_known_by_its_spec_only():
    """Every op the hello marks as a workload has a typed spec; the traits the orchestrator
    reads are the hello's, whatever the workload's name."""
    rules = worker_rules()
    marked = {op for op, e in WORKER_HELLO["op_params"].items() if e.get("workload")}
    assert set(rules.workloads) == marked
    for op, spec in rules.workloads.items():
        entry = WORKER_HELLO["op_params"][op]
        assert spec.name == op and spec.levels == tuple(entry["levels"]) and spec.job == entry["job"]
        assert spec.defaults == entry["defaults"] and rules.op_defaults[op] == entry["defaults"]
        assert spec.sizing.memory.base_bytes == entry["sizing"]["memory"]["base_bytes"]
        assert spec.file_params == tuple(entry["file_params"])
        assert spec.connection_params == tuple(entry["connection_params"])
        assert spec.server_under_test == entry.get("server_under_test")
        assert "metrics" not in entry  # the figures and their directions are the analysis'
    # the traits the orchestrator once keyed by name are announced
    served = [op for op, s in rules.workloads.items() if s.server_under_test]
    assert served and all(rules.workloads[op].file_params for op in served)
    assert any(s.connection_params for s in rules.workloads.values() if s.job)
    # a renamed workload keeps every trait: nothing is keyed by its name
    hello = json.loads(json.dumps(WORKER_HELLO))
    job = next(op for op, s in rules.workloads.items() if s.job)
    hello["op_params"]["renamed"] = hello["op_params"].pop(job)
    hello["ops"] = [("renamed" if o == job else o) for o in hello["ops"]]
    renamed = WorkerRules.from_hello(dict(hello, backends=[{"backend": "openssl"}])).workloads["renamed"]
    assert renamed.job and renamed.calibration_load == rules.workloads[job].calibration_load


def test_rules_of_a_worker_too_old_to_announce_them():
    old = {k: v for k, v in WORKER_HELLO.items() if k != "limits"}
    with pytest.raises(ProtocolMismatch, match="lacks its operation rules or limits .*older than the "
                                               "orchestrator; rebuild it with `pip install .`"):
        WorkerRules.from_hello(dict(old, backends=[{"backend": "openssl"}]))
    # a worker from before the workload specs and the load limits: refused, one line each
    for missing in ("levels", "sizing", "file_params", "transaction"):
        hello = json.loads(json.dumps(WORKER_HELLO))
        del hello["op_params"]["tls-handshake"][missing]
        with pytest.raises(ProtocolMismatch) as e:
            WorkerRules.from_hello(dict(hello, backends=[{"backend": "openssl"}]))
        assert str(e.value) == (f"the worker's hello lacks the spec of workload 'tls-handshake' (no field "
                                f"'{missing}'): this worker is older than the orchestrator; rebuild it with "
                                "`pip install .`")
    hello = json.loads(json.dumps(WORKER_HELLO))
    del hello["limits"]["max_concurrency"]
    with pytest.raises(ProtocolMismatch, match="no field 'max_concurrency'.*older than the orchestrator"):
        WorkerRules.from_hello(dict(hello, backends=[{"backend": "openssl"}]))


def test_an_old_worker_is_refused_at_hello(fake_worker, tmp_path):
    """A worker whose hello has no workload specs is refused when it says hello, as a worker of
    another protocol is: one line, and the process is gone."""
    hello = json.loads(json.dumps(WORKER_HELLO))
    for entry in hello["op_params"].values():
        for key in ("levels", "sizing", "file_params", "transaction", "modes", "default_mode", "server",
                    "needs_dir", "job", "calibration_load", "bytes_per_tx_param", "file_bytes_param"):
            entry.pop(key, None)
    old = tmp_path / "old-hello.json"
    old.write_text(json.dumps(hello))
    path = fake_worker_script(tmp_path / "old-worker", FAKE_WORKER_HELLO=str(old))
    with pytest.raises(ProtocolMismatch, match=r"^worker .*old-worker: the worker's hello lacks the spec of "
                                               r"workload .*rebuild it with `pip install .`$"):
        fetch_hello(path)


def test_fetch_hello_starts_the_worker_without_a_mask(fake_worker, monkeypatch):
    """hello's capability vectors must be the unmasked ones (what baseline's are checked
    against), so fetch_hello removes a stray OPENSSL_ia32cap; repetitions set one (every mask,
    baseline included)."""
    monkeypatch.setenv("OPENSSL_ia32cap", "~0x0:~0x0")
    assert "OPENSSL_ia32cap" not in unmasked_env()
    assert unmasked_env({"PATH": "/bin", "OPENSSL_ia32cap": "~0x0"}) == {"PATH": "/bin"}
    hello = fetch_hello(fake_worker())
    by = {b["backend"]: b["capabilities"] for b in hello.backends}
    assert by["openssl"]["env"] is None and by["ring"]["env"] is None
    assert hello.unmasked_vectors() == {"openssl": by["openssl"]["openssl_ia32cap"],
                                        "aws-lc": by["aws-lc"]["openssl_ia32cap"]}  # ring: not maskable


def test_error_answer_raises_request_error(fake_worker):
    with WorkerClient(fake_worker()) as w:
        w.hello()
        with pytest.raises(WorkerRequestError) as e:
            w.run(req(backend="nope"), timeout_s=10)
        assert e.value.code == "unknown_backend" and "known: openssl" in str(e.value)
        # the worker keeps going after an error
        assert w.run(req(), timeout_s=10).status == "ok"


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
    settings = Settings(seconds=0.01, warmup_s=0, threads=1, timeout_s=1.0)
    crash = local.execute_one(path, rep("mock:crash", size=64), settings)
    assert crash.status == "failed" and "worker crashed" in crash.reason and "crashing" in crash.stderr_tail
    hang = local.execute_one(path, rep("mock:hang", size=64), settings)
    assert hang.status == "failed" and hang.reason.startswith("timeout:")
    refused = local.execute_one(path, rep("nope"), settings)
    assert refused.status == "failed" and "unknown_backend" in refused.reason
    ok = local.execute_one(path, rep("openssl"), settings)
    assert ok.ok and ok.started_at.endswith("Z") and ok.finished_at >= ok.started_at


def test_execute_one_starts_the_worker_under_the_cells_mask(fake_worker, monkeypatch):
    """Every repetition's worker starts with OPENSSL_ia32cap = its mask's value, baseline's
    included (a stray value in this process's environment is replaced), and the request carries
    the unmasked vector for the worker to check its library's against."""
    monkeypatch.setenv("OPENSSL_ia32cap", "~0x0:~0x0")
    path = fake_worker()
    settings = Settings(seconds=0.01, warmup_s=0, threads=1, timeout_s=5)
    vectors = fetch_hello(path).unmasked_vectors()
    unmasked = {("default", b): v for b, v in vectors.items()}
    for mask in cpumask.NAMES:
        o = local.execute_one(path, rep("openssl", cpu=mask), settings, unmasked)
        assert o.ok, (mask, o.reason)
        assert o.result.cpu_mask == mask and o.result.capabilities.env == cpumask.MASKS[mask]
    # a baseline whose library reports another vector than the unmasked one is not measured
    wrong = {("default", "openssl"): "0x1:0x0"}
    o = local.execute_one(path, rep("openssl"), settings, wrong)
    assert o.status == "invalid" and o.reason.startswith("capability mask not applied: "), o.reason


def test_execute_asks_for_the_groups_batch(fake_worker):
    path = fake_worker({"latency_ns": {"sha256": 100}})
    settings = Settings(seconds=0.01, warmup_s=0, threads=1, timeout_s=5)
    calibrated, batched = local.execute([rep("openssl", block=0), Repetition(rep("openssl").cell, 1, batch=7)],
                                        settings, path)
    assert calibrated.ok and calibrated.result.batch == 128  # the worker's choice: ≥ 10 µs per sample
    assert batched.ok and batched.result.batch == 7 and batched.repetition.batch == 7


def test_unsupported_and_invalid_are_answers(fake_worker):
    path = fake_worker({"unsupported": {"ring/sha1": "ring has no SHA-1 digest"},
                        "invalid": {"openssl/sha1": "KAT failed"}})
    settings = Settings(seconds=0.01, warmup_s=0, threads=1, timeout_s=5)
    u = local.execute_one(path, rep("ring", "sha1", config="", label="sha1"), settings)
    assert (u.status, u.reason) == ("unsupported", "ring has no SHA-1 digest")
    i = local.execute_one(path, rep("openssl", "sha1", config="", label="sha1"), settings)
    assert (i.status, i.reason) == ("invalid", "KAT failed")


def test_find_worker_env_and_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("CRYPTOPERF_WORKER", str(tmp_path / "nope"))
    with pytest.raises(WorkerNotFound, match="CRYPTOPERF_WORKER=.*not an executable"):
        builds.find_worker()
    monkeypatch.delenv("CRYPTOPERF_WORKER")
    monkeypatch.setattr(builds, "candidates", lambda build="default": [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(WorkerNotFound, match=r"reinstall with `pip install .` or set CRYPTOPERF_WORKER"):
        builds.find_worker()
    exe = tmp_path / "b"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert builds.find_worker() == exe


def test_candidates_order():
    c = builds.candidates()
    import sysconfig
    assert c[0].parent == __import__("pathlib").Path(sysconfig.get_path("scripts"))
    assert {p.parent.name for p in c[-2:]} == {"release", "debug"}


def test_need_real_worker_skips_or_fails(monkeypatch, tmp_path):
    """A real-worker test skips when its worker is missing, or fails under the build's
    CRYPTOPERF_REQUIRE_* variable (.ci/run sets both), saying why it is missing."""
    from conftest import need_real_worker
    from real_workers import find
    assert need_real_worker(tmp_path, "unused") == tmp_path
    for var in ("CRYPTOPERF_REQUIRE_WORKER", "CRYPTOPERF_REQUIRE_FIPS"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no worker here"):
        need_real_worker(None, "no worker here")
    monkeypatch.setenv("CRYPTOPERF_REQUIRE_WORKER", "1")
    with pytest.raises(pytest.fail.Exception, match="CRYPTOPERF_REQUIRE_WORKER=1 but no worker here"):
        need_real_worker(None, "no worker here")
    with pytest.raises(pytest.skip.Exception):  # each build has its own variable
        need_real_worker(None, "no FIPS worker", require="CRYPTOPERF_REQUIRE_FIPS")
    monkeypatch.setenv("CRYPTOPERF_REQUIRE_FIPS", "1")
    with pytest.raises(pytest.fail.Exception, match="CRYPTOPERF_REQUIRE_FIPS=1 but no FIPS worker"):
        need_real_worker(None, "no FIPS worker", require="CRYPTOPERF_REQUIRE_FIPS")
    # what find says when the variable points nowhere (uncached: find caches per build)
    monkeypatch.setenv("CRYPTOPERF_WORKER", str(tmp_path / "none"))
    assert find.__wrapped__() == (None, f"the real default worker is unavailable: CRYPTOPERF_WORKER="
                                        f"{tmp_path / 'none'} is not an executable file")
