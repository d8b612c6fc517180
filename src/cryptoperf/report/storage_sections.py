"""Report sections for the ``storage`` workload: clear vs encrypted file I/O, throughput beside
the CPU it took — for storage, the measure that matters is what CPU it takes to move a given
amount of data, so the two are never shown apart.

21  storage: throughput and CPU %  — per (backend, operation): MB/s bars per scheme at each
                                     thread count with the CPU % each needed as a line on a
                                     second axis (one chart, as encrypted-volume studies draw
                                     them); a table with MB/s and I/Os per second, latency per
                                     I/O, CPU % (user, system), CPU ns per byte and each
                                     scheme's ratio to the baseline (clear) with its interval
21  storage: CPU to sustain a rate — the byte-rate levels (``open:100MB/s``): the CPU % each
                                     scheme needed to sustain the offered throughput, and its
                                     ratio to the baseline's

The figures per cell come from the worker's results (docs/worker-protocol.md, "Workloads":
``storage``), the intervals and verdicts from the run's analysis (``run.deltas``): a ratio's
interval is the paired one of the study's comparisons, Bonferroni-adjusted with all of them.
Storage cells are left out of the generic "Throughput vs load" section
(``workload_sections.OWN_SECTIONS``), whose connection and server columns do not apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from markupsafe import Markup

from cryptoperf import analysis, stats
from cryptoperf.report import format as fmt
from cryptoperf.report import plots, view
from cryptoperf.report.render import md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.format import fmt_size
from cryptoperf.report.workload_sections import (BAND_LEVEL, Family, Point, _gid, _ms, _render,
                                                 _tps, families, throughput_estimate, verdict_kind,
                                                 verdict_text)
from cryptoperf.stored import StoredRun

#: The workload these sections draw.
STORAGE = "storage"


# ------------------------------------------------------------------------------ figures


@dataclass(frozen=True)
class CellFigures:
    """What one storage cell (a scheme at one level) measured, over its measured repetitions.

    Attributes:
        mb_s: MB/s (10⁶ bytes/s): the geometric mean with its ``BAND_LEVEL`` interval across
            repetitions (None without a measured repetition); iops: I/Os per second, the same.
        cpu_pct: the process's CPU (user + system) over the window, % of the host's CPUs
            (median over repetitions); user_pct, system_pct: its two parts; cores: the same
            as CPUs kept busy (cpu_pct × CPUs ÷ 100).
        cpu_ns_per_byte: CPU ns per byte moved (median over repetitions).
        block_bytes, file_bytes: the I/O and file sizes; description: direct/buffered, cache,
            pattern and direction in words.
    """

    mb_s: stats.Estimate | None
    iops: stats.Estimate | None
    cpu_pct: float | None
    user_pct: float | None
    system_pct: float | None
    cores: float | None
    cpu_ns_per_byte: float | None
    block_bytes: int | None
    file_bytes: int | None
    description: str


def _scaled(e: stats.Estimate | None, factor: float) -> stats.Estimate | None:
    if e is None:
        return None
    return stats.Estimate(e.value * factor, None if e.low is None else e.low * factor,
                          None if e.high is None else e.high * factor, e.level, e.n)


def _storage(o) -> dict[str, Any]:
    return (o.result or {}).get("storage") or {}


def host_cpus(run: StoredRun) -> int:
    """The CPUs of the host the run measured on (its fingerprint's ``logical_cpus``; 1 if
    unknown)."""
    try:
        return max(1, int(run.host.get("logical_cpus") or 1))
    except (TypeError, ValueError):
        return 1


def describe(storage: dict[str, Any]) -> str:
    """A storage result's setting in words: ``direct I/O, random read, cold cache``."""
    if not storage:
        return ""
    io = "direct I/O" if storage.get("direct") else "buffered"
    if storage.get("cache") == "cached":
        io += ", cached (served above the encryption layer)"
    direction = str(storage.get("direction") or "")
    if direction.startswith("mixed"):
        direction = f"mixed ({storage.get('read_pct')} % reads)"
    fsync = storage.get("fsync")
    sync = f", fsync {fsync}" if fsync and fsync != "none" else ""
    layer = ", dm-crypt volume" if storage.get("layer") == "dm-crypt" else ""
    return f"{io}, {storage.get('pattern')} {direction}{sync}{layer}"


def figures(run: StoredRun, point: Point) -> CellFigures:
    """The ``CellFigures`` of one storage cell."""
    outs = [o for o in point.outcomes if o.result and o.result.get("wall_ns")]
    block = next((int(_storage(o).get("block_bytes") or o.result.get("bytes_per_op") or 0) for o in outs), None)
    file_bytes = next((int(_storage(o)["file_bytes"]) for o in outs if _storage(o).get("file_bytes")), None)
    iops = throughput_estimate(point)
    cpus = host_cpus(run)
    user, system, per_byte = [], [], []
    for o in outs:
        r, st = o.result, _storage(o)
        wall = float(r["wall_ns"])
        u = st.get("process_user_ns")
        s = st.get("process_system_ns")
        if u is None or s is None:  # older results: the I/O threads' CPU, not split
            u, s = r.get("cpu_ns_total"), 0
        if u is None:
            continue
        user.append(100.0 * u / wall / cpus)
        system.append(100.0 * s / wall / cpus)
        moved = (r.get("ops") or 0) * (block or 0)
        if moved:
            per_byte.append((u + s) / moved)
    med = (lambda xs: float(np.median(xs)) if xs else None)
    u, s = med(user), med(system)
    total = med([a + b for a, b in zip(user, system)])
    return CellFigures(mb_s=_scaled(iops, (block or 0) / 1e6) if block else None, iops=iops, cpu_pct=total,
                       user_pct=u, system_pct=s, cores=None if total is None else total * cpus / 100.0,
                       cpu_ns_per_byte=med(per_byte), block_bytes=block, file_bytes=file_bytes,
                       description=describe(_storage(outs[0])) if outs else "")


def ratio_text(ci: stats.Interval | None) -> str:
    """A ratio to the baseline with its interval: ``0.59× [0.57, 0.61]``; '—' without one."""
    if ci is None:
        return "—"
    return f"{ci.ratio:.3g}× [{ci.low:.3g}, {ci.high:.3g}]"


def storage_families(run: StoredRun) -> list[Family]:
    """The run's storage cells by (backend, operation label, size, mode), as
    ``workload_sections.families`` arranges every workload's."""
    return families(run, ops=(STORAGE,))


def _mb(x: float) -> str:
    """MB/s as text: 4 significant digits below 1000 (``655.5``), whole numbers with
    thousands separators from there (``28,130``)."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def _e(e: stats.Estimate | None) -> str:
    """An MB/s estimate with its interval: ``1,273 [1,140, 1,422]``; '—' without one."""
    if e is None:
        return "—"
    if e.low is None or e.high is None:
        return _mb(e.value)
    return f"{_mb(e.value)} [{_mb(e.low)}, {_mb(e.high)}]"


def _p(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def rows(run: StoredRun, family: Family) -> list[dict[str, Any]]:
    """One row per level × scheme of a storage family (display strings): ``level``,
    ``configuration``, ``mb_s`` (MB/s with its interval), ``iops``, ``p50``/``p99`` (ms per
    I/O), ``cpu`` (CPU % of the host, user + system), ``split`` (user / system %), ``cores``,
    ``ns_per_byte``, ``mb_ratio`` / ``cpu_ratio`` (to the baseline, with the comparison's
    interval), ``verdict`` (on the study's metric), ``kind`` (for CSS), ``measured``,
    ``status``, ``reason``."""
    out = []
    for p in family.points:
        s = p.summary
        f = figures(run, p)
        d = view.delta_for(run, s)
        v, kind = verdict_text(run, p), verdict_kind(run, p)
        ok = d is not None and d.status == "ok"
        out.append({"level": p.load.label if p.load.kind == "open" else f"{p.load.connections} thread"
                    + ("s" if p.load.connections != 1 else ""),
                    "configuration": p.configuration, "mb_s": _e(f.mb_s), "iops": _tps(f.iops),
                    "p50": _ms(s.p50_ns), "p99": _ms(s.p99_ns), "cpu": _p(f.cpu_pct),
                    "split": "—" if f.user_pct is None else f"{f.user_pct:.3g} / {f.system_pct:.3g}",
                    "cores": _p(f.cores), "ns_per_byte": _p(f.cpu_ns_per_byte),
                    "mb_ratio": ratio_text(d.throughput) if ok else "",
                    "cpu_ratio": ratio_text(d.cpu_per_op) if ok else "",
                    "verdict": v, "kind": kind, "measured": bool(p.outcomes), "status": s.status,
                    "reason": s.reason})
    return out


def scale_text(run: StoredRun, family: Family) -> str:
    """The scale a family ran at, in words: ``files of 32 MiB, 64 KiB per I/O, direct I/O,
    random read``."""
    for p in family.points:
        f = figures(run, p)
        if f.block_bytes:
            return (f"files of {fmt_size(f.file_bytes) or '?'}, {fmt_size(f.block_bytes)} per I/O, "
                    f"{f.description}")
    return ""


# ------------------------------------------------------------------------------ chart


def combined_svg(run: StoredRun, family: Family, plot_id: str) -> str:
    """MB/s bars and CPU % lines on one chart for the closed levels of a storage family: at each
    thread count one bar per scheme (its geometric mean, with the ``BAND_LEVEL`` interval as an
    error bar) and, on the right axis, each scheme's CPU % of the host as a dashed line with
    markers in the scheme's colour. Bars' SVG groups have the ids
    ``<plot_id>-bars-<configuration>-<threads>``, lines ``<plot_id>-cpu-<configuration>``.
    Returns the SVG text."""
    pts = [p for p in family.points if p.load.kind == "closed"]
    levels = sorted({p.load.connections for p in pts})
    series = family.series()
    fig = plots._figure(max(5.0, 1.1 + 1.05 * len(levels) * max(1, len(series)) * 0.45), 3.9)
    ax = fig.add_subplot(1, 1, 1)
    cpu_ax = ax.twinx()
    width = 0.8 / max(1, len(series))
    xs = np.arange(len(levels), dtype=float)
    for i, (name, colour) in enumerate(series):
        mine = {p.load.connections: figures(run, p) for p in pts if p.series == name}
        heights, lows, highs, cpu = [], [], [], []
        for level in levels:
            f = mine.get(level)
            e = f.mb_s if f else None
            heights.append(e.value if e else 0.0)
            lows.append(e.value - e.low if e and e.low is not None else 0.0)
            highs.append(e.high - e.value if e and e.high is not None else 0.0)
            cpu.append(f.cpu_pct if f and f.cpu_pct is not None else np.nan)
        offset = xs - 0.4 + width * (i + 0.5)
        bars = ax.bar(offset, heights, width * 0.92, color=colour, alpha=0.85, label=f"{name} MB/s",
                      yerr=[lows, highs], error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"})
        for level, patch in zip(levels, bars.patches):
            patch.set_gid(f"bars-{_gid(name)}-{level}")
        line, = cpu_ax.plot(xs, cpu, color=colour, linestyle="--", marker="D", markersize=4,
                            linewidth=1.2, label=f"{name} CPU %")
        line.set_gid(f"cpu-{_gid(name)}")
    ax.set_xticks(xs, [f"{n} thread{'s' if n != 1 else ''}" for n in levels], fontsize=8)
    ax.set_ylabel("MB/s (bars)", fontsize=8.5)
    cpu_ax.set_ylabel("CPU % of the host (lines)", fontsize=8.5)
    ax.set_ylim(bottom=0)
    cpu_ax.set_ylim(0, max(100.0, float(np.nanmax([f.cpu_pct or 0 for f in (figures(run, p) for p in pts)]
                                                  or [0])) * 1.1))
    ax.grid(True, axis="y", color="#e5e5e5", linewidth=0.6)
    ax.tick_params(labelsize=8)
    cpu_ax.tick_params(labelsize=8)
    handles, labels = [], []
    for a in (ax, cpu_ax):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=7, frameon=False)
    title = f"throughput and CPU: {family.label} on {family.backend}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.subplots_adjust(left=0.1, right=0.9, top=0.88, bottom=0.2 + 0.045 * ((len(labels) - 1) // 4))
    return plots._svg(fig, plot_id, "storage-throughput-cpu", title)


_STORAGE_HTML = """\
{% from "sections/macros.html.j2" import not_measured_row %}
<p>Each chart puts the throughput of every scheme (bars: MB/s, 10⁶ bytes/s, the geometric mean
over the measured repetitions with its {{ level }} % interval) beside the CPU it took (dashed
lines, right axis: the worker process's user + system CPU over the window, % of the host's
{{ cpus }} CPU{{ "s" if cpus != 1 else "" }}), at each thread count. The ratios are each scheme's
against the baseline {{ baseline }}, block by block, with the study's adjusted intervals: MB/s
(below 1: less throughput) and CPU per I/O (above 1: more CPU for the same work). The verdict is
decided on {{ metric }}.</p>
{% for f in figures %}
<figure class="plot" data-plot="storage-throughput-cpu" data-group="{{ f.slug }}">
{% if f.svg %}{{ f.svg }}{% endif %}
  <figcaption>
    <p class="sub">{{ f.title }}: {{ f.scale }}</p>
    <table class="storage-levels" id="storage-{{ f.slug }}">
      <thead><tr><th>Level</th><th>Scheme</th><th class="num">MB/s<div class="sub">{{ level }} % CI</div></th>
        <th class="num">I/Os per s</th><th class="num">p50 ms</th><th class="num">p99 ms</th>
        <th class="num">CPU %<div class="sub">of the host</div></th><th class="num">user / system %</th>
        <th class="num">CPU ns / byte</th><th class="num">MB/s ÷ {{ baseline }}</th>
        <th class="num">CPU per I/O ÷ {{ baseline }}</th><th>Verdict</th></tr></thead>
      <tbody>
{% for r in f.rows %}
{% if r.measured %}
        <tr class="verdict-{{ r.kind }}"><td>{{ r.level }}</td><td>{{ r.configuration }}</td><td class="num">{{ r.mb_s }}</td>
          <td class="num">{{ r.iops }}</td><td class="num">{{ r.p50 }}</td><td class="num">{{ r.p99 }}</td>
          <td class="num">{{ r.cpu }}</td><td class="num">{{ r.split }}</td><td class="num">{{ r.ns_per_byte }}</td>
          <td class="num">{{ r.mb_ratio }}</td><td class="num">{{ r.cpu_ratio }}</td><td class="verdict">{{ r.verdict }}</td></tr>
{% else %}
{{ not_measured_row(r, 10) }}
{% endif %}
{% endfor %}
      </tbody>
    </table>
  </figcaption>
</figure>
{% endfor %}
"""

_MD_HEAD = ["Level", "Scheme", "MB/s (95 % CI)", "I/Os per s", "p50 ms", "p99 ms", "CPU % of host",
            "user/sys %", "CPU ns/B", "MB/s ratio", "CPU/I/O ratio", "Verdict"]


def _md_row(r: dict[str, Any]) -> list[str]:
    if not r["measured"]:
        return [r["level"], r["configuration"], f"not measured: {r['status']}"] + [""] * 9
    return [r["level"], r["configuration"], r["mb_s"], r["iops"], r["p50"], r["p99"], r["cpu"], r["split"],
            r["ns_per_byte"], r["mb_ratio"], r["cpu_ratio"], r["verdict"]]


def _metric(run: StoredRun) -> str:
    """The metrics the storage cells' verdicts were decided on (``analysis.decided_on``)."""
    cells = {p.summary.cell.key for f in storage_families(run) for p in f.points}
    ds = [d for d in run.deltas if any(view.delta_for(run, run.summaries[k]) is d for k in cells)]
    return analysis.decided_on(ds) or run.analysis.settings.metric


@register(order=21)
def storage_throughput_cpu(run: StoredRun) -> list[Section]:
    """"Storage: throughput and CPU %": per storage family a combined chart of its closed
    levels (``combined_svg``) and a table of every level × scheme (``rows``). Markdown: the
    tables. Nothing without storage cells."""
    fams = storage_families(run)
    if not fams:
        return []
    baseline = run.study.baseline if run.study else ""
    tables = [(f, rows(run, f)) for f in fams]

    def html() -> str:
        figs = [{"slug": f.slug, "title": f.title, "scale": scale_text(run, f), "rows": rs,
                 "svg": Markup(combined_svg(run, f, f"storage-{f.slug}"))
                 if any(p.load.kind == "closed" for p in f.points) else None}
                for f, rs in tables]
        return _render(_STORAGE_HTML, figures=figs, level=f"{BAND_LEVEL * 100:g}", cpus=host_cpus(run),
                       baseline=baseline, metric=_metric(run))

    md = (f"MB/s (10⁶ bytes/s): geometric mean over the measured repetitions with its "
          f"{BAND_LEVEL * 100:g} % interval. CPU %: the worker's user + system CPU over the window, % of "
          f"the host's {host_cpus(run)} CPUs. Ratios: each scheme against {baseline}, paired by block, "
          f"with the study's adjusted intervals. Verdicts on {_metric(run)}.\n")
    for f, rs in tables:
        md += f"\n**{f.title}** — {scale_text(run, f)}\n\n" + md_table(
            _MD_HEAD, [_md_row(r) for r in rs], align="llrrrrrrrrrl")
    return [Section("storage-throughput-cpu", "Storage: throughput and CPU %", html, md)]


_RATE_HTML = """\
<p>At an offered throughput (an open level given as a byte rate, I/Os due at fixed times
whatever happened before) every scheme moves the same data, so what differs is the CPU it needs:
the CPU % of the host each scheme used to sustain the rate, in cores, and its ratio to the
baseline {{ baseline }}'s CPU per I/O with the study's adjusted interval. A scheme that could
not keep up shows less MB/s than offered.</p>
<table class="storage-rate" id="storage-rate">
  <thead><tr><th>Operation</th><th>Offered</th><th>Scheme</th><th class="num">MB/s achieved</th>
    <th class="num">CPU %<div class="sub">of the host</div></th><th class="num">cores</th>
    <th class="num">CPU per I/O ÷ {{ baseline }}</th><th>Verdict</th></tr></thead>
  <tbody>
{% for r in rows %}
    <tr class="verdict-{{ r.kind }}"><td>{{ r.operation }}</td><td>{{ r.level }}</td><td>{{ r.configuration }}</td>
      <td class="num">{{ r.mb_s }}</td><td class="num">{{ r.cpu }}</td><td class="num">{{ r.cores }}</td>
      <td class="num">{{ r.cpu_ratio }}</td><td class="verdict">{{ r.verdict }}</td></tr>
{% endfor %}
  </tbody>
</table>
"""


@register(order=21)
def storage_cpu_at_rate(run: StoredRun) -> list[Section]:
    """"Storage: CPU to sustain a throughput": the byte-rate levels of every storage family,
    one row per scheme (CPU % and cores needed, MB/s achieved, CPU ratio to the baseline).
    Nothing without byte-rate storage levels."""
    table = []
    for f in storage_families(run):
        for r, p in zip(rows(run, f), f.points):
            if p.load.bytes_per_s is not None and r["measured"]:
                table.append({**r, "operation": f"{f.label} on {f.backend}"})
    if not table:
        return []
    baseline = run.study.baseline if run.study else ""

    def html() -> str:
        return _render(_RATE_HTML, rows=table, baseline=baseline)

    md = (f"The CPU each scheme needed to sustain an offered throughput (% of the host's "
          f"{host_cpus(run)} CPUs), and its CPU per I/O against {baseline} with the study's adjusted "
          f"interval.\n\n" + md_table(
              ["Operation", "Offered", "Scheme", "MB/s achieved", "CPU % of host", "cores", "CPU/I/O ratio",
               "Verdict"],
              [[r["operation"], r["level"], r["configuration"], r["mb_s"], r["cpu"], r["cores"], r["cpu_ratio"],
                r["verdict"]] for r in table], align="lllrrrrl"))
    return [Section("storage-cpu-at-rate", "Storage: CPU to sustain a throughput", html, md)]
