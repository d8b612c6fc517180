"""What `cryptoperf study` says around a run, as lines of text: the plan before it (cells,
repetitions, time; a resumed run; the Ray cluster), a dry run's schedule, and the footer after
it (failed and re-run repetitions, where the results are). The CLI prints them; a Python user
can print them too. No Rich: plain strings.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from cryptoperf import builds, cpumask
from cryptoperf.model import FAILED, RETRIED
from cryptoperf.report.text import detectable_text


def duration_text(seconds: float) -> str:
    """``42 s`` below 90 s, ``3.5 min`` above."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def plan_line(plan: Any) -> str:
    """``study NAME: N cells, N calibration repetitions + B blocks = R repetitions, about T;
    block order seed S``, with the sequential looks when the study runs on for inconclusive
    comparisons and its worst-case time (every comparison to the last look: ``at most about
    T``), and whether the seed is the study file's (else drawn for this run). ``plan`` is an
    ``engine.PreparedStudy``; both times are its ``estimated_seconds``, which include what a first
    run builds before it measures (``first_builds``, named); with ``explain = true``, what is
    explained after it."""
    s, n = plan.study, len(plan.cells)
    more = (f", then up to {s.max_repetitions} blocks for inconclusive comparisons (looks at "
            f"{', '.join(map(str, plan.looks))}), at most about {duration_text(plan.worst_case_seconds())}"
            if len(plan.looks) > 1 else "")
    seed = f"block order seed {plan.seed}" + (" (the study file's)" if s.seed is not None else "")
    first = plan.first_builds
    building = (f" (of which {duration_text(sum(first.values()))} to build first: {', '.join(first)})"
                if first else "")
    explain = ""
    if s.explain:
        from cryptoperf.explain.pair import STUDY_BLOCKS
        explain = (f"; then (explain = true) each decided comparison (up to {plan.comparisons}) in "
                   f"{STUDY_BLOCKS} profiled blocks of 2 repetitions under perf")
    return (f"study {s.name}: {n} cells, {n} calibration repetitions + {s.repetitions} blocks = "
            f"{n * (s.repetitions + 1)} repetitions, about {duration_text(plan.estimated_seconds())}{building}"
            f"{more}{explain}; {seed}")


def power_line(plan: Any) -> str:
    """``power: 80 % of the time, a comparison finds a change of X % at CV 3 % per repetition
    (N blocks, M comparisons adjusted together)`` — with the last look's figure for a sequential
    study, and the study's ``power_note`` (why not 5 %) when by its last look it misses 5 %
    (``PreparedStudy.misses_design_change``). ``plan`` is an ``engine.PreparedStudy``."""
    first, last = plan.smallest_effect()
    m = plan.comparisons
    adjusted = f", {m} comparisons adjusted together" if plan.analysis.multiplicity and m > 1 else ""
    text = (f"power: 80 % of the time a comparison finds {detectable_text(first)} at CV 3 % per repetition "
            f"({plan.looks[0]} blocks{adjusted})")
    if len(plan.looks) > 1:
        text += f", {detectable_text(last)} by its last look ({plan.looks[-1]} blocks)"
    if plan.study.power_note and plan.misses_design_change():
        text += f"; not 5 %, because {plan.study.power_note}"
    return text


def power_warning(plan: Any) -> str | None:
    """The warning that a design misses a 5 % change at CV 3 % by its last look
    (``PreparedStudy.misses_design_change``) and its study does not say why (``power_note``);
    None otherwise. ``plan`` is an ``engine.PreparedStudy``."""
    if plan.study.power_note or not plan.misses_design_change():
        return None
    by_last = " by its last look" if len(plan.looks) > 1 else ""
    return (f"warning: 80 % of the time this design finds {detectable_text(plan.smallest_effect()[1])} at "
            f"CV 3 %{by_last}, not 5 %: a question about a few per cent needs more blocks or "
            'until = "decided" (or say why not in [study] power_note)')


def resume_line(prior: Any, plan: Any = None) -> str:
    """The line that says a run is resumed: its id, start, status, what is kept and, given the
    ``plan`` (``engine.PreparedStudy``), about how long the missing repetitions of its first look
    take (the plan's time per repetition × those left; the plan line's time is the whole
    study's). ``prior`` is the stored run (``stored.StoredRun``)."""
    kept = sum(1 for o in prior.outcomes if not o.superseded)
    left = ""
    if plan is not None:
        planned = len(plan.cells) * (plan.study.repetitions + 1)
        missing = max(planned - kept, 0)
        left = f", about {duration_text(plan.estimated_seconds() * missing / planned)} left" if planned else ""
    return (f"resuming run {prior.id} (started {prior.meta.get('started_at')}, {prior.meta.get('status')}): "
            f"{kept} repetitions kept; only the missing ones run{left}")


def cluster_line(cluster: Mapping[str, Any]) -> str:
    """The Ray cluster a study runs on: its address and the nodes checked (the first six)."""
    nodes = cluster.get("nodes") or []
    how = ", every node runs every cell" if cluster.get("every_node") else ", one block per node at a time"
    shown = ", ".join(f"{n.get('hostname')} ({n.get('address')})" for n in nodes[:6])
    return (f"ray: {cluster.get('address')}, {len(nodes)} node(s) checked{how}: {shown}"
            + (" …" if len(nodes) > 6 else ""))


def schedule_lines(plan: Any, unsupported: Mapping[str, str]) -> list[str]:
    """A dry run's schedule: one line per repetition of the first look's blocks — its place,
    cell, worker operation and parameters (the worker's default size filled in and said), the
    worker binary of a build other than the default, the CPU mask's environment, and whether the
    worker said it cannot run it (``unsupported``: cell key → why)."""
    out = []
    for r in plan.first_blocks:
        c = r.cell
        mask = f"  {cpumask.ENV_VAR}={cpumask.value(c.cpu)}" if c.cpu != cpumask.BASELINE else ""
        if c.build == builds.DEFAULT:
            binary = ""
        elif c.build in plan.workers:
            binary = f"  worker={plan.workers[c.build][0]}"
        else:
            binary = f"  worker=(not built yet: `{builds.get(c.build).make}`)"
        params = c.worker_params()
        size = plan.default_size(c)
        default = ""
        if c.size_bytes is None and size is not None:
            params["size_bytes"] = size
            default = "  (the worker's default size)"
        note = f"  UNSUPPORTED ({unsupported[c.key]}): calibration only" if c.key in unsupported else ""
        out.append(f"{r.index + 1:>4}  block {r.block} #{r.position + 1}  {c.key}  op={c.op} "
                   f"params={json.dumps(params)}{default}{binary}{mask}{note}")
    return out


def unsupported_line(unsupported: Mapping[str, str], cells: int) -> str:
    """How many of ``cells`` the worker cannot run, with the first three reasons."""
    shown = "; ".join(f"{k}: {v}" for k, v in list(unsupported.items())[:3])
    return (f"{len(unsupported)} of {cells} cells are unsupported by the worker and will not be repeated: "
            f"{shown}" + (" …" if len(unsupported) > 3 else ""))


def footer_lines(run: Any) -> list[str]:
    """After a study: failed repetitions, disturbed ones run again, Ray blocks retried, and where
    the results, the store row and the reports are. ``run`` is the ``StudyRun``."""
    out = []
    analysed = [o for o in run.outcomes if not o.repetition.calibration and not o.superseded]
    failed = sum(1 for o in analysed if o.status == FAILED)
    if failed:
        out.append(f"{failed} of {len(analysed)} repetitions failed (reasons in the tables and the JSON)")
    reruns = sum(1 for o in run.outcomes if o.superseded and not o.disturbed.startswith(RETRIED))
    if reruns:
        out.append(f"{reruns} repetition(s) were disturbed by steal or other load and run again "
                   "(see the noise table's 'disturbed' column)")
    line = constant_load_line(run)
    if line:
        out.append(line)
    if run.executor == "ray":
        out.append(f"ray: {run.retried_blocks} block(s) retried after losing their worker or node, "
                   f"{run.failed_blocks} failed" + (" (reasons in the tables and the JSON)" if run.failed_blocks else ""))
    out.append(f"results: {run.json_path}  store: {run.store_path} (run {run.id})")
    if run.reports:
        out.append(f"report: {run.reports['html']}  summary: {run.reports['md']}")
    return out


def busy_line(busy: Any) -> str | None:
    """The one line saying that the host was already busy when the study started (``busy``: the
    engine's ``run.disturbance.Busy``, or None when it was not), in CPUs."""
    if busy is None:
        return None
    used = (f"{busy.cpus_used:.1f} of {busy.cpus} CPUs" if busy.cpus_used is not None
            else f"{busy.level_pct:.0f} % of the CPUs")
    return (f"host busy: {used} used by other processes (measured over {busy.window_s:g} s before "
            "the study); comparisons stay paired, a repetition is re-run only when the load departs from "
            "this level")


def constant_load_line(run: Any) -> str | None:
    """After a study: how many analysed repetitions ran above ``max_other_load_pct`` beside a
    steady load and were kept (the analysis's ``constant_load``), at what level; None when
    none did. ``run`` is a stored study run."""
    study = getattr(run, "study", None)
    c = run.analysis.constant_load if study is not None else None
    if c is None:
        return None
    cpus = f" (~{c.cpus:.1f} CPUs)" if c.cpus else ""
    return (f"{c.repetitions} repetition(s) ran beside a steady other load of {c.level_pct:.0f} % of the CPUs"
            f"{cpus}, above the {study.max_other_load_pct:g} % limit, and were kept, not re-run: every "
            "configuration of their block shared it")


def hosts_note(study: Any, executor: str) -> str | None:
    """The note that a study's hosts apply only to the Ray executor, when it names hosts and runs
    on this machine; None otherwise."""
    if executor == "local" and (study.hosts or study.every_node or any(c.hosts for c in study.configurations)):
        return ("note: the study's hosts apply to --executor ray; the local executor runs every repetition "
                "on this machine")
    return None


def skipped_lines(skipped: Mapping[str, str]) -> Sequence[str]:
    """One line per ``optional`` operation left out: label and why."""
    return [f"skipped: operation '{label}' (optional): {why}" for label, why in skipped.items()]


def fips_lines(unapproved: Mapping[tuple[str, str], str]) -> list[str]:
    """One line per FIPS configuration's operation that the FIPS module does not approve
    ((configuration, label) → why): measured, but not an approved service."""
    return [f"note: configuration '{conf}' times {label!r} in FIPS mode, but it is not a FIPS-approved "
            f"service ({why}); its figures are the FIPS build's cost, not an approved configuration's"
            for (conf, label), why in unapproved.items()]
