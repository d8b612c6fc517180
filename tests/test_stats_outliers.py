"""The outlier screen of paired comparisons (``outliers.outlier_blocks``) and the interval without
the blocks it sets aside (``stats.paired_log_ratio(..., set_aside=...)``)."""

import math

import numpy as np
import pytest

from cryptoperf import stats
from cryptoperf.stats import outliers

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

#: A block's log ratio at 3 % noise per repetition: sd √2·σ, σ² = log(1 + 0.03²).
SD = math.sqrt(2 * math.log1p(0.03 ** 2))
ALPHA = outliers.outlier_alpha(0.95)

# B. Rosner, "Percentage points for a generalized ESD many-outlier procedure", Technometrics
# 25(2), 1983: the worked example (54 values, up to 10 outliers at α = 0.05), also the NIST/SEMATECH
# e-Handbook's (1.3.5.17.3): three outliers, 5.34, 5.42 and 6.01.
ROSNER = [-0.25, 0.68, 0.94, 1.15, 1.20, 1.26, 1.26, 1.34, 1.38, 1.43, 1.49, 1.49, 1.55, 1.56, 1.58, 1.65,
          1.69, 1.70, 1.76, 1.77, 1.81, 1.91, 1.94, 1.96, 1.99, 2.06, 2.09, 2.10, 2.14, 2.15, 2.23, 2.24,
          2.26, 2.35, 2.37, 2.40, 2.47, 2.54, 2.62, 2.64, 2.90, 2.92, 2.92, 2.93, 3.21, 3.26, 3.30, 3.59,
          3.68, 4.30, 4.64, 5.34, 5.42, 6.01]


def test_the_generalized_esd_finds_rosners_three_outliers():
    out = outliers.outlier_blocks(ROSNER, 0.05, floor_log=0.0, max_share=10 / 54)
    assert [ROSNER[i] for i in out] == [5.34, 5.42, 6.01]


@pytest.mark.parametrize("n", [8, 10, 20])
def test_a_planted_x3_block_is_set_aside_and_nothing_else(n):
    rng = np.random.default_rng(n)
    hits = 0
    for _ in range(300):
        d = rng.normal(0.0, SD, n)
        k = int(rng.integers(n))
        d[k] += math.log(3.0) * (1 if rng.random() < 0.5 else -1)
        hits += outliers.outlier_blocks(d, outliers.outlier_alpha(0.9979)) == (k,)  # even at 24 comparisons' level
    assert hits >= 297


def test_two_planted_blocks_do_not_hide_each_other():
    """Masking: two ×3 blocks inflate the spread so that neither looks extreme beside the other;
    the generalized ESD still finds both (a one-at-a-time test stops at the first)."""
    rng = np.random.default_rng(2)
    for _ in range(100):
        d = rng.normal(0.0, SD, 10)
        d[[2, 7]] += math.log(3.0)
        assert outliers.outlier_blocks(d, ALPHA) == (2, 7)


@pytest.mark.parametrize("n", range(3, 21))
def test_clean_normal_values_are_almost_never_set_aside(n):
    """On normal values the screen's false-alarm rate is about its alpha (0.25 % at a 95 %
    interval); asserted at most 1 % over 2,000 draws (4× alpha: the generalized ESD is not exact,
    and the draw has its own sampling error), and exactly never below the minimum."""
    rng = np.random.default_rng(100 + n)
    flagged = sum(bool(outliers.outlier_blocks(rng.normal(0.0, SD, n), ALPHA)) for _ in range(2000))
    if n < outliers.OUTLIER_MIN_BLOCKS:
        assert flagged == 0
    else:
        assert flagged <= 20, flagged


@pytest.mark.parametrize("n", [3, 4])
def test_never_below_the_minimum(n):
    d = [0.0] * (n - 1) + [math.log(100.0)]
    assert outliers.outlier_blocks(d, 0.5) == ()
    assert outliers.outlier_blocks([0.0, 0.001, -0.001, 0.0, math.log(100.0)], 0.5, min_n=6) == ()


def test_at_most_a_fifth_of_the_blocks():
    d = np.zeros(10) + np.random.default_rng(1).normal(0.0, 0.001, 10)
    d[[1, 4, 8]] += [math.log(3.0), math.log(4.0), math.log(5.0)]
    out = outliers.outlier_blocks(d, ALPHA)
    assert len(out) <= 2 and set(out) <= {1, 4, 8}
    assert len(outliers.outlier_blocks(d[:9], ALPHA)) <= 1


def test_the_floor_keeps_rounded_values_from_flagging_noise():
    """p50s read from histogram buckets (150 ns: whole ns) give log ratios in steps of 1/150;
    with all but one alike their spread is 0, and a step or two must not count as an outlier."""
    step = math.log(151 / 150)
    d = [0.0] * 9 + [2 * step]
    assert outliers.outlier_blocks(d, ALPHA, floor_log=0.0) == (9,)  # what the floor is for
    assert outliers.outlier_blocks(d, ALPHA) == ()
    assert outliers.outlier_blocks(d, ALPHA, floor_log=3 * step) == ()
    assert outliers.outlier_blocks([0.0] * 9 + [math.log(1.5)], ALPHA) == (9,)  # beyond it, still found


def test_bad_input_raises():
    with pytest.raises(ValueError):
        outliers.outlier_blocks([0.0, math.nan, 0.0, 0.0, 0.0], ALPHA)
    with pytest.raises(ValueError):
        outliers.outlier_blocks(np.zeros((5, 2)), ALPHA)
    with pytest.raises(ValueError):
        outliers.outlier_blocks([0.0] * 5, 0.0)


def test_the_interval_without_the_set_aside_blocks_is_the_t_interval_of_the_others():
    rng = np.random.default_rng(4)
    base = np.exp(rng.normal(0.0, 0.03, 10))
    conf = base * 1.05 * np.exp(rng.normal(0.0, 0.03, 10))
    conf[6] *= 3.0
    out = outliers.outlier_blocks(np.log(conf) - np.log(base), ALPHA)
    assert out == (6,)
    ci = stats.paired_log_ratio(conf, base, set_aside=out)
    keep = [i for i in range(10) if i != 6]
    ref = stats.paired_log_ratio(conf[keep], base[keep])
    assert ci.set_aside == (6,) and ci.n == 9 and ci.df == 8 and ci.method == stats.PAIRED_T
    assert (ci.ratio, ci.low, ci.high) == pytest.approx((ref.ratio, ref.low, ref.high))
    assert ci.low > 1.0  # the +5 % is found again
    assert not stats.paired_log_ratio(conf, base).low > 1.0  # the plain mean loses it
    assert ci.at_level(0.99).set_aside == (6,) and ci.as_dict()["set_aside"] == 1
    with pytest.raises(ValueError):
        stats.paired_log_ratio(conf, base, set_aside=[10])
    with pytest.raises(ValueError):
        stats.paired_log_ratio(conf[:3], base[:3], set_aside=[0, 1])
