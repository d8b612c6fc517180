"""stats.latency_from_histogram computes percentiles, mean and stddev over the recorded buckets
only; the figures must be exactly those of hdrh's own (slow) methods."""

import random

import pytest
from hdrh.histogram import HdrHistogram

from cryptoperf import stats

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests


def reference(encoded):
    d = HdrHistogram.decode(encoded)
    return (d.get_total_count(), d.get_min_value(),
            *(int(d.get_value_at_percentile(p)) for p in stats.PERCENTILES),
            d.get_max_value(), float(d.get_mean_value()), float(d.get_stddev()))


@pytest.mark.parametrize("seed", range(8))
def test_identical_to_hdrh(seed):
    rnd = random.Random(seed)
    h = HdrHistogram(1, 3_600_000_000_000, 3)
    for _ in range(rnd.choice([1, 3, 40, 300])):
        v = int(rnd.lognormvariate(rnd.uniform(3, 17), rnd.uniform(0.01, 2)))
        h.record_value(max(1, min(v, 3_000_000_000_000)), rnd.randint(1, 1000))
    enc = h.encode()
    lat = stats.latency_from_histogram(enc)
    assert (lat.count, lat.min_ns, lat.p50_ns, lat.p90_ns, lat.p99_ns, lat.p999_ns, lat.max_ns,
            lat.mean_ns, lat.stddev_ns) == reference(enc)


def test_long_tail_mean_far_from_median():
    # a published server measurement: median ~103 µs, a long tail pulls the mean up (docs/methodology.md)
    h = HdrHistogram(1, 3_600_000_000_000, 3)
    h.record_value(103_000, 800)
    h.record_value(300_000, 150)
    h.record_value(1_600_000, 50)
    lat = stats.latency_from_histogram(h.encode())
    assert lat.p50_ns == pytest.approx(103_000, rel=1e-3) and lat.p99_ns == pytest.approx(1_600_000, rel=1e-3)
    assert lat.mean_ns == pytest.approx((800 * 103_000 + 150 * 300_000 + 50 * 1_600_000) / 1000, rel=1e-3)
