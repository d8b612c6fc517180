"""The typed worker result (``cryptoperf.result``): every field the protocol documents decoded
once, a wrong type refused with one line naming the field, unknown fields kept, old stored
results readable; against the fake worker's messages and, where one is built, the real
worker's."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

import pytest

from conftest import need_real_worker
from cryptoperf.errors import WorkerError
from cryptoperf.result import (Capabilities, CpuSample, Load, Negotiated, ServerSide, UnreadableResult,
                               WorkerResult, decode)
from cryptoperf.run.worker import WorkerClient
from real_workers import find

FIXTURES = Path(__file__).with_name("fixtures")


def run_fake(path, backend, op, params, **kw) -> WorkerResult:
    with WorkerClient(path) as w:
        w.hello()
        return w.run({"type": "run", "id": "A#1", "backend": backend, "op": op, "params": params,
                      "threads": 1, "warmup_s": 0, "seconds": 0.05, **kw}, timeout_s=30)


def test_a_primitive_result_is_typed(fake_worker):
    r = run_fake(fake_worker({"latency_ns": {"sha256": 500}}), "openssl", "sha256", {"size_bytes": 1024},
                 cpu_mask=None)
    assert isinstance(r, WorkerResult)
    assert (r.id, r.backend, r.op, r.status, r.reason) == ("A#1", "openssl", "sha256", "ok", "")
    assert (r.library, r.library_version, r.fips, r.library_text) == ("OPENSSL", "fake-1.0", False,
                                                                       "OPENSSL fake-1.0")
    assert r.params == {"size_bytes": 1024} and r.threads == 1
    assert r.ops == 100_000 and r.wall_ns == 50_000_000 and r.bytes_per_op == 1024
    assert r.cpu_ns == (50_000_000,) and r.cpu_ns_total == 50_000_000 and r.tsc_cycles is None
    assert isinstance(r.steal_ticks, int) and (r.total_ticks, r.busy_ticks) == (200, 100)
    assert r.batch == 32 and r.timing == "batched" and r.histogram.startswith("HISTF")
    assert (r.sample_min_ns, r.sample_max_ns) == (500, 500)
    assert r.validation.kat == "not applicable (fake)" and r.validation.cross_checks == ()
    assert isinstance(r.capabilities, Capabilities) and r.capabilities.maskable is True
    assert r.workload is None and r.server is None and r.load is None and r.extras == {}
    # the message as received, for the store and the JSON document
    assert r.raw["type"] == "result" and r.raw["ops"] == r.ops and json.loads(json.dumps(r.raw)) == r.raw


def test_a_workload_result_types_its_common_part_and_keeps_its_own_part_opaque(fake_worker):
    path = fake_worker()
    tls = run_fake(path, "aws-lc", "tls-handshake", {"load": "open:500/4"})
    assert tls.workload == "tls-handshake" and tls.mode == "socket"
    assert tls.load == Load(kind="open", threads=4, rate_per_s=500.0, corrected=True)
    assert isinstance(tls.late, int) and tls.placement.startswith("client threads on CPU 0")
    assert isinstance(tls.negotiated, Negotiated) and tls.negotiated.version == "TLSv1.3"
    (count,) = tls.negotiated_counts
    assert count.negotiated == tls.negotiated and count.count == tls.ops
    assert isinstance(tls.server, ServerSide) and tls.server.transactions == tls.ops
    assert tls.server.cpu_ns > 0 and tls.server.address.startswith("127.0.0.1:") and tls.server.window
    assert tls.server.timeline and isinstance(tls.server.timeline[0], CpuSample)
    assert tls.client_timeline[0].t_ms == 100.0 and tls.client_side_cpu_ns is None
    assert tls.validation.checks == {"negotiated": "pass"}
    assert tls.extras == {}
    storage = run_fake(path, "openssl", "storage", {"load": "closed:1", "dir": "/tmp"})
    assert storage.mode == "file" and set(storage.extras) == {"storage"}
    assert storage.extras["storage"] == storage.raw["storage"]


def test_unknown_fields_are_kept_and_wrong_types_refused_naming_the_field():
    r = decode({"status": "ok", "ops": 3, "a_new_field": [1], "server": {"cpu_ns": 5, "window": True}})
    assert r.extras == {"a_new_field": [1]} and r.server == ServerSide(cpu_ns=5, window=True)
    assert decode({"status": "ok", "wall_ns": 1e9}).wall_ns == 1_000_000_000  # an integral float
    for message, field in (({"status": "ok", "ops": "12"}, "ops"), ({"status": "ok", "fips": "yes"}, "fips"),
                           ({"status": "ok", "cpu_ns": [1, "2"]}, "cpu_ns[1]"),
                           ({"status": "ok", "server": {"cpu_ns": 1.5}}, "server.cpu_ns"),
                           ({"status": "ok", "load": {"kind": "open", "rate_per_s": "fast"}}, "load.rate_per_s"),
                           ({"status": "ok", "client_timeline": [{"t_ms": 1}, 7]}, "client_timeline[1]"),
                           ({"status": "ok", "capabilities": {"flags": {"aes": 1}}}, "capabilities.flags.aes"),
                           ({"ops": 3}, "status"), ({"status": 1}, "status")):
        with pytest.raises(UnreadableResult, match=r"^unreadable result: " + field.replace("[", r"\[")
                           .replace("]", r"\]")) as e:
            decode(message)
        assert "\n" not in str(e.value) and isinstance(e.value, WorkerError)
    with pytest.raises(UnreadableResult, match="not an object"):
        decode(["status", "ok"])  # type: ignore[arg-type]


def test_a_result_is_read_by_attribute_only_and_keeps_the_message_as_received():
    message = {"status": "ok", "batch": 4, "fleet": {"completed": 2}}
    r = decode(message)
    assert r.batch == 4 and r.extras == {"fleet": {"completed": 2}} and r.raw == message
    # no mapping access: every read goes through the decoded, type-checked attributes
    for read in (lambda: r["batch"], lambda: r.get("batch"), lambda: "fleet" in r, lambda: dict(r),
                 lambda: r.keys()):
        with pytest.raises((TypeError, AttributeError)):
            read()


def test_a_result_pickles_and_compares_by_value():
    r = decode({"status": "ok", "ops": 1, "client_timeline": [{"t_ms": 100, "user_pct": 1.0}],
                "capabilities": {"maskable": True, "words": ["0x1", "0x0"], "flags": {"aes": True}}})
    assert pickle.loads(pickle.dumps(r)) == r
    assert r == decode(dict(r.raw)) and r != decode(dict(r.raw, ops=2))


def test_every_stored_result_of_every_format_decodes():
    results = []
    for name in ("store-v1.sqlite", "store-v2.sqlite", "store-v3.sqlite"):
        db = sqlite3.connect(FIXTURES / name)
        results += [json.loads(rj) for (rj,) in db.execute("SELECT result_json FROM results") if rj]
        db.close()
    for name in ("study-v1.json", "study-v2.json", "study-v3.json"):
        doc = json.loads((FIXTURES / name).read_text())
        results += [r["result"] for r in doc.get("repetitions") or doc.get("runs") or [] if r.get("result")]
    assert len(results) > 50
    for message in results:
        r = decode(message)
        assert r.status == message["status"] and r.raw == message and r.extras == {}


def test_the_real_workers_workload_results_decode_whole():
    """Every field a real TLS handshake's result has is decoded (none left in ``extras``), and
    the typed server side matches the message."""
    real, why = find()
    need_real_worker(real, why)
    with WorkerClient(real) as w:
        w.hello()
        r = w.run({"type": "run", "id": "t", "backend": "aws-lc", "op": "tls-handshake",
                   "params": {"load": "closed:1"}, "seconds": 0.2, "warmup_s": 0.05}, timeout_s=120)
    assert r.status == "ok", r.reason
    assert r.extras == {}, sorted(r.extras)
    assert r.server.cpu_ns == r.raw["server"]["cpu_ns"] and r.server.transactions == r.raw["server"]["transactions"]
    assert r.load.kind == "closed" and r.load.concurrency == 1 and r.workload == "tls-handshake"
    assert r.client_timeline is not None and r.negotiated.version == "TLSv1.3"
