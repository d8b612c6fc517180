"""Outlier blocks: the screen that sets a disturbed block aside from a paired comparison.

A repetition the host disturbed without the steal and load checks seeing it (a neighbour in
the caches, an interrupt storm, a bimodal operation) can be several times slower than its
block's other repetitions. On a mean of ~10 log ratios one such block moves the estimate by a
tenth of its size and inflates the spread, so a true +5 % becomes "inconclusive". The screen
below finds such blocks with a test whose false alarms on clean (normal) log ratios are a
small, known share of the interval's own error rate, so that setting them aside does not make
the interval of clean data too narrow (docs/methodology.md, "Outlier blocks").
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

#: Fewest values the outlier screen looks at: below it, nothing is set aside.
OUTLIER_MIN_BLOCKS = 5
#: The largest share of the values the screen may set aside (rounded down: 1 of 5–9, 2 of 10–14).
OUTLIER_MAX_SHARE = 0.2
#: The screen's false-alarm rate on clean data, as a share of the interval's error rate
#: (1 − level): 1/20, so 0.25 % for a 95 % interval, 0.01 % for one at 99.79 %.
OUTLIER_ALPHA_SHARE = 0.05
#: A value is never set aside when it lies within this many per cent of the median (on the log
#: scale): values rounded alike (histogram buckets) or near-identical have almost no spread, and
#: a difference of a few rounding steps is not a disturbance.
OUTLIER_FLOOR_PCT = 2.0


def outlier_alpha(level: float) -> float:
    """The screen's false-alarm rate for an interval at ``level`` (``OUTLIER_ALPHA_SHARE`` ×
    (1 − level)): the chance that ``outlier_blocks`` sets anything aside from clean normal
    values."""
    return OUTLIER_ALPHA_SHARE * (1.0 - level)


@functools.lru_cache(maxsize=4096)
def _esd_critical(alpha: float, m: int) -> float:
    """Rosner's critical value λ for the most extreme of ``m`` values at ``alpha``."""
    t = float(scipy_stats.t.ppf(1.0 - alpha / (2.0 * m), m - 2))
    return (m - 1) * t / math.sqrt((m - 2 + t * t) * m)


def outlier_blocks(log_values: Sequence[float], alpha: float, floor_log: float = math.log1p(OUTLIER_FLOOR_PCT / 100),
                   min_n: int = OUTLIER_MIN_BLOCKS, max_share: float = OUTLIER_MAX_SHARE) -> tuple[int, ...]:
    """Positions (0-based, ascending) of the outliers among ``log_values`` (shape (n,), finite:
    e.g. per-block log ratios), by Rosner's generalized ESD many-outlier procedure: for i = 1 …
    r (r = ⌊max_share × n⌋), take out the value furthest from the mean of those left, with
    R_i = its distance / their sample standard deviation; the outliers are the first k taken
    out, k the largest i with R_i > λ_i, λ_i the procedure's critical value at ``alpha`` from the
    t distribution (B. Rosner, "Percentage points for a generalized ESD many-outlier procedure",
    Technometrics 25(2), 1983, pp. 165–172; NIST/SEMATECH e-Handbook of Statistical Methods,
    1.3.5.17.3). On normal values it sets anything aside with probability about ``alpha``;
    unlike a median ± k·MAD rule, whose false alarms at n = 5…10 run to 10–25 %, its critical
    values account for how little a handful of values says about their spread. Of those, only
    values further than ``floor_log`` from the median are set aside (values rounded alike have no
    spread at all). Nothing is set aside for n < ``min_n`` (at least 3).

    Raises ValueError for a non-finite value, an ``alpha`` outside (0, 1) or ``min_n`` < 3.
    """
    x = np.asarray(log_values, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("outlier_blocks needs a one-dimensional array of finite values")
    if not 0.0 < alpha < 1.0 or min_n < 3:
        raise ValueError(f"outlier_blocks needs 0 < alpha < 1 and min_n >= 3 (got {alpha}, {min_n})")
    n = int(x.size)
    r = int(math.floor(max_share * n + 1e-9))
    if n < min_n or r < 1:
        return ()
    median = float(np.median(x))
    left, taken, found = list(range(n)), [], 0
    for i in range(1, min(r, n - 2) + 1):
        sub = x[left]
        dev = np.abs(sub - sub.mean())
        j = int(np.argmax(dev))
        sd = float(sub.std(ddof=1))
        critical = _esd_critical(alpha, n - i + 1)
        if (dev[j] / sd if sd > 0 else math.inf) > critical and abs(sub[j] - median) > floor_log:
            found = i
        taken.append(left.pop(j))
    return tuple(sorted(p for p in taken[:found] if abs(x[p] - median) > floor_log))
