"""Throughput against concurrent sessions: an operation measured at several thread counts
(its study ``threads = [1, 2, 4]``, each thread with its own session on a device) gives one row
per count; read together, they say how far its throughput grows with sessions and where it
stopped growing — a device's saturation point, as far as the counts measured show it.

Each count's throughput is the geometric mean of its measured repetitions' ops/s with its 95 %
t interval (log scale, across repetitions), as the workloads' throughput-vs-load figures are.
The peak is the count with the highest estimate; the figures are descriptive, not a verdict:
counts whose intervals overlap may differ by noise, which the table shows beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cryptoperf import stats
from cryptoperf.model import CellSummary

__all__ = ["LEVEL", "SessionPoint", "Scaling", "scaling"]

#: Confidence level of each count's throughput interval.
LEVEL = stats.DEFAULT_LEVEL


@dataclass(frozen=True)
class SessionPoint:
    """One thread count of an operation: ``sessions`` (threads), ``label`` (its row),
    ``ops_per_s`` (geometric mean over measured repetitions, with its ``LEVEL`` interval:
    ``stats.Estimate``) and ``speedup`` (ops/s over the smallest count's)."""

    sessions: int
    label: str
    ops_per_s: stats.Estimate
    speedup: float


@dataclass(frozen=True)
class Scaling:
    """An operation of one configuration on one backend at every thread count it ran.

    Attributes:
        configuration, backend, operation: the rows' (``operation``: the study label without
            its ``@ N threads``), size_bytes: their message size (None: unsized).
        points: one per count, ascending.
    """

    configuration: str
    backend: str
    operation: str
    size_bytes: int | None
    points: tuple[SessionPoint, ...]

    @property
    def peak(self) -> SessionPoint:
        """The count with the most throughput (the smaller one on a tie)."""
        return max(self.points, key=lambda p: (p.ops_per_s.value, -p.sessions))

    @property
    def beyond_counts(self) -> bool:
        """True when the peak is the largest count measured: the throughput may grow further
        with more sessions than the run gave it."""
        return self.peak.sessions == self.points[-1].sessions

    def text(self) -> str:
        """The finding in one sentence, e.g. "most throughput at 2 sessions (2,520 ops/s,
        2.05× 1 session's); 4 gave no more" or "most throughput at 4 sessions, the most measured
        (…): more sessions may give more, so its capacity is at least that"."""
        p = self.peak
        counts = ", ".join(str(q.sessions) for q in self.points)
        first = self.points[0].sessions
        figure = f"{p.ops_per_s.value:,.0f} ops/s, {p.speedup:.2f}× {first} session{'s' if first != 1 else ''}'s"
        if self.beyond_counts:
            return (f"most throughput at {p.sessions} sessions, the most measured ({figure}): more sessions may "
                    f"give more, so its capacity is at least that (counts {counts})")
        more = ", ".join(str(q.sessions) for q in self.points if q.sessions > p.sessions)
        return f"most throughput at {p.sessions} sessions ({figure}); {more} gave no more (counts {counts})"

    def as_dict(self) -> dict[str, Any]:
        """``configuration``, ``backend``, ``operation``, ``size_bytes``, ``points`` (each:
        ``sessions``, ``label``, ``ops_per_s`` as ``stats.Estimate.as_dict``, ``speedup``),
        ``peak_sessions``, ``beyond_counts`` and ``text``."""
        return {"configuration": self.configuration, "backend": self.backend, "operation": self.operation,
                "size_bytes": self.size_bytes,
                "points": [{"sessions": p.sessions, "label": p.label, "ops_per_s": p.ops_per_s.as_dict(),
                            "speedup": p.speedup} for p in self.points],
                "peak_sessions": self.peak.sessions, "beyond_counts": self.beyond_counts, "text": self.text()}


def scaling(summaries: Iterable[CellSummary]) -> tuple[Scaling, ...]:
    """Every operation measured at two or more thread counts in one configuration on one
    backend (and size), in first-seen order, from the cells' measured repetitions
    (``CellSummary.ops_per_s_by_block``). Rows without a measured repetition are left out."""
    groups: dict[tuple, list[tuple[CellSummary, stats.Estimate]]] = {}
    for s in summaries:
        c = s.cell
        values = [v for v in (s.ops_per_s_by_block or {}).values() if v and v > 0]
        if not c.threads or not values:
            continue
        estimate = stats.log_mean(values, LEVEL, min_n=stats.MIN_BLOCKS)
        key = (c.configuration, c.backend, c.operation_label, c.size_bytes)
        groups.setdefault(key, []).append((s, estimate))
    out = []
    for (configuration, backend, operation, size), rows in groups.items():
        rows.sort(key=lambda r: r[0].cell.threads)
        if len({s.cell.threads for s, _ in rows}) < 2:
            continue
        first = rows[0][1].value
        points = tuple(SessionPoint(s.cell.threads, s.cell.label, e, e.value / first) for s, e in rows)
        out.append(Scaling(configuration, backend, operation, size, points))
    return tuple(out)


def by_operation(items: Iterable[Scaling]) -> Mapping[str, list[Scaling]]:
    """``items`` grouped by operation, in first-seen order (the report's tables)."""
    out: dict[str, list[Scaling]] = {}
    for s in items:
        out.setdefault(s.operation, []).append(s)
    return out
