"""The arithmetic of CPU cost: CPU time per operation over repetitions (``cpu_cost``), cores
for a rate (``cores_at_rate``) and the cost of a change of configuration (``change``), with the
study's t intervals. Pure functions on numbers; units in the names (``cpu_ns_per_op``: ns of CPU
per operation, ``rate_per_s``: operations per second, ``cores``: cores kept fully busy).

Errors: ``EconomicsError`` (a UsageError: exit 2 from the CLI) for a negative or missing figure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from cryptoperf import stats
from cryptoperf.errors import EconomicsError

NS_PER_S = 1e9
#: ``Change.method`` for one operation, or a composite request measured in the same blocks.
PAIRED_DIFFERENCES = "paired per-block differences"


def check_number(name: str, value: float, *, positive: bool = False) -> float:
    """``value`` as a float if finite and >= 0 (> 0 with ``positive``); else EconomicsError
    naming ``name`` (a flag or a quantity)."""
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        need = "a positive number" if positive else "a number >= 0"
        raise EconomicsError(f"{name} must be {need}, got {value:g}")
    return v


_RATE = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([km]?)\s*(?:/\s*s)?\s*", re.IGNORECASE)
_RATE_SCALE = {"": 1.0, "k": 1e3, "m": 1e6}


def parse_rate(text: str | float, name: str = "--rate") -> float:
    """A rate as people write it, in operations (or requests) per second: ``9.6``, ``2000``,
    ``2k`` (2,000), ``2.5k``, ``1M`` (1,000,000), ``5000/s``, ``2k/s``, ``1e4``. The suffix is
    case-insensitive (``k``/``K`` = 10³, ``m``/``M`` = 10⁶: there are no milli-operations);
    ``/s`` may follow. A number (int or float) is taken as it is.

    Returns the rate in per second, > 0. Raises EconomicsError naming ``name`` and the value
    for anything else (``2x``, ``k``, ``2 kHz``, ``inf``), or a rate <= 0.
    """
    if isinstance(text, (int, float)):
        return check_number(name, text, positive=True)
    m = _RATE.fullmatch(str(text))
    if m is None:
        raise EconomicsError(f"{name} '{text}' is not a rate: give operations per second as a number, "
                             "optionally with k (×1000) or M (×1,000,000) and /s, e.g. 9.6, 2000, 2k, 2.5k/s, 1M")
    return check_number(name, float(m.group(1)) * _RATE_SCALE[m.group(2).lower()], positive=True)


# --------------------------------------------------------------------------- CPU per operation

@dataclass(frozen=True)
class CpuCost:
    """The measured CPU time of one operation, over repetitions.

    Attributes:
        estimate_ns: geometric mean over repetitions of each repetition's CPU ns per operation
            (the statistic the study's intervals use: a t interval on the log scale).
        low_ns, high_ns: its ``level`` t interval (None with fewer than ``stats.MIN_BLOCKS``
            repetitions).
        min_ns, max_ns: the spread: smallest and largest repetition.
        repetitions: measured repetitions; samples_ns: block → value, in block order.
        level: confidence level of the interval (0.95).
    """

    estimate_ns: float
    low_ns: float | None
    high_ns: float | None
    min_ns: float
    max_ns: float
    repetitions: int
    samples_ns: Mapping[int, float]
    level: float = stats.DEFAULT_LEVEL

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (units in the names; samples as ``blocks`` and ``samples_ns``
        lists)."""
        d = {k: v for k, v in self.__dict__.items() if k != "samples_ns"}
        d["blocks"] = list(self.samples_ns)
        d["samples_ns"] = list(self.samples_ns.values())
        return d


def cpu_cost(samples_ns: Mapping[int, float], level: float = stats.DEFAULT_LEVEL) -> CpuCost:
    """CPU ns/op over repetitions: geometric mean with its t interval, and the min–max spread.

    Args:
        samples_ns: block → one repetition's CPU ns/op (n >= 1 values).
        level: confidence level of the interval.

    Raises EconomicsError for no samples or a value <= 0.
    """
    a = [float(x) for x in samples_ns.values()]
    if not a:
        raise EconomicsError("no measured repetition: nothing to compute a CPU cost from")
    for x in a:
        check_number("CPU time per operation", x, positive=True)
    est = stats.log_mean(a, level, min_n=stats.MIN_BLOCKS)
    return CpuCost(estimate_ns=est.value, low_ns=est.low, high_ns=est.high, min_ns=min(a), max_ns=max(a),
                   repetitions=len(a), samples_ns=dict(samples_ns), level=level)


# --------------------------------------------------------------------------- (a) cores for a rate

def cores_needed(rate_per_s: float, cpu_ns_per_op: float) -> float:
    """Cores kept busy by ``rate_per_s`` operations per second of ``cpu_ns_per_op`` each:
    rate × cpu_ns_per_op / 1e9 (e.g. 9.6/s × 13 ms = 0.1248 cores).

    Raises EconomicsError for a negative rate or a CPU time <= 0.
    """
    return (check_number("rate", rate_per_s) * check_number("CPU time per operation", cpu_ns_per_op, positive=True)
            / NS_PER_S)


def ops_per_s_per_core(cpu_ns_per_op: float) -> float:
    """Operations per second one fully busy core sustains: 1e9 / cpu_ns_per_op (single thread).

    Raises EconomicsError for a CPU time <= 0.
    """
    return NS_PER_S / check_number("CPU time per operation", cpu_ns_per_op, positive=True)


@dataclass(frozen=True)
class CoresAtRate:
    """What a rate costs in cores for one measured operation.

    Attributes:
        rate_per_s: the load (operations per second).
        cpu: the measured CPU time per operation.
        cores: rate × CPU ns/op (the estimate) / 1e9; cores_low, cores_high: the same with the
            interval's bounds (None without one); cores_min, cores_max: with the fastest and
            slowest repetition.
        ops_per_s_per_core: single-thread capacity, 1e9 / CPU ns/op.
    """

    rate_per_s: float
    cpu: CpuCost
    cores: float
    cores_low: float | None
    cores_high: float | None
    cores_min: float
    cores_max: float
    ops_per_s_per_core: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``cpu`` nested)."""
        d = {k: v for k, v in self.__dict__.items() if k != "cpu"}
        d["cpu"] = self.cpu.as_dict()
        return d


def cores_at_rate(rate_per_s: float, cpu: CpuCost) -> CoresAtRate:
    """Cores needed at ``rate_per_s`` for ``cpu``, with the interval and spread carried through
    (cores are proportional to CPU time, so the bounds map one to one).

    Raises EconomicsError for a negative rate.
    """
    def c(ns: float | None) -> float | None:
        return None if ns is None else cores_needed(rate_per_s, ns)
    return CoresAtRate(rate_per_s=check_number("rate", rate_per_s), cpu=cpu,
                       cores=cores_needed(rate_per_s, cpu.estimate_ns), cores_low=c(cpu.low_ns),
                       cores_high=c(cpu.high_ns), cores_min=cores_needed(rate_per_s, cpu.min_ns),
                       cores_max=cores_needed(rate_per_s, cpu.max_ns),
                       ops_per_s_per_core=ops_per_s_per_core(cpu.estimate_ns))


# --------------------------------------------------------------------------- (b) a change of configuration

@dataclass(frozen=True)
class Change:
    """The CPU cost of moving a load from one configuration to another.

    Attributes:
        rate_per_s: the load.
        before, after: cores at that rate in each configuration.
        delta_cores: after.cores − before.cores (positive: the change costs CPU).
        delta_low, delta_high: ``level`` t interval of the change in cores, from the paired
            per-block differences of CPU ns/op (the same blocks pair the two configurations
            as in the study's verdicts); None with fewer than ``stats.MIN_BLOCKS`` paired blocks.
        ratio: CPU ns/op after ÷ before with its paired interval (``stats.paired_log_ratio``,
            as the study's verdicts); None with too few paired blocks.
        blocks: paired blocks used (for a composite request whose terms' blocks differ, the
            fewest any term has).
        method: how the interval was made: ``PAIRED_DIFFERENCES`` (t interval of the per-block
            differences) or ``SUMMED_INTERVALS`` (a composite request whose terms' blocks
            differ: each term's paired interval at a Bonferroni level, summed).
    """

    rate_per_s: float
    before: CoresAtRate
    after: CoresAtRate
    delta_cores: float
    delta_low: float | None
    delta_high: float | None
    ratio: stats.Interval | None
    blocks: int = 0
    method: str = PAIRED_DIFFERENCES

    @property
    def delta_pct(self) -> float:
        """(after ÷ before − 1) × 100 of the cores (= of the CPU time per operation)."""
        return (self.after.cores / self.before.cores - 1.0) * 100.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"rate_per_s": self.rate_per_s, "before": self.before.as_dict(),
                "after": self.after.as_dict(), "delta_cores": self.delta_cores,
                "delta_low": self.delta_low, "delta_high": self.delta_high,
                "delta_pct": self.delta_pct, "blocks": self.blocks, "method": self.method,
                "ratio": self.ratio.as_dict() if self.ratio else None}


def change(rate_per_s: float, before: CpuCost, after: CpuCost, level: float = stats.DEFAULT_LEVEL) -> Change:
    """Cores before and after a change of configuration at ``rate_per_s``, and the difference
    with its interval from the blocks both were measured in.

    Raises EconomicsError for a negative rate.
    """
    b, a = cores_at_rate(rate_per_s, before), cores_at_rate(rate_per_s, after)
    blocks = [k for k in before.samples_ns if k in after.samples_ns]
    low = high = ratio = None
    if len(blocks) >= stats.MIN_BLOCKS:
        ratio = stats.paired_log_ratio([after.samples_ns[k] for k in blocks],
                                       [before.samples_ns[k] for k in blocks], level)
        diff = stats.mean_interval([after.samples_ns[k] - before.samples_ns[k] for k in blocks], level)
        low, high = (v * rate_per_s / NS_PER_S for v in (diff.low, diff.high))  # type: ignore[operator]
    return Change(rate_per_s=rate_per_s, before=b, after=a, delta_cores=a.cores - b.cores,
                  delta_low=low, delta_high=high, ratio=ratio, blocks=len(blocks))
