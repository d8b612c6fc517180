"""Report sections of the ``storage`` workload: clear vs encrypted file I/O, throughput beside the
CPU it took — for storage, the measure that matters is what CPU it takes to move a given amount
of data, so the two are never shown apart.

21  storage: throughput and CPU %  — per (backend, operation): MB/s bars per scheme at each
                                     thread count with the CPU % each needed as a line on a
                                     second axis; a table with MB/s and I/Os per second, latency
                                     per I/O, the process's CPU % (user, system), CPU ns per byte
                                     and each scheme's ratio to the baseline with its interval
21  storage: CPU to sustain a rate — the byte-rate levels (``open:100MB/s``): the CPU % each
                                     scheme needed to sustain the offered throughput, and its
                                     ratio to the baseline's

Every figure is the analysis's (``cryptoperf.workloads.storage``), the ratios and verdicts the
run's comparisons (paired, Bonferroni-adjusted with all of the study's).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from cryptoperf import analysis
from cryptoperf.report import text as fmt
from cryptoperf.report import plots
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.sections.workloads import (colour, column, family_slug, family_title, level_row,
                                                  verdict_text)
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.workloads import storage
from cryptoperf.workloads.generic import BAND_LEVEL


def describe(s: storage.Setting | None) -> str:
    """A storage setting in words: ``direct I/O, random read``, ``buffered, cached (served above
    the encryption layer), sequential write, fsync end, dm-crypt volume``."""
    if s is None:
        return ""
    io = "direct I/O" if s.direct else "buffered"
    if s.cache == "cached":
        io += ", cached (served above the encryption layer)"
    direction = f"mixed ({s.read_pct} % reads)" if s.direction.startswith("mixed") else s.direction
    sync = f", fsync {s.fsync}" if s.fsync and s.fsync != "none" else ""
    layer = ", dm-crypt volume" if s.layer == "dm-crypt" else ""
    return f"{io}, {s.pattern} {direction}{sync}{layer}"


def scale_text(fam: storage.StorageFamily) -> str:
    """The scale a family ran at: ``files of 32 MiB, 64 KiB per I/O, direct I/O, random read``."""
    s = fam.setting
    if s is None:
        return ""
    return f"files of {fmt.fmt_size(s.file_bytes) or '?'}, {fmt.fmt_size(s.block_bytes)} per I/O, {describe(s)}"


def _level(c: storage.CellFigures) -> str:
    p = c.point
    return p.load.label if p.load.kind == "open" else f"{p.load.connections} thread{'s' if p.load.connections != 1 else ''}"


def rows(fam: storage.StorageFamily) -> list[dict[str, Any]]:
    """The level table's rows of a storage family: MB/s with its band, I/Os per second, p50/p99
    per I/O (ms), the process's CPU % of the host (user / system), cores, the process's CPU ns
    per byte, the MB/s and CPU-per-I/O ratios to the baseline with the comparison's interval,
    the verdict."""
    out = []
    for c in fam.cells:
        p, d = c.point, c.point.delta
        ok = d is not None and d.status == "ok"
        out.append(level_row(p, _level(c), [
            (fmt.fmt_estimate(c.mb_s, fmt.fmt_mb), True), (fmt.fmt_estimate(p.tx_per_s), True),
            (fmt.fmt_ms(p.summary.p50_ns), True), (fmt.fmt_ms(p.summary.p99_ns), True), (fmt.fmt_sig(c.cpu_pct), True),
            ("—" if c.user_pct is None else f"{c.user_pct:.3g} / {c.system_pct:.3g}", True),
            (fmt.fmt_sig(c.process_cpu_ns_per_byte), True),
            (fmt.ratio_text(d.throughput) if ok else "", True), (fmt.ratio_text(d.cpu_per_op) if ok else "", True),
            (verdict_text(p), False)]))
        out[-1]["cores"] = fmt.fmt_sig(c.cores)
        out[-1]["rate"] = p.load.bytes_per_s is not None
    return out


def columns(baseline: str, cpus: int) -> list[dict[str, Any]]:
    """The storage level table's columns."""
    return [column("Level", num=False), column("Scheme", num=False), column("MB/s", f"{BAND_LEVEL * 100:g} % CI"),
            column("I/Os per s"), column("p50 ms"), column("p99 ms"),
            column("process CPU %", f"of the host's {cpus} CPU{'s' if cpus != 1 else ''}"),
            column("user / system %"), column("process CPU ns / byte"), column(f"MB/s ÷ {baseline}"),
            column(f"CPU per I/O ÷ {baseline}"), column("Verdict", num=False)]


def combined_svg(fam: storage.StorageFamily, plot_id: str) -> str:
    """MB/s bars and CPU % lines on one chart for the closed levels of a storage family: at each
    thread count one bar per scheme (its geometric mean, with its band as an error bar) and, on
    the right axis, each scheme's process CPU % of the host as a dashed line with markers in the
    scheme's colour, each marker over its own bar (at one level the schemes' markers stand apart
    instead of on one spot). Bars' SVG groups have the ids ``<plot_id>-bars-<configuration>-<threads>``,
    lines ``<plot_id>-cpu-<configuration>``. Returns the SVG text."""
    import numpy as np
    cells = [c for c in fam.cells if c.point.load.kind == "closed"]
    levels = sorted({c.point.load.connections for c in cells})
    series = fam.family.series()
    fig = plots.figure(max(5.0, 1.1 + 1.05 * len(levels) * max(1, len(series)) * 0.45), 3.9)
    ax = fig.add_subplot(1, 1, 1)
    cpu_ax = ax.twinx()
    width = 0.8 / max(1, len(series))
    xs = np.arange(len(levels), dtype=float)
    for i, (name, order) in enumerate(series):
        mine = {c.point.load.connections: c for c in cells if c.point.series == name}
        es = [mine[lv].mb_s if lv in mine else None for lv in levels]
        at = xs - 0.4 + width * (i + 0.5)  # this scheme's bar at each level, and its CPU marker above it
        bars = ax.bar(at, [e.value if e else 0.0 for e in es], width * 0.92,
                      color=colour(order), alpha=0.85, label=f"{name} MB/s",
                      yerr=[[e.value - e.low if e and e.low is not None else 0.0 for e in es],
                            [e.high - e.value if e and e.high is not None else 0.0 for e in es]],
                      error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"})
        for level, patch in zip(levels, bars.patches):
            patch.set_gid(f"bars-{plots.gid(name)}-{level}")
        cpu = [mine[lv].cpu_pct if lv in mine and mine[lv].cpu_pct is not None else np.nan for lv in levels]
        line, = cpu_ax.plot(at, cpu, color=colour(order), linestyle="--", marker="D", markersize=4,
                            linewidth=1.2, label=f"{name} CPU %")
        line.set_gid(f"cpu-{plots.gid(name)}")
    ax.set_xticks(xs, [f"{n} thread{'s' if n != 1 else ''}" for n in levels], fontsize=8)
    ax.set_ylabel("MB/s (bars)", fontsize=8.5)
    cpu_ax.set_ylabel("process CPU % of the host (lines)", fontsize=8.5)
    ax.set_ylim(bottom=0)
    cpu_ax.set_ylim(0, max(100.0, max((c.cpu_pct or 0.0 for c in cells), default=0.0) * 1.1))
    ax.grid(True, axis="y", color="#e5e5e5", linewidth=0.6)
    ax.tick_params(labelsize=8)
    cpu_ax.tick_params(labelsize=8)
    handles, labels = [], []
    for a in (ax, cpu_ax):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=7, frameon=False)
    title = f"throughput and CPU: {fam.family.label} on {fam.family.backend}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.subplots_adjust(left=0.1, right=0.9, top=0.88, bottom=0.2 + 0.045 * ((len(labels) - 1) // 4))
    return plots.svg(fig, plot_id, "storage-throughput-cpu", title)


def decided_on(run: StoredRun, figures: storage.StorageFigures) -> str:
    """The metrics the storage cells' verdicts were decided on (``analysis.decided_on``)."""
    ds = [c.point.delta for f in figures.families for c in f.cells if c.point.delta is not None]
    return analysis.decided_on(ds) or run.analysis.settings.metric


_MD_HEAD = ["Level", "Scheme", "MB/s (95 % CI)", "I/Os per s", "p50 ms", "p99 ms", "process CPU % of host",
            "user/sys %", "process CPU ns/B", "MB/s ratio", "CPU/I/O ratio", "Verdict"]


def _md_row(r: dict[str, Any]) -> list[str]:
    if not r["measured"]:
        return [r["level"], r["configuration"], f"not measured: {r['status']}"] + [""] * 9
    return [r["level"], r["configuration"]] + [c["text"] for c in r["cells"]]


@register(order=21)
def storage_throughput_cpu(run: StoredRun) -> list[Section]:
    """"Storage: throughput and CPU %": per storage family a combined chart of its closed
    levels (``combined_svg``) and a table of every level × scheme (``rows``). Markdown: the
    tables. Nothing without storage cells."""
    figures = run.analysis.workloads.of(storage.KIND)
    if figures is None:
        return []
    baseline = run.study.baseline if run.study else ""
    tables = [(f, rows(f)) for f in figures.families]
    cols = columns(baseline, figures.host_cpus)
    metric = decided_on(run, figures)

    def html() -> str:
        figs = [{"slug": family_slug(f.family), "title": family_title(f.family), "scale": scale_text(f), "rows": rs,
                 "svg": Markup(combined_svg(f, f"storage-{family_slug(f.family)}"))
                 if any(c.point.load.kind == "closed" for c in f.cells) else None}
                for f, rs in tables]
        return fragment("sections/storage_levels.html.j2", figures=figs, columns=cols, level=f"{BAND_LEVEL * 100:g}",
                        cpus=figures.host_cpus, baseline=baseline, metric=metric)

    md = (f"MB/s (10⁶ bytes/s): geometric mean over the measured repetitions with its {BAND_LEVEL * 100:g} % "
          f"interval. Process CPU %: the worker process's user + system CPU over the window, % of the host's "
          f"{figures.host_cpus} CPUs. Ratios: each scheme against {baseline}, paired by block, with the study's "
          f"adjusted intervals. Verdicts on {metric}.\n")
    for f, rs in tables:
        md += f"\n**{family_title(f.family)}** — {scale_text(f)}\n\n" + md_table(
            _MD_HEAD, [_md_row(r) for r in rs], align="llrrrrrrrrrl")
    return [Section("storage-throughput-cpu", "Storage: throughput and CPU %", html, md)]


@register(order=21)
def storage_cpu_at_rate(run: StoredRun) -> list[Section]:
    """"Storage: CPU to sustain a throughput": the byte-rate levels of every storage family,
    one row per scheme (CPU % and cores needed, MB/s achieved, CPU ratio to the baseline).
    Nothing without byte-rate storage levels."""
    figures = run.analysis.workloads.of(storage.KIND)
    if figures is None:
        return []
    table = [{**r, "operation": f"{f.family.label} on {f.family.backend}"}
             for f in figures.families for r in rows(f) if r["rate"] and r["measured"]]
    if not table:
        return []
    baseline = run.study.baseline if run.study else ""
    html = fragment("sections/storage_rate.html.j2", rows=table, baseline=baseline)
    md = (f"The CPU each scheme needed to sustain an offered throughput (the worker process's, % of the host's "
          f"{figures.host_cpus} CPUs), and its CPU per I/O against {baseline} with the study's adjusted "
          f"interval.\n\n" + md_table(
              ["Operation", "Offered", "Scheme", "MB/s achieved", "process CPU % of host", "cores", "CPU/I/O ratio",
               "Verdict"],
              [[r["operation"], r["level"], r["configuration"], r["cells"][0]["text"], r["cells"][4]["text"],
                r["cores"], r["cells"][8]["text"], r["cells"][9]["text"]] for r in table], align="lllrrrrl"))
    return [Section("storage-cpu-at-rate", "Storage: CPU to sustain a throughput", html, md)]
