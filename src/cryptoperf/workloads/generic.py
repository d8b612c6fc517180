"""Figures every workload has, per level and per side: transactions per second with their band,
the CPU each side spent per transaction, late transactions, latency percentiles, the CPU over
one representative repetition, and the latency objective. A workload without a module of its own
here (``workloads/<kind>.py``) has only these.

A figure is one side over one span: the server's CPU per transaction is the server's CPU time
divided by the transactions the server served over the same span (``server.cpu_ns /
server.transactions``), never by the client's count of the window (``ops``) — older workers read
the server's counters from before the warm-up to the window's end, and a ratio of two spans
overstated it by (warm-up + window) ÷ window.

Bands (``BAND_LEVEL``) are across repetitions and describe one point; they decide nothing (the
verdicts are the analysis's deltas).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence


from cryptoperf import stats
from cryptoperf.model import CellSummary, Delta, Outcome
from cryptoperf.levels import Load
from cryptoperf.workloads import access

#: Confidence level of a level's band across repetitions (not adjusted for multiplicity: it
#: describes one point, it decides nothing).
BAND_LEVEL = stats.DEFAULT_LEVEL
#: The kinds of level a load plot has a panel for, in order: an unpaced closed loop, a closed
#: loop paced to a rate, an open loop, a job.
PANELS = ("closed", "paced", "open", "targets")


def scaled(e: stats.Estimate | None, factor: float) -> stats.Estimate | None:
    """``e`` with its value and bounds multiplied by ``factor`` (> 0): a rate in other units."""
    if e is None:
        return None
    return stats.Estimate(e.value * factor, None if e.low is None else e.low * factor,
                          None if e.high is None else e.high * factor, e.level, e.n)


def _dict(x: Any) -> dict[str, Any] | None:
    return None if x is None else x.as_dict()


# ------------------------------------------------------------------------------ per side

#: The sides whose CPU per transaction the analysis computes: a workload's server, its client,
#: both added up (only where both are measured), and the worker process's measuring threads
#: (what a cell without a server side has: a primitive, ``ike-phase1``).
SIDES = ("server", "client", "both", "process")


def side_cpu_ns_per_tx(result: access.Result | None, side: str) -> float | None:
    """One repetition's CPU ns per transaction on ``side`` (``SIDES``), or None when its result
    does not measure that side. Each is one side's CPU over its own transactions in one span:

    - ``server``: ``server.cpu_ns / server.transactions`` (the server's own counters, read over
      the measuring window, plus its key's token daemon where it has one; in memory mode the
      server side's share of the one thread); None
      without a ``server`` with both counters (an external server, ``ike-phase1``);
    - ``client``: in memory mode ``client_side_cpu_ns / ops``, else the client threads'
      ``cpu_ns_total / ops``, plus a client-side process of the workload's own
      (``peer_process_cpu_ns``: ike-sa's initiator daemon) (None for a result without a server
      side: no split);
    - ``both``: server + client (None unless both are measured);
    - ``process``: ``cpu_ns_total / ops``, the worker's measuring threads, whatever they ran.

    Raises ValueError for an unknown side.
    """
    if side not in SIDES:
        raise ValueError(f"unknown side '{side}' (known: {', '.join(SIDES)})")
    if side == "process":
        n, cpu = access.ops(result), access.process_cpu_ns(result)
        return cpu / n if cpu is not None and n else None
    s = access.server(result)
    if s is None:
        return None
    if side == "server":
        return s.cpu_ns / s.transactions if s.cpu_ns is not None and s.transactions else None
    if side == "client":
        n, cpu = access.ops(result), access.client_side_cpu_ns(result)
        cpu = access.process_cpu_ns(result) if cpu is None else cpu
        return (cpu + access.peer_process_cpu_ns(result)) / n if cpu is not None and n else None
    server, client = side_cpu_ns_per_tx(result, "server"), side_cpu_ns_per_tx(result, "client")
    return None if server is None or client is None else server + client


def cpu_ns_per_tx_by_block(outcomes: Sequence[Outcome]) -> dict[str, dict[int, float]]:
    """Side → block → one repetition's CPU ns per transaction on that side (values > 0), for
    the measured repetitions ``outcomes`` (one per block, block order); a side no repetition
    measured is left out."""
    out: dict[str, dict[int, float]] = {}
    for side in SIDES:
        values = {o.repetition.block: v for o in outcomes
                  if (v := side_cpu_ns_per_tx(o.result, side)) is not None and v > 0}
        if values:
            out[side] = values
    return out


def throughput_estimate(outcomes: Sequence[Outcome]) -> stats.Estimate | None:
    """Transactions/s of a level: the geometric mean over its measured repetitions with the
    ``BAND_LEVEL`` t interval of the mean of their logs (``stats.log_mean``; no bounds with fewer
    than ``stats.MIN_BLOCKS`` repetitions), or None when none was measured."""
    values = [o.throughput.ops_per_s for o in outcomes if o.throughput and o.throughput.ops_per_s > 0]
    if not values:
        return None
    return stats.log_mean(values, BAND_LEVEL, min_n=stats.MIN_BLOCKS)


def merged_latency(outcomes: Sequence[Outcome]) -> stats.Latency | None:
    """Percentiles (ns) of the repetitions' histograms merged, or None without any."""
    hists = [h for h in (access.histogram(o.result) for o in outcomes) if h]
    if not hists:
        return None
    try:
        return stats.latency_of(stats.merge_histograms(hists))
    except ValueError:
        return None


# ------------------------------------------------------------------------------ a level

@dataclass(frozen=True)
class Representative:
    """The repetition whose CPU over time a report draws: the last measured block's (its latest
    attempt), with both processes' samples.

    Attributes:
        block: its block; client, server: the client and server processes' samples (the
            server's empty in memory mode, where both sides run in the client's thread).
    """

    block: int
    client: access.Timeline
    server: access.Timeline

    @property
    def client_cpu_pct(self) -> float | None:
        """Mean user + system CPU of the client over the samples, % of one CPU."""
        return self.client.mean_cpu_pct()

    @property
    def server_cpu_pct(self) -> float | None:
        """Mean user + system CPU of the server over the samples, % of one CPU."""
        return self.server.mean_cpu_pct()

    @property
    def steal_max_pct(self) -> float | None:
        """The largest steal % sample (the client's samples), None without samples."""
        return max(self.client.steal_pct) if self.client.steal_pct else None

    def as_dict(self) -> dict[str, Any]:
        """``block``, ``client_cpu_pct``, ``server_cpu_pct`` (mean over the samples, % of one
        CPU), ``steal_max_pct``; the samples themselves are in the repetition's result."""
        return {"block": self.block, "client_cpu_pct": self.client_cpu_pct, "server_cpu_pct": self.server_cpu_pct,
                "steal_max_pct": self.steal_max_pct}


def representative_of(outcomes: Sequence[Outcome]) -> Outcome | None:
    """The measured repetition a report shows one of: the last block's, latest attempt."""
    return max(outcomes, key=lambda o: (o.repetition.block, o.repetition.attempt), default=None)


@dataclass(frozen=True)
class Point:
    """One workload cell (a configuration at one load level) with its figures.

    Attributes:
        summary: the cell's summary; load: its parsed level; kind: the workload (worker op).
        mode: ``socket``, ``memory`` or ``file``, as the results say (else the cell's params).
        series: the configuration (the backend for ``speed``); order: its place in the run's
            series order (the baseline first), which picks its colour in every plot.
        is_baseline: the cell is the baseline configuration's.
        delta: its comparison with the baseline (None for the baseline and without a study).
        blocks: the blocks of its measured repetitions, in order.
        tx_per_s: transactions per second with its band (``throughput_estimate``).
        bytes_per_tx: the bytes one transaction carries (0 for handshakes).
        cpu_ns_per_tx_by_block: side (``SIDES``) → block → that repetition's CPU ns per
            transaction on the side (``side_cpu_ns_per_tx``); what ``plan`` pairs by block.
        late: open levels: transactions that started more than 1 ms late, summed over the
            repetitions (None when the results do not say); ops: transactions, summed.
        latency: percentiles of the repetitions' histograms merged.
        corrected: latency runs from each transaction's due time (open loads).
        representative: the repetition whose CPU over time is drawn, or None.
    """

    summary: CellSummary
    load: Load
    kind: str
    mode: str
    series: str
    order: int
    is_baseline: bool
    delta: Delta | None
    blocks: tuple[int, ...]
    tx_per_s: stats.Estimate | None
    bytes_per_tx: int
    cpu_ns_per_tx_by_block: Mapping[str, Mapping[int, float]]
    late: int | None
    ops: int
    latency: stats.Latency | None
    corrected: bool
    representative: Representative | None

    def cpu_ns_per_tx_estimate(self, side: str) -> stats.Estimate | None:
        """CPU ns per transaction on ``side`` (``SIDES``): the geometric mean over the
        repetitions with its ``BAND_LEVEL`` band (``stats.log_mean``; no bounds below
        ``stats.MIN_BLOCKS`` repetitions), as ``tx_per_s`` is; None where no repetition measured
        that side."""
        values = [v for v in self.cpu_ns_per_tx_by_block.get(side, {}).values() if v > 0]
        return stats.log_mean(values, BAND_LEVEL, min_n=stats.MIN_BLOCKS) if values else None

    def cpu_ns_per_tx(self, side: str) -> float | None:
        """CPU ns per transaction on ``side`` (``SIDES``): the value of
        ``cpu_ns_per_tx_estimate``, None where no repetition measured that side."""
        e = self.cpu_ns_per_tx_estimate(side)
        return None if e is None else e.value

    @property
    def client_cpu_ns_per_tx(self) -> float | None:
        """The client side's CPU ns per transaction (``cpu_ns_per_tx("client")``); for a
        workload without a server side, its measuring threads' (``process``)."""
        client = self.cpu_ns_per_tx("client")
        return self.cpu_ns_per_tx("process") if client is None and "server" not in self.cpu_ns_per_tx_by_block else client

    @property
    def server_cpu_ns_per_tx(self) -> float | None:
        """The server side's CPU ns per transaction (``cpu_ns_per_tx("server")``)."""
        return self.cpu_ns_per_tx("server")

    @property
    def measured(self) -> bool:
        """At least one repetition was measured."""
        return bool(self.blocks)

    @property
    def panel(self) -> str:
        """``closed`` (unpaced closed loop), ``paced`` (closed loop paced to a rate), ``open``, or
        ``targets`` (a job)."""
        if self.load.kind in ("open", "targets"):
            return self.load.kind
        return "paced" if self.load.rate_per_s is not None else "closed"

    @property
    def x(self) -> float:
        """The x of this level on a load plot: connections (closed), targets (a job), else the
        rate per s."""
        if self.panel == "targets":
            return float(self.load.targets or 0)
        return float(self.load.connections) if self.panel == "closed" else float(self.load.rate_per_s or 0.0)

    @property
    def mb_per_s(self) -> float | None:
        """MB/s (10⁶ bytes/s) at the estimate's transactions/s, for a transaction that carries
        bytes; None otherwise."""
        if self.tx_per_s is None or not self.bytes_per_tx:
            return None
        return self.tx_per_s.value * self.bytes_per_tx / 1e6

    @property
    def late_share(self) -> float | None:
        """Late transactions as a share of all (fraction), None when not counted."""
        return None if self.late is None or not self.ops else self.late / self.ops

    @property
    def bytes_per_s(self) -> stats.Estimate | None:
        """Bytes per second (``tx_per_s`` × ``bytes_per_tx``) with its band, for a transaction
        that carries bytes; None otherwise."""
        return scaled(self.tx_per_s, self.bytes_per_tx) if self.bytes_per_tx else None

    def as_dict(self) -> dict[str, Any]:
        """The point's figures, JSON-ready: ``cell`` (its key), ``configuration``, ``baseline``
        (bool), ``vs`` (the configuration it is compared with, None for the baseline),
        ``level`` (``text``, ``panel``, ``x``: connections, rate per s or targets), ``mode``,
        ``blocks``, ``tx_per_s`` and ``bytes_per_s`` (``Estimate.as_dict``: geometric mean with
        its band), ``bytes_per_tx``, one ``<side>_cpu_ns_per_tx`` estimate per side measured
        (``server``, ``client``, ``both``, ``process``: whose CPU it is, over whose
        transactions), ``late``, ``ops``, ``late_share`` (fraction), ``latency``
        (``Latency.as_dict``, ns) with ``latency_corrected`` (timed from each transaction's due
        time), and ``representative`` (the repetition whose CPU over time is drawn)."""
        out: dict[str, Any] = {
            "cell": self.summary.cell.key, "configuration": self.series, "baseline": self.is_baseline,
            "vs": self.delta.baseline if self.delta is not None else None,
            "level": {"text": self.load.text, "panel": self.panel, "x": self.x}, "mode": self.mode,
            "blocks": list(self.blocks), "tx_per_s": _dict(self.tx_per_s), "bytes_per_tx": self.bytes_per_tx,
            "bytes_per_s": _dict(self.bytes_per_s)}
        for side in SIDES:
            e = self.cpu_ns_per_tx_estimate(side)
            if e is not None:
                out[f"{side}_cpu_ns_per_tx"] = e.as_dict()
        out.update(late=self.late, ops=self.ops, late_share=self.late_share, latency=_dict(self.latency),
                   latency_corrected=self.corrected,
                   representative=self.representative.as_dict() if self.representative else None)
        return out


def mode_of(summary: CellSummary, outcomes: Sequence[Outcome]) -> str | None:
    """A cell's mode: as its results say, else as its params ask; None when neither says."""
    for o in outcomes:
        m = access.mode(o.result)
        if m:
            return str(m)
    m = summary.cell.params.get("mode")
    return str(m) if m else None


def point(summary: CellSummary, load: Load, outcomes: Sequence[Outcome], series: str, order: int,
          is_baseline: bool, delta: Delta | None, mode: str) -> Point:
    """The ``Point`` of one cell from its measured repetitions (``outcomes``, block order)."""
    results = [o.result for o in outcomes]
    counted = [(access.late(r), access.ops(r)) for r in results]
    counted = [(n, k) for n, k in counted if n is not None]
    rep = representative_of(outcomes)
    corrected = next((c for c in (access.corrected(r) for r in results) if c is not None), load.kind == "open")
    return Point(
        summary=summary, load=load, kind=summary.cell.op, mode=mode,
        series=series, order=order, is_baseline=is_baseline, delta=delta,
        blocks=tuple(o.repetition.block for o in outcomes), tx_per_s=throughput_estimate(outcomes),
        bytes_per_tx=next((access.bytes_per_op(r) for r in results), 0),
        cpu_ns_per_tx_by_block=cpu_ns_per_tx_by_block(outcomes),
        late=sum(n for n, _ in counted) if counted else None, ops=sum(k for _, k in counted),
        latency=merged_latency(outcomes), corrected=corrected,
        representative=None if rep is None else Representative(
            rep.repetition.block, access.timeline(access.client_timeline(rep.result)),
            access.timeline(access.server_timeline(rep.result))))


# ------------------------------------------------------------------------------ families

@dataclass(frozen=True)
class Family:
    """The load levels of one workload operation on one backend in one mode: what one
    throughput-vs-load plot shows.

    Attributes:
        kind: the workload; own: True when the kind has figures (and report sections) of its own.
        backend, label (the operation's label without the level), size_bytes, mode.
        points: every level × configuration, ordered by panel, level, then series order.
        transaction: what one transaction is, (one, many), as the worker names it.
    """

    kind: str
    own: bool
    backend: str
    label: str
    size_bytes: int | None
    mode: str
    points: tuple[Point, ...]
    transaction: tuple[str, str] = ("transaction", "transactions")

    @property
    def job(self) -> bool:
        """Every level is a job (``targets:N``): a fixed amount of work, not a time window."""
        return all(p.panel == "targets" for p in self.points)

    def panels(self) -> list[str]:
        """The ``PANELS`` that have points, in order."""
        kinds = {p.panel for p in self.points}
        return [p for p in PANELS if p in kinds]

    def series(self) -> list[tuple[str, int]]:
        """(series name, its order) of every configuration with a point, in series order."""
        seen: dict[str, int] = {}
        for p in self.points:
            seen.setdefault(p.series, p.order)
        return sorted(seen.items(), key=lambda kv: kv[1])

    def levels(self) -> list[tuple[str, list[Point]]]:
        """(level text, its points) in the family's order."""
        out: dict[str, list[Point]] = {}
        for p in self.points:
            out.setdefault(p.load.text, []).append(p)
        return list(out.items())

    def identity(self) -> dict[str, Any]:
        """What names the family in a document: ``kind``, ``backend``, ``label`` (the operation's
        label without the level), ``size_bytes``, ``mode``."""
        return {"kind": self.kind, "backend": self.backend, "label": self.label, "size_bytes": self.size_bytes,
                "mode": self.mode}

    def as_dict(self) -> dict[str, Any]:
        """``identity()`` with ``own`` (the kind has figures of its own: ``WorkloadAnalysis.own``),
        ``transaction`` ([one, many]), ``panels`` and ``points`` (``Point.as_dict``, in the
        family's order)."""
        return {**self.identity(), "own": self.own, "transaction": list(self.transaction), "panels": self.panels(),
                "points": [p.as_dict() for p in self.points]}


def family_of(kind: str, own: bool, key: tuple[str, str, int | None, str], points: Sequence[Point],
              transaction: tuple[str, str] = ("transaction", "transactions")) -> Family:
    """A ``Family`` of ``points``, ordered by panel, level, then series order."""
    order = {p: i for i, p in enumerate(PANELS)}
    backend, label, size, mode = key
    return Family(kind, own, backend, label, size, mode,
                  tuple(sorted(points, key=lambda p: (order[p.panel], p.x, p.order))), transaction)


# ------------------------------------------------------------------------------ objective

@dataclass(frozen=True)
class Objective:
    """One configuration's answer to a p99 bound over its open levels.

    Attributes:
        family: its family; series: the configuration; bound_ms: the bound.
        met: the highest rate (per s) met below the first miss, with its p99 (ns), or None.
        missed: the first rate whose p99 is over the bound, with its p99, or None.
        rates: every open rate measured, ascending.
    """

    family: Family
    series: str
    bound_ms: float
    met: tuple[float, float] | None
    missed: tuple[float, float] | None
    rates: tuple[float, ...]

    def as_dict(self) -> dict[str, Any]:
        """``family`` (``Family.identity``), ``configuration``, ``p99_bound_ms``, ``met`` and
        ``missed`` (``{rate_per_s, p99_ns}`` or None), ``rates_per_s``."""
        def rate(x: tuple[float, float] | None) -> dict[str, float] | None:
            return None if x is None else {"rate_per_s": x[0], "p99_ns": x[1]}
        return {"family": self.family.identity(), "configuration": self.series, "p99_bound_ms": self.bound_ms,
                "met": rate(self.met), "missed": rate(self.missed), "rates_per_s": list(self.rates)}


def objectives(families: Sequence[Family], bounds_ms: Mapping[str, float]) -> list[Objective]:
    """Per family whose operation has a bound (``bounds_ms``: label → ``p99_bound_ms``) and per
    configuration: scanning its open rates upwards, the highest whose p99 (median across
    measured repetitions, the summary's ``p99_ns``) is at or under the bound before the first
    that is over, and that first one."""
    out = []
    for f in families:
        bound = bounds_ms.get(f.label)
        if bound is None or f.job:
            continue
        for series, _ in f.series():
            pts = sorted((p for p in f.points if p.series == series and p.panel == "open"
                          and p.summary.p99_ns is not None), key=lambda p: p.x)
            met = missed = None
            for p in pts:
                p99 = float(p.summary.p99_ns)  # type: ignore[arg-type]
                if p99 <= bound * 1e6:
                    met = (p.x, p99)
                else:
                    missed = (p.x, p99)
                    break
            out.append(Objective(f, series, bound, met, missed, tuple(p.x for p in pts)))
    return out
