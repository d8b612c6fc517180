"""Whose CPU a plan prices: one side of a stored run's cell, per repetition.

A primitive operation has one CPU figure, the worker's (``process``: its measuring threads' CPU
over the window ÷ operations). A workload with a server side (its result carries ``server``:
the server in its own process in socket mode, or the server side's share of the one thread in
memory mode) has three: the ``server``'s CPU per transaction, the ``client``'s, and ``both``
added up. Capacity planning for a server needs the server's; the client's is what a load
generator, a mesh sidecar or a fleet of clients pays.

Every per-side CPU figure a plan uses is read here, through ``side_samples`` (block → one
repetition's value), so that the figures come from one place. Each is a ratio of one side over
one window: the server's is ``server.cpu_ns ÷ server.transactions`` (its own counters, read
over the same interval; docs/worker-protocol.md, "Workloads"), never ``server.cpu_ns ÷ ops``.
"""

from __future__ import annotations

from typing import Any, Mapping

from cryptoperf import analysis
from cryptoperf.model import CellSummary, Outcome
from cryptoperf.stored import StoredRun

#: The sides a plan can price: a workload's server, its client, both added up, or the worker
#: process of a cell without a server side (a primitive operation; a workload without one).
SIDES = ("server", "client", "both", "process")
#: The sides ``--side`` takes (``process`` is what a cell without a server side has anyway).
WORKLOAD_SIDES = ("server", "client", "both")
#: A side in words, as the answers name it.
SIDE_TEXT = {"server": "server CPU", "client": "client CPU", "both": "server + client CPU",
             "process": "worker CPU"}


def side_cpu_ns_per_tx(outcome: Outcome, side: str) -> float | None:
    """One repetition's CPU ns per transaction (per operation for a primitive) on ``side``,
    or None when the repetition was not measured or its result does not measure that side.

    - ``server``: ``server.cpu_ns / server.transactions`` (None when the server's CPU was not
      measured: an external server);
    - ``client``: in memory mode ``client_side_cpu_ns / ops``, in socket mode the client
      threads' ``cpu_ns_total / ops`` (None for a result without a server side: no split);
    - ``both``: server + client (None unless both are measured);
    - ``process``: ``cpu_ns_total / ops``, the worker's measuring threads.

    Raises ValueError for an unknown side.
    """
    if side not in SIDES:
        raise ValueError(f"unknown side '{side}' (known: {', '.join(SIDES)})")
    r = outcome.result
    if not outcome.ok or not r:
        return None
    ops, server = _field(r, "ops"), _field(r, "server")
    if side == "process":
        cpu = _field(r, "cpu_ns_total")
        return cpu / ops if cpu and ops else None
    if server is None:
        return None
    if side == "server":
        cpu, tx = _field(server, "cpu_ns"), _field(server, "transactions")
        return cpu / tx if cpu is not None and tx else None
    if side == "client":
        cpu = _field(r, "client_side_cpu_ns")
        cpu = _field(r, "cpu_ns_total") if cpu is None else cpu
        return cpu / ops if cpu is not None and ops else None
    s, c = side_cpu_ns_per_tx(outcome, "server"), side_cpu_ns_per_tx(outcome, "client")
    return None if s is None or c is None else s + c


def _field(obj: Any, name: str) -> Any:
    """Field ``name`` of a worker result or its server part, whether a message (a mapping) or
    a decoded object with attributes; None when absent."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def cell_sides(run: StoredRun, s: CellSummary) -> tuple[str, ...]:
    """The sides cell ``s`` of ``run`` measured, in ``SIDES`` order: (``server``, ``client``,
    ``both``) for a workload whose server CPU was measured, (``client``,) when its server is
    external, (``process``,) otherwise."""
    outcomes = _outcomes(run, s)
    found = tuple(side for side in WORKLOAD_SIDES if any(side_cpu_ns_per_tx(o, side) is not None for o in outcomes))
    return found or ("process",)


def default_side(sides: tuple[str, ...]) -> str:
    """The side a plan prices unless told: the server when the cell has one, else the worker
    process (or, for a workload whose server was external, the client)."""
    return "server" if "server" in sides else sides[0]


def side_samples(run: StoredRun, s: CellSummary, side: str) -> Mapping[int, float]:
    """Block → one repetition's CPU ns per transaction on ``side`` of cell ``s`` in ``run``
    (analysed repetitions: no calibration, no superseded attempt), in block order; only values
    > 0. ``process`` is the analysis's CPU per operation (``CellSummary.cpu_ns_per_op_by_block``).
    Raises ValueError for an unknown side."""
    if side == "process":
        return s.cpu_ns_per_op_by_block
    out = {}
    for o in _outcomes(run, s):
        v = side_cpu_ns_per_tx(o, side)
        if v is not None and v > 0:
            out[o.repetition.block] = v
    return dict(sorted(out.items()))


def _outcomes(run: StoredRun, s: CellSummary) -> list[Outcome]:
    return [o for o in analysis.analysed(run.outcomes)
            if o.cell.key == s.cell.key and o.ok and o.latency and o.throughput]
