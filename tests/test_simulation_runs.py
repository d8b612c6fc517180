"""The acceptance figures of comparisons across runs and of the blocks-needed hint, on smaller
draws than docs/methodology.md quotes (``python -m cryptoperf.simulate`` prints the full ones).

Bounds hold by sampling error: with n trials a rate p has a standard error sqrt(p(1-p)/n),
e.g. 1.5 % for coverage 95 % at 200 trials; each bound sits about 3 standard errors out."""

import pytest

from cryptoperf import simulate, simulate_runs
from cryptoperf.simulate_runs import RunScenario

TRIALS = 200


@pytest.mark.parametrize("cells", [1, 12])
@pytest.mark.parametrize("run_sd", [0.0, 0.01, 0.02])
def test_runs_as_the_unit_keep_the_gate_honest(cells, run_sd):
    """A baseline run with 5 runs of history against one run of the same build: the gate fails
    at most 5 % of such comparisons and the intervals cover the truth ~95 % of the time
    together, whatever the run-to-run sd (0–2 %)."""
    f = simulate_runs.run_compare(RunScenario("history", cells, run_sd, runs_a=6), TRIALS, seed=3)
    assert f.gate_fails <= 0.05
    assert 0.91 <= f.all_covered <= 0.99


@pytest.mark.parametrize("cells", [1, 12])
def test_the_assumed_sd_keeps_one_run_per_side_from_failing_an_unchanged_build(cells):
    f = simulate_runs.run_compare(RunScenario("assumed", cells, 0.02), TRIALS, seed=4)
    assert f.gate_fails <= 0.05 and f.all_covered >= 0.91


def test_repetitions_alone_fail_an_unchanged_build_often():
    """What the old gate did: Welch on one run's repetitions per side, at a run sd of 1 %, fails
    a build that did not change about one comparison in five (1 cell), which is why runs are
    now the unit."""
    f = simulate_runs.run_compare(RunScenario("welch", 1, 0.01, run_sd_assumed=None), TRIALS, seed=5)
    assert f.gate_fails >= 0.12 and f.coverage <= 0.65


def test_runs_as_the_unit_still_catch_a_regression():
    f = simulate_runs.run_compare(RunScenario("power", 1, 0.01, runs_a=6, true_ratio=1.10), TRIALS, seed=6)
    assert f.gate_fails >= 0.9


@pytest.mark.parametrize("ratio, least", [(1.0, 0.55), (1.05, 0.8)])
def test_the_blocks_needed_hint_mostly_decides(ratio, least):
    """Run on to the count the hint gave after 3 blocks, a comparison decides at least ~66 %
    of the time under A/A and ~97 % at a true +5 % (docs/methodology.md); bounds ~3 standard
    errors below."""
    sc = simulate.Scenario("hint", 3, true_ratio=ratio, cv=0.03, multiplicity=False, block_drift=0.0)
    h = simulate.hint_calibration(sc, 150, seed=7)
    assert h.hinted > 0.5 and h.decided >= least
