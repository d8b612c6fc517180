"""Statistics on synthetic data whose true values are known."""

import math

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from cryptoperf import stats
from cryptoperf.result import decode

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests


def encoded(values_counts):
    h = HdrHistogram(1, 3_600_000_000_000, 3)
    for v, c in values_counts:
        h.record_value(v, c)
    return h.encode().decode()


def test_latency_percentiles_mean_and_stddev_alongside():
    # 90 % at 100 µs, 9 % at 300 µs, 1 % at 1.6 ms: a long tail moves the mean far above the median
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
    tp = stats.throughput(decode({"status": "ok", "ops": 2000, "wall_ns": 500_000_000, "cpu_ns_total": 400_000_000,
                                  "bytes_per_op": 4096, "steal_ticks": 2, "total_ticks": 200, "busy_ticks": 110}))
    assert tp.ops_per_s == 4000
    assert tp.bytes_per_s == 4000 * 4096
    assert tp.process_cpu_ns_per_op == 200_000
    assert tp.steal_pct == 1.0 and tp.busy_pct == 55.0
    unsized = stats.throughput(decode({"status": "ok", "ops": 10, "wall_ns": 10, "cpu_ns_total": 10,
                                       "bytes_per_op": 0}))
    assert unsized.bytes_per_s is None and unsized.steal_pct is None
    with pytest.raises(ValueError):
        stats.throughput(decode({"status": "ok", "ops": 0, "wall_ns": 10}))


def test_cv():
    assert stats.cv([1.0]) == 0.0
    assert stats.cv([2.0, 2.0, 2.0]) == 0.0
    assert stats.cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


def test_paired_log_ratio_is_the_t_interval_on_per_block_log_ratios():
    """Hand computation: log ratios d = log(a/b) per block, mean ± t(0.975, n-1) × sd / sqrt(n)."""
    b = np.array([100.0, 110.0, 95.0, 105.0, 102.0])
    a = b * np.array([1.10, 1.12, 1.08, 1.11, 1.09])
    d = np.log(a / b)
    half = 2.7764451051977987 * d.std(ddof=1) / math.sqrt(5)  # t(0.975, 4)
    ci = stats.paired_log_ratio(a, b)
    assert ci.n == 5 and ci.df == 4 and ci.method == stats.PAIRED_T and ci.level == 0.95
    assert ci.ratio == pytest.approx(math.exp(d.mean()))
    assert (ci.low, ci.high) == pytest.approx((math.exp(d.mean() - half), math.exp(d.mean() + half)))
    # the shared block factor (b varies by 16 % between blocks) cancels: only the ratios matter
    assert stats.paired_log_ratio(a * 3, b * 3).low == pytest.approx(ci.low)


def test_paired_needs_equal_positive_sides():
    with pytest.raises(ValueError, match="length"):
        stats.paired_log_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        stats.paired_log_ratio([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="at least 2"):
        stats.paired_log_ratio([1.0], [1.0])


def test_welch_matches_scipy_ttest_interval():
    from scipy import stats as sp
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0.1, 0.05, 6), rng.lognormal(0.0, 0.02, 9)
    ci = stats.welch_log_ratio(a, b)
    ref = sp.ttest_ind(np.log(a), np.log(b), equal_var=False).confidence_interval(0.95)
    assert (math.log(ci.low), math.log(ci.high)) == pytest.approx((ref.low, ref.high))
    assert ci.method == stats.WELCH_T and ci.n == 6


def test_log_mean_and_mean_interval():
    est = stats.log_mean([10.0, 20.0, 40.0])
    assert est.value == pytest.approx(20.0) and est.low < 20 < est.high and est.n == 3
    assert stats.log_mean([5.0]).low is None
    m = stats.mean_interval([1.0, 2.0, 3.0])
    assert m.value == 2.0 and (m.low, m.high) == pytest.approx((2 - 4.302652729911275 / math.sqrt(3),
                                                                2 + 4.302652729911275 / math.sqrt(3)))


def test_bonferroni_level():
    assert stats.adjusted_level(0.95, 1) == 0.95
    assert stats.adjusted_level(0.95, 24) == pytest.approx(1 - 0.05 / 24)
    assert stats.adjusted_level(0.95, 24, looks=3) == pytest.approx(1 - 0.05 / 72)
    with pytest.raises(ValueError):
        stats.adjusted_level(0.95, 0)


def interval(low_pct, high_pct, n=10):
    """An Interval with the given bounds (in % change), its estimate halfway on the log scale."""
    lo, hi = math.log1p(low_pct / 100), math.log1p(high_pct / 100)
    m, half = (lo + hi) / 2, (hi - lo) / 2
    se = half / stats.t_quantile(0.95, n - 1)
    return stats.Interval(math.exp(m), math.exp(lo), math.exp(hi), 0.95, n, se, n - 1, stats.PAIRED_T)


@pytest.mark.parametrize("low,high,kind,text", [
    (3.0, 5.1, "slower", "p50 latency 4.0 % higher [3.0, 5.1]"),
    (-5.1, -3.0, "faster", "p50 latency 4.1 % lower [3.0, 5.1]"),
    (0.3, 1.9, "slower", "p50 latency 1.1 % higher [0.3, 1.9], within the ±2 % margin"),
    (-0.8, 1.1, "equivalent", "equivalent within ±2 % [-0.8, +1.1]"),
    (-1.5, 3.2, "inconclusive", "inconclusive: [-1.5, +3.2] % spans the ±2 % margin"),
    (-30.0, 40.0, "inconclusive", "inconclusive: [-30.0, +40.0] % spans the ±2 % margin"),
])
def test_verdicts(low, high, kind, text):
    v = stats.decide(interval(low, high), margin_pct=2.0)
    assert v.kind == kind and v.text.startswith(text), v.text
    assert v.within_margin == (low >= -2.0 and high <= 2.0)
    if kind == "inconclusive":
        assert "would decide it (predictive probability 80 %)" in v.text or "would be needed" in v.text
    for word in ("no significant difference", "too noisy"):
        assert word not in v.text


def test_throughput_direction_flips():
    up = interval(10.0, 20.0)  # a ratio of ops/s above 1: faster
    assert stats.decide(up, higher_is_slower=False).kind == "faster"
    assert stats.decide(up, higher_is_slower=True).kind == "slower"


def test_blocks_to_decide_is_the_first_count_with_the_hint_probability():
    ci = interval(-1.5, 3.2, n=10)
    need = stats.blocks_to_decide(ci, 2.0)
    assert need is not None and need > 10
    assert stats.decide_probability(ci, need, 2.0) >= stats.HINT_PROBABILITY
    assert stats.decide_probability(ci, need - 1, 2.0) < stats.HINT_PROBABILITY or need - 1 == 10
    # more blocks never make a decision less likely here, and many make it near certain
    probs = [stats.decide_probability(ci, n, 2.0) for n in (11, 20, 40, 80, 400)]
    assert probs == sorted(probs) and probs[-1] > 0.95
    assert stats.blocks_to_decide(interval(-50.0, 60.0, n=3), 0.0) is None or \
        stats.blocks_to_decide(interval(-50.0, 60.0, n=3), 0.0) > 3


def test_decide_probability_of_a_sure_thing():
    """An interval far inside the margin with a tiny spread decides at once; a wide one around
    0 is unlikely to decide with one block more."""
    assert stats.decide_probability(interval(-0.2, 0.2, n=10), 11, 2.0) > 0.99
    assert stats.decide_probability(interval(-10.0, 10.0, n=3), 4, 2.0) < 0.5


def test_zero_spread_decides_at_once():
    ci = stats.paired_log_ratio([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert ci.low == ci.high == 2.0 and stats.decide(ci).text == "p50 latency 2.0× higher [2.0, 2.0]"
    same = stats.paired_log_ratio([1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert stats.decide(same).kind == "equivalent"


@pytest.mark.parametrize("low,high,text,change", [
    (12.5, 14.6, "p50 latency 13.5× higher [12.5, 14.6]", "13.5× [12.5, 14.6]"),
    (0.24, 0.26, "p50 latency 75.0 % lower [74.0, 76.0]", "-75.0 % [-76.0, -74.0]"),
    (1.95, 2.15, "p50 latency 2.0× higher [1.9, 2.1]", "2.0× [1.9, 2.1]"),
    (1.9, 2.1, "p50 latency 99.7 % higher [90.0, 110.0]", "+99.7 % [+90.0, +110.0]"),
    (1.4, 1.6, "p50 latency 49.7 % higher [40.0, 60.0]", "+49.7 % [+40.0, +60.0]"),
])
def test_large_increases_read_as_factors_and_decreases_as_percentages(low, high, text, change):
    """From 2× up an increase reads as a factor ("13.5× higher"), below it as a percentage; a
    decrease is always a percentage (at most 100 %), in the verdict and in the tables."""
    from cryptoperf.report import text as fmt
    lo, hi = math.log(low), math.log(high)
    se = (hi - lo) / 2 / stats.t_quantile(0.95, 9)
    ci = stats.Interval(math.exp((lo + hi) / 2), low, high, 0.95, 10, se, 9, stats.PAIRED_T)
    assert stats.decide(ci).text == text
    assert fmt.change_text(ci) == change


def ratio_interval(low, high):
    lo, hi = math.log(low), math.log(high)
    se = (hi - lo) / 2 / stats.t_quantile(0.95, 9)
    return stats.Interval(math.exp((lo + hi) / 2), low, high, 0.95, 10, se, 9, stats.PAIRED_T)


@pytest.mark.parametrize("metric, transaction, low, high, kind, text", [
    ("throughput", stats.Transaction.named("handshake", "handshakes"), 0.73, 0.81, "slower",
     "23.1 % fewer handshakes/s [19.0, 27.0]"),
    ("throughput", stats.Transaction.named("handshake", "handshakes"), 1.10, 1.30, "faster",
     "19.6 % more handshakes/s [10.0, 30.0]"),
    ("throughput", stats.OPERATION, 2.1, 2.3, "faster", "2.2× the ops/s [2.1, 2.3]"),
    ("throughput", stats.Transaction.named("target", "targets", "min"), 0.5, 0.55, "slower",
     "47.6 % fewer targets/min [45.0, 50.0]"),
    ("CPU time per operation", stats.Transaction.named("I/O", "I/Os"), 1.25, 1.37, "slower",
     "needs 30.9 % more CPU per I/O [25.0, 37.0]"),
    ("CPU time per operation", stats.OPERATION, 0.8, 0.9, "faster", "needs 15.1 % less CPU per operation [10.0, 20.0]"),
    ("p50 latency", stats.OPERATION, 1.08, 1.16, "slower", "p50 latency 11.9 % higher [8.0, 16.0]"),
])
def test_a_verdict_names_what_changed_in_its_own_direction(metric, transaction, low, high, kind, text):
    """"23 % fewer handshakes/s", "needs 31 % more CPU per I/O", "p50 latency 12 % higher": the
    verdict says which figure moved which way, never "slower" about a throughput or a CPU time."""
    v = stats.decide(ratio_interval(low, high), metric=metric, transaction=transaction)
    assert (v.kind, v.text) == (kind, text)
    assert "slower" not in v.text and "faster" not in v.text


def test_the_same_kind_of_change_reads_in_one_scale():
    """A throughput drop of 47.6 % (1.9× the time) and one of 51 % (2.04× the time) both read as
    percentages of fewer operations, never one as "47.6 %" and the other as "2.0×"."""
    a = stats.decide(ratio_interval(0.50, 0.55), metric="throughput").text
    b = stats.decide(ratio_interval(0.47, 0.51), metric="throughput").text
    assert a.startswith("47.6 % fewer ops/s") and b.startswith("51.0 % fewer ops/s"), (a, b)


def test_a_verdict_names_its_metric():
    ci = interval(3.0, 5.1)
    assert stats.decide(ci).metric == "p50 latency"
    assert stats.decide(ci, metric="CPU time per operation").as_dict()["metric"] == "CPU time per operation"


def test_an_operation_names_its_size_once():
    """A study's own label that already ends with the size is not given it twice."""
    from cryptoperf.report.text import operation
    assert operation("records 1400 B", 1400) == "records 1400 B"
    assert operation("sha256", 4096) == "sha256 4 KiB"
    assert operation("x25519-derive", None) == "x25519-derive"
