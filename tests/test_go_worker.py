"""The Go worker (worker-go/, first part of issue 39): built with the Go toolchain, it speaks the
worker protocol for the `go` backend's primitives — every result is valid against the JSON
Schema the Rust worker's results are (tests/fixtures/worker-result.schema.json), its histogram
decodes with the orchestrator's own decoder and agrees with its counters, and every operation
passes its known answer before it is timed. Needs Go (CRYPTOPERF_REQUIRE_GO=1: fail, not skip,
without it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import real_workers
from cryptoperf.stats.figures import decode_histogram

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "worker-result.schema.json").read_text())


@pytest.fixture
def go_worker(go_workers) -> Path:
    """The Go worker's default build, compiled from this checkout (conftest.go_workers)."""
    return go_workers["go"]


def ask(worker: Path, *requests: dict) -> list[dict]:
    """``hello``, then ``requests``, to the Go worker: every answer (real_workers.ask)."""
    return real_workers.ask(worker, *requests, timeout_s=120)


def test_each_operation_is_measured_in_the_protocols_result(go_worker):
    jsonschema = pytest.importorskip("jsonschema")
    hello, *_ = ask(go_worker)
    assert hello["type"] == "hello" and hello["protocol"] == 1
    (backend,) = hello["backends"]
    assert backend["backend"] == "go" and backend["library"] == "Go" and backend["library_version"].startswith("go1.")
    ops = hello["ops"]
    assert {"sha256", "aes-128-gcm-seal", "chacha20-poly1305-seal", "x25519-derive", "ed25519-sign",
            "ecdsa-p256-sign"} <= set(ops)
    primitives = [op for op in ops if not hello["op_params"][op].get("workload")]
    runs = [{"type": "run", "id": op, "backend": "go", "op": op, "seconds": 0.02, "warmup_s": 0.0} for op in primitives]
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
    assert bad == {"type": "error", "id": "a", "code": "bad_params", "message": "unknown parameter 'digest' for sha256"}
    assert other["type"] == "error" and other["code"] == "unknown_backend" and other["id"] == "b"
    assert other["message"] == "unknown backend 'openssl'; known: go"
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
    study.write_text(study.read_text().replace('op = "sha256"\nsizes = [1024]', 'op = "ffdh-2048-derive"'))
    res = cli("study", study, "--no-report", "--out", tmp_path / "out", "--store", tmp_path / "s.sqlite")
    assert res.code != 0 and "unknown operation 'ffdh-2048-derive'" in res.err and "sha3-256" in res.err, res.err


def test_the_go_fips_study_gives_verdicts_with_both_go_builds(go_workers, cli, fake_worker, monkeypatch, tmp_path):
    """studies/go-fips.toml as shipped but shorter: the configurations with backend = "go" run in
    the Go worker's two builds, found where `pip install .` leaves them (here: the variables naming
    this checkout's builds) — Go's default crypto, and the Go Cryptographic Module v1.0.0
    enforced, every result in FIPS mode — beside OpenSSL and the AWS-LC FIPS module (the fake's
    builds); every cell is measured and every comparison decided or said inconclusive, the TLS
    handshake's on the server's CPU per handshake, Go FIPS against Go default among them."""
    fake_worker({"noise_cv": 0.005})
    fake_worker.fips()
    monkeypatch.setenv("CRYPTOPERF_WORKER_GO", str(go_workers["go"]))
    monkeypatch.setenv("CRYPTOPERF_WORKER_GO_FIPS", str(go_workers["go-fips"]))
    text = (ROOT / "studies" / "go-fips.toml").read_text().replace("repetitions = 16", "repetitions = 3") \
        .replace("seconds = 0.3", "seconds = 0.05").replace("warmup_s = 0.1", "warmup_s = 0.01")
    (tmp_path / "go-fips.toml").write_text(text)
    res = cli("study", tmp_path / "go-fips.toml", "--no-report", "--out", tmp_path / "out",
              "--store", tmp_path / "s.sqlite")
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    measured = [r for r in doc["repetitions"] if r["block"] > 0]
    assert measured and all(r["status"] == "ok" for r in measured), [r["reason"] for r in measured if r["status"] != "ok"]
    for name, fips in (("go", False), ("go-fips", True)):
        mine = [r for r in measured if r["configuration"] == name]
        assert mine and all(r["result"]["fips"] is fips and r["result"]["library"] == "Go" for r in mine), name
    handshake = [d for d in doc["deltas"] if d["op"] == "tls-handshake"]
    assert {(d["configuration"], d["baseline"]) for d in handshake} >= {("go-fips", "go"), ("go", "openssl")}
    for d in handshake:
        assert d["status"] == "ok" and d["verdict"]["metric"] == "server CPU time per transaction", d
        assert d["server_cpu_per_op"]["ci_low"] <= d["server_cpu_per_op"]["ratio"] <= d["server_cpu_per_op"]["ci_high"]
    primitives = [d for d in doc["deltas"] if d["op"] != "tls-handshake"]
    assert primitives and all(d["verdict"]["metric"] == "p50 latency" for d in primitives if d["verdict"])


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


def test_a_wrong_result_that_passes_its_known_answer_is_caught_by_the_cross_check(tmp_path):
    """A test build of the Go worker (`-tags cryptoperf_wrong`: SHA-256 flips a bit of any digest
    of more than 64 bytes, so the FIPS 180-4 "abc" known answer still passes) is caught by the
    cross-check against OpenSSL: the case is invalid, with the two digests, and nothing is timed."""
    from real_workers import build_go
    from conftest import need_real_worker
    wrong, why = build_go("go", tmp_path, tags=("cryptoperf_wrong",))
    wrong = need_real_worker(wrong, why, require="CRYPTOPERF_REQUIRE_GO")
    _, r = ask(wrong, {"type": "run", "id": "w", "backend": "go", "op": "sha256", "seconds": 0.02, "warmup_s": 0.0})
    assert r["status"] == "invalid" and r["validation"]["kat"] == "pass", r
    (failed,) = [c for c in r["validation"]["cross_checks"] if c["status"] == "fail"]
    assert failed["with"].startswith("OpenSSL") and "digests" in failed["detail"], failed
    assert "cross-check with OpenSSL" in r["reason"] and not r.get("ops"), r


def test_the_go_workers_fixed_keys_and_shared_vectors_are_the_rust_workers():
    """The keys the protocol fixes (so that a signature made in one worker verifies in the other)
    and the computed vectors both workers check are byte for byte the Rust worker's: the Go
    module cannot embed files outside its folder, so it keeps copies, held to the originals here."""
    rust = ROOT / "worker" / "src"
    keys = sorted((ROOT / "worker-go" / "keys").glob("*.der"))
    assert len(keys) >= 6
    for copy in keys + [ROOT / "worker-go" / "vectors" / "computed-abc.txt"]:
        (original,) = [p for p in rust.rglob(copy.name)]
        assert copy.read_bytes() == original.read_bytes(), f"{copy} differs from {original}"


def test_backends_lists_the_go_worker_with_its_version_and_fips_module(go_workers, cli, fake_worker, monkeypatch):
    """`cryptoperf backends` lists the Go worker's two builds, where `pip install .` leaves them
    (here: the variables naming this checkout's builds), each with its Go release and its FIPS
    140-3 module's state and version; a build that is missing is listed with why."""
    fake_worker()
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("CRYPTOPERF_WORKER_GO", str(go_workers["go"]))
    monkeypatch.setenv("CRYPTOPERF_WORKER_GO_FIPS", str(go_workers["go-fips"]))
    res = cli("backends", "--no-detail")
    assert res.code == 0, res.err
    assert "cryptoperf-worker-go 0.1.0 (build go, protocol 1)" in res.out
    assert "cryptoperf-worker-go-fips 0.1.0 (build go-fips, protocol 1)" in res.out
    rows = [line for line in res.out.splitlines() if line.startswith("│ go ")]
    assert len(rows) == 2 and all("go1." in r for r in rows), rows
    assert "no (module latest)" in rows[0] and "Go Cryptographic Module v1.0.0" in rows[1], rows
    assert "yes (module v1.0.0, enforced)" in rows[1], rows
    monkeypatch.setenv("CRYPTOPERF_WORKER_GO_FIPS", "/nonexistent/cryptoperf-worker-go-fips")
    res = cli("backends", "--no-detail")
    assert res.code == 0 and "worker build 'go-fips' (backend go) is unavailable: CRYPTOPERF_WORKER_GO_FIPS=" in res.out


def test_speed_runs_the_go_backend_in_its_own_worker(go_workers, cli, fake_worker, monkeypatch, tmp_path):
    """`cryptoperf speed --backend go` runs in the Go worker (`--fips`: its FIPS build, where the
    module's refusal is the row's answer); naming a backend of another worker beside it is one
    line saying to measure them apart."""
    fake_worker()
    monkeypatch.setenv("CRYPTOPERF_WORKER_GO", str(go_workers["go"]))
    monkeypatch.setenv("CRYPTOPERF_WORKER_GO_FIPS", str(go_workers["go-fips"]))
    res = cli("speed", "--backend", "go", "--fips", "--op", "sha256", "--op", "x25519-derive", "--seconds", "0.02",
              "--warmup", "0", "--json", "--store", tmp_path / "s.sqlite")
    assert res.code == 0, res.err
    rows = {r["op"]: r for r in json.loads(res.out)["results"]}
    assert rows["sha256"]["status"] == "ok" and rows["sha256"]["fips"] is True, rows["sha256"]
    assert "Go Cryptographic Module v1.0.0" in rows["sha256"]["library_version"]
    assert rows["x25519-derive"]["status"] == "unsupported" and "not allowed in FIPS 140-only mode" in rows["x25519-derive"]["reason"]
    res = cli("speed", "--backend", "go", "--backend", "openssl", "--op", "sha256", "--store", tmp_path / "s.sqlite")
    assert res.code != 0 and "runs in a worker of its own (cryptoperf-worker-go)" in res.err and "Traceback" not in res.err


def test_the_package_build_puts_both_go_builds_beside_the_package(tmp_path):
    """setup.py's build step, as pip runs it (a build directory relative to the checkout; go
    build runs in worker-go/), leaves both Go builds in the package's _bin/, each answering hello
    as its build; where cryptoperf itself was installed by pip (.ci/run), the installed package
    has them too, and `cryptoperf backends` finds them there."""
    import sys
    from conftest import need_real_worker
    from cryptoperf import builds
    if shutil.which("go") is None:
        need_real_worker(None, "go is not installed", require="CRYPTOPERF_REQUIRE_GO")
    rel = Path("build") / f"test-{tmp_path.name}"
    try:
        res = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(rel)], cwd=ROOT,
                             capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stderr
        for build in ("go", "go-fips"):
            binary = ROOT / rel / "cryptoperf" / "_bin" / builds.get(build).binary
            hello, *_ = ask(binary)
            assert hello["build"] == build, hello["build"]
    finally:
        shutil.rmtree(ROOT / rel, ignore_errors=True)
    installed = Path(builds.__file__).resolve().parent
    if not installed.is_relative_to(ROOT / "src"):  # imported from a pip install, not the checkout
        for build in ("go", "go-fips"):
            assert (builds.GO_BIN_DIR / builds.get(build).binary).is_file(), sorted(builds.GO_BIN_DIR.glob("*"))
