"""What a worker announces in its ``hello`` (docs/worker-protocol.md, "hello"), typed: the
``Hello`` itself, the ``WorkerRules`` the study parser, ``speed`` and the tests' fake worker
check against, and each primitive's standing under the FIPS module (``FipsApproval``).

Types of the model floor, beside ``workload_spec.py`` (a workload's spec, which the rules
hold): the process client (``run/worker.py``) decodes a hello into them; nothing here runs a
worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from cryptoperf.errors import ProtocolMismatch
from cryptoperf.workload_spec import WorkloadSpec


@dataclass(frozen=True)
class Hello:
    """The worker's ``hello`` answer.

    Attributes:
        protocol: protocol version (1).
        worker_version: the worker crate's version.
        cpu: ``{"model": str, "flags": [str], "logical_cpus": int, "tsc": bool}``.
        backends: one dict per backend: ``backend``, ``library``, ``library_version``, ``fips``,
            and with ``detail`` also ``ops`` (list of ``{op, status, reason}``).
        ops: every canonical operation name the worker knows.
        raw: the whole message.
        rules: the operation rules, workload specs and limits it announced (``WorkerRules``).
    """

    protocol: int
    worker_version: str
    cpu: Mapping[str, Any]
    backends: tuple[Mapping[str, Any], ...]
    ops: tuple[str, ...]
    raw: Mapping[str, Any] = field(repr=False)
    rules: "WorkerRules" = field(repr=False, compare=False)

    @property
    def backend_names(self) -> tuple[str, ...]:
        """The real backends' names (the mock backends are never listed)."""
        return tuple(b["backend"] for b in self.backends)


    def unmasked_vectors(self) -> dict[str, str]:
        """``{backend: "0x<word0>:0x<word1>"}``: the capability vector each maskable library
        reported in this (unmasked) worker process; what a baseline repetition's library must
        report too (``cpu_vector_unmasked`` of the run request)."""
        out = {}
        for b in self.backends:
            caps = b.get("capabilities") or {}
            if caps.get("maskable") and caps.get("openssl_ia32cap"):
                out[b["backend"]] = str(caps["openssl_ia32cap"])
        return out


#: The limits every hello announces (docs/worker-protocol.md, "hello"): threads of a primitive
#: run, measuring and warm-up seconds, message bytes, connections (or threads) of one workload
#: level, client threads of ``open:RATE``, targets of one job level.
LIMITS = ("max_threads", "max_seconds", "max_warmup_s", "max_size_bytes", "max_concurrency", "open_threads",
          "max_targets")
#: What a worker too old for this orchestrator is told.
TOO_OLD = "this worker is older than the orchestrator; rebuild it with `pip install .`"


@dataclass(frozen=True)
class WorkerRules:
    """What a worker accepts, as its ``hello`` announces it (docs/worker-protocol.md): the one
    source of these rules for the study parser, ``cryptoperf speed`` and the tests' fake worker.

    Attributes:
        backends: real backend names; ops: every operation name.
        op_params: op → the run parameters it takes (``size_bytes``, ``digest``, ``padding``).
        default_size_bytes: op → the message size used when none is given (None: no message).
        param_values: parameter → its allowed values (``digest``, ``padding``).
        limits: ``LIMITS`` → value (``max_threads``, ``max_seconds``, ``max_warmup_s``,
            ``max_size_bytes``, ``max_concurrency``, ``open_threads``, ``max_targets``).
        workloads: the ops that are workloads (``op_params`` says ``workload: true``) → their
            spec (``workload_spec.WorkloadSpec``: level kinds, modes, sizing, metrics, ...);
            they take the parameters ``op_params`` lists plus a load level.
        fips: primitive op → its standing under the FIPS module (``FipsApproval``), from its
            ``op_params`` entry's ``fips`` (empty from a worker that does not announce it).
        devices: backend → the device kind it reaches (``pkcs11``), for the backends that
            announce one; they run only when a study or ``--backend`` names them.
    """

    backends: tuple[str, ...]
    ops: tuple[str, ...]
    op_params: Mapping[str, frozenset[str]]
    default_size_bytes: Mapping[str, int | None]
    param_values: Mapping[str, tuple[str, ...]]
    limits: Mapping[str, float]
    workloads: Mapping[str, WorkloadSpec] = field(default_factory=dict)
    fips: Mapping[str, "FipsApproval"] = field(default_factory=dict)
    devices: Mapping[str, str] = field(default_factory=dict)

    @property
    def libraries(self) -> tuple[str, ...]:
        """The backends that are libraries (not devices): what runs when no backend is named."""
        return tuple(b for b in self.backends if b not in self.devices)

    @classmethod
    def from_hello(cls, hello: Mapping[str, Any]) -> "WorkerRules":
        """The rules of a ``hello`` message. Raises ProtocolMismatch (one line) when it lacks
        them, or a workload's spec, or a limit (a worker older than this cryptoperf)."""
        try:
            entries = hello["op_params"]
            op_params = {op: frozenset(r["params"]) for op, r in entries.items()}
            sizes = {op: r.get("default_size_bytes") for op, r in entries.items()}
            values = {k: tuple(v) for k, v in hello["param_values"].items()}
            limits = {k: float(hello["limits"][k]) for k in LIMITS}
            backends = tuple(b["backend"] for b in hello["backends"])
            ops = tuple(hello["ops"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ProtocolMismatch(f"the worker's hello lacks its operation rules or limits ({_what(e)}): "
                                   f"{TOO_OLD}") from None
        workloads = {}
        for op, entry in entries.items():
            if isinstance(entry, Mapping) and entry.get("workload"):
                try:
                    workloads[op] = WorkloadSpec.from_hello(op, entry)
                except (KeyError, TypeError, ValueError, AttributeError) as e:
                    raise ProtocolMismatch(f"the worker's hello lacks the spec of workload '{op}' ({_what(e)}): "
                                           f"{TOO_OLD}") from None
        try:
            fips = {op: FipsApproval.from_hello(e["fips"]) for op, e in entries.items()
                    if isinstance(e, Mapping) and isinstance(e.get("fips"), Mapping)}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ProtocolMismatch(f"the worker's hello has a malformed FIPS approval entry ({_what(e)}): "
                                   f"{TOO_OLD}") from None
        devices = {str(b["backend"]): str(b["device"]) for b in hello["backends"]
                   if isinstance(b, Mapping) and b.get("device")}
        return cls(backends, ops, op_params, sizes, values, limits, workloads, fips, devices)

    def fips_unapproved(self, op: str, params: Mapping[str, Any]) -> str | None:
        """Why the FIPS module does not approve primitive ``op`` with run ``params`` (its
        defaults filled in), or None when it does or the worker does not say."""
        a = self.fips.get(op)
        return a.problem(params) if a is not None else None

    @property
    def op_defaults(self) -> dict[str, Mapping[str, Any]]:
        """Workload → the value each of its parameters takes when not given (its spec's
        ``defaults``: e.g. ``load``, a job's ``cap`` and ``slices``)."""
        return {op: spec.defaults for op, spec in self.workloads.items()}

    def takes(self, op: str, param: str) -> bool:
        """True if ``op`` takes the run parameter ``param`` (``size_bytes``, ``digest``,
        ``padding``)."""
        return param in self.op_params.get(op, ())

    def takes_message(self, op: str) -> bool:
        """True if ``op`` processes a message whose size is a parameter."""
        return self.takes(op, "size_bytes")


@dataclass(frozen=True)
class FipsApproval:
    """Whether the FIPS module approves a primitive as the worker times it (hello's
    ``op_params[op].fips``; the worker's table follows the module's own service indicator and
    the NIST rules it cites: docs/worker-protocol.md, "FIPS build").

    Attributes:
        approved: the operation with its default parameters; reason: why not ('' if approved).
        not_approved_with: parameter → value → why the operation is not approved with that value
            (e.g. ``{"digest": {"sha1": "SHA-1 is disallowed for signature generation ..."}}``).
    """

    approved: bool
    reason: str = ""
    not_approved_with: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_hello(cls, entry: Mapping[str, Any]) -> "FipsApproval":
        """From an ``op_params[op].fips`` object; raises TypeError/KeyError when malformed."""
        with_ = {str(k): {str(v): str(r) for v, r in vs.items()} for k, vs in (entry.get("not_approved_with") or {}).items()}
        return cls(bool(entry["approved"]), str(entry.get("reason") or ""), with_)

    def problem(self, params: Mapping[str, Any]) -> str | None:
        """Why the module does not approve the operation with ``params``, or None."""
        if not self.approved:
            return self.reason or "not an approved service of the FIPS module"
        for param, values in self.not_approved_with.items():
            value = params.get(param)
            if value is not None and str(value) in values:
                return values[str(value)]
        return None


def _what(e: Exception) -> str:
    """The missing or malformed field an exception of the hello parsing names, as text."""
    return f"no field {e.args[0]!r}" if isinstance(e, KeyError) and e.args else str(e)
