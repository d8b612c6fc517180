"""Figures of encrypted storage (the ``storage`` workload: file I/O in the clear or through an
encryption layer): MB/s and I/Os per second with their bands, and the CPU it took — the whole
worker process's, user and system, over the window — as % of the host, cores, and ns per byte
moved. For storage what matters is the CPU it takes to move a given amount of data, so the two
are computed together.

The worker's ``storage`` object (docs/worker-protocol.md, "Workloads") is decoded here
(``Setting``); results of older workers without the process's CPU fall back to the I/O threads'
(``cpu_ns_total``), all counted as user time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from cryptoperf import stats
from cryptoperf.model import Outcome
from cryptoperf.workloads import access
from cryptoperf.workloads.generic import Family, Point, scaled

#: The workload these figures are of.
KIND = "storage"
#: The result's object this module decodes.
PART = "storage"


@dataclass(frozen=True)
class Setting:
    """How a storage cell ran, as its result says: ``direct`` I/O or buffered, ``cache``
    (``cold``/``cached``), ``pattern`` (``random``/``sequential``), ``direction`` (``read``,
    ``write``, ``mixed``) with ``read_pct``, ``fsync``, ``layer`` (``userspace``/``dm-crypt``),
    ``block_bytes`` and ``file_bytes``."""

    direct: bool
    cache: str
    pattern: str
    direction: str
    read_pct: Any
    fsync: str
    layer: str
    block_bytes: int | None
    file_bytes: int | None


def setting(result: access.Result | None) -> Setting | None:
    """The ``Setting`` of a storage result, None without a ``storage`` object."""
    st = access.part(result, PART)
    if not st:
        return None
    block = st.get("block_bytes") or access.bytes_per_op(result) or None
    return Setting(bool(st.get("direct")), str(st.get("cache") or ""), str(st.get("pattern") or ""),
                   str(st.get("direction") or ""), st.get("read_pct"), str(st.get("fsync") or ""),
                   str(st.get("layer") or ""), int(block) if block else None,
                   int(st["file_bytes"]) if st.get("file_bytes") else None)


def _process_cpu_ns(result: access.Result) -> tuple[float, float] | None:
    """(user, system) CPU ns of the worker process over the window; the I/O threads' CPU as user
    time for results that lack the process's; None without either."""
    st = access.part(result, PART)
    u, s = st.get("process_user_ns"), st.get("process_system_ns")
    if u is None or s is None:
        u, s = access.process_cpu_ns(result), 0.0
    return None if u is None else (float(u), float(s))


@dataclass(frozen=True)
class CellFigures:
    """What one storage cell (a scheme at one level) measured, over its measured repetitions.

    Attributes:
        point: the generic figures (``point.tx_per_s``: I/Os per second).
        mb_s: MB/s (10⁶ bytes/s): the geometric mean with its band across repetitions (None
            without a measured repetition).
        cpu_pct: the process's CPU (user + system) over the window, % of the host's CPUs
            (median over repetitions); user_pct, system_pct: its two parts; cores: the same
            as CPUs kept busy (cpu_pct × CPUs ÷ 100).
        process_cpu_ns_per_byte: the process's CPU ns per byte moved (median over repetitions).
        setting: how it ran (of its first measured repetition).
    """

    point: Point
    mb_s: stats.Estimate | None
    cpu_pct: float | None
    user_pct: float | None
    system_pct: float | None
    cores: float | None
    process_cpu_ns_per_byte: float | None
    setting: Setting | None

    def as_dict(self) -> dict[str, Any]:
        """``cell`` (the point's key: its generic figures are in the families), ``configuration``,
        ``level``, ``io_per_s`` and ``mb_per_s`` (``Estimate.as_dict``), ``cpu_pct``,
        ``user_pct``, ``system_pct`` (% of the host's CPUs), ``cores``,
        ``process_cpu_ns_per_byte`` and ``setting``."""
        p = self.point
        return {"cell": p.summary.cell.key, "configuration": p.series, "level": p.load.text,
                "io_per_s": p.tx_per_s.as_dict() if p.tx_per_s else None,
                "mb_per_s": self.mb_s.as_dict() if self.mb_s else None, "cpu_pct": self.cpu_pct,
                "user_pct": self.user_pct, "system_pct": self.system_pct, "cores": self.cores,
                "process_cpu_ns_per_byte": self.process_cpu_ns_per_byte,
                "setting": asdict(self.setting) if self.setting else None}


def _median(xs: Sequence[float]) -> float | None:
    return float(np.median(xs)) if xs else None


def figures(p: Point, outcomes: Sequence[Outcome], host_cpus: int) -> CellFigures:
    """The ``CellFigures`` of one storage cell from its measured repetitions."""
    outs = [o for o in outcomes if access.wall_ns(o.result)]
    first = next((setting(o.result) for o in outs if setting(o.result)), None)
    block = first.block_bytes if first else (next((access.bytes_per_op(o.result) for o in outs), 0) or None)
    user, system, per_byte = [], [], []
    for o in outs:
        cpu = _process_cpu_ns(o.result)
        if cpu is None:
            continue
        wall = float(access.wall_ns(o.result))  # type: ignore[arg-type]
        user.append(100.0 * cpu[0] / wall / host_cpus)
        system.append(100.0 * cpu[1] / wall / host_cpus)
        moved = access.ops(o.result) * (block or 0)
        if moved:
            per_byte.append((cpu[0] + cpu[1]) / moved)
    total = _median([a + b for a, b in zip(user, system)])
    return CellFigures(point=p, mb_s=scaled(p.tx_per_s, block / 1e6) if block else None, cpu_pct=total,
                       user_pct=_median(user), system_pct=_median(system),
                       cores=None if total is None else total * host_cpus / 100.0,
                       process_cpu_ns_per_byte=_median(per_byte), setting=first)


@dataclass(frozen=True)
class StorageFamily:
    """A storage family (one operation on one backend) with each point's ``CellFigures``, in
    the family's order; ``setting``: how its first measured cell ran (its scale)."""

    family: Family
    cells: tuple[CellFigures, ...]
    setting: Setting | None

    def as_dict(self) -> dict[str, Any]:
        """``family`` (``Family.identity``), ``setting`` and ``cells`` (``CellFigures.as_dict``)."""
        return {"family": self.family.identity(), "setting": asdict(self.setting) if self.setting else None,
                "cells": [c.as_dict() for c in self.cells]}


@dataclass(frozen=True)
class StorageFigures:
    """Every storage figure of a run: ``families``, and ``host_cpus``, the CPUs the % are of."""

    families: tuple[StorageFamily, ...]
    host_cpus: int

    def cell(self, key: str) -> CellFigures | None:
        """The ``CellFigures`` of the cell keyed ``key``, None for a cell that is not a storage
        level (what the answer table reads its CPU % of host from)."""
        return next((c for f in self.families for c in f.cells if c.point.summary.cell.key == key), None)

    def cpu_pct_of_host(self, key: str) -> float | None:
        """The process CPU of the storage level keyed ``key``, % of the host's CPUs
        (``CellFigures.cpu_pct``; ``workloads.HostCpuShare``), None for another cell."""
        c = self.cell(key)
        return c.cpu_pct if c is not None else None

    def as_dict(self) -> dict[str, Any]:
        """``families`` (``StorageFamily.as_dict``) and ``host_cpus``."""
        return {"families": [f.as_dict() for f in self.families], "host_cpus": self.host_cpus}


def analyse(families: Sequence[Family], measured: Mapping[str, Sequence[Outcome]], context: Any) -> StorageFigures:
    """The ``StorageFigures`` of a run's storage families (``measured``: cell key → its measured
    repetitions; ``context``: a ``workloads.Context``)."""
    out = []
    for f in families:
        cells = tuple(figures(p, measured.get(p.summary.cell.key, ()), context.host_cpus) for p in f.points)
        out.append(StorageFamily(f, cells, next((c.setting for c in cells if c.setting and c.setting.block_bytes),
                                                None)))
    return StorageFigures(tuple(out), context.host_cpus)
