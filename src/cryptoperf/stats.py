"""Statistics: pure functions on numbers.

Nothing here knows about studies, cells or workers (that is ``analysis.py``); functions take
numbers, arrays or a worker result's counters and return numbers. Intervals are Student t
intervals on the log scale (scipy's t quantiles), verdicts are decided from them against an
equivalence margin, and multiplicity is a Bonferroni adjustment of their level; nothing here is
random, so every interval reproduces from the stored values.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from scipy import special as scipy_special
from scipy import stats as scipy_stats
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
        cpu_ns_per_op=(result.cpu_ns_total or 0) / ops,
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


# --------------------------------------------------------------------------- intervals
#
# Every interval cryptoperf prints is a Student t interval on the log scale: repetition values
# (latency, ops/s, CPU time) are positive and their noise is multiplicative, so logs make a
# ratio a difference and its spread symmetric. Paired when both sides ran in the same blocks
# (one log ratio per block: drift shared by a block cancels), Welch's unequal-variance t when
# they did not (two stored runs). The coverage, false-verdict rate and power of these rules
# are measured by simulation through these very functions (``cryptoperf.simulate``;
# docs/methodology.md, "Statistics").

DEFAULT_LEVEL = 0.95
DEFAULT_MARGIN_PCT = 2.0
#: Fewest paired blocks (or repetitions per side) an interval is computed from.
MIN_BLOCKS = 3

PAIRED_T = "paired t on log ratios"
WELCH_T = "Welch t on log values"
RUNS_T = "t on run means"
RUN_SD_T = "Welch t with an assumed run-to-run sd"
JOBS_T = "t on job means"
JOB_SD_T = "t with an assumed between-job sd"


@dataclass(frozen=True)
class Interval:
    """A ratio (configuration ÷ baseline) with its confidence interval, estimated on the log
    scale.

    Attributes:
        ratio: exp(mean log ratio): for paired blocks the geometric mean of the per-block
            ratios; for two unpaired samples the ratio of their geometric means.
        low, high: the interval's bounds, as ratios.
        level: the confidence level the interval has, after any multiplicity adjustment
            (e.g. 0.9979 for 24 comparisons at 95 % family-wise).
        n: paired blocks (paired) or the smaller side's repetitions (Welch).
        se_log: standard error of the mean log ratio; df: degrees of freedom of the t quantile.
        method: ``PAIRED_T``, ``WELCH_T``, or one of the intervals across runs
            (``across_runs``): ``RUNS_T`` (runs as the unit), ``JOBS_T`` (jobs as the unit),
            ``RUN_SD_T`` / ``JOB_SD_T`` (one run / one job per side, its sd assumed).
        resolution_log: the least half-width of the interval on the log scale: what the values'
            resolution leaves unknown (``histogram_resolution``: a p50 read from a histogram
            is known to one bucket), so that values rounded alike in every block cannot give a
            zero-width interval; 0 when the values are not rounded.
        set_aside: positions (0-based, into the arrays the interval was computed from) of the
            paired values left out as outliers (``outliers.outlier_blocks``); ``n`` counts the others.
    """

    ratio: float
    low: float
    high: float
    level: float
    n: int
    se_log: float
    df: float
    method: str
    resolution_log: float = 0.0
    set_aside: tuple[int, ...] = ()

    @property
    def delta_pct(self) -> float:
        """(ratio − 1) × 100."""
        return (self.ratio - 1.0) * 100.0

    @property
    def low_pct(self) -> float:
        """The lower bound as a change in %."""
        return (self.low - 1.0) * 100.0

    @property
    def high_pct(self) -> float:
        """The upper bound as a change in %."""
        return (self.high - 1.0) * 100.0

    def contains(self, value: float) -> bool:
        """True if ``low <= value <= high`` (``value`` a ratio)."""
        return self.low <= value <= self.high

    def at_level(self, level: float) -> "Interval":
        """The same estimate with its interval at another confidence ``level``."""
        return _interval(math.log(self.ratio), self.se_log, self.df, level, self.n, self.method,
                         self.resolution_log, self.set_aside)

    def as_dict(self) -> dict[str, Any]:
        """``ratio``, ``ci_low``, ``ci_high``, ``level``, ``delta_pct``, ``ci_low_pct``,
        ``ci_high_pct``, ``n``, ``se_log``, ``df``, ``method``, ``set_aside`` (how many paired
        values were left out as outliers; numbers only: the reports word them,
        ``report/text.py``)."""
        return {"ratio": self.ratio, "ci_low": self.low, "ci_high": self.high, "level": self.level,
                "delta_pct": self.delta_pct, "ci_low_pct": self.low_pct, "ci_high_pct": self.high_pct,
                "n": self.n, "se_log": self.se_log, "df": self.df, "method": self.method,
                "set_aside": len(self.set_aside)}


@functools.lru_cache(maxsize=65536)
def t_quantile(level: float, df: float) -> float:
    """The two-sided Student t quantile for ``level`` (e.g. 2.262 for 0.95 and df 9)."""
    return float(scipy_stats.t.ppf(0.5 + level / 2.0, df))


def _interval(mean_log: float, se_log: float, df: float, level: float, n: int, method: str,
              resolution_log: float = 0.0, set_aside: tuple[int, ...] = ()) -> Interval:
    half = max(t_quantile(level, df) * se_log if se_log > 0 else 0.0, resolution_log)
    return Interval(ratio=math.exp(mean_log), low=math.exp(mean_log - half), high=math.exp(mean_log + half),
                    level=level, n=n, se_log=se_log, df=df, method=method, resolution_log=resolution_log,
                    set_aside=set_aside)


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


def _positive_logs(name: str, values: Sequence[float]) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.all(np.isfinite(a)) or (a <= 0).any():
        raise ValueError(f"{name} needs finite positive values")
    return np.log(a)


def paired_log_ratio(sample: Sequence[float], baseline: Sequence[float],
                     level: float = DEFAULT_LEVEL, resolution: float = 0.0,
                     set_aside: Sequence[int] = ()) -> Interval:
    """Ratio of ``sample`` to ``baseline`` from paired values (``sample[i]`` and
    ``baseline[i]`` measured in the same block), with a t interval on the per-block log ratios,
    never narrower than ``resolution`` (a fraction: how far rounded values may sit from the
    truth on either side, e.g. ``histogram_resolution`` of both sides added). The pairs at
    positions ``set_aside`` (0-based; e.g. ``outliers.outlier_blocks``' answer) are left out: the
    estimate, its spread and its degrees of freedom are those of the others, and the interval
    records them (``Interval.set_aside``).

    Both shape (n,), positive, with at least 2 pairs left. Raises ValueError otherwise (also for
    a position outside 0..n−1).
    """
    a, b = _positive_logs("sample", sample), _positive_logs("baseline", baseline)
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length ({a.size} vs {b.size})")
    out = tuple(sorted({int(i) for i in set_aside}))
    if out and (out[0] < 0 or out[-1] >= a.size):
        raise ValueError(f"set-aside positions {list(out)} outside 0..{a.size - 1}")
    d = np.delete(a - b, list(out))
    if d.size < 2:
        raise ValueError("an interval needs at least 2 paired values")
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    return _interval(float(d.mean()), se, d.size - 1, level, int(d.size), PAIRED_T, math.log1p(resolution), out)


def welch_log_ratio(sample: Sequence[float], baseline: Sequence[float],
                    level: float = DEFAULT_LEVEL) -> Interval:
    """Ratio of the geometric means of two unpaired samples (``sample`` ÷ ``baseline``) with
    Welch's t interval on their logs (unequal variances, Welch–Satterthwaite df).

    Each side shape (n,), n >= 2, positive. Raises ValueError otherwise.
    """
    a, b = _positive_logs("sample", sample), _positive_logs("baseline", baseline)
    if a.size < 2 or b.size < 2:
        raise ValueError("an interval needs at least 2 values on each side")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se > 0:
        df = (va + vb) ** 2 / ((va ** 2 / (a.size - 1) if va else 0.0) + (vb ** 2 / (b.size - 1) if vb else 0.0))
    else:
        df = float(a.size + b.size - 2)
    return _interval(float(a.mean() - b.mean()), se, df, level, int(min(a.size, b.size)), WELCH_T)


@dataclass(frozen=True)
class Estimate:
    """A positive quantity (e.g. CPU ns per operation) estimated from repetitions.

    Attributes:
        value: the estimate (geometric mean for ``log_mean``, mean for ``mean_interval``).
        low, high: its ``level`` t interval (None with fewer than 2 values).
        level: confidence level; n: values used.
    """

    value: float
    low: float | None
    high: float | None
    level: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        """``value``, ``ci_low``, ``ci_high``, ``level``, ``n``."""
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high, "level": self.level,
                "n": self.n}


def log_mean(values: Sequence[float], level: float = DEFAULT_LEVEL, min_n: int = 2) -> Estimate:
    """Geometric mean of positive ``values`` (shape (n,), n >= 1) with the t interval of the
    mean of their logs (``mean_interval`` on the log scale); None bounds with fewer than
    ``min_n`` values (2 at least: one value has no spread). One value is its own mean, exactly.
    Raises ValueError for no or non-positive values."""
    a = _positive_logs("values", values)
    if a.size == 0:
        raise ValueError("no values")
    if a.size == 1:
        return Estimate(float(np.asarray(values, dtype=float)[0]), None, None, level, 1)
    e = mean_interval(a, level)
    if a.size < min_n:
        return Estimate(math.exp(e.value), None, None, level, e.n)
    return Estimate(math.exp(e.value), math.exp(e.low), math.exp(e.high), level, e.n)  # type: ignore[arg-type]


def mean_interval(values: Sequence[float], level: float = DEFAULT_LEVEL) -> Estimate:
    """Mean of ``values`` (shape (n,), n >= 1, any sign: e.g. paired differences) with a t
    interval (None bounds when n = 1). Raises ValueError for no values."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        raise ValueError("no values")
    m = float(a.mean())
    if a.size < 2:
        return Estimate(m, None, None, level, 1)
    half = t_quantile(level, a.size - 1) * float(a.std(ddof=1)) / math.sqrt(a.size)
    return Estimate(m, m - half, m + half, level, int(a.size))


# --------------------------------------------------------------------------- multiplicity


BONFERRONI = "Bonferroni"


def adjusted_level(level: float, comparisons: int, looks: int = 1) -> float:
    """The confidence level each of ``comparisons`` intervals needs so that all of them, at
    every one of ``looks`` sequential looks, hold together with probability >= ``level``
    (Bonferroni: 1 − (1 − level) / (comparisons × looks)). Raises ValueError for a count < 1."""
    if comparisons < 1 or looks < 1:
        raise ValueError("comparisons and looks must be >= 1")
    return 1.0 - (1.0 - level) / (comparisons * looks)


# --------------------------------------------------------------------------- power

#: The power at which a design's smallest detectable effect is stated.
DEFAULT_POWER = 0.80


def power(change: float, blocks: int, cv: float, comparisons: int = 1, looks: int = 1,
          level: float = DEFAULT_LEVEL) -> float:
    """The probability that a paired comparison over ``blocks`` blocks calls a true ``change``
    (a fraction: 0.05 for 5 % slower) "slower": that the lower end of its interval (at
    ``adjusted_level(level, comparisons, looks)``) lies above no change. The model is the one
    the intervals assume: each repetition lognormal with coefficient of variation ``cv``, the
    block's shared drift cancelling in the pair, so a block's log ratio has standard deviation
    √2·σ (σ² = log(1 + cv²)) and the t statistic is noncentral t with ``blocks`` − 1 degrees of
    freedom. Raises ValueError for blocks < 2 or cv <= 0."""
    if blocks < 2 or cv <= 0:
        raise ValueError("power needs at least 2 blocks and a positive cv")
    sigma_d = math.sqrt(2.0 * math.log1p(cv * cv))
    nc = math.log1p(change) * math.sqrt(blocks) / sigma_d
    q = t_quantile(adjusted_level(level, comparisons, looks), blocks - 1)
    return float(scipy_stats.nct.sf(q, blocks - 1, nc))


def smallest_effect(blocks: int, cv: float, comparisons: int = 1, looks: int = 1,
                    level: float = DEFAULT_LEVEL, target: float = DEFAULT_POWER) -> float:
    """The smallest true change (a fraction) that a design of ``blocks`` paired blocks calls
    "slower" with probability ``target`` (``power``), at noise ``cv`` per repetition and with
    ``comparisons`` × ``looks`` intervals adjusted together. Raises ValueError as ``power``."""
    from scipy.optimize import brentq
    if power(10.0, blocks, cv, comparisons, looks, level) < target:
        return math.inf
    return float(brentq(lambda x: power(x, blocks, cv, comparisons, looks, level) - target, 0.0, 10.0,
                        xtol=1e-6))


# --------------------------------------------------------------------------- verdicts

SLOWER, FASTER, EQUIVALENT, INCONCLUSIVE = "slower", "faster", "equivalent", "inconclusive"
VERDICT_KINDS = (SLOWER, FASTER, EQUIVALENT, INCONCLUSIVE)
#: Upper limit of the "blocks that would decide it" projection (``blocks_to_decide``).
MAX_PROJECTED_BLOCKS = 10_000


@dataclass(frozen=True)
class Verdict:
    """What a comparison says.

    Attributes:
        kind: ``slower``, ``faster``, ``equivalent`` or ``inconclusive``.
        text: for people, what changed in its own direction, e.g. ``23.0 % fewer handshakes/s
            [19.1, 27.0]``, ``p50 latency 4.0 % higher [3.0, 5.1]`` or ``equivalent within ±2 %``.
        delta_pct: the change in the measured quantity, (ratio − 1) × 100.
        margin_pct: the equivalence margin m (± m %).
        within_margin: the whole interval lies inside ± m %.
        blocks_needed: for ``inconclusive``, the paired blocks (in all) that would likely
            decide it, None when more than ``MAX_PROJECTED_BLOCKS`` or not projectable.
        metric: what the verdict is about (``METRICS``' values, e.g. ``p50 latency``).
    """

    kind: str
    text: str
    delta_pct: float
    margin_pct: float
    within_margin: bool
    blocks_needed: int | None = None
    metric: str = "p50 latency"

    def as_dict(self) -> dict[str, Any]:
        """``kind``, ``text``, ``delta_pct``, ``margin_pct``, ``within_margin``,
        ``blocks_needed``, ``metric``."""
        return dict(self.__dict__)


#: What a study's verdicts may be decided on (``verdict_on``): key → (name for people,
#: whether a higher value is slower).
METRICS: dict[str, tuple[str, bool]] = {
    "latency": ("p50 latency", True),
    "throughput": ("throughput", False),
    "cpu_per_op": ("CPU time per operation", True),
}


def metric_key(name: str) -> str:
    """The ``METRICS`` key of a metric's name for people (``throughput`` → ``throughput``,
    ``p50 latency`` → ``latency``); ``latency`` for a name it does not know."""
    return next((k for k, (n, _) in METRICS.items() if n == name), "latency")


@dataclass(frozen=True)
class Transaction:
    """What one operation of a comparison is, so that a verdict names what changed: a primitive's
    ``operation`` (its rate ``ops/s``), a workload's transaction as its worker names it
    (``handshake``, rate ``handshakes/s``; a job's ``target``, rate ``targets/min``).

    Attributes:
        one: one of them (``handshake``); rate: their rate as a unit (``handshakes/s``).
    """

    one: str = "operation"
    rate: str = "ops/s"

    @classmethod
    def named(cls, one: str, many: str, per: str = "s") -> "Transaction":
        """``one``/``many`` per ``per`` (``s``, ``min``): ``handshakes/s``, ``I/Os per s``."""
        return cls(one, f"{many} per {per}" if "/" in many else f"{many}/{per}")


#: A primitive operation (``ops/s``, ``CPU per operation``).
OPERATION = Transaction()

#: ``verdict_on`` value deciding each workload level on what it measures: throughput for a
#: closed loop (its latency is concurrency ÷ throughput, and scheduler-dominated once the
#: connections outnumber the CPUs) and for a job (``targets:N``: targets per unit of time, the
#: figure a fleet job is judged by; its per-target time is a latency under the job's own
#: concurrency), CPU time per operation for an open loop offered as a byte rate
#: (``open:100MB/s``: the throughput is fixed, and what it costs to sustain is the question),
#: p50 latency for any other open loop (its throughput is the offered rate) and for primitive
#: operations.
BY_LOAD = "by_load"
_BYTE_RATE = re.compile(r"^open:[\d.]+\s*[KMG]i?B/s", re.IGNORECASE)


def metric_for(verdict_on: str, load: str | None) -> str:
    """The ``METRICS`` key a comparison is decided on: ``verdict_on`` itself, or for
    ``BY_LOAD`` ``throughput`` when ``load`` is a closed loop (``closed:…``) or a job
    (``targets:…``), ``cpu_per_op`` when it is an open loop at a byte rate (``open:100MB/s``) and
    ``latency`` otherwise."""
    if verdict_on != BY_LOAD:
        return verdict_on
    if load is not None and load.startswith(("closed", "targets")):
        return "throughput"
    return "cpu_per_op" if load is not None and _BYTE_RATE.match(load) else "latency"


#: An increase at or beyond this factor reads as a factor, "13.5× higher", rather than as a
#: percentage ("1250 % higher"). A decrease always reads as a percentage (at most 100 %), so that
#: the same kind of change is in one scale: "47.6 % fewer" beside "51.0 % fewer", never beside
#: "2.0× …".
RATIO_FORM_AT = 2.0


def factor_form(ratio: float) -> bool:
    """True when a change of ``ratio`` (configuration ÷ baseline) reads as a factor: an
    increase of ``RATIO_FORM_AT`` or more."""
    return ratio >= RATIO_FORM_AT


def factor_text(x: float) -> str:
    """A factor as text: 2 decimals below 1, 1 up to 100, none above (0.25, 13.5, 150)."""
    return f"{x:.2f}" if x < 1 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _pct(x: float) -> str:
    return f"{x:+.1f}".replace("+0.0", "0.0").replace("-0.0", "0.0")


def change_words(metric: str, up: bool, amount: str, transaction: Transaction = OPERATION) -> str:
    """A change of ``metric`` (a ``METRICS`` key) in its own direction, ``amount`` being its size
    (``23.0 %`` or ``2.1×``): throughput ``23.0 % fewer handshakes/s`` / ``2.1× the
    handshakes/s``; CPU ``needs 31.0 % more CPU per I/O``; latency ``p50 latency 12.0 %
    higher``."""
    factor = amount.endswith("×")
    if metric == "throughput":
        return f"{amount} {'the' if factor else 'more' if up else 'fewer'} {transaction.rate}"
    if metric == "cpu_per_op":
        return f"needs {amount} {'the' if factor else 'more' if up else 'less'} CPU per {transaction.one}"
    return f"{METRICS.get(metric, METRICS['latency'])[0]} {amount} {'higher' if up else 'lower'}"


def _change_sentence(ci: "Interval", metric: str, transaction: Transaction) -> str:
    """``23.0 % fewer handshakes/s [19.1, 27.0]``: the change with its interval, both in the
    change's own direction and scale (``factor_form``)."""
    up = ci.ratio > 1.0
    if factor_form(ci.ratio):
        amount, lo, hi = f"{factor_text(ci.ratio)}×", factor_text(ci.low), factor_text(ci.high)
    else:
        amount = f"{abs(ci.delta_pct):.1f} %"
        lo, hi = (f"{x:.1f}" for x in sorted((abs(ci.low_pct), abs(ci.high_pct))))
    return f"{change_words(metric, up, amount, transaction)} [{lo}, {hi}]"


#: Intervals widened by an assumed sd, and why an inconclusive one offers no count.
ASSUMED_SD = {RUN_SD_T: "the run-to-run variation was assumed, not measured: several runs per side would measure it",
              JOB_SD_T: "the between-job variation was assumed, not measured: runs from 3 jobs or more would measure it"}
#: The probability with which the "about N blocks would decide it" hint expects N to decide.
HINT_PROBABILITY = 0.8


def _normal_mass(mean: float, sd: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """P(low <= X <= high) for X ~ Normal(mean, sd²), elementwise (sd 0: a point mass at
    ``mean``; 0 where high < low)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.sqrt(2.0) * sd
        mass = 0.5 * (scipy_special.erf((high - mean) / z) - scipy_special.erf((low - mean) / z))
    point = ((low <= mean) & (mean <= high)).astype(float)
    return np.where(high < low, 0.0, np.where(sd > 0, mass, point))


@functools.lru_cache(maxsize=1024)
def _sd_scales(df: float, points: int = 16) -> tuple[float, ...]:
    """``points`` equally likely values of σ ÷ s for a spread s with ``df`` degrees of freedom
    (σ² = df·s²/X, X ~ χ²(df), at X's quantiles (i + ½)/points): how much larger or smaller the
    true spread may be than the one seen."""
    q = (np.arange(points) + 0.5) / points
    return tuple(float(x) for x in np.sqrt(df / scipy_stats.chi2.ppf(q, df)))


def decide_probability(ci: Interval, n: int, margin_pct: float) -> float:
    """The probability that the comparison behind ``ci`` decides (its interval excludes 0 or
    fits inside ± ``margin_pct``) once it has ``n`` blocks (paired) or ``n`` repetitions or runs
    per side, ``n`` > ``ci.n``. Predictive: averaged over what the true ratio and the true spread
    may be given ``ci`` (flat prior on the log ratio; the spread's χ² uncertainty at ``ci.df``):
    for a spread σ, the final mean log ratio is Normal(log ratio, se² − se_n²) with se =
    σ/sqrt(ci.n) now and se_n = σ/sqrt(n) at ``n``. The interval at ``n`` has ``ci``'s level and
    resolution floor, and the df of ``n``."""
    return float(_decide_probabilities(ci, np.array([n]), margin_pct)[0])


def _decide_probabilities(ci: Interval, ns: np.ndarray, margin_pct: float) -> np.ndarray:
    """``decide_probability`` at every count of ``ns`` (shape (k,)) at once; shape (k,)."""
    lo = math.log1p(-margin_pct / 100.0) if margin_pct < 100 else -math.inf
    hi = math.log1p(margin_pct / 100.0)
    m = math.log(ci.ratio)
    ns = np.asarray(ns, dtype=float)
    df = ns - 1 if ci.method == PAIRED_T else 2 * ns - 2
    t = np.array([t_quantile(ci.level, d) for d in np.maximum(df, 1.0).tolist()])[:, None]  # (k, 1), cached
    k = np.array(_sd_scales(float(max(ci.df, 1.0))))[None, :]  # (1, scales)
    se_n = k * ci.se_log * np.sqrt(ci.n / ns)[:, None]
    half = np.maximum(t * se_n, ci.resolution_log)
    spread = np.sqrt(np.maximum((k * ci.se_log) ** 2 - se_n ** 2, 0.0))
    undecided = (_normal_mass(m, spread, -half, half)
                 - _normal_mass(m, spread, np.maximum(-half, lo + half), np.minimum(half, hi - half)))
    return (1.0 - undecided).mean(axis=1)


def hint_text(needed: int, unit: str = "blocks") -> str:
    """``about 24 blocks would decide it (predictive probability 80 %)``: the blocks-needed hint
    as every report words it."""
    return f"about {needed} {unit} would decide it (predictive probability {HINT_PROBABILITY * 100:.0f} %)"


def blocks_to_decide(ci: Interval, margin_pct: float, probability: float = HINT_PROBABILITY) -> int | None:
    """The fewest blocks (paired) or repetitions or runs per side (unpaired) with which the
    comparison behind ``ci`` decides with ``probability`` (``decide_probability``); None if not
    within ``MAX_PROJECTED_BLOCKS``, if the spread is 0, or for an interval widened by an
    assumed run-to-run or between-job sd (``ASSUMED_SD``: more repetitions cannot shrink what
    is assumed).

    Counts are tried one by one up to 64 past ``ci.n``, then in steps of 5 %; the simulation
    (``python -m cryptoperf.simulate``) checks how often the count given does decide.
    """
    if ci.se_log <= 0 or ci.n < 2 and ci.method not in (RUNS_T, JOBS_T) or ci.method in ASSUMED_SD:
        return None
    counts, n = [], max(ci.n + 1, MIN_BLOCKS)
    while n <= MAX_PROJECTED_BLOCKS:
        counts.append(n)
        n = n + 1 if n < ci.n + 64 else int(n * 1.05) + 1
    ns = np.array(counts)
    enough = np.nonzero(_decide_probabilities(ci, ns, margin_pct) >= probability)[0]
    return int(ns[enough[0]]) if enough.size else None


def decide(ci: Interval, margin_pct: float = DEFAULT_MARGIN_PCT, higher_is_slower: bool | None = None,
           metric: str = "p50 latency", transaction: Transaction = OPERATION) -> Verdict:
    """Decide what a ratio with its interval says, against an equivalence margin of
    ± ``margin_pct`` %. ``metric`` names what the ratio is of (a ``METRICS`` name, kept in the
    verdict); ``higher_is_slower`` defaults to that metric's direction; ``transaction`` says what
    one operation is, for the text.

    Rules: when the interval excludes 0 (ratio 1), ``slower`` or ``faster`` (which one depends on
    the metric's direction), said as what changed in its own direction with the interval of the
    change: "23.0 % fewer handshakes/s [19.1, 27.0]", "needs 31.0 % more CPU per I/O [25.2, 37.1]",
    "p50 latency 12.0 % higher [8.1, 16.0]" — an increase of 2× or more as a factor ("p50 latency
    13.5× higher [12.5, 14.6]", ``RATIO_FORM_AT``), a decrease always as a percentage — with ",
    within the ±m % margin" when the whole interval lies inside ± m %; when it includes 0 and lies
    inside ± m %: "equivalent within ±m %"; otherwise "inconclusive: [lo, hi] % spans the ±m %
    margin", with the blocks that would decide it (``blocks_to_decide``). Absence of evidence is never reported as
    "no difference".
    """
    if margin_pct < 0 or not math.isfinite(margin_pct):
        raise ValueError(f"margin must be a percentage >= 0, got {margin_pct}")
    key = metric_key(metric)
    if higher_is_slower is None:
        higher_is_slower = METRICS[key][1]
    m = margin_pct / 100.0
    delta = ci.delta_pct
    inside = ci.low >= 1.0 - m and ci.high <= 1.0 + m
    margin_text = f"±{margin_pct:g} %"
    if ci.low > 1.0 or ci.high < 1.0:
        kind = SLOWER if (ci.ratio > 1.0) == higher_is_slower else FASTER
        text = _change_sentence(ci, key, transaction)
        if inside:
            text += f", within the {margin_text} margin"
        return Verdict(kind, text, delta, margin_pct, inside, metric=metric)
    if inside:
        return Verdict(EQUIVALENT, f"equivalent within {margin_text} [{_pct(ci.low_pct)}, {_pct(ci.high_pct)}]",
                       delta, margin_pct, True, metric=metric)
    needed = blocks_to_decide(ci, margin_pct)
    unit = {PAIRED_T: "blocks", RUNS_T: "runs per side", JOBS_T: "jobs per side"}.get(ci.method, "repetitions per side")
    if ci.method in ASSUMED_SD:
        more = ASSUMED_SD[ci.method]
    elif needed is None:
        more = f"more than {MAX_PROJECTED_BLOCKS} {unit} would be needed to decide it"
    else:
        more = hint_text(needed, unit)
    return Verdict(INCONCLUSIVE, f"inconclusive: [{_pct(ci.low_pct)}, {_pct(ci.high_pct)}] % spans the "
                   f"{margin_text} margin; {more}", delta, margin_pct, False, needed, metric=metric)
