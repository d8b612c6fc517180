"""The IKE responder's crypto share (``cryptoperf.workloads.ike``): the interval of a ratio of
two independent geometric means covers the true ratio as often as it says, checked by
simulation through the module's own functions (the figures are in docs/methodology.md)."""

from __future__ import annotations

import numpy as np
import pytest

from cryptoperf import stats
from cryptoperf.workloads import ike

pytestmark = pytest.mark.parallel


def coverage(n: int, sd_num: float, sd_den: float, trials: int = 4000, seed: int = 7) -> float:
    """How often ``ike.ratio`` of two ``log_mean`` estimates from ``n`` lognormal values each
    (log-scale sd ``sd_num``, ``sd_den``; true ratio 0.4) has the true ratio inside its 95 %
    interval."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        num = stats.log_mean(list(4e6 * np.exp(rng.normal(0, sd_num, n))), 0.95)
        den = stats.log_mean(list(1e7 * np.exp(rng.normal(0, sd_den, n))), 0.95)
        r = ike.ratio(num, den, 0.95)
        hits += r.low <= 0.4 <= r.high
    return hits / trials


@pytest.mark.parametrize("n, sd_num, sd_den", [(3, 0.10, 0.10), (6, 0.10, 0.10), (6, 0.15, 0.03), (10, 0.05, 0.20)])
def test_the_share_interval_covers_the_true_ratio_at_least_as_often_as_it_says(n, sd_num, sd_den):
    c = coverage(n, sd_num, sd_den)
    # the pooled df is the smaller of the two: at or above 95 %, and not uselessly wide
    assert 0.94 <= c <= 0.995, c


def test_without_an_interval_on_either_side_the_share_has_none():
    one = stats.log_mean([2.0], 0.95)
    many = stats.log_mean([4.0, 4.4, 3.8], 0.95)
    r = ike.ratio(one, many)
    assert r.value == pytest.approx(2.0 / np.exp(np.mean(np.log([4.0, 4.4, 3.8])))) and r.low is None
