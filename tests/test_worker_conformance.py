"""One conformance suite for every worker binary: the Rust worker's builds (``default``, ``fips``)
and the Go worker's (``go``, ``go-fips``) answer the same protocol (docs/worker-protocol.md),
held to the same contract — the JSON Schemas of ``hello`` (tests/fixtures/worker-hello.schema.json)
and of ``result`` (tests/fixtures/worker-result.schema.json, generated from the Rust worker's
types) — and to the same rules: every operation a worker announces is known-answer tested and
cross-checked against another implementation before it is timed, or refused with a reason;
every malformed request gets the protocol's error, naming its code, with the request's id.

A third worker costs its own code and a line in ``WORKERS``: nothing here names an operation,
a backend or a library. The Go worker's own tests (test_go_worker.py) add what only it does
(its FIPS 140-3 mode, a deliberately wrong build caught by its cross-check).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cryptoperf import builds
from cryptoperf.hello import WorkerRules
from cryptoperf.stats.figures import decode_histogram
from conftest import need_real_worker
from real_workers import ask, find, talk

pytestmark = pytest.mark.parallel

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HELLO_SCHEMA = json.loads((FIXTURES / "worker-hello.schema.json").read_text())
RESULT_SCHEMA = json.loads((FIXTURES / "worker-result.schema.json").read_text())

#: Every worker build the suite runs: (build, how its binary is found). The Go builds are compiled
#: from this checkout (the ``go_workers`` fixture); the Rust ones are the binaries under test.
WORKERS = [builds.DEFAULT, builds.FIPS, builds.GO, builds.GO_FIPS]
#: The environment variable that makes a missing build fail the suite instead of skipping it.
REQUIRE = {builds.DEFAULT: "CRYPTOPERF_REQUIRE_WORKER", builds.FIPS: "CRYPTOPERF_REQUIRE_FIPS",
           builds.GO: "CRYPTOPERF_REQUIRE_GO", builds.GO_FIPS: "CRYPTOPERF_REQUIRE_GO"}
#: A run short enough for the suite, long enough to time a few operations of the slowest.
SHORT = {"seconds": 0.01, "warmup_s": 0.0}


@pytest.fixture(params=WORKERS)
def worker(request) -> tuple[str, Path]:
    """(build, binary) of one worker build under test."""
    build = request.param
    if build in (builds.GO, builds.GO_FIPS):
        return build, request.getfixturevalue("go_workers")[build]
    path, why = find(build)
    return build, need_real_worker(path, why, require=REQUIRE[build])


def software_backends(hello: dict) -> list[str]:
    """The backends measured in software (a device backend needs its token set up first)."""
    return [b["backend"] for b in hello["backends"] if not b.get("device")]


def primitives(hello: dict) -> list[str]:
    return [op for op in hello["ops"] if not hello["op_params"][op].get("workload")]


def a_measured_case(binary: Path, hello: dict) -> tuple[str, str]:
    """(backend, operation with a message) the worker measures here: the first of each
    backend's first such operation that answers ``ok``."""
    sized = [o for o in primitives(hello) if "size_bytes" in hello["op_params"][o]["params"]]
    tries = [(b, op) for b in software_backends(hello) for op in sized[:3]]
    results = ask(binary, *({"type": "run", "id": str(i), "backend": b, "op": op, **SHORT}
                            for i, (b, op) in enumerate(tries)))[1:]
    return next(t for t, r in zip(tries, results) if r.get("status") == "ok")


def test_hello_is_the_contracts(worker):
    """hello validates against the schema, names the build it was looked for as, announces the
    parameters of every operation it lists, and the orchestrator reads it into its rules."""
    jsonschema = pytest.importorskip("jsonschema")
    build, binary = worker
    (hello,) = ask(binary)
    jsonschema.Draft202012Validator(HELLO_SCHEMA).validate(hello)
    builds.check_hello(build, binary, hello)
    assert set(hello["op_params"]) == set(hello["ops"])
    for op, entry in hello["op_params"].items():
        for param in entry["params"]:
            if param in ("digest", "padding"):
                assert hello["param_values"].get(param), f"{op} takes {param} but param_values lists none"
        assert (entry["default_size_bytes"] is not None) == ("size_bytes" in entry["params"]) or entry.get("workload"), op
    rules = WorkerRules.from_hello(hello)
    assert set(rules.libraries) <= {b["backend"] for b in hello["backends"]}
    assert hello["build"] == build
    if builds.is_fips(build):  # (the Rust FIPS build's openssl backend is in FIPS mode only with the provider)
        assert any(b["fips"] for b in hello["backends"]), hello["backends"]


def test_every_operation_is_validated_before_it_is_timed(worker):
    """Every (backend, primitive) the worker announces: measured — its result valid against the
    result schema, its known answer passed with its source named, cross-checked against another
    implementation with no check failing, every operation in its histogram — or refused as
    ``unsupported`` with a reason. Nothing answers ``invalid`` or an error."""
    jsonschema = pytest.importorskip("jsonschema")
    _, binary = worker
    (hello,) = ask(binary)
    runs = [{"type": "run", "id": f"{b}/{op}", "backend": b, "op": op, **SHORT}
            for b in software_backends(hello) for op in primitives(hello)]
    _, *results = ask(binary, *runs)
    assert len(results) == len(runs)
    validator = jsonschema.Draft202012Validator(RESULT_SCHEMA)
    measured = 0
    for req, r in zip(runs, results):
        assert r.get("type") == "result" and r["id"] == req["id"], r
        validator.validate(r)
        if r["status"] == "unsupported":
            assert r["reason"], r
            continue
        assert r["status"] == "ok", (req["id"], r.get("reason"))
        v = r["validation"]
        assert v["kat"] == "pass" and v["kat_source"], (req["id"], v)
        checks = v["cross_checks"]
        assert not [c for c in checks if c["status"] == "fail"], (req["id"], checks)
        assert any(c["status"] == "pass" for c in checks), (req["id"], "no cross-check passed", checks)
        assert decode_histogram(r["histogram"]).get_total_count() == r["ops"] > 0, req["id"]
        measured += 1
    assert measured >= len(primitives(hello)) // 2, "most operations should run on some backend"


def test_malformed_requests_get_the_protocols_errors(worker):
    """Each request a worker cannot act on gets one ``error`` with the protocol's code, its id
    when it had one, and a message; the worker goes on reading after each."""
    _, binary = worker
    (hello,) = ask(binary)
    backend, op = a_measured_case(binary, hello)
    limits = hello["limits"]

    def run(i: str, **fields) -> str:
        return json.dumps({"type": "run", "id": i, "backend": backend, "op": op, **SHORT, **fields})

    lines = [run("before-hello"), json.dumps({"type": "hello", "protocol": 1}),
             "not json", json.dumps({"no": "type"}), json.dumps({"type": "frob", "id": "frob"}),
             run("op", op="no-such-op"), run("backend", backend="no-such-backend"),
             run("param", params={"no_such_param": 1}),
             run("threads", threads=int(limits["max_threads"]) + 1),
             run("size", params={"size_bytes": int(limits["max_size_bytes"]) + 1}),
             json.dumps({"type": "run", "id": "long", "pad": "x" * int(limits["max_request_bytes"])}),
             run("after")]
    answers, status = talk(binary, lines)
    assert status == 0
    before, _, not_json, no_type, frob, unknown_op, unknown_backend, param, threads, size, long, after = answers
    expected = [(before, "bad_request", "before-hello"), (not_json, "bad_request", None), (no_type, "bad_request", None),
                (frob, "bad_request", "frob"), (unknown_op, "unknown_op", "op"),
                (unknown_backend, "unknown_backend", "backend"), (param, "bad_params", "param"),
                (threads, "bad_params", "threads"), (size, "bad_params", "size"), (long, "bad_request", None)]
    for answer, code, request_id in expected:
        assert answer["type"] == "error" and answer["code"] == code, (code, answer)
        assert answer["message"] and "\n" not in answer["message"], answer
        if request_id is not None:
            assert answer.get("id") == request_id, (code, answer)
    assert after["type"] == "result" and after["status"] == "ok", after  # still serving


def test_another_protocol_version_is_refused_and_the_worker_exits(worker):
    _, binary = worker
    answers, status = talk(binary, [json.dumps({"type": "hello", "protocol": 99})])
    assert status == 2 and [a["code"] for a in answers] == ["protocol_mismatch"], answers


def test_each_workload_answers_check_and_runs_in_the_protocols_result(worker):
    """Every workload a worker announces with a server side of its own (socket mode): ``check``
    answers supported with its defaults, and a short run is measured — negotiation validated,
    the server's CPU and transactions over the window — in a result valid against the schema."""
    jsonschema = pytest.importorskip("jsonschema")
    _, binary = worker
    (hello,) = ask(binary)
    workloads = [op for op, e in hello["op_params"].items()
                 if e.get("workload") and e.get("server") and not e.get("job") and not e.get("required")
                 and "socket" in (e.get("modes") or [])]
    if not workloads:
        pytest.skip(f"{binary.name} announces no socket workload with a server side")
    backend = software_backends(hello)[0]
    for op in workloads:
        base = {"backend": backend, "op": op, "params": {"load": "closed:1"}}
        checked, result = ask(binary, {"type": "check", "id": "c", **base},
                              {"type": "run", "id": "r", **base, "seconds": 0.2, "warmup_s": 0.05})[1:]
        assert checked["type"] == "checked" and checked["status"] in ("supported", "unsupported"), checked
        if checked["status"] == "unsupported":
            assert checked["reason"] and result["status"] == "unsupported", (checked, result)
            continue
        jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(result)
        assert result["status"] == "ok", result.get("reason")
        assert result["validation"]["negotiated"] == "pass", result["validation"]
        server = result["server"]
        assert server["transactions"] > 0 and server["cpu_ns"] > 0 and server.get("window") is True, server
        assert result["ops"] > 0 and result["cpu_ns_total"] > 0
