"""Workloads end to end against the real cryptoperf-worker: the latency method (a stall injected
into a real TLS server shows in the open loop's p99 and hides in a paced closed loop's),
negotiation checks (a cell whose handshakes do not negotiate what was asked is invalid, never
timed), loopback-only listeners, and no private key in any artefact of a study.

Skipped when no built worker answers hello, failed instead under CRYPTOPERF_REQUIRE_WORKER=1
(set by .ci/run). Short budgets; nothing here asserts on how fast anything is, only on the
shape of what was measured.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from conftest import need_real_worker, run_subprocess
from cryptoperf.result import WorkerResult
from cryptoperf.run.worker import WorkerClient
from real_workers import find

REAL, WHY = find()


@pytest.fixture(autouse=True)
def _need_the_real_worker():
    need_real_worker(REAL, WHY)


def run(backend: str, op: str, params: dict, seconds: float = 0.3, warmup_s: float = 0.05,
        env: dict | None = None) -> WorkerResult:
    """One run request to a fresh real worker; returns its result."""
    with WorkerClient(REAL, env=env) as w:
        w.hello()
        return w.run({"type": "run", "id": "t", "backend": backend, "op": op, "params": params,
                      "seconds": seconds, "warmup_s": warmup_s}, timeout_s=120)


def p99_ms(result: WorkerResult) -> float:
    return HdrHistogram.decode(result.histogram).get_value_at_percentile(99.0) / 1e6


def test_a_server_stall_shows_in_the_open_loop_p99_and_hides_in_a_paced_closed_loop():
    # The server pauses 200 ms at the start of every second. At 300 handshakes/s, a fifth of
    # the open loop's handshakes fall due during a pause and wait for it; the paced closed loop
    # sends nothing while it waits, so only one handshake per second is slow (< 1 %).
    stall = {"stall_ms": 200, "stall_every_ms": 1000, "cert": "ecdsa-p256", "group": "x25519"}
    open_ = run("aws-lc", "tls-handshake", {**stall, "load": "open:300/8"}, seconds=2.0, warmup_s=0.0)
    closed = run("aws-lc", "tls-handshake", {**stall, "load": "closed:1@300"}, seconds=2.0, warmup_s=0.0)
    assert open_.status == "ok", open_.reason
    assert closed.status == "ok", closed.reason
    assert open_.load.corrected is True and closed.load.corrected is False
    assert p99_ms(open_) > 100, p99_ms(open_)
    assert p99_ms(closed) < 50, p99_ms(closed)
    assert open_.late > 0


def test_asking_for_x25519mlkem768_from_a_server_without_it_is_invalid_and_not_timed():
    # The server offers X25519 only; the client offers X25519MLKEM768 with X25519 as fallback,
    # as real clients do, so the handshake succeeds on X25519: not what the cell asked for.
    r = run("aws-lc", "tls-handshake", {"group": "x25519mlkem768", "server_group": "x25519"})
    assert r.status == "invalid", r
    assert "negotiated group x25519" in r.reason and "x25519mlkem768" in r.reason, r.reason
    assert not {"ops", "histogram"} & r.raw.keys(), r  # never timed: no measurement field at all


def test_ring_has_no_ml_kem_and_says_so():
    r = run("ring", "tls-handshake", {"group": "x25519mlkem768"})
    assert r.status == "unsupported"
    assert "ML-KEM" in r.reason or "x25519mlkem768" in r.reason.lower(), r.reason


@pytest.mark.parametrize("backend", ["aws-lc", "ring", "openssl"])
def test_each_implementation_handshakes_and_records_what_it_negotiated(backend):
    r = run(backend, "tls-handshake", {"cert": "ecdsa-p256", "group": "x25519", "load": "closed:2"})
    assert r.status == "ok", r.reason
    n = r.negotiated
    assert (n.version, n.cipher_suite, n.group, n.resumed) == ("TLSv1.3", "TLS_AES_128_GCM_SHA256", "x25519", False)
    assert n.signature_scheme == "ecdsa_secp256r1_sha256"
    assert sum(c.count for c in r.negotiated_counts) >= r.ops
    passes = [c for c in r.validation.cross_checks if c.status == "pass"]
    assert len(passes) >= 2, r.validation  # both directions with at least one other implementation
    assert r.server.cpu_ns > 0 and r.cpu_ns_total > 0
    assert r.server.address.startswith("127.0.0.1:")
    assert r.client_timeline and r.server.timeline


def test_resumed_handshakes_resume_and_memory_mode_splits_the_cpu():
    r = run("aws-lc", "tls-handshake", {"session": "resumed", "mode": "memory"})
    assert r.status == "ok", r.reason
    assert r.negotiated.resumed is True
    assert all(c.negotiated.resumed for c in r.negotiated_counts)
    assert 0 < r.server.cpu_ns < r.cpu_ns_total and 0 < r.client_side_cpu_ns < r.cpu_ns_total


def test_ike_phase1_runs_with_the_big_number_extensions_masked():
    from cryptoperf import cpumask
    env = {cpumask.ENV_VAR: cpumask.MASKS["no-bignum"]}
    with WorkerClient(REAL, env=env) as w:
        w.hello()
        r = w.run({"type": "run", "id": "t", "backend": "openssl", "op": "ike-phase1",
                   "params": {"dh_group": "modp2048", "load": "closed:1"}, "seconds": 0.2,
                   "warmup_s": 0.0, "cpu_mask": "no-bignum"}, timeout_s=60)
    assert r.status == "ok", r.reason
    assert set(r.cpu_mask_cleared) <= {"bmi2", "adx", "avx512ifma"}
    assert r.validation.kat == "pass"


def _listening_sockets(pids: set[int]) -> list[str]:
    """Local addresses (hex ip:port as in /proc/net/tcp*) of LISTEN sockets owned by ``pids``."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # state LISTEN
                out.append(f[1])
    return out


def _worker_pids() -> set[int]:
    pids = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if Path(f"/proc/{d}/comm").read_text().strip().startswith("cryptoperf-work"):
                    pids.add(int(d))
            except OSError:
                pass
    return pids


def test_listeners_bind_loopback_only_and_keys_reach_no_artefact(tmp_path):
    study = tmp_path / "tls.toml"
    study.write_text("""\
[study]
name = "tls-small"
baseline = "ec"
backends = ["aws-lc"]
repetitions = 3
seconds = 0.2
warmup_s = 0.05

[[configuration]]
name = "ec"
cert = "ecdsa-p256"

[[configuration]]
name = "rsa"
cert = "rsa2048"

[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { cert = "{cert}" }
loads = ["closed:2"]
""")
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.extend(_listening_sockets(_worker_pids()))
            time.sleep(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    env = {"CRYPTOPERF_WORKER": str(REAL), "HOME": str(tmp_path)}
    res = run_subprocess("study", str(study), "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"),
                         env=env)
    done.set()
    t.join()
    assert res.code == 0, res.err
    assert seen, "no listening socket of a worker was seen during the study"
    # 0100007F = 127.0.0.1 in /proc/net/tcp's byte order; tcp6 loopback is ::1
    assert all(a.split(":")[0] in ("0100007F", "00000000000000000000000001000000") for a in seen), seen
    # No private key in the store, the JSON, or the reports: no PEM private key, and none of
    # the PKCS #8 DER headers of the key types made (base64 and hex).
    markers = ["PRIVATE KEY", "MIGHAgEAMBMGByqGSM49AgEG", "MC4CAQAwBQYDK2VwBCIEI",
               "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "MIIEvgIBADANBgkqhkiG9w0BAQEFAASC",
               "308187020100301306072a8648ce3d020106", "020100300d06092a864886f70d0101010500"]
    artefacts = [tmp_path / "s.sqlite", *(tmp_path / "out").rglob("*")]
    assert any(p.suffix == ".html" for p in artefacts)
    for p in artefacts:
        if p.is_file():
            data = p.read_bytes()
            for m in markers:
                assert m.encode() not in data and m.lower().encode() not in data, (p, m)
    doc = json.loads(next((tmp_path / "out").rglob("*.json")).read_text())
    assert "ca_der" not in json.dumps(doc)


def test_tls_bulk_moves_the_bytes_and_reports_both_sides_cpu():
    r = run("aws-lc", "tls-bulk", {"load": "closed:2", "size_bytes": 262144, "suite": "aes-256-gcm", "record_bytes": 4096})
    assert r.status == "ok", r.reason
    assert r.bytes_per_op == 262144 and r.ops > 0
    assert r.negotiated.cipher_suite == "TLS_AES_256_GCM_SHA384"
    # the receiver acknowledged every transfer the sender counted
    assert r.server.transactions >= r.ops
    assert r.cpu_ns_total > 0 and r.server.cpu_ns > 0


def test_the_fips_worker_runs_tls_on_the_fips_module_and_refuses_what_it_does_not_approve():
    fips, why = find("fips")
    need_real_worker(fips, why, require="CRYPTOPERF_REQUIRE_FIPS")
    with WorkerClient(fips) as w:
        w.hello()
        ok = w.run({"type": "run", "id": "a", "backend": "aws-lc", "op": "tls-handshake",
                    "params": {"group": "p256"}, "seconds": 0.2, "warmup_s": 0.0}, timeout_s=60)
        refused = w.run({"type": "run", "id": "b", "backend": "aws-lc", "op": "tls-handshake",
                         "params": {"group": "x25519"}, "seconds": 0.2, "warmup_s": 0.0}, timeout_s=60)
        ring = w.run({"type": "run", "id": "c", "backend": "ring", "op": "tls-handshake",
                      "params": {"group": "p256"}, "seconds": 0.2, "warmup_s": 0.0}, timeout_s=60)
    assert ok.status == "ok" and ok.fips is True, ok.reason
    assert ok.negotiated.group == "p256"
    assert refused.status == "unsupported" and "not FIPS-approved" in refused.reason
    assert ring.status == "unsupported"
