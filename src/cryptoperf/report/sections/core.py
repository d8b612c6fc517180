"""The core report sections, registered in ``sections`` like any other:

 0  answer             — the answer first, one table per metric family (``answer.py``)
 1  verdicts at a glance — a forest plot of every comparison (HTML), a verdict list (Markdown)
 6  not FIPS-approved  — cells that timed in FIPS mode what the FIPS module does not approve
10  summary            — performance impact of each configuration (delta vs baseline, intervals)
20  key figures        — p50, p99, ops/s, MB/s, CPU/op per configuration
30  latency            — CDF per operation on a log axis, every configuration overlaid
40  throughput and CPU — per configuration, with the spread across repetitions
50  host               — CPU, crypto flags, kernel, hypervisor, libraries, checks, noise per cell
60  how to reproduce   — the command, the study file's text, the run's facts
70  noise details      — CV over threshold, inconclusive verdicts and what would decide them,
                         disturbed repetitions and their re-runs: counted in one line under the
                         answer, listed here at the end (HTML: collapsed behind ``<details>``)

Sections with plots give their HTML body as a function (``Section.html``), so the Markdown
report never draws. Formatting only: numbers and verdicts come from the StoredRun's
``analysis`` (``analysis``/``stats``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from markupsafe import Markup

from cryptoperf import __version__, analysis, stats
from cryptoperf.model import CellSummary, Delta
from cryptoperf.report import text as fmt
from cryptoperf.report import plots, view
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.sections import explain as explain_section
from cryptoperf.report.text import (configuration_text, fmt_count, fmt_cv, fmt_mb_s, fmt_ns, fmt_pct,
                                      interval_header, verdict_counts)
from cryptoperf.store.stored_run import StoredRun


def _ratio_text(r: stats.Interval | None) -> str:
    """``+12.3 % [+10.1, +14.6]`` below 2×, ``13.5× [13.3, 13.7]`` from 2× on
    (``stats.change_text``), '—' for None."""
    return "—" if r is None else fmt.change_text(r)


def _ci_text(r: stats.Interval | None) -> str:
    """The interval alone (``stats.interval_text``), '' for None."""
    return "" if r is None else fmt.interval_text(r)


def _change_text(r: stats.Interval | None) -> str:
    """The point change alone (``stats.change_point_text``), '—' for None."""
    return "—" if r is None else fmt.change_point_text(r)


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
    return fmt.operation(cell.cell.label, cell.cell.size_bytes)


def _delta_operation(d: Delta) -> str:
    return fmt.operation(d.label, d.size_bytes)


def _delta_where(d: Delta, baseline: str) -> str:
    """``hash 4 KiB on aws-lc, masked [cpu no-aesni]``: which comparison a delta is (a contrast's
    with `` vs <reference>``, ``fmt.comparison_text``)."""
    return f"{_delta_operation(d)} on {d.backends}, {fmt.comparison_text(d, baseline)}"


def _cell_where(s: CellSummary) -> str:
    """``hash 4 KiB on aws-lc, B``: which cell a summary is (no configuration for ``speed``)."""
    c = s.cell
    conf = f", {configuration_text(c.configuration, c.cpu, c.build)}" if c.configuration else ""
    return f"{_operation(s)} on {c.backend}{conf}"


def _batch_of(run: StoredRun, s: CellSummary) -> int | None:
    """Operations per timed sample of a cell (its summary's)."""
    return s.batch


def _batch_note(batches: Sequence[int | None], what: str, also: str = "") -> str:
    """A sentence saying that ``what`` (e.g. ``p50 and p99``) of rows timed in batches of k > 1
    operations are percentiles of k-operation batch means, e.g. "… of 8-operation batch means
    …", followed by ``also`` (another sentence); '' when no batch holds more than one operation."""
    ks = sorted({k for k in batches if k and k > 1})
    if not ks:
        return ""
    sizes = (f"{ks[0]}-operation" if len(ks) == 1
             else ", ".join(f"{k}-" for k in ks[:-1]) + f" and {ks[-1]}-operation")
    return (f"Where batch k > 1, each timed sample is k operations: {what} of those rows are "
            f"percentiles of {sizes} batch means, not of single operations (the batch smooths the tail)."
            + (f" {also}" if also else ""))


def _ordered_deltas(run: StoredRun) -> list[tuple[str, list[Delta]]]:
    """The run's deltas grouped by operation (label and size, first-seen order), each group's in
    backend order (first seen) then configuration order (``view.series_order``)."""
    ops: dict[tuple, int] = {}
    backends: dict[str, int] = {}
    for s in run.summaries.values():
        ops.setdefault((s.cell.label, s.cell.size_bytes), len(ops))
        backends.setdefault(s.cell.backend, len(backends))
    series = {name: i for i, name in enumerate(view.series_order(run))}
    grouped: dict[tuple, list[Delta]] = {}
    for d in run.deltas:
        grouped.setdefault((d.label, d.size_bytes), []).append(d)
    out = []
    for key in sorted(grouped, key=lambda k: ops.get(k, len(ops))):
        ds = sorted(grouped[key], key=lambda d: (backends.get(d.backend, len(backends)),
                                                 series.get(d.configuration, len(series)), d.cpu, d.build))
        out.append((_delta_operation(ds[0]), ds))
    return out


def _decided(d: Delta) -> bool:
    """True when a delta has an interval and a verdict."""
    return d.status == "ok" and d.decisive is not None


# ----------------------------------------------------------------------- verdicts at a glance

def plot_verdict_text(v: stats.Verdict, ci: stats.Interval) -> str:
    """The verdict as printed right of a forest plot row: the verdict's text, with an
    inconclusive one cut to its interval and the blocks that would decide it."""
    if v.kind != stats.INCONCLUSIVE:
        return v.text
    more = (f"about {v.blocks_needed} blocks to decide" if v.blocks_needed is not None
            else f"over {stats.MAX_PROJECTED_BLOCKS} blocks to decide")
    return f"inconclusive [{ci.low_pct:+.1f}, {ci.high_pct:+.1f}] %; {more}"


def _na_text(d: Delta) -> str:
    return f"n/a: {d.reason}" if d.reason else "n/a"


#: Metrics in the order their forest plots come, with the words of each plot's axis: which side of
#: 0 is worse (a higher latency or CPU time, a lower throughput).
FOREST_AXES = {"latency": "right: higher p50 latency (worse)",
               "throughput": "left: lower throughput (worse)",
               "cpu_per_op": "right: more CPU per operation (worse)",
               "server_cpu_per_op": "right: more server CPU per transaction (worse)"}


def _forest_figures(run: StoredRun, groups: list[tuple[str, list[Delta]]]) -> list[dict[str, Any]]:
    """One forest plot per metric the verdicts were decided on (``FOREST_AXES`` order), so that
    every row of a plot has the same direction: ``{"key", "metric", "svg"}`` each."""
    a = run.analysis
    baseline = run.study.baseline
    out = []
    for key, direction in FOREST_AXES.items():
        name = stats.METRICS[key][0]
        forest = []
        for title, ds in groups:
            rows = [plots.ForestRow(f"{d.backends} {fmt.comparison_text(d, baseline)}",
                                    d.decisive.ratio, d.decisive.low, d.decisive.high, d.verdict.kind,
                                    plot_verdict_text(d.verdict, d.decisive))
                    for d in ds if _decided(d) and stats.metric_key(d.verdict.metric) == key]
            if rows:
                forest.append(plots.ForestGroup(title, rows))
        if not forest:
            continue
        xlabel = (f"{name}, configuration ÷ baseline {baseline}, log scale ({direction}); "
                  f"bars: {a.level * 100:.4g} % intervals")
        svg = plots.forest_svg(forest, a.settings.margin_pct, f"verdict-forest-{key}",
                               f"{name} change vs baseline {baseline}", xlabel)
        out.append({"key": key, "metric": name, "direction": direction, "svg": Markup(svg)})
    return out


@register(order=1)
def verdicts(run: StoredRun) -> list[Section]:
    """"Verdicts at a glance": every comparison of the study. HTML: a forest plot per metric the
    verdicts were decided on (dot = the ratio of that metric, bar = its interval at the adjusted
    level, the ± margin band shaded, log ratio axis labelled in %, the worse side named),
    captioned with the method; comparisons without an interval are listed under them with their
    reason. Markdown: the same verdicts as a list, and the method. Nothing for a run without a
    study or without comparisons."""
    if run.study is None or not run.deltas:
        return []
    groups = _ordered_deltas(run)
    a = run.analysis
    baseline = run.study.baseline
    missing = [{"where": _delta_where(d, baseline), "reason": _na_text(d)} for _, ds in groups for d in ds
               if not _decided(d)]
    plotted = sum(1 for _, ds in groups for d in ds if _decided(d))
    counts = verdict_counts(run.deltas)
    method = a.method
    on = analysis.decided_on(run.deltas) or a.settings.metric

    def html() -> str:
        figures = _forest_figures(run, groups) if plotted else []
        return fragment("sections/verdicts.html.j2", figures=figures, method=method, baseline=baseline,
                        decided_on=on, margin=a.settings.margin_pct, level=a.level, missing=missing, counts=counts)

    lines = [f"Each configuration against the baseline **{baseline}** on the same backend, operation and size, "
             f"decided on {on}: {counts}.\n"]
    for _, ds in groups:
        for d in ds:
            text = d.verdict.text if _decided(d) else _na_text(d)
            lines.append(f"- {_delta_where(d, baseline)}: {text}")
    md = "\n".join(lines) + f"\n\nMethod: {method}.\n"
    return [Section("verdicts", "Verdicts at a glance", html, md)]


# ----------------------------------------------------------------------------- noise warning

def _disturbances(run: StoredRun) -> tuple[list[str], list[str]]:
    """(repetitions flagged disturbed that were analysed, superseded attempts re-run), each as
    ``<cell>, block N: <why>`` (``run.analysis.disturbances``)."""
    flagged, rerun = [], []
    for g in view.groups(run):
        for s in g.cells:
            for d in run.analysis.disturbances:
                if d.cell != s.cell.key:
                    continue
                where = f"{_cell_where(s)}, block {d.block}"
                if d.rerun:
                    rerun.append(f"{where}: {d.why}; run again")
                else:
                    flagged.append(f"{where}: {d.why}")
    return flagged, rerun


def noise_findings(run: StoredRun) -> dict[str, list[str]]:
    """What the reader should weigh before trusting the deltas, one text per finding, by kind
    (in this order): ``noisy`` (cells whose CV across repetitions is over the study's
    threshold), ``inconclusive`` (comparisons with the blocks that would decide them),
    ``disturbed`` (repetitions flagged as disturbed that were analysed), ``rerun`` (disturbed
    attempts run again). Lists are empty when there is nothing of that kind."""
    threshold = view.noise_threshold_pct(run)
    noisy: list[str] = []
    for s in run.summaries.values():
        over = _over(s, threshold)
        if over:
            noisy.append(f"{_cell_where(s)}: {', '.join(over)} (threshold {threshold:g} %)")
    undecided = []
    baseline = run.study.baseline if run.study else ""
    for _, ds in _ordered_deltas(run):
        for d in ds:
            if _decided(d) and d.verdict.kind == stats.INCONCLUSIVE:
                v = d.verdict
                more = (stats.hint_text(v.blocks_needed) if v.blocks_needed is not None
                        else f"more than {stats.MAX_PROJECTED_BLOCKS} blocks would be needed to decide it")
                undecided.append(f"{_delta_where(d, baseline)}: [{d.decisive.low_pct:+.1f}, {d.decisive.high_pct:+.1f}] % "
                                 f"over {d.blocks} blocks spans the ±{v.margin_pct:g} % margin; {more}")
    flagged, rerun = _disturbances(run)
    return {"noisy": noisy, "inconclusive": undecided, "disturbed": flagged, "rerun": rerun}


@register(order=70)
def noise_warning(run: StoredRun) -> list[Section]:
    """The details of what the reader should weigh (``noise_findings``), at the end of the
    report: the answer section counts them in one line and links here. HTML: one summary line,
    the lists behind a ``<details>`` element (collapsed); Markdown: the same lists in a quote.
    The host checks that warned are listed with them. Nothing when there is nothing to say."""
    threshold = view.noise_threshold_pct(run)
    found = noise_findings(run)
    noisy, undecided, flagged, rerun = (found[k] for k in ("noisy", "inconclusive", "disturbed", "rerun"))
    if not (noisy or undecided or flagged or rerun):
        return []
    checks = [c for c in run.host.get("checks") or [] if c.get("state") == "warning"]
    lists = [("noisy", f"Variation above the CV threshold of {threshold:g} %", noisy,
              "Some results vary across repetitions more than the study's threshold: repeat on a quieter "
              "host or with more blocks before relying on the deltas they affect."),
             ("inconclusive", "Inconclusive comparisons", undecided,
              "Some comparisons are inconclusive: their interval still spans the equivalence margin. That "
              "is not an error; more blocks would decide them (the count given is where the predictive "
              "probability of a decision reaches 80 %)."),
             ("disturbed", "Disturbed repetitions, analysed", flagged,
              "The host disturbed some analysed repetitions (steal or other load above the study's limits) "
              "even after their re-run."),
             ("rerun", "Repetitions run again", rerun,
              "The host disturbed some repetitions; each was run again and only the re-run is analysed.")]
    lists = [x for x in lists if x[2]]
    warn = bool(noisy or flagged)
    if warn:
        title = "Noise warning"
    elif undecided:
        title = "Undecided comparisons and re-runs" if rerun else "Undecided comparisons"
    else:
        title = "Re-run repetitions"
    counted = "; ".join(f"{head}: {len(items)}" for _, head, items, _ in lists)
    html = fragment("sections/noise_warning.html.j2", lists=lists, checks=checks, counted=counted)
    lead = " ".join(x[3] for x in lists)
    md = f"> {'**Noise warning:**' if warn else '**Note:**'} {lead}\n"
    for _, head, items, _ in lists:
        md += f">\n> {head}:\n>\n" + "".join(f"> - {f}\n" for f in items)
    if checks:
        md += ">\n> Host checks that warned: " + "; ".join(
            f"{c.get('name')}: {c.get('value')}" for c in checks) + "\n"
    return [Section("noise-warning", title, html, md, css_class="warning" if warn else "notice")]


@register(order=6)
def fips_unapproved(run: StoredRun) -> list[Section]:
    """Cells that ran in FIPS mode an operation the FIPS module does not approve as timed
    (``Analysis.fips_unapproved``), each with the worker's reason: measured all the same, but
    not what a FIPS deployment pays. Nothing when there is none."""
    found = [(_cell_where(run.summaries[key]), why) for key, why in run.analysis.fips_unapproved.items()
             if key in run.summaries]
    if not found:
        return []
    lead = ("These cells ran in FIPS mode an operation the FIPS module does not approve as it was timed; "
            "a FIPS deployment would not use it, so its cost is not part of what FIPS mode costs.")
    md = f"> **Note:** {lead}\n>\n" + "".join(f"> - {where}: {why}\n" for where, why in found)
    html = fragment("sections/fips_unapproved.html.j2", lead=lead, cells=found)
    return [Section("fips-unapproved", "Not FIPS-approved as timed", html, md, css_class="notice")]


# ----------------------------------------------------------------------------------- summary

_VERDICT_CLASS = {k: k for k in stats.VERDICT_KINDS}


def _summary_rows(run: StoredRun) -> list[dict[str, Any]]:
    threshold = view.noise_threshold_pct(run)
    baseline = run.study.baseline if run.study else ""
    rows = []
    for g in view.groups(run):
        for s in g.cells:
            c = s.cell
            notes: list[str] = []
            d: Delta | None = None
            blocks = ""
            if c.configuration == baseline:
                verdict, kind = "baseline", "baseline"
                if s.status != "ok":
                    notes.append(f"{s.status}: {s.reason}")
            else:
                d = view.delta_for(run, s)
                if d is None or not _decided(d):
                    verdict, kind = "n/a", "na"
                    notes.append(d.reason if d is not None else "no baseline to compare with")
                else:
                    verdict, kind = d.verdict.text, _VERDICT_CLASS.get(d.verdict.kind, "")
                    blocks = str(d.blocks)
                    if d.note:
                        notes.append(d.note)
            notes.append(_noisy_note(s, threshold))
            if s.disturbed:
                notes.append(f"{s.disturbed} disturbed repetition{'s' if s.disturbed != 1 else ''}")
            rows.append({
                "operation": _operation(s), "backend": c.backend,
                "configuration": configuration_text(c.configuration, c.cpu, c.build),
                "op": c.op if c.op != c.label else "",
                "description": _description(run, c.configuration),
                "p50": fmt_ns(s.p50_ns), "batch": _batch_of(run, s),
                "latency": _ratio_text(d.latency) if d is not None else "—",
                "latency_change": _change_text(d.latency if d is not None else None),
                "latency_ci": _ci_text(d.latency if d is not None else None),
                "throughput": _ratio_text(d.throughput) if d is not None else "—",
                "cpu_per_op": _ratio_text(d.cpu_per_op) if d is not None else "—",
                "throughput_change": _change_text(d.throughput if d is not None else None),
                "throughput_ci": _ci_text(d.throughput if d is not None else None),
                "cpu_change": _change_text(d.cpu_per_op if d is not None else None),
                "cpu_ci": _ci_text(d.cpu_per_op if d is not None else None),
                "server_cpu_per_op": _ratio_text(d.server_cpu_per_op) if d is not None else "—",
                "server_cpu_change": _change_text(d.server_cpu_per_op if d is not None else None),
                "server_cpu_ci": _ci_text(d.server_cpu_per_op if d is not None else None),
                "decided": stats.metric_key(d.verdict.metric) if d is not None and _decided(d) else "",
                "blocks": blocks, "verdict": verdict, "kind": kind, "note": _one_line(notes),
                # a decided verdict links to how to explain it (the "Why" section's row)
                "explain_anchor": (explain_section.anchor(d) if d is not None and _decided(d) and c.server is None
                                   and d.verdict.kind in ("slower", "faster") else ""),
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


def _how_text(run: StoredRun) -> str:
    """How a summary row's change and interval are made, in one paragraph (plain text)."""
    a = run.analysis
    level = f"{a.level * 100:.4g} %"
    if a.settings.multiplicity and a.comparisons > 1:
        adjust = (f"at {level} each (Bonferroni over {a.comparisons} comparisons, so that all hold "
                  f"together at {a.settings.level * 100:g} %)")
    else:
        adjust = f"at {level}"
    return ("The study runs in randomised complete blocks: each block runs every configuration of a "
            "backend, operation and size once, in a random order, each in a fresh worker process. "
            "Δ latency is the geometric mean over blocks of the per-block ratio configuration ÷ baseline "
            "of the p50 latency (Δ throughput: of operations per second; Δ process CPU: of the worker process's CPU time per "
            f"operation), with a paired Student t interval on the per-block log ratios {adjust}. The "
            f"verdict is decided on {analysis.decided_on(run.deltas) or a.settings.metric} (in bold) against "
            f"the ±{a.settings.margin_pct:g} % equivalence margin: slower or faster when the interval "
            "excludes 0 %, saying what changed, equivalent when it lies within the margin, inconclusive "
            "otherwise." + _power_text(a))


def _power_text(a: analysis.Analysis) -> str:
    """`` With the noise this run measured …``: the change its comparisons found 80 % of the
    time (``Analysis.detectable_change``); '' without a decided comparison."""
    found = a.detectable_change()
    if found is None:
        return ""
    change, cv, blocks = found
    what = fmt.detectable_text(change)
    return (f" With the noise this run measured (a CV of {cv * 100:.1f} % per repetition, the median over "
            f"its comparisons), a comparison over {blocks} blocks finds {what} 80 % of the time.")


@register(order=10)
def summary(run: StoredRun) -> list[Section]:
    """"Performance impact of each configuration": per operation and configuration, the p50,
    the latency and throughput change vs the baseline with their intervals (at the adjusted
    level), the blocks used, the verdict and notes. Nothing for a run without a study (no
    baseline)."""
    if run.study is None:
        return []
    rows = _summary_rows(run)
    if not rows:
        return []
    s = run.study
    ci = interval_header(run.analysis.level)
    batch_note = _batch_note([r["batch"] for r in rows], "the p50 values")
    show_cpu = any(r["decided"] == "cpu_per_op" for r in rows)
    show_server = any(r["decided"] == "server_cpu_per_op" for r in rows)
    html = fragment("sections/summary.html.j2", rows=rows, baseline=s.baseline, how=_how_text(run),
                    ci=ci, method=run.analysis.method, batch_note=batch_note, show_cpu=show_cpu,
                    show_server=show_server)
    md = (f"Change vs baseline **{s.baseline}** (same backend, operation and size): per-block paired "
          f"ratio, geometric mean over blocks, paired t interval in brackets ({run.analysis.method}); "
          f"in bold, the change the verdict is decided on.{_power_text(run.analysis)}\n\n")
    metrics = [("latency", "Δ latency"), ("throughput", "Δ throughput")] + (
        [("cpu_per_op", "Δ process CPU per operation")] if show_cpu else []) + (
        [("server_cpu_per_op", "Δ server CPU per transaction")] if show_server else [])
    bold = (lambda r, k: f"**{r[k]}**" if r["decided"] == k else r[k])
    md += md_table(["Operation", "Backend", "Configuration", "p50"] + [f"{h} ({ci})" for _, h in metrics]
                   + ["Blocks", "Verdict", "Note"],
                   [[r["operation"], r["backend"], r["configuration"] + (f" ({r['op']})" if r["op"] else ""),
                     r["p50"]] + [bold(r, k) for k, _ in metrics] + [r["blocks"], r["verdict"], r["note"]]
                    for r in rows],
                   align="lllr" + "r" * len(metrics) + "rll")
    if batch_note:
        md += f"\n{batch_note}\n"
    return [Section("summary", "Performance impact of each configuration", html, md)]


# ------------------------------------------------------------------------------- key figures

@register(order=20)
def key_figures(run: StoredRun) -> list[Section]:
    """Per cell: p50, p99 (medians over repetitions), ops/s, MB/s, CPU time per operation,
    operations per timed sample (batch; where k > 1 the percentiles are of k-operation batch
    means, and a note says so), measured repetitions and the library version."""
    rows = []
    for g in view.groups(run):
        for s in g.cells:
            rows.append({
                "operation": _operation(s), "backend": s.cell.backend,
                "series": view.series_name(run, s), "library": s.library_version or "",
                "p50": fmt_ns(s.p50_ns), "p99": fmt_ns(s.p99_ns), "ops": fmt_count(s.ops_per_s),
                "mb": fmt_mb_s(s.bytes_per_s), "cpu": fmt_ns(s.process_cpu_ns_per_op),
                "device_cpu": fmt_ns(s.device_process_cpu_ns_per_op) if s.device_process_cpu_ns_per_op is not None else "",
                "host_cpu": fmt_ns(s.host_cpu_ns_per_op) if s.device_process_cpu_ns_per_op is not None else "",
                "batch": _batch_of(run, s),
                "reps": f"{s.ok}/{s.repetitions}", "status": s.status, "reason": s.reason,
                "first": s is g.cells[0], "group_size": len(g.cells)})
    if not rows:
        return []
    per_config = view.by_configuration(run)
    series = "Configuration" if per_config else "Backend"
    batch_note = _batch_note([r["batch"] for r in rows], "p50 and p99")
    device = any(r["device_cpu"] for r in rows)
    html = fragment("sections/key_figures.html.j2", rows=rows, series=series, per_config=per_config,
                    batch_note=batch_note, device=device)
    head = ["Operation"] + (["Backend"] if per_config else []) + [
        series, "p50", "p99", "ops/s", "MB/s", "process CPU/op"] + (["device process CPU/op", "host CPU/op"] if device else []) + [
        "batch", "reps ok"]
    body = [[r["operation"]] + ([r["backend"]] if per_config else []) + [
        r["series"], r["p50"], r["p99"], r["ops"], r["mb"], r["cpu"]] + ([r["device_cpu"], r["host_cpu"]] if device else []) + [
        r["batch"] or "", r["reps"] if r["status"] == "ok" else f"{r['reps']} ({r['status']})"] for r in rows]
    numbers = 9 if device else 7
    md = ("Medians over repetitions; process CPU/op is the worker process's on-CPU time per operation, its measuring threads' (a "
          "workload's client side), MB/s is 10⁶ bytes/s."
          + (" Device process CPU/op: the CPU per operation of a device's own process on this host (a PKCS#11 token's "
             "daemon) over the same window; host CPU/op: the two added." if device else "") + "\n\n"
          + md_table(head, body, align="l" * (len(head) - numbers) + "r" * numbers))
    if batch_note:
        md += f"\n{batch_note}\n"
    return [Section("key-figures", "Key figures", html, md)]


# ----------------------------------------------------------------------------------- latency

def _latency_curve(run: StoredRun, s: CellSummary) -> tuple[plots.Curve | None, dict[str, Any]]:
    name = view.series_name(run, s)
    dist = run.analysis.distribution(s.cell.key)
    batch = s.batch
    row: dict[str, Any] = {"series": name, "reps": len(run.analysis.histograms.get(s.cell.key, ())),
                           "status": s.status, "reason": s.reason, "timing": s.timing or "", "batch": batch}
    if dist is None:
        return None, row
    lat, values, fraction = dist
    marks = {"p50": lat.p50_ns, "p90": lat.p90_ns, "p99": lat.p99_ns, "p99.9": lat.p999_ns}
    row.update(count=lat.count, p50=lat.p50_ns, p90=lat.p90_ns, p99=lat.p99_ns, p999=lat.p999_ns,
               max=lat.max_ns, mean=lat.mean_ns)
    label = f"{name} ({batch}-op batch means)" if batch and batch > 1 else name
    return plots.Curve(label, values, fraction, marks, view.colour_of(run, name)), row


def _per_group(run: StoredRun, section_id: str, title: str, template: str,
               figure_of: Callable[[view.Group], dict[str, Any]]) -> list[Section]:
    """A section with one figure per group of ``run`` (``view.groups``), drawn only when the
    HTML report asks (``figure_of(group)`` gives each figure's template fields) and rendered
    with ``template`` (``figures=[...]``); nothing for a run without groups."""
    groups = view.groups(run)
    if not groups:
        return []
    return [Section(section_id, title, lambda: fragment(template, figures=[figure_of(g) for g in groups]))]


@register(order=30)
def latency(run: StoredRun) -> list[Section]:
    """Per group, the latency CDF of every series (repetitions' histograms merged) on a log
    axis with p50/p90/p99/p99.9 marked, and a table of those percentiles; series timed in
    batches of k > 1 operations are labelled as k-operation batch means (legend, axis, table)."""

    def figure(g: view.Group) -> dict[str, Any]:
        curves, rows = [], []
        for s in g.cells:
            curve, row = _latency_curve(run, s)
            rows.append(row)
            if curve is not None:
                curves.append(curve)
        batched = any(r["batch"] and r["batch"] > 1 for r in rows)
        xlabel = ("latency per operation; for batched series, each k-operation batch's mean "
                  "(log scale)" if batched else "latency per operation (log scale)")
        svg = plots.latency_cdf_svg(curves, f"latency-cdf-{g.slug}", f"latency: {g.title}", xlabel)
        return {"group": g, "svg": Markup(svg), "rows": rows,
                "batch_note": _batch_note([r["batch"] for r in rows if r["reps"]], "p50, p90, p99 and p99.9",
                                          "Their max and mean are of batch means too.")}

    return _per_group(run, "latency", "Latency distribution", "sections/latency.html.j2", figure)


# ------------------------------------------------------------------------- throughput and CPU

@register(order=40)
def throughput_cpu(run: StoredRun) -> list[Section]:
    """Per group, operations per second and CPU time per operation of every series: median
    of the repetitions with their min–max and each repetition shown."""

    def figure(g: view.Group) -> dict[str, Any]:
        bars = []
        for s in g.cells:
            name = view.series_name(run, s)
            bars.append(plots.Bars(name, s.ops_per_s_samples, s.process_cpu_ns_per_op_samples, view.colour_of(run, name)))
        svg = plots.throughput_cpu_svg(bars, f"throughput-cpu-{g.slug}", f"throughput and CPU: {g.title}")
        return {"group": g, "svg": Markup(svg)}

    return _per_group(run, "throughput-cpu", "Throughput and the worker process's CPU time per operation",
                      "sections/throughput_cpu.html.j2", figure)


# -------------------------------------------------------------------------------------- host

def _check_text(c: dict[str, Any] | None) -> str:
    """A host check's value, with its state when it is not ok: ``hpet (warning: …)``."""
    if not c:
        return "not checked"
    value = str(c.get("value") or "")
    if c.get("state") == "ok":
        return value
    advice = f": {c['advice']}" if c.get("advice") else ""
    return f"{value} ({c.get('state')}{advice})"


@register(order=50)
def host(run: StoredRun) -> list[Section]:
    """The host the numbers belong to: CPU model and crypto flags, kernel, clocksource,
    hypervisor, library versions, host checks, and noise per cell (CV across repetitions, steal
    %, disturbed repetitions, batch)."""
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
    checks = [c for c in h.get("checks") or [] if isinstance(c, dict)]
    clocksource = next((c for c in checks if c.get("name") == "clocksource"), None)
    facts = [
        ("CPU", f"{h.get('cpu_model') or 'unknown'} × {h.get('logical_cpus') or '?'} logical CPUs"),
        ("crypto flags", " ".join(h.get("crypto_flags") or []) or "none detected"),
        ("CPU mask", fmt.mask_text(run.analysis.cpu_masks)),
        ("kernel", h.get("kernel") or "unknown"),
        ("clocksource", _check_text(clocksource)),
        ("machine / OS", f"{h.get('machine') or '?'} / {h.get('os') or '?'}"),
        ("hypervisor", fmt.hypervisor_text(h.get("hypervisor"))),
        ("worker", h.get("worker_version") or "unknown"),
        ("Python", h.get("python") or "unknown"),
        ("steal", f"{sum(steals) / len(steals):.2f} % on average over the measured repetitions"
                  if steals else "unknown"),
    ]
    noise = []
    for g in view.groups(run):
        for s in g.cells:
            noise.append({"operation": _operation(s), "backend": s.cell.backend,
                          "series": view.series_name(run, s), "reps": f"{s.ok}/{s.repetitions}",
                          "cv_p50": fmt_cv(s.cv_p50, s.ok), "cv_ops": fmt_cv(s.cv_ops_per_s, s.ok),
                          "over_p50": s.ok >= 2 and s.cv_p50 * 100 > threshold,
                          "over_ops": s.ok >= 2 and s.cv_ops_per_s * 100 > threshold,
                          "steal": fmt_pct(s.steal_pct, signed=False),
                          "disturbed": s.disturbed or "", "batch": _batch_of(run, s) or ""})
    html = fragment("sections/host.html.j2", facts=facts, libraries=libraries,
                    checks=checks, noise=noise, threshold=threshold,
                    series="Configuration" if view.by_configuration(run) else "Backend")
    lib_text = ", ".join(f"{x['backend']}{' [' + x['build'] + ']' if x.get('build') else ''}: "
                         f"{x.get('library') or ''} {x.get('library_version') or ''}"
                         f"{' (FIPS)' if x.get('fips') else ''}".strip() for x in libraries)
    md = "".join(f"- {k}: {v}\n" for k, v in facts[:7]) + (f"- libraries: {lib_text}\n" if lib_text else "")
    warned = [c for c in checks if c.get("state") == "warning" and c.get("name") != "clocksource"]
    md += "".join(f"- host check {c.get('name')}: {_check_text(c)}\n" for c in warned)
    return [Section("host", "Host", html, md)]


# -------------------------------------------------------------------------- how to reproduce

def _analysis_flags(run: StoredRun) -> tuple[list[str], list[str]]:
    """(command-line flags, sentences) for the stored analysis settings that differ from the
    study file's: ``--margin PCT`` and ``--no-multiplicity``."""
    stored = run.meta.get("analysis") or {}
    study = run.study
    flags: list[str] = []
    said: list[str] = []
    if study is None or not stored:
        return flags, said
    margin = stored.get("margin_pct")
    if margin is not None and float(margin) != float(study.margin_pct):
        flags.append(f"--margin {float(margin):g}")
        said.append(f"equivalence margin ±{float(margin):g} % (the study file says ±{study.margin_pct:g} %)")
    multiplicity = stored.get("multiplicity")
    if multiplicity is not None and bool(multiplicity) != bool(study.multiplicity):
        if not multiplicity:
            flags.append("--no-multiplicity")
        said.append("no multiplicity adjustment (the study file asks for one)" if not multiplicity
                    else "a multiplicity adjustment (the study file turns it off)")
    return flags, said


@register(order=60)
def reproduce(run: StoredRun) -> list[Section]:
    """How to reproduce: the command (with ``--margin``/``--no-multiplicity`` when the run was
    analysed with other settings than its study file's) and the study file's text (for a
    study), and the run's facts (id, kind, status, times, seed, how intervals were made, format
    version)."""
    m = run.meta
    facts = [("run", f"{run.id} ({m.get('kind')}, {m.get('status')})"),
             ("started", m.get("started_at") or "?"), ("finished", m.get("finished_at") or "—"),
             ("block order seed", "—" if m.get("seed") is None
              else f"{m.get('seed')} (seed = {m.get('seed')} in [study] repeats this order)")]
    if run.study is not None:
        facts.append(("intervals", run.analysis.method))
    facts += [("format version", str(m.get("format_version"))),
              ("report made by", f"cryptoperf {__version__}")]
    study = run.study
    filename = f"{study.name}.toml" if study else ""
    flags, said = _analysis_flags(run)
    command = (f"cryptoperf study {filename}" + "".join(f" {f}" for f in flags)) if study else "cryptoperf speed …"
    settings_note = ("This run was analysed with " + " and ".join(said) + ", as the command above "
                     "asks.") if said else ""
    html = fragment("sections/reproduce.html.j2", facts=facts, study=study, filename=filename,
                    command=command, run_id=run.id, settings_note=settings_note)
    md = (f"Reproduce: save the study file below as `{filename}` and run `{command}`; this is "
          f"run {run.id}, started {m.get('started_at')}.\n" if study else
          f"Run {run.id} ({m.get('kind')}), started {m.get('started_at')}.\n")
    if settings_note:
        md += f"\n{settings_note}\n"
    if study:
        fence = "````" if "```" in study.text else "```"
        md += f"\n{fence}toml\n{study.text.rstrip()}\n{fence}\n"
    return [Section("study", "How to reproduce", html, md)]
