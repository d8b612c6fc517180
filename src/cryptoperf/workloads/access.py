"""The only place the workload analysis and the report read a worker's ``result`` message.

A result arrives as the worker sent it (docs/worker-protocol.md, "run" and "Workloads"); every
figure the analysis computes from it reads its fields through these small functions, so that
what a field is called, and what it means when it is missing (results stored by older workers),
is said once. Each takes the result (a mapping, or any object answering ``.get``) and returns a
plain value or None when the result does not carry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

Result = Any  # a worker result: a mapping from field name to value (or an object with .get)


def _get(result: Result | None, name: str) -> Any:
    return None if result is None else result.get(name)


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def ops(result: Result | None) -> int:
    """Operations (transactions, I/Os, completed targets) in the measuring window; 0 if none."""
    return int(_get(result, "ops") or 0)


def wall_ns(result: Result | None) -> float | None:
    """Length of the measuring window (a job's time), ns."""
    return _number(_get(result, "wall_ns"))


def bytes_per_op(result: Result | None) -> int:
    """Bytes one operation carries (a transfer's size, a storage I/O's block); 0 if none."""
    return int(_get(result, "bytes_per_op") or 0)


def histogram(result: Result | None) -> str | None:
    """The encoded latency histogram (HdrHistogram V2, base64), or None."""
    return _get(result, "histogram") or None


def batch(result: Result | None) -> int | None:
    """Operations per timed sample, or None."""
    b = _get(result, "batch")
    return int(b) if b else None


def timing(result: Result | None) -> str:
    """``batched`` or ``individual`` ('' when not said)."""
    return str(_get(result, "timing") or "")


def library_text(result: Result | None, short: bool = False) -> str:
    """``library library_version`` as the worker reported them; with ``short``, a multi-crate
    version list (RustCrypto) is cut after its first entry."""
    version = str(_get(result, "library_version") or "")
    if short and "," in version:
        version = version.split(",")[0] + ", …"
    return f"{_get(result, 'library') or ''} {version}".strip()


def cpu_mask(result: Result | None) -> str | None:
    """The CPU mask the worker verified and ran under (``cpu_mask``), None when unmasked."""
    return _get(result, "cpu_mask") or None


def cpu_mask_cleared(result: Result | None) -> bool | None:
    """Whether the mask took any capability away on this machine; None when not said."""
    v = _get(result, "cpu_mask_cleared")
    return None if v is None else bool(v)


def mode(result: Result | None) -> str | None:
    """A workload's mode as run (``socket``, ``memory``, ``file``), or None."""
    return _get(result, "mode") or None


def corrected(result: Result | None) -> bool | None:
    """Whether the latency runs from each transaction's due time (``load.corrected``), None when
    the result does not say."""
    load = _get(result, "load") or {}
    return bool(load["corrected"]) if isinstance(load, Mapping) and "corrected" in load else None


def late(result: Result | None) -> int | None:
    """Open loads: transactions that started more than 1 ms after they were due; None if not said."""
    n = _get(result, "late")
    return None if n is None else int(n)


def process_cpu_ns(result: Result | None) -> float | None:
    """``cpu_ns_total``: the measuring threads' CPU over the window (a workload's client side in
    socket mode; both sides in memory mode; a job's management side), ns."""
    return _number(_get(result, "cpu_ns_total"))


def client_side_cpu_ns(result: Result | None) -> float | None:
    """Memory mode: the client side's share of ``cpu_ns_total``, ns; None otherwise."""
    return _number(_get(result, "client_side_cpu_ns"))


@dataclass(frozen=True)
class ServerCounters:
    """The server side's counters of one result (the ``server`` object).

    Attributes:
        cpu_ns: the server's CPU time, ns; transactions: the transactions it served, over the
            same span as ``cpu_ns``: the measuring window when ``window`` is true, else (results
            of older workers) from before the warm-up to the window's end — so their ratio is
            one side over one span either way.
        window: True when the counters cover exactly the measuring window.
    """

    cpu_ns: float | None
    transactions: int | None
    window: bool


def server(result: Result | None) -> ServerCounters | None:
    """The result's server counters, or None without a ``server`` object."""
    s = _get(result, "server")
    if not isinstance(s, Mapping):
        return None
    t = s.get("transactions")
    return ServerCounters(_number(s.get("cpu_ns")), None if t is None else int(t), bool(s.get("window")))


def client_timeline(result: Result | None) -> Sequence[Mapping[str, Any]]:
    """The client process's CPU samples (``client_timeline``); empty without them."""
    return _samples(_get(result, "client_timeline"))


def server_timeline(result: Result | None) -> Sequence[Mapping[str, Any]]:
    """The server process's CPU samples (``server.timeline``); empty without them."""
    s = _get(result, "server")
    return _samples(s.get("timeline") if isinstance(s, Mapping) else None)


def _samples(samples: Any) -> Sequence[Mapping[str, Any]]:
    return [s for s in samples or () if isinstance(s, Mapping) and s.get("t_ms") is not None]


def part(result: Result | None, name: str) -> Mapping[str, Any]:
    """A workload's own object in the result (e.g. the one named by its kind module); {} without
    one. Only a kind module (``workloads/<kind>.py``) decodes what is inside."""
    p = _get(result, name)
    return p if isinstance(p, Mapping) else {}


@dataclass(frozen=True)
class Timeline:
    """CPU samples of one process over one repetition (one per 100 ms).

    Attributes:
        t_s: each sample's time since the process's sampler started, s; cpu_pct: user + system
            CPU over the sample's interval, % of one CPU (200 = two CPUs busy); steal_pct: the
            host's steal over it, % of its CPUs. Shape (k,) each, in time order.
    """

    t_s: tuple[float, ...] = ()
    cpu_pct: tuple[float, ...] = ()
    steal_pct: tuple[float, ...] = ()

    @property
    def empty(self) -> bool:
        """True without samples."""
        return not self.t_s

    def mean_cpu_pct(self) -> float | None:
        """The mean CPU % over the samples, None without any."""
        return sum(self.cpu_pct) / len(self.cpu_pct) if self.cpu_pct else None

    def shifted(self, seconds: float) -> "Timeline":
        """The same samples ``seconds`` later (to put a process's samples on a job's clock)."""
        return Timeline(tuple(t + seconds for t in self.t_s), self.cpu_pct, self.steal_pct)


def timeline(samples: Sequence[Mapping[str, Any]] | None) -> Timeline:
    """A ``Timeline`` from a worker's samples (``t_ms``, ``user_pct``, ``system_pct``,
    ``steal_pct``); samples without ``t_ms`` are left out."""
    rows = _samples(samples)
    return Timeline(tuple(float(s["t_ms"]) / 1000.0 for s in rows),
                    tuple(float(s.get("user_pct") or 0.0) + float(s.get("system_pct") or 0.0) for s in rows),
                    tuple(float(s.get("steal_pct") or 0.0) for s in rows))
