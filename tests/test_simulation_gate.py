"""The paired regression gate's error rates, simulated through the engine's own analysis
(``cryptoperf.simulate.gate``): an unchanged build seldom fails the default ``cryptoperf gate``
design over 12 operations even with disturbed repetitions, and a +5 % regression of one of them
is caught. A smaller draw than docs/methodology.md's table (``python -m cryptoperf.simulate.gate``),
with a binomial tolerance for the draw."""

from __future__ import annotations

import pytest

from cryptoperf.simulate import gate as simulate_gate
from cryptoperf.simulate.study import binomial_tolerance

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests


def test_an_unchanged_build_seldom_fails_the_gate_even_with_disturbed_repetitions():
    sc = simulate_gate.design("unchanged, CV 3 %, 1 % of repetitions ×3", cv=0.03, outliers=0.01,
                              outlier_factor=3.0)
    f = simulate_gate.run_gates(sc, 120, seed=7)
    assert f.gate_fails <= 0.05 + binomial_tolerance(0.05, f.pipelines), f
    assert f.all_covered >= 0.95 - binomial_tolerance(0.05, f.pipelines), f
    sc = simulate_gate.design("unchanged, CV 1 %, one ×3 per operation", cv=0.01, outlier_count=1, outlier_factor=3.0)
    f = simulate_gate.run_gates(sc, 60, seed=8)
    assert f.gate_fails <= 0.05 + binomial_tolerance(0.05, f.pipelines), f


def test_a_five_per_cent_regression_in_one_of_twelve_operations_is_caught():
    sc = simulate_gate.design("+5 % in 1 of 12, CV 2 %", cv=0.02, group_ratios=simulate_gate.one_regressed(0.05))
    f = simulate_gate.run_gates(sc, 80, seed=9)
    assert f.caught >= 0.80 - binomial_tolerance(0.80, f.pipelines), f
    assert f.gate_fails - f.caught <= 0.05 + binomial_tolerance(0.05, f.pipelines), f  # no other operation blamed
