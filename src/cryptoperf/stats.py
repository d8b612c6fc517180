"""Statistics: pure functions on numbers.

Nothing here knows about studies, cells or workers (that is ``analysis.py``); functions take
numbers, arrays or a worker result's counters and return numbers. Randomness comes only from an
explicit ``numpy.random.Generator`` the caller seeds, so every confidence interval reproduces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

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
    operations without a message); cpu_ns_per_op = cpu_ns_total / ops; steal_pct =
    100 × steal_ticks / total_ticks (None without ticks); busy_pct = 100 × busy/total ticks.
    """

    ops_per_s: float
    bytes_per_s: float | None
    cpu_ns_per_op: float
    steal_pct: float | None
    busy_pct: float | None

    def as_dict(self) -> dict[str, Any]:
        """Field name → value (names carry units)."""
        return dict(self.__dict__)


def throughput(result: Mapping[str, Any]) -> Throughput:
    """Derive ``Throughput`` from a worker result with ``ops``, ``wall_ns``, ``cpu_ns_total``,
    ``bytes_per_op``, ``steal_ticks``, ``busy_ticks``, ``total_ticks``.

    Raises ValueError if ``ops`` or ``wall_ns`` is missing or not positive.
    """
    ops, wall_ns = result.get("ops"), result.get("wall_ns")
    if not ops or not wall_ns or ops <= 0 or wall_ns <= 0:
        raise ValueError(f"result has no operations or no window (ops={ops}, wall_ns={wall_ns})")
    ops_per_s = ops / (wall_ns / 1e9)
    bytes_per_op = result.get("bytes_per_op") or 0
    total = result.get("total_ticks") or 0
    steal = result.get("steal_ticks")
    busy = result.get("busy_ticks")
    return Throughput(
        ops_per_s=ops_per_s,
        bytes_per_s=ops_per_s * bytes_per_op if bytes_per_op else None,
        cpu_ns_per_op=(result.get("cpu_ns_total") or 0) / ops,
        steal_pct=100.0 * steal / total if total and steal is not None else None,
        busy_pct=100.0 * busy / total if total and busy is not None else None,
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


def median(x: np.ndarray) -> np.ndarray:
    """Median along the last axis (the statistic used for resampled repetitions)."""
    return np.median(x, axis=-1)


def bootstrap(sample: Sequence[float], statistic: Callable[[np.ndarray], np.ndarray], n: int,
              rng: np.random.Generator) -> np.ndarray:
    """``n`` bootstrap replicates of ``statistic`` over ``sample``.

    Draws an (n, len(sample)) array of resamples with replacement from ``rng`` and applies
    ``statistic``, which must reduce along the last axis (e.g. ``stats.median``); returns shape
    (n,). Raises ValueError for an empty sample or n < 1.
    """
    a = np.asarray(sample, dtype=float)
    if a.size == 0:
        raise ValueError("cannot bootstrap an empty sample")
    if n < 1:
        raise ValueError("n must be >= 1")
    idx = rng.integers(0, a.size, size=(n, a.size))
    return np.asarray(statistic(a[idx]), dtype=float)


def percentile_interval(replicates: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The ``level`` percentile-bootstrap interval of ``replicates`` (shape (n,)): their
    (1−level)/2 and (1+level)/2 percentiles, as (low, high)."""
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(np.asarray(replicates, dtype=float), [tail, 100.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio (configuration / baseline) with its percentile-bootstrap confidence interval.

    ``ratio`` is the point estimate from the full samples; ``low``/``high`` bound the
    ``level`` (e.g. 0.95) interval. ``delta_pct`` = (ratio − 1) × 100.
    """

    ratio: float
    low: float
    high: float
    level: float

    @property
    def delta_pct(self) -> float:
        """(ratio − 1) × 100."""
        return (self.ratio - 1.0) * 100.0

    @property
    def low_pct(self) -> float:
        """The CI's lower bound as a change in %."""
        return (self.low - 1.0) * 100.0

    @property
    def high_pct(self) -> float:
        """The CI's upper bound as a change in %."""
        return (self.high - 1.0) * 100.0

    def contains(self, value: float) -> bool:
        """True if ``low <= value <= high``."""
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, float]:
        """``ratio``, ``ci_low``, ``ci_high``, ``level``, ``delta_pct``."""
        return {"ratio": self.ratio, "ci_low": self.low, "ci_high": self.high,
                "level": self.level, "delta_pct": self.delta_pct}


def ratio_of_medians(sample: Sequence[float], baseline: Sequence[float], n: int,
                     rng: np.random.Generator, level: float = 0.95) -> RatioEstimate:
    """median(sample) / median(baseline) with a percentile-bootstrap CI.

    Repetitions are resampled within each side independently (``n`` replicates each) and the
    CI is the (1−level)/2 and (1+level)/2 percentiles of the replicate ratios. Values must be
    positive. Raises ValueError for an empty side or a non-positive value.
    """
    a = np.asarray(sample, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("both sides need at least one value")
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError("ratio of medians needs positive values")
    reps = bootstrap(a, median, n, rng) / bootstrap(b, median, n, rng)
    low, high = percentile_interval(reps, level)
    return RatioEstimate(ratio=float(np.median(a) / np.median(b)), low=low, high=high, level=level)


@dataclass(frozen=True)
class Verdict:
    """What a comparison says.

    Attributes:
        kind: ``slower``, ``faster``, ``no significant difference`` or ``too noisy to tell``.
        text: for people, e.g. ``12.3 % slower``.
        delta_pct: the change in the measured quantity, (ratio − 1) × 100.
    """

    kind: str
    text: str
    delta_pct: float

    def as_dict(self) -> dict[str, Any]:
        """``kind``, ``text``, ``delta_pct``."""
        return {"kind": self.kind, "text": self.text, "delta_pct": self.delta_pct}


NO_DIFFERENCE = "no significant difference"
TOO_NOISY = "too noisy to tell"


def classify(ci: RatioEstimate, noise: float, noise_threshold: float = 0.10,
             higher_is_slower: bool = True) -> Verdict:
    """Decide what a ratio with its CI says.

    Args:
        ci: configuration / baseline ratio with CI.
        noise: the larger coefficient of variation across repetitions of the two sides
            (fraction, e.g. 0.03).
        noise_threshold: CV (fraction) above which the data is called noisy.
        higher_is_slower: True for latency ratios (ratio > 1 = slower), False for throughput.

    Rules, in order: when the noise exceeds the threshold and the change is no bigger than the
    noise (|ratio − 1| <= noise) → "too noisy to tell"; when the CI contains 1 → "no
    significant difference"; otherwise "x % slower" / "x % faster", where x is the relative
    change in time per operation for latency and in operations per second for throughput.
    """
    delta = ci.delta_pct
    if noise > noise_threshold and abs(ci.ratio - 1.0) <= noise:
        return Verdict(TOO_NOISY, f"{TOO_NOISY} (CV {noise * 100:.0f} %)", delta)
    if ci.contains(1.0):
        return Verdict(NO_DIFFERENCE, NO_DIFFERENCE, delta)
    slower = (ci.ratio > 1.0) == higher_is_slower
    kind = "slower" if slower else "faster"
    return Verdict(kind, f"{abs(delta):.1f} % {kind}", delta)
