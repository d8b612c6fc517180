"""The core report sections, registered in ``sections`` like any other:

 5  noise warning      — only when a verdict is "too noisy to tell" or a CV is over threshold
10  summary            — performance impact of each configuration (delta vs baseline, 95 % CI)
20  key figures        — p50, p99, ops/s, MB/s, CPU/op per configuration
30  latency            — CDF per operation on a log axis, every configuration overlaid
40  throughput and CPU — per configuration, with the spread across repetitions
50  host               — CPU, crypto flags, kernel, hypervisor, libraries, checks, noise per cell
60  how to reproduce   — the command, the study file's text, the run's facts

Formatting only: numbers and verdicts come from the StoredRun (``analysis``/``stats``).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from cryptoperf import __version__, stats
from cryptoperf.analysis import CellSummary, Delta
from cryptoperf.report import plots, view
from cryptoperf.report.render import fmt_cv, fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.terminal import fmt_count, fmt_mb_s, fmt_ns, fmt_pct, fmt_size
from cryptoperf.stats import NO_DIFFERENCE, TOO_NOISY
from cryptoperf.stored import StoredRun

_VERDICT_CLASS = {"slower": "slower", "faster": "faster", NO_DIFFERENCE: "same", TOO_NOISY: "noisy"}


def _ratio_text(r: stats.RatioEstimate | None) -> str:
    """``+12.3 % [+10.1, +14.6]`` (change with its CI, in %), '—' for None."""
    if r is None:
        return "—"
    return f"{r.delta_pct:+.1f} % {_ci_text(r)}"


def _ci_text(r: stats.RatioEstimate | None) -> str:
    return "" if r is None else f"[{r.low_pct:+.1f}, {r.high_pct:+.1f}]"


def _change_text(r: stats.RatioEstimate | None) -> str:
    return "—" if r is None else f"{r.delta_pct:+.1f} %"


def _over(cell: CellSummary, threshold_pct: float) -> list[str]:
    """What is over the CV threshold in a cell, e.g. ['CV of p50 14.2 %']."""
    if cell.ok < 2:
        return []
    out = []
    for what, cv in (("p50", cell.cv_p50), ("ops/s", cell.cv_ops_per_s)):
        if cv * 100 > threshold_pct:
            out.append(f"CV of {what} {cv * 100:.1f} %")
    return out


def _noisy_note(cell: CellSummary, threshold_pct: float) -> str:
    """``noisy: CV 14 %`` when a CV of the cell is over the threshold, else ''."""
    if cell.ok < 2:
        return ""
    cv = max(cell.cv_p50, cell.cv_ops_per_s) * 100
    return f"noisy: CV {cv:.0f} %" if cv > threshold_pct else ""


def _operation(cell: CellSummary) -> str:
    return f"{cell.cell.label} {fmt_size(cell.cell.size_bytes)}".strip()


# ----------------------------------------------------------------------------- noise warning

@register(order=5)
def noise_warning(run: StoredRun) -> list[Section]:
    """A warning when any verdict is "too noisy to tell" or any cell's CV across repetitions
    is over the study's threshold; lists each finding and the host checks that warned."""
    threshold = view.noise_threshold_pct(run)
    findings: list[str] = []
    for d in run.deltas:
        for what, v in (("latency", d.latency_verdict), ("throughput", d.throughput_verdict)):
            if v is not None and v.kind == TOO_NOISY:
                findings.append(f"{d.label} {fmt_size(d.size_bytes)} on {d.backend}, "
                                f"{d.configuration}: {what} {v.text}".replace("  ", " "))
    for s in run.summaries.values():
        over = _over(s, threshold)
        if over:
            findings.append(f"{_operation(s)} on {s.cell.backend}"
                            f"{', ' + s.cell.configuration if s.cell.configuration else ''}: "
                            f"{', '.join(over)} (threshold {threshold:g} %)")
    if not findings:
        return []
    checks = [c for c in run.host.get("checks") or [] if c.get("state") == "warning"]
    html = fragment("sections/noise_warning.html.j2", findings=findings, checks=checks,
                    threshold=threshold)
    md = (f"> **Noise warning:** {len(findings)} finding(s) above the CV threshold of "
          f"{threshold:g} % or too noisy to tell; repeat on a quieter host or with more "
          "repetitions before relying on these deltas.\n")
    md += "".join(f"> - {f}\n" for f in findings)
    return [Section("noise-warning", "Noise warning", html, md, css_class="warning")]


# ----------------------------------------------------------------------------------- summary

def _summary_rows(run: StoredRun) -> list[dict[str, Any]]:
    threshold = view.noise_threshold_pct(run)
    baseline = run.study.baseline if run.study else ""
    rows = []
    for g in view.groups(run):
        for s in g.cells:
            c = s.cell
            notes: list[str] = []
            d: Delta | None = None
            if c.configuration == baseline:
                verdict, kind = "baseline", "baseline"
                if s.status != "ok":
                    notes.append(f"{s.status}: {s.reason}")
            else:
                d = view.delta_for(run, s)
                if d is None or d.status != "ok" or d.latency_verdict is None:
                    verdict, kind = "n/a", "na"
                    notes.append(d.reason if d is not None else "no baseline to compare with")
                else:
                    verdict, kind = d.latency_verdict.text, _VERDICT_CLASS.get(d.latency_verdict.kind, "")
                    if d.note:
                        notes.append(d.note)
                    tv = d.throughput_verdict
                    if tv is not None and tv.kind != d.latency_verdict.kind:
                        notes.append(f"throughput: {tv.text}")
            notes.append(_noisy_note(s, threshold))
            rows.append({
                "operation": _operation(s), "backend": c.backend, "configuration": c.configuration,
                "op": c.op if c.op != c.label else "",
                "description": _description(run, c.configuration),
                "p50": fmt_ns(s.p50_ns),
                "latency": _ratio_text(d.latency) if d is not None else "—",
                "latency_change": _change_text(d.latency if d is not None else None),
                "latency_ci": _ci_text(d.latency if d is not None else None),
                "throughput": _ratio_text(d.throughput) if d is not None else "—",
                "throughput_change": _change_text(d.throughput if d is not None else None),
                "throughput_ci": _ci_text(d.throughput if d is not None else None),
                "verdict": verdict, "kind": kind, "note": _one_line(notes),
                "note_full": "; ".join(n for n in notes if n),
                "first": s is g.cells[0], "group_size": len(g.cells),
            })
    return rows


def _one_line(notes: list[str], limit: int = 72) -> str:
    """The notes joined with '; ', cut to ``limit`` characters with '…' (the whole text is in
    the HTML cell's title and in the JSON)."""
    text = "; ".join(n for n in notes if n)
    return text if len(text) <= limit else text[:limit - 1].rstrip(" ;:,") + "…"


def _description(run: StoredRun, configuration: str) -> str:
    if run.study is None:
        return ""
    try:
        return run.study.configuration(configuration).description
    except KeyError:
        return ""


@register(order=10)
def summary(run: StoredRun) -> list[Section]:
    """"Performance impact of each configuration": per operation and configuration, the p50,
    the latency and throughput change vs the baseline with 95 % CIs, the verdict and a note.
    Nothing for a run without a study (no baseline)."""
    if run.study is None:
        return []
    rows = _summary_rows(run)
    if not rows:
        return []
    s = run.study
    html = fragment("sections/summary.html.j2", rows=rows, baseline=s.baseline,
                    repetitions=s.repetitions, resamples=s.bootstrap_resamples,
                    threshold=s.noise_threshold_pct)
    md = (f"Change vs baseline **{s.baseline}** (same backend, operation and size): ratio of "
          f"medians over {s.repetitions} repetitions, 95 % bootstrap CI in brackets.\n\n")
    md += md_table(["Operation", "Backend", "Configuration", "p50", "Δ latency (95 % CI)",
                    "Δ throughput (95 % CI)", "Verdict", "Note"],
                   [[r["operation"], r["backend"],
                     r["configuration"] + (f" ({r['op']})" if r["op"] else ""), r["p50"], r["latency"],
                     r["throughput"], r["verdict"], r["note"]] for r in rows], align="lllrrrll")
    return [Section("summary", "Performance impact of each configuration", html, md)]


# ------------------------------------------------------------------------------- key figures

@register(order=20)
def key_figures(run: StoredRun) -> list[Section]:
    """Per cell: p50, p99 (medians over repetitions), ops/s, MB/s, CPU time per operation,
    measured repetitions and the library version."""
    rows = []
    for g in view.groups(run):
        for s in g.cells:
            rows.append({
                "operation": _operation(s), "backend": s.cell.backend,
                "series": view.series_name(run, s), "library": s.library_version or "",
                "p50": fmt_ns(s.p50_ns), "p99": fmt_ns(s.p99_ns), "ops": fmt_count(s.ops_per_s),
                "mb": fmt_mb_s(s.bytes_per_s), "cpu": fmt_ns(s.cpu_ns_per_op),
                "reps": f"{s.ok}/{s.runs}", "status": s.status, "reason": s.reason,
                "first": s is g.cells[0], "group_size": len(g.cells)})
    if not rows:
        return []
    per_config = view.by_configuration(run)
    series = "Configuration" if per_config else "Backend"
    html = fragment("sections/key_figures.html.j2", rows=rows, series=series, per_config=per_config)
    head = ["Operation"] + (["Backend"] if per_config else []) + [
        series, "p50", "p99", "ops/s", "MB/s", "CPU/op", "reps ok"]
    body = [[r["operation"]] + ([r["backend"]] if per_config else []) + [
        r["series"], r["p50"], r["p99"], r["ops"], r["mb"], r["cpu"],
        r["reps"] if r["status"] == "ok" else f"{r['reps']} ({r['status']})"] for r in rows]
    md = ("Medians over repetitions; CPU/op is on-CPU time per operation, MB/s is 10⁶ bytes/s.\n\n"
          + md_table(head, body, align="l" * (len(head) - 6) + "rrrrrr"))
    return [Section("key-figures", "Key figures", html, md)]


# ----------------------------------------------------------------------------------- latency

def _latency_curve(run: StoredRun, s: CellSummary) -> tuple[plots.Curve | None, dict[str, Any]]:
    name = view.series_name(run, s)
    ok = view.measured(view.outcomes_of(run, s))
    hists = [o.result["histogram"] for o in ok if o.result and o.result.get("histogram")]
    row: dict[str, Any] = {"series": name, "reps": len(hists), "status": s.status, "reason": s.reason,
                           "timing": next((o.result.get("timing") for o in ok if o.result), "") or "",
                           "batch": s.batch}
    if not hists:
        return None, row
    merged = stats.merge_histograms(hists)
    lat = stats.latency_of(merged)
    values, fraction = stats.cdf(merged)
    marks = {"p50": lat.p50_ns, "p90": lat.p90_ns, "p99": lat.p99_ns, "p99.9": lat.p999_ns}
    row.update(count=lat.count, p50=lat.p50_ns, p90=lat.p90_ns, p99=lat.p99_ns, p999=lat.p999_ns,
               max=lat.max_ns, mean=lat.mean_ns)
    return plots.Curve(name, values, fraction, marks, view.colour_of(run, name)), row


@register(order=30)
def latency(run: StoredRun) -> list[Section]:
    """Per group, the latency CDF of every series (repetitions' histograms merged) on a log
    axis with p50/p90/p99/p99.9 marked, and a table of those percentiles."""
    figures = []
    for g in view.groups(run):
        curves, rows = [], []
        for s in g.cells:
            curve, row = _latency_curve(run, s)
            rows.append(row)
            if curve is not None:
                curves.append(curve)
        svg = plots.latency_cdf_svg(curves, f"latency-cdf-{g.slug}", f"latency: {g.title}")
        figures.append({"group": g, "svg": Markup(svg), "rows": rows,
                        "batched": any(r["batch"] and r["batch"] > 1 for r in rows)})
    if not figures:
        return []
    html = fragment("sections/latency.html.j2", figures=figures)
    return [Section("latency", "Latency distribution", html)]


# ------------------------------------------------------------------------- throughput and CPU

@register(order=40)
def throughput_cpu(run: StoredRun) -> list[Section]:
    """Per group, operations per second and CPU time per operation of every series: median
    of the repetitions with their min–max and each repetition shown."""
    figures = []
    for g in view.groups(run):
        bars = []
        for s in g.cells:
            ok = view.measured(view.outcomes_of(run, s))
            name = view.series_name(run, s)
            bars.append(plots.Bars(name, [o.throughput.ops_per_s for o in ok],
                                   [o.throughput.cpu_ns_per_op for o in ok], view.colour_of(run, name)))
        svg = plots.throughput_cpu_svg(bars, f"throughput-cpu-{g.slug}", f"throughput and CPU: {g.title}")
        figures.append({"group": g, "svg": Markup(svg)})
    if not figures:
        return []
    html = fragment("sections/throughput_cpu.html.j2", figures=figures)
    return [Section("throughput-cpu", "Throughput and CPU time per operation", html)]


# -------------------------------------------------------------------------------------- host

def _hypervisor_text(hv: dict[str, Any]) -> str:
    if not hv:
        return "unknown"
    if hv.get("type"):
        text = str(hv["type"])
    elif hv.get("present") is True:
        text = "yes (type unknown)"
    elif hv.get("present") is False:
        text = "none detected"
    else:
        text = "unknown"
    if hv.get("container"):
        text += f", in container {hv['container']}"
    return text


@register(order=50)
def host(run: StoredRun) -> list[Section]:
    """The host the numbers belong to: CPU model and crypto flags, kernel, hypervisor, library
    versions, host checks, and noise per cell (CV across repetitions, steal %)."""
    h = run.host
    threshold = view.noise_threshold_pct(run)
    used = {s.cell.backend for s in run.summaries.values()}
    libraries = [{"backend": b, "build": None, **(v or {})} for b, v in (h.get("libraries") or {}).items()
                 if not used or b in used]
    # other worker builds (openssl@3.6, fips): the libraries their cells ran on, marked
    in_build = {(s.cell.build, s.cell.backend) for s in run.summaries.values()}
    for name, b in (h.get("builds") or {}).items():
        libraries += [{"backend": backend, "build": name, **(v or {})}
                      for backend, v in (b.get("libraries") or {}).items() if (name, backend) in in_build]
    steals = [s.steal_pct for s in run.summaries.values() if s.steal_pct is not None]
    facts = [
        ("CPU", f"{h.get('cpu_model') or 'unknown'} × {h.get('logical_cpus') or '?'} logical CPUs"),
        ("crypto flags", " ".join(h.get("crypto_flags") or []) or "none detected"),
        ("kernel", h.get("kernel") or "unknown"),
        ("machine / OS", f"{h.get('machine') or '?'} / {h.get('os') or '?'}"),
        ("hypervisor", _hypervisor_text(h.get("hypervisor") or {})),
        ("worker", h.get("worker_version") or "unknown"),
        ("Python", h.get("python") or "unknown"),
        ("steal", f"{sum(steals) / len(steals):.2f} % on average over the measured repetitions"
                  if steals else "unknown"),
    ]
    noise = []
    for g in view.groups(run):
        for s in g.cells:
            noise.append({"operation": _operation(s), "backend": s.cell.backend,
                          "series": view.series_name(run, s), "reps": f"{s.ok}/{s.runs}",
                          "cv_p50": fmt_cv(s.cv_p50, s.ok), "cv_ops": fmt_cv(s.cv_ops_per_s, s.ok),
                          "over_p50": s.ok >= 2 and s.cv_p50 * 100 > threshold,
                          "over_ops": s.ok >= 2 and s.cv_ops_per_s * 100 > threshold,
                          "steal": fmt_pct(s.steal_pct, signed=False)})
    html = fragment("sections/host.html.j2", facts=facts, libraries=libraries,
                    checks=h.get("checks") or [], noise=noise, threshold=threshold,
                    series="Configuration" if view.by_configuration(run) else "Backend")
    lib_text = ", ".join(f"{x['backend']}{' [' + x['build'] + ']' if x.get('build') else ''}: "
                         f"{x.get('library') or ''} {x.get('library_version') or ''}"
                         f"{' (FIPS)' if x.get('fips') else ''}".strip() for x in libraries)
    md = "".join(f"- {k}: {v}\n" for k, v in facts[:5]) + (f"- libraries: {lib_text}\n" if lib_text else "")
    return [Section("host", "Host", html, md)]


# -------------------------------------------------------------------------- how to reproduce

@register(order=60)
def reproduce(run: StoredRun) -> list[Section]:
    """How to reproduce: the command and the study file's text (for a study), and the run's
    facts (id, kind, status, times, seed, format version)."""
    m = run.meta
    facts = [("run", f"{run.id} ({m.get('kind')}, {m.get('status')})"),
             ("started", m.get("started_at") or "?"), ("finished", m.get("finished_at") or "—"),
             ("bootstrap seed", "—" if m.get("seed") is None else str(m.get("seed"))),
             ("format version", str(m.get("format_version"))),
             ("report made by", f"cryptoperf {__version__}")]
    study = run.study
    filename = f"{study.name}.toml" if study else ""
    command = f"cryptoperf study {filename}" if study else "cryptoperf speed …"
    html = fragment("sections/reproduce.html.j2", facts=facts, study=study, filename=filename,
                    command=command, run_id=run.id)
    md = (f"Reproduce: save the study file (in the HTML report) as `{filename}` and run "
          f"`{command}`; this is run {run.id}, started {m.get('started_at')}.\n" if study else
          f"Run {run.id} ({m.get('kind')}), started {m.get('started_at')}.\n")
    return [Section("study", "How to reproduce", html, md)]
