"""A stored run arranged the way reports show it: comparison groups of cells, series (the
things overlaid in one plot), their order and colours, and per-repetition values.

For a study a *group* is (backend, operation label, size) and its *series* are the
configurations, baseline first, in the study file's order. For a ``speed`` run (no
configurations) a group is (operation label, size) and its series are the backends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptoperf.model import CellSummary, Delta, Outcome
from cryptoperf.report.text import fmt_size
from cryptoperf.store.stored_run import StoredRun


@dataclass(frozen=True)
class Group:
    """Cells shown together.

    Attributes:
        backend: the backend ('' when the series are backends); label, size_bytes: operation.
        cells: the group's cell summaries in series order.
    """

    backend: str
    label: str
    size_bytes: int | None
    cells: tuple[CellSummary, ...]

    @property
    def title(self) -> str:
        """``sha256 1 KiB on openssl`` (``… on`` left out when the series are backends)."""
        head = f"{self.label} {fmt_size(self.size_bytes)}".strip()
        return f"{head} on {self.backend}" if self.backend else head

    @property
    def slug(self) -> str:
        """An HTML-id-safe key, unique per group in a run, e.g. ``openssl-hash-1024``."""
        size = "-" if self.size_bytes is None else str(self.size_bytes)
        raw = "-".join(p for p in (self.backend, self.label, size) if p)
        return re.sub(r"[^A-Za-z0-9_-]+", "_", raw)


def noise_threshold_pct(run: StoredRun) -> float:
    """The run's CV threshold in % (its analysis settings': the study's, else the default)."""
    return float(run.analysis.settings.noise_threshold_pct)


def by_configuration(run: StoredRun) -> bool:
    """True when series are configurations (a study), False when they are backends."""
    return run.study is not None or any(s.cell.configuration for s in run.summaries.values())


def series_name(run: StoredRun, cell_summary: CellSummary) -> str:
    """The configuration name (study) or the backend (``speed``) of a cell."""
    c = cell_summary.cell
    return c.configuration if by_configuration(run) else c.backend


def series_order(run: StoredRun) -> list[str]:
    """Every series name in display order: the baseline, then the study's configurations in
    file order (then any others as first seen); backends as first seen for ``speed``."""
    seen: list[str] = []
    if run.study is not None:
        seen += [run.study.baseline] + [c.name for c in run.study.configurations
                                        if c.name != run.study.baseline]
    for s in run.summaries.values():
        name = series_name(run, s)
        if name not in seen:
            seen.append(name)
    return seen


def colour_of(run: StoredRun, series: str) -> str:
    """A series' colour, the same in every plot of the report."""
    from cryptoperf.report.plots import colour
    order = series_order(run)
    return colour(order.index(series) if series in order else len(order))


def groups(run: StoredRun) -> list[Group]:
    """The run's groups in first-seen order, each with its cells in series order."""
    per_config = by_configuration(run)
    keyed: dict[tuple, list[CellSummary]] = {}
    for s in run.summaries.values():
        c = s.cell
        key = (c.backend if per_config else "", c.label, c.size_bytes)
        keyed.setdefault(key, []).append(s)
    order = {name: i for i, name in enumerate(series_order(run))}
    return [Group(b, label, size, tuple(sorted(cells, key=lambda s: order[series_name(run, s)])))
            for (b, label, size), cells in keyed.items()]


def outcomes_of(run: StoredRun, cell_summary: CellSummary) -> list[Outcome]:
    """The outcomes of one cell, calibration left out, in block order (a superseded attempt
    before its re-run): for the CSV's rows, one per repetition (the report's sections read the
    analysis instead)."""
    key = cell_summary.cell.key
    return sorted((o for o in run.outcomes if o.cell.key == key and not o.repetition.calibration),
                  key=lambda o: (o.repetition.block, o.repetition.attempt))


def delta_for(run: StoredRun, cell_summary: CellSummary) -> Delta | None:
    """The delta of a (non-baseline) cell against the baseline (not a contrast's), or None."""
    c = cell_summary.cell
    baseline = run.study.baseline if run.study is not None else None
    for d in run.deltas:
        if (d.backend, d.label, d.size_bytes, d.configuration) == (c.backend, c.label, c.size_bytes,
                                                                    c.configuration) and d.baseline == baseline:
            return d
    return None
