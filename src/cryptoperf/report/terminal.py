"""Terminal tables (Rich): the answer at a glance. Formatting only; no decisions."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from cryptoperf import builds, cpumask, speedstats, stats
from cryptoperf.hostinfo import CheckResult
from cryptoperf.model import CellSummary, Delta, Outcome, Repetition
from cryptoperf.run.worker import Hello


def fmt_ns(ns: float | None) -> str:
    """A duration in ns with a fitting unit: ``850 ns``, ``12.3 µs``, ``4.56 ms``, ``1.20 s``."""
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def fmt_count(x: float | None) -> str:
    """A rate with an SI prefix, 3 significant digits: ``1.23 M``, ``845 k``, ``12.0``."""
    if x is None:
        return "—"
    x = float(f"{x:.3g}")  # round first, so 999.9999 reads "1 k", not "1e+03"
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}"
    return f"{x:.3g}"


def fmt_mb_s(bytes_per_s: float | None) -> str:
    """Bytes/s as MB/s (10^6 bytes), or '—' for operations without a message."""
    if bytes_per_s is None:
        return "—"
    mb = bytes_per_s / 1e6
    return f"{mb:.3g}" if mb < 1000 else f"{mb:.0f}"


def fmt_size(size: int | None) -> str:
    """``4 KiB``, ``1 MiB``, ``100 B``; '' for None."""
    if size is None:
        return ""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def fmt_pct(pct: float | None, signed: bool = True) -> str:
    """``+12.3 %`` / ``-4.0 %`` (or unsigned), '—' for None."""
    if pct is None:
        return "—"
    return f"{pct:+.1f} %" if signed else f"{pct:.1f} %"


class Notes:
    """Numbered footnotes under a table, so long reasons do not stretch its columns."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> int:
        """Add ``text`` (once) and return its 1-based number."""
        if text not in self.items:
            self.items.append(text)
        return self.items.index(text) + 1

    def status(self, status: str, reason: str, style: str = "red", inline_max: int = 48) -> Text:
        """``status: reason`` when the reason is short, else ``status [n]`` with a footnote."""
        if len(reason) <= inline_max:
            return Text(f"{status}: {reason}" if reason else status, style=style)
        return Text(f"{status} [{self.add(reason)}]", style=style)

    def print(self, console: Console) -> None:
        """Print the notes, one per line, as ``[n] text``."""
        for i, text in enumerate(self.items, 1):
            console.print(Text(f"[{i}] {text}", style="dim"))


def console_for_stdout() -> Console:
    """A Console on stdout; when stdout is not a terminal, wide enough (160 columns) that
    tables are not wrapped into unreadable slivers."""
    c = Console(highlight=False)
    if not c.is_terminal and "COLUMNS" not in __import__("os").environ:
        c = Console(highlight=False, width=160)
    return c


def short_library(result: dict) -> str:
    """Library name and version for a table cell; a multi-crate version list (RustCrypto) is
    cut after its first entry (the full list is in the JSON and the backends table)."""
    version = str(result.get("library_version", ""))
    if "," in version:
        version = version.split(",")[0] + ", …"
    return f"{result.get('library', '')} {version}".strip()


def _with_interval(text: str, e: stats.Estimate | None) -> str:
    """``1.23 M ±1.2%``: a figure with the half-width of its 95 % interval relative to it (the
    larger side); the figure alone without an interval."""
    half = speedstats.relative_half_width_pct(e)
    if half is None:
        return text
    return f"{text} ±{half:.1f}%" if half >= 0.1 else f"{text} ±{half:.2f}%"


def operation_text(cell) -> str:
    """A speed row's operation with the worker parameters it was given:
    ``rsa2048-sign digest=sha384 padding=pss``."""
    extra = " ".join(f"{k}={v}" for k, v in sorted(cell.params.items()))
    return f"{cell.op} {extra}".strip()


def speed_table(rows: Sequence[speedstats.SpeedRow] | Sequence[Outcome], notes: Notes,
                title: str = "cryptoperf speed") -> Table:
    """One row per (backend, operation, size) (``speedstats.rows``; a list of outcomes is
    turned into rows): ops/s, MB/s (blank for operations without a message), latency p50 /
    p99 / p99.9, CPU ns/op, batch, repetitions measured; with 3 or more repetitions ops/s, p50
    and CPU/op carry ``±x%``, the half-width of their 95 % t interval (geometric means over
    repetitions; ``speed_interval_note`` says so under the table). Unsupported / invalid /
    failed rows say so in the last column, the reason as a footnote in ``notes``. Where a batch
    holds k > 1 operations the percentiles are those of k-operation batch means, and a
    footnote says so."""
    if rows and isinstance(rows[0], Outcome):
        rows = speedstats.rows(rows)
    reps = max((len(r.outcomes) for r in rows), default=1)
    t = Table(title=title, title_justify="left")
    columns = [("backend", "left"), ("library", "left"), ("operation", "left"), ("size", "right"),
               ("ops/s", "right"), ("MB/s", "right"), ("p50", "right"), ("p99", "right"),
               ("p99.9", "right"), ("CPU/op", "right"), ("batch", "right")]
    if reps > 1:
        columns.append(("reps", "right"))
    for name, justify in columns + [("note", "left")]:
        t.add_column(name, justify=justify, overflow="fold")
    batched_note = None
    for row in rows:
        r = row.result
        head: list = [Text(row.cell.backend), Text(short_library(dict(r))), Text(operation_text(row.cell)),
                      fmt_size(row.size_bytes)]
        count = [f"{len(row.measured)}/{len(row.outcomes)}"] if reps > 1 else []
        if row.status != "ok" or row.ops_per_s is None or row.p50_ns is None:
            style = "dim" if row.status == "unsupported" else "red"
            t.add_row(*head, *([""] * 7), *count, notes.status(row.status, row.reason, style))
            continue
        note = Text(str(r.get("timing", "")))
        batch = str(r.get("batch", ""))
        if (r.get("batch") or 1) > 1:
            if batched_note is None:
                batched_note = notes.add("batch k > 1: p50/p99/p99.9 are percentiles of k-operation "
                                         "batch means, not of single operations (their tail is smoothed)")
            batch += f" [{batched_note}]"
        if row.steal_pct:
            note.append(f", steal {row.steal_pct:.1f} %")
        if row.reason:
            note.append(", ")
            note.append(notes.status("some failed", row.reason, "yellow", inline_max=0))
        mb = fmt_mb_s(row.bytes_per_s.value) if row.bytes_per_s is not None else ""
        t.add_row(*head, _with_interval(fmt_count(row.ops_per_s.value), row.ops_per_s), mb,
                  _with_interval(fmt_ns(row.p50_ns.value), row.p50_ns), fmt_ns(row.p99_ns),
                  fmt_ns(row.p999_ns),
                  _with_interval(fmt_ns(row.cpu_ns_per_op.value), row.cpu_ns_per_op)
                  if row.cpu_ns_per_op is not None else "—",
                  batch, *count, note)
    return t


def speed_interval_note(repetitions: int) -> str:
    """The line under the speed table saying what its figures are: with 3 or more
    repetitions, geometric means with ``±`` the 95 % interval; with fewer, that there is none."""
    if repetitions >= speedstats.MIN_REPETITIONS:
        return (f"{repetitions} repetitions per row, each in a fresh worker process, in randomised "
                "blocks: ops/s, MB/s, p50, p99, p99.9 and CPU/op are geometric means over them; ± is "
                "the half-width of the 95 % t interval (log scale, the larger side)")
    what = "1 repetition per row" if repetitions == 1 else f"{repetitions} repetitions per row (geometric means)"
    return (f"{what}: no intervals; --repetitions {speedstats.MIN_REPETITIONS} or more gives a 95 % "
            "interval for ops/s, p50 and CPU/op")


def baseline_lines(ratios: Sequence[speedstats.BaselineRatio], baseline: str, repetitions: int) -> list[str]:
    """The ``speed --baseline`` summary as lines: a header saying what is compared and how,
    then per operation and size each other backend against the baseline
    (``aws-lc: 1.32× faster [1.28, 1.36] than openssl``), as hyperfine's summary does."""
    if not ratios:
        return []
    if repetitions >= speedstats.MIN_REPETITIONS:
        how = (f"ratio of ops/s with its 95 % interval, paired by block over {repetitions} repetitions; "
               "each interval holds on its own, none is adjusted for multiplicity")
    else:
        how = (f"ratio of ops/s, point estimates only ({repetitions} repetition"
               f"{'s' if repetitions != 1 else ''} per row; --repetitions {speedstats.MIN_REPETITIONS} "
               "or more gives intervals)")
    lines = [f"against {baseline} — {how}:"]
    groups: dict[tuple, list[speedstats.BaselineRatio]] = {}
    for r in ratios:
        groups.setdefault(r.row.key, []).append(r)
    for members in groups.values():
        row = members[0].baseline_row or members[0].row
        size = fmt_size(row.size_bytes)
        lines.append(f"  {operation_text(row.cell)}{' ' + size if size else ''}:")
        width = max(len(m.backend) for m in members) + 1
        for m in members:
            text = m.describe(why_no_interval=False)
            who = f"{m.backend}:"
            lines.append(f"    {who:<{width}}{text[len(who):]}")
    return lines


def configuration_text(name: str, cpu: str, build: str = "default") -> str:
    """A configuration's name, with its CPU mask and worker build when they are not the
    defaults: ``aes-off [cpu no-aesni]``, ``on [fips]``."""
    out = name if cpu == "baseline" else f"{name} [cpu {cpu}]"
    return out if build == "default" else f"{out} [{build}]"


def cpu_title(cpu: str) -> str:
    """`` — CPU mask no-aesni`` for a table title ('' for baseline)."""
    return "" if cpu == "baseline" else f" — CPU mask {cpu}"


def mask_warnings(outcomes: Iterable[Outcome]) -> list[str]:
    """One line per CPU mask that took nothing away on this machine (the CPU lacks the
    extensions it clears, so its cells measured the unmasked code): judged from the worker's
    ``cpu_mask_cleared`` of measured runs on maskable libraries."""
    cleared: dict[str, bool] = {}
    for o in outcomes:
        r = o.result or {}
        cpu = o.cell.cpu
        if cpu == "baseline" or not o.ok or "cpu_mask_cleared" not in r:
            continue
        cleared[cpu] = cleared.get(cpu, False) or bool(r["cpu_mask_cleared"])
    return [f"note: CPU mask {m} took nothing away on this machine (the CPU lacks the extensions "
            "it clears): its cells measured the unmasked code" for m, any_ in cleared.items() if not any_]


def _operation(d_label: str, size: int | None) -> str:
    return f"{d_label} {fmt_size(size)}".strip()


def _ci_text(d: Delta) -> str:
    assert d.latency
    return stats.interval_text(d.latency)


def _verdict_style(kind: str) -> str:
    return {stats.SLOWER: "red", stats.FASTER: "green", stats.EQUIVALENT: "dim",
            stats.INCONCLUSIVE: "yellow"}.get(kind, "")


def interval_header(level: float) -> str:
    """``95 % CI`` / ``99.79 % CI`` (the per-interval level after adjustment)."""
    return f"{level * 100:.4g} % CI"


def verdict_header(deltas: Iterable[Delta]) -> str:
    """``verdict (p50 latency)``: the column header naming the metric the verdicts are on."""
    metrics = {d.verdict.metric for d in deltas if d.verdict is not None}
    return f"verdict ({metrics.pop()})" if len(metrics) == 1 else "verdict"


def delta_table(deltas: Iterable[Delta], baseline: str, notes: Notes, level: float = stats.DEFAULT_LEVEL) -> Table:
    """The "performance delta vs baseline" table: one row per (backend, operation, size,
    configuration); latency change with its interval (at ``level``, the study's adjusted
    level; a percentage below 2×, a factor from 2× on), throughput change with its interval,
    blocks, the verdict (the header names its metric) and, when the configuration ran another
    library release than the baseline, both releases beside it. Rows without numbers say why in
    a footnote in ``notes``."""
    deltas = list(deltas)
    t = Table(title=f"performance delta vs baseline ({baseline})", title_justify="left")
    ci = interval_header(level)
    for name, justify in (("backend", "left"), ("operation", "left"), ("configuration", "left"),
                          ("baseline p50", "right"), ("p50", "right"), ("latency Δ", "right"),
                          (ci, "right"), (f"throughput Δ ({ci})", "right"), ("blocks", "right"),
                          (verdict_header(deltas), "left")):
        t.add_column(name, justify=justify, overflow="fold")
    for d in deltas:
        head = [Text(d.backend), Text(_operation(d.label, d.size_bytes)),
                Text(configuration_text(d.configuration, d.cpu, d.build))]
        if d.status != "ok" or d.latency is None or d.throughput is None:
            t.add_row(*head, "", "", "", "", "", "", notes.status("n/a", d.reason))
            continue
        t.add_row(*head, *_delta_cells(d))
    return t


def _delta_cells(d: Delta) -> list:
    """The cells of a measured delta's row: both p50s, latency Δ, its interval, throughput Δ
    with its interval, blocks, and the verdict (with the delta's note)."""
    assert d.latency and d.throughput and d.verdict
    verdict = Text(d.verdict.text, style=_verdict_style(d.verdict.kind))
    if d.library_change:
        verdict.append(f" ({d.library_change})", style="bold")
    if d.note:
        verdict.append(f" ({d.note})", style="dim")
    return [fmt_ns(d.baseline_p50_ns), fmt_ns(d.p50_ns), stats.change_point_text(d.latency), _ci_text(d),
            stats.change_text(d.throughput), str(d.blocks), verdict]


def verdict_counts(deltas: Iterable[Delta]) -> str:
    """``3 slower, 1 faster, 5 equivalent, 2 inconclusive`` (kinds with a count only)."""
    counts: dict[str, int] = {}
    for d in deltas:
        if d.verdict is not None:
            counts[d.verdict.kind] = counts.get(d.verdict.kind, 0) + 1
    return ", ".join(f"{counts[k]} {k}" for k in stats.VERDICT_KINDS if k in counts) or "no verdicts"


def noise_table(summaries: Iterable[CellSummary], threshold_pct: float, notes: Notes) -> Table:
    """Noise per cell: measured repetitions, CV % of p50 and of ops/s across repetitions (over
    ``threshold_pct`` in yellow), mean steal %, repetitions flagged as disturbed, batch size;
    reasons of unmeasured cells in ``notes``."""
    t = Table(title=f"noise across repetitions (warn above CV {threshold_pct:g} %)", title_justify="left")
    for name, justify in (("backend", "left"), ("operation", "left"), ("configuration", "left"),
                          ("reps ok", "right"), ("CV p50", "right"), ("CV ops/s", "right"),
                          ("steal", "right"), ("disturbed", "right"), ("batch", "right"), ("status", "left")):
        t.add_column(name, justify=justify, overflow="fold")

    def cv_text(cv: float, n: int) -> Text:
        if n < 2:
            return Text("—")
        pct = cv * 100
        return Text(f"{pct:.1f} %", style="yellow" if pct > threshold_pct else "")

    for s in summaries:
        c = s.cell
        status = Text("ok") if s.status == "ok" else notes.status(s.status, s.reason)
        t.add_row(Text(c.backend), Text(_operation(c.label, c.size_bytes)),
                  Text(configuration_text(c.configuration, c.cpu, c.build)), f"{s.ok}/{s.repetitions}",
                  cv_text(s.cv_p50, s.ok), cv_text(s.cv_ops_per_s, s.ok),
                  fmt_pct(s.steal_pct, signed=False), str(s.disturbed) if s.disturbed else "",
                  str(s.batch) if s.batch else "", status)
    return t


def backends_table(hello: Hello) -> Table:
    """Backends with library versions, FIPS state and whether a CPU mask (``--cpu``, study key
    ``cpu``) can be applied to them."""
    t = Table(title=f"cryptoperf-worker {hello.worker_version} (protocol {hello.protocol})",
              title_justify="left")
    for name in ("backend", "library", "version", "fips", "cpu mask"):
        t.add_column(name)
    for b in hello.backends:
        caps = b.get("capabilities") or {}
        if "maskable" not in caps:
            mask = Text("?", style="dim")
        elif caps["maskable"]:
            mask = Text("yes (OPENSSL_ia32cap)")
        else:
            mask = Text("no", style="dim")
        t.add_row(Text(b["backend"]), Text(str(b.get("library", ""))), Text(str(b.get("library_version", ""))),
                  "yes" if b.get("fips") else "no", mask)
    return t


def support_table(hello: Hello, notes: Notes) -> Table | None:
    """Operations × backends from a detailed hello: ``yes``, or the status with the reason as a
    footnote; None when the hello has no per-operation detail."""
    if not all("ops" in b for b in hello.backends):
        return None
    t = Table(title="operations by backend", title_justify="left")
    t.add_column("operation")
    for b in hello.backends:
        t.add_column(b["backend"])
    support = {b["backend"]: {o["op"]: o for o in b["ops"]} for b in hello.backends}
    for op in hello.ops:
        row: list = [Text(op)]
        for b in hello.backends:
            o = support[b["backend"]].get(op)
            if o is None:
                row.append(Text("?", style="dim"))
            elif o.get("status") == "supported":
                row.append(Text("yes", style="green"))
            else:
                row.append(notes.status(str(o.get("status")), o.get("reason", ""), "dim", inline_max=0))
        t.add_row(*row)
    return t


def host_warnings(console: Console, checks: Sequence[CheckResult]) -> None:
    """Print one line per host check that warns (state and advice)."""
    for c in checks:
        if c.state == "warning":
            console.print(f"[yellow]host: {c.name}: {c.value}[/] — {c.advice}", highlight=False)


def host_line(fp: Mapping) -> str:
    """One line naming the host: CPU, crypto flags, hypervisor, kernel release."""
    hv = fp.get("hypervisor") or {}
    virt = hv.get("type") or ("yes" if hv.get("present") else "no" if hv.get("present") is False else "?")
    if hv.get("container"):
        virt += f", container {hv['container']}"
    kernel = str(fp.get("kernel", "")).split(" ")[1] if fp.get("kernel") else "?"
    return (f"host: {fp.get('cpu_model')} × {fp.get('logical_cpus')}, flags "
            f"{' '.join(fp.get('crypto_flags') or []) or 'none'}, hypervisor {virt}, kernel {kernel}")


# --------------------------------------------------------------------------- stored runs: list, compare, plan

def fmt_date(iso: str | None) -> str:
    """``2026-11-23T09:05:12.345Z`` → ``2026-11-23 09:05 UTC``; '—' for None."""
    if not iso:
        return "—"
    text = str(iso).replace("T", " ")
    return f"{text[:16]} UTC" if text.endswith("Z") else text[:16]


def runs_table(runs: Sequence[Mapping]) -> Table:
    """``cryptoperf list``: one row per stored run (``stored.list_runs`` dicts): id, date,
    study (or ``speed``), host (CPU model, kernel release), cells, results measured, status."""
    t = Table(title="stored runs", title_justify="left")
    for name, justify in (("id", "right"), ("date", "left"), ("study", "left"), ("host", "left"),
                          ("cells", "right"), ("runs ok", "right"), ("status", "left")):
        t.add_column(name, justify=justify, overflow="fold")
    for r in runs:
        status = Text(str(r["status"]), style="" if r["status"] == "complete" else "yellow")
        if not r.get("supported", True):
            status = Text(f"{r['status']} (format {r['format_version']}: not supported)", style="red")
        study = r.get("study") or r.get("kind") or ""
        t.add_row(str(r["id"]), fmt_date(r.get("started_at")), Text(study),
                  Text(f"{r.get('cpu_model') or '?'}, kernel {r.get('kernel') or '?'}"),
                  str(r.get("cells", 0)), f"{r.get('ok', 0)}/{r.get('results', 0)}", status)
    return t


def side_name(side: int | str) -> str:
    """How a table names one side of a comparison: ``run 7`` for a run id, else the name as
    given (a machine's, in ``compare --by host``)."""
    return f"run {side}" if isinstance(side, int) else str(side)


def host_differences_table(diffs: Sequence, run_a: int | str, run_b: int | str) -> Table:
    """The host properties that differ between run A and run B (``compare.HostDifference``);
    a side is a run id or a machine's name (``side_name``)."""
    a, b = side_name(run_a), side_name(run_b)
    t = Table(title=f"host differences ({a} → {b})", title_justify="left")
    for name in ("property", a, b):
        t.add_column(name, overflow="fold")
    for d in diffs:
        t.add_row(Text(d.field), Text(d.a), Text(d.b))
    return t


def compare_table(deltas: Iterable[Delta], run_a: int | str, run_b: int | str, threshold_pct: float,
                  notes: Notes, level: float = stats.DEFAULT_LEVEL) -> Table:
    """``cryptoperf compare``: the delta table of run B against run A, one row per matched
    cell — p50 in each run, latency Δ with its interval (at ``level``), throughput Δ with its
    interval, repetitions per side, verdict (B against A) and noise (the larger CV across
    repetitions; over ``threshold_pct`` in yellow). Rows without an interval give the reason in
    ``notes`` (and the two p50s with their point change when both runs measured the cell). A
    side is a run id or a machine's name (``side_name``)."""
    deltas = list(deltas)
    a, b = side_name(run_a), side_name(run_b)
    t = Table(title=f"{b} vs {a} (baseline)", title_justify="left")
    ci = interval_header(level)
    for name, justify in (("backend", "left"), ("operation", "left"), ("configuration", "left"),
                          (f"p50 {a}", "right"), (f"p50 {b}", "right"),
                          ("latency Δ", "right"), (ci, "right"),
                          (f"throughput Δ ({ci})", "right"), ("reps", "right"), (verdict_header(deltas), "left"),
                          ("noise", "right")):
        t.add_column(name, justify=justify, overflow="fold")
    for d in deltas:
        op = _operation(d.label, d.size_bytes)
        if d.op and d.baseline_op and d.op != d.baseline_op:
            op += f" [{notes.add(f'{d.label}: {d.baseline_op} in {a}, {d.op} in {b}')}]"
        head = [Text(d.backend), Text(op), Text(d.configuration or "—")]
        if d.status != "ok" or d.latency is None or d.throughput is None:
            point = (fmt_pct((d.p50_ns / d.baseline_p50_ns - 1) * 100)
                     if d.p50_ns and d.baseline_p50_ns else "")
            t.add_row(*head, fmt_ns(d.baseline_p50_ns) if point else "", fmt_ns(d.p50_ns) if point else "",
                      point, "", "", "", notes.status("n/a", d.reason), "")
            continue
        noise_pct = (d.noise or 0.0) * 100
        t.add_row(*head, *_delta_cells(d),
                  Text(f"CV {noise_pct:.1f} %", style="yellow" if noise_pct > threshold_pct else ""))
    return t


def fmt_cores(cores: float | None) -> str:
    """``0.125 cores (12.5 % of a core)``; '—' for None."""
    if cores is None:
        return "—"
    return f"{cores:.3g} cores ({cores * 100:.3g} % of a core)"


def fmt_money(x: float) -> str:
    """Money per year with thousands separators and 2 decimals: ``1,234.50``."""
    return f"{x:,.2f}"


# --------------------------------------------------------------------------- progress


def _describe(rep: Repetition) -> str:
    c = rep.cell
    size = f" {c.size_bytes} B" if c.size_bytes is not None else ""
    conf = f" ({c.configuration})" if c.configuration else ""
    if c.cpu != cpumask.BASELINE:
        conf += f" [cpu {c.cpu}]"
    if c.build != builds.DEFAULT:
        conf += f" [{c.build}]"
    where = "calibration" if rep.calibration else f"block {rep.block}"
    again = " (re-run: disturbed)" if rep.attempt > 1 else ""
    what = f"{c.op} {c.label}" if c.is_workload else c.op  # the label names the load level
    return f"{c.backend} {what}{size}{conf} {where}{again}"


class _Bar:
    """What the progress displays share: a live Rich bar naming the current item on a terminal,
    plain lines otherwise (logs, CI), where a live bar cannot show."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.live = self.console.is_terminal
        self._progress: Progress | None = None
        self._task = None
        self._done = self._total = 0

    def _start(self, description: str, total: int, unit: str) -> None:
        """Start a bar (or a log line) for ``total`` ``unit``."""
        self._done, self._total = 0, total
        if self.live:
            self._progress = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TextColumn("{task.fields[current]}", markup=False),
                                      TimeRemainingColumn(), console=self.console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(description, total=total, current="")
        else:
            self.console.print(f"{description}: {total} {unit}", markup=False)

    def end(self) -> None:
        """Remove the bar."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class ProgressBar(_Bar):
    """A ``run.local.Progress`` on stderr: a live bar with the repetition running and the time
    left on a terminal; one line per finished repetition otherwise (logs, CI), where a live bar
    cannot show."""

    def begin(self, description: str, total: int) -> None:
        """Start a bar (or a log section) for ``total`` repetitions."""
        self._start(description, total, "repetitions")

    def starting(self, rep: Repetition) -> None:
        """Show what runs now."""
        if self._progress is not None:
            self._progress.update(self._task, current=_describe(rep))

    def finished(self, outcome: Outcome) -> None:
        """Advance (a superseded attempt does not count: its re-run follows)."""
        if outcome.superseded:
            if not self.live:
                self.console.print(f"  {_describe(outcome.repetition)}: disturbed ({outcome.disturbed}); "
                                   "running it again", markup=False)
            return
        self._done += 1
        if self._progress is not None:
            self._progress.advance(self._task)
            return
        what = (f"p50 {outcome.latency.p50_ns} ns" if outcome.ok and outcome.latency
                else f"{outcome.status}: {outcome.reason.splitlines()[0] if outcome.reason else ''}")
        flag = f" [disturbed: {outcome.disturbed}]" if outcome.disturbed else ""
        self.console.print(f"[{self._done}/{self._total}] {_describe(outcome.repetition)}: {what}{flag}",
                           markup=False, highlight=False)


class StepProgress(_Bar):
    """Progress of a job made of named steps (``publish.Progress``) on stderr: a live bar
    naming the last step on a terminal; a line at about every tenth of the steps otherwise
    (logs, CI)."""

    def begin(self, description: str, total: int) -> None:
        """Start a bar (or a log line) for ``total`` steps."""
        self._start(description, total, "steps")

    def step(self, what: str) -> None:
        """One more step done, ``what`` it was."""
        self._done += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1, current=what)
        elif self._done == self._total or self._done % max(1, self._total // 10) == 0:
            self.console.print(f"[{self._done}/{self._total}] {what}", markup=False)
