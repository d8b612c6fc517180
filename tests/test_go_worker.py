"""The Go worker (worker-go/, first part of issue 39): built with the Go toolchain, it speaks the
worker protocol for the `go` backend's primitives — every result is valid against the JSON
Schema the Rust worker's results are (tests/fixtures/worker-result.schema.json), its histogram
decodes with the orchestrator's own decoder and agrees with its counters, and every operation
passes its known answer before it is timed. Needs Go (CRYPTOPERF_REQUIRE_GO=1: fail, not skip,
without it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cryptoperf.stats.figures import decode_histogram

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "worker-result.schema.json").read_text())


@pytest.fixture(scope="module")
def go_worker(tmp_path_factory) -> Path:
    go = shutil.which("go")
    if go is None:
        if os.environ.get("CRYPTOPERF_REQUIRE_GO") == "1":
            pytest.fail("go is not installed and CRYPTOPERF_REQUIRE_GO=1")
        pytest.skip("go is not installed")
    out = tmp_path_factory.mktemp("go") / "cryptoperf-worker-go"
    res = subprocess.run([go, "build", "-o", str(out), "."], cwd=ROOT / "worker-go", capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return out


def ask(worker: Path, *requests: dict) -> list[dict]:
    lines = "".join(json.dumps(r) + "\n" for r in ({"type": "hello", "protocol": 1}, *requests, {"type": "bye"}))
    res = subprocess.run([str(worker)], input=lines, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def test_each_operation_is_measured_in_the_protocols_result(go_worker):
    jsonschema = pytest.importorskip("jsonschema")
    hello, *_ = ask(go_worker)
    assert hello["type"] == "hello" and hello["protocol"] == 1
    (backend,) = hello["backends"]
    assert backend["backend"] == "go" and backend["library"] == "Go" and backend["library_version"].startswith("go1.")
    ops = hello["ops"]
    assert {"sha256", "aes-128-gcm-seal", "chacha20-poly1305-seal", "x25519-derive", "ed25519-sign",
            "ecdsa-p256-sign"} <= set(ops)
    runs = [{"type": "run", "id": op, "backend": "go", "op": op, "seconds": 0.02, "warmup_s": 0.0} for op in ops]
    _, *results = ask(go_worker, *runs)
    for r in results:
        jsonschema.Draft202012Validator(SCHEMA).validate(r)
        assert r["status"] == "ok", r
        assert r["validation"]["kat"] == "pass" and r["validation"]["kat_source"], r["validation"]
        hist = decode_histogram(r["histogram"])
        assert hist.get_total_count() == r["ops"] > 0  # every operation recorded once
        p50 = hist.get_value_at_percentile(50)
        # the histogram's operations fit in the window the counters give (one thread)
        assert 0 < p50 * r["ops"] <= r["wall_ns"] * 1.05, (r["op"], p50, r["ops"], r["wall_ns"])
        assert 0 < r["cpu_ns_total"] <= r["wall_ns"] * 1.05
    sized = {r["op"]: r for r in results}
    assert sized["sha256"]["params"] == {"size_bytes": 1024} and sized["x25519-derive"]["params"] == {}


def test_refusals_are_the_protocols(go_worker):
    _, bad, other, masked = ask(
        go_worker,
        {"type": "run", "id": "a", "backend": "go", "op": "sha256", "params": {"digest": "md5"}},
        {"type": "run", "id": "b", "backend": "openssl", "op": "sha256"},
        {"type": "run", "id": "c", "backend": "go", "op": "sha256", "cpu_mask": "no-aesni"})
    assert bad == {"type": "error", "code": "bad_params", "message": "unknown parameter 'digest' for sha256"}
    assert other["status"] == "unsupported" and "one backend, go" in other["reason"]
    assert masked["status"] == "unsupported" and "no runtime CPU capability mask" in masked["reason"]


def test_go_fips_mode_is_reported_and_what_it_refuses_is_unsupported(go_worker, monkeypatch):
    """GODEBUG=fips140=only: Go's FIPS 140-3 module on and enforced; an algorithm it does not
    approve (X25519) is unsupported with the module's reason, an approved one (SHA-256) is
    measured in FIPS mode; without it, FIPS mode is off."""
    hello, *_ = ask(go_worker)
    assert hello["backends"][0]["fips140"]["enabled"] is False
    monkeypatch.setenv("GODEBUG", "fips140=only")
    hello, x25519, sha = ask(go_worker, *({"type": "run", "id": op, "backend": "go", "op": op, "seconds": 0.01,
                                           "warmup_s": 0.0} for op in ("x25519-derive", "sha256")))
    fips = hello["backends"][0]["fips140"]
    assert fips["enabled"] is True and fips["enforced"] is True and fips["module_version"]
    assert x25519["status"] == "unsupported" and x25519["fips"] is True, x25519
    assert "FIPS 140-3 module (enforced: GODEBUG=fips140=only) refuses x25519-derive" in x25519["reason"]
    assert "X25519 is not allowed" in x25519["reason"]
    assert sha["status"] == "ok" and sha["fips"] is True and sha["validation"]["kat"] == "pass"


def test_the_orchestrators_own_client_reads_its_hello_and_its_results(go_worker):
    """What the orchestrator does with a worker, done with the Go one: its hello decoded into
    the rules a study is checked against, a repetition run through ``WorkerClient`` with the
    request ``schedule.run_request`` makes, and the result turned into an outcome with latency,
    throughput and CPU per operation by the code every study uses."""
    from cryptoperf import cpumask
    from cryptoperf.model import Cell, Repetition, outcome_from_result
    from cryptoperf.run.worker import WorkerClient
    from cryptoperf.schedule import Settings, run_request

    with WorkerClient(go_worker, env=cpumask.worker_env("baseline")) as w:
        hello = w.hello()
        assert hello.backend_names == ("go",)
        rules = hello.rules
        assert rules.takes_message("sha256") and not rules.takes_message("x25519-derive")
        assert rules.default_size_bytes["ed25519-sign"] == 32 and rules.limits["max_threads"] == 1024
        cpumask.check_hello(hello.raw["cpu_masks"], ["baseline"])  # the baseline every worker announces
        rep = Repetition(Cell("go", "go", "sha256", "sha256", size_bytes=8192), 1)
        result = w.run(run_request(rep, Settings(seconds=0.05, warmup_s=0.01, threads=1, timeout_s=60)), timeout_s=60)
    outcome = outcome_from_result(rep, result)
    assert outcome.status == "ok", outcome.reason
    assert outcome.latency.p50_ns > 0 and outcome.throughput.ops_per_s > 0
    assert outcome.result.library == "Go" and outcome.result.bytes_per_op == 8192


def test_a_study_runs_the_go_worker_beside_another_in_one_block(go_worker, cli, fake_worker, tmp_path):
    """A configuration names the Go worker (`worker`, a path build) and its backend: the study is
    checked against that worker's own hello (an operation it lacks is refused with its list) and
    every block runs both workers' cells, compared across backends."""
    fake_worker({"noise_cv": 0.005})
    study = tmp_path / "go.toml"
    study.write_text('[study]\nname = "go"\nbaseline = "openssl"\nrepetitions = 3\nseconds = 0.05\nwarmup_s = 0.01\n\n'
                     '[[configuration]]\nname = "openssl"\nbackend = "openssl"\n\n'
                     f'[[configuration]]\nname = "go"\nbackend = "go"\nworker = "{go_worker}"\n\n'
                     '[[operation]]\nop = "sha256"\nsizes = [1024]\n')
    res = cli("study", study, "--no-report", "--out", tmp_path / "out", "--store", tmp_path / "s.sqlite")
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    go_reps = [r for r in doc["repetitions"] if r["configuration"] == "go"]
    assert go_reps and all(r["status"] == "ok" and r["result"]["library"] == "Go" for r in go_reps)
    (delta,) = doc["deltas"]
    assert delta["configuration"] == "go" and delta["verdict"]["kind"] in ("slower", "faster", "equivalent",
                                                                          "inconclusive")
    study.write_text(study.read_text().replace('op = "sha256"\nsizes = [1024]', 'op = "rsa2048-sign"'))
    res = cli("study", study, "--no-report", "--out", tmp_path / "out", "--store", tmp_path / "s.sqlite")
    assert res.code != 0 and "unknown operation 'rsa2048-sign'" in res.err and "sha3-256" in res.err, res.err


def test_the_go_fips_study_runs_with_both_go_builds(go_worker, cli, fake_worker, tmp_path):
    """worker-go/go-fips.toml, with the two Go builds where its comments say to put them: Go's
    default crypto and the Go Cryptographic Module v1.0.0 (GOFIPS140) beside OpenSSL and the
    AWS-LC FIPS module (the fake's builds), every cell measured, the FIPS build's results in
    FIPS mode with the module's version in its hello."""
    fake_worker({"noise_cv": 0.005})
    fake_worker.fips()
    (tmp_path / "worker-go").mkdir()
    text = (ROOT / "worker-go" / "go-fips.toml").read_text().replace("repetitions = 8", "repetitions = 3") \
        .replace("seconds = 0.3", "seconds = 0.02").replace("warmup_s = 0.1", "warmup_s = 0.0")
    (tmp_path / "worker-go" / "go-fips.toml").write_text(text)
    shutil.copy(go_worker, tmp_path / "worker-go" / "cryptoperf-worker-go")
    fips = tmp_path / "worker-go" / "cryptoperf-worker-go-fips"
    res = subprocess.run([shutil.which("go"), "build", "-o", str(fips), "."], cwd=ROOT / "worker-go",
                         env={**os.environ, "GOFIPS140": "v1.0.0"}, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    res = cli("study", tmp_path / "worker-go" / "go-fips.toml", "--no-report", "--out", tmp_path / "out",
              "--store", tmp_path / "s.sqlite")
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    measured = [r for r in doc["repetitions"] if r["block"] > 0]
    assert measured and all(r["status"] == "ok" for r in measured), [r["reason"] for r in measured if r["status"] != "ok"]
    go_fips = [r for r in measured if r["configuration"] == "go-fips"]
    assert go_fips and all(r["result"]["fips"] is True for r in go_fips)
    assert all(r["result"]["fips"] is False for r in measured if r["configuration"] == "go")
    assert any(d["configuration"] == "go-fips" and d["baseline"] == "go" for d in doc["deltas"])  # the contrast


def test_the_go_hello_fixture_is_the_workers(go_worker):
    """tests/fixtures/worker-go-hello.json (what the study-file tests check a Go configuration
    against) is the worker's hello but its host- and toolchain-dependent fields; refresh it with
    the worker's hello when this fails."""
    hello, *_ = ask(go_worker)
    fixture = json.loads((ROOT / "tests" / "fixtures" / "worker-go-hello.json").read_text())
    for b in hello["backends"]:
        b["library_version"] = "go1.x"
        b["fips"], b["fips140"] = False, {"enabled": False, "enforced": False, "module_version": "latest"}
    assert {k: hello[k] for k in fixture} == fixture
