"""Intervals, multiplicity and power: Student t intervals on the log scale.

Every interval cryptoperf prints is a Student t interval on the log scale: repetition values
(latency, ops/s, CPU time) are positive and their noise is multiplicative, so logs make a
ratio a difference and its spread symmetric. Paired when both sides ran in the same blocks
(one log ratio per block: drift shared by a block cancels), Welch's unequal-variance t when
they did not (two stored runs). The coverage, false-verdict rate and power of these rules
are measured by simulation through these very functions (``cryptoperf.simulate``;
docs/methodology.md, "Statistics").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats as scipy_stats


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
        return log_interval(math.log(self.ratio), self.se_log, self.df, level, self.n, self.method,
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


def log_interval(mean_log: float, se_log: float, df: float, level: float, n: int, method: str,
                 resolution_log: float = 0.0, set_aside: tuple[int, ...] = ()) -> Interval:
    """The ``level`` Student t interval of a ratio from its log-scale mean ``mean_log``, standard
    error ``se_log`` and degrees of freedom ``df``, widened to at least ``resolution_log`` either
    side; ``n``, ``method`` and ``set_aside`` are recorded in the ``Interval``."""
    half = max(t_quantile(level, df) * se_log if se_log > 0 else 0.0, resolution_log)
    return Interval(ratio=math.exp(mean_log), low=math.exp(mean_log - half), high=math.exp(mean_log + half),
                    level=level, n=n, se_log=se_log, df=df, method=method, resolution_log=resolution_log,
                    set_aside=set_aside)


def positive_logs(name: str, values: Sequence[float]) -> np.ndarray:
    """The natural logs of ``values`` (shape (n,)). Raises ValueError naming ``name`` when the
    values are not one-dimensional, not finite or not all positive."""
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
    a, b = positive_logs("sample", sample), positive_logs("baseline", baseline)
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length ({a.size} vs {b.size})")
    out = tuple(sorted({int(i) for i in set_aside}))
    if out and (out[0] < 0 or out[-1] >= a.size):
        raise ValueError(f"set-aside positions {list(out)} outside 0..{a.size - 1}")
    d = np.delete(a - b, list(out))
    if d.size < 2:
        raise ValueError("an interval needs at least 2 paired values")
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    return log_interval(float(d.mean()), se, d.size - 1, level, int(d.size), PAIRED_T, math.log1p(resolution), out)


def welch_log_ratio(sample: Sequence[float], baseline: Sequence[float],
                    level: float = DEFAULT_LEVEL) -> Interval:
    """Ratio of the geometric means of two unpaired samples (``sample`` ÷ ``baseline``) with
    Welch's t interval on their logs (unequal variances, Welch–Satterthwaite df).

    Each side shape (n,), n >= 2, positive. Raises ValueError otherwise.
    """
    a, b = positive_logs("sample", sample), positive_logs("baseline", baseline)
    if a.size < 2 or b.size < 2:
        raise ValueError("an interval needs at least 2 values on each side")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se > 0:
        df = (va + vb) ** 2 / ((va ** 2 / (a.size - 1) if va else 0.0) + (vb ** 2 / (b.size - 1) if vb else 0.0))
    else:
        df = float(a.size + b.size - 2)
    return log_interval(float(a.mean() - b.mean()), se, df, level, int(min(a.size, b.size)), WELCH_T)


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
    a = positive_logs("values", values)
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
