"""Planning a fleet job against a deadline: how many slices (the management server's workers)
finish N targets in time, and how long the job then takes, from a measured fleet-job run.

**The model.** A slice keeps at most ``cap`` targets in flight, so k slices keep
``n = min(N, k · cap)`` in flight; by Little's law they complete ``n / T(n)`` targets per second,
where T(n) is a target's time in flight with n in flight, and a job of N targets takes

    J(k) = N · T(n) / n

(a job of at most ``k · cap`` targets takes one target's time). T(n) is a target's waiting (the
latency model's round trips and target work: the run's measured waits, W) plus a delay the run
does not explain (Z: the rest of the network stack, scheduling) plus its time at a CPU shared by
everything in flight: C of management CPU and A of the targets' own CPU per target (the run's
coordinator and slices, and its agents, per completed target). How that CPU time grows with n
lies between two limits (``economics.queueing``): random arrivals (mean value analysis: the
lower limit) and lockstep (every target's CPU at once: the upper). Z is calibrated per measured
job and per limit so that the model gives the measured T at the measured concurrency. Both
limits saturate at the CPU bound, ``cores / CPU per target`` targets per second.

Where the CPU is: by default the answer replays the measured host — management and simulated
targets share its ``H`` CPUs (C + A per target on H). With ``cores`` given, the management
server has that many cores to itself (C per target on them) and each target's own CPU (A) is
time on its own machine, a delay.

**The interval.** Each measured job (block) gives its own W, Z, C and A, so its own J(k) under
each limit; each limit's J gives a geometric mean with a *prediction* interval for one more job
(t quantile × the spread of log J × sqrt(1 + 1/n)): a deadline is met or missed by the next job,
not by the average one. The answer's interval runs from the random limit's lower end to the
lockstep limit's upper end, its estimate the geometric mean of the two limits' estimates: where
the CPU is little loaded the limits agree and the interval is the jobs' own spread; where it is
loaded the interval says how much the model cannot tell. The slices needed are the fewest whose
interval's upper end meets the deadline (and, beside it, the fewest whose estimate does).

**Validity.** The model holds where it was measured: more targets in flight than any measured
job had, more targets than any measured job ran, or other cores is an extrapolation, and the
answer says so, with the measured range. It never hides one.

Errors: ``EconomicsError`` (exit 2) for a run without fleet jobs, a configuration or level it
does not have, a non-positive target count, deadline, rate or core count, or a level with fewer
than 2 measured jobs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from cryptoperf import stats
from cryptoperf.economics import queueing
from cryptoperf.economics.cost import EconomicsError
from cryptoperf.workloads import fleet
from cryptoperf.workloads.generic import BAND_LEVEL

#: Most slices the planner considers.
MAX_SLICES = 10_000
#: The model in one line, as every answer states it.
MODEL = ("J(k) = N·T(n)/n with n = min(N, k·cap) in flight (Little's law); T(n) = waits + unexplained delay + "
         "time at the shared CPU, between random arrivals (mean value analysis) and lockstep, both saturating "
         "at cores ÷ CPU per target")
#: Utilisation of the CPU station from which the answer calls the job CPU-bound.
CPU_BOUND = 0.85

_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*(ms|s|m|min|h)?\s*", re.IGNORECASE)
_SCALE = {None: 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_PER_MIN = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*(k)?\s*(/\s*min|/\s*m|/\s*s|/\s*h)?\s*", re.IGNORECASE)


def parse_duration(text: str, name: str = "--deadline") -> float:
    """A duration as people write it: ``10m``, ``90s``, ``1.5h``, ``600`` (s). Returns seconds,
    > 0. Raises EconomicsError naming ``name`` for anything else."""
    m = _DURATION.fullmatch(str(text))
    value = float(m.group(1)) * _SCALE[(m.group(2) or "").lower() or None] if m else -1.0
    if not m or not math.isfinite(value) or value <= 0:
        raise EconomicsError(f"{name} '{text}' is not a duration: give a number with s, m or h, e.g. 10m, 90s, 1.5h")
    return value


def parse_targets_rate(text: str, name: str = "--rate") -> float:
    """A job rate in targets per minute: ``50/min``, ``50``, ``1.2k/min``, ``2/s`` (×60),
    ``3000/h`` (÷60). Returns targets per minute, > 0. Raises EconomicsError naming ``name``."""
    m = _PER_MIN.fullmatch(str(text))
    if not m:
        raise EconomicsError(f"{name} '{text}' is not a rate of targets: give targets per minute, e.g. 50/min, "
                             "1.2k/min, 2/s")
    value = float(m.group(1)) * (1000.0 if m.group(2) else 1.0)
    unit = re.sub(r"\s", "", (m.group(3) or "/min").lower())
    value *= {"/min": 1.0, "/m": 1.0, "/s": 60.0, "/h": 1 / 60.0}[unit]
    if not math.isfinite(value) or value <= 0:
        raise EconomicsError(f"{name} '{text}' must be a positive rate of targets")
    return value


@dataclass(frozen=True)
class Measured:
    """What a fleet-job level measured, per job (block): ``target_s`` (mean time a target was in
    flight, s), ``cpu_ns`` (management CPU per completed target: coordinator and slices, ns),
    ``agent_cpu_ns`` (the simulated targets' CPU per target: the agents, ns; 0 where not
    measured) and ``wait_s`` (the latency model's mean wait per target, s; 0 when it was off),
    with the job's scale (``targets``, ``slices``, ``cap``, ``in_flight``: the most one slice had
    at once) and the ``cores`` (CPUs) it ran on."""

    configuration: str
    level: str
    targets: int
    slices: int
    cap: int
    in_flight: int
    cores: int
    target_s: dict[int, float]
    cpu_ns: dict[int, float]
    agent_cpu_ns: dict[int, float] = field(default_factory=dict)
    wait_s: dict[int, float] = field(default_factory=dict)
    #: (CPUs of the slices, CPUs of the agents) when the jobs pinned them apart, else None.
    apart: tuple[int, int] | None = None

    @property
    def blocks(self) -> list[int]:
        """Blocks that measured both a time in flight and management CPU, in order."""
        return sorted(b for b in self.target_s if b in self.cpu_ns)

    @property
    def concurrency(self) -> int:
        """Targets in flight at once in the measured jobs: slices × min(cap, most in flight),
        at most the targets."""
        return max(1, min(self.targets, self.slices * min(self.cap, self.in_flight or self.cap)))

    def per_block(self, figures: dict[int, float], scale: float = 1.0) -> np.ndarray:
        """``figures`` over ``blocks`` × ``scale`` (0 for a block without one)."""
        return np.array([figures.get(b, 0.0) * scale for b in self.blocks])


@dataclass(frozen=True)
class JobPlan:
    """The planner's answer.

    Attributes:
        measured: what it is computed from; targets: N asked; deadline_s: the deadline (None
            with a rate); rate_per_min: the rate asked (None with a deadline); cores: the CPUs
            of the CPU station (the measured host's, or the management cores asked);
            targets_apart: True when the management server has ``cores`` to itself and the
            targets' CPU is on their own machines (``cores`` given), False when it replays the
            measured host (management and simulated targets share its CPUs).
        slices: the fewest slices whose prediction interval meets the deadline (rate), None if
            none does within ``MAX_SLICES`` (the CPU bound: see ``cores_needed``); slices_point:
            the fewest whose estimate does.
        job_s: the job's time on ``on_slices`` slices (those asked with ``slices=``, else
            ``slices``, else ``slices_point``, else the measured number): the two limits'
            estimates' geometric mean, from the random limit's lower prediction bound to the
            lockstep limit's upper one; by_limit: each limit's own estimate.
        bound: ``latency`` (waits dominate), ``one target`` (every target in flight at once)
            or ``cpu`` (the CPU station at least ``CPU_BOUND`` busy), what sets job_s.
        cpu_busy: the CPU station's utilisation on ``on_slices`` slices (random limit; 0–1).
        cap: the targets each slice keeps in flight in the answer (the measured cap unless asked).
        cores_needed: management cores the asked rate (or N by the deadline) needs at C per
            target, an estimate with its interval.
        extrapolated: one sentence per way the answer goes beyond what was measured.
    """

    measured: Measured
    targets: int
    deadline_s: float | None
    rate_per_min: float | None
    cores: int
    slices: int | None
    slices_point: int | None
    job_s: stats.Estimate
    bound: str
    cores_needed: stats.Estimate
    extrapolated: list[str] = field(default_factory=list)
    model: str = MODEL
    on_slices: int = 1
    targets_apart: bool = False
    by_limit: dict[str, stats.Estimate] = field(default_factory=dict)
    cpu_busy: float = 0.0
    cap: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON: every attribute, estimates as ``{value, low, high, level, n}``."""
        m = self.measured
        est = lambda e: {"value": e.value, "low": e.low, "high": e.high, "level": e.level, "n": e.n}  # noqa: E731
        return {"kind": "job-plan", "configuration": m.configuration, "level": m.level, "targets": self.targets,
                "deadline_s": self.deadline_s, "rate_per_min": self.rate_per_min, "cores": self.cores,
                "targets_apart": self.targets_apart,
                "slices": self.slices, "slices_point": self.slices_point, "on_slices": self.on_slices, "cap": self.cap,
                "job_s": est(self.job_s), "job_s_by_limit": {k: est(v) for k, v in self.by_limit.items()},
                "bound": self.bound, "cpu_busy": self.cpu_busy, "cores_needed": est(self.cores_needed),
                "extrapolated": self.extrapolated, "model": self.model,
                "measured": {"targets": m.targets, "slices": m.slices, "cap": m.cap, "in_flight": m.in_flight,
                             "concurrency": m.concurrency, "cores": m.cores, "blocks": m.blocks,
                             "target_s": [m.target_s[b] for b in m.blocks],
                             "wait_s": [m.wait_s.get(b, 0.0) for b in m.blocks],
                             "cpu_ns_per_target": [m.cpu_ns[b] for b in m.blocks],
                             "agent_cpu_ns_per_target": [m.agent_cpu_ns.get(b, 0.0) for b in m.blocks]}}


@dataclass(frozen=True)
class Model:
    """The planner's model of a measured level, ready to predict. Per block (``Measured.blocks``):
    the CPU station's demand (s per target) on ``cores`` CPUs, and per limit the ``base`` (s: the
    measured time in flight less the station's time at the measured concurrency) and the
    ``think`` time (s: waits and the calibrated unexplained delay, what the targets do away from
    the station, which sets how loaded the station is under random arrivals). A prediction is
    the measured time plus the station's change: T(n) = base + station time at n."""

    cores: int
    demand_s: np.ndarray
    base_s: dict[str, np.ndarray]
    think_s: dict[str, np.ndarray]

    def target_s(self, limit: str, in_flight: int) -> np.ndarray:
        """T(n), s per block, with ``in_flight`` targets in flight under ``limit``."""
        think = self.think_s[limit]
        t = self.base_s[limit] + queueing.time_s(limit, self.demand_s, self.cores, think, in_flight) - think
        return np.maximum(t, in_flight * self.demand_s / self.cores)  # never faster than the CPU allows

    def job_s(self, limit: str, targets: int, slices: int, cap: int) -> np.ndarray:
        """J(k), s per block: ``targets`` on ``slices`` slices of ``cap``."""
        n = max(1, min(targets, slices * cap))
        return targets * self.target_s(limit, n) / n

    def busy(self, targets: int, slices: int, cap: int) -> float:
        """The CPU station's utilisation (0–1, median over blocks, random limit)."""
        n = max(1, min(targets, slices * cap))
        x = n / self.target_s("random", n)
        return float(np.median(np.minimum(x * self.demand_s / self.cores, 1.0)))


def model_of(m: Measured, cores: int | None = None) -> Model:
    """The ``Model`` of ``m``: calibrated on the measured host (C + A per target on its CPUs at
    the measured concurrency), then predicting for the measured host (``cores`` None) or for a
    management server of ``cores`` CPUs whose targets are apart (their CPU, A, a delay)."""
    if not m.blocks:
        raise EconomicsError(f"{m.configuration} at {m.level} has no measured job with a time and CPU")
    mgmt, agents = m.per_block(m.cpu_ns, 1e-9), m.per_block(m.agent_cpu_ns, 1e-9)
    waits, measured = m.per_block(m.wait_s), m.per_block(m.target_s)
    host, n = mgmt + agents, m.concurrency
    base, think = {}, {}
    for limit in queueing.LIMITS:
        z = queueing.unexplained_delay_s(limit, measured, host, m.cores, waits, n)
        think[limit] = waits + z
        at_run = queueing.time_s(limit, host, m.cores, think[limit], n) - think[limit]
        base[limit] = measured - at_run + (agents if cores is not None else 0.0)
    if cores is None:
        return Model(m.cores, host, base, think)
    return Model(cores, mgmt, base, think)


def job_times(m: Measured, targets: int, slices: int, cores: int | None = None) -> dict[str, np.ndarray]:
    """J(k) per measured job (s, block order) under each limit (``queueing.LIMITS``) for
    ``targets`` on ``slices`` slices: on the measured host (``cores`` None) or on a management
    server of ``cores`` CPUs with its targets apart."""
    model = model_of(m, cores)
    return {limit: model.job_s(limit, targets, slices, m.cap) for limit in queueing.LIMITS}


def predict(values: Sequence[float], level: float = BAND_LEVEL) -> stats.Estimate:
    """The geometric mean of ``values`` with a ``level`` prediction interval for one more value
    (log scale: t(level, n − 1) × sd × sqrt(1 + 1/n)); bounds None with fewer than 2 values."""
    logs = np.log(np.asarray(values, dtype=float))
    n = logs.size
    mean = float(np.exp(logs.mean()))
    if n < 2:
        return stats.Estimate(mean, None, None, level, n)
    half = stats.t_quantile(level, n - 1) * float(logs.std(ddof=1)) * math.sqrt(1 + 1 / n)
    return stats.Estimate(mean, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half)), level, n)


def measured_point(p: fleet.JobPoint) -> Measured:
    """The ``Measured`` of one job cell's figures (its ``representative`` job gives the scale).
    Raises EconomicsError when fewer than 2 of its jobs measured a time and CPU."""
    job = p.representative
    if job is None:
        raise EconomicsError(f"{p.point.series} at {p.point.load.label} has no measured job")
    sides = p.point.cpu_ns_per_tx_by_block
    m = Measured(p.point.series, p.point.load.label, job.targets, job.slices, job.cap, p.most_in_flight or job.cap,
                 int(job.host_cpus or 1), dict(p.target_s_by_block), dict(sides.get("client", {})),
                 dict(sides.get("server", {})), dict(p.wait_s_by_block), job.cpus_apart())
    if len(m.blocks) < 2:
        raise EconomicsError(f"{m.configuration} at {m.level} has {len(m.blocks)} measured job(s) with times and CPU; "
                             "the planner's interval needs at least 2 (run the study with more blocks)")
    return m


def measured_level(figures: fleet.FleetFigures, configuration: str | None, targets: int | None,
                   label: str | None = None) -> Measured:
    """The ``Measured`` of one job kind (operation ``label``; needed when the run has several) of
    one configuration (default: the baseline's, else the first) at the level of ``targets``
    targets (default: the largest). Raises EconomicsError when the run has none of these, several
    job kinds and no ``label``, or fewer than 2 jobs."""
    fams = [f for f in figures.families if any(p.point.measured for p in f.points)]
    if not fams:
        raise EconomicsError("the run has no measured fleet jobs: plan --targets needs a fleet-job study's run")
    labels = [f.family.label for f in fams]
    if label is None and len(fams) > 1:
        raise EconomicsError(f"the run's fleet jobs are {', '.join(labels)}: say which with --op")
    chosen_fam = [f for f in fams if label is None or f.family.label == label]
    if not chosen_fam:
        raise EconomicsError(f"--op {label}: the run's fleet jobs are {', '.join(labels)}")
    points = [p for p in chosen_fam[0].points if p.point.measured]
    names = list(dict.fromkeys(p.point.series for p in points))
    if configuration is None:
        base = [p.point.series for p in points if p.point.is_baseline]
        configuration = base[0] if base else names[0]
    if configuration not in names:
        raise EconomicsError(f"--configuration {configuration}: the run's fleet jobs ran {', '.join(names)}")
    mine = [p for p in points if p.point.series == configuration and p.representative is not None]
    levels = sorted({p.representative.targets for p in mine})
    if targets is None:
        targets = levels[-1]
    chosen = [p for p in mine if p.representative.targets == targets]
    if not chosen:
        raise EconomicsError(f"--level {targets}: {configuration} ran jobs of {', '.join(map(str, levels))} targets")
    return measured_point(chosen[0])


def between(lower: stats.Estimate, upper: stats.Estimate) -> stats.Estimate:
    """One estimate from the two limits': the geometric mean of their values, from the lower
    limit's lower bound to the upper limit's upper bound (bounds None when either has none)."""
    value = math.sqrt(lower.value * upper.value)
    if lower.low is None or upper.high is None:
        return stats.Estimate(value, None, None, lower.level, lower.n)
    return stats.Estimate(value, min(lower.low, value), max(upper.high, value), lower.level, lower.n)


def plan_job(m: Measured, targets: int, deadline_s: float | None = None, rate_per_min: float | None = None,
             cores: int | None = None, slices: int | None = None, cap: int | None = None) -> JobPlan:
    """Slices for ``targets`` targets by ``deadline_s`` (or at ``rate_per_min`` targets per
    minute) from ``m`` — on the measured host (``cores`` None: management and targets share its
    CPUs, as measured) or on a management server of ``cores`` CPUs with its targets apart — and
    the job's time on them; with ``slices``, the job's time on that many (and whether it meets a
    deadline given); with ``cap``, slices of that cap rather than the measured one. See the
    module's documentation. Raises EconomicsError for a non-positive input, both deadline and
    rate, or none of deadline, rate and slices."""
    if targets < 1:
        raise EconomicsError(f"--targets must be at least 1, not {targets}")
    if deadline_s is not None and rate_per_min is not None:
        raise EconomicsError("give either --deadline (the job's time, e.g. 10m) or --rate (targets per minute), not both")
    if deadline_s is None and rate_per_min is None and slices is None:
        raise EconomicsError("give --deadline (e.g. 10m), --rate (targets per minute) or --slices K")
    if slices is not None and slices < 1:
        raise EconomicsError(f"--slices must be at least 1, not {slices}")
    if cores is not None and cores < 1:
        raise EconomicsError(f"--cores must be at least 1, not {cores}")
    if cap is not None and cap < 1:
        raise EconomicsError(f"--cap must be at least 1, not {cap}")
    cap = cap or m.cap
    deadline = (deadline_s if deadline_s is not None else targets / rate_per_min * 60.0
                if rate_per_min is not None else math.inf)
    model = model_of(m, cores)

    def limits(k: int) -> dict[str, stats.Estimate]:
        return {limit: predict(model.job_s(limit, targets, k, cap)) for limit in queueing.LIMITS}

    def est(k: int) -> stats.Estimate:
        e = limits(k)
        return between(e["random"], e["lockstep"])
    fixed, slices, slices_point = slices, None, None
    previous = math.inf
    for k in range(1, MAX_SLICES + 1 if math.isfinite(deadline) else 1):
        e = est(k)
        if slices_point is None and e.value <= deadline:
            slices_point = k
        if e.high is not None and e.high <= deadline:
            slices = k
            break
        if e.value >= previous * 0.999:
            break  # bounded by the CPU or by one target's time: more slices do not help
        previous = e.value
    k = fixed or slices or slices_point or m.slices
    by_limit = limits(k)
    busy = model.busy(targets, k, cap)
    bound = "cpu" if busy >= CPU_BOUND else "one target" if targets <= k * cap else "latency"
    # the management cores the CPU needs to finish by the deadline (or, with --slices alone, in the job's time)
    job_s = between(by_limit["random"], by_limit["lockstep"])
    within = deadline if math.isfinite(deadline) else job_s.value
    need = predict([targets * m.cpu_ns[b] / 1e9 / within for b in m.blocks])
    out = JobPlan(m, targets, deadline_s, rate_per_min, cores or m.cores, slices, slices_point, job_s, bound, need,
                  on_slices=k, targets_apart=cores is not None, by_limit=by_limit, cpu_busy=busy, cap=cap)
    out.extrapolated.extend(extrapolation(m, targets, k, cores, cap))
    return out


def extrapolation(m: Measured, targets: int, slices: int, cores: int | None, cap: int | None = None) -> list[str]:
    """A sentence per way ``slices`` slices of ``cap`` (default: the measured cap) on ``targets``
    targets with ``cores`` management cores (None: the measured host) go beyond what ``m``
    measured."""
    out = []
    in_flight = min(targets, slices * (cap or m.cap))
    measured = m.slices * min(m.cap, m.in_flight) if m.in_flight else m.slices * m.cap
    if in_flight > measured:
        out.append(f"{in_flight} targets in flight at once, more than the {measured} measured ({m.slices} slice(s) × "
                   f"cap {m.cap}): how T grows with them is the model's (between its two limits), and the CPU "
                   "per target is assumed not to grow")
    if targets > m.targets:
        out.append(f"{targets} targets, more than the {m.targets} of the measured jobs")
    if cores is not None:
        out.append(f"{cores} management cores with the targets on machines of their own, where the run had "
                   f"{m.cores} CPUs shared by the management server and its simulated targets: their CPU is "
                   "counted as the targets' time")
    return out


@dataclass(frozen=True)
class Saturation:
    """Where a measured level's CPU saturates on the measured host.

    Attributes:
        measured: the level; in_flight: targets in flight in its jobs (``Measured.concurrency``).
        cpu_busy: how busy its jobs kept the busiest CPUs (0–1): targets per second × CPU per
            target ÷ CPUs, median over the jobs — of the whole host, or, where the jobs pinned the
            management side and the simulated targets apart, of the busier side.
        busiest: which: ``host``, ``management`` (coordinator and slices) or ``targets`` (the
            agents).
        alone_s: a target's time in flight with nothing else in flight (the model at n = 1,
            random limit), s, median over the jobs.
        knee_in_flight: the targets in flight from which a CPU, not the waits, sets the job's
            pace: CPUs × alone_s ÷ CPU per target (the asymptotic bounds' N*: Lazowska et al.,
            "Quantitative System Performance", 1984, ch. 5), the smaller side's where apart,
            median over the jobs.
    """

    measured: Measured
    in_flight: int
    cpu_busy: float
    alone_s: float
    knee_in_flight: float
    busiest: str = "host"

    @property
    def cpu_bound(self) -> bool:
        """Whether a CPU paced the measured jobs: at or beyond the knee, or at least
        ``CPU_BOUND`` busy."""
        return self.in_flight >= self.knee_in_flight or self.cpu_busy >= CPU_BOUND


def saturation(m: Measured) -> Saturation:
    """The ``Saturation`` of ``m`` on its own host. Raises EconomicsError without measured jobs."""
    model = model_of(m)
    rate = m.concurrency / m.per_block(m.target_s)
    alone = model.target_s("random", 1)
    mgmt, agents = m.per_block(m.cpu_ns, 1e-9), m.per_block(m.agent_cpu_ns, 1e-9)
    sides = {"host": (mgmt + agents, m.cores)}
    if m.apart is not None:
        sides = {"management": (mgmt, m.apart[0]), "targets": (agents, m.apart[1])}
    busy = {k: float(np.median(np.minimum(rate * d / h, 1.0))) for k, (d, h) in sides.items()}
    knee = {k: float(np.median(h * alone / np.maximum(d, 1e-12))) for k, (d, h) in sides.items()}
    busiest = max(busy, key=busy.get)
    return Saturation(m, m.concurrency, busy[busiest], float(np.median(alone)), min(knee.values()), busiest)
