"""Composite requests: several operations done once per request (``cryptoperf plan
--per-request "ecdsa-p256-sign + x25519-keygen + x25519-derive"``, e.g. what a TLS 1.3 server
signs and computes per full handshake). CPU per request = Σ count × CPU ns per operation, with an
interval from the per-block totals (or the terms' intervals summed); a rate is then requests
per second. The method: docs/methodology.md, "Composite requests".

Errors: ``EconomicsError`` naming the term for a request that cannot be read, or a term without
measured repetitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cryptoperf import stats
from cryptoperf.economics.cost import (NS_PER_S, Change, CpuCost, change, check_number, cores_at_rate,
                                       cpu_cost)
from cryptoperf.errors import EconomicsError

#: ``RequestCpu.method``: every term measured in the same blocks; the interval is the t
#: interval (log scale, as ``cpu_cost``) of the per-block totals Σ count × CPU ns/op.
PER_BLOCK_TOTALS = "per-block totals"
#: ``RequestCpu.method``: the terms' blocks differ; each term's interval is taken at the
#: Bonferroni level 1 − (1 − level) / terms and the bounds are summed × count — a conservative
#: interval (it holds with probability >= level whatever the terms' correlation).
SUMMED_INTERVALS = "summed intervals"

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


# --------------------------------------------------------------------------- the non-crypto remainder

@dataclass(frozen=True)
class Remainder:
    """What one side of a workload spends per transaction beyond a request's primitives: the
    non-crypto rest of the request (connection set-up and teardown, the kernel's socket work,
    the TLS record layer and key schedule, the library's own bookkeeping), measured as the
    workload's CPU per transaction minus the sum of the request's primitives, both measured on
    the same host.

    Attributes:
        run_id: the run the workload was measured in; cell: its cell (``Cell.as_dict``).
        side: whose CPU the workload figure is (``server``, ``client``, ``both``).
        measured: that side's CPU ns per transaction of the workload (``cpu_cost`` of one value
            per repetition, at ``level``).
        primitives: the request's CPU per request it subtracts (the first configuration's).
        estimate_ns: measured.estimate_ns − primitives.cpu.estimate_ns, > 0.
        low_ns, high_ns: its interval: the workload's and the primitives' intervals each at the
            Bonferroni level 1 − (1 − level) / 2, their bounds subtracted crosswise (conservative:
            it holds whatever the two figures' correlation, and they may come from different
            runs, where nothing pairs them); None without intervals.
        level: the confidence level of (low_ns, high_ns).
    """

    run_id: int
    cell: dict[str, Any]
    side: str
    measured: CpuCost
    primitives: RequestCpu
    estimate_ns: float
    low_ns: float | None
    high_ns: float | None
    level: float = stats.DEFAULT_LEVEL

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (units in the names)."""
        return {"run_id": self.run_id, "cell": self.cell, "side": self.side,
                "measured": self.measured.as_dict(), "primitives_ns": self.primitives.cpu.estimate_ns,
                "estimate_ns": self.estimate_ns, "low_ns": self.low_ns, "high_ns": self.high_ns,
                "level": self.level}


def _at_level(req: RequestCpu, level: float) -> RequestCpu:
    return request_cpu([(t.name, t.count, t.cell, t.cpu.samples_ns) for t in req.terms], level)


def remainder(measured_ns: Mapping[int, float], primitives: RequestCpu, *, run_id: int, cell: dict[str, Any],
              side: str, level: float = stats.DEFAULT_LEVEL) -> Remainder:
    """The non-crypto remainder of a request: ``measured_ns`` (block → one repetition's CPU ns
    per transaction of a workload on ``side``, cell ``cell`` of run ``run_id``) minus the CPU
    per request of ``primitives``, with a conservative interval (``Remainder``).

    Raises EconomicsError when the workload has no measured repetition, or costs no more than
    the primitives (it is not a transaction made of them, or not on the same host or library).
    """
    if not measured_ns:
        raise EconomicsError(f"cell {cell['cell']} of run {run_id} has no measured {side} CPU per transaction")
    m, p = cpu_cost(measured_ns, level), primitives.cpu
    if m.estimate_ns <= p.estimate_ns:
        raise EconomicsError(
            f"the {side} CPU per transaction of {cell['cell']} in run {run_id} ({m.estimate_ns / 1e3:.4g} µs) is "
            f"not more than the request's primitives ({p.estimate_ns / 1e3:.4g} µs): that workload is not made "
            "of these operations; pick its cell with --remainder-op, and the terms it performs")
    adj = stats.adjusted_level(level, 2)
    m_adj, p_adj = cpu_cost(measured_ns, adj), _at_level(primitives, adj).cpu
    low = high = None
    if m_adj.low_ns is not None and p_adj.low_ns is not None:
        low, high = m_adj.low_ns - p_adj.high_ns, m_adj.high_ns - p_adj.low_ns  # type: ignore[operator]
    return Remainder(run_id=run_id, cell=cell, side=side, measured=m, primitives=primitives,
                     estimate_ns=m.estimate_ns - p.estimate_ns, low_ns=low, high_ns=high, level=level)


def with_remainder(requests: Sequence[RequestCpu], rem: Remainder,
                   level: float = stats.DEFAULT_LEVEL) -> list[CpuCost]:
    """CPU per request including ``rem``, one per configuration of ``requests`` (the first is
    the one ``rem`` was measured against, so its total is the workload's own measured figure,
    ``rem.measured``, exactly). A later configuration i costs measured + (primitives_i −
    primitives_0): the remainder is taken to stay when only the primitives change. Its
    interval sums the workload's interval and the paired interval of the primitives'
    difference, each at the Bonferroni level 1 − (1 − level) / 2 (conservative); none when
    either has none."""
    first, out = requests[0], [rem.measured]
    adj = stats.adjusted_level(level, 2)
    m_adj = cpu_cost(rem.measured.samples_ns, adj)
    for req in requests[1:]:
        # at 10⁹ requests/s a "core" is one ns per request: the change in ns, with its interval
        d = request_change(NS_PER_S, first, req, adj)
        shift = req.cpu.estimate_ns - first.cpu.estimate_ns
        low = high = None
        if d.delta_low is not None and m_adj.low_ns is not None:
            floor = req.cpu.low_ns or req.cpu.min_ns  # never below the request's own primitives
            low = max(m_adj.low_ns + d.delta_low, floor)
            high = m_adj.high_ns + d.delta_high  # type: ignore[operator]
        out.append(CpuCost(estimate_ns=rem.measured.estimate_ns + shift, low_ns=low, high_ns=high,
                           min_ns=max(rem.measured.min_ns + shift, req.cpu.min_ns),
                           max_ns=rem.measured.max_ns + shift,
                           repetitions=min(rem.measured.repetitions, req.cpu.repetitions), samples_ns={},
                           level=level))
    return out
