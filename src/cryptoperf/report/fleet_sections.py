"""Report sections for fleet jobs (the ``fleet-job`` workload: a management server's job over N
simulated targets, ``targets:N`` levels), registered in ``sections`` like the core ones. Each
builder returns nothing for a run without job cells.

19  fleet jobs: summary            — per job kind (the use case) and configuration: the change in
                                     targets per minute against the baseline at the largest
                                     level, with the study's interval, and a note: the verdict,
                                     the other levels, the phases that slowed, what ran
20  fleet jobs: throughput         — targets per minute against the number of targets, per
                                     configuration with its 95 % band; a table per level (job
                                     time, per-target time, failed targets, CPU per target on
                                     each side, the level's verdict)
20  fleet jobs: scalability        — where configurations differ in slices: the factor k slices
                                     ÷ 1 slice with its interval (the comparison's throughput
                                     ratio), and whether the host bounds it
23  fleet jobs: timeline           — one representative job per configuration at the largest
                                     level, as a Gantt chart by phase (a row per target, by
                                     slice), with the targets in flight per slice against the cap
25  fleet jobs: time per phase     — median time of every phase per configuration and level, and
                                     its ratio to the baseline's with a 95 % interval over the
                                     blocks: which phase slowed
44  fleet jobs: CPU over the job   — CPU % of every process (coordinator, slices, agents) over
                                     the representative job
45  fleet jobs: processes          — peak RSS and most descriptors open per process role, and
                                     every failed target with its phase and reason

Figures come from the worker's results (docs/worker-protocol.md, "fleet-job": ``fleet``), the
verdicts and the intervals that decide them from the run's analysis (``run.deltas``: with
``verdict_on = "by_load"`` a job level is decided on throughput, targets per unit of time).
The per-phase intervals are descriptive (95 %, not adjusted for multiplicity): they point at
where the time went; the study's verdict is the throughput's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from markupsafe import Markup

from cryptoperf import analysis, stats
from cryptoperf.model import Outcome
from cryptoperf.report import format as fmt
from cryptoperf.report import plots, view
from cryptoperf.report.render import md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.format import fmt_size
from cryptoperf.report.workload_sections import (BAND_LEVEL, Family, Point, _gid, _log_x, _render, families,
                                                 representative, throughput_estimate, timeline_series,
                                                 verdict_text)
from cryptoperf.stored import StoredRun
from cryptoperf.workloads import generic

#: The workload these sections draw.
JOB = "fleet-job"
#: Phase colours, in the worker's phase order; the job-level stage in grey.
PHASE_COLOURS = {"connect": "#4c72b0", "push": "#dd8452", "checks": "#55a868", "report": "#c44e52",
                 "stage": "#8c8c8c"}
#: The published job this workload scales down: a 500 MB package pushed to 70 targets.
REFERENCE_PACKAGE_BYTES = 500_000_000
#: Most failed targets listed one by one in the processes section (the rest are counted).
MAX_FAILURES_LISTED = 50


# ------------------------------------------------------------------------------ per repetition


def fleet_of(o: Outcome | None) -> dict[str, Any]:
    """The ``fleet`` object of a job outcome's result ({} without one)."""
    return ((o.result if o else None) or {}).get("fleet") or {}


def phase_durations(o: Outcome) -> dict[str, list[float]]:
    """Phase → the duration (ns) of that phase for every target of one job that reached its end
    (failed targets' last phase included), from the result's ``fleet.records``."""
    f = fleet_of(o)
    out: dict[str, list[float]] = {p: [] for p in f.get("phases") or ()}
    for row in (f.get("records") or {}).get("rows") or ():
        for k, p in enumerate(f.get("phases") or ()):
            start, end = row[3 + 2 * k], row[4 + 2 * k]
            if start is not None and end is not None:
                out[p].append(1e3 * (end - start))
    return out


def target_spans(o: Outcome) -> list[tuple[int, int, float, float, str]]:
    """``(target, slice, first start, last end, status)`` of every target of one job (µs since
    the job started; targets that never started left out)."""
    f = fleet_of(o)
    out = []
    for row in (f.get("records") or {}).get("rows") or ():
        times = [t for t in row[3:] if t is not None]
        if times:
            out.append((int(row[0]), int(row[1]), float(min(times)), float(max(times)), str(row[2])))
    return out


def in_flight(o: Outcome) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Slice → (times µs, targets in flight from each time on), a step function over the job:
    a target is in flight from its first phase's start to its last phase's end."""
    per: dict[int, list[tuple[float, int]]] = {}
    for _, s, a, b, _ in target_spans(o):
        per.setdefault(s, []).extend([(a, 1), (b, -1)])
    out = {}
    for s, events in per.items():
        events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
        t = np.asarray([e[0] for e in events])
        n = np.cumsum([e[1] for e in events])
        # the count after every event at one instant (a target ending as the next one starts)
        last = np.r_[t[1:] != t[:-1], True] if t.size else np.zeros(0, dtype=bool)
        out[s] = (t[last], n[last])
    return out


def most_in_flight(o: Outcome) -> int:
    """The most targets any one slice had in flight at once in one job (``in_flight``)."""
    return max((int(n.max()) for _, n in in_flight(o).values() if n.size), default=0)


def _median(xs: Sequence[float]) -> float | None:
    return float(np.median(xs)) if len(xs) else None


# ------------------------------------------------------------------------------ families


def job_families(run: StoredRun) -> list[Family]:
    """The run's job cells by (backend, operation label, size, mode): one per job kind."""
    return families(run, ops=(JOB,))


def baseline_name(run: StoredRun) -> str:
    return run.study.baseline if run.study else ""


def largest_level(family: Family) -> float:
    """The most targets any measured level of the family has."""
    return max((p.x for p in family.points if p.outcomes), default=max((p.x for p in family.points), default=0))


def per_minute(e: stats.Estimate | None) -> stats.Estimate | None:
    """A targets-per-second estimate as targets per minute."""
    if e is None:
        return None
    return stats.Estimate(e.value * 60, None if e.low is None else e.low * 60,
                          None if e.high is None else e.high * 60, e.level, e.n)


def _tpm(e: stats.Estimate | None) -> str:
    """``1,234 [1,200, 1,270]`` targets per minute, ``1,234`` without bounds, '—'."""
    if e is None:
        return "—"
    num = lambda x: f"{x:,.0f}" if x >= 100 else f"{x:.3g}"
    if e.low is None or e.high is None:
        return num(e.value)
    return f"{num(e.value)} [{num(e.low)}, {num(e.high)}]"


def _ms(ns: float | None) -> str:
    if ns is None:
        return "—"
    ms = ns / 1e6
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"


def kind_text(family: Family) -> str:
    """What the family's job does and at what scale, from its results: ``audit: 192 checks of
    4 KiB per target (SHA-256 digests), phases connect → checks → report``."""
    f = next((fleet_of(o) for p in family.points for o in p.outcomes if fleet_of(o)), {})
    if not f:
        return family.label
    parts = []
    if f.get("push_bytes"):
        size = fmt_size(f.get("item_bytes")) or f"{f.get('item_bytes')} B"
        what = f"a package of {size}" if f.get("items") == 1 else f"{f.get('items')} items of {size}"
        auth = "HMAC'd per target" if f.get("auth") == "hmac" else "signed once per job, verified by the target"
        parts.append(f"push {what}, {auth}")
    if f.get("checks"):
        parts.append(f"{f['checks']} checks of {fmt_size(f.get('file_bytes'))} files")
    phases = " → ".join(f.get("phases") or ())
    return f"{f.get('job')}: {'; '.join(parts)}; phases {phases}" if parts else f"{f.get('job')}: phases {phases}"


def took_text(run: StoredRun) -> str:
    """How long the run took and on what host, in one sentence: ``This study took 10 min 12 s on
    a 2-CPU AMD EPYC host (Linux 6.18…).``; '' without its times."""
    import datetime as dt
    m = run.meta
    try:
        t0 = dt.datetime.fromisoformat(str(m["started_at"]).replace("Z", "+00:00"))
        t1 = dt.datetime.fromisoformat(str(m["finished_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return ""
    secs = int(round((t1 - t0).total_seconds()))
    h = run.host or {}
    kernel = str(h.get("kernel") or "").split(" #")[0]
    host = f"a {h.get('logical_cpus', '?')}-CPU {h.get('cpu_model') or 'host'} host" + (f" ({kernel})" if kernel else "")
    return f"This {m.get('kind') or 'run'} took {secs // 60} min {secs % 60} s on {host}, calibration included."


def scale_text(run: StoredRun) -> str:
    """How the jobs are scaled against the published measurements they model, in one paragraph."""
    kinds: dict[str, dict[str, Any]] = {}
    for fam in job_families(run):
        for p in fam.points:
            for o in p.outcomes:
                f = fleet_of(o)
                if f:
                    kinds.setdefault(str(f.get("job")), f)
    parts = []
    for name, f in kinds.items():
        if name == "remediate" and f.get("push_bytes"):
            ratio = REFERENCE_PACKAGE_BYTES / f["push_bytes"]
            parts.append(f"remediate pushes a package of {fmt_size(f['push_bytes'])} per target where the "
                         f"published job pushed 500 MB (about 1/{float(f'{ratio:.2g}'):,.0f} of it), to every target "
                         "of the level rather than to 70")
        elif name == "appconfig":
            parts.append(f"appconfig pushes {f.get('items')} rules of {fmt_size(f.get('item_bytes'))} (the "
                         "published job's 100 rules)")
        elif name == "audit":
            parts.append(f"audit runs {f.get('checks')} checks of {fmt_size(f.get('file_bytes'))} files (the "
                         "published job's 192)")
    if not parts:
        return ""
    return ("Scale: " + "; ".join(parts) + ". Targets are simulated by agent processes on this host "
            "(each target its own certificate and TLS connection), so a target's own work competes with the "
            "management side for the host's CPUs.")


# ------------------------------------------------------------------------------ phases


@dataclass(frozen=True)
class PhaseRow:
    """One phase of one configuration at one level: the median duration (ns) over every target
    of every measured job, and its ratio to the baseline's (``ratio``: the mean over blocks of the
    per-block ratio of medians, with a ``BAND_LEVEL`` t interval; None for the baseline or with
    fewer than 2 paired blocks)."""

    phase: str
    configuration: str
    median_ns: float | None
    ratio: stats.Interval | None

    @property
    def slowed(self) -> bool:
        """The interval lies above 1: this phase took longer than the baseline's."""
        return self.ratio is not None and self.ratio.low > 1.0

    @property
    def faster(self) -> bool:
        return self.ratio is not None and self.ratio.high < 1.0


def _block_medians(point: Point) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for o in point.outcomes:
        for phase, ds in phase_durations(o).items():
            if ds:
                out.setdefault(o.repetition.block, {})[phase] = float(np.median(ds))
    return out


def phase_rows(run: StoredRun, points: Sequence[Point]) -> list[PhaseRow]:
    """``PhaseRow``s of one level's points (one per configuration), baseline first, per phase."""
    base = next((p for p in points if p.series == baseline_name(run)), None)
    base_blocks = _block_medians(base) if base else {}
    rows = []
    for p in points:
        blocks = _block_medians(p)
        phases = list(dict.fromkeys(ph for b in blocks.values() for ph in b))
        for ph in phases:
            all_ns = [d for o in p.outcomes for d in phase_durations(o).get(ph, [])]
            ratio = None
            if p is not base and base is not None:
                common = [b for b in blocks if ph in blocks[b] and ph in base_blocks.get(b, {})]
                if len(common) >= 2:
                    try:
                        ratio = stats.paired_log_ratio([blocks[b][ph] for b in common],
                                                       [base_blocks[b][ph] for b in common], BAND_LEVEL)
                    except ValueError:
                        ratio = None
            rows.append(PhaseRow(ph, p.series, _median(all_ns), ratio))
    return rows


def slowed_text(rows: Sequence[PhaseRow], configuration: str) -> str:
    """``connect +12 % [+5, +19], report +9 % [+2, +16]`` for the phases of ``configuration``
    that slowed (``PhaseRow.slowed``), ``no phase slowed`` when none did, '' without ratios."""
    mine = [r for r in rows if r.configuration == configuration and r.ratio is not None]
    if not mine:
        return ""
    slow = [f"{r.phase} {fmt.change_text(r.ratio)}" for r in mine if r.slowed]
    return ("phases slowed: " + ", ".join(slow)) if slow else "no phase slowed"


def _ratio_text(r: PhaseRow) -> str:
    return "baseline" if r.ratio is None else fmt.change_text(r.ratio)


# ------------------------------------------------------------------------------ summary


def digest_name(name: str) -> str:
    """``sha1`` → ``SHA-1``, ``sha256`` → ``SHA-256``, ``sha3-256`` → ``SHA3-256``."""
    n = str(name).lower()
    return n.upper() if n.startswith("sha3") else n.upper().replace("SHA", "SHA-", 1)


def _what_ran(run: StoredRun, point: Point) -> str:
    """What a configuration ran that differs from its name's promise: signatures with another
    digest than the HMACs and file digests (the FIPS module refuses SHA-1 signatures)."""
    f = next((fleet_of(o) for o in point.outcomes if fleet_of(o)), {})
    if f and f.get("sign_digest") and f.get("sign_digest") != f.get("digest"):
        fips = any((o.result or {}).get("fips") for o in point.outcomes)
        why = " (SHA-1 signing is not FIPS-approved)" if fips and f.get("digest") == "sha1" else ""
        return f"ran {digest_name(f['digest'])} for HMACs and digests, {digest_name(f['sign_digest'])} for signatures{why}"
    return ""


def summary_rows(run: StoredRun) -> list[dict[str, Any]]:
    """One row per job kind × configuration other than the baseline: ``use_case``,
    ``configuration``, ``level`` (the largest measured), ``baseline``/``value`` (targets per
    minute), ``delta`` (the comparison's throughput change with its interval), ``verdict``,
    ``kind`` (for CSS), ``note`` (other levels, phases slowed, what ran)."""
    out = []
    for fam in job_families(run):
        top = largest_level(fam)
        by_series: dict[str, list[Point]] = {}
        for p in fam.points:
            by_series.setdefault(p.series, []).append(p)
        base_pts = {p.x: p for p in by_series.get(baseline_name(run), [])}
        for series, pts in by_series.items():
            if series == baseline_name(run):
                continue
            at_top = next((p for p in pts if p.x == top), None)
            if at_top is None:
                continue
            d = view.delta_for(run, at_top.summary)
            ok = d is not None and d.status == "ok" and d.throughput is not None
            others = []
            for p in sorted(pts, key=lambda p: p.x):
                if p is at_top:
                    continue
                od = view.delta_for(run, p.summary)
                if od is not None and od.status == "ok" and od.throughput is not None and od.verdict is not None:
                    others.append(f"{p.load.label}: {fmt.change_point_text(od.throughput)} ({od.verdict.kind})")
            level_pts = [q for q in fam.points if q.x == top]
            phases = slowed_text(phase_rows(run, level_pts), series)
            jobs = [fleet_of(o) for o in at_top.outcomes]
            failed = sum(int(f.get("failed") or 0) for f in jobs)
            lost = f"{failed} of {sum(int(f.get('targets') or 0) for f in jobs)} targets failed" if failed else ""
            notes = [x for x in (phases, lost, _what_ran(run, at_top),
                                 ("other levels: " + "; ".join(others)) if others else "") if x]
            base_e = per_minute(throughput_estimate(base_pts[top])) if top in base_pts else None
            out.append({
                "use_case": fam.label, "configuration": at_top.configuration, "level": at_top.load.label,
                "baseline": _tpm(base_e), "value": _tpm(per_minute(throughput_estimate(at_top))),
                "delta": fmt.change_text(d.throughput) if ok else "—",
                "verdict": d.verdict.text if ok and d.verdict else verdict_text(run, at_top),
                "kind": d.verdict.kind if ok and d.verdict else "na",
                "note": "; ".join(notes), "description": kind_text(fam)})
    return out


_SUMMARY_HTML = """\
<p>Each job kind is a use case of the published measurements this study models: a management
server pushing rules, auditing, remediating its targets over mutually authenticated TLS. The delta
is the change in <strong>targets per minute</strong> at the largest level, against
{{ baseline }}, block by block, with the study's interval ({{ method }}); the verdict is decided on
{{ metric }}. The note names the other levels' changes, the phases that took longer than the
baseline's (95 % interval over the blocks, not adjusted), and what a configuration ran where that
differs from its name.</p>
<table class="fleet-summary" id="fleet-summary">
  <thead><tr><th>Use case</th><th>Configuration</th><th>Level</th><th class="num">{{ baseline }}<div class="sub">targets/min</div></th>
    <th class="num">targets/min</th><th class="num">Performance delta<div class="sub">throughput, CI</div></th>
    <th>Verdict</th><th>Note</th></tr></thead>
  <tbody>
{% for r in rows %}
    <tr class="verdict-{{ r.kind }}"><td>{{ r.use_case }}<div class="sub">{{ r.description }}</div></td>
      <td>{{ r.configuration }}</td><td>{{ r.level }}</td><td class="num">{{ r.baseline }}</td>
      <td class="num">{{ r.value }}</td><td class="num">{{ r.delta }}</td><td class="verdict">{{ r.verdict }}</td>
      <td class="sub">{{ r.note }}</td></tr>
{% endfor %}
  </tbody>
</table>
{% if scale %}<p class="sub">{{ scale }}</p>{% endif %}
{% if took %}<p class="sub">{{ took }}</p>{% endif %}
"""


@register(order=19)
def fleet_summary(run: StoredRun) -> list[Section]:
    """"Fleet jobs: summary": use case, configuration, performance delta with its interval,
    verdict and note, per job kind (``summary_rows``). Nothing without jobs."""
    rows = summary_rows(run)
    if not rows:
        return []
    scale = scale_text(run)
    took = took_text(run)
    jobs = [view.delta_for(run, p.summary) for f in job_families(run) for p in f.points]
    metric = analysis.decided_on([d for d in jobs if d is not None]) or run.analysis.settings.metric

    def html() -> str:
        return _render(_SUMMARY_HTML, rows=rows, baseline=baseline_name(run), method=run.analysis.method,
                       metric=metric, scale=scale, took=took)

    md = (f"Change in targets per minute at the largest level against {baseline_name(run)}, with the study's "
          f"interval; verdicts on {metric}.\n\n" + md_table(
              ["Use case", "Configuration", "Level", "Performance delta", "Verdict", "Note"],
              [[r["use_case"], r["configuration"], r["level"], r["delta"], r["verdict"], r["note"]] for r in rows],
              align="lllrll"))
    for line in (scale, took):
        if line:
            md += f"\n{line}\n"
    return [Section("fleet-summary", "Fleet jobs: summary", html, md)]


# ------------------------------------------------------------------------------ throughput


def throughput_svg(family: Family, plot_id: str) -> str:
    """Targets per minute against the number of targets (log x when the levels span ≥ 10×), a
    line per configuration through the geometric means of its jobs with their 95 % band. Line
    groups have ids ``<plot_id>-series-<configuration>``. Returns the SVG text."""
    fig = plots._figure(6.4, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    for series, colour in family.series():
        mine = sorted(((p.x, per_minute(throughput_estimate(p))) for p in family.points if p.series == series),
                      key=lambda t: t[0])
        mine = [(x, e) for x, e in mine if e is not None]
        if not mine:
            continue
        line, = ax.plot([x for x, _ in mine], [e.value for _, e in mine], marker="o", markersize=4,
                        color=colour, linewidth=1.6, label=series)
        line.set_gid(f"series-{_gid(series)}")
        banded = [(x, e) for x, e in mine if e.low is not None and e.high is not None]
        if banded:
            band = ax.fill_between([x for x, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded],
                                   color=colour, alpha=0.18, linewidth=0)
            band.set_gid(f"band-{_gid(series)}")
    _log_x(ax, [p.x for p in family.points])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("targets in the job", fontsize=8.5)
    ax.set_ylabel("targets per minute", fontsize=8.5)
    ax.grid(True, color="#e5e5e5", linewidth=0.6)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7.5, frameon=False, loc="best")
    title = f"throughput vs targets: {family.label} on {family.backend}"
    ax.set_title(title, fontsize=10, loc="left")
    fig.subplots_adjust(left=0.12, right=0.98, top=0.9, bottom=0.14)
    return plots._svg(fig, plot_id, "fleet-throughput", title)


def level_rows(run: StoredRun, family: Family) -> list[dict[str, Any]]:
    """One row per level × configuration: ``level``, ``configuration``, ``tpm`` (targets per
    minute with its band), ``job_s`` (median job time, s), ``p50``/``p99`` (ms per target, the
    summary's medians), ``failed`` (targets failed over the measured jobs / targets run),
    ``mgmt``/``agents`` (CPU ms per completed target on each side), ``in_flight`` (the most in
    flight in one slice, over the jobs) and ``cap``, ``verdict``, ``measured``, ``status``,
    ``reason``."""
    rows = []
    for p in sorted(family.points, key=lambda p: (p.x, view.series_order(run).index(p.series)
                                                   if p.series in view.series_order(run) else 99)):
        s = p.summary
        jobs = [fleet_of(o) for o in p.outcomes]
        failed = sum(int(f.get("failed") or 0) for f in jobs)
        ran = sum(int(f.get("targets") or 0) for f in jobs)
        results = [o.result for o in p.outcomes]
        mgmt = generic.client_cpu_ns_per_tx(results)
        agents = generic.server_cpu_ns_per_tx(results)
        rows.append({"level": p.load.label, "configuration": p.configuration,
                     "tpm": _tpm(per_minute(throughput_estimate(p))),
                     "job_s": _median([o.result["wall_ns"] / 1e9 for o in p.outcomes if o.result]),
                     "p50": _ms(s.p50_ns), "p99": _ms(s.p99_ns), "failed": f"{failed} / {ran}" if ran else "—",
                     "mgmt": _ms(mgmt), "agents": _ms(agents),
                     "in_flight": max((most_in_flight(o) for o in p.outcomes), default=None),
                     "cap": jobs[0].get("cap") if jobs else None, "verdict": verdict_text(run, p),
                     "measured": bool(p.outcomes), "status": s.status, "reason": s.reason})
    for r in rows:
        r["job_text"] = "—" if r["job_s"] is None else f"{r['job_s']:.3g}"
    return rows


_THROUGHPUT_HTML = """\
{% from "sections/macros.html.j2" import not_measured_row %}
<p>Targets per minute (completed targets ÷ the job's time, from its start to its last target's
end) against the number of targets, per configuration: the geometric mean of its jobs with the
{{ level }} % interval across repetitions. Per target: its time through every phase (median and
p99 over the jobs' targets), the CPU each side spent per target: the client side (the
management server: coordinator and slices) per completed target, the server side (the targets'
agents) per target it served, and the most targets one slice had in flight at
once against its cap.</p>
{% for f in figures %}
<figure class="plot" data-plot="fleet-throughput" data-group="{{ f.slug }}">
{{ f.svg }}
  <figcaption>
    <p class="sub">{{ f.description }}</p>
    <table class="fleet-levels" id="fleet-levels-{{ f.slug }}">
      <thead><tr><th>Level</th><th>Configuration</th><th class="num">targets/min<div class="sub">{{ level }} % CI</div></th>
        <th class="num">job, s</th><th class="num">per target, ms<div class="sub">p50 · p99</div></th>
        <th class="num">failed</th><th class="num">CPU, ms / target<div class="sub">client (management) · server (targets)</div></th>
        <th class="num">in flight<div class="sub">most / cap</div></th><th>Verdict</th></tr></thead>
      <tbody>
{% for r in f.rows %}
{% if r.measured %}
        <tr><td>{{ r.level }}</td><td>{{ r.configuration }}</td><td class="num">{{ r.tpm }}</td><td class="num">{{ r.job_text }}</td>
          <td class="num">{{ r.p50 }} · {{ r.p99 }}</td><td class="num">{{ r.failed }}</td>
          <td class="num">{{ r.mgmt }} · {{ r.agents }}</td><td class="num">{{ r.in_flight }} / {{ r.cap }}</td>
          <td class="verdict sub">{{ r.verdict }}</td></tr>
{% else %}
{{ not_measured_row(r, 7) }}
{% endif %}
{% endfor %}
      </tbody>
    </table>
  </figcaption>
</figure>
{% endfor %}
"""


@register(order=20)
def fleet_throughput(run: StoredRun) -> list[Section]:
    """"Fleet jobs: throughput vs targets": per job kind a plot (``throughput_svg``) and a
    table per level (``level_rows``). Markdown: the tables."""
    fams = job_families(run)
    if not fams:
        return []
    tables = [(f, level_rows(run, f)) for f in fams]

    def html() -> str:
        figs = [{"slug": f.slug, "svg": Markup(throughput_svg(f, f"fleet-throughput-{f.slug}")), "rows": rows,
                 "description": kind_text(f)} for f, rows in tables]
        return _render(_THROUGHPUT_HTML, figures=figs, level=f"{BAND_LEVEL * 100:g}")

    md = (f"Targets per minute: geometric mean over the jobs with its {BAND_LEVEL * 100:g} % interval; CPU per "
          "target on the client side (the management server, per completed target) and on the server side "
          "(the targets' agents, per target served).\n")
    for f, rows in tables:
        md += f"\n**{f.title}** — {kind_text(f)}\n\n" + md_table(
            ["Level", "Configuration", "targets/min", "job s", "p50 ms", "p99 ms", "failed", "client (management) CPU ms/target",
             "server (targets) CPU ms/target", "in flight / cap", "Verdict"],
            [[r["level"], r["configuration"], r["tpm"], r["job_text"], r["p50"], r["p99"], r["failed"], r["mgmt"],
              r["agents"], f"{r['in_flight']} / {r['cap']}", r["verdict"]] if r["measured"] else
             [r["level"], r["configuration"], f"not measured: {r['status']}"] + [""] * 8 for r in rows],
            align="llrrrrrrrrl")
    return [Section("fleet-throughput", "Fleet jobs: throughput vs targets", html, md)]


# ------------------------------------------------------------------------------ scalability


def scalability_rows(run: StoredRun) -> list[dict[str, Any]]:
    """Per job kind, level and configuration whose slices differ from the baseline's: ``k``
    and ``k0`` (slices), ``factor`` (throughput k ÷ k0 slices with the comparison's interval),
    ``ideal`` (k ÷ k0), ``bounded`` (the host's CPUs bound it: text, or ''), ``verdict``."""
    out = []
    for fam in job_families(run):
        base = {p.x: p for p in fam.points if p.series == baseline_name(run)}
        for p in fam.points:
            if p.series == baseline_name(run) or p.x not in base:
                continue
            mine, theirs = fleet_of(representative(p)), fleet_of(representative(base[p.x]))
            if not mine or not theirs or mine.get("slices") == theirs.get("slices"):
                continue
            k, k0 = int(mine["slices"]), int(theirs["slices"])
            cpus = int(mine.get("host_cpus") or run.host.get("logical_cpus") or 1)
            agents = int(mine.get("agents") or 0)
            d = view.delta_for(run, p.summary)
            ok = d is not None and d.status == "ok" and d.throughput is not None
            bounded = ""
            if k + (1 if agents else 0) > cpus:
                bounded = (f"bounded by the host's {cpus} CPU{'s' if cpus != 1 else ''}: {k} slices and {agents} "
                           f"agent process{'es' if agents != 1 else ''} (the simulated targets) share them, where "
                           f"the published setup added a worker host")
            out.append({"use_case": fam.label, "level": p.load.label, "k": k, "k0": k0,
                        "configuration": p.configuration,
                        "factor": (f"{d.throughput.ratio:.2f} [{d.throughput.low:.2f}, {d.throughput.high:.2f}]"
                                   if ok else "—"),
                        "ideal": f"{k / k0:g}", "bounded": bounded,
                        "verdict": d.verdict.text if ok and d.verdict else verdict_text(run, p),
                        "level_pct": f"{d.throughput.level * 100:.4g}" if ok else ""})
    return out


_SCALABILITY_HTML = """\
<p>The scalability factor is the throughput (targets per minute) with k slices — worker processes
sharing the targets, each with its own concurrency cap — divided by the baseline's, block by
block: the comparison's ratio, with the study's interval. A factor of k is perfect scaling.</p>
<table class="fleet-scalability" id="fleet-scalability">
  <thead><tr><th>Use case</th><th>Level</th><th>Configuration</th><th class="num">slices</th>
    <th class="num">scalability factor<div class="sub">CI</div></th><th class="num">perfect</th><th>Verdict</th><th>Note</th></tr></thead>
  <tbody>
{% for r in rows %}
    <tr><td>{{ r.use_case }}</td><td>{{ r.level }}</td><td>{{ r.configuration }}</td><td class="num">{{ r.k0 }} → {{ r.k }}</td>
      <td class="num">{{ r.factor }}</td><td class="num">{{ r.ideal }}</td><td class="verdict">{{ r.verdict }}</td>
      <td class="sub">{{ r.bounded }}</td></tr>
{% endfor %}
  </tbody>
</table>
"""


@register(order=20)
def fleet_scalability(run: StoredRun) -> list[Section]:
    """"Fleet jobs: scalability": the factor k slices ÷ the baseline's slices where they differ
    (``scalability_rows``). Nothing without such configurations."""
    rows = scalability_rows(run)
    if not rows:
        return []

    def html() -> str:
        return _render(_SCALABILITY_HTML, rows=rows)

    md = ("Throughput with k slices ÷ with the baseline's, paired by block, with the study's interval.\n\n"
          + md_table(["Use case", "Level", "Configuration", "slices", "factor (CI)", "perfect", "Verdict", "Note"],
                     [[r["use_case"], r["level"], r["configuration"], f"{r['k0']} → {r['k']}", r["factor"], r["ideal"],
                       r["verdict"], r["bounded"]] for r in rows], align="lllrrrll"))
    return [Section("fleet-scalability", "Fleet jobs: scalability", html, md)]


# ------------------------------------------------------------------------------ timeline


def _largest_points(family: Family) -> list[Point]:
    top = largest_level(family)
    return [p for p in family.points if p.x == top]


def _largest_level_figures(fams: Sequence[Family], draw: Callable[[Sequence[Point], str, str], str],
                           plot_id: str, what: str) -> list[dict[str, Any]]:
    """Per job kind, ``draw(points at its largest level, "<plot_id>-<kind>", "<what>: <title>")``
    (``timeline_svg``, ``cpu_svg``) as ``{"slug", "svg"}``; kinds it draws nothing for are
    left out."""
    figs = []
    for f in fams:
        svg = draw(_largest_points(f), f"{plot_id}-{f.slug}", f"{what}: {f.title}")
        if svg:
            figs.append({"slug": f.slug, "svg": Markup(svg)})
    return figs


def timeline_svg(points: Sequence[Point], plot_id: str, title: str) -> str:
    """A Gantt chart of one representative job per configuration (``representative``): per
    configuration a panel with one row per target (grouped by slice, in start order) and a bar
    per phase coloured by phase (the job's stage on a row of its own above), failed targets'
    last bar hatched; below it, the targets in flight per slice over time with the cap as a
    dashed line. Bars are drawn as one collection per phase, rasterised (a job has thousands).
    Returns the SVG text."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch
    shown = [(p, representative(p)) for p in points]
    shown = [(p, o) for p, o in shown if o is not None and fleet_of(o)]
    if not shown:
        return ""
    fig = plots._figure(7.4, 3.4 * len(shown) + 0.5)
    ratios = []
    for _ in shown:
        ratios += [3, 1]
    axes = fig.subplots(2 * len(shown), 1, gridspec_kw={"height_ratios": ratios})
    end_s = max(o.result["wall_ns"] / 1e9 for _, o in shown)
    phases_seen: list[str] = []
    for i, (p, o) in enumerate(shown):
        ax, ax_n = axes[2 * i], axes[2 * i + 1]
        f = fleet_of(o)
        phases = list(f.get("phases") or ())
        rows = list((f.get("records") or {}).get("rows") or ())
        rows.sort(key=lambda r: (r[1], min([t for t in r[3:] if t is not None] or [0])))
        verts: dict[str, list] = {ph: [] for ph in phases}
        hatched = []
        offset = 1 if f.get("job_phases") else 0
        for y, r in enumerate(rows, start=offset):
            for k, ph in enumerate(phases):
                a, b = r[3 + 2 * k], r[4 + 2 * k]
                if a is None or b is None:
                    continue
                a, b = a / 1e6, max(b, a + 1) / 1e6
                rect = [(a, y - 0.45), (b, y - 0.45), (b, y + 0.45), (a, y + 0.45)]
                verts[ph].append(rect)
                if r[2] != "ok" and (k + 1 == len(phases) or r[5 + 2 * k] is None):
                    hatched.append(rect)
        for ph in phases:
            if verts[ph]:
                col = PolyCollection(verts[ph], facecolors=PHASE_COLOURS.get(ph, "#999999"), edgecolors="none",
                                     rasterized=len(rows) > 150)
                col.set_gid(f"phase-{_gid(p.series)}-{ph}")
                ax.add_collection(col)
            if ph not in phases_seen:
                phases_seen.append(ph)
        if hatched:
            ax.add_collection(PolyCollection(hatched, facecolors="none", edgecolors="#000000", hatch="////",
                                             linewidths=0.4))
        for jp in f.get("job_phases") or ():
            a, b = jp["start_us"] / 1e6, max(jp["end_us"], jp["start_us"] + 1) / 1e6
            ax.add_collection(PolyCollection([[(a, -0.45), (b, -0.45), (b, 0.45), (a, 0.45)]],
                                             facecolors=PHASE_COLOURS.get(jp["name"], "#8c8c8c")))
            if jp["name"] not in phases_seen:
                phases_seen.append(jp["name"])
        ax.set_xlim(0, end_s * 1.02)
        ax.set_ylim(len(rows) + offset, -1)
        ax.set_ylabel("targets\n(by slice, in start order)", fontsize=7.5)
        ax.set_title(f"{p.series} — {p.load.label}, block {o.repetition.block}: "
                     f"{f.get('slices')} slice(s) × cap {f.get('cap')}, {f.get('failed', 0)} failed", fontsize=8.5,
                     loc="left")
        ax.tick_params(labelsize=7.5, labelbottom=False)
        ax.grid(True, axis="x", color="#eeeeee", linewidth=0.6)
        for s, (t, n) in sorted(in_flight(o).items()):
            line, = ax_n.step(np.concatenate([[0.0], t / 1e6]), np.concatenate([[0], n]), where="post",
                              linewidth=1.0, color=plots.colour(s), label=f"slice {s}")
            line.set_gid(f"inflight-{_gid(p.series)}-{s}")
        ax_n.axhline(f.get("cap") or 0, color="#444444", linestyle="--", linewidth=0.8)
        ax_n.set_xlim(0, end_s * 1.02)
        ax_n.set_ylim(0, (f.get("cap") or 1) * 1.25)
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
    return plots._svg(fig, plot_id, "fleet-timeline", title)


_TIMELINE_HTML = """\
<p>One job per configuration at the largest level (the last measured block), as the management
side recorded it: a row per target, grouped by slice, a bar per phase from its start to its end;
the job's own stage (signing what the targets verify) on the top row; a failed target's last
phase hatched. Below each, the targets each slice had in flight over time against its cap
(dashed): the concurrency cap is never exceeded when the lines stay at or under it.</p>
{% for f in figures %}
<figure class="plot" data-plot="fleet-timeline" data-group="{{ f.slug }}">
{{ f.svg }}
</figure>
{% endfor %}
"""


@register(order=23)
def fleet_timeline(run: StoredRun) -> list[Section]:
    """"Fleet jobs: timeline by phase": per job kind, a Gantt chart of one job per configuration
    at the largest level (``timeline_svg``). HTML only."""
    fams = job_families(run)
    if not fams:
        return []

    def html() -> str:
        return _render(_TIMELINE_HTML, figures=_largest_level_figures(fams, timeline_svg, "fleet-timeline",
                                                                       "timeline by phase"))

    md = "One job per configuration at the largest level, drawn by phase and target in the HTML report.\n"
    return [Section("fleet-timeline", "Fleet jobs: timeline by phase", html, md)]


# ------------------------------------------------------------------------------ phase table


def phase_table(run: StoredRun, family: Family) -> list[dict[str, Any]]:
    """Per level and phase, one row: ``level``, ``phase``, and per configuration (in series
    order) ``cells``: the median ms and the ratio to the baseline's with its interval, and
    whether it slowed."""
    out = []
    order = view.series_order(run)
    levels = sorted({p.x for p in family.points})
    for x in levels:
        pts = sorted([p for p in family.points if p.x == x and p.outcomes],
                     key=lambda p: order.index(p.series) if p.series in order else 99)
        if not pts:
            continue
        rows = phase_rows(run, pts)
        phases = list(dict.fromkeys(r.phase for r in rows))
        for ph in phases:
            cells = []
            for p in pts:
                r = next((r for r in rows if r.configuration == p.series and r.phase == ph), None)
                cells.append({"configuration": p.series, "median": _ms(r.median_ns) if r else "—",
                              "ratio": _ratio_text(r) if r else "—", "slowed": bool(r and r.slowed),
                              "faster": bool(r and r.faster)})
            out.append({"level": pts[0].load.label, "phase": ph, "cells": cells})
    return out


_PHASES_HTML = """\
<p>The median time of each phase over every target of every measured job, per configuration,
and its ratio to the baseline's: the mean over blocks of the per-block ratio of medians, with a
{{ level }} % interval (not adjusted for multiplicity: it shows where the time went; the
verdicts are the throughput's). A phase whose interval lies above 1 slowed (bold).</p>
{% for f in tables %}
<h3>{{ f.title }}</h3>
<table class="fleet-phases" id="fleet-phases-{{ f.slug }}">
  <thead><tr><th>Level</th><th>Phase</th>{% for c in f.configurations %}<th class="num">{{ c }}<div class="sub">median ms · ratio</div></th>{% endfor %}</tr></thead>
  <tbody>
{% for r in f.rows %}
    <tr><td>{{ r.level }}</td><td>{{ r.phase }}</td>{% for c in r.cells %}<td class="num">{% if c.slowed %}<strong>{% endif %}{{ c.median }} · {{ c.ratio }}{% if c.slowed %}</strong>{% endif %}</td>{% endfor %}</tr>
{% endfor %}
  </tbody>
</table>
{% endfor %}
"""


@register(order=25)
def fleet_phases(run: StoredRun) -> list[Section]:
    """"Fleet jobs: time per phase": per job kind, level and phase, the median time per
    configuration and its ratio to the baseline's (``phase_table``)."""
    fams = job_families(run)
    if not fams:
        return []
    order = view.series_order(run)
    tables = []
    for f in fams:
        rows = phase_table(run, f)
        if rows:
            configs = [c["configuration"] for c in rows[0]["cells"]]
            tables.append({"title": f.title, "slug": f.slug, "rows": rows,
                           "configurations": sorted(configs, key=lambda c: order.index(c) if c in order else 99)})
    if not tables:
        return []

    def html() -> str:
        return _render(_PHASES_HTML, tables=tables, level=f"{BAND_LEVEL * 100:g}")

    md = (f"Median ms per phase and its ratio to the baseline's ({BAND_LEVEL * 100:g} % interval over blocks, "
          "unadjusted); **bold**: slowed.\n")
    for t in tables:
        md += f"\n**{t['title']}**\n\n" + md_table(
            ["Level", "Phase"] + t["configurations"],
            [[r["level"], r["phase"]] + [(f"**{c['median']} · {c['ratio']}**" if c["slowed"] else
                                          f"{c['median']} · {c['ratio']}") for c in r["cells"]] for r in t["rows"]],
            align="ll" + "r" * len(t["configurations"]))
    return [Section("fleet-phases", "Fleet jobs: time per phase", html, md)]


# ------------------------------------------------------------------------------ CPU and processes


def _process_label(proc: dict[str, Any]) -> str:
    return f"{proc.get('role')} {proc.get('index')}" if proc.get("role") != "coordinator" else "coordinator"


def cpu_svg(points: Sequence[Point], plot_id: str, title: str) -> str:
    """CPU % of one CPU (user + system) of every process of one representative job per
    configuration, against time since the job started (each process's samples moved by its
    sampler's start): a panel per configuration; slices solid, agents dashed, the coordinator
    dotted; the job's end a vertical line. Line ids ``<plot_id>-cpu-<configuration>-<role>-<i>``.
    Returns the SVG text."""
    shown = [(p, representative(p)) for p in points]
    shown = [(p, o) for p, o in shown if o is not None and fleet_of(o)]
    if not shown:
        return ""
    fig = plots._figure(7.2, 2.4 * len(shown) + 0.6)
    axes = fig.subplots(len(shown), 1, squeeze=False, sharex=True)[:, 0]
    styles = {"slice": "-", "agent": "--", "coordinator": ":"}
    for ax, (p, o) in zip(axes, shown):
        f = fleet_of(o)
        end = o.result["wall_ns"] / 1e9
        for proc in f.get("processes") or ():
            t, cpu, _ = timeline_series(proc.get("timeline"))
            if not t.size:
                continue
            t = t + float(proc.get("timeline_offset_ms") or 0.0) / 1000.0
            role, idx = str(proc.get("role")), int(proc.get("index") or 0)
            colour = plots.colour(idx + (0 if role == "slice" else 4 if role == "agent" else 7))
            line, = ax.plot(t, cpu, linestyle=styles.get(role, "-"), color=colour, linewidth=1.2,
                            label=_process_label(proc))
            line.set_gid(f"cpu-{_gid(p.series)}-{role}-{idx}")
        ax.axvline(0, color="#999999", linewidth=0.6)
        ax.axvline(end, color="#999999", linewidth=0.6)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("CPU, % of one CPU", fontsize=7.5)
        ax.set_title(f"{p.series} — {p.load.label}, block {o.repetition.block} (job from 0 to {end:.3g} s)",
                     fontsize=8.5, loc="left")
        ax.grid(True, color="#eeeeee", linewidth=0.6)
        ax.tick_params(labelsize=7.5)
        ax.legend(fontsize=6.5, frameon=False, loc="upper right", ncol=3)
    axes[-1].set_xlabel("time since the job started, s (before 0: set-up — certificates, probe)", fontsize=8)
    fig.suptitle(title, fontsize=10, x=0.01, y=1 - 0.08 / fig.get_figheight(), ha="left", va="top")
    fig.subplots_adjust(left=0.1, right=0.98, top=1 - 0.6 / fig.get_figheight(), bottom=0.6 / fig.get_figheight(),
                        hspace=0.45)
    return plots._svg(fig, plot_id, "fleet-cpu", title)


_CPU_HTML = """\
<p>CPU use of every process of one job per configuration at the largest level, sampled every
100 ms (user + system, % of one CPU): the slices (the management server's workers, solid), the
agents (the simulated targets, dashed) and the coordinator (dotted), from before the job (set-up:
certificates issued, the probe target) to its end (the vertical lines mark the job's start and
end).</p>
{% for f in figures %}
<figure class="plot" data-plot="fleet-cpu" data-group="{{ f.slug }}">
{{ f.svg }}
</figure>
{% endfor %}
"""


@register(order=44)
def fleet_cpu(run: StoredRun) -> list[Section]:
    """"Fleet jobs: CPU over the job": per job kind, every process's CPU over one job per
    configuration at the largest level (``cpu_svg``). HTML only."""
    fams = job_families(run)
    if not fams:
        return []

    def html() -> str:
        return _render(_CPU_HTML, figures=_largest_level_figures(fams, cpu_svg, "fleet-cpu", "CPU over the job"))

    return [Section("fleet-cpu", "Fleet jobs: CPU over the job's lifetime", html,
                    "Every process's CPU over one job per configuration, plotted in the HTML report.\n")]


def resource_rows(run: StoredRun) -> list[dict[str, Any]]:
    """Per job kind, level and configuration: the largest peak RSS (MiB) and most descriptors of
    each role's processes over the measured jobs, the connections the job could hold at once
    (``slices × cap``), and CPU (s) per role over the jobs' windows (median)."""
    out = []
    for fam in job_families(run):
        for p in sorted(fam.points, key=lambda p: p.x):
            procs = [(o, pr) for o in p.outcomes for pr in fleet_of(o).get("processes") or ()]
            if not procs:
                continue
            f = fleet_of(p.outcomes[0])
            row = {"use_case": fam.label, "level": p.load.label, "configuration": p.configuration,
                   "connections": int(f.get("slices") or 1) * int(f.get("cap") or 1)}
            for role in ("coordinator", "slice", "agent"):
                mine = [pr for _, pr in procs if pr.get("role") == role]
                rss = [pr.get("peak_rss_bytes") for pr in mine if pr.get("peak_rss_bytes") is not None]
                fds = [pr.get("max_fds") for pr in mine if pr.get("max_fds") is not None]
                row[f"{role}_rss"] = f"{max(rss) / 2**20:.0f}" if rss else "—"
                row[f"{role}_fds"] = str(max(fds)) if fds else "—"
            out.append(row)
    return out


def failure_rows(run: StoredRun) -> tuple[list[dict[str, Any]], int, int]:
    """Every failed target of every measured job (use case, level, configuration, block,
    target, slice, phase, reason), at most ``MAX_FAILURES_LISTED``; and the failed and the run
    targets in all."""
    rows, failed, ran = [], 0, 0
    for fam in job_families(run):
        for p in fam.points:
            for o in p.outcomes:
                f = fleet_of(o)
                ran += int(f.get("targets") or 0)
                for x in f.get("failures") or ():
                    failed += 1
                    if len(rows) < MAX_FAILURES_LISTED:
                        rows.append({"use_case": fam.label, "level": p.load.label, "configuration": p.configuration,
                                     "block": o.repetition.block, **x})
    return rows, failed, ran


_RESOURCES_HTML = """\
<p>What each process of a job held at its largest: peak resident memory (the kernel's high-water
mark, MiB) and the most file descriptors open at once (counted every 20 ms), the largest over the
measured jobs, beside the connections the job could hold at once (slices × cap). A finished
target's connection is closed, so descriptors follow the cap, not the number of targets.</p>
<table class="fleet-resources" id="fleet-resources">
  <thead><tr><th>Use case</th><th>Level</th><th>Configuration</th><th class="num">slices × cap</th>
    <th class="num">slice RSS, MiB</th><th class="num">slice fds</th><th class="num">agent RSS, MiB</th>
    <th class="num">agent fds</th><th class="num">coordinator RSS, MiB</th><th class="num">coordinator fds</th></tr></thead>
  <tbody>
{% for r in rows %}
    <tr><td>{{ r.use_case }}</td><td>{{ r.level }}</td><td>{{ r.configuration }}</td><td class="num">{{ r.connections }}</td>
      <td class="num">{{ r.slice_rss }}</td><td class="num">{{ r.slice_fds }}</td><td class="num">{{ r.agent_rss }}</td>
      <td class="num">{{ r.agent_fds }}</td><td class="num">{{ r.coordinator_rss }}</td><td class="num">{{ r.coordinator_fds }}</td></tr>
{% endfor %}
  </tbody>
</table>
<h3>Failed targets</h3>
{% if failures %}
<p>{{ failed }} of {{ ran }} targets failed; each is counted as failed (not completed) and its job went
on.{% if failed > failures|length %} The first {{ failures|length }}:{% endif %}</p>
<table class="fleet-failures" id="fleet-failures">
  <thead><tr><th>Use case</th><th>Level</th><th>Configuration</th><th class="num">block</th><th class="num">target</th>
    <th class="num">slice</th><th>Phase</th><th>Reason</th></tr></thead>
  <tbody>
{% for f in failures %}
    <tr><td>{{ f.use_case }}</td><td>{{ f.level }}</td><td>{{ f.configuration }}</td><td class="num">{{ f.block }}</td>
      <td class="num">{{ f.target }}</td><td class="num">{{ f.slice }}</td><td>{{ f.phase }}</td><td class="sub">{{ f.reason }}</td></tr>
{% endfor %}
  </tbody>
</table>
{% else %}
<p>None: every one of the {{ ran }} targets of the measured jobs completed.</p>
{% endif %}
"""


@register(order=45)
def fleet_resources(run: StoredRun) -> list[Section]:
    """"Fleet jobs: processes and failed targets": peak RSS and descriptors per role
    (``resource_rows``), and every failed target with its reason (``failure_rows``)."""
    rows = resource_rows(run)
    if not rows:
        return []
    failures, failed, ran = failure_rows(run)

    def html() -> str:
        return _render(_RESOURCES_HTML, rows=rows, failures=failures, failed=failed, ran=ran)

    md = ("Peak RSS (MiB) and most descriptors open, per process role, the largest over the measured jobs.\n\n"
          + md_table(["Use case", "Level", "Configuration", "slices × cap", "slice RSS", "slice fds", "agent RSS",
                      "agent fds", "coordinator RSS", "coordinator fds"],
                     [[r["use_case"], r["level"], r["configuration"], r["connections"], r["slice_rss"], r["slice_fds"],
                       r["agent_rss"], r["agent_fds"], r["coordinator_rss"], r["coordinator_fds"]] for r in rows],
                     align="lllrrrrrrr"))
    md += f"\n{failed} of {ran} targets failed" + (":\n\n" + md_table(
        ["Use case", "Level", "Configuration", "block", "target", "phase", "reason"],
        [[f["use_case"], f["level"], f["configuration"], f["block"], f["target"], f["phase"], f["reason"]]
         for f in failures], align="lllrrll") if failures else ".\n")
    return [Section("fleet-resources", "Fleet jobs: processes and failed targets", html, md)]

