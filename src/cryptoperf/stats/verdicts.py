"""Verdicts: what a ratio with its interval says against an equivalence margin.

A verdict is ``slower``, ``faster``, ``equivalent`` or ``inconclusive``, decided from the
interval alone (``decide``), with the text a person reads and, when the data cannot decide,
the blocks that likely would (``blocks_to_decide``).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special as scipy_special
from scipy import stats as scipy_stats

from cryptoperf.stats.intervals import (DEFAULT_MARGIN_PCT, JOB_SD_T, JOBS_T, MIN_BLOCKS, PAIRED_T, RUN_SD_T,
                                         RUNS_T, Interval, t_quantile)

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
    # a workload's server side: its process's CPU over the window ÷ the transactions it
    # completed in that window (workloads.side_cpu_ns_per_tx(result, "server"))
    "server_cpu_per_op": ("server CPU time per transaction", True),
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
