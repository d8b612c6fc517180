"""The workload analysis: the figures of workload levels (a TLS handshake, a transfer, an IKE
phase 1, encrypted storage, a fleet job), computed once from the workers' results by
``analysis.analyse`` and kept in the run's analysis (``Analysis.workloads``), so that every report
renders the same figures and none computes its own.

- ``access.py`` is the only place a worker's result is read;
- ``generic.py`` computes what every workload has, per level and per side (``Point``,
  ``Family``, the latency objective);
- a workload with figures of its own has a module here that declares ``KIND = "<its name>"``
  (and ``GENERIC = True`` when the generic sections still draw its families)
  and ``analyse(families, outcomes, context) -> <its figures>``, and one line in ``KINDS``
  (at the end of this file), so that nothing else in the package — and nothing in the report
  but that kind's own section module — names a workload.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from cryptoperf.model import CellSummary, Delta, Outcome
from cryptoperf.levels import parse_load
from cryptoperf.workloads import generic
from cryptoperf.workloads.generic import Family, Objective, Point

@dataclass(frozen=True)
class Context:
    """What the workload analysis needs beyond the outcomes.

    Attributes:
        baseline: the baseline configuration ('' for ``speed``).
        series: every series name in display order (the baseline first).
        host_cpus: the CPUs of the host the run measured on.
        p99_bounds_ms: operation label → its latency objective.
        transactions: workload → (one, many): what one transaction is, as the worker names it.
    """

    baseline: str = ""
    series: tuple[str, ...] = ()
    host_cpus: int = 1
    p99_bounds_ms: Mapping[str, float] = field(default_factory=dict)
    transactions: Mapping[str, tuple[str, str]] = field(default_factory=dict)


@runtime_checkable
class HostCpuShare(Protocol):
    """A kind's own figures that measure a cell's process CPU as a share of the host's CPUs
    (storage: the I/O process's CPU over the window)."""

    def cpu_pct_of_host(self, cell_key: str) -> float | None:
        """Cell ``cell_key``'s process CPU, % of all the host's CPUs; None for a cell the kind
        has no such figure for."""


@dataclass(frozen=True)
class WorkloadAnalysis:
    """Every workload figure of a run.

    Attributes:
        families: every workload family (any kind), in first-seen order.
        objectives: the latency objectives' answers (``generic.objectives``).
        own: workload name → the figures its own module computed (``kinds``).
    """

    families: tuple[Family, ...] = ()
    objectives: tuple[Objective, ...] = ()
    own: Mapping[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def _points(self) -> dict[str, Point]:
        return {p.summary.cell.key: p for f in self.families for p in f.points}

    def point_of(self, cell_key: str) -> Point | None:
        """The ``Point`` of the workload cell keyed ``cell_key`` (``Cell.key``), or None for a
        cell that is not a workload level."""
        return self._points.get(cell_key)

    def as_dict(self) -> dict[str, Any]:
        """``families`` (``Family.as_dict``), ``objectives`` (``Objective.as_dict``) and ``own``:
        workload name → its own figures' ``as_dict()`` (each kind's module documents its shape)."""
        return {"families": [f.as_dict() for f in self.families],
                "objectives": [o.as_dict() for o in self.objectives],
                "own": {kind: figures.as_dict() for kind, figures in self.own.items()}}

    def cpu_pct_of_host(self, cell_key: str) -> float | None:
        """The process CPU, % of the host's CPUs, that the kind of cell ``cell_key`` measured
        for it (``HostCpuShare``), None when its kind measures none."""
        for figures in self.own.values():
            if isinstance(figures, HostCpuShare):
                value = figures.cpu_pct_of_host(cell_key)
                if value is not None:
                    return value
        return None

    def of(self, kind: str) -> Any | None:
        """The figures of workload ``kind``'s own module, or None when the run has none."""
        return self.own.get(kind)

    @property
    def generic(self) -> list[Family]:
        """The families of workloads without figures of their own (what the generic
        throughput-vs-load section draws)."""
        return [f for f in self.families if not f.own]

    @property
    def timed(self) -> list[Family]:
        """The families measured over a time window (every family but jobs): what latency per
        level and CPU over time draw."""
        return [f for f in self.families if not f.job]


def _series(summary: CellSummary, baseline: str) -> str:
    c = summary.cell
    return c.configuration if baseline or c.configuration else c.backend


def analyse(summaries: Mapping[str, CellSummary], outcomes: Sequence[Outcome], deltas: Sequence[Delta],
            context: Context = Context()) -> WorkloadAnalysis:
    """The workload figures of a run: its workload cells arranged by (backend, operation label,
    size, mode) into families of ``generic.Point``s, the latency objectives, and each kind's own
    figures. ``outcomes`` are the run's analysed outcomes; unparsable load levels are skipped.
    An empty ``WorkloadAnalysis`` for a run without workloads."""
    measured: dict[str, list[Outcome]] = {}
    analysed: dict[str, list[Outcome]] = {}
    for o in outcomes:
        if o.superseded or o.repetition.calibration:
            continue
        analysed.setdefault(o.cell.key, []).append(o)
        if o.ok and o.latency and o.throughput:
            measured.setdefault(o.cell.key, []).append(o)
    by_cell = {(d.backend, d.label, d.size_bytes, d.configuration): d for d in deltas}
    order = {name: i for i, name in enumerate(context.series)}
    own = KINDS
    cells: dict[tuple, list[tuple[CellSummary, Any, str | None]]] = {}
    for s in summaries.values():
        c = s.cell
        if not c.is_workload:
            continue
        try:
            load = parse_load(str(c.load))
        except ValueError:
            continue
        key = (c.op, c.backend, c.operation_label, c.size_bytes)
        cells.setdefault(key, []).append((s, load, generic.mode_of(s, analysed.get(c.key, []))))
    keyed: dict[tuple, list[Point]] = {}
    for key, members in cells.items():
        known = {m for _, _, m in members if m}
        for s, load, mode in members:
            # a cell that never ran (unsupported, invalid) joins its operation's only mode
            mode = mode or (next(iter(known)) if len(known) == 1 else "socket")
            c = s.cell
            series = _series(s, context.baseline)
            outs = sorted(measured.get(c.key, []), key=lambda o: (o.repetition.block, o.repetition.attempt))
            p = generic.point(s, load, outs, series, order.setdefault(series, len(order)),
                              bool(context.baseline) and c.configuration == context.baseline,
                              by_cell.get((c.backend, c.label, c.size_bytes, c.configuration)), mode)
            keyed.setdefault(key + (mode,), []).append(p)
    # a kind whose families the generic sections still draw (``GENERIC``) is not "own" there
    families = tuple(generic.family_of(k[0], k[0] in own and not getattr(own[k[0]], "GENERIC", False), k[1:], pts,
                                       context.transactions.get(k[0], ("transaction", "transactions")))
                     for k, pts in keyed.items())
    figures = {}
    for kind, module in own.items():
        mine = [f for f in families if f.kind == kind]
        if mine:
            figures[kind] = module.analyse(mine, measured, context)
    return WorkloadAnalysis(families, tuple(generic.objectives(families, context.p99_bounds_ms)), figures)


# The workloads with figures of their own, one line each (imported last: they build on the
# types above).
from cryptoperf.workloads import fleet, ike, storage  # noqa: E402

#: Workload name → the module with its own figures.
KINDS: dict[str, ModuleType] = {storage.KIND: storage, fleet.KIND: fleet, ike.KIND: ike}
