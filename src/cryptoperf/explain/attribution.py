"""Attribution of a CPU difference to functions: per function, its CPU time per operation in the
reference configuration A and in B, the change with a paired interval across blocks, and its
share of the total change.

Each profiled repetition gives samples per function (``perf.samples``) and the measured window:
its operations and its measuring threads' CPU (``cpu_ns_total``). A function's CPU per
operation in that repetition is its share of the samples times the window's CPU per operation,
so the functions of one repetition add up to exactly what the repetition measured; the
change of a function in block b is B's value minus A's (both from block b). Across blocks, the
mean change with its t interval (paired, like every comparison here), and the share of the
total change (the sum over functions, whose mean is the measured CPU per operation's change).
The worker enables the profiler's events at its window's start and disables them at its end
(``perf.wrapper``), so the samples are the window's; ``Profile.window_share`` checks it (the
window's CPU over the sampled CPU, about 1).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from cryptoperf import stats
from cryptoperf.explain.perf import FREQUENCY_HZ


@dataclass(frozen=True)
class Profile:
    """One profiled repetition: ``samples`` per function, the window's ``ops`` and its measuring
    threads' CPU ``cpu_ns`` (ns), and ``stacks``: samples per call stack (``stacks.folded``;
    empty without inferno)."""

    samples: Counter
    ops: int
    cpu_ns: float
    stacks: Counter = field(default_factory=Counter)

    @property
    def ns_per_op(self) -> float:
        """The window's CPU per operation, ns."""
        return self.cpu_ns / self.ops

    @property
    def window_share(self) -> float:
        """The window's CPU over all the CPU sampled in the process (0..1, more when sampling
        missed some): how much of the profile the window is."""
        sampled = sum(self.samples.values()) * 1e9 / FREQUENCY_HZ
        return self.cpu_ns / sampled if sampled else 0.0

    def function_ns_per_op(self, scale: float = 1.0) -> dict[str, float]:
        """Each function's share of the samples × the window's CPU per operation × ``scale``,
        ns."""
        total = sum(self.samples.values())
        return {f: n / total * self.ns_per_op * scale for f, n in self.samples.items()} if total else {}


@dataclass(frozen=True)
class Row:
    """One function's part: CPU ns per operation in A and in B (means over blocks), the change
    B − A with its interval (``change``: value, low, high, ns), and its share of the total
    change (fraction)."""

    function: str
    a_ns: float
    b_ns: float
    change: stats.Estimate
    share: float

    def as_dict(self) -> dict[str, Any]:
        """``function``, ``a_ns_per_op``, ``b_ns_per_op``, ``change_ns_per_op`` (Estimate dict),
        ``share``."""
        return {"function": self.function, "a_ns_per_op": self.a_ns, "b_ns_per_op": self.b_ns,
                "change_ns_per_op": self.change.as_dict(), "share": self.share}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Row":
        """The row ``as_dict`` wrote."""
        return cls(d["function"], d["a_ns_per_op"], d["b_ns_per_op"], _estimate(d["change_ns_per_op"]), d["share"])


@dataclass(frozen=True)
class Attribution:
    """The whole attribution: ``rows`` sorted by the size of their change, ``total`` (the
    change of the CPU per operation, B − A, with its interval), ``a_ns``/``b_ns`` (mean CPU per
    operation), ``blocks``, the profiles' least ``window_share``, and ``libraries``: the same
    rows summed per library (``library_of``), for code that moved from one library to another
    (a FIPS provider's module taking over from libcrypto)."""

    rows: tuple[Row, ...]
    total: stats.Estimate
    a_ns: float
    b_ns: float
    blocks: int
    window_share: float
    libraries: tuple[Row, ...] = ()

    def top(self, covering: float = 0.8, rows: Sequence[Row] | None = None) -> tuple[Row, ...]:
        """The fewest leading rows (largest changes first; ``rows``, default the functions')
        after which the running sum of their changes stays within ``1 - covering`` of the
        total change (80 %: between 80 and 120 % of it) whatever rows follow — functions that
        went away and functions that came in (one library's code path replacing another) can
        each exceed the total, with opposite signs, so a prefix that reaches the band by
        chance and leaves it again does not count; all rows when the sum never settles."""
        rows = list(self.rows if rows is None else rows)
        acc, settled = 0.0, len(rows)
        for i, r in enumerate(rows):
            acc += r.share
            if abs(acc - 1.0) > 1.0 - covering:
                settled = len(rows)
            elif settled == len(rows):
                settled = i
        return tuple(rows[:settled + 1])

    def top_share(self, covering: float = 0.8) -> float:
        """What ``top(covering)``'s rows add up to, as a share of the total change."""
        return sum(r.share for r in self.top(covering))

    def as_dict(self) -> dict[str, Any]:
        """Every field; rows as ``Row.as_dict``."""
        return {"rows": [r.as_dict() for r in self.rows], "total_change_ns_per_op": self.total.as_dict(),
                "top": [r.function for r in self.top()], "top_share": self.top_share(),
                "a_ns_per_op": self.a_ns, "b_ns_per_op": self.b_ns, "blocks": self.blocks,
                "window_share": self.window_share, "libraries": [r.as_dict() for r in self.libraries],
                "top_libraries": [r.function for r in self.top(rows=self.libraries)]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Attribution":
        """The attribution ``as_dict`` wrote (a stored explanation's ``attribution``)."""
        return cls(tuple(Row.from_dict(r) for r in d["rows"]), _estimate(d["total_change_ns_per_op"]),
                   d["a_ns_per_op"], d["b_ns_per_op"], d["blocks"], d["window_share"],
                   tuple(Row.from_dict(r) for r in d.get("libraries", ())))

    @property
    def decided(self) -> bool:
        """Whether the total change's interval excludes 0 (then shares of it are given)."""
        t = self.total
        return t.low is not None and t.high is not None and (t.low > 0 or t.high < 0)


def _estimate(d: Mapping[str, Any]) -> stats.Estimate:
    return stats.Estimate(d["value"], d["ci_low"], d["ci_high"], d["level"], d["n"])


def _paired(values: Sequence[float], level: float) -> stats.Estimate:
    """Mean of ``values`` (one per block) with its t interval at ``level`` (no bounds with one)."""
    a = np.asarray(values, dtype=float)
    mean = float(a.mean())
    if a.size < 2:
        return stats.Estimate(mean, None, None, level, int(a.size))
    half = stats.t_quantile(level, a.size - 1) * float(a.std(ddof=1)) / math.sqrt(a.size)
    return stats.Estimate(mean, mean - half, mean + half, level, int(a.size))


def library_of(function: str) -> str:
    """The library of an attributed function: ``"sym (lib)"`` → ``lib``; ``"lib (unresolved…)"``
    → ``lib``."""
    head, _, rest = function.rpartition(" (")
    if rest.startswith("unresolved") or not head:
        return function.split(" (", 1)[0]
    return rest[:-1] if rest.endswith(")") else rest


def _rows(per_block: Sequence[tuple[dict[str, float], dict[str, float]]], total: stats.Estimate,
          level: float) -> tuple[Row, ...]:
    """One Row per key of ``per_block`` (one (A, B) pair of key → ns per operation per block),
    largest change first."""
    keys = sorted({f for a, b in per_block for f in (*a, *b)})
    rows = []
    for f in keys:
        change = _paired([b.get(f, 0.0) - a.get(f, 0.0) for a, b in per_block], level)
        rows.append(Row(f, float(np.mean([a.get(f, 0.0) for a, _ in per_block])),
                        float(np.mean([b.get(f, 0.0) for _, b in per_block])), change,
                        change.value / total.value if total.value else 0.0))
    rows.sort(key=lambda r: -abs(r.change.value))
    return tuple(rows)


def _by_library(ns: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for f, v in ns.items():
        out[library_of(f)] = out.get(library_of(f), 0.0) + v
    return out


def attribute(pairs: Sequence[tuple[Profile, Profile]], level: float = 0.95,
              scale: tuple[float, float] = (1.0, 1.0)) -> Attribution:
    """The attribution of B's CPU per operation against A's from ``pairs``, one (A, B) pair of
    profiles per block, per function and per library; each side's profiles scaled by its
    ``scale`` (``study_scale``: to the study's own measurement; 1: the profiled repetitions'
    own). Raises ValueError without pairs or with a profile of no operations."""
    if not pairs:
        raise ValueError("no profiled blocks")
    if any(p.ops <= 0 for pair in pairs for p in pair):
        raise ValueError("a profiled repetition measured no operation")
    ka, kb = scale
    per_block = [(a.function_ns_per_op(ka), b.function_ns_per_op(kb)) for a, b in pairs]
    total = _paired([kb * b.ns_per_op - ka * a.ns_per_op for a, b in pairs], level)
    libraries = _rows([(_by_library(a), _by_library(b)) for a, b in per_block], total, level)
    return Attribution(_rows(per_block, total, level), total, ka * float(np.mean([a.ns_per_op for a, _ in pairs])),
                       kb * float(np.mean([b.ns_per_op for _, b in pairs])), len(pairs),
                       min(p.window_share for pair in pairs for p in pair), libraries)


def study_scale(pairs: Sequence[tuple[Profile, Profile]], a_ns: float, b_ns: float) -> tuple[float, float]:
    """Per side, the study's own mean CPU per operation (``a_ns``, ``b_ns``, ns) over the
    profiled repetitions' mean: what scales a profile to the study's measurement. The sampler
    costs CPU on every sample (in the kernel, counted in the window's CPU and in no function's
    samples), so a profiled repetition's CPU per operation is higher than an unprofiled one's
    by about that cost in proportion, and its samples' shares are unbiased; scaled, the parts
    add up to the study's own figures."""
    pa = float(np.mean([a.ns_per_op for a, _ in pairs]))
    pb = float(np.mean([b.ns_per_op for _, b in pairs]))
    return a_ns / pa, b_ns / pb
