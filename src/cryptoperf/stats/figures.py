"""Per-run figures: latency percentiles from the worker's HdrHistograms, throughput and CPU
from its counters, and the coefficient of variation of a sample.

Pure functions on numbers and histograms; nothing here is random.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

if TYPE_CHECKING:  # pragma: no cover
    from cryptoperf.result import WorkerResult

PERCENTILES = (50.0, 90.0, 99.0, 99.9)


@dataclass(frozen=True)
class Latency:
    """Latency distribution of one run, in ns per operation.

    Percentiles come with mean and standard deviation alongside, never instead: a long tail
    moves the mean far from the median.
    """

    count: int
    min_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    p999_ns: int
    max_ns: int
    mean_ns: float
    stddev_ns: float

    def as_dict(self) -> dict[str, Any]:
        """Field name → value (names carry units)."""
        return dict(self.__dict__)


def decode_histogram(encoded: str | bytes) -> HdrHistogram:
    """Decode an HdrHistogram V2 compressed, base64 string (``HISTFAAA…``).

    Raises ValueError if it cannot be decoded.
    """
    try:
        return HdrHistogram.decode(encoded)
    except Exception as e:  # hdrh raises assorted types on bad input
        raise ValueError(f"not an HdrHistogram V2 base64 encoding: {e}") from None


def merge_histograms(encoded: Sequence[str | bytes]) -> HdrHistogram:
    """Decode and add up encoded histograms (e.g. the repetitions of one cell) into one.

    Raises ValueError for an empty sequence or an undecodable histogram.
    """
    if not encoded:
        raise ValueError("no histograms to merge")
    merged = decode_histogram(encoded[0])
    for e in encoded[1:]:
        merged.add(decode_histogram(e))
    return merged


def _recorded(h: HdrHistogram) -> tuple[list[int], list[int], list[int]]:
    """(counts indices with a count, their counts, each index's highest equivalent value), in
    ascending order — what hdrh's recorded iterator visits, found with numpy instead of a
    Python loop over every one of the ~10^5 buckets."""
    counts = np.ctypeslib.as_array(h.counts)[:h.counts_len]
    idx = np.flatnonzero(counts)
    values = [int(h.get_highest_equivalent_value(h.get_value_from_index(int(i)))) for i in idx]
    return [int(i) for i in idx], [int(c) for c in counts[idx]], values


def cdf(h: HdrHistogram) -> tuple[np.ndarray, np.ndarray]:
    """The cumulative distribution of a histogram: (values_ns, fraction), both shape (k,) for
    its k distinct recorded values (ascending; each value is its bucket's highest equivalent
    value), ``fraction[i]`` = share of recorded values <= ``values_ns[i]`` (the last is 1.0).
    Empty arrays for an empty histogram."""
    n = h.get_total_count()
    if n == 0:
        return np.empty(0), np.empty(0)
    _, counts, values = _recorded(h)
    return np.asarray(values, dtype=float), np.cumsum(np.asarray(counts, dtype=float)) / float(n)


def latency_from_histogram(encoded: str | bytes) -> Latency:
    """Percentiles p50 p90 p99 p99.9, min, max, mean and stddev (ns) of an encoded histogram.

    Raises ValueError for an undecodable or empty histogram.
    """
    return latency_of(decode_histogram(encoded))


def latency_of(h: HdrHistogram) -> Latency:
    """``Latency`` of a decoded histogram (see ``latency_from_histogram``).

    Raises ValueError for an empty histogram.
    """
    n = h.get_total_count()
    if n == 0:
        raise ValueError("empty histogram")
    # Same arithmetic as hdrh's get_value_at_percentile / get_mean_value / get_stddev (so the
    # figures are bit-identical to theirs), over the recorded buckets only.
    idx, counts, values = _recorded(h)
    cum = np.cumsum(counts)

    def at(pct: float) -> int:
        target = max(int((min(pct, 100.0) * n / 100) + 0.5), 1)
        pos = int(np.searchsorted(cum, target))
        return int(h.get_highest_equivalent_value(h.get_value_from_index(idx[min(pos, len(idx) - 1)])))

    medians = [h._hdr_median_equiv_value(v) for v in values]
    mean = float(sum(c * m for c, m in zip(counts, medians))) / n
    dev_total = 0.0
    for c, m in zip(counts, medians):
        dev = (m * 1.0) - mean
        dev_total += (dev * dev) * c
    p50, p90, p99, p999 = (at(p) for p in PERCENTILES)
    return Latency(count=int(n), min_ns=int(h.get_min_value()), p50_ns=p50, p90_ns=p90,
                   p99_ns=p99, p999_ns=p999, max_ns=int(h.get_max_value()),
                   mean_ns=mean, stddev_ns=math.sqrt(dev_total / n))


@dataclass(frozen=True)
class Throughput:
    """Per-run figures derived from a worker result's counters (docs/worker-protocol.md).

    ops_per_s = ops / (wall_ns / 1e9); bytes_per_s = ops_per_s × bytes_per_op (None for
    operations without a message); process_cpu_ns_per_op = cpu_ns_total / ops; steal_pct =
    100 × steal_ticks / total_ticks (None without ticks); busy_pct = 100 × busy/total ticks;
    device_process_cpu_ns_per_op = device_process_cpu_ns / ops (a token's daemon: its CPU over
    the same window; None without one).
    """

    ops_per_s: float
    bytes_per_s: float | None
    process_cpu_ns_per_op: float
    steal_pct: float | None
    busy_pct: float | None
    device_process_cpu_ns_per_op: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Field name → value (names carry units)."""
        return dict(self.__dict__)


def throughput(result: "WorkerResult") -> Throughput:
    """Derive ``Throughput`` from a worker result's ``ops``, ``wall_ns``, ``cpu_ns_total``,
    ``bytes_per_op``, ``steal_ticks``, ``busy_ticks``, ``total_ticks``.

    Raises ValueError if ``ops`` or ``wall_ns`` is missing or not positive.
    """
    ops, wall_ns = result.ops, result.wall_ns
    if not ops or not wall_ns or ops <= 0 or wall_ns <= 0:
        raise ValueError(f"result has no operations or no window (ops={ops}, wall_ns={wall_ns})")
    ops_per_s = ops / (wall_ns / 1e9)
    bytes_per_op = result.bytes_per_op or 0
    total = result.total_ticks or 0
    steal = result.steal_ticks
    busy = result.busy_ticks
    return Throughput(
        ops_per_s=ops_per_s,
        bytes_per_s=ops_per_s * bytes_per_op if bytes_per_op else None,
        process_cpu_ns_per_op=(result.cpu_ns_total or 0) / ops,
        steal_pct=100.0 * steal / total if total and steal is not None else None,
        busy_pct=100.0 * busy / total if total and busy is not None else None,
        device_process_cpu_ns_per_op=(result.device_process_cpu_ns / ops
                                      if result.device_process_cpu_ns is not None else None),
    )


def cv(sample: Sequence[float]) -> float:
    """Coefficient of variation (sample stddev / mean), as a fraction; 0.0 for fewer than 2
    values; inf if the mean is 0 and values differ."""
    a = np.asarray(sample, dtype=float)
    if a.size < 2:
        return 0.0
    mean = a.mean()
    sd = a.std(ddof=1)
    if mean == 0:
        return 0.0 if sd == 0 else math.inf
    return float(sd / abs(mean))


#: The histograms' resolution: the worker records latencies in HdrHistograms of 3 significant
#: digits from 1 ns (worker/src/measure: HIST_SIGFIG, HIST_MAX_NS).
HISTOGRAM_SIGFIG, HISTOGRAM_MAX_NS = 3, 3_600_000_000_000
_RESOLUTION = HdrHistogram(1, HISTOGRAM_MAX_NS, HISTOGRAM_SIGFIG)


def histogram_bucket(value_ns: float) -> tuple[int, int]:
    """(lowest, highest) value, ns, of the worker's histogram bucket ``value_ns`` falls in; a
    percentile read from the histogram is the highest. ``value_ns`` below 1 counts as 1."""
    x = max(1, int(value_ns))
    return _RESOLUTION.get_lowest_equivalent_value(x), _RESOLUTION.get_highest_equivalent_value(x)


def histogram_resolution(values_ns: Sequence[float]) -> float:
    """The largest relative width (fraction) of the histogram bucket any of ``values_ns`` (p50s
    read from the worker's histograms, ns) lies in: 1 ns in 150 ns is 0.0067; a bucket of 512 ns
    at 803,327 ns is 0.00064. 0 for no values."""
    worst = 0.0
    for v in values_ns:
        if int(v) >= 1:
            low, high = histogram_bucket(v)
            worst = max(worst, (high - low + 1) / int(v))
    return worst
