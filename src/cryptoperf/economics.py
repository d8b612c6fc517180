"""Economics: what a load costs in CPU, what a change of configuration costs at that load, and
from which load an accelerator pays for itself.

Everything starts from the measured **on-CPU time per operation** (``cpu_ns_per_op``: the
worker's thread CPU time over the window ÷ operations, per repetition), not from latency: an
operation that waits costs time but no CPU. The arithmetic is in pure functions on numbers;
``plan()`` picks the cells of a stored run and feeds them in. The method and a worked example
are in docs/methodology.md, section "Economics".

Units are in the names:

- ``rate_per_s``: operations per second the service must sustain;
- ``cpu_ns_per_op``: nanoseconds of CPU per operation;
- ``cores``: CPU cores kept fully busy (1.0 = one core; 0.125 = 12.5 % of a core);
- ``*_per_year``: money per year, in whatever currency the caller uses — the same one for
  cores and accelerators (e.g. what a core and an accelerator unit cost per year, amortised
  purchase plus power, licences and space, or a cloud price);
- ``ops_per_s_per_unit``: operations per second one accelerator unit sustains.

A **composite request** (``cryptoperf plan --per-request "ecdsa-p256-sign + x25519-keygen +
x25519-derive"``) is several operations done once per request, e.g. what a TLS 1.3 server does per
full handshake; its CPU per request is the sum of its terms' CPU per operation × count, and a
rate is then requests per second (``request_cpu``).

Errors: ``EconomicsError`` (a UsageError: exit 2 from the CLI) for a negative or missing figure,
an operation the run does not have, or an accelerator that can never pay for itself.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from cryptoperf import opnames, stats
from cryptoperf.errors import EconomicsError
from cryptoperf.model import CellSummary
from cryptoperf.stored import StoredRun

NS_PER_S = 1e9

#: What every answer of ``cryptoperf plan`` ends with, in every format: what its intervals do
#: not cover.
CAVEAT = ("The intervals cover the variation between repetitions on the measured host only: not "
          "other hosts or CPU generations, not the mix of full and resumed handshakes, not the rest "
          "of the stack (network, TLS record layer, application), and not queueing at high utilisation.")


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
    method: str = "paired per-block differences"

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


# --------------------------------------------------------------------------- (c) accelerator break-even

@dataclass(frozen=True)
class Accelerator:
    """An offload device as its buyer describes it.

    Attributes:
        ops_per_s_per_unit: operations per second one unit sustains (its capacity).
        price_per_year: what one unit costs per year (same currency as the core price).
        host_cpu_ns_per_op: host CPU still spent per offloaded operation (driver, queueing,
            polling), in ns; 0 if none.
        latency_ns: per-operation latency as the application sees it (ns), or None; shown
            beside the software latency, it does not enter the cost.
        min_units: units bought whatever the load (2 for redundancy); >= 1.

    Raises EconomicsError for a capacity <= 0, a negative price or host CPU time, or
    min_units < 1.
    """

    ops_per_s_per_unit: float
    price_per_year: float
    host_cpu_ns_per_op: float = 0.0
    latency_ns: float | None = None
    min_units: int = 1

    def __post_init__(self) -> None:
        check_number("accelerator capacity (ops/s per unit)", self.ops_per_s_per_unit, positive=True)
        check_number("accelerator price per year", self.price_per_year)
        check_number("host CPU per offloaded operation", self.host_cpu_ns_per_op)
        if self.latency_ns is not None:
            check_number("accelerator latency", self.latency_ns)
        if int(self.min_units) != self.min_units or self.min_units < 1:
            raise EconomicsError(f"accelerator minimum units must be a whole number >= 1, got {self.min_units}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (units in the names)."""
        return asdict(self)


def units_needed(rate_per_s: float, acc: Accelerator) -> int:
    """Accelerator units for ``rate_per_s``: max(min_units, ceil(rate / ops_per_s_per_unit))."""
    return max(int(acc.min_units), math.ceil(check_number("rate", rate_per_s) / acc.ops_per_s_per_unit))


def saving_per_op_per_s(cpu_ns_per_op: float, acc: Accelerator, core_price_per_year: float) -> float:
    """Money saved per year by each operation per second moved to the accelerator, before
    paying for it: (cpu_ns_per_op − host_cpu_ns_per_op) / 1e9 × core_price_per_year."""
    return ((check_number("CPU time per operation", cpu_ns_per_op, positive=True) - acc.host_cpu_ns_per_op)
            / NS_PER_S * check_number("core price per year", core_price_per_year))


def saving_per_year(rate_per_s: float, cpu_ns_per_op: float, acc: Accelerator,
                    core_price_per_year: float) -> float:
    """Net money saved per year by offloading ``rate_per_s``: the CPU it frees at the core
    price, minus the units it needs: rate × s − units × price (s from ``saving_per_op_per_s``).
    Negative: offloading costs more than it saves."""
    s = saving_per_op_per_s(cpu_ns_per_op, acc, core_price_per_year)
    return rate_per_s * s - units_needed(rate_per_s, acc) * acc.price_per_year


@dataclass(frozen=True)
class BreakEven:
    """When offloading starts to pay.

    Attributes:
        rate_per_s: offloading saves money at every rate above this one (ops/s).
        first_rate_per_s: the lowest rate at which it saves money; below ``rate_per_s`` only
            when buying one more unit as the load grows past a unit's capacity eats the saving
            for a while.
        saving_per_op_per_s: money per year freed by each op/s offloaded (before unit costs).
        saving_per_full_unit: money per year one fully loaded unit frees, minus its price.
    """

    rate_per_s: float
    first_rate_per_s: float
    saving_per_op_per_s: float
    saving_per_full_unit: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def break_even(cpu_ns_per_op: float, acc: Accelerator, core_price_per_year: float) -> BreakEven:
    """The rate above which offloading an operation of ``cpu_ns_per_op`` CPU to ``acc`` saves
    money, with whole units (at least ``min_units``) and cores priced per year.

    With s = (cpu − host cpu) / 1e9 × core price (money/year per op/s), P the unit price, A its
    capacity and m the minimum units, the net saving at rate R is R·s − max(m, ⌈R/A⌉)·P. It
    first turns positive at R = m·P/s. Each unit added as R passes a multiple of A costs P; the
    saving dips below zero after the step to u units when (u−1)·(A·s − P) < P, so it stays
    positive from R = u*·P/s on, with u* = ⌈P / (A·s − P)⌉ when u* > m, else from m·P/s.

    Raises EconomicsError when offloading never pays: the host spends no less CPU per
    offloaded operation than the software does, the core price is 0, or a fully loaded unit
    frees less CPU money than it costs (A·s <= P).
    """
    cpu = check_number("CPU time per operation", cpu_ns_per_op, positive=True)
    q = check_number("core price per year", core_price_per_year)
    if acc.host_cpu_ns_per_op >= cpu:
        raise EconomicsError(
            f"break-even impossible: the host still spends {acc.host_cpu_ns_per_op / 1e3:g} µs of CPU per "
            f"offloaded operation, not less than the {cpu / 1e3:g} µs the software needs; offloading saves no CPU")
    if q == 0:
        raise EconomicsError("break-even impossible: with a core price of 0 the CPU offloading frees is worth "
                             "nothing; give --core-price-per-year")
    s = saving_per_op_per_s(cpu, acc, q)
    a, p, m = acc.ops_per_s_per_unit, acc.price_per_year, int(acc.min_units)
    full = a * s - p
    if full <= 0:
        raise EconomicsError(
            f"break-even impossible: a fully loaded unit ({a:g} ops/s) frees {a * s:.4g} per year of CPU, "
            f"not more than its price of {p:g} per year, so the accelerator never pays at any rate; it would "
            f"need a price below {a * s:.4g} per year, more capacity, or costlier CPU work per operation")
    first = m * p / s
    u_star = math.ceil(p / full) if p > 0 else 0
    rate = u_star * p / s if u_star > m else first
    return BreakEven(rate_per_s=rate, first_rate_per_s=first, saving_per_op_per_s=s,
                     saving_per_full_unit=full)


@dataclass(frozen=True)
class Offload:
    """Offloading one operation at one rate.

    Attributes:
        rate_per_s, cpu_ns_per_op: the load and the software's CPU time per operation.
        accelerator: the device; core_price_per_year: the price of one core per year.
        units: units needed at the rate.
        cores_software: cores the software needs; cores_host: cores still needed with offload
            (host CPU per offloaded op); cores_saved: the difference — the CPU offload saves.
        cost_software_per_year: cores_software × core price.
        cost_offload_per_year: units × unit price + cores_host × core price.
        saving_per_year: cost_software − cost_offload (negative: offloading costs more).
        break_even: from ``break_even``.
        software_latency_ns: the software's measured median p50 latency, or None.
    """

    rate_per_s: float
    cpu_ns_per_op: float
    accelerator: Accelerator
    core_price_per_year: float
    units: int
    cores_software: float
    cores_host: float
    cores_saved: float
    cost_software_per_year: float
    cost_offload_per_year: float
    saving_per_year: float
    break_even: BreakEven
    software_latency_ns: float | None = None

    @property
    def pays(self) -> bool:
        """True if offloading saves money at this rate."""
        return self.saving_per_year > 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("accelerator", "break_even")}
        d.update(accelerator=self.accelerator.as_dict(), break_even=self.break_even.as_dict(),
                 pays=self.pays)
        return d


def offload(rate_per_s: float, cpu_ns_per_op: float, acc: Accelerator, core_price_per_year: float,
            software_latency_ns: float | None = None) -> Offload:
    """Cores and money saved (or lost) by offloading ``rate_per_s`` operations per second, and
    the break-even rate. Raises EconomicsError as ``break_even`` does, or for a negative rate."""
    be = break_even(cpu_ns_per_op, acc, core_price_per_year)
    rate = check_number("rate", rate_per_s)
    units = units_needed(rate, acc)
    sw = cores_needed(rate, cpu_ns_per_op)
    host = rate * acc.host_cpu_ns_per_op / NS_PER_S
    cost_sw = sw * core_price_per_year
    cost_off = units * acc.price_per_year + host * core_price_per_year
    return Offload(rate_per_s=rate, cpu_ns_per_op=cpu_ns_per_op, accelerator=acc,
                   core_price_per_year=core_price_per_year, units=units, cores_software=sw,
                   cores_host=host, cores_saved=sw - host, cost_software_per_year=cost_sw,
                   cost_offload_per_year=cost_off, saving_per_year=cost_sw - cost_off,
                   break_even=be, software_latency_ns=software_latency_ns)


# --------------------------------------------------------------------------- composite requests

#: ``RequestCpu.method``: every term measured in the same blocks; the interval is the t
#: interval (log scale, as ``cpu_cost``) of the per-block totals Σ count × CPU ns/op.
PER_BLOCK_TOTALS = "per-block totals"
#: ``RequestCpu.method``: the terms' blocks differ; each term's interval is taken at the
#: Bonferroni level 1 − (1 − level) / terms and the bounds are summed × count — a conservative
#: interval (it holds with probability >= level whatever the terms' correlation).
SUMMED_INTERVALS = "summed intervals"
#: ``Change.method`` for one operation, or a composite request measured in the same blocks.
PAIRED_DIFFERENCES = "paired per-block differences"

_COUNT = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]*")


def parse_request(text: str) -> list[tuple[str, float]]:
    """The terms of a composite request as typed: ``"ecdsa-p256-sign + x25519-keygen +
    2*x25519-derive"`` → ``[("ecdsa-p256-sign", 1), ("x25519-keygen", 1), ("x25519-derive", 2)]``.

    Terms are separated by ``+``; each is an operation or study label, optionally with a count
    before or after it (``2*OP`` or ``OP*2``; a positive number, e.g. ``0.3*OP`` for an operation
    only some requests do). A name given twice has its counts added. Returns (name, count)
    pairs in the order first given.

    Raises EconomicsError (naming the term) for an empty request or term, a count <= 0, or a term
    that is not ``OP``, ``N*OP`` or ``OP*N``.
    """
    example = 'e.g. --per-request "ecdsa-p256-sign + x25519-keygen + 2*x25519-derive"'
    if not str(text).strip():
        raise EconomicsError(f"--per-request is empty: give the operations of one request joined by +, {example}")
    terms: dict[str, float] = {}
    for raw in str(text).split("+"):
        parts = [p.strip() for p in raw.split("*")]
        counts = [p for p in parts if _COUNT.fullmatch(p)]
        names = [p for p in parts if _NAME.fullmatch(p) and not _COUNT.fullmatch(p)]
        if not raw.strip() or len(parts) > 2 or len(names) != 1 or len(counts) != len(parts) - 1:
            raise EconomicsError(f"--per-request: term '{raw.strip()}' is not OP, N*OP or OP*N; join the "
                                 f"operations of one request with +, {example}")
        count = float(counts[0]) if counts else 1.0
        if count <= 0:
            raise EconomicsError(f"--per-request: the count of '{raw.strip()}' must be a positive number")
        terms[names[0]] = terms.get(names[0], 0.0) + count
    return list(terms.items())


def request_text(terms: Sequence[tuple[str, float]]) -> str:
    """Terms as one request: ``ecdsa-p256-sign + x25519-keygen + 2*x25519-derive``."""
    return " + ".join(name if count == 1 else f"{count:g}*{name}" for name, count in terms)


@dataclass(frozen=True)
class Term:
    """One operation of a composite request.

    Attributes:
        name: the operation or study label as typed; count: times per request.
        cell: the cell measured for it (``Cell.as_dict``).
        cpu: its CPU time per operation (``cpu_cost``, at the plan's level).
    """

    name: str
    count: float
    cell: dict[str, Any]
    cpu: CpuCost

    @property
    def cpu_ns_per_request(self) -> float:
        """count × CPU ns per operation (the estimate)."""
        return self.count * self.cpu.estimate_ns

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``cpu`` nested)."""
        return {"name": self.name, "count": self.count, "cell": self.cell,
                "cpu_ns_per_request": self.cpu_ns_per_request, "cpu": self.cpu.as_dict()}


@dataclass(frozen=True)
class RequestCpu:
    """The CPU time of one composite request.

    Attributes:
        terms: its operations, in the order given.
        cpu: CPU ns per request (a CpuCost: estimate, interval, range). With
            ``PER_BLOCK_TOTALS``: of the per-block totals (samples_ns = block → total).
            With ``SUMMED_INTERVALS``: estimate, bounds and range are the sums × count of the
            terms' (geometric means, Bonferroni-level bounds, fastest and slowest repetitions);
            samples_ns is empty and repetitions the fewest any term has.
        method: ``PER_BLOCK_TOTALS`` or ``SUMMED_INTERVALS``.
        term_level: the level of each term's interval in the sum (= cpu.level for
            ``PER_BLOCK_TOTALS``).
    """

    terms: tuple[Term, ...]
    cpu: CpuCost
    method: str
    term_level: float

    @property
    def method_text(self) -> str:
        """How the interval was made, in words."""
        if self.method == PER_BLOCK_TOTALS:
            return (f"t interval of the per-block totals (every term was measured in the same "
                    f"{self.cpu.repetitions} blocks)")
        return (f"sum of the terms' {self.term_level * 100:.4g} % intervals (their blocks differ; "
                f"Bonferroni over {len(self.terms)} terms, so at least {self.cpu.level * 100:.4g} %: "
                "conservative)")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"request": request_text([(t.name, t.count) for t in self.terms]),
                "terms": [t.as_dict() for t in self.terms], "cpu": self.cpu.as_dict(),
                "method": self.method, "method_text": self.method_text, "term_level": self.term_level}


def request_cpu(terms: Sequence[tuple[str, float, dict[str, Any], Mapping[int, float]]],
                level: float = stats.DEFAULT_LEVEL) -> RequestCpu:
    """CPU ns per composite request: Σ count × CPU ns/op over the terms, with an interval.

    Args:
        terms: (name, count, cell dict, block → CPU ns/op of one repetition) per term; counts
            > 0, each term with at least one sample.
        level: confidence level of the request's interval.

    When every term was measured in the same blocks (the usual case: a study runs every cell
    of a block together), the per-block totals Σ count × x(term, block) are one sample per block,
    and the request's CPU is their geometric mean with its t interval (``cpu_cost``): the
    terms' shared drift between blocks cancels as it does in a paired comparison. Otherwise each
    term's t interval is taken at ``stats.adjusted_level(level, len(terms))`` and their bounds
    are summed × count (``SUMMED_INTERVALS``: conservative). Either way there is no interval
    when a term has fewer than ``stats.MIN_BLOCKS`` repetitions.

    Raises EconomicsError for no terms, a count <= 0 or a term without samples.
    """
    if not terms:
        raise EconomicsError("a request needs at least one operation")
    for name, count, _, samples in terms:
        check_number(f"the count of '{name}'", count, positive=True)
        if not samples:
            raise EconomicsError(f"'{name}' has no measured repetition")
    blocks = [tuple(samples) for *_, samples in terms]
    if all(set(b) == set(blocks[0]) for b in blocks):
        totals = {k: sum(count * samples[k] for _, count, _, samples in terms) for k in blocks[0]}
        parts = tuple(Term(name, count, cell, cpu_cost(samples, level)) for name, count, cell, samples in terms)
        return RequestCpu(terms=parts, cpu=cpu_cost(totals, level), method=PER_BLOCK_TOTALS, term_level=level)
    adj = stats.adjusted_level(level, len(terms))
    parts = tuple(Term(name, count, cell, cpu_cost(samples, level)) for name, count, cell, samples in terms)
    wide = [cpu_cost(samples, adj) for *_, samples in terms]
    low = high = None
    if all(w.low_ns is not None for w in wide):
        low = sum(t.count * w.low_ns for t, w in zip(parts, wide))  # type: ignore[operator]
        high = sum(t.count * w.high_ns for t, w in zip(parts, wide))  # type: ignore[operator]
    cpu = CpuCost(estimate_ns=sum(t.cpu_ns_per_request for t in parts), low_ns=low, high_ns=high,
                  min_ns=sum(t.count * t.cpu.min_ns for t in parts),
                  max_ns=sum(t.count * t.cpu.max_ns for t in parts),
                  repetitions=min(t.cpu.repetitions for t in parts), samples_ns={}, level=level)
    return RequestCpu(terms=parts, cpu=cpu, method=SUMMED_INTERVALS, term_level=adj)


def request_change(rate_per_s: float, before: RequestCpu, after: RequestCpu,
                   level: float = stats.DEFAULT_LEVEL) -> Change:
    """Cores before and after a change of configuration for a composite request at
    ``rate_per_s`` requests per second, term by term (``after.terms[i]`` is the counterpart of
    ``before.terms[i]``, with the same count).

    Both measured with ``PER_BLOCK_TOTALS``: ``change`` on the per-block totals (paired by
    block). Otherwise the t interval of each term's paired per-block differences at the
    Bonferroni level ``stats.adjusted_level(level, terms)``, summed × count × rate / 1e9
    (``SUMMED_INTERVALS``; no ratio interval); no interval when a term has fewer than
    ``stats.MIN_BLOCKS`` paired blocks.

    Raises EconomicsError for a negative rate, or requests of different lengths.
    """
    if len(before.terms) != len(after.terms):
        raise EconomicsError("the two requests of a change must have the same terms")
    if before.method == after.method == PER_BLOCK_TOTALS:
        return change(rate_per_s, before.cpu, after.cpu, level)
    b, a = cores_at_rate(rate_per_s, before.cpu), cores_at_rate(rate_per_s, after.cpu)
    adj = stats.adjusted_level(level, len(before.terms))
    low: float | None = 0.0
    high: float | None = 0.0
    paired = []
    for tb, ta in zip(before.terms, after.terms):
        common = [k for k in tb.cpu.samples_ns if k in ta.cpu.samples_ns]
        paired.append(len(common))
        if len(common) < stats.MIN_BLOCKS or low is None or high is None:
            low = high = None
            continue
        d = stats.mean_interval([ta.cpu.samples_ns[k] - tb.cpu.samples_ns[k] for k in common], adj)
        low += tb.count * d.low * rate_per_s / NS_PER_S  # type: ignore[operator]
        high += tb.count * d.high * rate_per_s / NS_PER_S  # type: ignore[operator]
    return Change(rate_per_s=rate_per_s, before=b, after=a, delta_cores=a.cores - b.cores,
                  delta_low=low, delta_high=high, ratio=None, blocks=min(paired),
                  method=SUMMED_INTERVALS)


# --------------------------------------------------------------------------- a stored run

def find_cells(run: StoredRun, op: str, configuration: str | None = None, backend: str | None = None,
               size_bytes: int | None = None, flag: str = "--op") -> list[CellSummary]:
    """The cells of ``run`` whose operation or label is ``op`` (or whose operation ``op``
    names in another spelling: ``opnames.canonical_op``), narrowed by the other arguments
    (None: any), in the run's order. ``flag`` is the option ``op`` came from, for the messages.

    Raises EconomicsError when the run has no such operation, or nothing is left after
    narrowing (naming what the run has).
    """
    cells = list(run.summaries.values())
    if not cells:
        raise EconomicsError(f"run {run.id} has no results")
    chosen = [s for s in cells if op in (s.cell.op, s.cell.label)]
    if not chosen:  # another spelling of an operation of the run: ECDSA-P256-sign, SHA-256
        known = sorted({s.cell.op for s in cells})
        spelt = opnames.canonical_op(op, known)
        chosen = [s for s in cells if s.cell.op == spelt]
    if not chosen:
        ops = sorted({s.cell.op for s in cells} | {s.cell.label for s in cells})
        fix = "pick one with --op" if flag == "--op" else "use those names in --per-request"
        raise EconomicsError(f"run {run.id} has no operation '{op}' (it has: {', '.join(ops)}); {fix}")
    for what, want, get in (("configuration", configuration, lambda s: s.cell.configuration),
                            ("backend", backend, lambda s: s.cell.backend),
                            ("size", size_bytes, lambda s: s.cell.size_bytes)):
        if want is None:
            continue
        left = [s for s in chosen if get(s) == want]
        if not left:
            have = sorted({str(get(s)) for s in chosen})
            raise EconomicsError(f"run {run.id} has no '{op}' cell with {what} {want} "
                                 f"(it has: {', '.join(have)})")
        chosen = left
    return chosen


def _one(run: StoredRun, cells: list[CellSummary], op: str, flag: str = "--op") -> CellSummary:
    if len(cells) > 1:
        what = f"--op {op}" if flag == "--op" else f"'{op}' in --per-request"
        raise EconomicsError(
            f"{what} matches {len(cells)} cells of run {run.id} ({', '.join(s.cell.key for s in cells)}); "
            "choose one with --backend, --size or --configuration (or compare two with --from/--to)")
    return cells[0]


def _counterpart(run: StoredRun, first: CellSummary, to_config: str) -> CellSummary:
    """The cell of ``to_config`` with the same backend, label and size as ``first``."""
    other = next((s for s in run.summaries.values()
                  if s.cell.group == first.cell.group and s.cell.configuration == to_config), None)
    if other is None:
        raise EconomicsError(f"run {run.id} has no cell {first.cell.backend}/{first.cell.label}/"
                             f"{first.cell.size_bytes} in configuration '{to_config}'")
    return other


def _samples(run: StoredRun, s: CellSummary) -> Mapping[int, float]:
    if not s.cpu_ns_per_op_by_block:
        why = f" ({s.status}: {s.reason})" if s.status != "ok" else ""
        raise EconomicsError(f"cell {s.cell.key} of run {run.id} has no measured repetition{why}")
    return s.cpu_ns_per_op_by_block


@dataclass
class PlanResult:
    """The answer of ``cryptoperf plan``.

    Attributes:
        run_id, rate_per_s: what was asked; ``rate_per_s`` is operations per second for
            ``op``, requests per second for ``request``.
        op: the operation (or label) asked with --op, or None for a composite request.
        request: the composite request as ``request_text`` writes it, or None.
        cells: the cell(s) used, as ``Cell.as_dict``: for --op one, or two with --from/--to
            (before, after); for a request every term's cell, side after side.
        cores: (a) cores at the rate, one per side (one, or before and after).
        requests: for a composite request, its CPU per side (``RequestCpu``), else empty.
        change: (b) the change from the first side to the second, or None.
        offload: (c) one per cell when an accelerator was described, else empty (never for a
            composite request).
        core_price_per_year: the price of a core, or None.
        options: the narrowing asked (configuration, backend, size_bytes, from_config,
            to_config; None when not given), to write the question back.
        level: confidence level of the intervals.
    """

    run_id: int
    op: str | None
    rate_per_s: float
    cells: list[dict[str, Any]]
    cores: list[CoresAtRate]
    change: Change | None = None
    offload: list[Offload] = field(default_factory=list)
    core_price_per_year: float | None = None
    request: str | None = None
    requests: list[RequestCpu] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    level: float = stats.DEFAULT_LEVEL

    @property
    def unit(self) -> str:
        """``requests/s`` for a composite request, ``ops/s`` for one operation."""
        return "requests/s" if self.request is not None else "ops/s"

    @property
    def caveat(self) -> str:
        """What the intervals do not cover (``CAVEAT``)."""
        return CAVEAT

    def cost_per_year(self, cores: float) -> float | None:
        """``cores`` × the core price per year, or None without a price."""
        return None if self.core_price_per_year is None else cores * self.core_price_per_year

    def side_name(self, i: int) -> str:
        """A short name for side ``i`` (0, or 1 after a change): its configuration when the run
        has several (``old``), else the backend, else ``request``/the op."""
        cells = [t.cell for t in self.requests[i].terms] if self.requests else [self.cells[i]]
        confs = {c["configuration"] for c in cells}
        if len(confs) == 1 and next(iter(confs)):
            return str(next(iter(confs)))
        backends = {c["backend"] for c in cells}
        return str(next(iter(backends))) if len(backends) == 1 else (self.request or self.op or "")

    def command(self) -> str:
        """The ``cryptoperf plan`` command line that asks this question again (without
        --store and the output options)."""
        args = ["cryptoperf", "plan", str(self.run_id)]
        args += ["--per-request", self.request] if self.request is not None else ["--op", str(self.op)]
        args += ["--rate", format(self.rate_per_s, ".10g")]
        for key, flag in (("configuration", "--configuration"), ("backend", "--backend"),
                          ("size_bytes", "--size"), ("from_config", "--from"), ("to_config", "--to")):
            if self.options.get(key) is not None:
                args += [flag, str(self.options[key])]
        if self.core_price_per_year is not None:
            args += ["--core-price-per-year", format(self.core_price_per_year, "g")]
        if self.offload:
            acc = self.offload[0].accelerator
            args += ["--accel-ops-per-s", format(acc.ops_per_s_per_unit, "g"),
                     "--accel-price-per-year", format(acc.price_per_year, "g")]
            if acc.host_cpu_ns_per_op:
                args += ["--accel-host-cpu-us-per-op", format(acc.host_cpu_ns_per_op / 1e3, "g")]
            if acc.latency_ns is not None:
                args += ["--accel-latency-us", format(acc.latency_ns / 1e3, "g")]
            if acc.min_units != 1:
                args += ["--accel-min-units", str(acc.min_units)]
        return shlex.join(args)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; with a core price, ``cores`` entries and ``change`` carry
        ``cost_per_year`` / ``delta_cost_per_year``; ``requests`` for a composite request;
        ``caveat`` last."""
        cores = []
        for c in self.cores:
            d = c.as_dict()
            d["cost_per_year"] = self.cost_per_year(c.cores)
            cores.append(d)
        ch = self.change.as_dict() if self.change else None
        if ch is not None and self.change is not None:
            ch["delta_cost_per_year"] = self.cost_per_year(self.change.delta_cores)
        return {"run_id": self.run_id, "op": self.op, "request": self.request, "unit": self.unit,
                "rate_per_s": self.rate_per_s, "command": self.command(),
                "core_price_per_year": self.core_price_per_year, "cells": self.cells,
                "requests": [r.as_dict() for r in self.requests],
                "cores": cores, "change": ch, "offload": [o.as_dict() for o in self.offload],
                "caveat": self.caveat}


def plan(run: StoredRun, op: str | None, rate_per_s: float | str, *, request: str | None = None,
         configuration: str | None = None, backend: str | None = None, size_bytes: int | None = None,
         from_config: str | None = None, to_config: str | None = None,
         accelerator: Accelerator | None = None, core_price_per_year: float | None = None) -> PlanResult:
    """(a) cores for ``rate_per_s`` of ``op`` in ``run`` — or of ``request``, a composite
    request (``parse_request``), ``rate_per_s`` then being requests per second; (b) with
    ``from_config`` and ``to_config``, the cores before and after that change; (c) with
    ``accelerator`` and ``core_price_per_year``, the break-even rate and what offloading saves
    at the rate (for ``op`` only).

    ``op`` (and each term of ``request``) is an operation or a study label, resolved to one
    cell (in a request, terms matching one cell fix the configuration and backend of terms that
    match several, if they all agree on it, and ``size_bytes`` narrows only the terms measured
    with a message size); with ``from_config``/``to_config`` the "to" cell is the one with the same backend,
    label and size in ``to_config`` (its op may differ, e.g. rsa2048-sign → rsa4096-sign).
    ``rate_per_s`` may be text (``parse_rate``: ``2k``, ``1M/s``). Intervals are t intervals
    (``cpu_cost``, ``change``, ``request_cpu``, ``request_change``).

    Raises EconomicsError for a negative rate or price, both or neither of ``op`` and
    ``request``, an op/configuration/backend/size the run lacks, an ambiguous choice, a cell
    without measured repetitions, --from without --to, an accelerator with a composite request,
    or an accelerator that never pays.
    """
    rate = parse_rate(rate_per_s)
    if (op is None) == (request is None):
        raise EconomicsError("give either --op OP (one operation) or --per-request 'OP + OP …' "
                             "(the operations of one request), not both" if op is not None else
                             "plan needs --op OP (one operation) or --per-request 'OP + OP …'")
    if (from_config is None) != (to_config is None):
        raise EconomicsError("--from and --to go together: give both configurations of the change")
    if from_config is not None and configuration is not None:
        raise EconomicsError("give either --configuration or --from/--to, not both")
    if accelerator is not None and request is not None:
        raise EconomicsError(
            "an accelerator's capacity and break-even are per operation of one kind, and --per-request "
            "mixes several: plan the offloaded operation alone, with --op OP and --rate (its count × the "
            "request rate)")
    if accelerator is not None and core_price_per_year is None:
        raise EconomicsError("an accelerator needs --core-price-per-year to be compared with the CPU it saves")
    if core_price_per_year is not None:
        check_number("--core-price-per-year", core_price_per_year)
    if to_config is not None:
        configs = sorted({s.cell.configuration for s in run.summaries.values()})
        if to_config not in configs:
            raise EconomicsError(f"run {run.id} has no configuration '{to_config}' (it has: {', '.join(configs)})")
    options = dict(configuration=configuration, backend=backend, size_bytes=size_bytes,
                   from_config=from_config, to_config=to_config)
    flag = "--op" if request is None else "--per-request"
    names = [(str(op), 1.0)] if request is None else parse_request(request)
    # sides[0]: before (or the only side); sides[1]: after; one (name, count, summary) per term
    sides: list[list[tuple[str, float, CellSummary]]] = [[], []] if to_config is not None else [[]]
    found = {}
    for name, _ in names:
        cells = find_cells(run, name, from_config or configuration, backend, None, flag)
        # --size narrows the terms that take a message; in a request, others (x25519-keygen) keep theirs
        if size_bytes is not None and (request is None or any(s.cell.size_bytes is not None for s in cells)):
            cells = find_cells(run, name, from_config or configuration, backend, size_bytes, flag)
        found[name] = cells
    # in a request, the terms that match one cell fix the configuration and backend of the others
    # (ecdsa-p256-sign is measured in one configuration: its x25519-keygen is that one's)
    for attr in ("configuration", "backend"):
        fixed = {getattr(c[0].cell, attr) for c in found.values() if len(c) == 1}
        if len(fixed) == 1:
            value = next(iter(fixed))
            found = {n: [s for s in c if getattr(s.cell, attr) == value] or c if len(c) > 1 else c
                     for n, c in found.items()}
    for name, count in names:
        first = _one(run, found[name], name, flag)
        picks = [first] if to_config is None else [first, _counterpart(run, first, to_config)]
        for side, s in zip(sides, picks):
            same = next((i for i, (_, _, t) in enumerate(side) if t.cell.key == s.cell.key), None)
            if same is None:
                side.append((name, count, s))
            else:  # e.g. a label and its op: one cell, counts added
                side[same] = (side[same][0], side[same][1] + count, s)
    for side in sides:
        for _, _, s in side:
            n = len(_samples(run, s))
            if 0 < n < stats.MIN_BLOCKS:
                raise EconomicsError(
                    f"run {run.id} has {n} measured repetition{'s' if n != 1 else ''} of {s.cell.key} "
                    f"({s.cell.op}); a cost to plan with needs an interval, which needs "
                    f"{stats.MIN_BLOCKS}: plan on a study run, or on `cryptoperf speed --repetitions "
                    f"{stats.MIN_BLOCKS}`")
    if request is None:
        chosen = [side[0][2] for side in sides]
        costs = [cpu_cost(_samples(run, s)) for s in chosen]
        result = PlanResult(run_id=run.id, op=op, rate_per_s=rate, cells=[s.cell.as_dict() for s in chosen],
                            cores=[cores_at_rate(rate, c) for c in costs],
                            core_price_per_year=core_price_per_year, options=options)
        if len(costs) == 2:
            result.change = change(rate, costs[0], costs[1])
    else:
        reqs = [request_cpu([(n, c, s.cell.as_dict(), _samples(run, s)) for n, c, s in side]) for side in sides]
        result = PlanResult(run_id=run.id, op=None, rate_per_s=rate,
                            cells=[s.cell.as_dict() for side in sides for _, _, s in side],
                            cores=[cores_at_rate(rate, r.cpu) for r in reqs],
                            core_price_per_year=core_price_per_year,
                            request=request_text([(n, c) for n, c, _ in sides[0]]), requests=reqs,
                            options=options)
        if len(reqs) == 2:
            result.change = request_change(rate, reqs[0], reqs[1])
        return result
    if accelerator is not None:
        assert core_price_per_year is not None
        for c, s in zip(costs, chosen):
            try:
                result.offload.append(offload(rate, c.estimate_ns, accelerator, core_price_per_year, s.p50_ns))
            except EconomicsError as e:
                raise EconomicsError(f"{s.cell.key} ({s.cell.op}): {e}") from None
    return result
