"""Report sections of fleet jobs (the ``fleet-job`` workload: a management server's job over N
simulated targets, ``targets:N`` levels), registered like the core ones; each returns nothing for
a run without job cells.

19  fleet jobs: summary            — per job kind (the use case) and configuration: the change in
                                     targets per minute against the baseline at the largest
                                     level, with the study's interval, and a note: the other
                                     levels, the phases' changes, what ran
20  fleet jobs: throughput         — targets per minute against the number of targets, per
                                     configuration with its 95 % band; a table per level (job
                                     time, per-target time, failed targets, CPU per target of each
                                     side, the level's verdict)
20  fleet jobs: scalability        — where configurations differ in slices: the factor k slices
                                     ÷ the baseline's with its interval (the comparison's
                                     throughput ratio), and whether the host bounds it
23  fleet jobs: timeline           — one representative job per configuration at the largest
                                     level, as a Gantt chart by phase, with the targets in flight
                                     per slice against the cap
25  fleet jobs: time per phase     — median time of every phase per configuration and level, and
                                     its ratio to the baseline's with a 95 % interval over the
                                     blocks: descriptive, where the time went (no verdict)
44  fleet jobs: CPU over the job   — CPU % of every process (coordinator, slices, agents) over
                                     the representative job
45  fleet jobs: processes          — peak RSS and most descriptors open per process role, and
                                     every failed target with its phase and reason

Every figure is the analysis's (``cryptoperf.workloads.fleet``); the verdicts are the run's
comparisons (with ``verdict_on = "by_load"`` a job level is decided on throughput, targets per
unit of time).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Sequence

import numpy as np
from markupsafe import Markup

from cryptoperf import analysis
from cryptoperf.report import text as fmt
from cryptoperf.report import plots
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.sections.workloads import (colour, column, configuration, family_slug, family_title,
                                                  level_row, verdict_kind, verdict_text)
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.workloads import fleet
from cryptoperf.workloads.generic import BAND_LEVEL

#: Phase colours, in the worker's phase order; the job-level stage in grey.
PHASE_COLOURS = {"connect": "#4c72b0", "push": "#dd8452", "checks": "#55a868", "report": "#c44e52",
                 "stage": "#8c8c8c"}
#: The published job this workload scales down: a 500 MB package pushed to 70 targets.
REFERENCE_PACKAGE_BYTES = 500_000_000
#: Most failed targets listed one by one in the processes section (the rest are counted).
MAX_FAILURES_LISTED = 50


def _figures(run: StoredRun) -> fleet.FleetFigures | None:
    return run.analysis.workloads.of(fleet.KIND)


def _baseline(run: StoredRun) -> str:
    return run.study.baseline if run.study else ""


def _ms(ns: float | None) -> str:
    if ns is None:
        return "—"
    ms = ns / 1e6
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"


def _tpm(e) -> str:
    """``1,234 [1,200, 1,270]`` targets per minute, ``1,234`` without bounds, '—'."""
    return fmt.fmt_estimate(e, lambda x: f"{x:,.0f}" if x >= 100 else f"{x:.3g}")


def digest_name(name: str) -> str:
    """``sha1`` → ``SHA-1``, ``sha256`` → ``SHA-256``, ``sha3-256`` → ``SHA3-256``."""
    n = str(name).lower()
    return n.upper() if n.startswith("sha3") else n.upper().replace("SHA", "SHA-", 1)


def kind_text(fam: fleet.JobFamily) -> str:
    """What the family's job does and at what scale: ``audit: 192 checks of 4 KiB files; phases
    connect → checks → report``."""
    j = fam.example
    if j is None:
        return fam.family.label
    parts = []
    if j.push_bytes:
        size = fmt.fmt_size(j.item_bytes) or f"{j.item_bytes} B"
        what = f"a package of {size}" if j.items == 1 else f"{j.items} items of {size}"
        auth = "HMAC'd per target" if j.auth == "hmac" else "signed once per job, verified by the target"
        parts.append(f"push {what}, {auth}")
    if j.checks:
        parts.append(f"{j.checks} checks of {fmt.fmt_size(j.file_bytes)} files")
    phases = " → ".join(j.phases)
    return f"{j.job}: {'; '.join(parts)}; phases {phases}" if parts else f"{j.job}: phases {phases}"


def took_text(run: StoredRun) -> str:
    """How long the run took and on what host, in one sentence: ``This study took 10 min 12 s on
    a 2-CPU AMD EPYC host (Linux 6.18…), calibration included.``; '' without its times."""
    m = run.meta
    try:
        t0 = dt.datetime.fromisoformat(str(m["started_at"]).replace("Z", "+00:00"))
        t1 = dt.datetime.fromisoformat(str(m["finished_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return ""
    secs = int(round((t1 - t0).total_seconds()))
    return (f"This {m.get('kind') or 'run'} took {secs // 60} min {secs % 60} s on {fmt.host_text(run.host)}, "
            "calibration included.")


def scale_text(figures: fleet.FleetFigures) -> str:
    """How the jobs are scaled against the published measurements they model, in one paragraph."""
    kinds = {f.example.job: f.example for f in figures.families if f.example is not None}
    parts = []
    for name, j in kinds.items():
        if name == "remediate" and j.push_bytes:
            ratio = REFERENCE_PACKAGE_BYTES / j.push_bytes
            parts.append(f"remediate pushes a package of {fmt.fmt_size(j.push_bytes)} per target where the "
                         f"published job pushed 500 MB (about 1/{float(f'{ratio:.2g}'):,.0f} of it), to every target "
                         "of the level rather than to 70")
        elif name == "appconfig":
            parts.append(f"appconfig pushes {j.items} rules of {fmt.fmt_size(j.item_bytes)} (the published job's "
                         "100 rules)")
        elif name == "audit":
            parts.append(f"audit runs {j.checks} checks of {fmt.fmt_size(j.file_bytes)} files (the published "
                         "job's 192)")
    if not parts:
        return ""
    return ("Scale: " + "; ".join(parts) + ". Targets are simulated by agent processes on this host "
            "(each target its own certificate and TLS connection), so a target's own work competes with the "
            "management side for the host's CPUs.")


def _what_ran(p: fleet.JobPoint) -> str:
    """What a configuration ran that differs from its name's promise: signatures with another
    digest than the HMACs and file digests (the FIPS module refuses SHA-1 signatures)."""
    j = p.representative
    if j is None or not j.sign_digest or j.sign_digest == j.digest:
        return ""
    why = " (SHA-1 signing is not FIPS-approved)" if p.point.summary.cell.fips and j.digest == "sha1" else ""
    return f"ran {digest_name(j.digest)} for HMACs and digests, {digest_name(j.sign_digest)} for signatures{why}"


# ------------------------------------------------------------------------------ summary

def phases_text(level: fleet.JobLevel, series: str) -> str:
    """A configuration's phase changes against the baseline at one level, largest first, as
    descriptive figures (not verdicts): ``phase times (descriptive): connect +12 %, report
    +9 %, push -1 %``; '' without ratios."""
    mine = sorted((r for r in level.phases if r.series == series and r.ratio is not None),
                  key=lambda r: -abs(np.log(r.ratio.ratio)))
    if not mine:
        return ""
    return "phase times (descriptive): " + ", ".join(f"{r.phase} {fmt.change_point_text(r.ratio)}" for r in mine)


def summary_rows(run: StoredRun) -> list[dict[str, Any]]:
    """One row per job kind × configuration other than the baseline, at the largest level: the
    baseline's and its targets per minute, the comparison's throughput change with its
    interval, the verdict, and a note (the phases' changes, failed targets, what ran, the other
    levels' changes); [] without jobs."""
    figures, baseline = _figures(run), _baseline(run)
    out = []
    for fam in figures.families if figures else ():
        top = fam.largest
        if top is None:
            continue
        base = next((p for p in top.points if p.point.series == baseline), None)
        for p in top.points:
            if p is base or p.point.is_baseline:
                continue
            d = p.point.delta
            ok = d is not None and d.status == "ok" and d.throughput is not None
            others = [f"{q.point.load.label}: {fmt.change_point_text(q.point.delta.throughput)} "
                      f"({q.point.delta.verdict.kind})"
                      for lv in fam.levels if lv is not top for q in lv.points
                      if q.point.series == p.point.series and q.point.delta is not None
                      and q.point.delta.status == "ok" and q.point.delta.verdict is not None]
            lost = f"{p.failed} of {p.ran} targets failed" if p.failed else ""
            notes = [x for x in (phases_text(top, p.point.series), lost, _what_ran(p),
                                 ("other levels: " + "; ".join(others)) if others else "") if x]
            out.append({"use_case": fam.family.label, "configuration": configuration(p.point),
                        "level": p.point.load.label, "baseline": _tpm(base.targets_per_min if base else None),
                        "value": _tpm(p.targets_per_min), "delta": fmt.change_text(d.throughput) if ok else "—",
                        "verdict": verdict_text(p.point), "kind": verdict_kind(p.point), "note": "; ".join(notes),
                        "description": kind_text(fam)})
        out += contrast_rows(run, fam, top)
    return out


def contrast_rows(run: StoredRun, fam: fleet.JobFamily, top: fleet.JobLevel) -> list[dict[str, Any]]:
    """The study's ``[[contrast]]`` comparisons at a job kind's largest level, as summary rows
    (``summary_rows``' keys): e.g. FIPS on against off at the same number of slices."""
    points = {p.point.series: p for p in top.points}
    label = next(iter(points.values())).point.load.label if points else None
    out = []
    for d in run.analysis.deltas:
        if d.baseline == _baseline(run) or d.configuration not in points or d.baseline not in points:
            continue
        mine, ref = points[d.configuration], points[d.baseline]
        if mine.point.summary.cell.label != d.label or mine.point.summary.cell.backend != d.backend:
            continue
        ok = d.status == "ok" and d.throughput is not None and d.verdict is not None
        out.append({"use_case": fam.family.label, "configuration": f"{configuration(mine.point)} vs {d.baseline}",
                    "level": label, "baseline": _tpm(ref.targets_per_min), "value": _tpm(mine.targets_per_min),
                    "delta": fmt.change_text(d.throughput) if ok else "—",
                    "verdict": d.verdict.text if ok else (f"n/a: {d.reason}" if d.reason else "n/a"),
                    "kind": d.verdict.kind if ok else "na", "note": f"contrast: {_what_ran(mine)}".rstrip(": "),
                    "description": kind_text(fam)})
    return out


def _first_of_each(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with a use case's (long) description kept on its first row only."""
    seen: set[str] = set()
    out = []
    for r in rows:
        first = r["use_case"] not in seen
        seen.add(r["use_case"])
        out.append({**r, "description": r["description"] if first else ""})
    return out


@register(order=19)
def fleet_summary(run: StoredRun) -> list[Section]:
    """"Fleet jobs: summary": use case, configuration, performance delta with its interval,
    verdict and note, per job kind (``summary_rows``). Nothing without jobs."""
    figures = _figures(run)
    rows = summary_rows(run)
    if not rows:
        return []
    scale, took = scale_text(figures), took_text(run)
    metric = analysis.decided_on([p.point.delta for f in figures.families for p in f.points
                                  if p.point.delta is not None]) or run.analysis.settings.metric
    html = fragment("sections/fleet_summary.html.j2", rows=_first_of_each(rows), baseline=_baseline(run), method=run.analysis.method,
                    metric=metric, scale=scale, took=took, level=f"{BAND_LEVEL * 100:g}")
    md = (f"Change in targets per minute at the largest level against {_baseline(run)}, with the study's "
          f"interval; verdicts on {metric}. Phase times are descriptive (where the time went), not verdicts.\n\n"
          + md_table(["Use case", "Configuration", "Level", "Performance delta", "Verdict", "Note"],
                     [[r["use_case"], r["configuration"], r["level"], r["delta"], r["verdict"], r["note"]] for r in rows],
                     align="lllrll"))
    for line in (scale, took):
        if line:
            md += f"\n{line}\n"
    return [Section("fleet-summary", "Fleet jobs: summary", html, md)]


# ------------------------------------------------------------------------------ throughput

def throughput_svg(fam: fleet.JobFamily, plot_id: str) -> str:
    """Targets per minute against the number of targets (log x when the levels span ≥ 10×), a
    line per configuration through the geometric means of its jobs with their 95 % band. Line
    groups have ids ``<plot_id>-series-<configuration>``. Returns the SVG text."""
    fig = plots.figure(9.6, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    for series, order in fam.family.series():
        mine = sorted(((p.point.x, p.targets_per_min) for p in fam.points
                       if p.point.series == series and p.targets_per_min is not None), key=lambda t: t[0])
        if mine:
            plots.estimate_line(ax, mine, colour(order), series, plots.gid(series))
    plots.log_x(ax, [p.point.x for p in fam.points])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("targets in the job", fontsize=8.5)
    ax.set_ylabel("targets per minute (/min)", fontsize=8.5)
    ax.grid(True, color="#e5e5e5", linewidth=0.6)
    ax.tick_params(labelsize=8)
    plots.legend_below(fig, ax.get_legend_handles_labels()[0])
    title = f"throughput vs targets: {fam.family.label} on {fam.family.backend}"
    ax.set_title(title, fontsize=10, loc="left")
    fig.subplots_adjust(left=0.12, right=0.98, top=0.9, bottom=0.14)
    return plots.svg(fig, plot_id, "fleet-throughput", title)


def level_rows(fam: fleet.JobFamily) -> list[dict[str, Any]]:
    """The level table's rows of a job family (by targets, then series order): targets per
    minute with its band, the median job time (s), per-target time p50 · p99 (ms), targets failed
    / run, CPU per target of each side (ms: the client side, the management server, per completed
    target · the server side, the targets' agents, per target served), most in flight / cap, the
    verdict."""
    rows = []
    for p in sorted(fam.points, key=lambda p: (p.point.x, p.point.order)):
        s = p.point.summary
        rows.append(level_row(p.point, p.point.load.label, [
            (_tpm(p.targets_per_min), True), ("—" if p.job_s is None else f"{p.job_s:.3g}", True),
            (f"{_ms(s.p50_ns)} · {_ms(s.p99_ns)}", True), (f"{p.failed} / {p.ran}" if p.ran else "—", True),
            (f"{_ms(p.point.client_cpu_ns_per_tx)} · {_ms(p.point.server_cpu_ns_per_tx)}", True),
            (f"{p.most_in_flight} / {p.cap}", True), (verdict_text(p.point), False)]))
    return rows


LEVEL_COLUMNS = [column("Level", num=False), column("Configuration", num=False),
                 column("targets/min", f"{BAND_LEVEL * 100:g} % CI"), column("job, s"),
                 column("per target, ms", "p50 · p99"), column("failed"),
                 column("CPU, ms / target", "client (management) · server (targets)"),
                 column("in flight", "most / cap"), column("Verdict", num=False)]


@register(order=20)
def fleet_throughput(run: StoredRun) -> list[Section]:
    """"Fleet jobs: throughput vs targets": per job kind a plot (``throughput_svg``) and a
    table per level (``level_rows``). Markdown: the tables."""
    figures = _figures(run)
    if figures is None:
        return []
    tables = [(f, level_rows(f)) for f in figures.families]

    def html() -> str:
        figs = [{"slug": family_slug(f.family), "rows": rows, "description": kind_text(f),
                 "svg": Markup(throughput_svg(f, f"fleet-throughput-{family_slug(f.family)}"))} for f, rows in tables]
        return fragment("sections/fleet_throughput.html.j2", figures=figs, columns=LEVEL_COLUMNS,
                        level=f"{BAND_LEVEL * 100:g}")

    md = (f"Targets per minute: geometric mean over the jobs with its {BAND_LEVEL * 100:g} % interval; CPU per "
          "target on the client side (the management server, per completed target) and on the server side "
          "(the targets' agents, per target served).\n")
    for f, rows in tables:
        md += f"\n**{family_title(f.family)}** — {kind_text(f)}\n\n" + md_table(
            ["Level", "Configuration", "targets/min", "job s", "per target ms (p50 · p99)", "failed",
             "CPU ms/target (client · server)", "in flight / cap", "Verdict"],
            [[r["level"], r["configuration"]] + [c["text"] for c in r["cells"]] if r["measured"] else
             [r["level"], r["configuration"], f"not measured: {r['status']}"] + [""] * 6 for r in rows],
            align="llrrrrrrl")
    return [Section("fleet-throughput", "Fleet jobs: throughput vs targets", html, md)]


# ------------------------------------------------------------------------------ scalability

def scalability_rows(figures: fleet.FleetFigures) -> list[dict[str, Any]]:
    """Per configuration whose slices differ from the baseline's at a level: the slices, the
    factor (throughput k ÷ k0 slices, the comparison's interval), the ideal k ÷ k0, what bounds
    it (the host's CPUs when the k-slice jobs kept them at least ``CPU_BOUND`` busy or ran past
    the knee: ``economics.jobs.saturation``; else the waits, with how busy the CPUs were), the
    verdict."""
    out = []
    for s in figures.scalability:
        f = s.factor
        sat = s.point.saturation
        cpus = f"the host's {s.cpus} CPU{'s' if s.cpus != 1 else ''}"
        if sat is None:
            bounded = ""
        elif sat.cpu_bound:
            bounded = (f"bounded by {cpus} ({sat.cpu_busy * 100:.0f} % busy): {s.k} slices and {s.agents} agent "
                       f"process{'es' if s.agents != 1 else ''} (the simulated targets) share them, where the "
                       "published setup added a worker host")
        else:
            bounded = (f"paced by the targets' waits: {cpus} {sat.cpu_busy * 100:.0f} % busy, the CPU would set the pace "
                       f"from about {sat.knee_in_flight:.3g} targets in flight")
        out.append({"use_case": s.family.family.label, "level": s.point.point.load.label, "k": s.k, "k0": s.k0,
                    "configuration": configuration(s.point.point),
                    "factor": f"{f.ratio:.2f} [{f.low:.2f}, {f.high:.2f}]" if f is not None else "—",
                    "ideal": f"{s.k / s.k0:g}", "bounded": bounded, "verdict": verdict_text(s.point.point)})
    return out


@register(order=20)
def fleet_scalability(run: StoredRun) -> list[Section]:
    """"Fleet jobs: scalability": the factor k slices ÷ the baseline's slices where they differ
    (``scalability_rows``). Nothing without such configurations."""
    figures = _figures(run)
    rows = scalability_rows(figures) if figures else []
    if not rows:
        return []
    md = ("Throughput with k slices ÷ with the baseline's, paired by block, with the study's interval.\n\n"
          + md_table(["Use case", "Level", "Configuration", "slices", "factor (CI)", "perfect", "Verdict", "Note"],
                     [[r["use_case"], r["level"], r["configuration"], f"{r['k0']} → {r['k']}", r["factor"], r["ideal"],
                       r["verdict"], r["bounded"]] for r in rows], align="lllrrrll"))
    return [Section("fleet-scalability", "Fleet jobs: scalability", fragment("sections/fleet_scalability.html.j2",
                                                                              rows=rows), md)]


# ------------------------------------------------------------------------------ saturation

SATURATION_INTRO = (
    "Where the CPU, not the waiting, sets a job's pace, on this host (the management server and its simulated "
    "targets sharing its CPUs, or each side on CPUs of its own where the job pinned them apart: then the busier "
    "side is given): CPU busy is targets per second × CPU per target ÷ CPUs over the measured jobs; the "
    "pace changes from about CPUs × one target's time alone ÷ CPU per target targets in flight (the asymptotic "
    "bound's saturation point). Below it a configuration's cryptography adds only its own milliseconds to each "
    "target; from it on, the job's time grows with its CPU per target. Model and planner: "
    "`cryptoperf plan RUN --targets N --deadline D`.")


#: What the CPU busy figure is of, after the percentage.
BUSIEST = {"host": "", "management": " (management side)", "targets": " (simulated targets)"}


def paced_by(s) -> str:
    """What paced the jobs of an ``economics.jobs.Saturation``: a CPU (which one, where the
    sides were pinned apart), the waits with the CPU near its limit (from 60 % busy), or the
    waits."""
    if s.cpu_bound:
        return {"host": "the CPU", "management": "the management side's CPU",
                "targets": "the simulated targets' CPU (on one host; real targets have their own)"}[s.busiest]
    return "the waits, the CPU near its limit" if s.cpu_busy >= 0.6 else "the waits"


def saturation_rows(figures: fleet.FleetFigures) -> list[dict[str, Any]]:
    """Per job kind × configuration at the largest level, ``economics.jobs.saturation`` as text:
    targets in flight, CPU busy, one target alone, the knee and what paces the jobs; levels with
    fewer than 2 measured jobs are left out."""
    rows = []
    for fam in figures.families:
        top = fam.largest
        for p in top.points if top is not None else ():
            s = p.saturation
            if s is None:
                continue
            rows.append({"use_case": fam.family.label, "level": p.point.load.label, "configuration": configuration(p.point),
                         "in_flight": s.in_flight, "busy": f"{s.cpu_busy * 100:.0f} %" + BUSIEST[s.busiest],
                         "alone": f"{s.alone_s * 1e3:.3g} ms", "knee": f"{s.knee_in_flight:.3g}",
                         "paced_by": paced_by(s)})
    return rows


@register(order=22)
def fleet_saturation(run: StoredRun) -> list[Section]:
    """"Fleet jobs: where the CPU sets the pace" (``saturation_rows``). Nothing without jobs."""
    figures = _figures(run)
    rows = saturation_rows(figures) if figures else []
    if not rows:
        return []
    md = SATURATION_INTRO + "\n\n" + md_table(
        ["Use case", "Level", "Configuration", "in flight", "CPU busy", "one target alone", "CPU sets the pace from",
         "Paced by"],
        [[r["use_case"], r["level"], r["configuration"], r["in_flight"], r["busy"], r["alone"], r["knee"], r["paced_by"]]
         for r in rows], align="lllrrrrl")
    html = fragment("sections/fleet_saturation.html.j2", rows=rows, intro=SATURATION_INTRO)
    return [Section("fleet-saturation", "Fleet jobs: where the CPU sets the pace", html, md)]


# ------------------------------------------------------------------------------ timeline

def _largest_level_figures(fams: Sequence[fleet.JobFamily], draw: Callable[[Sequence[fleet.JobPoint], str, str], str],
                           plot_id: str, what: str) -> list[dict[str, Any]]:
    """Per job kind, ``draw(points at its largest level, "<plot_id>-<kind>", "<what>: <title>")``
    (``timeline_svg``, ``cpu_svg``) as ``{"slug", "svg"}``; kinds it draws nothing for are
    left out."""
    figs = []
    for f in fams:
        if f.largest is None:
            continue
        slug = family_slug(f.family)
        svg = draw(f.largest.points, f"{plot_id}-{slug}", f"{what}: {family_title(f.family)}")
        if svg:
            figs.append({"slug": slug, "svg": Markup(svg)})
    return figs


def _gantt(ax, p: fleet.JobPoint, job: fleet.Job, phases_seen: list[str]) -> int:
    """Draw one job's targets (a row each, by slice then start) and its own stages on ``ax``;
    returns the rows drawn."""
    from matplotlib.collections import PolyCollection
    targets = sorted(job.targets_, key=lambda t: (t.slice, t.span[0] if t.span else 0.0))
    verts: dict[str, list] = {ph: [] for ph in job.phases}
    hatched = []
    offset = 1 if job.stages else 0
    for y, t in enumerate(targets, start=offset):
        for k, (ph, span) in enumerate(zip(job.phases, t.phases)):
            if span is None:
                continue
            a, b = span[0] / 1e6, max(span[1], span[0] + 1) / 1e6
            rect = [(a, y - 0.45), (b, y - 0.45), (b, y + 0.45), (a, y + 0.45)]
            verts[ph].append(rect)
            if t.status != "ok" and (k + 1 == len(job.phases) or t.phases[k + 1] is None):
                hatched.append(rect)
    for ph in job.phases:
        if verts[ph]:
            col = PolyCollection(verts[ph], facecolors=PHASE_COLOURS.get(ph, "#999999"), edgecolors="none",
                                 rasterized=len(targets) > 150)
            col.set_gid(f"phase-{plots.gid(p.point.series)}-{ph}")
            ax.add_collection(col)
        if ph not in phases_seen:
            phases_seen.append(ph)
    if hatched:
        ax.add_collection(PolyCollection(hatched, facecolors="none", edgecolors="#000000", hatch="////",
                                         linewidths=0.4))
    for name, start, end in job.stages:
        a, b = start / 1e6, max(end, start + 1) / 1e6
        ax.add_collection(PolyCollection([[(a, -0.45), (b, -0.45), (b, 0.45), (a, 0.45)]],
                                         facecolors=PHASE_COLOURS.get(name, "#8c8c8c")))
        if name not in phases_seen:
            phases_seen.append(name)
    return len(targets) + offset


def timeline_svg(points: Sequence[fleet.JobPoint], plot_id: str, title: str) -> str:
    """A Gantt chart of one representative job per configuration: per configuration a panel with
    one row per target (grouped by slice, in start order) and a bar per phase coloured by phase
    (the job's stage on a row of its own above), failed targets' last bar hatched; below it, the
    targets in flight per slice over time with the cap as a dashed line. Bars are drawn as one
    collection per phase, rasterised (a job has thousands). Returns the SVG text."""
    from matplotlib.patches import Patch
    shown = [(p, p.representative) for p in points if p.representative is not None]
    if not shown:
        return ""
    fig = plots.figure(7.4, 3.4 * len(shown) + 0.5)
    axes = fig.subplots(2 * len(shown), 1, gridspec_kw={"height_ratios": [3, 1] * len(shown)})
    end_s = max(j.wall_s for _, j in shown)
    phases_seen: list[str] = []
    for i, (p, job) in enumerate(shown):
        ax, ax_n = axes[2 * i], axes[2 * i + 1]
        n = _gantt(ax, p, job, phases_seen)
        ax.set_xlim(0, end_s * 1.02)
        ax.set_ylim(n, -1)
        ax.set_ylabel("targets\n(by slice, in start order)", fontsize=7.5)
        ax.set_title(f"{p.point.series} — {p.point.load.label}, block {p.representative_block}: "
                     f"{job.slices} slice(s) × cap {job.cap}, {job.failed} failed", fontsize=8.5, loc="left")
        ax.tick_params(labelsize=7.5, labelbottom=False)
        ax.grid(True, axis="x", color="#eeeeee", linewidth=0.6)
        for s, (t, k) in sorted(job.in_flight().items()):
            line, = ax_n.step(np.concatenate([[0.0], t / 1e6]), np.concatenate([[0], k]), where="post",
                              linewidth=1.0, color=plots.colour(s), label=f"slice {s}")
            line.set_gid(f"inflight-{plots.gid(p.point.series)}-{s}")
        ax_n.axhline(job.cap, color="#444444", linestyle="--", linewidth=0.8)
        ax_n.set_xlim(0, end_s * 1.02)
        ax_n.set_ylim(0, job.cap * 1.25)
        ax_n.set_ylabel("in flight", fontsize=7.5)
        ax_n.tick_params(labelsize=7.5)
        ax_n.grid(True, color="#eeeeee", linewidth=0.6)
        if i == len(shown) - 1:
            ax_n.set_xlabel("time since the job started, s", fontsize=8)
    handles = [Patch(color=PHASE_COLOURS.get(ph, "#999999"), label=ph) for ph in phases_seen]
    handles.append(Patch(facecolor="none", edgecolor="#000000", hatch="////", label="failed"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7.5, frameon=False)
    fig.suptitle(title, fontsize=10, x=0.01, y=1 - 0.08 / fig.get_figheight(), ha="left", va="top")
    fig.subplots_adjust(left=0.12, right=0.98, top=1 - 0.6 / fig.get_figheight(),
                        bottom=0.7 / fig.get_figheight(), hspace=0.45)
    return plots.svg(fig, plot_id, "fleet-timeline", title)


@register(order=23)
def fleet_timeline(run: StoredRun) -> list[Section]:
    """"Fleet jobs: timeline by phase": per job kind, a Gantt chart of one job per configuration
    at the largest level (``timeline_svg``). HTML only."""
    figures = _figures(run)
    if figures is None:
        return []

    def html() -> str:
        return fragment("sections/fleet_timeline.html.j2", figures=_largest_level_figures(
            figures.families, timeline_svg, "fleet-timeline", "timeline by phase"))

    md = "One job per configuration at the largest level, drawn by phase and target in the HTML report.\n"
    return [Section("fleet-timeline", "Fleet jobs: timeline by phase", html, md)]


# ------------------------------------------------------------------------------ phase table

def phase_table(fam: fleet.JobFamily) -> tuple[list[str], list[dict[str, Any]]]:
    """(configurations in series order, rows): per level and phase a row, ``level``, ``phase``
    and per configuration ``cells``: the median ms and the ratio to the baseline's with its
    descriptive interval."""
    configs = list(dict.fromkeys(p.point.series for lv in fam.levels for p in lv.points))
    rows = []
    for lv in fam.levels:
        for ph in dict.fromkeys(r.phase for r in lv.phases):
            cells = []
            for c in configs:
                r = next((r for r in lv.phases if r.series == c and r.phase == ph), None)
                ratio = "—" if r is None else "baseline" if r.ratio is None else fmt.change_text(r.ratio)
                cells.append({"configuration": c, "median": _ms(r.median_ns) if r else "—", "ratio": ratio})
            rows.append({"level": lv.points[0].point.load.label, "phase": ph, "cells": cells})
    return configs, rows


#: The split of a phase's time as the tables name it (``fleet.PARTS`` order).
PART_TITLES = {"wait": "waiting (latency model)", "crypto_cpu": "management CPU",
               "other_cpu": "management other CPU (model)", "rest": "rest"}


def latency_text(latency: Any) -> str:
    """The latency model in words: ``round trips 20 ms (fixed; connect 2, other phases 1);
    target work lognormal p50 5 ms, p99 50 ms (mean 8.2 ms) per item or check; …; applied as
    …``; '' when off."""
    if not latency:
        return ""

    def dist(d: Any) -> str:
        if not isinstance(d, dict):
            return ""
        kind, mean = d.get("dist"), f"mean {d.get('mean_ms', 0):.3g} ms"
        if kind == "fixed":
            return f"{d.get('ms', 0):g} ms (fixed)"
        if kind == "uniform":
            return f"{d.get('low_ms', 0):g}–{d.get('high_ms', 0):g} ms (uniform, {mean})"
        return f"lognormal p50 {d.get('p50_ms', 0):g} ms, p99 {d.get('p99_ms', 0):g} ms ({mean})"
    parts = [f"{what} {dist(latency.get(key))}{per}" for key, what, per in (
        ("rtt", "round trips", " each (connect 2, every other phase 1)"),
        ("target_work", "target work", " per pushed item or check"),
        ("manager_cpu", "management non-cryptographic CPU", " per target"))
        if latency.get(key)]
    return "Latency model: " + "; ".join(parts) + f"; {latency.get('applied', '')}."


def split_table(fam: fleet.JobFamily) -> list[dict[str, Any]]:
    """Where each phase's time went at the family's largest level, per configuration and phase:
    ``configuration``, ``phase``, ``total`` and each part of ``PART_TITLES`` (median ms over
    every target of every measured job; the medians of parts need not add up to the total's).
    Empty when the worker sent no split."""
    top = fam.largest
    rows = []
    for p in top.points if top else ():
        for ph, split in p.phase_parts_ns.items():
            rows.append({"configuration": p.point.series, "phase": ph, "total": _ms(p.phase_all_ns.get(ph)),
                         **{k: _ms(split.get(k)) for k in PART_TITLES}})
    return rows


@register(order=25)
def fleet_phases(run: StoredRun) -> list[Section]:
    """"Fleet jobs: time per phase": per job kind, level and phase, the median time per
    configuration and its ratio to the baseline's with a descriptive interval
    (``phase_table``): where the time went, no verdict."""
    figures = _figures(run)
    tables = []
    for f in figures.families if figures else ():
        configs, rows = phase_table(f)
        if rows:
            top = f.largest
            model = next((p.latency for p in top.points if p.latency), None) if top else None
            tables.append({"title": family_title(f.family), "slug": family_slug(f.family), "rows": rows,
                           "configurations": configs, "split": split_table(f), "latency": latency_text(model),
                           "split_level": top.points[0].point.load.label if top and top.points else ""})
    if not tables:
        return []
    html = fragment("sections/fleet_phases.html.j2", tables=tables, level=f"{BAND_LEVEL * 100:g}", parts=PART_TITLES)
    md = (f"Median ms per phase and its ratio to the baseline's ({BAND_LEVEL * 100:g} % interval over blocks, "
          "descriptive: not adjusted for multiplicity and no verdict; the level's verdict is its throughput's).\n")
    for t in tables:
        md += f"\n**{t['title']}**\n\n" + md_table(
            ["Level", "Phase"] + t["configurations"],
            [[r["level"], r["phase"]] + [f"{c['median']} · {c['ratio']}" for c in r["cells"]] for r in t["rows"]],
            align="ll" + "r" * len(t["configurations"]))
        if t["split"]:
            md += (f"\nWhere each phase's time went at {t['split_level']} (median ms of each part):"
                   + (f" {t['latency']}" if t["latency"] else "") + "\n\n")
            md += md_table(["Configuration", "Phase", "total", *PART_TITLES.values()],
                           [[r["configuration"], r["phase"], r["total"], *(r[k] for k in PART_TITLES)] for r in t["split"]],
                           align="ll" + "r" * (1 + len(PART_TITLES)))
    return [Section("fleet-phases", "Fleet jobs: time per phase", html, md)]


# ------------------------------------------------------------------------------ CPU and processes

def cpu_svg(points: Sequence[fleet.JobPoint], plot_id: str, title: str) -> str:
    """CPU % of one CPU (user + system) of every process of one representative job per
    configuration, against time since the job started: a panel per configuration; slices solid,
    agents dashed, the coordinator dotted; the job's start and end as vertical lines. Line ids
    ``<plot_id>-cpu-<configuration>-<role>-<i>``. Returns the SVG text."""
    shown = [(p, p.representative) for p in points if p.representative is not None]
    if not shown:
        return ""
    fig = plots.figure(9.6, 2.4 * len(shown) + 0.6)
    axes = fig.subplots(len(shown), 1, squeeze=False, sharex=True)[:, 0]
    styles = {"slice": "-", "agent": "--", "coordinator": ":"}
    for ax, (p, job) in zip(axes, shown):
        for proc in job.processes:
            if proc.timeline.empty:
                continue
            c = plots.colour(proc.index + (0 if proc.role == "slice" else 4 if proc.role == "agent" else 7))
            line, = ax.plot(proc.timeline.t_s, proc.timeline.cpu_pct, linestyle=styles.get(proc.role, "-"), color=c,
                            linewidth=1.2, label=proc.label)
            line.set_gid(f"cpu-{plots.gid(p.point.series)}-{proc.role}-{proc.index}")
        ax.axvline(0, color="#999999", linewidth=0.6)
        ax.axvline(job.wall_s, color="#999999", linewidth=0.6)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("CPU, % of one CPU", fontsize=7.5)
        ax.set_title(f"{p.point.series} — {p.point.load.label}, block {p.representative_block} "
                     f"(job from 0 to {job.wall_s:.3g} s)", fontsize=8.5, loc="left")
        ax.grid(True, color="#eeeeee", linewidth=0.6)
        ax.tick_params(labelsize=7.5)
        ax.legend(fontsize=6.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the data
    axes[-1].set_xlabel("time since the job started, s (before 0: set-up — certificates, probe)", fontsize=8)
    fig.suptitle(title, fontsize=10, x=0.01, y=1 - 0.08 / fig.get_figheight(), ha="left", va="top")
    fig.subplots_adjust(left=0.08, right=0.86, top=1 - 0.6 / fig.get_figheight(), bottom=0.6 / fig.get_figheight(),
                        hspace=0.45)
    return plots.svg(fig, plot_id, "fleet-cpu", title)


@register(order=44)
def fleet_cpu(run: StoredRun) -> list[Section]:
    """"Fleet jobs: CPU over the job": per job kind, every process's CPU over one job per
    configuration at the largest level (``cpu_svg``). HTML only."""
    figures = _figures(run)
    if figures is None:
        return []

    def html() -> str:
        return fragment("sections/fleet_cpu.html.j2", figures=_largest_level_figures(
            figures.families, cpu_svg, "fleet-cpu", "CPU over the job"))

    return [Section("fleet-cpu", "Fleet jobs: CPU over the job's lifetime", html,
                    "Every process's CPU over one job per configuration, plotted in the HTML report.\n")]


def resource_rows(figures: fleet.FleetFigures) -> list[dict[str, Any]]:
    """Per job kind, level and configuration: the largest peak RSS (MiB) and most descriptors of
    each role's processes over the measured jobs, and the connections the job could hold at once
    (``slices × cap``)."""
    out = []
    for fam in figures.families:
        for p in sorted(fam.points, key=lambda p: p.point.x):
            if p.representative is None:
                continue
            row = {"use_case": fam.family.label, "level": p.point.load.label, "configuration": configuration(p.point),
                   "connections": p.connections}
            for use in p.roles:
                row[f"{use.role}_rss"] = f"{use.peak_rss_bytes / 2**20:.0f}" if use.peak_rss_bytes is not None else "—"
                row[f"{use.role}_fds"] = str(use.max_fds) if use.max_fds is not None else "—"
            out.append(row)
    return out


def failure_rows(figures: fleet.FleetFigures) -> list[dict[str, Any]]:
    """Every failed target of every measured job (use case, level, configuration, block,
    target, slice, phase, reason), at most ``MAX_FAILURES_LISTED``."""
    rows = []
    for fam in figures.families:
        for p in fam.points:
            for block, target, slice_, phase, reason in p.failures:
                if len(rows) < MAX_FAILURES_LISTED:
                    rows.append({"use_case": fam.family.label, "level": p.point.load.label,
                                 "configuration": configuration(p.point), "block": block, "target": target,
                                 "slice": slice_, "phase": phase, "reason": reason})
    return rows


@register(order=45)
def fleet_resources(run: StoredRun) -> list[Section]:
    """"Fleet jobs: processes and failed targets": peak RSS and descriptors per role
    (``resource_rows``), and every failed target with its reason (``failure_rows``)."""
    figures = _figures(run)
    rows = resource_rows(figures) if figures else []
    if not rows:
        return []
    failures = failure_rows(figures)
    html = fragment("sections/fleet_resources.html.j2", rows=rows, failures=failures, failed=figures.failed,
                    ran=figures.ran)
    md = ("Peak RSS (MiB) and most descriptors open, per process role, the largest over the measured jobs.\n\n"
          + md_table(["Use case", "Level", "Configuration", "slices × cap", "slice RSS", "slice fds", "agent RSS",
                      "agent fds", "coordinator RSS", "coordinator fds"],
                     [[r["use_case"], r["level"], r["configuration"], r["connections"], r["slice_rss"], r["slice_fds"],
                       r["agent_rss"], r["agent_fds"], r["coordinator_rss"], r["coordinator_fds"]] for r in rows],
                     align="lllrrrrrrr"))
    md += f"\n{figures.failed} of {figures.ran} targets failed" + (":\n\n" + md_table(
        ["Use case", "Level", "Configuration", "block", "target", "phase", "reason"],
        [[f["use_case"], f["level"], f["configuration"], f["block"], f["target"], f["phase"], f["reason"]]
         for f in failures], align="lllrrll") if failures else ".\n")
    return [Section("fleet-resources", "Fleet jobs: processes and failed targets", html, md)]
