"""Report sections every workload has (a TLS handshake, a transfer, an IKE phase 1, storage at load
levels), registered like the core ones; each returns nothing for a run without workload cells.

22  throughput vs load       — per (backend, operation, mode) of a workload without sections of
                               its own: transactions/s against the load level, one line per
                               configuration with its band across repetitions, closed and open
                               levels in separate panels; a table per level with latency, CPU
                               per transaction of each side, late transactions and the verdict
24  latency objective        — where an operation has ``p99_bound_ms``: per configuration, the
                               highest open rate whose p99 stays under it, and the first above
33  latency per level        — p50, p90, p99, p99.9 against the load level (log y), and whether
                               each level's latency is corrected for coordinated omission
43  CPU over time            — per level, one representative repetition per configuration:
                               client and server CPU % and steal % over the cell's lifetime

Every figure is the run's analysis's (``run.analysis.workloads``: ``cryptoperf.workloads``);
nothing here computes one. The helpers below (titles, colours, verdict texts, the level table's
rows) are shared with the sections of the workloads that have their own.
"""

from __future__ import annotations

from typing import Any, Sequence

from markupsafe import Markup

from cryptoperf import stats
from cryptoperf.report import text as fmt
from cryptoperf.report import plots
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.workloads.generic import BAND_LEVEL, Family, Objective, Point

#: Panels of the load plots: kind → (x axis label, title).
PANELS = {"closed": ("closed loop: client connections", "closed loop"),
          "paced": ("paced closed loop: target rate (transactions/s)", "paced closed loop"),
          "open": ("open loop: offered rate (transactions/s)", "open loop"),
          "targets": ("job: targets", "job")}
#: Line styles of the latency percentiles: (label, Latency attribute, matplotlib style).
PERCENTILE_STYLES = (("p50", "p50_ns", "-"), ("p90", "p90_ns", "--"), ("p99", "p99_ns", "-."),
                     ("p99.9", "p999_ns", ":"))


# ------------------------------------------------------------------------------ shared helpers

def family_title(f: Family) -> str:
    """``full handshake on aws-lc (socket mode)``, with the size for a transfer."""
    return f"{fmt.operation(f.label, f.size_bytes)} on {f.backend} ({f.mode} mode)"


def family_slug(f: Family) -> str:
    """An HTML-id-safe key, unique per family."""
    size = "-" if f.size_bytes is None else str(f.size_bytes)
    return plots.gid(f"{f.backend}-{f.label}-{size}-{f.mode}")


def colour(p: Point | int) -> str:
    """A point's (or a series order's) colour, the same in every plot of the report."""
    return plots.colour(p if isinstance(p, int) else p.order)


def configuration(p: Point) -> str:
    """The point's configuration with its CPU mask and build when not the defaults."""
    c = p.summary.cell
    return fmt.configuration_text(c.configuration, c.cpu, c.build) if c.configuration else p.series


def verdict_text(p: Point) -> str:
    """The level's verdict against the baseline as the analysis made it (``Verdict.text``),
    ``baseline`` for the baseline itself, ``n/a: <why>`` without one."""
    if p.is_baseline:
        return "baseline"
    d = p.delta
    if d is None:
        return "n/a: no baseline to compare with"
    if d.status != "ok" or d.verdict is None:
        return f"n/a: {d.reason}" if d.reason else "n/a"
    return d.verdict.text


def verdict_kind(p: Point) -> str:
    """The level's verdict kind for CSS: ``baseline``, the verdict's kind, or ``na``."""
    if p.is_baseline:
        return "baseline"
    d = p.delta
    return d.verdict.kind if d is not None and d.verdict is not None and d.status == "ok" else "na"


def level_row(p: Point, level: str, cells: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """A row of the level table macro (``templates/sections/macros.html.j2``): the level, the
    configuration, whether it was measured, its verdict kind and ``cells`` — (text, numeric) for
    each column after the first two, the last the verdict."""
    s = p.summary
    return {"level": level, "configuration": configuration(p), "measured": p.measured, "kind": verdict_kind(p),
            "status": s.status, "reason": s.reason,
            "cells": [{"text": text, "num": num, "verdict": i == len(cells) - 1 and not num}
                      for i, (text, num) in enumerate(cells)]}


def column(title: str, sub: str = "", num: bool = True) -> dict[str, Any]:
    """A column of the level table macro."""
    return {"title": title, "sub": sub, "num": num}


def per_side(family: Family, side: str) -> tuple[str, str]:
    """A CPU column's title naming its side, and its unit naming the transaction: (``server
    CPU``, ``µs / handshake``); in memory mode the server's is the server side's share."""
    one = family.transaction[0]
    if side == "server" and family.mode == "memory":
        return "server side's share of CPU", f"µs / {one}"
    return f"{side} CPU", f"µs / {one}"


# ------------------------------------------------------------------------ throughput vs load

def _cpu(ns: float | None, nbytes: int) -> str:
    """CPU per transaction in µs, and per byte in ns where a transaction carries bytes
    (``212 µs · 0.21 ns/B``): what a transfer's sender and receiver each spend per byte."""
    if ns is None or not nbytes:
        return fmt.fmt_us(ns)
    return f"{fmt.fmt_us(ns)} · {ns / nbytes:.3g} ns/B"


def _late(p: Point) -> str:
    """Open levels: late transactions over the repetitions with their share, ``12 (0.4 %)``;
    '' for other levels, '—' when the results do not say."""
    if p.load.kind != "open":
        return ""
    if p.late is None:
        return "—"
    return f"{p.late:,} ({100.0 * p.late_share:.1f} %)" if p.late_share is not None else f"{p.late:,}"


def _tps(p: Point) -> str:
    text = fmt.fmt_estimate(p.tx_per_s)
    return text + (f" · {p.mb_per_s:.4g} MB/s" if p.mb_per_s is not None else "")


def level_rows(family: Family) -> list[dict[str, Any]]:
    """The rows of a family's level table: transactions/s with its band (and MB/s for a
    transfer), p50/p99 (ms, medians over repetitions), the client's and the server's CPU per
    transaction (and per byte), late transactions (open levels), repetitions, the verdict."""
    return [level_row(p, f"{p.load.label} ({p.load.text})", [
        (_tps(p), True), (fmt.fmt_ms(p.summary.p50_ns), True), (fmt.fmt_ms(p.summary.p99_ns), True),
        (_cpu(p.client_cpu_ns_per_tx, p.bytes_per_tx), True), (_cpu(p.server_cpu_ns_per_tx, p.bytes_per_tx), True),
        (_late(p), True), (f"{len(p.blocks)}/{p.summary.repetitions}", True), (verdict_text(p), False)])
        for p in family.points]


def level_columns(family: Family) -> list[dict[str, Any]]:
    """The level table's columns (titles name each CPU figure's side and transaction)."""
    many = family.transaction[1]
    return [column("Level", num=False), column("Configuration", num=False),
            column(f"{many.capitalize()}/s", f"{BAND_LEVEL * 100:g} % CI"), column("p50 ms"), column("p99 ms"),
            column(*per_side(family, "client")), column(*per_side(family, "server")), column("late (open)"),
            column("reps"), column("Verdict", num=False)]


def throughput_svg(family: Family, plot_id: str) -> str:
    """Transactions/s against load level for one family, as ``<svg class="plot
    throughput-load">``: one panel per kind of level (closed: x = connections; paced and open:
    x = rate per s; log x when the levels span ≥ 10×), one line per configuration through the
    geometric means of its repetitions, shaded with their band. Each line's SVG group has the id
    ``<plot_id>-series-<configuration>-<panel>``. Returns the SVG text."""
    panels = family.panels()
    fig = plots.figure(max(9.6, 3.6 * len(panels) + 0.6), 3.6)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, kind in zip(axes, panels):
        pts = [p for p in family.points if p.panel == kind]
        for series, order in family.series():
            mine = [(p.x, p.tx_per_s) for p in pts if p.series == series and p.tx_per_s is not None]
            if mine:
                plots.estimate_line(ax, mine, colour(order), series, f"{plots.gid(series)}-{kind}")
        if kind in ("paced", "open"):
            xs_all = sorted({p.x for p in pts})
            ax.plot(xs_all, xs_all, color="#999999", linewidth=0.8, linestyle=":", label="offered")
        plots.log_x(ax, [p.x for p in pts])
        ax.set_ylim(bottom=0)
        ax.set_xlabel(PANELS[kind][0], fontsize=8.5)
        ax.set_title(PANELS[kind][1], fontsize=9, loc="left")
        ax.grid(True, color="#e5e5e5", linewidth=0.6)
        ax.yaxis.set_major_formatter(plots.count_formatter())
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel(f"{family.transaction[1]} per second (/s)", fontsize=8.5)
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    plots.legend_below(fig, handles, labels)
    title = f"throughput vs load: {family_title(family)}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.15, wspace=0.18)
    return plots.svg(fig, plot_id, "throughput-load", title)


@register(order=22)
def throughput_vs_load(run: StoredRun) -> list[Section]:
    """"Throughput vs load": per family of a workload without sections of its own, a plot of
    transactions/s against the load level (``throughput_svg``) and a table of every level ×
    configuration (``level_rows``). Markdown: the tables. Nothing without such families."""
    fams = run.analysis.workloads.generic
    if not fams:
        return []
    baseline = run.study.baseline if run.study else ""
    tables = [(f, level_columns(f), level_rows(f)) for f in fams]

    def html() -> str:
        figures = [{"slug": family_slug(f), "svg": Markup(throughput_svg(f, f"throughput-load-{family_slug(f)}")),
                    "columns": cols, "rows": rows} for f, cols, rows in tables]
        return fragment("sections/throughput_load.html.j2", figures=figures, level=f"{BAND_LEVEL * 100:g}",
                        min_n=stats.MIN_BLOCKS, baseline=baseline, memory=any(f.mode == "memory" for f in fams))

    md = (f"Transactions/s: geometric mean over the measured repetitions with its {BAND_LEVEL * 100:g} % t "
          f"interval (log scale, across repetitions). p50/p99: medians over repetitions. CPU per transaction, "
          f"each side's: its CPU time over the window ÷ its transactions. Verdict: the level against the "
          f"baseline {baseline}.\n")
    for f, cols, rows in tables:
        md += f"\n**{family_title(f)}**\n\n" + md_table(
            [c["title"] + (f" ({c['sub']})" if c["sub"] else "") for c in cols if c["title"] != "reps"],
            [[r["level"], r["configuration"]] + ([c["text"] for i, c in enumerate(r["cells"]) if i != 6]
                                                  if r["measured"] else [f"not measured: {r['status']}"] + [""] * 7)
             for r in rows], align="llrrrrrrl")
    return [Section("throughput-load", "Throughput vs load", html, md)]


# ------------------------------------------------------------------------- latency objective

def objective_text(o: Objective) -> str:
    """A configuration's answer to its p99 bound in one sentence, naming rates and their p99."""
    def at(r: tuple[float, float]) -> str:
        return f"{r[0]:g}/s (p99 {fmt.fmt_ns(r[1])})"
    if o.missed is None and o.met is not None:
        return f"every measured rate met it, up to {at(o.met)} — measure higher rates"
    if o.met is None and o.missed is not None:
        return f"no measured rate met it: the lowest, {at(o.missed)}, is over"
    if o.met is None:
        return "no open level was measured"
    return f"{at(o.met)} met it; {at(o.missed)} did not"  # type: ignore[arg-type]


@register(order=24)
def latency_objective(run: StoredRun) -> list[Section]:
    """"Latency objective": per operation with ``p99_bound_ms``, per configuration, the
    highest open rate whose p99 stays under the bound and the first that does not
    (``run.analysis.workloads.objectives``). Nothing without such an operation."""
    objs = run.analysis.workloads.objectives
    if not objs:
        return []
    groups: dict[str, dict[str, Any]] = {}
    for o in objs:
        slug = family_slug(o.family)
        g = groups.setdefault(slug, {"title": family_title(o.family), "slug": slug, "bound": f"{o.bound_ms:g}",
                                     "entries": []})
        g["entries"].append({"series": o.series, "text": objective_text(o)})
    html = fragment("sections/objective.html.j2", groups=list(groups.values()))
    md = ("Highest open-loop rate whose p99 (median across repetitions) stays under the bound, "
          "and the first that does not.\n")
    for g in groups.values():
        md += f"\n**{g['title']}**, p99 ≤ {g['bound']} ms:\n\n" + "".join(
            f"- {i['series']}: {i['text']}\n" for i in g["entries"])
    return [Section("latency-objective", "Latency objective", html, md)]


# ------------------------------------------------------------------------- latency per level

def correction_text(p: Point) -> str:
    """What a level's latency is timed from, in words: corrected for coordinated omission
    (open: from when each transaction was due) or not (closed: from its actual start)."""
    if p.corrected:
        return "from when each transaction was due: corrected for coordinated omission"
    return ("from each transaction's actual start: not corrected for coordinated omission "
            "(a stall shows in fewer transactions than it delayed)")


def percentiles_svg(family: Family, plot_id: str) -> str:
    """p50, p90, p99 and p99.9 latency (``Point.latency``, the repetitions' histograms merged)
    against the load level for one family, as ``<svg class="plot latency-load">``: a panel per
    kind of level, log y; colour = configuration, line style = percentile. Line groups have ids
    ``<plot_id>-pct-<configuration>-<percentile>-<panel>``. Returns the SVG text."""
    from matplotlib.lines import Line2D
    panels = family.panels()
    fig = plots.figure(max(9.6, 3.6 * len(panels) + 0.6), 3.8)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, kind in zip(axes, panels):
        pts = [p for p in family.points if p.panel == kind]
        for series, order in family.series():
            mine = [(p.x, p.latency) for p in pts if p.series == series and p.latency is not None]
            for name, attr, style in PERCENTILE_STYLES if mine else ():
                line, = ax.plot([x for x, _ in mine], [getattr(lat, attr) / 1e6 for _, lat in mine], linestyle=style,
                                marker="o", markersize=3, color=colour(order), linewidth=1.3)
                line.set_gid(f"pct-{plots.gid(series)}-{name.replace('.', '')}-{kind}")
        plots.log_x(ax, [p.x for p in pts])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plots.plain_formatter())
        ax.yaxis.set_minor_formatter(plots.plain_formatter(minor=True))
        ax.set_xlabel(PANELS[kind][0], fontsize=8.5)
        corr = "corrected for coordinated omission" if kind == "open" else "not corrected for coordinated omission"
        ax.set_title(f"{PANELS[kind][1]} ({corr})", fontsize=8, loc="left")
        ax.grid(True, which="both", color="#eeeeee", linewidth=0.6)
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel(f"latency per {family.transaction[0]}, ms (log scale)", fontsize=8.5)
    handles = [Line2D([], [], color=colour(o), linewidth=2, label=s) for s, o in family.series()]
    handles += [Line2D([], [], color="#444444", linestyle=st, linewidth=1.3, label=n) for n, _, st in PERCENTILE_STYLES]
    plots.legend_below(fig, handles)
    title = f"latency percentiles vs load: {family_title(family)}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.15, wspace=0.18)
    return plots.svg(fig, plot_id, "latency-load", title)


def percentile_rows(family: Family) -> list[dict[str, Any]]:
    """One row per level × configuration: ``level``, ``configuration``, ``p50``/``p90``/
    ``p99``/``p999`` (ns; None when not measured), ``count`` (transactions recorded),
    ``corrected`` and ``correction`` (``correction_text``)."""
    rows = []
    for p in family.points:
        lat = p.latency
        rows.append({"level": f"{p.load.label} ({p.load.text})", "configuration": configuration(p),
                     "p50": lat.p50_ns if lat else None, "p90": lat.p90_ns if lat else None,
                     "p99": lat.p99_ns if lat else None, "p999": lat.p999_ns if lat else None,
                     "count": lat.count if lat else None, "corrected": p.corrected, "correction": correction_text(p)})
    return rows


@register(order=33)
def latency_per_level(run: StoredRun) -> list[Section]:
    """"Latency percentiles per level": per family measured over a time window,
    p50/p90/p99/p99.9 against the load level (``percentiles_svg``) and a table saying for each
    level whether its latency is corrected for coordinated omission. Markdown: the table."""
    fams = run.analysis.workloads.timed
    if not fams:
        return []
    tables = [(f, percentile_rows(f)) for f in fams]

    def html() -> str:
        figures = [{"slug": family_slug(f), "rows": rows,
                    "svg": Markup(percentiles_svg(f, f"latency-load-{family_slug(f)}"))} for f, rows in tables]
        return fragment("sections/latency_load.html.j2", figures=figures)

    md = ("Percentiles of every measured repetition merged. Open levels are corrected for coordinated "
          "omission (latency from when each transaction was due); closed levels are not (from each "
          "transaction's actual start: a stall is understated).\n")
    for f, rows in tables:
        md += f"\n**{family_title(f)}**\n\n" + md_table(
            ["Level", "Configuration", "p50", "p90", "p99", "p99.9", "corrected for coordinated omission"],
            [[r["level"], r["configuration"], fmt.fmt_ns(r["p50"]), fmt.fmt_ns(r["p90"]), fmt.fmt_ns(r["p99"]),
              fmt.fmt_ns(r["p999"]), "yes" if r["corrected"] else "no"] for r in rows], align="llrrrrl")
    return [Section("latency-load", "Latency percentiles per load level", html, md)]


# ------------------------------------------------------------------------------- CPU over time

def cpu_timeline_svg(points: Sequence[Point], plot_id: str, title: str) -> str:
    """CPU over one representative repetition (``Point.representative``) of each configuration
    at one level, as ``<svg class="plot cpu-timeline">``: top panel, user + system CPU in % of
    one CPU against time in s, client solid and server dashed, colour = configuration; bottom
    panel, steal in % of the host's CPUs (client's samples); the legend, under the plot, names each
    configuration (colour) and each side (line style) once. Line groups have ids
    ``<plot_id>-cpu-<configuration>-<client|server>`` and ``<plot_id>-steal-<configuration>``.
    Returns the SVG text."""
    from matplotlib.lines import Line2D
    fig = plots.figure(9.6, 3.8)
    ax, ax_steal = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    drawn, handles, sides = False, [], []
    for p in points:
        r = p.representative
        if r is None:
            continue
        mine = False
        for side, tl, style in (("client", r.client, "-"), ("server", r.server, "--")):
            if tl.empty:
                continue
            line, = ax.plot(tl.t_s, tl.cpu_pct, linestyle=style, color=colour(p), linewidth=1.4)
            line.set_gid(f"cpu-{plots.gid(p.series)}-{side}")
            drawn = mine = True
            if side not in [s for s, _ in sides]:
                sides.append((side, style))
        if mine:
            handles.append(Line2D([], [], color=colour(p), linewidth=2, label=f"{p.series} (block {r.block})"))
        if not r.client.empty:
            line, = ax_steal.plot(r.client.t_s, r.client.steal_pct, color=colour(p), linewidth=1.0, linestyle=":")
            line.set_gid(f"steal-{plots.gid(p.series)}")
    ax.set_ylabel("CPU, % of one CPU\n(user + system)", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.grid(True, color="#eeeeee", linewidth=0.6)
    if drawn:
        # one entry per configuration (colour) and per side (line style), under the plot
        handles += [Line2D([], [], color="#444444", linestyle=st, linewidth=1.4, label=f"{side} CPU")
                    for side, st in sides]
        plots.legend_below(fig, handles)
    else:
        ax.text(0.5, 0.5, "no CPU samples in the results", transform=ax.transAxes, ha="center")
    ax_steal.set_ylabel("steal, %\nof host CPUs", fontsize=8)
    ax_steal.set_ylim(bottom=0)
    ax_steal.set_xlabel("time since the cell started, s", fontsize=8.5)
    ax_steal.grid(True, color="#eeeeee", linewidth=0.6)
    for a in (ax, ax_steal):
        a.tick_params(labelsize=8)
    ax.set_title(title, fontsize=10, loc="left")
    fig.subplots_adjust(left=0.1, right=0.98, top=0.9, bottom=0.13, hspace=0.12)
    return plots.svg(fig, plot_id, "cpu-timeline", title)


def cpu_rows(points: Sequence[Point]) -> list[dict[str, Any]]:
    """One row per configuration at one level, from its representative repetition: the client's
    and the server's mean CPU % (of one CPU), the largest steal %, the samples."""
    rows = []
    for p in points:
        r = p.representative
        rows.append({"configuration": configuration(p), "block": r.block if r else None,
                     "client_text": fmt.fmt_pct(r.client_cpu_pct if r else None, signed=False),
                     "server_text": fmt.fmt_pct(r.server_cpu_pct if r else None, signed=False),
                     "steal_text": fmt.fmt_pct(r.steal_max_pct if r else None, signed=False),
                     "samples": len(r.client.t_s) if r else 0})
    return rows


@register(order=43)
def cpu_over_time(run: StoredRun) -> list[Section]:
    """"CPU over time": per workload level measured over a time window, the client's and the
    server's CPU % and the steal % over one representative repetition of each configuration
    (``cpu_timeline_svg``), with their means. Markdown: the means."""
    levels = [(f"{family_title(f)} @ {pts[0].load.label}", f"{family_slug(f)}-{plots.gid(text)}", pts)
              for f in run.analysis.workloads.timed for text, pts in f.levels()]
    if not levels:
        return []
    tables = [(title, slug, pts, cpu_rows(pts)) for title, slug, pts in levels]

    def html() -> str:
        figures = [{"slug": slug, "rows": rows,
                    "svg": Markup(cpu_timeline_svg(pts, f"cpu-timeline-{slug}", f"CPU over time: {title}"))}
                   for title, slug, pts, rows in tables]
        return fragment("sections/cpu_timeline.html.j2", figures=figures)

    md = ("Mean user + system CPU (% of one CPU) over one repetition per configuration (the last "
          "measured block), sampled every 100 ms; steal: the largest sample.\n\n")
    md += md_table(["Level", "Configuration", "block", "client CPU", "server CPU", "steal max"],
                   [[title, r["configuration"], r["block"] if r["block"] is not None else "—", r["client_text"],
                     r["server_text"], r["steal_text"]] for title, _, _, rows in tables for r in rows],
                   align="llrrrr")
    return [Section("cpu-timeline", "CPU over time", html, md)]
