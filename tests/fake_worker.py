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
  rep_factors     [f1, f2, ...] multiplies the latency of repetition r by f[(r-1) % len]
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

CPU masks (run field ``cpu_mask``): as in the real worker, ring and rustcrypto (and mock) answer
"unsupported: <library> has no runtime CPU capability mask" for any mask but baseline; openssl
and aws-lc check that OPENSSL_ia32cap in their environment is the mask's value (invalid
otherwise). Every result echoes ``cpu_mask`` and reports ``capabilities.env``.

The configuration and repetition are read from the run's id (``backend/label/size/config#rep``,
see plan.Run.request_id). Backends ``mock``, ``mock:SCALE``, ``mock:crash`` and ``mock:hang``
behave as in the real worker (latency = size_bytes × SCALE ns, or 1000 × SCALE unsized).
"""

import json
import os
import sys
import time

from hdrh.histogram import HdrHistogram

DEFAULT_OPS = ["sha1", "sha256", "sha384", "sha512", "sha3-256", "hmac-sha256",
               "aes-128-gcm-seal", "aes-128-gcm-open", "aes-256-gcm-seal", "aes-256-gcm-open",
               "chacha20-poly1305-seal", "chacha20-poly1305-open", "rsa2048-sign", "rsa2048-verify",
               "rsa3072-sign", "rsa3072-verify", "rsa4096-sign", "rsa4096-verify",
               "ecdsa-p256-sign", "ecdsa-p256-verify", "ecdsa-p384-sign", "ecdsa-p384-verify",
               "ed25519-sign", "ed25519-verify",
               "ml-dsa-44-keygen", "ml-dsa-44-sign", "ml-dsa-44-verify",
               "ml-dsa-65-keygen", "ml-dsa-65-sign", "ml-dsa-65-verify",
               "ml-dsa-87-keygen", "ml-dsa-87-sign", "ml-dsa-87-verify",
               "x25519-keygen", "x25519-derive", "ecdh-p256-derive", "ffdh-2048-derive",
               "ml-kem-512-keygen", "ml-kem-512-encaps", "ml-kem-512-decaps",
               "ml-kem-768-keygen", "ml-kem-768-encaps", "ml-kem-768-decaps",
               "ml-kem-1024-keygen", "ml-kem-1024-encaps", "ml-kem-1024-decaps",
               "x25519mlkem768-keygen", "x25519mlkem768-encaps", "x25519mlkem768-decaps"]
UNSIZED_SUFFIXES = ("-derive", "-encaps", "-decaps", "-keygen")
CPU_MASKS = [{"name": "baseline", "openssl_ia32cap": None},
             {"name": "no-aesni", "openssl_ia32cap": "~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0"},
             {"name": "no-shani", "openssl_ia32cap": "~0x0:~0x20000000:~0x0:~0x0:~0x0"},
             {"name": "no-avx2", "openssl_ia32cap": "~0x0:~0xc0230020:~0x0:~0x0:~0x0"},
             {"name": "no-avx512", "openssl_ia32cap": "~0x0:~0xc0230000:~0x0:~0x0:~0x0"}]
MASKABLE = ("openssl", "aws-lc")
ENV = os.environ.get("OPENSSL_ia32cap")
# The worker build this fake pretends to be ("fips": only FIPS_BACKENDS run, in FIPS mode).
BUILD = os.environ.get("FAKE_WORKER_BUILD", "default")
OPENSSL_VERSION = os.environ.get("FAKE_WORKER_OPENSSL_VERSION") or "fake-1.0"

SPEC = json.loads(os.environ.get("FAKE_WORKER_SPEC") or "{}")
BACKENDS = SPEC.get("backends", ["openssl", "aws-lc", "ring", "rustcrypto"])
OPS = SPEC.get("ops", DEFAULT_OPS)
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


def hello(req):
    if req.get("protocol") != 1:
        send({"type": "error", "code": "protocol_mismatch",
              "message": f"this worker speaks protocol 1, not {req.get('protocol')}"})
        sys.exit(2)
    backends = [{"backend": b, "library": b.upper(), "library_version": version_of(b), "fips": in_fips_mode(b),
                 "capabilities": {"maskable": b in MASKABLE, "env": ENV}}
                for b in BACKENDS]
    if req.get("detail"):
        for b in backends:
            b["ops"] = [{"op": op, "status": "supported", "reason": ""} for op in OPS]
    send({"type": "hello", "protocol": SPEC.get("protocol", 1), "worker_version": "0.0.0-fake", "build": BUILD,
          "cpu": {"model": "Fake CPU", "flags": ["aes"], "logical_cpus": 2, "tsc": False},
          "cpu_masks": SPEC.get("cpu_masks", CPU_MASKS), "backends": backends, "ops": OPS})


def parse_id(run_id):
    key, _, rep = run_id.rpartition("#")
    key = key.split("/cpu=")[0].split("/build=")[0]
    parts = key.split("/", 3)
    config = parts[3] if len(parts) == 4 else ""
    return config, int(rep) if rep.isdigit() else 1


def matches(rules, backend, op, config, rep):
    return any(r in (f"{backend}/{op}", config, backend, f"{config}#{rep}") for r in rules)


def run(req):
    backend, op, params = req.get("backend"), req.get("op"), dict(req.get("params") or {})
    rid = req.get("id", "")
    config, rep = parse_id(rid)
    is_mock = backend == "mock" or str(backend).startswith("mock:")
    if not is_mock and backend not in BACKENDS:
        return send({"type": "error", "id": rid, "code": "unknown_backend",
                     "message": f"unknown backend '{backend}'; known: {', '.join(BACKENDS)}"})
    if op not in OPS:
        return send({"type": "error", "id": rid, "code": "unknown_op",
                     "message": f"unknown operation '{op}'; known: {', '.join(OPS)}"})
    sized = not op.endswith(UNSIZED_SUFFIXES)
    if sized:
        params.setdefault("size_bytes", 32 if op.endswith(("-sign", "-verify")) else 1024)
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
            "threads": req.get("threads", 1), "cpu_mask": mask,
            "capabilities": {"maskable": backend in MASKABLE, "env": ENV}}
    if mask is not None:
        wanted = {m["name"]: m["openssl_ia32cap"] for m in CPU_MASKS}
        if mask not in wanted:
            return send({"type": "error", "id": rid, "code": "bad_params", "message": f"unknown cpu_mask '{mask}'"})
        if backend not in MASKABLE:
            if mask != "baseline":
                return send({**base, "status": "unsupported",
                             "reason": f"{str(backend).upper()} has no runtime CPU capability mask"})
        elif ENV != wanted[mask] or (mask != "baseline" and backend in SPEC.get("mask_ignored", [])):
            return send({**base, "status": "invalid",
                         "reason": f"capability mask not applied: {backend} (fake) saw OPENSSL_ia32cap={ENV!r}"})
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
    latency = max(1, int(round(latency * factors[(rep - 1) % len(factors)])))
    seconds = float(req.get("seconds", 1.0))
    threads = int(req.get("threads", 1))
    ops = max(1, int(seconds * 1e9 / latency)) * threads
    hist = HdrHistogram(1, 3_600_000_000_000, 3)
    hist.record_value(latency, ops)
    wall_ns = ops * latency // threads
    send({**base, "status": "ok", "ops": ops, "bytes_per_op": size if sized else 0,
          "batch": 1 if latency >= 10_000 else max(1, 10_000 // latency),
          "timing": "individual" if latency >= 10_000 else "batched",
          "wall_ns": wall_ns, "cpu_ns": [wall_ns] * threads, "cpu_ns_total": wall_ns * threads,
          "tsc_cycles": None, "steal_ticks": 1, "total_ticks": 200, "busy_ticks": 100,
          "histogram": hist.encode().decode("ascii"), "samples": ops,
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
