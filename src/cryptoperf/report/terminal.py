"""Terminal tables (Rich): the answer at a glance. Formatting only; no decisions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from cryptoperf import builds, cpumask, speedstats, stats
from cryptoperf.hostinfo import CheckResult
from cryptoperf.model import CellSummary, Delta, Outcome, Repetition
from cryptoperf.report.text import (
    change_text, comparison_text, configuration_text, fmt_count, fmt_date, fmt_mb_s, fmt_ns, fmt_pct, fmt_size,
    interval_header, operation, operation_text, short_library, side_name, verdict_header)
from cryptoperf.workloads import access

if TYPE_CHECKING:  # pragma: no cover
    from cryptoperf.compare import Undecided
    from cryptoperf.hello import Hello


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


def _with_interval(text: str, e: stats.Estimate | None) -> str:
    """``1.23 M ±1.2%``: a figure with the half-width of its 95 % interval relative to it (the
    larger side); the figure alone without an interval."""
    half = speedstats.relative_half_width_pct(e)
    if half is None:
        return text
    return f"{text} ±{half:.1f}%" if half >= 0.1 else f"{text} ±{half:.2f}%"


def speed_table(rows: Sequence[speedstats.SpeedRow], notes: Notes, title: str = "cryptoperf speed") -> Table:
    """One row per (backend, operation, size), as the run's analysis made them
    (``Analysis.speed.rows``): ops/s, MB/s (blank for operations without a message), latency p50 /
    p99 / p99.9, CPU ns/op, batch, repetitions measured; with 3 or more repetitions ops/s, p50
    and CPU/op carry ``±x%``, the half-width of their 95 % t interval (geometric means over
    repetitions; ``speed_interval_note`` says so under the table). Unsupported / invalid /
    failed rows say so in the last column, the reason as a footnote in ``notes``. Where a batch
    holds k > 1 operations the percentiles are those of k-operation batch means, and a
    footnote says so."""
    reps = max((len(r.outcomes) for r in rows), default=1)
    t = Table(title=title, title_justify="left")
    columns = [("backend", "left"), ("library", "left"), ("operation", "left"), ("size", "right"),
               ("ops/s", "right"), ("MB/s", "right"), ("p50", "right"), ("p99", "right"),
               ("p99.9", "right"), ("CPU/op\n(process)", "right"), ("batch", "right")]
    if reps > 1:
        columns.append(("reps", "right"))
    for name, justify in columns + [("note", "left")]:
        t.add_column(name, justify=justify, overflow="fold")
    batched_note = None
    for row in rows:
        r = row.result
        head: list = [Text(row.cell.backend), Text(short_library(r)), Text(operation_text(row.cell)),
                      fmt_size(row.size_bytes)]
        count = [f"{len(row.measured)}/{len(row.outcomes)}"] if reps > 1 else []
        if row.status != "ok" or row.ops_per_s is None or row.p50_ns is None:
            style = "dim" if row.status == "unsupported" else "red"
            t.add_row(*head, *([""] * 7), *count, notes.status(row.status, row.reason, style))
            continue
        note = Text(access.timing(r))
        batch = str(access.batch(r) or "")
        if (access.batch(r) or 1) > 1:
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
                  _with_interval(fmt_ns(row.process_cpu_ns_per_op.value), row.process_cpu_ns_per_op)
                  if row.process_cpu_ns_per_op is not None else "—",
                  batch, *count, note)
    return t


def speed_interval_note(repetitions: int) -> str:
    """The line under the speed table saying what its figures are: with 3 or more
    repetitions, geometric means with ``±`` the 95 % interval; with fewer, that there is none."""
    if repetitions >= speedstats.MIN_REPETITIONS:
        return (f"{repetitions} repetitions per row, each in a fresh worker process, in randomised "
                "blocks: ops/s, MB/s, p50, p99, p99.9 and process CPU/op are geometric means over them; ± is "
                "the half-width of the 95 % t interval (log scale, the larger side)")
    what = "1 repetition per row" if repetitions == 1 else f"{repetitions} repetitions per row (geometric means)"
    return (f"{what}: no intervals; --repetitions {speedstats.MIN_REPETITIONS} or more gives a 95 % "
            "interval for ops/s, p50 and process CPU/op")


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


def mask_warnings(outcomes: Iterable[Outcome]) -> list[str]:
    """One line per CPU mask that took nothing away on this machine (the CPU lacks the
    extensions it clears, so its cells measured the unmasked code): judged from the worker's
    ``cpu_mask_cleared`` of measured runs on maskable libraries."""
    cleared: dict[str, bool] = {}
    for o in outcomes:
        took = access.cpu_mask_cleared(o.result)
        cpu = o.cell.cpu
        if cpu == "baseline" or not o.ok or took is None:
            continue
        cleared[cpu] = cleared.get(cpu, False) or took
    return [f"note: CPU mask {m} took nothing away on this machine (the CPU lacks the extensions "
            "it clears): its cells measured the unmasked code" for m, any_ in cleared.items() if not any_]


def _verdict_style(kind: str) -> str:
    return {stats.SLOWER: "red", stats.FASTER: "green", stats.EQUIVALENT: "dim",
            stats.INCONCLUSIVE: "yellow"}.get(kind, "")


def _change_columns(deltas: Sequence[Delta]) -> list[tuple[str, str]]:
    """The change columns of a delta table, each labelled with its metric: p50 latency and
    throughput always, CPU time per operation and server CPU time per transaction when a verdict
    is decided on it."""
    cols = [("latency", "p50 latency Δ"), ("throughput", "throughput Δ")]
    for key, title in (("cpu_per_op", "process CPU/op Δ"), ("server_cpu_per_op", "server CPU/tx Δ")):
        if any(d.verdict is not None and stats.metric_key(d.verdict.metric) == key for d in deltas):
            cols.append((key, title))
    return cols


def delta_table(deltas: Iterable[Delta], baseline: str, notes: Notes, level: float = stats.DEFAULT_LEVEL) -> Table:
    """The "performance delta vs baseline" table: one row per (backend, operation, size,
    configuration; a contrast's names its reference, ``aes-256-xts vs aes-128-xts``); both p50s
    (medians over repetitions, as the title says: the changes are geometric means of paired ratios),
    then each metric's change with its interval (at ``level``, the
    study's adjusted level), each column naming its metric — p50 latency, throughput, and CPU
    time per operation when a verdict is decided on it — the one the verdict is decided on in
    bold; blocks; the verdict (it names what changed; the header names the metrics) and, when
    the configuration ran another library release than the baseline, both releases beside it.
    Rows without numbers say why in a footnote in ``notes``."""
    deltas = list(deltas)
    against = f"baseline ({baseline})"
    if any(d.baseline != baseline for d in deltas):
        against += " or, in a contrast's row, the configuration after 'vs'"
    t = Table(title=f"performance delta vs {against}: p50s are medians over repetitions, each change the "
              f"geometric mean of the paired ratios, with its {interval_header(level)}; "
              "bold: the one the verdict is decided on", title_justify="left")
    cols = _change_columns(deltas)
    for name, justify in (("backend", "left"), ("operation", "left"), ("configuration", "left"),
                          ("baseline p50", "right"), ("p50", "right"), *((c, "right") for _, c in cols),
                          ("blocks", "right"), (verdict_header(deltas), "left")):
        t.add_column(name, justify=justify, overflow="fold")
    for d in deltas:
        head = [Text(d.backends), Text(operation(d.label, d.size_bytes)),
                Text(comparison_text(d, baseline))]
        if d.status != "ok" or d.latency is None or d.throughput is None:
            t.add_row(*head, *([""] * (len(cols) + 3)), notes.status("n/a", d.reason))
            continue
        t.add_row(*head, fmt_ns(d.baseline_p50_ns), fmt_ns(d.p50_ns), *_delta_cells(d, cols, notes))
    return t


def _delta_cells(d: Delta, cols: Sequence[tuple[str, str]], notes: Notes) -> list:
    """The cells of a measured delta's row after the p50s: each column's change with its
    interval (the verdict's metric in bold), blocks, and the verdict (with the delta's note);
    the two library releases of a row that changed library are a footnote in ``notes``, shared
    by every row with the same pair, rather than repeated in each."""
    assert d.verdict
    decided = stats.metric_key(d.verdict.metric)
    intervals = {"latency": d.latency, "throughput": d.throughput, "cpu_per_op": d.cpu_per_op,
                 "server_cpu_per_op": d.server_cpu_per_op}
    changes = [Text(change_text(intervals[k]), style="bold" if k == decided else "") for k, _ in cols]
    verdict = Text(d.verdict.text, style=_verdict_style(d.verdict.kind))
    if d.library_change:
        verdict.append(f" [{notes.add(f'different library releases: {d.library_change}')}]", style="bold")
    if d.note:
        verdict.append(f" ({d.note})", style="dim")
    return [*changes, str(d.blocks), verdict]


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
        t.add_row(Text(c.backend), Text(operation(c.label, c.size_bytes)),
                  Text(configuration_text(c.configuration, c.cpu, c.build)), f"{s.ok}/{s.repetitions}",
                  cv_text(s.cv_p50, s.ok), cv_text(s.cv_ops_per_s, s.ok),
                  fmt_pct(s.steal_pct, signed=False), str(s.disturbed) if s.disturbed else "",
                  str(s.batch) if s.batch else "", status)
    return t


def backends_table(hello: "Hello") -> Table:
    """Backends with library versions, FIPS state and whether a CPU mask (``--cpu``, study key
    ``cpu``) can be applied to them."""
    build = hello.raw.get("build") or "default"
    binary = builds.get(build).binary if build in builds.BUILDS else "cryptoperf-worker"
    t = Table(title=f"{binary} {hello.worker_version} (build {build}, protocol {hello.protocol})",
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
                  fips_text(b), mask)
    return t


def fips_text(backend: Mapping) -> str:
    """A hello backend's FIPS state: ``yes``/``no``, and for a backend whose FIPS 140-3 module
    is reported apart (``fips140``: the Go worker's) the module's version and whether it is
    enforced: ``yes (module v1.0.0, enforced)``, ``no (module latest)``."""
    state = "yes" if backend.get("fips") else "no"
    module = backend.get("fips140")
    if not isinstance(module, Mapping):
        return state
    return f"{state} (module {module.get('module_version', '?')}{', enforced' if module.get('enforced') else ''})"


def support_table(hello: "Hello", notes: Notes) -> Table | None:
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


# --------------------------------------------------------------------------- stored runs: list, compare, plan

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
    cell — the configuration with its CPU mask and build, p50 in each run, each metric's change
    with its interval (at ``level``; columns as ``delta_table``'s), repetitions per side,
    verdict (B against A) and noise (the larger CV across repetitions; over ``threshold_pct`` in
    yellow). Rows without an interval give the reason in ``notes`` (and the two p50s with their
    point change when both runs measured the cell). A side is a run id or a machine's name
    (``side_name``)."""
    deltas = list(deltas)
    a, b = side_name(run_a), side_name(run_b)
    t = Table(title=f"{b} vs {a} (baseline): p50s are medians over repetitions, each change the geometric mean "
              f"of the ratios it compares, with its {interval_header(level)}; bold: the one the verdict is decided on",
              title_justify="left")
    cols = _change_columns(deltas)
    for name, justify in (("backend", "left"), ("operation", "left"), ("configuration", "left"),
                          (f"p50 {a}", "right"), (f"p50 {b}", "right"), *((c, "right") for _, c in cols),
                          ("reps", "right"), (verdict_header(deltas), "left"), ("noise", "right")):
        t.add_column(name, justify=justify, overflow="fold")
    for d in deltas:
        op = operation(d.label, d.size_bytes)
        if d.op and d.baseline_op and d.op != d.baseline_op:
            op += f" [{notes.add(f'{d.label}: {d.baseline_op} in {a}, {d.op} in {b}')}]"
        conf = configuration_text(d.configuration, d.cpu, d.build) if d.configuration else configuration_text(
            "—", d.cpu, d.build)
        head = [Text(d.backends), Text(op), Text(conf)]
        if d.status != "ok" or d.latency is None or d.throughput is None:
            point = (fmt_pct((d.p50_ns / d.baseline_p50_ns - 1) * 100)
                     if d.p50_ns and d.baseline_p50_ns else "")
            t.add_row(*head, fmt_ns(d.baseline_p50_ns) if point else "", fmt_ns(d.p50_ns) if point else "",
                      point, *([""] * len(cols)), notes.status("n/a", d.reason), "")
            continue
        noise_pct = (d.noise or 0.0) * 100
        t.add_row(*head, fmt_ns(d.baseline_p50_ns), fmt_ns(d.p50_ns), *_delta_cells(d, cols, notes),
                  Text(f"CV {noise_pct:.1f} %", style="yellow" if noise_pct > threshold_pct else ""))
    return t




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


def print_gate(out: Console, fail_on: tuple[str, ...], failing: list[tuple[str, object]],
                open_: Sequence[tuple[str, "Undecided"]] = ()) -> None:
    """The regression gate's line (``compare``, ``study`` and ``gate`` with --fail-on): (machine name or '', delta) that
    fail it; when it passes with comparisons it could not decide (``open_``: machine name,
    ``compare.Undecided``), each with the largest slowdown its interval leaves possible."""
    if not fail_on:
        return
    what = f"regression gate (--fail-on {' '.join(fail_on)})"
    if failing:
        out.print(f"{what}: FAILED by {len(failing)} cell(s): "
                  + ", ".join(f"{where + ': ' if where else ''}{d.backend} {d.label} {d.configuration or ''}".strip()
                              for where, d in failing), markup=False, soft_wrap=True)
        return
    if not open_:
        out.print(f"{what}: passed", markup=False)
        return
    shown = "; ".join(f"{where + ': ' if where else ''}{u.delta.backend} {u.delta.label} "
                      f"{u.delta.configuration or ''}".strip()
                      + (f" — {u.worst} is not ruled out" if u.worst and u.worst != "no slowdown" else
                         " — no interval" if not u.worst else "")
                      for where, u in open_)
    out.print(f"{what}: passed, but {len(open_)} comparison{'s' if len(open_) != 1 else ''} undecided: {shown}; "
              "more runs or blocks would decide, or --fail-on undecided fails on them", markup=False, soft_wrap=True)
