"""The answer first: order 0, before every other section.

The study's question answered in one short table per metric family the verdicts were decided
on (p50 latency, throughput, CPU time per operation): per operation (and load level), each
configuration's figure of that metric — the baseline's first —, its change against the baseline
with the interval at the adjusted level, and the verdict; for a workload with a server side, the
server's CPU per transaction beside it. Under the tables, one line counts what the reader should
weigh (noisy cells, disturbed and re-run repetitions, inconclusive comparisons) and links to the
details, which the noise section (``core.noise_warning``) keeps collapsed at the end of the report.

Formatting only: every figure is the run's analysis's (``run.summaries``, ``run.deltas``,
``run.analysis.workloads``); nothing here computes one.
"""

from __future__ import annotations

from typing import Any

from cryptoperf import analysis, stats
from cryptoperf.model import CellSummary, Delta
from cryptoperf.report import text as fmt
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.sections import core
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.workloads.generic import BAND_LEVEL, Point

#: Metric families in the order their tables come: key → (table title, figure column title).
FAMILIES = {"latency": ("Latency", "p50 latency"),
            "throughput": ("Throughput", "throughput"),
            "cpu_per_op": ("Process CPU time per operation", "process CPU per operation"),
            "server_cpu_per_op": ("Server CPU time per transaction", "server CPU per transaction")}


def _summary_of(run: StoredRun, d: Delta, baseline: bool) -> CellSummary | None:
    """The cell summary of a delta's configuration (or, with ``baseline``, of its baseline)."""
    name = d.baseline if baseline else d.configuration
    backend = (d.baseline_backend or d.backend) if baseline else d.backend
    for s in run.summaries.values():
        c = s.cell
        if (c.backend, c.label, c.size_bytes, c.configuration) != (backend, d.label, d.size_bytes, name):
            continue
        if baseline or (c.cpu, c.build) == (d.cpu, d.build):
            return s
    return None


def _figure(key: str, s: CellSummary | None, p: Point | None) -> str:
    """The cell's figure of metric ``key`` as the analysis made it: p50 (median over
    repetitions), throughput (a workload level's estimate with its band, else the median
    ops/s), CPU per operation, a server's CPU per transaction (medians); '—' without one."""
    if s is None:
        return "—"
    if key == "latency":
        return fmt.fmt_ns(s.p50_ns)
    if key == "throughput":
        if p is not None and p.tx_per_s is not None:
            return f"{fmt.fmt_estimate(p.tx_per_s)} /s"
        return f"{fmt.fmt_count(s.ops_per_s)} /s"
    if key == "server_cpu_per_op":
        return fmt.fmt_ns(s.server_cpu_ns_per_op)
    return fmt.fmt_ns(s.process_cpu_ns_per_op)


def _row(run: StoredRun, key: str, operation: str, name: str, s: CellSummary | None, d: Delta | None,
         first: bool) -> dict[str, Any]:
    p = run.analysis.workloads.point_of(s.cell.key) if s is not None else None
    # a table decided on the server's CPU shows it as its figure, not again beside it
    server = p.server_cpu_ns_per_tx if p is not None and key != "server_cpu_per_op" else None
    mb = p.bytes_per_s.value if p is not None and p.bytes_per_s is not None and key == "throughput" else None
    cpu_pct = run.analysis.workloads.cpu_pct_of_host(s.cell.key) if s is not None else None
    if d is None:
        change, kind, verdict, title = "—", "baseline", "baseline", ""
    elif core._decided(d):
        change, kind = fmt.change_text(d.decisive), d.verdict.kind
        verdict, title = d.verdict.kind, d.verdict.text
    else:
        change, kind, verdict, title = "—", "na", "n/a", core._na_text(d)
    return {"operation": operation, "first": first, "configuration": name, "figure": _figure(key, s, p),
            "server": f"{fmt.fmt_us(server)} µs" if server is not None else "",
            "mb_s": fmt.fmt_mb_s(mb) if mb is not None else "",
            "cpu_pct": f"{cpu_pct:.1f} %" if cpu_pct is not None else "", "change": change,
            "kind": kind, "verdict": verdict, "title": title}


def answer_tables(run: StoredRun) -> list[dict[str, Any]]:
    """One table per metric family the verdicts were decided on (``FAMILIES`` order), each
    ``{"key", "title", "figure", "server", "rows"}``: per operation and reference (the
    baseline, then each contrast's), the reference's row, then a row per comparison with it
    (``_row``), named ``<configuration> vs <reference>``. Comparisons without a verdict go in the table of the study's
    first family."""
    groups = core._ordered_deltas(run)
    keys = {stats.metric_key(d.verdict.metric) for _, ds in groups for d in ds if core._decided(d)}
    first_key = next((k for k in FAMILIES if k in keys), "latency")
    tables = []
    for key, (title, figure) in FAMILIES.items():
        rows: list[dict[str, Any]] = []
        for operation, ds in groups:
            mine = [d for d in ds if (stats.metric_key(d.verdict.metric) == key if core._decided(d)
                                      else key == first_key)]
            if not mine:
                continue
            first = True
            for reference in dict.fromkeys(d.baseline for d in mine):  # the study's, then each contrast's
                against = [d for d in mine if d.baseline == reference]
                rows.append(_row(run, key, operation, reference, _summary_of(run, against[0], baseline=True), None,
                                 first))
                rows += [_row(run, key, operation, f"{fmt.configuration_text(d.configuration, d.cpu, d.build)} vs "
                                                   f"{reference}", _summary_of(run, d, baseline=False), d, False)
                         for d in against]
                first = False
        if rows:
            tables.append({"key": key, "title": title, "figure": figure, "rows": rows,
                           "server": any(r["server"] for r in rows), "mb_s": any(r["mb_s"] for r in rows),
                           "cpu_pct": any(r["cpu_pct"] for r in rows)})
    return tables


def noise_line(run: StoredRun) -> str:
    """What the reader should weigh, in one line (``core.noise_findings`` counted): ``2 noisy
    cells · 4 disturbed repetitions run again · 1 inconclusive comparison``; '' when nothing."""
    found = core.noise_findings(run)
    words = {"noisy": ("cell over the CV threshold", "cells over the CV threshold"),
             "inconclusive": ("inconclusive comparison", "inconclusive comparisons"),
             "disturbed": ("disturbed repetition analysed", "disturbed repetitions analysed"),
             "rerun": ("disturbed repetition run again", "disturbed repetitions run again")}
    parts = [f"{len(items)} {words[kind][len(items) != 1]}" for kind, items in found.items() if items]
    return " · ".join(parts)


def _figure_sub(run: StoredRun, t: dict[str, Any]) -> str:
    """What a table's figure is, under its title: the band of a workload level's throughput,
    else a median over repetitions."""
    if t["key"] == "throughput" and any(p.tx_per_s is not None for f in run.analysis.workloads.families
                                        for p in f.points):
        return f"{BAND_LEVEL * 100:g} % CI across repetitions"
    return "median over repetitions"


@register(order=0)
def answer(run: StoredRun) -> list[Section]:
    """"Answer": per metric family the verdicts were decided on, a table of each configuration's
    figure, its change against the baseline with its interval, and the verdict; then one line
    counting the noise findings, linked to their details at the end. Nothing for a run without
    a study or without comparisons."""
    if run.study is None or not run.deltas:
        return []
    tables = answer_tables(run)
    baseline = run.study.baseline
    a = run.analysis
    on = analysis.decided_on(run.deltas) or a.settings.metric
    counts = fmt.verdict_counts(run.deltas)
    noise = noise_line(run)
    ci = fmt.interval_header(a.level)
    lead = (f"Each configuration against the baseline {baseline} on the same backend, operation, size and "
            f"load level, decided on {on}: {counts}.")
    for t in tables:
        t["figure_sub"] = _figure_sub(run, t)
        t["figure_head"] = f"{t['figure']} ({t['figure_sub']})"
    html = fragment("sections/answer.html.j2", lead=lead, tables=tables, noise=noise, ci=ci,
                    margin=f"{a.settings.margin_pct:g}")
    md = lead.replace(f"baseline {baseline}", f"baseline **{baseline}**") + "\n"
    for t in tables:
        head = ["Operation", "Configuration", t["figure_head"]] + (["MB/s"] if t["mb_s"] else []) + (
            ["process CPU % of host"] if t["cpu_pct"] else []) + (["server CPU / transaction"] if t["server"] else [])
        head += [f"change vs the reference ({ci})", "Verdict"]
        body = [[r["operation"] if r["first"] else "", r["configuration"], r["figure"]]
                + ([r["mb_s"]] if t["mb_s"] else []) + ([r["cpu_pct"]] if t["cpu_pct"] else [])
                + ([r["server"]] if t["server"] else [])
                + [r["change"], f"**{r['verdict']}**" if r["kind"] not in ("baseline", "na") else r["verdict"]]
                for r in t["rows"]]
        md += f"\n**{t['title']}**\n\n" + md_table(head, body, align="ll" + "r" * (len(head) - 3) + "l")
    if noise:
        md += f"\nTo weigh: {noise} (details in the last section).\n"
    return [Section("answer", "Answer", html, md)]
