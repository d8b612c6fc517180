"""The fake worker speaks the worker's protocol as its JSON Schema writes it: every result the fake
sends — a primitive's, and each workload kind's (TLS, storage, IKE, a fleet job) — validates
against tests/fixtures/worker-result.schema.json (generated from the worker's Rust types by
tests/fixtures/refresh_worker_hello.py), against the common part and its own kind's definition,
so a test on the fake cannot pass on a message the real worker would never send."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from test_workload_report import fake, request

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "worker-result.schema.json").read_text())

#: Workload → the schema's definition of its own part (a primitive has none).
KIND_DEF = {"tls-handshake": "TlsResult", "tls-bulk": "TlsResult", "fleet-job": "FleetResult",
            "storage": "StorageResult", "ike-phase1": "IkeResult"}


def validator(op: str) -> "jsonschema.protocols.Validator":
    """The schema's common part, and ``op``'s own definition when it is a workload (the
    top-level ``anyOf`` ends in ``{}``, which would let any message through)."""
    common = {k: v for k, v in SCHEMA.items() if k != "anyOf"}
    if op in KIND_DEF:
        common = {**common, "allOf": [{"$ref": f"#/$defs/{KIND_DEF[op]}"}]}
    return jsonschema.Draft202012Validator(common)


CASES = {
    "sha256": request("openssl", "sha256", {"size_bytes": 1024}),
    "rsa2048-sign": request("aws-lc", "rsa2048-sign", {}),
    "tls-handshake open": request("aws-lc", "tls-handshake", {"load": "open:400", "cert": "rsa2048", "group": "p256"}),
    "tls-handshake memory": request("aws-lc", "tls-handshake", {"load": "closed:1", "mode": "memory"}),
    "tls-bulk": request("aws-lc", "tls-bulk", {"load": "closed:1", "size_bytes": 16384}),
    "storage": request("openssl", "storage", {"load": "closed:1", "dir": "/tmp"}),
    "ike-phase1": request("openssl", "ike-phase1", {"load": "closed:1"}),
    "fleet-job": request("aws-lc", "fleet-job", {"load": "targets:10", "job": "audit"}),
    "fleet-job latency": request("aws-lc", "fleet-job", {"load": "targets:4", "job": "audit",
                                                         "rtt_ms": "lognormal:p50=20,p99=80"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_fake_result_validates_against_the_workers_schema(case):
    req = CASES[case]
    [r] = fake([req])
    assert r["type"] == "result" and r["status"] == "ok", r
    errors = sorted(validator(req["op"]).iter_errors(r), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in errors[:10])


def test_the_schema_check_can_fail():
    """A fleet result without its ``latency`` (what the fake once sent) is refused."""
    [r] = fake([CASES["fleet-job"]])
    del r["fleet"]["latency"]
    assert any("latency" in e.message for e in validator("fleet-job").iter_errors(r))
