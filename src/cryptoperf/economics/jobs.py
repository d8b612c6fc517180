"""Planning a fleet job against a deadline: how many slices (the management server's workers)
finish N targets in time, and how long the job then takes, from a measured fleet-job run.

**The model.** A slice keeps at most ``cap`` targets in flight; each target is in flight for a
time T (its phases, waits and cryptography: the run's measured mean per job). By Little's law a
slice then completes ``cap / T`` targets per second while it has at least ``cap`` targets left;
``k`` slices complete ``k · cap / T``. The management server's CPU bounds that: with ``H`` cores
and C of CPU per target (the run's management side: coordinator and slices, per completed
target), no number of slices completes more than ``H / C`` targets per second. A job of N
targets on k slices therefore takes

    J(k) = max(N · T / (k · cap),  T,  N · C / H)

— the first term while the slices are latency-bound, the second when every target is in flight
at once (the job is one target's time), the third when the CPU is the limit.

**The interval.** Each measured job (block) gives its own T and C, so each gives its own J(k);
the answer is their geometric mean with a *prediction* interval for one more job (t quantile ×
the spread of log J × sqrt(1 + 1/n)), not the narrower interval of the mean: a deadline is met
or missed by the next job, not by the average one. The slices needed are the fewest whose
interval's upper end meets the deadline (and, beside it, the fewest whose estimate does).

**Validity.** The model holds where it was measured: T and C are taken at the run's
concurrency (slices × cap targets in flight) and number of targets. More targets in flight than
any measured job had, or more targets than any measured job ran, is an extrapolation: the answer
says so, with the measured range, and that CPU per target and T may grow with concurrency (the
agents and slices of a one-host run share its CPUs). It never hides one.

Errors: ``EconomicsError`` (exit 2) for a run without fleet jobs, a configuration or level it
does not have, a non-positive target count, deadline or rate, or a level with fewer than 2
measured jobs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from cryptoperf import stats
from cryptoperf.economics.cost import EconomicsError
from cryptoperf.workloads import fleet
from cryptoperf.workloads.generic import BAND_LEVEL

#: Most slices the planner considers.
MAX_SLICES = 10_000
#: The model in one line, as every answer states it.
MODEL = ("J(k) = max(N·T/(k·cap), T, N·C/H): Little's law per slice (cap targets in flight, each for T), "
         "bounded by the management CPU (C per target on H cores)")

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
    flight, s) and ``cpu_ns`` (management CPU per completed target, ns), with the job's scale
    (``targets``, ``slices``, ``cap``, ``in_flight``: the most one slice had at once) and the
    ``cores`` (CPUs) it ran on."""

    configuration: str
    level: str
    targets: int
    slices: int
    cap: int
    in_flight: int
    cores: int
    target_s: dict[int, float]
    cpu_ns: dict[int, float]

    @property
    def blocks(self) -> list[int]:
        """Blocks that measured both figures, in order."""
        return sorted(b for b in self.target_s if b in self.cpu_ns)


@dataclass(frozen=True)
class JobPlan:
    """The planner's answer.

    Attributes:
        measured: what it is computed from; targets: N asked; deadline_s: the deadline (None
            with a rate); rate_per_min: the rate asked (None with a deadline); cores: H, the
            management server's cores assumed.
        slices: the fewest slices whose prediction interval meets the deadline (rate), None if
            none does within ``MAX_SLICES`` (the CPU bound: see ``cores_needed``); slices_point:
            the fewest whose estimate does.
        job_s: the job's time on ``on_slices`` slices (those asked with ``slices=``, else
            ``slices``, else ``slices_point``, else the measured number), a geometric mean over
            the measured jobs with its prediction interval.
        bound: ``latency`` (cap / T per slice), ``one target`` (every target in flight at once)
            or ``cpu`` (the management CPU), the term of the model that sets job_s.
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

    def as_dict(self) -> dict[str, Any]:
        """JSON: every attribute, estimates as ``{value, low, high, level, n}``."""
        m = self.measured
        est = lambda e: {"value": e.value, "low": e.low, "high": e.high, "level": e.level, "n": e.n}  # noqa: E731
        return {"kind": "job-plan", "configuration": m.configuration, "level": m.level, "targets": self.targets,
                "deadline_s": self.deadline_s, "rate_per_min": self.rate_per_min, "cores": self.cores,
                "slices": self.slices, "slices_point": self.slices_point, "on_slices": self.on_slices,
                "job_s": est(self.job_s),
                "bound": self.bound, "cores_needed": est(self.cores_needed), "extrapolated": self.extrapolated,
                "model": self.model,
                "measured": {"targets": m.targets, "slices": m.slices, "cap": m.cap, "in_flight": m.in_flight,
                             "cores": m.cores, "blocks": m.blocks,
                             "target_s": [m.target_s[b] for b in m.blocks],
                             "cpu_ns_per_target": [m.cpu_ns[b] for b in m.blocks]}}


def job_times(m: Measured, targets: int, slices: int, cores: int) -> tuple[np.ndarray, list[str]]:
    """J(k) per measured job (s, block order) for ``targets`` on ``slices`` slices with
    ``cores`` management cores, and per job the bounding term (``MODEL``)."""
    out, why = [], []
    for b in m.blocks:
        t, c = m.target_s[b], m.cpu_ns[b] / 1e9
        terms = {"latency": targets * t / (slices * m.cap), "one target": t, "cpu": targets * c / cores}
        bound = max(terms, key=terms.get)
        out.append(terms[bound])
        why.append(bound)
    return np.asarray(out), why


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


def measured_level(figures: fleet.FleetFigures, configuration: str | None, targets: int | None) -> Measured:
    """The ``Measured`` of one configuration at one level of a run's fleet jobs: ``configuration``
    (default: the baseline's, else the only one) at the level of ``targets`` targets (default:
    the largest). Raises EconomicsError when the run has none of either, or fewer than 2 jobs."""
    points = [p for f in figures.families for p in f.points if p.point.measured]
    if not points:
        raise EconomicsError("the run has no measured fleet jobs: plan --targets needs a fleet-job study's run")
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
    p = chosen[0]
    job = p.representative
    cpu = dict(p.point.cpu_ns_per_tx_by_block.get("client", {}))
    m = Measured(configuration, p.point.load.label, job.targets, job.slices, job.cap, p.most_in_flight or job.cap,
                 int(job.host_cpus or 1), dict(p.target_s_by_block), cpu)
    if len(m.blocks) < 2:
        raise EconomicsError(f"{configuration} at {m.level} has {len(m.blocks)} measured job(s) with times and CPU; "
                             "the planner's interval needs at least 2 (run the study with more blocks)")
    return m


def plan_job(m: Measured, targets: int, deadline_s: float | None = None, rate_per_min: float | None = None,
             cores: int | None = None, slices: int | None = None) -> JobPlan:
    """Slices for ``targets`` targets by ``deadline_s`` (or at ``rate_per_min`` targets per
    minute) from ``m`` on ``cores`` management cores (default: the measuring host's), and the
    job's time on them; with ``slices``, the job's time on that many (and whether it meets a
    deadline given). See the module's documentation. Raises EconomicsError for a non-positive
    input, both deadline and rate, or none of deadline, rate and slices."""
    if targets < 1:
        raise EconomicsError(f"--targets must be at least 1, not {targets}")
    if deadline_s is not None and rate_per_min is not None:
        raise EconomicsError("give either --deadline (the job's time, e.g. 10m) or --rate (targets per minute), not both")
    if deadline_s is None and rate_per_min is None and slices is None:
        raise EconomicsError("give --deadline (e.g. 10m), --rate (targets per minute) or --slices K")
    if slices is not None and slices < 1:
        raise EconomicsError(f"--slices must be at least 1, not {slices}")
    cores = cores or m.cores
    if cores < 1:
        raise EconomicsError(f"--cores must be at least 1, not {cores}")
    deadline = (deadline_s if deadline_s is not None else targets / rate_per_min * 60.0
                if rate_per_min is not None else math.inf)

    def est(k: int) -> stats.Estimate:
        return predict(job_times(m, targets, k, cores)[0])
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
    times, bounds = job_times(m, targets, k, cores)
    job_s = predict(times)
    # the cores the CPU needs to finish by the deadline (or, with --slices alone, in job_s)
    within = deadline if math.isfinite(deadline) else job_s.value
    need = predict([targets * m.cpu_ns[b] / 1e9 / within for b in m.blocks])
    out = JobPlan(m, targets, deadline_s, rate_per_min, cores, slices, slices_point, job_s,
                  max(set(bounds), key=bounds.count), need, on_slices=k)
    out.extrapolated.extend(extrapolation(m, targets, k, cores))
    return out


def extrapolation(m: Measured, targets: int, slices: int, cores: int) -> list[str]:
    """A sentence per way ``slices`` slices on ``targets`` targets with ``cores`` cores go
    beyond what ``m`` measured."""
    out = []
    in_flight = min(targets, slices * m.cap)
    measured = m.slices * min(m.cap, m.in_flight) if m.in_flight else m.slices * m.cap
    if in_flight > measured:
        out.append(f"{in_flight} targets in flight at once, more than the {measured} measured ({m.slices} slice(s) × "
                   f"cap {m.cap}): T and the CPU per target are assumed not to grow with concurrency")
    if targets > m.targets:
        out.append(f"{targets} targets, more than the {m.targets} of the measured jobs")
    if cores != m.cores:
        out.append(f"{cores} management cores, where the run had {m.cores} (shared with the simulated targets' "
                   "agents): the CPU bound scales with them")
    return out
