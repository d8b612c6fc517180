"""Accelerator break-even: from which load an offload device pays for itself, and what it saves
at a rate. Money is per year in whatever currency the caller uses — the same one for cores and
accelerators (amortised purchase plus power, licences and space, or a cloud price);
``ops_per_s_per_unit`` is what one unit sustains. The method: docs/methodology.md, "Economics".

Errors: ``EconomicsError`` for a negative or missing figure, or an accelerator that can never
pay for itself.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from cryptoperf.economics.cost import NS_PER_S, check_number, cores_needed
from cryptoperf.errors import EconomicsError

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
        measured_from: the configuration of the run whose rows gave the capacity, host CPU and
            latency (``planning.measured_accelerator``), or None when the buyer typed them.
        measured_note: for people, where in the run they were measured and what they bound.

    Raises EconomicsError for a capacity <= 0, a negative price or host CPU time, or
    min_units < 1.
    """

    ops_per_s_per_unit: float
    price_per_year: float
    host_cpu_ns_per_op: float = 0.0
    latency_ns: float | None = None
    min_units: int = 1
    measured_from: str | None = None
    measured_note: str | None = None

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
