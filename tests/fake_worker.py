#!/usr/bin/env python3
"""A fake ``cryptoperf-worker`` speaking protocol v1 with scripted, exact numbers.

Used by the orchestrator's unit tests (selected with CRYPTOPERF_WORKER through a small wrapper
script, see conftest.py). It never times anything: a run's latency is computed from the script
below, recorded into an HdrHistogram ``ops`` times, and the window is ``ops × latency``, so
``ops_per_s`` is exactly 1e9 / latency.

The script is JSON in the environment variable FAKE_WORKER_SPEC (all keys optional):

  protocol        int, the version announced in hello (default 1)
  backends        list of backend names (default: openssl, aws-lc, ring, rustcrypto)
  devices         list of device backend names, announced after them with ``device`` as the real
                  worker announces pkcs11 (default: none); a request for one answers
                  device_unavailable unless CRYPTOPERF_PKCS11_MODULE is set, as the real one does
  ops             list of operation names (default: the real worker's list)
  latency_ns      {"<op>": ns} base latency (default: 1000 + size_bytes ns)
  config_factor   {"<configuration>": factor} multiplies the latency of that configuration
  rep_factors     [f1, f2, ...] multiplies the latency in block b by f[(b-1) % len] (a drift
                  shared by every configuration of a block)
  noise_cv        lognormal noise of this CV on every repetition, drawn from a generator seeded
                  with the repetition's id less its build's path (so reruns of a test give the
                  same numbers)
  burn            {"<configuration>": {"<function>": ms}}: a primitive's run first spends real
                  CPU in those exported functions of the shared library ``burn_lib`` (each
                  takes the milliseconds as a double), for a sampling profiler to find; as
                  the real worker does at its window's edges, it enables and disables a
                  profiler under control around it (CRYPTOPERF_PROFILE_CTL/_ACK FIFOs)
  steal_pct       {"<configuration>#<block>": pct} the /proc/stat steal share the result reports
  steal_times     how many times in a row a steal_pct entry applies to the same id (default 1:
                  the re-run of a disturbed repetition is clean), counted in FAKE_WORKER_STATE
  other_load_pct  other work's share of the fake's 2 CPUs (%) every result reports beside the
                  worker's own (default 0: a quiet host), added to its busy ticks
  other_load_spike  {"<configuration>#<block>": pct} that repetition's other load instead, the
                  first other_load_spike_times (default 1) times its id runs (FAKE_WORKER_STATE)
  unsupported     {"<backend>/<op>": reason}
  invalid         {"<backend>/<op>": reason}
  crash           ["<backend>/<op>", "<configuration>" or "<configuration>#<rep>"]  abort at the run
  hang            ["<backend>/<op>", "<configuration>" or "<configuration>#<rep>"]  never answer
  slow            {"<configuration>#<block>": s} answer after s seconds, the first slow_times
                  (default 1) times, writing the parent's pid first (see slow_down)
  stderr_noise    true: write a log line to stderr for each request
  cpu_masks       list of {name, openssl_ia32cap} announced in hello (default: the real worker's)
  mask_factor     {"<mask>": factor} multiplies the latency when the worker was STARTED with that
                  mask's OPENSSL_ia32cap (read from its own environment, as the libraries do); masks
                  joined by '+' multiply their parts' factors unless the joined name has its own
  mask_ignored    ["<backend>"]: a masked run on that backend answers invalid, "capability mask
                  not applied: ..." (what the real worker says when a library ignores the mask)
  result_fields   {"<configuration>#<block>": {field: value}} replaces those fields of that
                  repetition's result (e.g. {"B#3": {"library_version": "fake-1.1"}}: a library
                  upgraded under a running study)

Workloads (ops whose hello entry says ``"workload": true``) take their traits from their spec
in the hello snapshot (``SPECS``: the level kinds they accept — another kind is refused, as the
real worker does —, their modes, bytes per transaction, whether they have a server side) and
answer like the real worker (docs/worker-protocol.md, "Workloads"); every result has the same
measurement fields (``measured``), and a kind whose result is its own has a builder in
``RESULTS``, its refusals in ``REFUSALS``. A protocol workload (TLS, IKE) answers from the
script: ``latency_ns`` (default WORKLOAD_LATENCY_NS plus the bytes per transaction, a transfer's
size), ``config_factor``, ``rep_factors``, ``noise_cv``, masks and ``steal_pct`` give the base
latency B of one transaction alone, and then, with

  contention      the share of B each extra closed-loop connection adds (default 0.25), so
                  capacity C = 1e9 / (B × contention) transactions/s
  client_cpu_share  the client's share of B that is CPU time (default 0.4); the server's is
                  server_cpu_share (default 0.6)

a level ``closed:N`` has latency B × (1 + contention × (N − 1)) and N × 1e9 / latency
transactions/s (paced ``closed:N@R``: at most R); ``open:R`` runs min(R, C) transactions/s at
latency B / (1 − u), u = min(R / C, 0.95), with ``late`` growing from u = 0.8. Every histogram
has the same shape around that latency L: 90 % at L, 9 % at 1.5 L, 0.9 % at 3 L, the rest at
6 L (so p99 = 1.5 L, p99.9 = 3 L when ops ≥ 1000). The window is ``seconds`` (nothing sleeps).
A workload with a server side reports its counters over exactly the window (``server.window``).
``tls-handshake``/``tls-bulk`` with group x25519mlkem768 on ring answer unsupported, "ring has
no ML-KEM".

``storage`` (a file I/O through an encryption layer) answers from a model of a CPU and a
device instead: an I/O of ``block_bytes`` costs ``STORAGE_SYSCALL_NS`` of system time plus
``storage_ns_per_byte[scheme]`` (default STORAGE_NS_PER_BYTE; 0 for ``cache = cached``, whose
reads are served above the encryption) per byte of user time; the host has
``storage_cpus`` CPUs (default 2) and, for ``direct = true``, a device of ``storage_device_mb_s``
(default 400) MB/s. A closed level of N threads runs at the smaller of what min(N, CPUs) CPUs
and the device allow; an open level at its offered rate, or that capacity if smaller. Latency
per I/O = N × block ÷ throughput (closed) or the CPU time of one I/O (open). It writes a 4 KiB
file ``data`` into the request's ``dir`` and leaves it there (the orchestrator removes the
directory, as after a killed worker). ``ring`` answers
the XTS schemes unsupported ("ring has no AES-XTS"), ``layer = dm-crypt`` unsupported ("dm-crypt
layer unavailable: … (fake)").

``fleet-job`` (a job over ``targets:N``, docs/worker-protocol.md "fleet-job") answers from a
schedule it computes, deterministically: each target's phases (the job kind's, from the hello
snapshot's ``job_kinds``, or ``phases``) take ``fleet_phase_ns[phase]`` (default
FLEET_PHASE_NS) × the script's latency factor (config_factor, rep_factors, noise_cv, masks,
fips_factor: as for other workloads, relative to WORKLOAD_LATENCY_NS["fleet-job"]) ×
``fleet_phase_factor[configuration][phase]`` (default 1) × the slice's contention,
1 + ``fleet_contention`` (default 0.05) × (cap − 1) × (1 + ``fleet_slice_overhead`` (default 0.05)
× (slices − 1)); target i goes to slice i mod slices, whose ``cap`` lanes each take the next of
its targets when free; a job with ``auth = sign`` starts with a ``stage`` of
FLEET_STAGE_NS × the factor. ``inject_close`` targets fail half-way through their second phase,
``inject_bad_cert`` ones in connect, each with a reason as the real worker's; ``inject_tamper``
targets report one mismatch. Processes report CPU timelines, peak RSS and descriptors (a slice:
cap + 4). Its ``check`` answers ``planned_wait_s``, the latency model's waits as the real worker
plans them (``planned_wait_s``: each draw at its distribution's mean), and ``planned_work_s``,
its 300 ms setup; with ``fleet_sleeps: true`` in the script a run really takes that long, so
that a study's time estimate can be held against its wall clock. In the FIPS build, ``sign_digest`` (or ``digest``) sha1 is unsupported, as in the real
worker.

The environment variable FAKE_WORKER_HELLO names another hello snapshot to read instead of the
fixture (a worker older than the orchestrator, say). FAKE_WORKER_OPENSSL_VERSION (outside the spec, so that two fake worker
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

# The worker build this fake pretends to be ("fips": only FIPS_BACKENDS run, in FIPS mode; "go",
# "go-fips": the Go worker, its one backend `go` and the rules of its hello's snapshot).
BUILD = os.environ.get("FAKE_WORKER_BUILD", "default")
GO_BUILDS = ("go", "go-fips")
RULES = json.loads(Path(os.environ.get("FAKE_WORKER_HELLO") or
                        Path(__file__).resolve().parent / "fixtures" /
                        ("worker-go-hello.json" if BUILD in GO_BUILDS else "worker-hello.json")).read_text())
CPU_MASKS = RULES["cpu_masks"]
MASKABLE = ("openssl", "aws-lc")
#: The fake libraries' unmasked capability vector, and what an empty OPENSSL_ia32cap leaves.
UNMASKED_VECTOR = "0xfffa3203078bffff:0x405fc6f1bf07ab"
EMPTY_ENV_VECTOR = "0x400:0x0"
ENV = os.environ.get("OPENSSL_ia32cap")
OPENSSL_VERSION = os.environ.get("FAKE_WORKER_OPENSSL_VERSION") or "fake-1.0"

SPEC = json.loads(os.environ.get("FAKE_WORKER_SPEC") or "{}")
BACKENDS = ["go"] if BUILD in GO_BUILDS else SPEC.get("backends", ["openssl", "aws-lc", "ring", "rustcrypto"])
OPS = SPEC.get("ops", RULES["ops"])
FIPS_BACKENDS = SPEC.get("fips_backends", ["aws-lc"])
DEVICES = SPEC.get("devices", [])

#: The workloads and their specs (level kinds, modes, bytes per transaction, ...): the hello
#: snapshot's, the one table the fake's workload traits come from.
SPECS = {op: entry for op, entry in RULES["op_params"].items() if entry.get("workload")}
#: A workload transaction's scripted latency alone (ns) without latency_ns (a protocol workload
#: with bytes per transaction, a transfer: + those bytes).
WORKLOAD_LATENCY_NS = {"tls-handshake": 500_000, "tls-bulk": 200_000, "ike-phase1": 1_500_000,
                       "storage": 100_000,  # storage, fleet-job: only the scale matters
                       "fleet-job": 1_000_000}
#: fleet-job: each phase's time for one target alone (ns), and the job-level stage's.
FLEET_PHASE_NS = {"connect": 2_000_000, "push": 1_500_000, "checks": 2_500_000, "report": 1_000_000}
FLEET_STAGE_NS = 3_000_000
#: The latency histogram's shape around a level's latency L: (share of transactions, × L).
WORKLOAD_SHAPE = ((0.9, 1.0), (0.09, 1.5), (0.009, 3.0), (0.001, 6.0))
TLS_VERSIONS = {"1.3": "TLSv1.3", "1.2": "TLSv1.2"}
TLS13_SUITES = {"aes-128-gcm": "TLS_AES_128_GCM_SHA256", "aes-256-gcm": "TLS_AES_256_GCM_SHA384",
                "chacha20-poly1305": "TLS_CHACHA20_POLY1305_SHA256"}
TLS12_BULK = {"aes-128-gcm": "AES_128_GCM_SHA256", "aes-256-gcm": "AES_256_GCM_SHA384",
              "chacha20-poly1305": "CHACHA20_POLY1305_SHA256"}
GROUPS = {"x25519": "X25519", "p256": "secp256r1", "x25519mlkem768": "X25519MLKEM768"}
#: storage: user CPU ns per byte of each scheme (what the release worker measured for OpenSSL
#: on page-cached reads, rounded), system ns per I/O, and the device's MB/s for direct I/O.
STORAGE_NS_PER_BYTE = {"clear": 0.04, "aes-128-xts": 0.14, "aes-256-xts": 0.18, "aes-256-gcm": 0.27}
STORAGE_SYSCALL_NS = 5_000
SIGNATURE_SCHEMES = {"rsa2048": "rsa_pss_rsae_sha256", "rsa4096": "rsa_pss_rsae_sha256",
                     "ecdsa-p256": "ecdsa_secp256r1_sha256", "ed25519": "ed25519"}


def is_workload(op):
    """True for a workload op (its hello entry says so)."""
    return op in SPECS


def mode_of(op, params):
    """The mode a workload runs in: its ``mode`` parameter, else its spec's default."""
    return str(params.get("mode", SPECS[op]["default_mode"]))


def fips_approval(op: str, params: dict) -> dict:
    """``fips_approved`` and ``fips_reason`` of a primitive timed in FIPS mode, from the FIPS
    table of the hello snapshot (``op_params[op].fips``), as the real worker reports them."""
    table = RULES["op_params"].get(op, {}).get("fips")
    if table is None:
        return {}
    for name, values in (table.get("not_approved_with") or {}).items():
        if str(params.get(name)) in values:
            return {"fips_approved": False, "fips_reason": values[str(params.get(name))]}
    return {"fips_approved": bool(table.get("approved")), "fips_reason": table.get("reason")}


def in_fips_mode(backend):
    return (BUILD == "fips" and backend in FIPS_BACKENDS) or BUILD == "go-fips"


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
                for b in BACKENDS + DEVICES]
    for b in backends:
        if b["backend"] in DEVICES:
            b["device"] = b["backend"]
    if req.get("detail"):
        for b in backends:
            gone = SPEC.get("unsupported", {})
            b["ops"] = [{"op": op, "status": "unsupported" if f"{b['backend']}/{op}" in gone else "supported",
                         "reason": gone.get(f"{b['backend']}/{op}", "")} for op in OPS]
    send({"type": "hello", "protocol": SPEC.get("protocol", 1), "worker_version": "0.0.0-fake", "build": BUILD,
          "cpu": {"model": "Fake CPU", "flags": ["aes"], "logical_cpus": 2, "tsc": False},
          "cpu_masks": SPEC.get("cpu_masks", CPU_MASKS), "backends": backends, "ops": OPS,
          "limits": RULES["limits"], "op_params": RULES["op_params"], "param_values": RULES["param_values"],
          "profile_control": RULES.get("profile_control")})


def parse_id(run_id):
    key, _, rep = run_id.rpartition("#")
    key = key.split("/cpu=")[0].split("/build=")[0]
    # backend/label/size/config: the label may hold a "/" (a workload's "@ 500/s"), the
    # configuration name does not
    parts = key.rsplit("/", 2)
    config = parts[2] if len(parts) == 3 and "/" in parts[0] else ""
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
    if is_workload(op) and (threads != 1 or req.get("batch") is not None):
        return refuse(rid, "bad_params", f"{op}: a workload takes its concurrency from params.load "
                      "(closed:N, open:RATE), not threads or batch") or True
    if is_workload(op) and "load" in params:
        load = parse_load(str(params["load"]))
        if load is None:
            return refuse(rid, "bad_params", f"load '{params['load']}' is not one of closed:N, closed:N@RATE, "
                          "open:RATE or open:RATE/THREADS") or True
        takes = SPECS[op]["levels"]
        if load["kind"] not in takes:
            return refuse(rid, "bad_params", f"{op}: a {load['kind']} level is not one of its levels "
                          f"({', '.join(takes)})") or True
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


def other_load_ticks(rid):
    """Busy ticks (of 200) that other work adds to a result with id ``rid``: spec
    ``other_load_spike`` for its configuration#block the first ``other_load_spike_times`` times
    this id runs (counted in a file under FAKE_WORKER_STATE), else ``other_load_pct``."""
    config, rep = parse_id(rid)
    pct = float(SPEC.get("other_load_pct", 0.0))
    spike = SPEC.get("other_load_spike", {}).get(f"{config}#{rep}")
    state = os.environ.get("FAKE_WORKER_STATE")
    if spike is not None and state:
        path = Path(state) / ("load-" + hashlib.sha256(rid.encode()).hexdigest())
        n = int(path.read_text()) if path.exists() else 0
        path.write_text(str(n + 1))
        if n < SPEC.get("other_load_spike_times", 1):
            pct = float(spike)
    return int(round(pct * 2))


def slow_down(config, rep):
    """Spec ``slow`` {"<configuration>#<block>": seconds}: the first ``slow_times`` (default 1)
    times that id runs (counted under FAKE_WORKER_STATE), write the pid of this worker's parent
    (the process running the repetition: a Ray task's worker process) to
    ``FAKE_WORKER_STATE/slow-<configuration>#<block>.ppid``, then take that long to answer —
    leaving early, without answering, if the parent dies (a killed Ray worker's orphan must not
    linger)."""
    seconds = SPEC.get("slow", {}).get(f"{config}#{rep}")
    state = os.environ.get("FAKE_WORKER_STATE")
    if seconds is None or not state:
        return
    count = Path(state) / f"slow-{config}#{rep}.count"
    n = int(count.read_text()) if count.exists() else 0
    count.write_text(str(n + 1))
    if n >= SPEC.get("slow_times", 1):
        return
    parent = os.getppid()
    marker = Path(state) / f"slow-{config}#{rep}.ppid"
    marker.with_suffix(".tmp").write_text(str(parent))
    marker.with_suffix(".tmp").rename(marker)
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        if os.getppid() != parent:
            log("parent died while slow on purpose: exiting")
            sys.exit(3)
        time.sleep(0.05)


def run(req):
    backend, op, params = req.get("backend"), req.get("op"), dict(req.get("params") or {})
    rid = req.get("id", "")
    config, rep = parse_id(rid)
    is_mock = backend == "mock" or str(backend).startswith("mock:")
    if not is_mock and backend not in BACKENDS + DEVICES:
        return refuse(rid, "unknown_backend", f"unknown backend '{backend}'; known: {', '.join(BACKENDS + DEVICES)}")
    if device_refusal(rid, backend):
        return
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
    slow_down(config, rep)
    mask = req.get("cpu_mask")
    base = {"type": "result", "id": rid, "backend": backend, "op": op, "library": str(backend).upper(),
            "library_version": version_of(backend), "params": params,
            "fips": in_fips_mode(backend) if SPEC.get("fips_result") is None else SPEC["fips_result"],
            "threads": req.get("threads", 1), "cpu_mask": mask, "capabilities": capabilities(backend)}
    if base["fips"] and not is_workload(op):
        base.update(fips_approval(op, params))
    base.update(SPEC.get("result_fields", {}).get(f"{config}#{rep}", {}))
    if mask is not None and mask_answered(req, base, backend, mask):
        return
    if BUILD == "fips" and not is_mock and backend not in FIPS_BACKENDS:
        return send({**base, "status": "unsupported", "reason": f"{str(backend).upper()} has no FIPS mode (fake)"})
    base["validation"] = {"kat": "not applicable (fake)", "kat_source": "", "cross_checks": []}
    if is_workload(op):
        defaults = RULES["op_params"].get(op, {}).get("defaults") or {}
        params = {**{k: v for k, v in defaults.items() if k != "size_bytes" or sized}, **params}
        base["params"] = params
        why = workload_refusal(backend, op, params)
        if why:
            return send({**base, "status": "unsupported", "reason": why})
    for status in ("unsupported", "invalid"):
        reason = SPEC.get(status, {}).get(f"{backend}/{op}")
        if reason:
            return send({**base, "status": status, "reason": reason})
    latency = scripted_latency(rid, backend, op, params, size if sized else None, config, rep)
    if op in RESULTS:  # relative to the kind's own scale
        return send(RESULTS[op](req, base, params, latency / WORKLOAD_LATENCY_NS[op], config, rep))
    if is_workload(op):
        return send(workload_result(req, base, op, params, max(1.0, latency), config, rep))
    burn(config)
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
    send(measured(base, ops, hist, wall_ns, [wall_ns] * threads, steal_ticks(rid, config, rep), 100,
                  size if sized else 0, batch=batch, sample_ns=(latency, latency)))


def burn(config):
    """Spend real CPU in the script's ``burn_lib`` (a shared library of the test's): for each
    ``function: ms`` of ``burn[config]``, call that exported function with ``ms``, which keeps a
    CPU busy inside it that long — something a sampling profiler can attribute by name."""
    plan = SPEC.get("burn", {}).get(config)
    if not plan:
        return
    import ctypes
    lib = ctypes.CDLL(SPEC["burn_lib"])
    ctl, ack = os.environ.get("CRYPTOPERF_PROFILE_CTL"), os.environ.get("CRYPTOPERF_PROFILE_ACK")
    control = (open(ctl, "w"), open(ack)) if ctl and ack else None  # the burn is the "window"

    def say(command):
        if control:
            control[0].write(command + "\n")
            control[0].flush()
            control[1].readline()

    say("enable")
    for function, ms in plan.items():
        f = getattr(lib, function)
        f.argtypes = [ctypes.c_double]
        f(float(ms))
    say("disable")


def joined_value(mask):
    """OPENSSL_ia32cap of masks joined by '+' (every bit any clears), as the real worker reads
    such a name; None for anything else."""
    names = str(mask).split("+")
    known = {m["name"]: m["openssl_ia32cap"] for m in CPU_MASKS}
    if len(names) < 2 or len(set(names)) != len(names) or any(n not in known or n == "baseline" for n in names):
        return None
    words = [0] * len(known["baseline"].split(":"))
    for n in names:
        for i, w in enumerate(known[n].split(":")):
            words[i] |= int(w.removeprefix("~0x"), 16)
    return ":".join(f"~0x{w:016x}" for w in words)


def env_mask_factor():
    """The latency factor of the mask this worker was started with (``mask_factor``): a joined
    mask's own when scripted, else the product of its parts'."""
    factors = SPEC.get("mask_factor", {})
    for m in CPU_MASKS:
        if ENV is not None and m["openssl_ia32cap"] == ENV:
            return factors.get(m["name"], 1.0)
    for name in factors:
        if ENV is not None and joined_value(name) == ENV:
            return factors[name]
    names = [m["name"] for m in CPU_MASKS if m["name"] != "baseline"]
    import itertools
    for k in range(2, len(names) + 1):
        for combo in itertools.combinations(names, k):
            if ENV is not None and joined_value("+".join(combo)) == ENV:
                out = 1.0
                for n in combo:
                    out *= factors.get(n, 1.0)
                return out
    return 1.0


def mask_answered(req, base, backend, mask):
    """Answer a run whose ``cpu_mask`` the fake refuses (unknown: an error; a library without a
    mask: unsupported; a mask not applied: invalid) and return True; else note the capabilities
    it clears in ``base`` and return False."""
    rid = req.get("id", "")
    wanted = {m["name"]: m for m in CPU_MASKS}
    if joined_value(mask) is not None:
        wanted[mask] = {"name": mask, "openssl_ia32cap": joined_value(mask)}
    if mask not in wanted:
        return refuse(rid, "bad_params", f"unknown cpu_mask '{mask}'") or True
    if backend not in MASKABLE:
        if mask != "baseline":
            return send({**base, "status": "unsupported",
                         "reason": f"{str(backend).upper()} has no runtime CPU capability mask"}) or True
    elif ENV != wanted[mask]["openssl_ia32cap"] or (mask != "baseline" and backend in SPEC.get("mask_ignored", [])):
        return send({**base, "status": "invalid",
                     "reason": f"capability mask not applied: {backend} (fake) saw OPENSSL_ia32cap={ENV!r}"}) or True
    elif mask == "baseline" and req.get("cpu_vector_unmasked") not in (None, vector()):
        return send({**base, "status": "invalid",
                     "reason": f"capability mask not applied: {backend} (fake) uses {vector()} under "
                               f"baseline, not {req['cpu_vector_unmasked']}"}) or True
    else:
        base["cpu_mask_cleared"] = ["aes"] if mask == "no-aesni" else []
    return False


def scripted_latency(rid, backend, op, params, size, config, rep):
    """One operation's (or a workload transaction's alone) latency in ns from the script: the
    base (mock: size × SCALE; latency_ns; a workload's WORKLOAD_LATENCY_NS, plus its bytes per
    transaction for a protocol workload; else 1000 + size) times the configuration's, the FIPS
    build's, the mask's and the block's factors, with the script's noise."""
    if backend == "mock" or str(backend).startswith("mock:"):
        scale = float(backend.split(":", 1)[1]) if ":" in backend else 1.0
        latency = (size if size is not None else 1000) * scale
    elif is_workload(op):
        own = op in RESULTS  # a protocol workload's transaction also moves its bytes per transaction
        default = WORKLOAD_LATENCY_NS.get(op, 500_000) + (0 if own else bytes_per_tx(op, params))
        latency = SPEC.get("latency_ns", {}).get(op, default)
    else:
        latency = SPEC.get("latency_ns", {}).get(op, 1000 + (size or 0))
    latency *= SPEC.get("config_factor", {}).get(config, 1.0)
    if BUILD == "fips":
        latency *= SPEC.get("fips_factor", 1.0)
    latency *= env_mask_factor()
    factors = SPEC.get("rep_factors") or [1.0]
    latency *= factors[(rep - 1) % len(factors)]
    cv = SPEC.get("noise_cv")
    if cv:
        # seeded without the build's path (a test's temporary directory): the same numbers on
        # every run of a test, as the docstring promises
        seed = re.sub(r"/build=[^#]*", "", rid)
        rng = random.Random(hashlib.sha256(f"{seed}/{backend}".encode()).digest())
        latency *= math.exp(rng.gauss(0.0, math.sqrt(math.log1p(cv * cv))))
    return latency


def bytes_per_tx(op, params):
    """The bytes one transaction of workload ``op`` moves (its spec's bytes_per_tx_param), 0
    for one that names none."""
    name = SPECS[op].get("bytes_per_tx_param")
    return int(params.get(name, 0)) if name else 0


def parse_load(text):
    """``closed:N``, ``closed:N@R``, ``open:R``, ``open:R/T``, ``targets:N`` as the worker's
    ``load`` object (kind, concurrency, threads or targets, rate_per_s, corrected), within the
    hello's limits (max_concurrency, open_threads, max_targets), or None when malformed."""
    limits = RULES["limits"]
    most, threads, targets = limits["max_concurrency"], limits["open_threads"], limits["max_targets"]
    m = re.fullmatch(r"closed:(\d+)(?:@(\d+(?:\.\d+)?))?", text.strip())
    if m and 1 <= int(m.group(1)) <= most:
        return {"kind": "closed", "concurrency": int(m.group(1)),
                "rate_per_s": float(m.group(2)) if m.group(2) else None, "corrected": False}
    m = re.fullmatch(r"open:(\d+(?:\.\d+)?)(?:/(\d+))?", text.strip())
    if m and float(m.group(1)) > 0 and 1 <= int(m.group(2) or threads) <= most:
        return {"kind": "open", "threads": int(m.group(2) or threads), "rate_per_s": float(m.group(1)),
                "corrected": True}
    m = re.fullmatch(r"targets:(\d+)", text.strip())
    if m and 1 <= int(m.group(1)) <= targets:
        return {"kind": "targets", "targets": int(m.group(1)), "rate_per_s": None, "corrected": False}
    return None


def shaped_histogram(ops, latency):
    """``ops`` transactions around ``latency`` ns in WORKLOAD_SHAPE, as an HdrHistogram."""
    hist = HdrHistogram(1, 3_600_000_000_000, 3)
    left = ops
    for i, (share, factor) in enumerate(WORKLOAD_SHAPE):
        count = left if i == len(WORKLOAD_SHAPE) - 1 else min(left, int(ops * share + 0.5))
        if count:
            hist.record_value(max(1, int(latency * factor)), count)
        left -= count
    return hist


def split(total, threads):
    """``total`` CPU ns over ``threads`` threads (the first takes the rest)."""
    out = [total // threads] * threads
    out[0] += total - sum(out)
    return out


def busy_ticks(own_ns, wall_ns):
    """The host's busy ticks (of 200, over the fake's 2 CPUs): the worker's own CPU and 1 %
    more, so the orchestrator sees no other load."""
    return min(200, int(round(200 * (100.0 * own_ns / (wall_ns * 2) + 1.0) / 100)))


def measured(base, ops, hist, wall_ns, cpu_ns, ticks, busy, bytes_per_op, batch=1, sample_ns=None, cpu_ns_total=None):
    """The measurement fields every ``ok`` result has, over ``base`` (the request's echo);
    ``sample_ns``: (min, max) of the samples (default: the histogram's); ``cpu_ns_total``: the
    process's CPU (default: its threads')."""
    low, high = sample_ns or (hist.get_min_value(), hist.get_max_value())
    busy = min(200, busy + other_load_ticks(base.get("id", "")))
    return {**base, "status": "ok", "ops": ops, "bytes_per_op": bytes_per_op, "batch": batch,
            "timing": "individual" if batch == 1 else "batched", "wall_ns": wall_ns, "cpu_ns": cpu_ns,
            "cpu_ns_total": sum(cpu_ns) if cpu_ns_total is None else cpu_ns_total, "tsc_cycles": None, "steal_ticks": ticks, "total_ticks": 200,
            "busy_ticks": busy, "histogram": hist.encode().decode("ascii"), "samples": ops,
            "sample_ns_stats": {"min": low, "max": high}}


def negotiated(params):
    """What the fake's TLS negotiated: exactly what ``params`` asked for (IANA names)."""
    version = TLS_VERSIONS[str(params.get("tls_version", "1.3"))]
    suite, cert = params.get("suite", "aes-128-gcm"), params.get("cert", "ecdsa-p256")
    if version == "TLSv1.3":
        cipher = TLS13_SUITES[suite]
    else:
        cipher = f"TLS_ECDHE_{'RSA' if cert.startswith('rsa') else 'ECDSA'}_WITH_{TLS12_BULK[suite]}"
    return {"version": version, "cipher_suite": cipher, "group": GROUPS[params.get("group", "x25519")],
            "signature_scheme": SIGNATURE_SCHEMES[cert], "resumed": params.get("session") == "resumed"}


def timeline(seconds, cpu_pct, steal_pct, samples_max=60):
    """CPU samples every 100 ms over ``seconds``: ``t_ms``, ``user_pct``, ``system_pct`` (of
    one CPU; 70/30 of ``cpu_pct``, the first sample at half while threads start) and
    ``steal_pct``."""
    n = max(3, min(samples_max, math.ceil(seconds / 0.1)))
    out = []
    for i in range(n):
        pct = cpu_pct * (0.5 if i == 0 else 1.0 + 0.02 * ((i % 3) - 1))
        out.append({"t_ms": 100 * (i + 1), "user_pct": round(0.7 * pct, 3), "system_pct": round(0.3 * pct, 3),
                    "steal_pct": steal_pct})
    return out


def workload_result(req, base, op, params, alone_ns, config, rep):
    """A protocol workload's ``result`` message (status ok): ``alone_ns`` is one transaction's
    scripted latency with nothing else running; the load level sets latency and throughput (see
    the module's docstring). A workload whose spec has a server side reports it (with what was
    negotiated, over exactly the window); in memory mode both sides are one process's."""
    load = parse_load(str(params.get("load", "closed:1")))
    contention = SPEC.get("contention", 0.25)
    capacity = 1e9 / (alone_ns * contention)
    if load["kind"] == "closed":
        n = load["concurrency"]
        latency = alone_ns * (1 + contention * (n - 1))
        rate = n * 1e9 / latency
        if load["rate_per_s"]:
            rate = min(rate, load["rate_per_s"])
        threads = n
    else:
        u = min(load["rate_per_s"] / capacity, 0.95)
        latency = alone_ns / (1 - u)
        rate = min(load["rate_per_s"], capacity)
        threads = load["threads"]
    seconds = float(req.get("seconds", 1.0))
    wall_ns = int(seconds * 1e9)
    ops = max(1, int(round(rate * seconds)))
    late = 0 if load["kind"] == "closed" else int(ops * min(1.0, max(0.0, (load["rate_per_s"] / capacity - 0.8) / 0.2)))
    memory = mode_of(op, params) == "memory"
    client_ns = int(ops * alone_ns * SPEC.get("client_cpu_share", 0.4))
    server_ns = int(ops * alone_ns * SPEC.get("server_cpu_share", 0.6))
    cpu_total = client_ns + server_ns if memory else client_ns
    ticks = steal_ticks(req.get("id", ""), config, rep)
    steal_pct = round(100.0 * ticks / 200, 3)
    out = measured(base, ops, shaped_histogram(ops, latency), wall_ns, split(cpu_total, threads), ticks,
                   busy_ticks(cpu_total + (0 if memory else server_ns), wall_ns), bytes_per_tx(op, params),
                   sample_ns=(int(latency), int(latency * 6)))
    out.update(workload=op, mode="memory" if memory else "socket", load=dict(load), late=late,
               client_timeline=timeline(seconds, 100.0 * cpu_total / wall_ns, steal_pct),
               placement=("memory mode: client and server sides in the same thread" if memory
                          else "client threads on CPU 0, server process on CPU 1"))
    server = SPECS[op]["server"]
    n = negotiated(params) if server else None
    out["validation"] = {"kat": "not applicable (a protocol workload)",
                         "negotiated": "pass" if n is not None else "not applicable",
                         "cross_checks": [] if not server else [
                             {"with": f"{b} client → {base['backend']} server", "status": "pass",
                              "detail": "a full handshake and a record each way (fake)"}
                             for b in ("aws-lc", "ring", "openssl") if b != base["backend"]]}
    if n is not None:
        out["negotiated"] = n
        if op == "tls-handshake":
            out["negotiated_counts"] = [{**n, "count": ops}]
    if server:
        port = int(params.get("port") or 0) or 40000 + int(hashlib.sha256(str(req.get("id")).encode()).hexdigest(), 16) % 20000
        out["server"] = {"cpu_ns": server_ns, "transactions": ops, "window": True,
                         "address": None if memory else f"{params.get('address', '127.0.0.1')}:{port}",
                         "timeline": [] if memory else timeline(seconds, 100.0 * server_ns / wall_ns, steal_pct)}
        if memory:
            out["client_side_cpu_ns"] = client_ns
    return out


#: A TLS workload's refusals: (condition on backend and params, reason), as the real worker's.
TLS_REFUSALS = ((lambda b, p: b == "ring" and p.get("group") == "x25519mlkem768", "ring has no ML-KEM"),
                (lambda b, p: b == "rustcrypto", "rustcrypto has no TLS stack here"))
#: Per workload, what the real worker's run and check refuse: (condition, reason), in order.
REFUSALS = {
    "tls-handshake": TLS_REFUSALS,
    "tls-bulk": TLS_REFUSALS,
    "fleet-job": (
        (lambda b, p: b == "rustcrypto",
         "backend 'rustcrypto' has no TLS implementation here; fleet-job runs on aws-lc, ring and openssl"),
        (lambda b, p: in_fips_mode(b) and p.get("sign_digest", p.get("digest")) == "sha1",
         "SHA-1 signature generation is not an approved service in FIPS mode (fake): give sign_digest = \"sha256\"")),
    "storage": (
        (lambda b, p: p.get("layer") == "dm-crypt", "dm-crypt layer unavailable: this kernel has no device-mapper (fake)"),
        (lambda b, p: b == "ring" and str(p.get("scheme", "")).endswith("-xts"), "ring has no AES-XTS")),
}


def workload_refusal(backend, op, params):
    """Why a workload cannot run on ``backend`` with ``params`` (as the real worker's run and
    check say it: ``REFUSALS``), or None."""
    return next((why for refused, why in REFUSALS.get(op, ()) if refused(backend, params)), None)


#: Where the latency model's waits are applied, as the worker states it (fleet_job/latency.rs).
LATENCY_APPLIED = ("management-side wait: the slice thread sleeps where it would wait for the network or the "
                   "target")


def latency_dist(value):
    """A latency parameter (``20``, ``fixed:20``, ``uniform:10-30``, ``lognormal:p50=20,p99=80``)
    described as the worker's result describes it, with its mean; None when absent."""
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith("uniform:"):
        a, b = (float(x) for x in text[len("uniform:"):].split("-", 1))
        return {"dist": "uniform", "low_ms": a, "high_ms": b, "mean_ms": (a + b) / 2}
    if text.startswith("lognormal:"):
        parts = dict(kv.split("=", 1) for kv in text[len("lognormal:"):].split(","))
        p50, p99 = float(parts["p50"]), float(parts["p99"])
        sigma = math.log(p99 / p50) / 2.3263478740408408
        return {"dist": "lognormal", "p50_ms": p50, "p99_ms": p99, "mean_ms": p50 * math.exp(sigma * sigma / 2)}
    x = float(text[len("fixed:"):] if text.startswith("fixed:") else text)
    return {"dist": "fixed", "ms": x, "mean_ms": x}


def latency_model(params):
    """The job's latency model as the worker's ``fleet.latency`` states it; None when off (the
    fake does not wait: its phase times are scripted)."""
    parts = {k: latency_dist(params.get(f"{k}_ms")) for k in ("rtt", "target_work", "manager_cpu")}
    if not any(parts.values()):
        return None
    return {"rtt": parts["rtt"], "round_trips": {"connect": 2, "push": 1, "checks": 1, "report": 1},
            "target_work": parts["target_work"], "manager_cpu": parts["manager_cpu"], "applied": LATENCY_APPLIED}


#: A fake job's setup, s (its result's ``setup_ms``).
FLEET_SETUP_S = 0.3
#: Round trips each phase waits for (fleet_job/latency.rs ``round_trips``).
ROUND_TRIPS = {"connect": 2, "push": 1, "checks": 1, "report": 1}


def planned_wait_s(op, params):
    """A job's latency-model waits scheduled as the real worker plans them (fleet_job/latency.rs
    ``planned_wait_s``: each slice's targets on ``cap`` lanes, the slowest slice's time), every
    draw at its distribution's mean; 0 for a workload that is not a job or a model that is off."""
    spec = RULES["op_params"].get(op, {})
    if not spec.get("job") or latency_model(params) is None:
        return 0.0
    mean = {k: (latency_dist(params.get(f"{k}_ms")) or {"mean_ms": 0.0})["mean_ms"] for k in ("rtt", "target_work", "manager_cpu")}
    kind = spec["job_kinds"][params["job"]]
    phases = [p.strip() for p in str(params["phases"]).split(",")] if params.get("phases") else kind["phases"]
    units = {"push": int(params.get("items", kind["items"])), "checks": int(params.get("checks", kind["checks"]))}
    per_target_ms = sum(mean["rtt"] * ROUND_TRIPS[p] + mean["target_work"] * units.get(p, 0) for p in phases)
    per_target_ms += mean["manager_cpu"]
    n, cap, slices = parse_load(str(params["load"]))["targets"], int(params["cap"]), int(params["slices"])
    slowest = max(math.ceil(len(range(j, n, slices)) / cap) for j in range(slices))
    return slowest * per_target_ms / 1000


def fleet_result(req, base, params, factor, config, rep):
    """A ``fleet-job`` result (status ok) from the schedule in the module's docstring (its level
    is a targets:N: ``check_request`` refused any other)."""
    load = parse_load(str(params["load"]))
    n = load["targets"]
    kind = SPECS[base["op"]]["job_kinds"][params["job"]]
    phases = [p.strip() for p in str(params["phases"]).split(",")] if params.get("phases") else kind["phases"]
    cap, slices, agents = (int(params[k]) for k in ("cap", "slices", "agents"))  # hello's defaults merged
    auth = params.get("auth", kind["auth"])
    items = int(params.get("items", kind["items"]))
    stages = "push" in phases and auth == "sign" and items > 0
    ids = lambda key: {int(x) for x in str(params.get(key, "")).split(",") if x.strip()}
    close, bad_cert, tamper = ids("inject_close"), ids("inject_bad_cert"), ids("inject_tamper")
    contention = (1 + SPEC.get("fleet_contention", 0.05) * (cap - 1)) * (
        1 + SPEC.get("fleet_slice_overhead", 0.05) * (slices - 1))
    per_phase = {p: SPEC.get("fleet_phase_ns", FLEET_PHASE_NS)[p] * factor * contention
                 * SPEC.get("fleet_phase_factor", {}).get(config, {}).get(p, 1.0) for p in phases}
    stage_ns = int(FLEET_STAGE_NS * factor) if stages else 0
    rows, failures, mismatches, hist, end, completed = fleet_targets(n, phases, cap, slices, per_phase, stage_ns,
                                                                     close, bad_cert, tamper)
    if SPEC.get("fleet_sleeps"):
        time.sleep(FLEET_SETUP_S + planned_wait_s(base["op"], params))  # its setup, then its waits
    wall_ns = max(1, int(end))
    # each slice keeps its CPU 60 % busy over the job, the agents together 90 % of one CPU
    mgmt_ns = int(0.6 * (end - stage_ns) * slices) + stage_ns
    agent_ns = int(0.9 * end)
    steal = round(100.0 * steal_ticks(req.get("id", ""), config, rep) / 200, 3)
    slice_ns = [(mgmt_ns - stage_ns) // slices] * slices
    processes = fleet_processes(wall_ns, stage_ns, slice_ns, agent_ns, agents, cap, n, steal)
    columns = ["target", "slice", "status"] + [f"{p}_{e}_us" for p in phases for e in ("start", "end")]
    cert = params.get("cert", "rsa2048")
    digest = params.get("digest", "sha256")
    item_bytes = int(params.get("item_bytes", kind["item_bytes"]))
    checks = int(params.get("checks", kind["checks"]))
    out = measured(base, completed, hist, wall_ns, [stage_ns] + slice_ns, int(round(steal * 2)),
                   busy_ticks(mgmt_ns + agent_ns, wall_ns), 0, cpu_ns_total=mgmt_ns)
    return {**out, "workload": "fleet-job", "mode": "socket", "load": dict(load), "late": 0,
            "client_timeline": processes[1]["timeline"],
            "server": {"cpu_ns": agent_ns, "transactions": completed, "address": "127.0.0.1:40001",
                       "timeline": processes[-1]["timeline"]},
            "placement": ("slices on CPU 0, agents on CPU 1 (the host's 2 CPUs)" if slices < 2 else
                          f"not pinned: {slices} slice(s) and {agents} agent(s) share this process's 2 CPU(s), "
                          "none left to keep the agents apart"),
            "negotiated": {"version": "TLSv1.3", "cipher_suite": "TLS_AES_128_GCM_SHA256",
                           "group": params.get("group", "p256"), "signature_scheme": SIGNATURE_SCHEMES.get(cert, "?"),
                           "resumed": False},
            "validation": {"kat": "not applicable (fake)", "negotiated": "pass", "probe": "pass (fake)",
                           "digests": "pass (fake)", "signatures": "pass (fake)"},
            "fleet": {"job": params.get("job", "audit"), "what": kind["what"], "targets": n,
                      "slices": slices, "cap": cap, "agents": agents, "cert": cert,
                      "group": params.get("group", "p256"), "suite": params.get("suite", "aes-128-gcm"),
                      "digest": digest, "sign_digest": params.get("sign_digest", digest), "auth": auth,
                      "items": items, "item_bytes": item_bytes,
                      "push_bytes": items * item_bytes if "push" in phases else 0,
                      "checks": checks if "checks" in phases else 0,
                      "file_bytes": int(params.get("file_bytes", kind["file_bytes"])), "phases": phases,
                      "latency": latency_model(params), "completed": completed, "failed": len(failures), "setup_ms": 300.0,
                      "job_phases": [{"name": "stage", "start_us": 0, "end_us": stage_ns // 1000}] if stages else [],
                      "records": {"columns": columns, "rows": rows}, "failures": failures,
                      "mismatches": mismatches, "agent_errors": 0, "agent_first_error": None,
                      "processes": processes, "host_cpus": 2, "key_pool": "fixed keys (fake)"}}


def fleet_targets(n, phases, cap, slices, per_phase, stage_ns, close, bad_cert, tamper):
    """A job's schedule: target i on slice i mod slices, each of whose ``cap`` lanes takes the
    next target when free; returns (records rows, failures, mismatches, histogram of completed
    targets' times, end ns, completed)."""
    rows, failures, mismatches, hist = [], [], [], HdrHistogram(1, 3_600_000_000_000, 3)
    end, completed = stage_ns, 0
    for j in range(slices):
        lanes = [stage_ns] * min(cap, max(1, len(range(j, n, slices))))
        for i in range(j, n, slices):
            k = min(range(len(lanes)), key=lambda x: (lanes[x], x))
            t = lanes[k]
            row, failed = [i, j, "ok"], None
            for pi, p in enumerate(phases):
                if failed:
                    row += [None, None]
                    continue
                d = per_phase[p]
                if i in bad_cert and pi == 0:
                    failed = (p, "handshake: invalid peer certificate: UnknownIssuer (fake)")
                elif i in close and pi == 1:
                    d, failed = d / 2, (p, "peer closed connection without sending TLS close_notify (fake)")
                row += [int(t / 1000), int((t + d) / 1000)]
                t += d
            if failed:
                row[2] = "failed"
                failures.append({"target": i, "slice": j, "phase": failed[0], "reason": failed[1]})
            else:
                completed += 1
                hist.record_value(max(1, int(t - lanes[k])))
            if i in tamper and "checks" in phases and not failed:
                mismatches.append({"target": i, "checks": 1})
            lanes[k] = t
            end = max(end, t)
            rows.append(row)
    rows.sort(key=lambda r: r[0])
    return rows, failures, mismatches, hist, end, completed


def fleet_processes(wall_ns, stage_ns, slice_ns, agent_ns, agents, cap, n, steal):
    """A job's processes: the coordinator, each slice and each agent, with their CPU, peak RSS,
    descriptors and CPU timelines."""
    seconds, slices = wall_ns / 1e9, len(slice_ns)
    processes = [{"role": "coordinator", "index": 0, "pid": 1000, "pinned_cpu": None, "cpu_ns": stage_ns,
                  "peak_rss_bytes": 11 << 20, "max_fds": 10, "timeline_offset_ms": -400.0,
                  "timeline": timeline(seconds + 0.4, 1.0, steal)}]
    for j in range(slices):
        processes.append({"role": "slice", "index": j, "pid": 1001 + j, "pinned_cpu": j if slices < 2 else None,
                          "cpu_ns": slice_ns[j], "peak_rss_bytes": (12 << 20) + cap * (64 << 10),
                          "max_fds": min(cap, n) + 4, "timeline_offset_ms": -300.0,
                          "timeline": timeline(seconds + 0.3, 100.0 * slice_ns[j] / wall_ns, steal)})
    for a in range(agents):
        processes.append({"role": "agent", "index": a, "pid": 2001 + a, "pinned_cpu": 1 if slices < 2 else None,
                          "cpu_ns": agent_ns // agents, "peak_rss_bytes": (13 << 20) + n * 2048 // agents,
                          "max_fds": min(cap * slices, n) // agents + 6, "timeline_offset_ms": -350.0,
                          "timeline": timeline(seconds + 0.35, 100.0 * agent_ns / agents / wall_ns, steal)})
    return processes


def storage_result(req, base, params, factor, config, rep):
    """A ``storage`` result (status ok) from the CPU and device model in the module's
    docstring; ``factor`` scales the CPU cost (config_factor, rep_factors, noise_cv)."""
    load = parse_load(str(params.get("load", "closed:1")))
    block = int(params.get("block_bytes", 65536))
    scheme = params.get("scheme", "clear")
    if params.get("dir"):  # as the real worker's data file, left for the orchestrator to remove
        (Path(params["dir"]) / "data").write_bytes(b"\0" * 4096)
    cached = params.get("cache") == "cached"
    direct = str(params.get("direct", "false")) == "true"
    per_byte = 0.0 if cached else SPEC.get("storage_ns_per_byte", STORAGE_NS_PER_BYTE)[scheme]
    user_ns = block * per_byte * factor
    system_ns = STORAGE_SYSCALL_NS * factor
    cpu_per_io = user_ns + system_ns
    cpus = SPEC.get("storage_cpus", 2)
    threads = load["concurrency"] if load["kind"] == "closed" else load["threads"]
    capacity = min(threads, cpus) * 1e9 / cpu_per_io
    if direct and not cached:
        capacity = min(capacity, SPEC.get("storage_device_mb_s", 400) * 1e6 / block)
    if load["kind"] == "closed":
        rate = capacity if not load["rate_per_s"] else min(capacity, load["rate_per_s"])
        latency = threads * 1e9 / rate
    else:
        rate = min(load["rate_per_s"], capacity)
        latency = max(cpu_per_io, 1e9 * block / (SPEC.get("storage_device_mb_s", 400) * 1e6) if direct else 0)
    seconds = float(req.get("seconds", 1.0))
    wall_ns = int(seconds * 1e9)
    ops = max(1, int(round(rate * seconds)))
    total_user, total_system = int(ops * user_ns), int(ops * system_ns)
    cpu_total = total_user + total_system
    direction = str(params.get("direction", "read"))
    read_pct = 100 if direction == "read" else 0 if direction == "write" else int(direction.split(":")[1])
    reads = ops * read_pct // 100
    ticks = steal_ticks(req.get("id", ""), config, rep)
    library = "none" if scheme == "clear" else f"{base['library']} {base['library_version']}"
    out = measured(base, ops, shaped_histogram(ops, latency), wall_ns, split(cpu_total, threads), ticks,
                   busy_ticks(cpu_total, wall_ns), block, sample_ns=(int(latency), int(latency * 6)))
    return {**out, "workload": "storage", "mode": "file", "load": dict(load), "late": 0,
            "client_timeline": timeline(seconds, 100.0 * cpu_total / wall_ns, round(100.0 * ticks / 200, 3)),
            "storage": {"scheme": scheme, "pattern": params.get("pattern", "sequential"), "direction": direction,
                        "read_pct": read_pct, "block_bytes": block, "file_bytes": int(params.get("file_bytes", 64 << 20)),
                        "sector_bytes": 4096, "direct": direct, "fsync": params.get("fsync", "none"),
                        "cache": params.get("cache", "cold"), "layer": params.get("layer", "userspace"),
                        "reads": reads, "writes": ops - reads, "bytes_read": reads * block,
                        "bytes_written": (ops - reads) * block, "process_user_ns": total_user,
                        "process_system_ns": total_system, "fsync_end_ns": 0, "library": library},
            "validation": {"kat": "pass" if scheme != "clear" else "not applicable (clear: nothing is encrypted)",
                           "kat_source": "fake",
                           "on_disk": "pass: sectors 0 and 255 on disk " + (
                               "are the plaintext written" if scheme == "clear" else "differ from the plaintext written"),
                           "cross_decrypt": "not applicable (clear)" if scheme == "clear" else
                           "pass: RustCrypto (fake) decrypted sectors 0 and 255, read raw from the file, to the "
                           "plaintext written",
                           "cross_checks": [] if scheme == "clear" else [
                               {"with": "rustcrypto", "status": "pass", "detail": "sectors 0 and 255 decrypted (fake)"}]}}


#: Workloads whose result is their own (the others' is a protocol workload's, ``workload_result``).
RESULTS = {"storage": storage_result, "fleet-job": fleet_result}


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
        elif kind == "check":
            check(req)
        elif kind == "bye":
            return
        else:
            send({"type": "error", "code": "bad_request", "message": f"unknown type {kind!r}"})


def device_refusal(rid, backend) -> bool:
    """Refuse a request for a device backend as the real worker does when no PKCS#11 module
    is configured (``device_unavailable``); True when refused."""
    if backend in DEVICES and not os.environ.get("CRYPTOPERF_PKCS11_MODULE"):
        refuse(rid, "device_unavailable", f"{backend}: no PKCS#11 module: set CRYPTOPERF_PKCS11_MODULE to its path")
        return True
    return False


def check(req: dict) -> None:
    """The worker's ``check`` (a combination, nothing run): unsupported where ``run`` would say
    so for a workload (``workload_refusal``: ring with x25519mlkem768 or an XTS scheme,
    rustcrypto's missing TLS stack, a dm-crypt layer) and for a script's ``unsupported`` entry;
    else supported."""
    backend, op, params = req.get("backend"), req.get("op"), req.get("params") or {}
    if device_refusal(req.get("id"), backend):
        return
    out = {"type": "checked", "id": req.get("id"), "backend": backend, "op": op, "status": "supported"}
    reason = SPEC.get("unsupported", {}).get(f"{backend}/{op}")
    if is_workload(op):
        defaults = RULES["op_params"].get(op, {}).get("defaults") or {}
        reason = workload_refusal(backend, op, {**defaults, **params}) or reason
    if reason:
        out.update(status="unsupported", reason=reason)
    elif is_workload(op):
        out["planned_wait_s"] = planned_wait_s(op, {**defaults, **params})
        if RULES["op_params"][op].get("job"):
            out["planned_work_s"] = FLEET_SETUP_S  # all a fake job does besides its waits
    send(out)


if __name__ == "__main__":
    main()
