"""The only place the workload analysis and the report read a worker's result.

A result arrives decoded (``result.WorkerResult``: docs/worker-protocol.md, "run" and
"Workloads"); every figure the analysis computes from it reads its fields through these small
functions, so that what a field means when it is missing (results stored by older workers) is
said once, and a workload's own object (``extras``) is opened in one place. Each takes the result
(or None) and returns a plain value, or None when the result does not carry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cryptoperf.result import CpuSample, WorkerResult

Result = WorkerResult


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def ops(result: Result | None) -> int:
    """Operations (transactions, I/Os, completed targets) in the measuring window; 0 if none."""
    return int(result.ops or 0) if result is not None else 0


def wall_ns(result: Result | None) -> float | None:
    """Length of the measuring window (a job's time), ns."""
    return None if result is None else _number(result.wall_ns)


def bytes_per_op(result: Result | None) -> int:
    """Bytes one operation carries (a transfer's size, a storage I/O's block); 0 if none."""
    return int(result.bytes_per_op or 0) if result is not None else 0


def histogram(result: Result | None) -> str | None:
    """The encoded latency histogram (HdrHistogram V2, base64), or None."""
    return None if result is None else result.histogram or None


def batch(result: Result | None) -> int | None:
    """Operations per timed sample, or None."""
    return int(result.batch) if result is not None and result.batch else None


def timing(result: Result | None) -> str:
    """``batched`` or ``individual`` ('' when not said)."""
    return "" if result is None else str(result.timing or "")


def library_text(result: Result | None, short: bool = False) -> str:
    """``library library_version`` as the worker reported them; with ``short``, a multi-crate
    version list (RustCrypto) is cut after its first entry."""
    if result is None:
        return ""
    version = str(result.library_version or "")
    if short and "," in version:
        version = version.split(",")[0] + ", …"
    return f"{result.library or ''} {version}".strip()


def cpu_mask(result: Result | None) -> str | None:
    """The CPU mask the worker verified and ran under (``cpu_mask``), None when unmasked."""
    return None if result is None else result.cpu_mask or None


def cpu_mask_cleared(result: Result | None) -> bool | None:
    """Whether the mask took any capability away on this machine; None when not said."""
    v = None if result is None else result.cpu_mask_cleared
    return None if v is None else bool(v)


def mode(result: Result | None) -> str | None:
    """A workload's mode as run (``socket``, ``memory``, ``file``), or None."""
    return None if result is None else result.mode or None


def corrected(result: Result | None) -> bool | None:
    """Whether the latency runs from each transaction's due time (``load.corrected``), None when
    the result does not say."""
    return None if result is None or result.load is None else result.load.corrected


def late(result: Result | None) -> int | None:
    """Open loads: transactions that started more than 1 ms after they were due; None if not said."""
    return None if result is None or result.late is None else int(result.late)


def process_cpu_ns(result: Result | None) -> float | None:
    """``cpu_ns_total``: the measuring threads' CPU over the window (a workload's client side in
    socket mode; both sides in memory mode; a job's management side), ns."""
    return None if result is None else _number(result.cpu_ns_total)


def peer_process_cpu_ns(result: Result | None) -> float:
    """The CPU of a process the workload runs as its own client-side peer (ike-sa's initiator
    daemon: ``peer_process_cpu_ns``) over the window, ns; 0 without one."""
    return 0.0 if result is None else (_number(result.peer_process_cpu_ns) or 0.0)


def client_side_cpu_ns(result: Result | None) -> float | None:
    """Memory mode: the client side's share of ``cpu_ns_total``, ns; None otherwise."""
    return None if result is None else _number(result.client_side_cpu_ns)


@dataclass(frozen=True)
class ServerCounters:
    """The server side's counters of one result (the ``server`` object).

    Attributes:
        cpu_ns: the server's CPU time, ns — with the server's key on a token behind a daemon,
            the daemon's over the same span added (``device_process_cpu_ns``: the host CPU the
            server's handshakes cost); transactions: the transactions it served, over the
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
    s = None if result is None else result.server
    if s is None:
        return None
    cpu = _number(s.cpu_ns)
    if cpu is not None and s.device_process_cpu_ns is not None:
        cpu += s.device_process_cpu_ns  # the server's key on a token behind a daemon: its host CPU too
    return ServerCounters(cpu, s.transactions, s.window)


def client_timeline(result: Result | None) -> Sequence[CpuSample]:
    """The client process's CPU samples (``client_timeline``); empty without them."""
    return (result.client_timeline or ()) if result is not None else ()


def server_timeline(result: Result | None) -> Sequence[CpuSample]:
    """The server process's CPU samples (``server.timeline``); empty without them."""
    s = None if result is None else result.server
    return (s.timeline or ()) if s is not None else ()


def samples(raw: Any) -> tuple[CpuSample, ...]:
    """CPU samples kept raw inside a workload's own object (``part``), decoded; entries that are
    not objects with a ``t_ms`` are left out."""
    return tuple(CpuSample.decode(v, "timeline") for v in raw or ()
                 if isinstance(v, Mapping) and isinstance(v.get("t_ms"), (int, float)))


def part(result: Result | None, name: str) -> Mapping[str, Any]:
    """A workload's own object in the result (e.g. the one named by its kind module); {} without
    one. Only a kind module (``workloads/<kind>.py``) decodes what is inside."""
    p = None if result is None else result.extras.get(name)
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


def timeline(samples: Sequence[CpuSample] | None) -> Timeline:
    """A ``Timeline`` from a process's decoded CPU samples (``t_ms``, ``user_pct``,
    ``system_pct``, ``steal_pct``; a missing percentage counts as 0)."""
    rows = tuple(samples or ())
    return Timeline(tuple(s.t_ms / 1000.0 for s in rows),
                    tuple((s.user_pct or 0.0) + (s.system_pct or 0.0) for s in rows),
                    tuple(s.steal_pct or 0.0 for s in rows))
