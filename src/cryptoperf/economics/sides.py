"""Whose CPU a plan prices: one side of a stored run's cell, per repetition.

A primitive operation has one CPU figure, the worker's (``process``: its measuring threads' CPU
over the window ÷ operations). A workload with a server side (its result carries ``server``:
the server in its own process in socket mode, or the server side's share of the one thread in
memory mode) has three: the ``server``'s CPU per transaction, the ``client``'s, and ``both``
added up. Capacity planning for a server needs the server's; the client's is what a load
generator, a mesh sidecar or a fleet of clients pays.

Every per-side CPU figure a plan uses is the run's analysis's — ``workloads.generic``'s
``side_cpu_ns_per_tx`` per repetition, kept per block in each level's ``Point`` — read here
through ``side_samples``, so the report and ``plan`` show one figure. Each is a ratio of one side
over one window: the server's is ``server.cpu_ns ÷ server.transactions`` (its own counters, read
over the same interval; docs/worker-protocol.md, "Workloads"), never ``server.cpu_ns ÷ ops``.
"""

from __future__ import annotations

from typing import Mapping

from cryptoperf.model import CellSummary
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.workloads.generic import SIDES, side_cpu_ns_per_tx

__all__ = ["SIDES", "WORKLOAD_SIDES", "SIDE_TEXT", "side_cpu_ns_per_tx", "cell_sides", "default_side",
           "side_samples"]

#: The sides ``--side`` takes (``process`` is what a cell without a server side has anyway).
WORKLOAD_SIDES = ("server", "client", "both")
#: A side in words, as the answers name it.
SIDE_TEXT = {"server": "server CPU", "client": "client CPU", "both": "server + client CPU",
             "process": "worker CPU"}


def _by_block(run: StoredRun, s: CellSummary) -> Mapping[str, Mapping[int, float]]:
    point = run.analysis.workloads.point_of(s.cell.key)
    return {} if point is None else point.cpu_ns_per_tx_by_block


def cell_sides(run: StoredRun, s: CellSummary) -> tuple[str, ...]:
    """The sides cell ``s`` of ``run`` measured, in ``SIDES`` order: (``server``, ``client``,
    ``both``) for a workload whose server CPU was measured, (``client``,) when its server is
    external, (``process``,) otherwise."""
    measured = _by_block(run, s)
    return tuple(side for side in WORKLOAD_SIDES if side in measured) or ("process",)


def default_side(sides: tuple[str, ...]) -> str:
    """The side a plan prices unless told: the server when the cell has one, else the worker
    process (or, for a workload whose server was external, the client)."""
    return "server" if "server" in sides else sides[0]


def side_samples(run: StoredRun, s: CellSummary, side: str) -> Mapping[int, float]:
    """Block → one repetition's CPU ns per transaction on ``side`` of cell ``s`` in ``run``, as
    the run's analysis computed it (analysed repetitions only: no calibration, no superseded
    attempt; values > 0), in block order. ``process`` is the analysis's CPU per operation
    (``CellSummary.process_cpu_ns_per_op_by_block``). Raises ValueError for an unknown side."""
    if side not in SIDES:
        raise ValueError(f"unknown side '{side}' (known: {', '.join(SIDES)})")
    if side == "process":
        return s.process_cpu_ns_per_op_by_block
    return dict(sorted(_by_block(run, s).get(side, {}).items()))
