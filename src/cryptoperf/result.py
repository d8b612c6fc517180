"""The worker's ``result`` message, typed: decoded once, where it arrives (``run/worker.py``) or
where the store gives it back (``store/db.py``), and read by attribute everywhere after.

docs/worker-protocol.md ("run" and "Workloads") defines every field. ``decode(message)``
returns a frozen ``WorkerResult``:

- the fields of every result (ids, ``status``, ``reason``, the library, ``params``,
  ``validation``, the CPU mask and capabilities) and of every measurement (``ops``,
  ``wall_ns``, CPU times, ``/proc/stat`` ticks, the encoded histogram ...), each None when the
  message lacks it (an ``unsupported`` answer measures nothing; a result stored by an older
  worker may lack a field added since);
- the part every workload shares (``workload``, ``load``, ``mode``, ``late``, ``negotiated``,
  ``server``, the CPU timelines, ``placement``);
- ``extras``: every other top-level field, as received. A workload's own part (the object
  named after the workload) is decoded by that workload's analysis, never here, so a new
  workload adds nothing to this module;
- ``raw``: the message exactly as received, for the store and the JSON document only (no
  figure is read from it).

``decode`` raises ``UnreadableResult`` (a ``WorkerError``: one line naming the field) for a
message that is not an object, has no ``status``, or holds a field of the wrong type. Unknown
fields are not errors: a newer worker may add fields (they are kept in ``extras`` and ``raw``).

The classes are plain frozen dataclasses of tuples and dicts (they pickle: the Ray executor
sends outcomes between processes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

from cryptoperf.errors import WorkerError

T = TypeVar("T")


class UnreadableResult(WorkerError):
    """A ``result`` message that cannot be read: not a JSON object, no ``status``, or a field
    of the wrong type. The message names the field and what it held."""


# --------------------------------------------------------------------------- readers
#
# Each reader returns the value of ``key`` in ``m`` with its type checked, None when the key is
# absent or null, and raises UnreadableResult naming ``where.key`` otherwise.


def _bad(where: str, key: str, value: Any, wanted: str) -> UnreadableResult:
    return _bad_at(f"{where}{key}", value, wanted)


def _bad_at(name: str, value: Any, wanted: str) -> UnreadableResult:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return UnreadableResult(f"unreadable result: {name} is {text} ({type(value).__name__}), not {wanted}")


def _int(m: Mapping[str, Any], key: str, where: str = "") -> int | None:
    v = m.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(where, key, v, "an integer")
    if isinstance(v, float):
        if not v.is_integer():
            raise _bad(where, key, v, "an integer")
        return int(v)
    return v


def _float(m: Mapping[str, Any], key: str, where: str = "") -> float | None:
    v = m.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _bad(where, key, v, "a number")
    return float(v)


def _str(m: Mapping[str, Any], key: str, where: str = "") -> str | None:
    v = m.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise _bad(where, key, v, "a string")
    return v


def _bool(m: Mapping[str, Any], key: str, where: str = "") -> bool | None:
    v = m.get(key)
    if v is None:
        return None
    if not isinstance(v, bool):
        raise _bad(where, key, v, "true or false")
    return v


def _object(m: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any] | None:
    v = m.get(key)
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise _bad(where, key, v, "an object")
    return v


def _list(m: Mapping[str, Any], key: str, item: Callable[[Any, str], T], where: str = "") -> tuple[T, ...] | None:
    v = m.get(key)
    if v is None:
        return None
    if not isinstance(v, list):
        raise _bad(where, key, v, "a list")
    return tuple(item(x, f"{where}{key}[{i}]") for i, x in enumerate(v))


def _as_object(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise _bad_at(where, v, "an object")
    return v


def _int_item(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise _bad_at(where, v, "an integer")
    return int(v)


def _str_item(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _bad_at(where, v, "a string")
    return v


# --------------------------------------------------------------------------- the parts


@dataclass(frozen=True)
class Capabilities:
    """What a library uses, read in the worker process (the result's ``capabilities``).

    Attributes:
        maskable: the library has a runtime capability vector (OpenSSL, AWS-LC).
        source: how it was read; openssl_ia32cap: its vector, ``0x<word0>:0x<word1>``
            (OPENSSL_ia32cap(3) layout); words: the two words as hex strings.
        flags: decoded flag → set (``aes``, ``avx2``, ``sha``, ...).
        reason: why there is no vector (not maskable, or unreadable).
        env: the worker's ``OPENSSL_ia32cap`` (None: unset); cpuid: the CPU's own vector.
    """

    maskable: bool | None = None
    source: str | None = None
    openssl_ia32cap: str | None = None
    words: tuple[str, ...] | None = None
    flags: Mapping[str, bool] = field(default_factory=dict)
    reason: str | None = None
    env: str | None = None
    cpuid: str | None = None

    @classmethod
    def decode(cls, m: Mapping[str, Any], where: str = "capabilities.") -> "Capabilities":
        """From the result's ``capabilities`` object. Raises UnreadableResult."""
        flags = _object(m, "flags", where) or {}
        for k, v in flags.items():
            if not isinstance(v, bool):
                raise _bad(f"{where}flags.", k, v, "true or false")
        return cls(maskable=_bool(m, "maskable", where), source=_str(m, "source", where),
                   openssl_ia32cap=_str(m, "openssl_ia32cap", where), words=_list(m, "words", _str_item, where),
                   flags=dict(flags), reason=_str(m, "reason", where), env=_str(m, "env", where),
                   cpuid=_str(m, "cpuid", where))


@dataclass(frozen=True)
class CrossCheck:
    """One cross-implementation check of the validation: with which other implementation
    (``with_``: the wire's ``with``), ``status`` (``pass``, ``fail``, ``skipped``) and
    ``detail``."""

    with_: str | None
    status: str | None
    detail: str | None

    @classmethod
    def decode(cls, v: Any, where: str) -> "CrossCheck":
        """From one ``cross_checks`` entry. Raises UnreadableResult."""
        m = _as_object(v, where)
        w = f"{where}."
        return cls(_str(m, "with", w), _str(m, "status", w), _str(m, "detail", w))


#: Validation fields decoded into ``Validation``'s own attributes; the others go to ``checks``.
_VALIDATION_FIELDS = ("kat", "kat_source", "cross_checks")


@dataclass(frozen=True)
class Validation:
    """How the case was checked before it was timed (the result's ``validation``).

    Attributes:
        kat: ``pass``, ``fail: <why>`` or ``not applicable (<why>)``; kat_source: where the
            known answer comes from.
        cross_checks: the cross-implementation checks, in order.
        checks: every other check a workload reports (``negotiated``, ``probe``, ...), name →
            its value as received.
    """

    kat: str | None = None
    kat_source: str | None = None
    cross_checks: tuple[CrossCheck, ...] = ()
    checks: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def decode(cls, m: Mapping[str, Any], where: str = "validation.") -> "Validation":
        """From the result's ``validation`` object. Raises UnreadableResult."""
        return cls(kat=_str(m, "kat", where), kat_source=_str(m, "kat_source", where),
                   cross_checks=_list(m, "cross_checks", CrossCheck.decode, where) or (),
                   checks={k: v for k, v in m.items() if k not in _VALIDATION_FIELDS})


@dataclass(frozen=True)
class Load:
    """The load level a workload ran at, as the worker read it (the result's ``load``).

    Attributes:
        kind: ``closed``, ``open`` or ``targets``.
        concurrency: closed loads: client threads (connections).
        threads: open loads: client threads taking the due transactions.
        targets: a job's targets.
        rate_per_s: the rate (open loads; a paced closed load), None unpaced.
        corrected: latency measured from each transaction's due time (open loads); None when
            the result does not say.
    """

    kind: str
    concurrency: int | None = None
    threads: int | None = None
    targets: int | None = None
    rate_per_s: float | None = None
    corrected: bool | None = None

    @classmethod
    def decode(cls, m: Mapping[str, Any], where: str = "load.") -> "Load":
        """From the result's ``load`` object. Raises UnreadableResult."""
        return cls(kind=_str(m, "kind", where) or "", concurrency=_int(m, "concurrency", where),
                   threads=_int(m, "threads", where), targets=_int(m, "targets", where),
                   rate_per_s=_float(m, "rate_per_s", where), corrected=_bool(m, "corrected", where))


@dataclass(frozen=True)
class Negotiated:
    """What a TLS transaction negotiated: ``version`` (``TLSv1.3``), ``cipher_suite`` (IANA
    name), ``group``, ``signature_scheme`` (``none`` when resumed), ``resumed``."""

    version: str | None = None
    cipher_suite: str | None = None
    group: str | None = None
    signature_scheme: str | None = None
    resumed: bool | None = None

    @classmethod
    def decode(cls, v: Any, where: str = "negotiated") -> "Negotiated":
        """From a ``negotiated`` object. Raises UnreadableResult."""
        m = _as_object(v, where)
        w = f"{where}."
        return cls(_str(m, "version", w), _str(m, "cipher_suite", w), _str(m, "group", w),
                   _str(m, "signature_scheme", w), _bool(m, "resumed", w))


@dataclass(frozen=True)
class NegotiatedCount:
    """One entry of ``negotiated_counts``: a negotiation and how many timed transactions
    made it."""

    negotiated: Negotiated
    count: int

    @classmethod
    def decode(cls, v: Any, where: str) -> "NegotiatedCount":
        """From one ``negotiated_counts`` entry. Raises UnreadableResult."""
        m = _as_object(v, where)
        return cls(Negotiated.decode(m, where), _int(m, "count", f"{where}.") or 0)


@dataclass(frozen=True)
class CpuSample:
    """One 100 ms interval of a CPU timeline: its end ``t_ms`` (ms since sampling started),
    ``user_pct`` and ``system_pct`` (the process's CPU, % of one CPU), ``steal_pct`` (the
    host's stolen time, % of all its CPUs)."""

    t_ms: float
    user_pct: float | None = None
    system_pct: float | None = None
    steal_pct: float | None = None

    @classmethod
    def decode(cls, v: Any, where: str) -> "CpuSample":
        """From one timeline entry. Raises UnreadableResult."""
        m = _as_object(v, where)
        w = f"{where}."
        return cls(_float(m, "t_ms", w) or 0.0, _float(m, "user_pct", w), _float(m, "system_pct", w),
                   _float(m, "steal_pct", w))


@dataclass(frozen=True)
class ServerSide:
    """A workload's server side (the result's ``server``).

    Attributes:
        cpu_ns: the server's CPU time (ns): in socket mode its process's, over the window when
            ``window`` (older results: from before the warm-up to the window's end); in memory
            mode the server side's share of ``cpu_ns``; None for an external server.
        transactions: transactions the server served over the same span as ``cpu_ns`` (its
            CPU per transaction is ``cpu_ns / transactions``, one side over one span).
        window: ``cpu_ns`` and ``transactions`` cover exactly the measured window.
        address: where it listened (None in memory mode).
        timeline: its process's CPU timeline (None or () without one).
        external: a server this worker did not start (only the client is measured).
        errors: connections the server failed (where the workload reports them).
        device_process_cpu_ns: the server's key on a token behind a daemon: the daemon's CPU
            over the same span as ``cpu_ns`` (ns); None otherwise.
    """

    cpu_ns: int | None = None
    transactions: int | None = None
    window: bool = False
    address: str | None = None
    timeline: tuple[CpuSample, ...] | None = None
    external: bool = False
    errors: int | None = None
    device_process_cpu_ns: int | None = None

    @classmethod
    def decode(cls, m: Mapping[str, Any], where: str = "server.") -> "ServerSide":
        """From the result's ``server`` object. Raises UnreadableResult."""
        return cls(cpu_ns=_int(m, "cpu_ns", where), transactions=_int(m, "transactions", where),
                   window=bool(_bool(m, "window", where)), address=_str(m, "address", where),
                   timeline=_list(m, "timeline", CpuSample.decode, where),
                   external=bool(_bool(m, "external", where)), errors=_int(m, "errors", where),
                   device_process_cpu_ns=_int(m, "device_process_cpu_ns", where))


# --------------------------------------------------------------------------- the result

#: Every top-level field ``WorkerResult`` decodes (``type`` is the message's kind); the others
#: are its ``extras``.
DECODED_FIELDS = frozenset((
    "type", "id", "backend", "op", "status", "reason", "library", "library_version", "fips", "params",
    "fips_approved", "fips_reason",
    "validation", "threads", "cpu_mask", "capabilities", "cpu_mask_cleared",
    "ops", "bytes_per_op", "batch", "timing", "wall_ns", "cpu_ns", "cpu_ns_total", "tsc_cycles",
    "steal_ticks", "total_ticks", "busy_ticks", "histogram", "samples", "sample_ns_stats",
    "workload", "load", "mode", "late", "negotiated", "negotiated_counts", "server", "client_side_cpu_ns",
    "client_timeline", "placement", "device_process_cpu_ns", "peer_process_cpu_ns",
))


@dataclass(frozen=True)
class WorkerResult:
    """One ``result`` message of the worker (docs/worker-protocol.md), typed.

    Every result: ``id``, ``backend``, ``op`` (as requested), ``status`` (``ok``,
    ``unsupported``, ``invalid``), ``reason`` ('' for ok), ``library``, ``library_version``,
    ``fips`` (the library ran in FIPS mode), ``fips_approved`` and ``fips_reason`` (a primitive:
    whether the FIPS module approves the operation as timed, and why not; None from a worker
    older than the field), ``params`` (resolved, defaults filled in),
    ``validation``, ``threads``, ``cpu_mask`` (the mask named in the request),
    ``capabilities``, ``cpu_mask_cleared`` (the flags the mask took away here; None when the
    result does not say).

    A measurement (ok results): ``ops`` (operations, or a workload's transactions, in the
    window), ``bytes_per_op``, ``batch`` (operations per timed sample), ``timing``
    (``batched``/``individual``), ``wall_ns`` (the window), ``cpu_ns`` (each thread's CPU over
    its window, ns), ``cpu_ns_total``, ``tsc_cycles``, ``steal_ticks``/``total_ticks``/
    ``busy_ticks`` (system-wide ``/proc/stat`` ticks across the window), ``histogram`` (latency
    per operation in ns, HdrHistogram V2 compressed, base64), ``samples``, ``sample_min_ns``/
    ``sample_max_ns`` (``sample_ns_stats``), ``device_process_cpu_ns`` (a device backend whose
    work runs in a process of its own, a PKCS#11 token's daemon: its CPU over the window, ns;
    None otherwise), ``peer_process_cpu_ns`` (a workload's own client-side process, ike-sa's
    initiator daemon: its CPU over the window, ns; None otherwise).

    A workload's result adds: ``workload``, ``load``, ``mode`` (``socket``, ``memory``,
    ``file``), ``late`` (open loads: transactions started over 1 ms after due),
    ``negotiated``, ``negotiated_counts``, ``server``, ``client_side_cpu_ns`` (memory mode: the
    client side's share of ``cpu_ns``), ``client_timeline``, ``placement``.

    ``extras``: every other top-level field, as received (a workload's own part, fields added
    by a newer worker). ``raw``: the message as received, for the store and the JSON document
    only. Code reads the attributes; nothing reads a result as a mapping.
    """

    id: str
    backend: str
    op: str
    status: str
    reason: str = ""
    library: str | None = None
    library_version: str | None = None
    fips: bool | None = None
    fips_approved: bool | None = None
    fips_reason: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    validation: Validation | None = None
    threads: int | None = None
    cpu_mask: str | None = None
    capabilities: Capabilities | None = None
    cpu_mask_cleared: tuple[str, ...] | None = None
    ops: int | None = None
    bytes_per_op: int | None = None
    batch: int | None = None
    timing: str | None = None
    wall_ns: int | None = None
    cpu_ns: tuple[int, ...] | None = None
    cpu_ns_total: int | None = None
    tsc_cycles: int | None = None
    steal_ticks: int | None = None
    total_ticks: int | None = None
    busy_ticks: int | None = None
    histogram: str | None = None
    samples: int | None = None
    sample_min_ns: int | None = None
    sample_max_ns: int | None = None
    device_process_cpu_ns: int | None = None
    peer_process_cpu_ns: int | None = None
    workload: str | None = None
    load: Load | None = None
    mode: str | None = None
    late: int | None = None
    negotiated: Negotiated | None = None
    negotiated_counts: tuple[NegotiatedCount, ...] | None = None
    server: ServerSide | None = None
    client_side_cpu_ns: int | None = None
    client_timeline: tuple[CpuSample, ...] | None = None
    placement: str | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def library_text(self) -> str:
        """``library library_version`` as the worker reported them (``OpenSSL 3.0.13``), with
        the FIPS provider it ran under when it names one (``OpenSSL 3.0.19 with OpenSSL FIPS
        Provider 3.1.2``: the provider's code is its own release's), '' when it named neither."""
        text = f"{self.library or ''} {self.library_version or ''}".strip()
        provider = (self.extras or {}).get("fips_provider")
        return f"{text} with {provider}" if text and isinstance(provider, str) and provider else text


def decode(message: Mapping[str, Any]) -> WorkerResult:
    """The ``WorkerResult`` of a ``result`` message (a dict as ``json.loads`` made it).

    Raises UnreadableResult (one line naming the field) for a message that is not an object,
    lacks a string ``status``, or holds a field of the wrong type (a string where a number
    belongs, ...). Absent fields are None (or empty); unknown ones go to ``extras``.
    """
    m = _as_object(message, "the result message")
    status = m.get("status")
    if not isinstance(status, str):
        raise _bad_at("status", status, "a string")
    stats = _object(m, "sample_ns_stats") or {}
    validation = _object(m, "validation")
    capabilities = _object(m, "capabilities")
    load = _object(m, "load")
    server = _object(m, "server")
    negotiated = m.get("negotiated")
    return WorkerResult(
        id=_str(m, "id") or "", backend=_str(m, "backend") or "", op=_str(m, "op") or "", status=status,
        reason=_str(m, "reason") or "", library=_str(m, "library"), library_version=_str(m, "library_version"),
        fips=_bool(m, "fips"), fips_approved=_bool(m, "fips_approved"), fips_reason=_str(m, "fips_reason"),
        params=dict(_object(m, "params") or {}),
        validation=Validation.decode(validation) if validation is not None else None,
        threads=_int(m, "threads"), cpu_mask=_str(m, "cpu_mask"),
        capabilities=Capabilities.decode(capabilities) if capabilities is not None else None,
        cpu_mask_cleared=_list(m, "cpu_mask_cleared", _str_item),
        ops=_int(m, "ops"), bytes_per_op=_int(m, "bytes_per_op"), batch=_int(m, "batch"), timing=_str(m, "timing"),
        wall_ns=_int(m, "wall_ns"), cpu_ns=_list(m, "cpu_ns", _int_item), cpu_ns_total=_int(m, "cpu_ns_total"),
        tsc_cycles=_int(m, "tsc_cycles"), steal_ticks=_int(m, "steal_ticks"), total_ticks=_int(m, "total_ticks"),
        busy_ticks=_int(m, "busy_ticks"), histogram=_str(m, "histogram"), samples=_int(m, "samples"),
        sample_min_ns=_int(stats, "min", "sample_ns_stats."), sample_max_ns=_int(stats, "max", "sample_ns_stats."),
        device_process_cpu_ns=_int(m, "device_process_cpu_ns"),
        peer_process_cpu_ns=_int(m, "peer_process_cpu_ns"),
        workload=_str(m, "workload"), load=Load.decode(load) if load is not None else None,
        mode=_str(m, "mode"), late=_int(m, "late"),
        negotiated=Negotiated.decode(negotiated) if negotiated is not None else None,
        negotiated_counts=_list(m, "negotiated_counts", NegotiatedCount.decode),
        server=ServerSide.decode(server) if server is not None else None,
        client_side_cpu_ns=_int(m, "client_side_cpu_ns"),
        client_timeline=_list(m, "client_timeline", CpuSample.decode), placement=_str(m, "placement"),
        extras={k: v for k, v in m.items() if k not in DECODED_FIELDS},
        raw=m if isinstance(m, dict) else dict(m),
    )
