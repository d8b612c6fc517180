"""How a target's time in flight grows with the number of targets in flight, when they share a
CPU: the two limits the job planner (``economics.jobs``) predicts between.

A target in flight spends its time in two kinds of place: *delays*, which do not depend on how
many other targets are in flight (round trips, the target's own work, the time a target's own
machine spends on its cryptography), and one *CPU station*: ``cores`` CPUs shared by every target
in flight, each target needing ``demand_s`` seconds of CPU there. With ``n`` targets in flight a
target's time is ``delay_s + R(n)``, where R, the time at the CPU station (its CPU work and its
wait for a CPU), lies between two limits:

- **random arrivals** (the lower limit): the targets' CPU work arrives at independent moments, as
  in a closed queueing network solved by exact mean value analysis (Reiser and Lavenberg,
  "Mean-Value Analysis of Closed Multichain Queuing Networks", J. ACM 27(2), 1980), the multi-CPU
  station approximated as Seidmann, Schweitzer and Shor-Fischer do (a single server of demand
  D/cores plus a pure delay of D·(cores − 1)/cores; described in Menascé, Almeida and Dowdy,
  "Performance by Design", 2004, ch. 15). Little load, little waiting.
- **lockstep** (the upper limit): every target in flight needs its CPU at the same moment, as
  when a job's targets start together and share one fixed latency, so the n targets share the
  cores for all of their CPU work: ``R(n) = D · max(1, n / cores)``.

Both limits saturate at the same throughput, ``cores / D`` targets per second: the CPU bound.

Functions take and return numpy arrays over the measured jobs (one value per block), so one
call predicts for every block at once. Errors: ``ValueError`` for a negative demand, delay or
a concurrency below 1.
"""

from __future__ import annotations

import numpy as np

#: The two limits, in the order the planner reports them.
LIMITS = ("random", "lockstep")
#: Bisection steps when calibrating the unexplained delay (relative precision about 2⁻⁴⁰).
_STEPS = 40


def _check(demand_s: np.ndarray, delay_s: np.ndarray, n: int) -> None:
    if n < 1:
        raise ValueError(f"targets in flight must be at least 1, not {n}")
    if np.any(demand_s < 0) or np.any(delay_s < 0):
        raise ValueError("a CPU demand or a delay cannot be negative")


def mva_time_s(demand_s: np.ndarray, cores: int, delay_s: np.ndarray, n: int) -> np.ndarray:
    """A target's time in flight (s, per block) with ``n`` targets in flight under random
    arrivals: exact MVA of a delay station (``delay_s``, s) and a CPU station of ``cores`` CPUs
    (``demand_s``, s of CPU per target; Seidmann's approximation for several CPUs). Shapes:
    ``demand_s`` and ``delay_s`` (blocks,) → (blocks,). Past saturation each further target adds
    D/cores, computed in closed form rather than step by step."""
    demand_s, delay_s = np.asarray(demand_s, dtype=float), np.asarray(delay_s, dtype=float)
    _check(demand_s, delay_s, n)
    queue = demand_s / cores
    delay = delay_s + demand_s * (cores - 1) / cores
    q = np.zeros_like(queue)
    t = delay + queue
    for k in range(1, n + 1):
        r = queue * (1.0 + q)
        t = delay + r
        x = k / t
        q = x * r
        if k < n and np.all(x * queue >= 1.0 - 1e-9):
            return t + (n - k) * queue  # saturated: each further target waits one more service
    return t


def lockstep_time_s(demand_s: np.ndarray, cores: int, delay_s: np.ndarray, n: int) -> np.ndarray:
    """A target's time in flight (s, per block) with ``n`` targets in flight that all need the
    CPU at once: ``delay_s + demand_s · max(1, n / cores)``. Shapes as ``mva_time_s``."""
    demand_s, delay_s = np.asarray(demand_s, dtype=float), np.asarray(delay_s, dtype=float)
    _check(demand_s, delay_s, n)
    return delay_s + demand_s * max(1.0, n / cores)


def time_s(limit: str, demand_s: np.ndarray, cores: int, delay_s: np.ndarray, n: int) -> np.ndarray:
    """``mva_time_s`` (``limit = "random"``) or ``lockstep_time_s`` (``"lockstep"``). Raises
    ValueError for another limit."""
    if limit == "random":
        return mva_time_s(demand_s, cores, delay_s, n)
    if limit == "lockstep":
        return lockstep_time_s(demand_s, cores, delay_s, n)
    raise ValueError(f"unknown limit {limit!r}: one of {', '.join(LIMITS)}")


def unexplained_delay_s(limit: str, measured_s: np.ndarray, demand_s: np.ndarray, cores: int,
                        delay_s: np.ndarray, n: int) -> np.ndarray:
    """The delay (s, per block, ≥ 0) that the measured time in flight ``measured_s`` at ``n``
    targets in flight has beyond ``delay_s`` and the CPU station under ``limit``: what makes the
    model give the measured time at the measured concurrency (bisection; 0 where even no extra
    delay gives more than was measured). Shapes (blocks,)."""
    measured_s = np.asarray(measured_s, dtype=float)
    delay_s = np.asarray(delay_s, dtype=float)
    lo = np.zeros_like(measured_s)
    hi = np.maximum(measured_s - delay_s, 0.0)
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        over = time_s(limit, demand_s, cores, delay_s + mid, n) > measured_s
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    return lo
