"""The job planner's two limits (``economics.queueing``): mean value analysis checked against a
simulated closed network (exponential think and service times, where MVA is exact for one CPU
and Seidmann's approximation close for several), lockstep's formula, the CPU bound both reach,
and the calibration that gives back a measured time."""

from __future__ import annotations

import heapq
import random

import numpy as np
import pytest

from cryptoperf.economics import queueing

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests


def simulated_time_s(n: int, think_s: float, demand_s: float, cores: int, completions: int = 40_000,
                     seed: int = 7) -> float:
    """Mean time per cycle (think + wait + service) of ``n`` customers in a closed network: an
    exponential think time of mean ``think_s``, then a first-come-first-served station of
    ``cores`` servers with exponential service of mean ``demand_s`` — simulated event by event."""
    rng = random.Random(seed)
    events = [(rng.expovariate(1 / think_s), "arrive", i) for i in range(n)]
    heapq.heapify(events)
    started = {i: 0.0 for i in range(n)}
    queue: list[int] = []
    busy, done, total = 0, 0, 0.0
    while done < completions:
        now, kind, i = heapq.heappop(events)
        if kind == "arrive":
            queue.append(i)
        else:
            busy -= 1
            done += 1
            total += now - started[i]
            started[i] = now
            heapq.heappush(events, (now + rng.expovariate(1 / think_s), "arrive", i))
        while queue and busy < cores:
            busy += 1
            heapq.heappush(events, (now + rng.expovariate(1 / demand_s), "leave", queue.pop(0)))
    return total / done


@pytest.mark.parametrize("n", [1, 3, 10, 30])
def test_mva_is_exact_for_one_cpu(n):
    """One CPU, 0.1 s of think and 0.02 s of CPU per cycle: MVA's time per target agrees with
    the simulated network within 3 % from no load (n = 1) to saturation (n = 30, 5 × the CPU's
    capacity)."""
    t = float(queueing.mva_time_s(np.array([0.02]), 1, np.array([0.1]), n)[0])
    assert t == pytest.approx(simulated_time_s(n, 0.1, 0.02, 1), rel=0.03)


@pytest.mark.parametrize("n", [2, 8, 20, 40])
def test_seidmanns_approximation_is_close_for_two_cpus(n):
    """Two CPUs (Seidmann's approximation): within 6 % of the simulated network at every load."""
    t = float(queueing.mva_time_s(np.array([0.05]), 2, np.array([0.1]), n)[0])
    assert t == pytest.approx(simulated_time_s(n, 0.1, 0.05, 2), rel=0.06)


def test_both_limits_start_at_no_load_and_reach_the_cpu_bound():
    d, z = np.array([0.01, 0.02]), np.array([0.4, 0.5])
    for limit in queueing.LIMITS:
        assert queueing.time_s(limit, d, 4, z, 1) == pytest.approx(z + d)  # one target: no one to wait for
        # far past saturation a target's time is the CPU's: n × D / cores
        assert queueing.time_s(limit, d, 4, z, 100_000) == pytest.approx(100_000 * d / 4, rel=0.01)
    # in between, once the targets outnumber the cores, lockstep (every target's CPU at once) is
    # never below random arrivals (below that Seidmann's approximation queues a little where
    # separate cores would not)
    for n in (8, 40, 200):
        assert np.all(queueing.lockstep_time_s(d, 4, z, n) >= queueing.mva_time_s(d, 4, z, n) - 1e-12)
    assert queueing.lockstep_time_s(d, 4, z, 4) == pytest.approx(z + d)
    assert queueing.lockstep_time_s(d, 4, z, 8) == pytest.approx(z + 2 * d)


def test_the_unexplained_delay_gives_back_the_measured_time():
    d, waits = np.array([0.005, 0.006]), np.array([0.4, 0.4])
    measured = np.array([0.45, 0.47])
    for limit in queueing.LIMITS:
        z = queueing.unexplained_delay_s(limit, measured, d, 2, waits, 10)
        assert np.all(z >= 0)
        assert queueing.time_s(limit, d, 2, waits + z, 10) == pytest.approx(measured, rel=1e-9)
    # a measured time below what the waits and the CPU alone give: no negative delay
    assert np.all(queueing.unexplained_delay_s("lockstep", np.array([0.3, 0.3]), d, 2, waits, 10) == 0)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        queueing.mva_time_s(np.array([0.1]), 1, np.array([0.1]), 0)
    with pytest.raises(ValueError, match="negative"):
        queueing.lockstep_time_s(np.array([-0.1]), 1, np.array([0.1]), 3)
    with pytest.raises(ValueError, match="unknown limit"):
        queueing.time_s("fifo", np.array([0.1]), 1, np.array([0.1]), 3)
