"""Statistics on synthetic data whose true values are known."""

import math

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from cryptoperf import stats


def encoded(values_counts):
    h = HdrHistogram(1, 3_600_000_000_000, 3)
    for v, c in values_counts:
        h.record_value(v, c)
    return h.encode().decode()


def test_latency_percentiles_mean_and_stddev_alongside():
    # 90 % at 100 µs, 9 % at 300 µs, 1 % at 1.6 ms: a long tail (reference study 4)
    lat = stats.latency_from_histogram(encoded([(100_000, 9000), (300_000, 900), (1_600_000, 100)]))
    assert lat.count == 10000
    assert lat.p50_ns == pytest.approx(100_000, rel=1e-3)
    assert lat.p99_ns == pytest.approx(300_000, rel=1e-3)
    assert lat.p999_ns == pytest.approx(1_600_000, rel=1e-3)
    assert lat.max_ns == pytest.approx(1_600_000, rel=1e-3)
    assert lat.mean_ns == pytest.approx(0.9 * 100_000 + 0.09 * 300_000 + 0.01 * 1_600_000, rel=1e-3)
    assert lat.mean_ns > lat.p50_ns and lat.stddev_ns > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_latency_is_identical_to_hdrh_own_figures(seed):
    """latency_of reads only the recorded buckets (fast); its figures must be hdrh's, exactly,
    so stored runs give the same numbers as before."""
    rng = np.random.default_rng(seed)
    values = rng.lognormal(np.log(20_000), 1.2, 3000).astype(int) + 1
    parts = [encoded([(int(v), int(c)) for v, c in zip(values[i::3], rng.integers(1, 50, 1000))])
             for i in range(3)]
    h = stats.merge_histograms(parts)
    lat = stats.latency_of(h)
    assert lat.count == h.get_total_count()
    assert (lat.p50_ns, lat.p90_ns, lat.p99_ns, lat.p999_ns) == tuple(
        h.get_value_at_percentile(p) for p in stats.PERCENTILES)
    assert lat.mean_ns == h.get_mean_value() and lat.stddev_ns == h.get_stddev()
    assert (lat.min_ns, lat.max_ns) == (h.get_min_value(), h.get_max_value())
    values_ns, fraction = stats.cdf(h)
    ref = [(it.value_iterated_to, it.total_count_to_this_value) for it in h.get_recorded_iterator()]
    assert list(values_ns) == [v for v, _ in ref]
    assert fraction[-1] == 1.0 and list(fraction) == [c / h.get_total_count() for _, c in ref]


def test_merge_histograms_adds_counts():
    h = stats.merge_histograms([encoded([(1000, 3)]), encoded([(2000, 1)])])
    assert h.get_total_count() == 4 and stats.latency_of(h).p50_ns == pytest.approx(1000, rel=1e-3)
    with pytest.raises(ValueError):
        stats.merge_histograms([])


def test_bad_histogram_raises_value_error():
    with pytest.raises(ValueError):
        stats.latency_from_histogram("not a histogram")
    with pytest.raises(ValueError, match="empty"):
        stats.latency_from_histogram(encoded([]))


def test_throughput_derivation():
    tp = stats.throughput({"ops": 2000, "wall_ns": 500_000_000, "cpu_ns_total": 400_000_000,
                           "bytes_per_op": 4096, "steal_ticks": 2, "total_ticks": 200, "busy_ticks": 110})
    assert tp.ops_per_s == 4000
    assert tp.bytes_per_s == 4000 * 4096
    assert tp.cpu_ns_per_op == 200_000
    assert tp.steal_pct == 1.0 and tp.busy_pct == 55.0
    unsized = stats.throughput({"ops": 10, "wall_ns": 10, "cpu_ns_total": 10, "bytes_per_op": 0})
    assert unsized.bytes_per_s is None and unsized.steal_pct is None
    with pytest.raises(ValueError):
        stats.throughput({"ops": 0, "wall_ns": 10})


def test_cv():
    assert stats.cv([1.0]) == 0.0
    assert stats.cv([2.0, 2.0, 2.0]) == 0.0
    assert stats.cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


def test_bootstrap_is_reproducible_with_a_seeded_generator():
    sample = [1.0, 2.0, 3.0, 4.0, 10.0]
    a = stats.bootstrap(sample, stats.median, 1000, np.random.default_rng(7))
    b = stats.bootstrap(sample, stats.median, 1000, np.random.default_rng(7))
    c = stats.bootstrap(sample, stats.median, 1000, np.random.default_rng(8))
    assert a.shape == (1000,)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert set(np.unique(a)) <= set(sample)
    with pytest.raises(ValueError):
        stats.bootstrap([], stats.median, 10, np.random.default_rng(1))


def test_ratio_exactly_two_with_rep_to_rep_drift():
    # the same drift hits both configurations (interleaving): B is exactly 2x A in every rep
    drift = np.array([1.0, 1.04, 0.97, 1.02, 0.99])
    a, b = 1000 * drift, 2000 * drift
    est = stats.ratio_of_medians(b, a, 10000, np.random.default_rng(1))
    assert est.ratio == pytest.approx(2.0)
    assert est.contains(2.0) and not est.contains(1.0)
    assert est.delta_pct == pytest.approx(100.0)


def test_equal_samples_give_no_significant_difference():
    drift = np.array([1.0, 1.04, 0.97, 1.02, 0.99])
    est = stats.ratio_of_medians(1000 * drift, 1000 * drift, 10000, np.random.default_rng(1))
    assert est.contains(1.0)
    v = stats.classify(est, noise=stats.cv(drift))
    assert v.kind == stats.NO_DIFFERENCE and v.text == "no significant difference"


def test_ci_coverage_on_lognormal_data_with_known_ratio():
    """95 % CIs of a known ratio (1.2) should cover it most of the time (percentile bootstrap
    of a median with 20 reps under-covers a little; we accept 85–100 %), and exclude 1."""
    rng = np.random.default_rng(123)
    covered = excluded_one = 0
    trials = 200
    for i in range(trials):
        base = rng.lognormal(mean=np.log(1000), sigma=0.05, size=20)
        conf = rng.lognormal(mean=np.log(1200), sigma=0.05, size=20)
        est = stats.ratio_of_medians(conf, base, 2000, np.random.default_rng(i))
        covered += est.contains(1.2)
        excluded_one += not est.contains(1.0)
    assert 0.85 * trials <= covered <= trials
    assert excluded_one == trials


def test_ratio_rejects_bad_input():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError):
        stats.ratio_of_medians([], [1.0], 10, rng)
    with pytest.raises(ValueError):
        stats.ratio_of_medians([0.0, 1.0], [1.0], 10, rng)


def test_classify_latency_and_throughput_directions():
    slower = stats.RatioEstimate(1.2, 1.15, 1.25, 0.95)
    assert stats.classify(slower, 0.01).text == "20.0 % slower"
    faster = stats.RatioEstimate(0.8, 0.75, 0.85, 0.95)
    assert stats.classify(faster, 0.01).text == "20.0 % faster"
    # throughput: a ratio below 1 is slower
    assert stats.classify(faster, 0.01, higher_is_slower=False).kind == "slower"
    assert stats.classify(slower, 0.01, higher_is_slower=False).kind == "faster"


def test_classify_too_noisy():
    small = stats.RatioEstimate(1.05, 1.01, 1.09, 0.95)
    v = stats.classify(small, noise=0.2, noise_threshold=0.1)
    assert v.kind == stats.TOO_NOISY
    # a change far bigger than the noise is still reported
    big = stats.RatioEstimate(2.0, 1.8, 2.2, 0.95)
    assert stats.classify(big, noise=0.2, noise_threshold=0.1).kind == "slower"
    # quiet data: the CI decides
    assert stats.classify(small, noise=0.02, noise_threshold=0.1).kind == "slower"
