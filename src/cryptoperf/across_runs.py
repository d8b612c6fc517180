"""Comparisons across runs: what ``cryptoperf compare`` decides when the two sides share no blocks.

Two runs share no blocks, and a run as a whole shifts from the next (process layout, CPU
frequency, the host's other tenants, page placement) by an amount no number of repetitions
inside it shrinks. On CI the machine itself changes from one job to the next (another VM,
other neighbours, another hostname), by more than the runs of one job differ from each other.
So the unit of a comparison across runs is what varies as a whole:

- **one job**: when every run of a cell's comparison was made by one session (``Session``: one
  CI job, else one boot of one machine), each run is a unit and the interval is the t interval
  on the runs' log means (``runs_log_ratio``, df = runs − 2); with one run per side nothing
  measures the run-to-run sd, which is assumed (``run_sd_log_ratio``, ``DEFAULT_RUN_SD_PCT``);
- **several jobs**: each job is a unit, its value the mean of its runs' log means, and the
  interval is the t interval on the jobs' values (``units_log_ratio``, df = jobs − 2); with one
  job per side nothing measures how much a job varies, and a between-job sd is assumed on top
  of the spread of the runs inside the two jobs (``job_sd_log_ratio``, ``DEFAULT_JOB_SD_PCT``),
  which the comparison says.

A run's summary of a cell is the mean log of its repetitions once those far outside their run
are set aside (``disturbed_repetitions``: a page-cache miss, a migration, a neighbour's burst),
by a generalized ESD screen on the residuals from each run's median, pooled over every run of
the comparison, with its false alarms a small share of the interval's error rate.
``detectable_change`` is the smallest slowdown such a comparison calls 80 % of the time at the
spread it measured. Everything is decided with ``analysis``' machinery (``_finish``: the
multiplicity adjustment and the verdicts), and the error rates of these rules are measured by
simulation (``cryptoperf.simulate.runs``, docs/methodology.md "Across runs").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats as scipy_stats

from cryptoperf import analysis, stats
from cryptoperf.stats import outliers
from cryptoperf.model import REJECTED, CellSummary, Delta
from cryptoperf.stats import DEFAULT_LEVEL, DEFAULT_POWER, JOB_SD_T, JOBS_T, RUN_SD_T, RUNS_T, Interval

#: The run-to-run standard deviation (%, of one run's geometric mean) assumed when one run per
#: side, both of one job, measure nothing: the upper end of the shifts seen between runs of one
#: build on one host (docs/methodology.md, "Across runs").
DEFAULT_RUN_SD_PCT = 2.0
#: The between-job standard deviation (%, of one job's mean) assumed when the runs compared
#: come from two jobs only (one per side), on top of the spread between the runs of each: the
#: smallest round figure that keeps the simulated gate's false failures at or under 5 % in every
#: condition docs/methodology.md ("Across runs") tabulates, run sd 4 % between jobs included.
DEFAULT_JOB_SD_PCT = 4.0
#: A run's repetitions are screened (``disturbed_repetitions``) from this many on: with two, the
#: median cannot tell which one is far out.
SCREEN_MIN_REPETITIONS = 3

#: The per-repetition values of each metric in a ``CellSummary``.
VALUES = {"latency": "p50_by_block_ns", "throughput": "ops_per_s_by_block", "cpu_per_op": "process_cpu_ns_per_op_by_block",
          "server_cpu_per_op": "server_cpu_ns_per_op_by_block"}


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class Session:
    """The session that made a stored run: its CI job and the machine's boot.

    Attributes:
        key: runs with equal keys are one job, one unit of a comparison across jobs: the job
            label on its boot when a label was recorded, else the boot, else the run itself
            (a run stored before sessions were recorded: a session of its own).
        job: the job label recorded (``--job``, or a CI's variables: ``hostinfo.ci_job``), None.
        boot_id: the kernel's boot id when the run was made, None when not recorded.
    """

    key: str
    job: str | None = None
    boot_id: str | None = None

    @property
    def known(self) -> bool:
        """True when the run recorded a job label or a boot id."""
        return self.job is not None or self.boot_id is not None

    @property
    def text(self) -> str:
        """``job github:1234.1:bench``, ``boot 3f2a9c1e``, or ``unknown session``."""
        if self.job:
            return f"job {self.job}"
        return f"boot {self.boot_id[:8]}" if self.boot_id else "unknown session"

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> "Session":
        """The session of a stored run from its ``runs`` row (``meta``: ``process`` holds
        ``job`` and ``boot_id``; ``id`` names a run without them)."""
        process = meta.get("process") or {}
        job = str(process["job"]) if process.get("job") else None
        boot = str(process["boot_id"]) if process.get("boot_id") else None
        if job:
            key = f"job {job} on boot {boot}" if boot else f"job {job}"
        elif boot:
            key = f"boot {boot}"
        else:
            key = f"run {meta.get('id')}"
        return cls(key, job, boot)


@dataclass(frozen=True)
class RunCell:
    """One run's summary of a cell, with the session that made the run.

    Attributes:
        summary: the cell's summary in that run.
        session: the run's ``Session.key``; runs of a comparison with one key are one job ('' for
            runs whose session is not told: all one job).
        run: the run's name in notes (``run 7``).
    """

    summary: CellSummary
    session: str = ""
    run: str = ""


@dataclass(frozen=True)
class SetAside:
    """A repetition set aside as disturbed before its run's summary was taken.

    Attributes:
        cell: the cell's key; run: the run's name (``run 7``); block: the repetition's block.
        metric: the metric it was screened on (``p50 latency``); factor: its value ÷ its run's median.
    """

    cell: str
    run: str
    block: int
    metric: str
    factor: float

    def as_dict(self) -> dict[str, Any]:
        """``cell``, ``run``, ``block``, ``metric``, ``factor``."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Spread:
    """How much the units of one cell's comparison vary, as its decisive interval measured (or
    assumed) it.

    Attributes:
        unit: ``run`` (the runs of one job) or ``job``.
        units_a, units_b: units on each side.
        sd_log: the sd of a unit's log mean: measured (pooled over both sides), or the assumed
            sd when ``assumed``.
        df: the measured sd's degrees of freedom (0 when assumed).
        se_log: the standard error of the interval's log ratio.
        assumed: True when nothing measured it (one unit per side).
    """

    unit: str
    units_a: int
    units_b: int
    sd_log: float
    df: float
    se_log: float
    assumed: bool


@dataclass
class AcrossRuns:
    """What ``compare_cells`` decided.

    Attributes:
        deltas: one per pair of run lists, in their order (``model.Delta``).
        comparisons: the deltas with an interval (the family the adjustment covers).
        level: each interval's level after the adjustment.
        set_aside: the repetitions set aside as disturbed (``SetAside``), by cell then run.
        spreads: per delta, how much its units vary (``Spread``), None without an interval
            (or for Welch's interval on the repetitions of two runs of one session).
    """

    deltas: list[Delta]
    comparisons: int
    level: float
    set_aside: list[SetAside] = field(default_factory=list)
    spreads: list[Spread | None] = field(default_factory=list)


# --------------------------------------------------------------------------- intervals


def _means(runs: Sequence[Sequence[float]], what: str) -> np.ndarray:
    """The mean log of each non-empty run (shape (k,))."""
    return np.array([stats.positive_logs(what, r).mean() for r in runs if len(r)], dtype=float)


def _pooled_t(ms: np.ndarray, mb: np.ndarray, level: float, resolution: float, method: str) -> Interval:
    """The two-sample t interval on unit values ``ms`` against ``mb``, variance pooled."""
    df = ms.size + mb.size - 2
    pooled = (float(((ms - ms.mean()) ** 2).sum()) + float(((mb - mb.mean()) ** 2).sum())) / df
    se = math.sqrt(pooled * (1.0 / ms.size + 1.0 / mb.size))
    return stats.log_interval(float(ms.mean() - mb.mean()), se, float(df), level, int(min(ms.size, mb.size)), method,
                           math.log1p(resolution))


def runs_log_ratio(sample_runs: Sequence[Sequence[float]], baseline_runs: Sequence[Sequence[float]],
                   level: float = DEFAULT_LEVEL, resolution: float = 0.0) -> Interval:
    """Ratio of ``sample`` to ``baseline`` with whole runs as the unit: each run contributes
    the mean log of its values (its geometric mean), and the interval is the two-sample t
    interval on those run means with their variance pooled over both sides (df = k_s + k_b − 2).
    What shifts a run as a whole is in the spread of the run means, so the interval covers it,
    which no number of repetitions inside one run can do. Never narrower than ``resolution`` (a
    fraction, as in ``stats.paired_log_ratio``).

    Each side: k >= 1 runs, each a sequence of positive values (empty runs are left out);
    k_s + k_b >= 3. ``n`` of the result is the smaller side's run count. Raises ValueError
    otherwise.
    """
    ms, mb = _means(sample_runs, "sample run"), _means(baseline_runs, "baseline run")
    if ms.size < 1 or mb.size < 1 or ms.size + mb.size < 3:
        raise ValueError("an interval over runs needs a run with values on each side and 3 runs in all")
    return _pooled_t(ms, mb, level, resolution, RUNS_T)


def units_log_ratio(sample_units: Sequence[Sequence[Sequence[float]]],
                    baseline_units: Sequence[Sequence[Sequence[float]]],
                    level: float = DEFAULT_LEVEL, resolution: float = 0.0) -> Interval:
    """Ratio of ``sample`` to ``baseline`` with jobs as the unit: each unit (a job: a sequence
    of runs, each a sequence of positive values) contributes the mean of its runs' mean logs,
    and the interval is the two-sample t interval on those values, variance pooled over both
    sides (df = U_s + U_b − 2, method ``JOBS_T``). What shifts a job as a whole (another machine,
    its neighbours) is in the spread of the job values. Never narrower than ``resolution``.

    Each side >= 1 unit with a non-empty run; U_s + U_b >= 3. ``n`` is the smaller side's unit
    count. Raises ValueError otherwise.
    """
    def values(units: Sequence[Sequence[Sequence[float]]], what: str) -> np.ndarray:
        means = [_means(u, what) for u in units]
        return np.array([m.mean() for m in means if m.size], dtype=float)

    ms, mb = values(sample_units, "sample run"), values(baseline_units, "baseline run")
    if ms.size < 1 or mb.size < 1 or ms.size + mb.size < 3:
        raise ValueError("an interval over jobs needs a job with values on each side and 3 jobs in all")
    return _pooled_t(ms, mb, level, resolution, JOBS_T)


def run_sd_log_ratio(sample: Sequence[float], baseline: Sequence[float], run_sd: float,
                     level: float = DEFAULT_LEVEL, resolution: float = 0.0, method: str = RUN_SD_T) -> Interval:
    """Ratio of the geometric means of one run's ``sample`` to another run's ``baseline`` when
    their variation as a whole was not measured: Welch's interval on the two runs' values,
    widened by a standard deviation ``run_sd`` assumed for each run (a fraction on the log
    scale, ≈ the CV of a whole run's geometric mean): se² = s_s²/n_s + s_b²/n_b + 2·run_sd², df
    by Welch–Satterthwaite with the assumed part counted as known (infinite df). A side with
    fewer than 2 values adds no within-run part. Never narrower than ``resolution``; ``method``
    names the interval (``RUN_SD_T``; ``JOB_SD_T`` when the two runs are of two jobs).

    Each side shape (n,), n >= 1, positive; ``run_sd`` >= 0, and > 0 unless both sides have 2
    values or more. Raises ValueError otherwise.
    """
    a, b = stats.positive_logs("sample", sample), stats.positive_logs("baseline", baseline)
    if a.size < 1 or b.size < 1:
        raise ValueError("an interval needs a value on each side")
    if run_sd < 0 or not math.isfinite(run_sd):
        raise ValueError(f"run_sd must be a finite fraction >= 0, got {run_sd}")
    parts = [(x.var(ddof=1) / x.size, x.size - 1) for x in (a, b) if x.size >= 2]
    if run_sd == 0 and len(parts) < 2:
        raise ValueError("one value on a side and no assumed run-to-run sd: no spread to build an interval on")
    within = sum(v for v, _ in parts)
    var = within + 2.0 * run_sd ** 2
    denominator = sum(v ** 2 / k for v, k in parts if v > 0)
    df = float(var ** 2 / denominator) if denominator > 0 else math.inf
    return stats.log_interval(float(a.mean() - b.mean()), math.sqrt(var), min(df, 1e9), level,
                           int(min(a.size, b.size)), method, math.log1p(resolution))


def job_sd_log_ratio(sample_runs: Sequence[Sequence[float]], baseline_runs: Sequence[Sequence[float]], job_sd: float,
                     level: float = DEFAULT_LEVEL, resolution: float = 0.0) -> Interval:
    """Ratio of one job's runs ``sample_runs`` to another job's ``baseline_runs`` (each run a
    sequence of positive values) when nothing measures how much a job varies: the difference of
    the jobs' means of their runs' log means, with se² = s_w²·(1/k_s + 1/k_b) + 2·job_sd², s_w²
    the variance between the runs of a job pooled over both (df = k_s + k_b − 2), ``job_sd``
    (a fraction) assumed for each job and counted as known; df by Welch–Satterthwaite. With one
    run per side the within part is the repetitions' spread (``run_sd_log_ratio``). Method
    ``JOB_SD_T``; ``n`` is the smaller side's run count. Never narrower than ``resolution``.

    Raises ValueError for a side without a run with values, a negative ``job_sd``, or one run
    per side with too few values and ``job_sd`` 0 (``run_sd_log_ratio``).
    """
    ms, mb = _means(sample_runs, "sample run"), _means(baseline_runs, "baseline run")
    if ms.size < 1 or mb.size < 1:
        raise ValueError("an interval needs a run with values on each side")
    if job_sd < 0 or not math.isfinite(job_sd):
        raise ValueError(f"job_sd must be a finite fraction >= 0, got {job_sd}")
    if ms.size + mb.size < 3:
        one = [next(r for r in runs if len(r)) for runs in (sample_runs, baseline_runs)]
        return run_sd_log_ratio(one[0], one[1], job_sd, level, resolution, method=JOB_SD_T)
    df_w = ms.size + mb.size - 2
    within = (float(((ms - ms.mean()) ** 2).sum()) + float(((mb - mb.mean()) ** 2).sum())) / df_w
    within *= 1.0 / ms.size + 1.0 / mb.size
    var = within + 2.0 * job_sd ** 2
    df = var ** 2 / (within ** 2 / df_w) if within > 0 else math.inf
    return stats.log_interval(float(ms.mean() - mb.mean()), math.sqrt(var), min(df, 1e9), level,
                           int(min(ms.size, mb.size)), JOB_SD_T, math.log1p(resolution))


# --------------------------------------------------------------------------- power


def detectable_change(sd_log: float, units_a: int, units_b: int, comparisons: int = 1, level: float = DEFAULT_LEVEL,
                      target: float = DEFAULT_POWER, df: float | None = None, margin_pct: float = 0.0) -> float:
    """The smallest true slowdown (a fraction: 0.05 for 5 %) that a comparison across runs
    fails a gate on with probability ``target``: its interval (at ``stats.adjusted_level(level,
    comparisons)``: Bonferroni, as the comparisons are adjusted) lies above no change and is
    not inside the ±``margin_pct`` % margin. The comparison has ``units_a`` and ``units_b``
    units (runs of one job, or jobs) whose log means vary by ``sd_log``; with ``df`` None the
    sd is measured (two-sample t, df = units − 2, noncentral t for the power), with ``df``
    math.inf it is known (assumed: normal). The margin's part uses the interval's half-width at
    ``sd_log`` (it matters only when the interval is narrower than the margin).

    Returns math.inf when no change up to ×e¹⁰ is caught that often. Raises ValueError for
    units < 1 each, fewer than 3 in all without ``df``, or ``sd_log`` <= 0.
    """
    if units_a < 1 or units_b < 1 or sd_log <= 0 or not math.isfinite(sd_log):
        raise ValueError("detectable_change needs a unit on each side and a positive sd")
    df = float(units_a + units_b - 2) if df is None else float(df)
    if df < 1:
        raise ValueError("a measured sd needs 3 units in all")
    se = sd_log * math.sqrt(1.0 / units_a + 1.0 / units_b)
    adjusted = stats.adjusted_level(level, comparisons)
    if math.isinf(df):
        q = float(scipy_stats.norm.ppf(0.5 + adjusted / 2.0))
        nc = q + float(scipy_stats.norm.ppf(target))
    else:
        q = stats.t_quantile(adjusted, df)
        if float(scipy_stats.nct.sf(q, df, 10.0 / se)) < target:
            return math.inf
        from scipy.optimize import brentq
        nc = float(brentq(lambda x: float(scipy_stats.nct.sf(q, df, x)) - target, 0.0, 10.0 / se, xtol=1e-6))
    margin = math.log1p(margin_pct / 100.0) - q * se + float(scipy_stats.norm.ppf(target)) * se
    return math.expm1(max(nc * se, margin))


def spread_bounds(sd_log: float, df: float, level: float = 0.90) -> tuple[float, float]:
    """The two-sided ``level`` interval of a standard deviation ``sd_log`` measured with ``df``
    degrees of freedom (σ² = df·s²/χ²(df)): (low, high), each a fraction on the log scale.
    Raises ValueError for df <= 0."""
    if df <= 0:
        raise ValueError("a measured sd needs df > 0")
    tail = (1.0 - level) / 2.0
    return (sd_log * math.sqrt(df / scipy_stats.chi2.ppf(1.0 - tail, df)),
            sd_log * math.sqrt(df / scipy_stats.chi2.ppf(tail, df)))


@dataclass(frozen=True)
class SpreadSummary:
    """How much the units of a comparison vary, over its cells, beside the sd assumed when a
    comparison has one unit of that kind per side.

    Attributes:
        unit: ``run`` (runs of one job) or ``job``; units_a, units_b: units per side (the most
            any cell had).
        sd_pct: the measured sd of a unit's mean (%, root mean square over the cells whose
            interval measured it), None when every one was assumed.
        df: its degrees of freedom (the fewest of a cell's); low_pct, high_pct: its 90 %
            interval (``spread_bounds``), None when not measured.
        assumed_pct: the sd (%) assumed for a comparison of one such unit per side
            (``--run-sd`` or ``--job-sd``).
    """

    unit: str
    units_a: int
    units_b: int
    sd_pct: float | None
    df: float
    low_pct: float | None
    high_pct: float | None
    assumed_pct: float

    @property
    def warning(self) -> str | None:
        """A warning when the measured sd is above the assumed one beyond doubt (the 90 %
        interval's lower end, a one-sided 95 % bound, above it), else None."""
        if self.low_pct is None or self.low_pct <= self.assumed_pct:
            return None
        option = "--job-sd" if self.unit == "job" else "--run-sd"
        what = "jobs" if self.unit == "job" else "runs of one job"
        return (f"warning: the {what} compared vary by an sd of {self.sd_pct:.1f} % (90 % interval "
                f"{self.low_pct:.1f}–{self.high_pct:.1f} %, {self.df:g} df), more than the {self.assumed_pct:g} % "
                f"assumed when one {self.unit} per side is compared ({option}): such a comparison would fail "
                f"unchanged builds more often than it says; give {option} {math.ceil(self.sd_pct):g} or more there")

    @property
    def text(self) -> str:
        """``between-job sd: 1.2 % measured (90 % interval 0.8–2.3 %, 5 df) over 1 + 6 jobs; 4 % is
        assumed for one job per side``, or what is assumed when nothing measured it."""
        unit = "between-job" if self.unit == "job" else "run-to-run"
        units = f"{self.units_b} + {self.units_a} {self.unit}s"
        if self.sd_pct is None:
            return f"{unit} sd: not measured ({units}); {self.assumed_pct:g} % assumed"
        return (f"{unit} sd: {self.sd_pct:.2g} % measured (90 % interval {self.low_pct:.2g}–{self.high_pct:.2g} %, "
                f"{self.df:g} df) over {units}; {self.assumed_pct:g} % is assumed for one {self.unit} per side")

    def as_dict(self) -> dict[str, Any]:
        """Every attribute, and ``warning`` (None without one)."""
        return {**self.__dict__, "warning": self.warning}


def spread_summary(spreads: Sequence[Spread | None], run_sd_pct: float = DEFAULT_RUN_SD_PCT,
                   job_sd_pct: float = DEFAULT_JOB_SD_PCT) -> SpreadSummary | None:
    """The ``SpreadSummary`` of a comparison's per-cell spreads (``AcrossRuns.spreads``): the
    root mean square of the measured sds, the fewest df, its 90 % interval at those df (cells
    whose run shifts are shared are not independent, so the df are not added), against the sd
    assumed for its unit (``run_sd_pct`` for runs, ``job_sd_pct`` for jobs). None without a
    spread."""
    known = [s for s in spreads if s is not None]
    if not known:
        return None
    unit = known[0].unit
    assumed = job_sd_pct if unit == "job" else run_sd_pct
    ua, ub = max(s.units_a for s in known), max(s.units_b for s in known)
    measured = [s for s in known if not s.assumed and s.df > 0]
    if not measured:
        return SpreadSummary(unit, ua, ub, None, 0.0, None, None, assumed)
    sd = math.sqrt(float(np.mean([s.sd_log ** 2 for s in measured])))
    df = min(s.df for s in measured)
    low, high = spread_bounds(sd, df)
    return SpreadSummary(unit, ua, ub, 100.0 * math.expm1(sd), df, 100.0 * math.expm1(low),
                         100.0 * math.expm1(high), assumed)


@dataclass(frozen=True)
class Detectable:
    """The smallest slowdown a comparison's gate catches 80 % of the time (``detectable``).

    Attributes:
        pct: that slowdown in % (the median over the comparison's cells; math.inf when none is
            caught that often); spread: the units' spread it rests on (``SpreadSummary``).
        comparisons: the intervals adjusted together (Bonferroni); power: 0.8.
    """

    pct: float
    spread: SpreadSummary
    comparisons: int
    power: float = DEFAULT_POWER

    @property
    def text(self) -> str:
        """``detectable change: a slowdown of 6.3 % or more fails this gate 80 % of the time (…)``."""
        s = self.spread
        what = ("measured" if s.sd_pct is not None else "assumed")
        sd = s.sd_pct if s.sd_pct is not None else s.assumed_pct
        basis = (f"{'between-job' if s.unit == 'job' else 'run-to-run'} sd {sd:.2g} % {what}, {s.units_b} + "
                 f"{s.units_a} {s.unit}s, {self.comparisons} comparison{'s' if self.comparisons != 1 else ''}"
                 + (", Bonferroni" if self.comparisons > 1 else ""))
        if math.isinf(self.pct):
            return (f"detectable change: none — no slowdown fails this gate {self.power * 100:.0f} % of the time at "
                    f"this spread ({basis}); more {s.unit}s would")
        return (f"detectable change: a slowdown of {self.pct:.1f} % or more fails this gate {self.power * 100:.0f} % "
                f"of the time ({basis})")

    def as_dict(self) -> dict[str, Any]:
        """``pct`` (None for none), ``power``, ``comparisons``, ``unit``, ``units_a``, ``units_b``,
        ``sd_pct`` (measured, or the assumed), ``assumed`` (bool)."""
        s = self.spread
        return {"pct": None if math.isinf(self.pct) else self.pct, "power": self.power,
                "comparisons": self.comparisons, "unit": s.unit, "units_a": s.units_a, "units_b": s.units_b,
                "sd_pct": s.sd_pct if s.sd_pct is not None else s.assumed_pct, "assumed": s.sd_pct is None}


def detectable(spreads: Sequence[Spread | None], comparisons: int, level: float = DEFAULT_LEVEL,
               margin_pct: float = 0.0, run_sd_pct: float = DEFAULT_RUN_SD_PCT,
               job_sd_pct: float = DEFAULT_JOB_SD_PCT) -> Detectable | None:
    """The ``Detectable`` of a comparison: per cell with a spread, ``detectable_change`` at its
    measured sd and units (or, assumed, at its interval's standard error as a known one), with
    ``comparisons`` adjusted together at family ``level`` and the gate's margin; the median
    over the cells. None without a spread."""
    per = []
    for s in spreads:
        if s is None or s.se_log <= 0:
            continue
        if s.assumed:
            per.append(detectable_change(s.se_log / math.sqrt(2.0), 1, 1, comparisons, level, df=math.inf,
                                         margin_pct=margin_pct))
        else:
            per.append(detectable_change(s.sd_log, s.units_a, s.units_b, comparisons, level, margin_pct=margin_pct))
    summary = spread_summary(spreads, run_sd_pct, job_sd_pct)
    if not per or summary is None:
        return None
    return Detectable(100.0 * float(np.median(per)), summary, max(comparisons, 1))


# --------------------------------------------------------------------------- the screen


def disturbed_repetitions(runs: Sequence[Mapping[int, float]], alpha: float,
                          floor_log: float = math.log1p(outliers.OUTLIER_FLOOR_PCT / 100.0)) -> list[tuple[int, int, float]]:
    """The repetitions far outside their run, among the runs of one cell's comparison (each run
    a mapping block → positive value, e.g. ``CellSummary.p50_by_block_ns``): (position of the
    run in ``runs``, block, value ÷ its run's median), ascending.

    Each run of ``SCREEN_MIN_REPETITIONS`` values or more gives the residuals of its log values
    from its median (the lower median with an even count: one of its values, itself left out, as
    its residual is 0 by construction — with the mean of the two middle values instead, two
    near-zero residuals per run shrink the pooled spread and the false alarms triple); the
    residuals of every run are pooled, so that a run of 3 repetitions is
    screened against the spread of all of them, and ``outliers.outlier_blocks`` (Rosner's
    generalized ESD, false alarms about ``alpha`` on normal values, at most 20 % of the values,
    none within ``floor_log`` of the median) finds the outliers. A run shifted as a whole has no
    large residual (that is the run-to-run variation the interval measures), and a run never
    loses its median or more than (n − 1) // 2 of its n values. Raises ValueError for a
    non-positive value or an ``alpha`` outside (0, 1).
    """
    residuals: list[float] = []
    where: list[tuple[int, int, float]] = []
    for i, values in enumerate(runs):
        if len(values) < SCREEN_MIN_REPETITIONS:
            continue
        if any(not 0.0 < v < math.inf for v in values.values()):
            raise ValueError("disturbed_repetitions needs finite positive values")
        blocks = list(values)
        logs = [math.log(values[b]) for b in blocks]
        skip = sorted(range(len(logs)), key=logs.__getitem__)[(len(logs) - 1) // 2]  # the (lower) median
        median = logs[skip]
        for j, block in enumerate(blocks):
            if j != skip:
                residuals.append(logs[j] - median)
                where.append((i, block, math.exp(logs[j] - median)))
    if len(residuals) < outliers.OUTLIER_MIN_BLOCKS:
        return []
    centre = float(np.median(residuals))
    if max(abs(r - centre) for r in residuals) <= floor_log:
        return []  # nothing beyond the floor: the screen could set nothing aside (and is slow)
    found = outliers.outlier_blocks(residuals, alpha, floor_log)
    kept: dict[int, list[int]] = {}
    for p in sorted(found, key=lambda p: -abs(residuals[p])):
        run = where[p][0]
        if len(kept.setdefault(run, [])) < (len(runs[run]) - 1) // 2:
            kept[run].append(p)
    return sorted(where[p] for ps in kept.values() for p in ps)


def _screen(runs: Sequence[RunCell], metric: str, level: float, resolution: float = 0.0) -> dict[int, dict[int, float]]:
    """Position in ``runs`` → {block: factor} of the repetitions ``disturbed_repetitions`` sets
    aside on ``metric`` (a ``stats.METRICS`` key), at false alarms ``outliers.outlier_alpha(level)``;
    a latency's floor is at least two histogram buckets (``resolution``, a fraction)."""
    values = [getattr(r.summary, VALUES[metric]) for r in runs]
    floor = math.log1p(outliers.OUTLIER_FLOOR_PCT / 100.0)
    if metric == "latency":
        floor = max(floor, 2.0 * math.log1p(resolution))
    out: dict[int, dict[int, float]] = {}
    for i, block, factor in disturbed_repetitions(values, outliers.outlier_alpha(level), floor):
        out.setdefault(i, {})[block] = factor
    return out


#: How the screen works, in the method sentence of a comparison across runs.
SCREEN_TEXT = (f"repetitions far outside their run set aside before its mean is taken (generalized ESD on the "
               f"residuals from each run's median, pooled over the runs, false alarms at "
               f"1/{1 / outliers.OUTLIER_ALPHA_SHARE:g} of the interval's error rate, only beyond "
               f"±{outliers.OUTLIER_FLOOR_PCT:g} %)")


# --------------------------------------------------------------------------- one cell


def _merged(runs: Sequence[CellSummary]) -> CellSummary:
    """One summary standing for several runs of a cell (its medians over every run's measured
    repetitions; the counts summed), for what a delta shows beside its interval."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    merged = {"p50_by_block_ns": "p50_ns", "ops_per_s_by_block": "ops_per_s",
              "process_cpu_ns_per_op_by_block": "process_cpu_ns_per_op",
              "server_cpu_ns_per_op_by_block": "server_cpu_ns_per_op"}
    values = {k: analysis._median(v for s in runs for v in getattr(s, k).values()) for k in merged}
    return dataclasses.replace(first, repetitions=sum(s.repetitions for s in runs), ok=sum(s.ok for s in runs),
                               cv_p50=max(s.cv_p50 for s in runs), **{merged[k]: v for k, v in values.items()})


def _runs_problem(name: str, runs: Sequence[CellSummary]) -> str | None:
    """Why one side's runs of a cell cannot be compared (a run whose libraries changed under
    it, or no measured repetition in any run), or None."""
    rejected = next((s for s in runs if s.status == REJECTED), None)
    if rejected is not None:
        return analysis._side_problem(name, rejected)
    return analysis._side_problem(name, runs[0]) if all(s.ok == 0 for s in runs) else None


def _units(a: Sequence[RunCell], b: Sequence[RunCell]) -> tuple[str, list[list[int]], list[list[int]]]:
    """(``run`` or ``job``, side A's units, side B's units), each unit a list of positions: the
    runs when every run has one session, else the runs of each session on each side."""
    if len({r.session for r in (*a, *b)}) <= 1:
        return "run", [[i] for i in range(len(a))], [[i] for i in range(len(b))]

    def group(runs: Sequence[RunCell]) -> list[list[int]]:
        out: dict[str, list[int]] = {}
        for i, r in enumerate(runs):
            out.setdefault(r.session, []).append(i)
        return list(out.values())
    return "job", group(a), group(b)


def _interval(unit: str, ua: list[list[list[float]]], ub: list[list[list[float]]], level: float, resolution: float,
              run_sd: float | None, job_sd: float | None) -> Interval | None:
    """The raw interval of side B's units ``ub`` against A's ``ua`` (units → runs → values; empty
    runs and units left out) by ``unit``: t over the units with 3 or more, else the assumed sd
    of that unit; None when nothing can be built."""
    ua = [u for u in ([r for r in u if r] for u in ua) if u]
    ub = [u for u in ([r for r in u if r] for u in ub) if u]
    if not ua or not ub:
        return None
    if unit == "run":
        ra, rb = [r for u in ua for r in u], [r for u in ub for r in u]
        if len(ra) + len(rb) >= 3:
            return runs_log_ratio(rb, ra, level, resolution)
        if not run_sd and min(len(ra[0]), len(rb[0])) < analysis.MIN_BLOCKS:
            return None
        return run_sd_log_ratio(rb[0], ra[0], run_sd or 0.0, level, resolution)
    if len(ua) + len(ub) >= 3:
        return units_log_ratio(ub, ua, level, resolution)
    if not job_sd and len(ua[0]) + len(ub[0]) < 3 and min(len(ua[0][0]), len(ub[0][0])) < analysis.MIN_BLOCKS:
        return None
    return job_sd_log_ratio(ub[0], ua[0], job_sd or 0.0, level, resolution)


def _spread(ci: Interval, unit: str, units_a: int, units_b: int, assumed_sd: float | None) -> Spread:
    """The ``Spread`` behind ``ci``: measured (t over units) or assumed."""
    if ci.method in (RUNS_T, JOBS_T):
        sd = ci.se_log / math.sqrt(1.0 / units_a + 1.0 / units_b)
        return Spread(unit, units_a, units_b, sd, ci.df, ci.se_log, False)
    return Spread(unit, units_a, units_b, assumed_sd or 0.0, 0.0, ci.se_log, True)


def _cell(a: Sequence[RunCell], b: Sequence[RunCell], common: dict[str, Any], names: tuple[str, str],
          settings: analysis.Settings, screen_level: float, run_sd: float | None,
          job_sd: float | None) -> tuple[Any, list[SetAside], Spread | None]:
    """One cell's raw intervals (``analysis._Pending``) or an n/a Delta, the repetitions set
    aside and the spread of its units; each side has a measured run (``_runs_problem``)."""
    a, b = [r for r in a if r.summary.ok], [r for r in b if r.summary.ok]
    base, conf = _merged([r.summary for r in a]), _merged([r.summary for r in b])
    unit, ua, ub = _units(a, b)
    if unit == "run" and len(a) + len(b) < 3 and not run_sd:  # machines of one run: every repetition
        return analysis._unpaired(a[0].summary, b[0].summary, common, names, settings.level), [], None
    metric = stats.metric_for(settings.verdict_on, conf.cell.load)
    runs = list(a) + list(b)
    res_a, res_b = (stats.histogram_resolution([v for r in side for v in r.summary.p50_by_block_ns.values()])
                    for side in (a, b))
    aside = _screen(runs, metric, screen_level, max(res_a, res_b)) if settings.outlier_screen else {}

    def interval(of: str, resolution: bool = False) -> Interval | None:
        kept = [{k: v for k, v in getattr(r.summary, of).items() if k not in aside.get(i, {})} if aside.get(i)
                else getattr(r.summary, of) for i, r in enumerate(runs)]
        va = [[list(kept[i].values()) for i in u] for u in ua]
        vb = [[list(kept[len(a) + i].values()) for i in u] for u in ub]
        return _interval(unit, va, vb, settings.level, res_a + res_b if resolution else 0.0, run_sd, job_sd)

    lat, tp = interval(VALUES["latency"], resolution=True), interval(VALUES["throughput"])
    if lat is None or tp is None:
        return Delta(status="n/a", reason="no spread to build an interval on", blocks=0,
                     baseline_p50_ns=base.p50_ns, p50_ns=conf.p50_ns, **common), [], None
    cpu = interval(VALUES["cpu_per_op"])
    server = interval(VALUES["server_cpu_per_op"])
    name = stats.METRICS[metric][0]
    found = [SetAside(conf.cell.key, runs[i].run, blk, name, f) for i in sorted(aside) for blk, f in aside[i].items()]
    note = "; ".join(x for x in (analysis._shortfall(names, base, conf), _aside_note(found)) if x)
    chosen = {"latency": lat, "throughput": tp, "cpu_per_op": cpu, "server_cpu_per_op": server}[metric]
    spread = None
    if chosen is not None:
        spread = _spread(chosen, unit, len(ua), len(ub), job_sd if unit == "job" else run_sd)
    return (analysis._Pending(common, base, conf, min(base.ok, conf.ok), 0, lat, tp, cpu, note, server=server),
            found, spread)


def _aside_note(found: Sequence[SetAside]) -> str:
    """``run 8: block 2 set aside as disturbed (p50 latency ×3.00 its run's median)``, per run."""
    by_run: dict[str, list[SetAside]] = {}
    for s in found:
        by_run.setdefault(s.run, []).append(s)
    out = []
    for run, items in by_run.items():
        blocks = ", ".join(str(s.block) for s in items)
        factors = ", ".join(f"×{s.factor:.2f}" for s in items)
        what = f"block {blocks} set aside as disturbed" if len(items) == 1 else f"blocks {blocks} set aside as disturbed"
        out.append(f"{run + ': ' if run else ''}{what} ({items[0].metric} {factors} its run's median)")
    return "; ".join(out)


# --------------------------------------------------------------------------- the comparison


def _run_cells(runs: Sequence[CellSummary | RunCell], side: str) -> list[RunCell]:
    """``runs`` as RunCells: a bare summary has the session '' (all of one job), named after
    ``side`` (``A``, or ``A, run 2`` of several)."""
    out = []
    for i, r in enumerate(runs):
        if isinstance(r, RunCell):
            out.append(r if r.run else dataclasses.replace(r, run=side if len(runs) == 1 else f"{side}, run {i + 1}"))
        else:
            out.append(RunCell(r, "", side if len(runs) == 1 else f"{side}, run {i + 1}"))
    return out


def compare_cells(pairs: Sequence[tuple[Sequence[CellSummary | RunCell], Sequence[CellSummary | RunCell]]],
                  names: tuple[str, str], settings: analysis.Settings = analysis.Settings(),
                  context: analysis.Context = analysis.Context(), run_sd: float | None = None,
                  job_sd: float | None = None) -> AcrossRuns:
    """Each cell's runs on side B against its runs on side A (A the baseline), one pair of run
    lists per cell (``RunCell``: a summary with the session of its run; a bare ``CellSummary``
    counts as a run of the one job all bare summaries share), adjusted together; ``names`` name
    the sides in reasons.

    Per cell (module docstring): the repetitions far outside their run are set aside on the
    verdict's metric (``disturbed_repetitions``, unless ``settings.outlier_screen`` is off);
    then, when every run has one session, runs are the unit (three runs or more: the t interval
    on their means; one run per side: ``run_sd``, a fraction, assumed for each, or None / 0 for
    Welch's interval on the repetitions alone, as for the machines of one run, unscreened);
    when the runs span several sessions, jobs are the unit (three jobs or more: the t interval
    on their means; one job per side: ``job_sd`` assumed for each on top of the spread between
    their runs, ``DEFAULT_JOB_SD_PCT`` / 100 when None). Returns an ``AcrossRuns``.
    """
    job_sd = DEFAULT_JOB_SD_PCT / 100.0 if job_sd is None else job_sd
    prepared = []
    for a_runs, b_runs in pairs:
        a, b = _run_cells(a_runs, names[0]), _run_cells(b_runs, names[1])
        c = a[0].summary.cell
        common = analysis._common(a[0].summary, b[0].summary, c.configuration, c.configuration)
        problem = (_runs_problem(names[0], [r.summary for r in a])
                   or _runs_problem(names[1], [r.summary for r in b]))
        prepared.append((a, b, common, problem))
    family = sum(1 for *_, problem in prepared if not problem)
    screen_level = stats.adjusted_level(settings.level, *settings.family(family))
    pending: list[Any] = []
    set_aside: list[SetAside] = []
    spreads: list[Spread | None] = []
    for a, b, common, problem in prepared:
        if problem:
            pending.append(Delta(status="n/a", reason=problem, baseline_p50_ns=a[0].summary.p50_ns,
                                 p50_ns=b[0].summary.p50_ns, **common))
            spreads.append(None)
            continue
        p, found, spread = _cell(a, b, common, names, settings, screen_level, run_sd, job_sd)
        pending.append(p)
        set_aside += found
        spreads.append(spread)
    deltas, m, level = analysis._finish(pending, settings, context)
    spreads = [s if d.verdict is not None else None for s, d in zip(spreads, deltas)]
    return AcrossRuns(deltas, m, level, set_aside, spreads)


def compare_runs(pairs: Sequence[tuple[Sequence[CellSummary | RunCell], Sequence[CellSummary | RunCell]]],
                 names: tuple[str, str], settings: analysis.Settings = analysis.Settings(),
                 context: analysis.Context = analysis.Context(), run_sd: float | None = None,
                 job_sd: float | None = None) -> tuple[list[Delta], int, float]:
    """``compare_cells``' (deltas, comparisons with an interval, per-interval level)."""
    r = compare_cells(pairs, names, settings, context, run_sd, job_sd)
    return r.deltas, r.comparisons, r.level
