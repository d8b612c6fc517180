"""Figures of a workload level that every workload has: transactions per second, and the CPU each
side spent per transaction.

A figure is one side over one span: the server's CPU per transaction is the server's CPU time
divided by the transactions the server served over the same span (``server.cpu_ns /
server.transactions``), never by the client's count of the window (``ops``) — older workers read
the server's counters from before the warm-up to the window's end, and a ratio of two spans
overstated it by (warm-up + window) ÷ window.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from cryptoperf.workloads import access


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def client_cpu_ns_per_tx(results: Iterable[access.Result]) -> float | None:
    """Median over ``results`` (one per measured repetition) of the client side's CPU ns per
    transaction: ``cpu_ns_total / ops`` (socket mode: the client threads), or
    ``client_side_cpu_ns / ops`` in memory mode, where ``cpu_ns_total`` holds both sides; None
    without a result that has both."""
    vals = []
    for r in results:
        n = access.ops(r)
        cpu = access.client_side_cpu_ns(r)
        if cpu is None:
            cpu = access.process_cpu_ns(r)
        if n and cpu is not None:
            vals.append(cpu / n)
    return _median(vals)


def server_cpu_ns_per_tx(results: Iterable[access.Result]) -> float | None:
    """Median over ``results`` of the server side's CPU ns per transaction, ``server.cpu_ns /
    server.transactions``: the server's CPU over the transactions it served in the same span (in
    memory mode, the server side's share of the one thread's CPU time); None without a
    ``server`` with both counters (``ike-phase1`` has none)."""
    vals = []
    for r in results:
        s = access.server(r)
        if s is not None and s.cpu_ns is not None and s.transactions:
            vals.append(s.cpu_ns / s.transactions)
    return _median(vals)
