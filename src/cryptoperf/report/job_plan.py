"""``cryptoperf plan --targets N --deadline D``: the fleet-job planner's answer
(``economics.jobs.JobPlan``) as text, JSON or Markdown. Formatting only: every figure is the
planner's."""

from __future__ import annotations

import json

from cryptoperf.economics.jobs import JobPlan
from cryptoperf.report import text as fmt


def _duration(s: float | None) -> str:
    """``9 min 40 s``, ``48.2 s``, ``1 h 05 min``; '—' for None."""
    if s is None:
        return "—"
    if s >= 3600:
        return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"
    if s >= 120:
        return f"{int(s // 60)} min {int(round(s % 60)):02d} s"
    return f"{s:.3g} s"


def _estimate(e) -> str:
    """``9 min 40 s [8 min 50 s, 10 min 35 s]``."""
    if e.low is None or e.high is None:
        return _duration(e.value)
    return f"{_duration(e.value)} [{_duration(e.low)}, {_duration(e.high)}]"


def lines(p: JobPlan) -> list[str]:
    """The answer, a line each: the question, the slices, the job's time with its interval and
    bound, the cores the CPU needs, what it is computed from, the model, and every
    extrapolation."""
    m = p.measured
    goal = (f"by a deadline of {_duration(p.deadline_s)}" if p.deadline_s is not None
            else f"at {fmt.fmt_count(p.rate_per_min)} targets/min" if p.rate_per_min is not None
            else f"on {p.on_slices} slice(s)")
    level = f"{round(p.job_s.level * 100)} % prediction interval for one job"
    where = (f"a management server of {p.cores} core(s), targets apart" if p.targets_apart
             else f"the measured host's {p.cores} CPU(s), shared with the simulated targets as measured")
    out = [f"{p.targets} targets {goal}, configuration {m.configuration}, cap {p.cap or m.cap} per slice, on {where}:"]
    if p.deadline_s is None and p.rate_per_min is None:
        pass
    elif p.slices is not None:
        out.append(f"  slices needed: {p.slices} (the {level} ends within it); the estimate alone would "
                   f"take {p.slices_point}")
    elif p.slices_point is not None:
        out.append(f"  slices needed: {p.slices_point} on the estimate, but no number of slices keeps the whole "
                   f"{level} within it")
    else:
        out.append("  no number of slices meets it: " + ("the management CPU bounds the job"
                                                          if p.bound == "cpu" else "one target alone takes longer"))
    k = p.on_slices
    out.append(f"  job time on {k} slice(s): {_estimate(p.job_s)} ({level}); bound: {p.bound}, "
               f"CPU {p.cpu_busy * 100:.0f} % busy")
    if p.by_limit:
        lo, hi = p.by_limit.get("random"), p.by_limit.get("lockstep")
        if lo is not None and hi is not None:
            out.append(f"  the model's limits: random arrivals {_estimate(lo)}, lockstep {_estimate(hi)}")
    need = p.cores_needed
    rng = f" [{need.low:.2g}, {need.high:.2g}]" if need.low is not None and need.high is not None else ""
    out.append(f"  management CPU: {need.value:.2g}{rng} cores busy " + (
        "to finish in time" if p.deadline_s is not None or p.rate_per_min is not None else "over the job"))
    out.append(f"  from {len(m.blocks)} measured jobs of {m.targets} targets ({m.level}) on {m.slices} slice(s), "
               f"{m.cores} CPUs: a target in flight for {_duration(float(sum(m.target_s.values()) / len(m.target_s)))} "
               f"on average ({_duration(float(sum(m.wait_s.values()) / len(m.wait_s)) if m.wait_s else 0.0)} of it "
               f"waiting), {fmt.fmt_us(sum(m.cpu_ns.values()) / len(m.cpu_ns))} µs of management CPU and "
               f"{fmt.fmt_us(sum(m.agent_cpu_ns.values()) / len(m.agent_cpu_ns) if m.agent_cpu_ns else 0.0)} µs "
               f"of the targets' each, {m.concurrency} in flight")
    out.append(f"  model: {p.model}")
    for x in p.extrapolated:
        out.append(f"  extrapolated: {x}")
    if not p.extrapolated:
        out.append("  within what was measured (targets in flight, number of targets, cores)")
    return out


def render(p: JobPlan, run_id: int | str, form: str) -> str:
    """``p`` as ``text``, ``json`` or ``md``, ending in a newline. Raises ValueError for
    another format (html is not made for a job plan)."""
    if form == "text":
        return "\n".join(lines(p)) + "\n"
    if form == "json":
        return json.dumps({**p.as_dict(), "run": run_id}, indent=1) + "\n"
    if form == "md":
        head, *rest = lines(p)
        return f"**{head}**\n\n" + "\n".join(f"- {x.strip()}" for x in rest) + "\n"
    raise ValueError(f"plan --targets writes text, json or md, not {form}")
