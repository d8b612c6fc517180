#!/usr/bin/env python3
"""A fake ``cryptoperf-worker`` speaking protocol v1 with scripted, exact numbers.

Used by the orchestrator's unit tests (selected with CRYPTOPERF_WORKER through a small wrapper
script, see conftest.py). It never times anything: a run's latency is computed from the script
below, recorded into an HdrHistogram ``ops`` times, and the window is ``ops × latency``, so
``ops_per_s`` is exactly 1e9 / latency.

The script is JSON in the environment variable FAKE_WORKER_SPEC (all keys optional):

  protocol        int, the version announced in hello (default 1)
  backends        list of backend names (default: openssl, aws-lc, ring, rustcrypto)
  ops             list of operation names (default: the real worker's list)
  latency_ns      {"<op>": ns} base latency (default: 1000 + size_bytes ns)
  config_factor   {"<configuration>": factor} multiplies the latency of that configuration
  rep_factors     [f1, f2, ...] multiplies the latency in block b by f[(b-1) % len] (a drift
                  shared by every configuration of a block)
  noise_cv        lognormal noise of this CV on every repetition, drawn from a generator seeded
                  with the repetition's id (so reruns of a test give the same numbers)
  steal_pct       {"<configuration>#<block>": pct} the /proc/stat steal share the result reports
  steal_times     how many times in a row a steal_pct entry applies to the same id (default 1:
                  the re-run of a disturbed repetition is clean), counted in FAKE_WORKER_STATE
  unsupported     {"<backend>/<op>": reason}
  invalid         {"<backend>/<op>": reason}
  crash           ["<backend>/<op>", "<configuration>" or "<configuration>#<rep>"]  abort at the run
  hang            ["<backend>/<op>", "<configuration>" or "<configuration>#<rep>"]  never answer
  stderr_noise    true: write a log line to stderr for each request
  cpu_masks       list of {name, openssl_ia32cap} announced in hello (default: the real worker's)
  mask_factor     {"<mask>": factor} multiplies the latency when the worker was STARTED with that
                  mask's OPENSSL_ia32cap (read from its own environment, as the libraries do)
  mask_ignored    ["<backend>"]: a masked run on that backend answers invalid, "capability mask
                  not applied: ..." (what the real worker says when a library ignores the mask)

The environment variable FAKE_WORKER_OPENSSL_VERSION (outside the spec, so that two fake worker
builds can differ under one spec) sets the openssl backend's ``library_version`` in hello and
results (default "fake-1.0"), e.g. "3.6.3 1 Jul 2026" for a fake openssl@3.6 build.

The worker's rules — operation names, which parameters each takes and their defaults, allowed
values, limits, CPU masks — are not the fake's own: it reads them from
tests/fixtures/worker-hello.json, a snapshot of the real worker's hello (test_fake_worker.py
checks it against the real one), and refuses what the real worker refuses.

CPU masks (run field ``cpu_mask``): as in the real worker, ring and rustcrypto (and mock) answer
"unsupported: <library> has no runtime CPU capability mask" for any mask but baseline; openssl
and aws-lc check that OPENSSL_ia32cap in their environment is the mask's value (invalid
otherwise), and with ``cpu_vector_unmasked`` that their vector equals it less the mask's bits
(an empty OPENSSL_ia32cap clears every capability, as it does in the libraries). Every result
echoes ``cpu_mask`` and reports ``capabilities``.

The configuration and block are read from the request's id (``backend/label/size/config#block``,
see model.Repetition.request_id). Backends ``mock``, ``mock:SCALE``, ``mock:crash`` and
``mock:hang`` behave as in the real worker (latency = size_bytes × SCALE ns, or 1000 × SCALE
unsized). A request's ``batch`` is honoured; without one the fake "calibrates" to
ceil(10 µs / latency), a power of two, as the worker does.
"""

import hashlib
import json
import math
import os
import random
import re
import sys
import time
from pathlib import Path

from hdrh.histogram import HdrHistogram

RULES = json.loads((Path(__file__).resolve().parent / "fixtures" / "worker-hello.json").read_text())
CPU_MASKS = RULES["cpu_masks"]
MASKABLE = ("openssl", "aws-lc")
#: The fake libraries' unmasked capability vector, and what an empty OPENSSL_ia32cap leaves.
UNMASKED_VECTOR = "0xfffa3203078bffff:0x405fc6f1bf07ab"
EMPTY_ENV_VECTOR = "0x400:0x0"
ENV = os.environ.get("OPENSSL_ia32cap")
# The worker build this fake pretends to be ("fips": only FIPS_BACKENDS run, in FIPS mode).
BUILD = os.environ.get("FAKE_WORKER_BUILD", "default")
OPENSSL_VERSION = os.environ.get("FAKE_WORKER_OPENSSL_VERSION") or "fake-1.0"

SPEC = json.loads(os.environ.get("FAKE_WORKER_SPEC") or "{}")
BACKENDS = SPEC.get("backends", ["openssl", "aws-lc", "ring", "rustcrypto"])
OPS = SPEC.get("ops", RULES["ops"])
FIPS_BACKENDS = SPEC.get("fips_backends", ["aws-lc"])


def in_fips_mode(backend):
    return BUILD == "fips" and backend in FIPS_BACKENDS


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(text):
    sys.stderr.write(f"fake-worker: {text}\n")
    sys.stderr.flush()


def version_of(backend):
    return OPENSSL_VERSION if backend == "openssl" else "fake-1.0"


def vector():
    """The fake libraries' capability vector under this process's OPENSSL_ia32cap."""
    if ENV == "":
        return EMPTY_ENV_VECTOR
    mask = next((m for m in CPU_MASKS if m["openssl_ia32cap"] == ENV), None)
    if ENV is None or mask is None or not mask["clears"]:
        return UNMASKED_VECTOR
    return "0x0:0x0"  # cleared: what exactly does not matter to the orchestrator


def capabilities(backend):
    if backend not in MASKABLE:
        return {"maskable": False, "env": ENV, "reason": f"{backend} has no runtime CPU capability mask"}
    return {"maskable": True, "env": ENV, "openssl_ia32cap": vector()}


def hello(req):
    if req.get("protocol") != 1:
        send({"type": "error", "code": "protocol_mismatch",
              "message": f"this worker speaks protocol 1, not {req.get('protocol')}"})
        sys.exit(2)
    backends = [{"backend": b, "library": b.upper(), "library_version": version_of(b), "fips": in_fips_mode(b),
                 "capabilities": capabilities(b)}
                for b in BACKENDS]
    if req.get("detail"):
        for b in backends:
            gone = SPEC.get("unsupported", {})
            b["ops"] = [{"op": op, "status": "unsupported" if f"{b['backend']}/{op}" in gone else "supported",
                         "reason": gone.get(f"{b['backend']}/{op}", "")} for op in OPS]
    send({"type": "hello", "protocol": SPEC.get("protocol", 1), "worker_version": "0.0.0-fake", "build": BUILD,
          "cpu": {"model": "Fake CPU", "flags": ["aes"], "logical_cpus": 2, "tsc": False},
          "cpu_masks": SPEC.get("cpu_masks", CPU_MASKS), "backends": backends, "ops": OPS,
          "limits": RULES["limits"], "op_params": RULES["op_params"], "param_values": RULES["param_values"]})


def parse_id(run_id):
    key, _, rep = run_id.rpartition("#")
    key = key.split("/cpu=")[0].split("/build=")[0]
    parts = key.split("/", 3)
    config = parts[3] if len(parts) == 4 else ""
    return config, int(rep) if rep.isdigit() else 1


def matches(rules, backend, op, config, rep):
    return any(r in (f"{backend}/{op}", config, backend, f"{config}#{rep}") for r in rules)


def refuse(rid, code, message):
    send({"type": "error", "id": rid, "code": code, "message": message})


def check_request(req, rid, op, params):
    """The real worker's checks of a run request, from its announced rules; True if refused."""
    limits = RULES["limits"]
    rules = RULES["op_params"].get(op, {"params": []})
    for name, value in params.items():
        if name not in rules["params"]:
            return refuse(rid, "bad_params", f"{op} takes no {name}") or True
        if name in RULES["param_values"] and value not in RULES["param_values"][name]:
            return refuse(rid, "bad_params", f"unknown {name} '{value}'") or True
    if params.get("size_bytes", 1) > limits["max_size_bytes"] or params.get("size_bytes", 1) < 1:
        return refuse(rid, "bad_params", f"size_bytes {params['size_bytes']} is out of range") or True
    threads, seconds, warmup = req.get("threads", 1), req.get("seconds", 1.0), req.get("warmup_s", 0.2)
    if not 1 <= threads <= limits["max_threads"]:
        return refuse(rid, "bad_params", f"threads must be 1..={limits['max_threads']}, got {threads}") or True
    if not 0 < seconds <= limits["max_seconds"]:
        return refuse(rid, "bad_params", f"seconds must be in (0, {limits['max_seconds']}], got {seconds}") or True
    if not 0 <= warmup <= limits["max_warmup_s"]:
        return refuse(rid, "bad_params", f"warmup_s must be in [0, {limits['max_warmup_s']}], got {warmup}") or True
    batch = req.get("batch")
    if batch is not None and not 1 <= batch <= limits["max_batch"]:
        return refuse(rid, "bad_params", f"batch must be 1..={limits['max_batch']}, got {batch}") or True
    vector = req.get("cpu_vector_unmasked")
    if vector is not None:
        if req.get("cpu_mask") is None:
            return refuse(rid, "bad_params", "cpu_vector_unmasked is checked against a cpu_mask's vector; "
                          "give cpu_mask too") or True
        if not re.fullmatch(r"0x[0-9a-fA-F]{1,16}:0x[0-9a-fA-F]{1,16}", str(vector)):
            return refuse(rid, "bad_params", "cpu_vector_unmasked must be '0x<word0>:0x<word1>' (hex, as "
                          f"hello's backends[].capabilities.openssl_ia32cap), got '{vector}'") or True
    return False


def steal_ticks(rid, config, rep):
    """Steal ticks (of 200) to report: spec steal_pct for this configuration#block, the first
    steal_times times this id runs (counted in a file under FAKE_WORKER_STATE)."""
    pct = SPEC.get("steal_pct", {}).get(f"{config}#{rep}")
    if pct is None:
        return 1
    state = os.environ.get("FAKE_WORKER_STATE")
    if state:
        path = Path(state) / hashlib.sha256(rid.encode()).hexdigest()
        n = int(path.read_text()) if path.exists() else 0
        path.write_text(str(n + 1))
        if n >= SPEC.get("steal_times", 1):
            return 1
    return int(round(pct * 2))


def run(req):
    backend, op, params = req.get("backend"), req.get("op"), dict(req.get("params") or {})
    rid = req.get("id", "")
    config, rep = parse_id(rid)
    is_mock = backend == "mock" or str(backend).startswith("mock:")
    if not is_mock and backend not in BACKENDS:
        return refuse(rid, "unknown_backend", f"unknown backend '{backend}'; known: {', '.join(BACKENDS)}")
    if op not in OPS:
        return refuse(rid, "unknown_op", f"unknown operation '{op}'; known: {', '.join(OPS)}")
    if check_request(req, rid, op, params):
        return
    rules = RULES["op_params"].get(op, {})
    sized = rules.get("default_size_bytes") is not None
    if sized:
        params.setdefault("size_bytes", rules["default_size_bytes"])
    size = params.get("size_bytes", 0)
    if backend == "mock:crash" or matches(SPEC.get("crash", []), backend, op, config, rep):
        log("crashing on purpose (mock:crash)")
        os.abort()
    if backend == "mock:hang" or matches(SPEC.get("hang", []), backend, op, config, rep):
        log("hanging on purpose (mock:hang)")
        while True:
            time.sleep(3600)
    mask = req.get("cpu_mask")
    base = {"type": "result", "id": rid, "backend": backend, "op": op, "library": str(backend).upper(),
            "library_version": version_of(backend), "params": params,
            "fips": in_fips_mode(backend) if SPEC.get("fips_result") is None else SPEC["fips_result"],
            "threads": req.get("threads", 1), "cpu_mask": mask, "capabilities": capabilities(backend)}
    if mask is not None:
        wanted = {m["name"]: m for m in CPU_MASKS}
        if mask not in wanted:
            return refuse(rid, "bad_params", f"unknown cpu_mask '{mask}'")
        if backend not in MASKABLE:
            if mask != "baseline":
                return send({**base, "status": "unsupported",
                             "reason": f"{str(backend).upper()} has no runtime CPU capability mask"})
        elif ENV != wanted[mask]["openssl_ia32cap"] or (mask != "baseline" and backend in SPEC.get("mask_ignored", [])):
            return send({**base, "status": "invalid",
                         "reason": f"capability mask not applied: {backend} (fake) saw OPENSSL_ia32cap={ENV!r}"})
        elif mask == "baseline" and req.get("cpu_vector_unmasked") not in (None, vector()):
            return send({**base, "status": "invalid",
                         "reason": f"capability mask not applied: {backend} (fake) uses {vector()} under "
                                   f"baseline, not {req['cpu_vector_unmasked']}"})
        else:
            base["cpu_mask_cleared"] = ["aes"] if mask == "no-aesni" else []
    if BUILD == "fips" and not is_mock and backend not in FIPS_BACKENDS:
        return send({**base, "status": "unsupported", "reason": f"{str(backend).upper()} has no FIPS mode (fake)"})
    base["validation"] = {"kat": "not applicable (fake)", "kat_source": "", "cross_checks": []}
    for status in ("unsupported", "invalid"):
        reason = SPEC.get(status, {}).get(f"{backend}/{op}")
        if reason:
            return send({**base, "status": status, "reason": reason})
    if is_mock:
        scale = float(backend.split(":", 1)[1]) if ":" in backend else 1.0
        latency = (size if sized else 1000) * scale
    else:
        latency = SPEC.get("latency_ns", {}).get(op, 1000 + size)
    latency *= SPEC.get("config_factor", {}).get(config, 1.0)
    if BUILD == "fips":
        latency *= SPEC.get("fips_factor", 1.0)
    env_mask = next((m["name"] for m in CPU_MASKS if ENV is not None and m["openssl_ia32cap"] == ENV), None)
    latency *= SPEC.get("mask_factor", {}).get(env_mask, 1.0)
    factors = SPEC.get("rep_factors") or [1.0]
    latency *= factors[(rep - 1) % len(factors)]
    cv = SPEC.get("noise_cv")
    if cv:
        rng = random.Random(hashlib.sha256(f"{rid}/{backend}".encode()).digest())
        latency *= math.exp(rng.gauss(0.0, math.sqrt(math.log1p(cv * cv))))
    latency = max(1, int(round(latency)))
    batch = req.get("batch")
    if batch is None:
        batch = 1
        while batch * latency < 10_000:
            batch *= 2
    seconds = float(req.get("seconds", 1.0))
    threads = int(req.get("threads", 1))
    ops = max(1, int(seconds * 1e9 / latency)) * threads
    hist = HdrHistogram(1, 3_600_000_000_000, 3)
    hist.record_value(latency, ops)
    wall_ns = ops * latency // threads
    send({**base, "status": "ok", "ops": ops, "bytes_per_op": size if sized else 0,
          "batch": batch, "timing": "individual" if batch == 1 else "batched",
          "wall_ns": wall_ns, "cpu_ns": [wall_ns] * threads, "cpu_ns_total": wall_ns * threads,
          "tsc_cycles": None, "steal_ticks": steal_ticks(rid, config, rep), "total_ticks": 200,
          "busy_ticks": 100, "histogram": hist.encode().decode("ascii"), "samples": ops,
          "sample_ns_stats": {"min": latency, "max": latency}})


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if SPEC.get("stderr_noise"):
            log(f"request {line[:60]}")
        try:
            req = json.loads(line)
        except json.JSONDecodeError:
            send({"type": "error", "code": "bad_request", "message": "not JSON"})
            continue
        kind = req.get("type")
        if kind == "hello":
            hello(req)
        elif kind == "run":
            run(req)
        elif kind == "bye":
            return
        else:
            send({"type": "error", "code": "bad_request", "message": f"unknown type {kind!r}"})


if __name__ == "__main__":
    main()
