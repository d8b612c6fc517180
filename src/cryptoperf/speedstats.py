"""``cryptoperf speed`` figures: one row per (backend, operation, size) over its repetitions, and
each backend against a baseline backend.

A ``speed`` run with ``--repetitions N`` runs N blocks; a block runs every row once, each in a
fresh worker process, in a seeded random order. A row's figures are geometric means over its
measured repetitions, each with a 95 % Student t interval on the log values
(``stats.log_mean``) once it has ``stats.MIN_BLOCKS`` (3) of them — none with fewer. A backend
is compared with the baseline backend on ops/s, for the same operation and size, paired by
block (``stats.paired_log_ratio``: drift shared by a block cancels); Welch's interval
(``stats.welch_log_ratio``) when fewer than 3 blocks pair up but each side has 3 repetitions;
the point ratio alone below that. Every interval holds at 95 % on its own (none is adjusted
for multiplicity: for verdicts whose error rates hold across many comparisons, run a study).

Pure functions on outcomes; nothing here runs anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from cryptoperf import stats
from cryptoperf.model import OK, Cell, Outcome
from cryptoperf.result import WorkerResult

LEVEL = stats.DEFAULT_LEVEL
#: Fewest measured repetitions (or paired blocks) an interval is computed from.
MIN_REPETITIONS = stats.MIN_BLOCKS


def _estimate(values: Sequence[float | None]) -> stats.Estimate | None:
    """Geometric mean of the positive values with its t interval (bounds None below
    ``MIN_REPETITIONS`` values); None without positive values."""
    vals = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    return stats.log_mean(vals, LEVEL, min_n=MIN_REPETITIONS) if vals else None


def relative_half_width_pct(e: stats.Estimate | None) -> float | None:
    """The larger side of an estimate's interval relative to its value, in % (e.g. 1.2 for
    [0.99, 1.012] around 1.0); None without an interval."""
    if e is None or e.low is None or e.high is None or e.value <= 0:
        return None
    return max(e.high / e.value - 1.0, 1.0 - e.low / e.value) * 100.0


@dataclass(frozen=True)
class SpeedRow:
    """One (backend, operation, size) row of a ``speed`` run over its repetitions.

    Attributes:
        cell: the row's cell (``configuration`` ''); outcomes: its analysed repetitions (not
            superseded), in block order.
        status: ``ok`` if any repetition measured, else the first one's status; reason: why
            (for ``ok``, '' — or which repetitions did not measure and why).
        ops_per_s, bytes_per_s, p50_ns, process_cpu_ns_per_op: geometric means over the measured
            repetitions with their 95 % intervals (``stats.Estimate``; bounds None with fewer
            than ``MIN_REPETITIONS``); None without a measurement (bytes_per_s also for an
            operation without a message).
        p99_ns, p999_ns: geometric means of the per-repetition percentiles (no interval).
        steal_pct: mean steal % over the measured repetitions (None if unknown).
    """

    cell: Cell
    outcomes: tuple[Outcome, ...]
    status: str
    reason: str
    ops_per_s: stats.Estimate | None
    bytes_per_s: stats.Estimate | None
    p50_ns: stats.Estimate | None
    process_cpu_ns_per_op: stats.Estimate | None
    p99_ns: float | None
    p999_ns: float | None
    steal_pct: float | None

    @property
    def measured(self) -> list[Outcome]:
        """The repetitions that measured (status ok), in block order."""
        return [o for o in self.outcomes if o.ok and o.latency and o.throughput]

    @property
    def first_result(self) -> WorkerResult | None:
        """The worker result of the first measured repetition (else of the first one; None
        when it has none)."""
        first = next(iter(self.measured), None) or next(iter(self.outcomes), None)
        return first.result if first else None

    @property
    def result(self) -> WorkerResult | Mapping[str, Any]:
        """Transitional (for the terminal table until it reads ``first_result``):
        ``first_result``, or {} without one."""
        return self.first_result or {}

    @property
    def size_bytes(self) -> int | None:
        """The message size measured (the worker's default when none was asked for); None for
        an operation without a message."""
        r = self.first_result
        if r is not None and not r.bytes_per_op:
            return None if self.status == OK else self.cell.size_bytes
        return (r.params if r is not None else {}).get("size_bytes", self.cell.size_bytes)

    def ops_per_s_by_block(self) -> dict[int, float]:
        """Block → the measured repetition's ops/s."""
        return {o.repetition.block: o.throughput.ops_per_s for o in self.measured}

    @property
    def key(self) -> tuple:
        """What a row is compared across backends by: (op, size, params, cpu, build)."""
        c = self.cell
        return (c.op, c.size_bytes, tuple(sorted(c.params.items())), c.cpu, c.build)


def rows(outcomes: Iterable[Outcome], order: Sequence[Cell] = ()) -> list[SpeedRow]:
    """The rows of a ``speed`` run's outcomes, one per cell: in the order of ``order`` (the
    cells as ``speed`` made them: backend, operation, size) where given, then in first-seen
    order (outcomes arrive in the blocks' random order). Calibration and superseded
    repetitions are left out."""
    by_cell: dict[str, list[Outcome]] = {c.key: [] for c in order}
    cells: dict[str, Cell] = {c.key: c for c in order}
    for o in outcomes:
        if o.superseded or o.repetition.calibration:
            continue
        by_cell.setdefault(o.cell.key, []).append(o)
        cells.setdefault(o.cell.key, o.cell)
    return [_row(cells[key], sorted(reps, key=lambda o: o.repetition.block))
            for key, reps in by_cell.items() if reps]


def _row(cell: Cell, reps: list[Outcome]) -> SpeedRow:
    ok = [o for o in reps if o.ok and o.latency and o.throughput]
    if not ok:
        first = reps[0]
        return SpeedRow(cell, tuple(reps), first.status, first.reason, None, None, None, None, None,
                        None, None)
    bad = [o for o in reps if o not in ok]
    reason = ""
    if bad:
        reason = (f"{len(ok)} of {len(reps)} repetitions measured; {len(bad)} {bad[0].status}: "
                  f"{bad[0].reason}")
    steals = [o.throughput.steal_pct for o in ok if o.throughput.steal_pct is not None]
    sized = all(o.throughput.bytes_per_s for o in ok)

    def geo(values: list[float]) -> float | None:
        e = _estimate(values)
        return e.value if e else None

    return SpeedRow(
        cell, tuple(reps), OK, reason,
        ops_per_s=_estimate([o.throughput.ops_per_s for o in ok]),
        bytes_per_s=_estimate([o.throughput.bytes_per_s for o in ok]) if sized else None,
        p50_ns=_estimate([o.latency.p50_ns for o in ok]),
        process_cpu_ns_per_op=_estimate([o.throughput.process_cpu_ns_per_op for o in ok]),
        p99_ns=geo([o.latency.p99_ns for o in ok]),
        p999_ns=geo([o.latency.p999_ns for o in ok]),
        steal_pct=sum(steals) / len(steals) if steals else None,
    )


# --------------------------------------------------------------------------- against a baseline backend


def _factor(x: float) -> str:
    """A factor as text: ``1.32``, ``13.5``, ``150``."""
    return f"{x:.2f}" if x < 10 else f"{x:.3g}" if x < 1000 else f"{x:.0f}"


@dataclass(frozen=True)
class BaselineRatio:
    """One backend against the baseline backend for one operation and size, on ops/s.

    Attributes:
        backend, baseline: backend names; row, baseline_row: the two rows (baseline_row None
            when the baseline did not run this operation and size).
        ratio: backend ops/s ÷ baseline ops/s (> 1: faster), None when either side has no
            measurement (``reason`` says why).
        interval: its 95 % interval (``stats.Interval``: paired by block, or Welch), None
            with fewer than ``MIN_REPETITIONS`` repetitions (``reason`` says so).
        reason: why there is no ratio, or no interval; '' otherwise.
    """

    backend: str
    baseline: str
    row: SpeedRow
    baseline_row: SpeedRow | None
    ratio: float | None
    interval: stats.Interval | None
    reason: str = ""

    @property
    def text(self) -> str:
        """``aws-lc: 1.32× faster [1.28, 1.36] than openssl`` (the interval as factors of the
        same direction), ``ring: 1.10× slower [1.05, 1.15] than openssl``; ``... (the interval
        includes 1×: not told apart)``; without an interval, the point ratio and why; without a
        ratio, why."""
        return self.describe()

    def describe(self, why_no_interval: bool = True) -> str:
        """``text``; without ``why_no_interval`` a point ratio is not followed by why it has no
        interval (for a summary that says so once)."""
        who = f"{self.backend}:"
        if self.ratio is None:
            return f"{who} no comparison ({self.reason})"
        faster = self.ratio >= 1.0
        word = "faster" if faster else "slower"
        factor = self.ratio if faster else 1.0 / self.ratio
        text = f"{who} {_factor(factor)}× {word}"
        ci = self.interval
        if ci is not None:
            lo, hi = (ci.low, ci.high) if faster else (1.0 / ci.high, 1.0 / ci.low)
            text += f" [{_factor(lo)}, {_factor(hi)}]"
        text += f" than {self.baseline}"
        if ci is not None and ci.low <= 1.0 <= ci.high:
            text += " (the interval includes 1×: not told apart at these repetitions)"
        elif ci is None and self.reason and why_no_interval:
            text += f" ({self.reason})"
        return text

    def as_dict(self) -> dict[str, Any]:
        """``backend``, ``baseline``, ``op``, ``size_bytes``, ``params``, ``ratio``, ``interval``
        (``Interval.as_dict`` or null), ``text``, ``reason``."""
        c = self.row.cell
        return {"backend": self.backend, "baseline": self.baseline, "op": c.op,
                "size_bytes": self.row.size_bytes, "params": dict(c.params), "metric": "ops_per_s",
                "ratio": self.ratio, "interval": self.interval.as_dict() if self.interval else None,
                "text": self.text, "reason": self.reason}


def compare_to_baseline(speed_rows: Sequence[SpeedRow], baseline: str) -> list[BaselineRatio]:
    """Every row of another backend than ``baseline`` against the baseline's row of the same
    operation, size and parameters, on ops/s (see the module doc for the interval), in row
    order. Rows the baseline lacks get a ratio of None with the reason."""
    base = {r.key: r for r in speed_rows if r.cell.backend == baseline}
    out = []
    for r in speed_rows:
        if r.cell.backend == baseline:
            continue
        b = base.get(r.key)
        if b is None:
            out.append(BaselineRatio(r.cell.backend, baseline, r, None, None, None,
                                     f"{baseline} did not run it"))
            continue
        out.append(_ratio(r, b, baseline))
    return out


def _ratio(r: SpeedRow, b: SpeedRow, baseline: str) -> BaselineRatio:
    if b.ops_per_s is None:
        return BaselineRatio(r.cell.backend, baseline, r, b, None, None,
                             f"{baseline}: {b.status}" + (f": {b.reason}" if b.reason else ""))
    if r.ops_per_s is None:
        return BaselineRatio(r.cell.backend, baseline, r, b, None, None,
                             f"{r.status}" + (f": {r.reason}" if r.reason else ""))
    mine, theirs = r.ops_per_s_by_block(), b.ops_per_s_by_block()
    blocks = sorted(set(mine) & set(theirs))
    if len(blocks) >= MIN_REPETITIONS:
        ci = stats.paired_log_ratio([mine[k] for k in blocks], [theirs[k] for k in blocks], LEVEL)
        return BaselineRatio(r.cell.backend, baseline, r, b, ci.ratio, ci)
    if len(mine) >= MIN_REPETITIONS and len(theirs) >= MIN_REPETITIONS:
        ci = stats.welch_log_ratio(list(mine.values()), list(theirs.values()), LEVEL)
        return BaselineRatio(r.cell.backend, baseline, r, b, ci.ratio, ci)
    n = min(len(mine), len(theirs))
    return BaselineRatio(r.cell.backend, baseline, r, b, r.ops_per_s.value / b.ops_per_s.value, None,
                         f"{n} repetition{'s' if n != 1 else ''} each: no interval; "
                         f"--repetitions {MIN_REPETITIONS} or more gives one")


# --------------------------------------------------------------------------- a speed run, analysed


@dataclass(frozen=True)
class SpeedAnalysis:
    """A ``speed`` run's figures, computed once (``analyse``; kept in ``Analysis.speed``).

    Attributes:
        rows: one ``SpeedRow`` per (backend, operation, size), in table order.
        baseline: the backend the others are compared with, or None.
        ratios: every other backend's row against the baseline's (``compare_to_baseline``;
            () without a baseline).
    """

    rows: tuple[SpeedRow, ...]
    baseline: str | None = None
    ratios: tuple[BaselineRatio, ...] = ()


def analyse(outcomes: Iterable[Outcome], order: Sequence[Cell] = (), baseline: str | None = None) -> SpeedAnalysis:
    """The rows of a ``speed`` run (``rows``: in the order of ``order``, then first seen) and,
    with ``baseline`` (a backend), each other backend against it."""
    speed_rows = rows(outcomes, order)
    ratios = compare_to_baseline(speed_rows, baseline) if baseline is not None else []
    return SpeedAnalysis(tuple(speed_rows), baseline, tuple(ratios))
