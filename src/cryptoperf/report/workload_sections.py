"""Report sections for workloads (a TLS handshake, a transfer, an IKE phase 1 at load levels),
registered in ``sections`` like the core ones. Each builder returns nothing for a run without
workload cells (``Cell.is_workload``).

22  throughput vs load       — per (backend, operation, mode): transactions/s against the load
                               level, one line per configuration with its 95 % interval across
                               repetitions, closed and open levels in separate panels; a table
                               per level with latency, CPU per transaction, late transactions
                               and the level's verdict
24  latency objective        — where an operation has ``p99_bound_ms``: per configuration, the
                               highest open rate whose p99 stays under it, and the first above
33  latency per level        — p50, p90, p99, p99.9 against the load level (log y), and whether
                               each level's latency is corrected for coordinated omission
43  CPU over time            — per level, one representative repetition per configuration:
                               client and server CPU % and steal % over the cell's lifetime

Every figure comes from the worker's results (docs/worker-protocol.md, "Workloads") through
``stats`` and the run's analysis; nothing here adds a statistic. A workload cell's label is its
operation's label and its level (``full handshake @ c=10``, ``workload.row_label``), so each
level is its own group and has its own verdict in ``run.deltas``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from markupsafe import Markup

from cryptoperf import stats
from cryptoperf.model import CellSummary, Outcome
from cryptoperf.report import plots, view
from cryptoperf.report.render import environment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.report.format import configuration_text, fmt_count, fmt_ns, fmt_size
from cryptoperf.stored import StoredRun
from cryptoperf.workload import Load, parse_load
from cryptoperf.workloads import generic

#: Confidence level of the throughput band (across repetitions, not adjusted for multiplicity:
#: it describes one point, it decides nothing).
BAND_LEVEL = stats.DEFAULT_LEVEL
#: Panels of the load plots, in order: (kind, x axis label, title).
PANELS = (("closed", "closed loop: client connections", "closed loop"),
          ("paced", "paced closed loop: target rate (transactions/s)", "paced closed loop"),
          ("open", "open loop: offered rate (transactions/s)", "open loop"),
          ("targets", "job: targets", "job"))
#: Line styles of the latency percentiles: (label, Latency attribute, matplotlib style).
PERCENTILE_STYLES = (("p50", "p50_ns", "-"), ("p90", "p90_ns", "--"), ("p99", "p99_ns", "-."),
                     ("p99.9", "p999_ns", ":"))
#: Modes of a workload without ``mode`` in its params or result.
DEFAULT_MODE = {"ike-phase1": "memory"}


# ------------------------------------------------------------------------------------ model

@dataclass(frozen=True)
class Point:
    """One workload cell (a configuration at one load level) with what the sections show.

    Attributes:
        summary: the cell's summary; load: its parsed level.
        series: the configuration name (``view.series_name``); colour: its report colour.
        outcomes: its measured repetitions (``view.measured``), in block order.
    """

    summary: CellSummary
    load: Load
    series: str
    colour: str
    outcomes: tuple[Outcome, ...]

    @property
    def panel(self) -> str:
        """``closed`` (unpaced closed loop), ``paced`` (closed loop paced to a rate), ``open``, or
        ``targets`` (a job)."""
        if self.load.kind in ("open", "targets"):
            return self.load.kind
        return "paced" if self.load.rate_per_s is not None else "closed"

    @property
    def x(self) -> float:
        """The x of this level on a load plot: connections (closed), targets (a job), else the
        rate per s."""
        if self.panel == "targets":
            return float(self.load.targets or 0)
        return float(self.load.connections) if self.panel == "closed" else float(self.load.rate_per_s or 0.0)

    @property
    def configuration(self) -> str:
        """The configuration with its CPU mask and build when not the defaults."""
        c = self.summary.cell
        return configuration_text(c.configuration, c.cpu, c.build) if c.configuration else self.series


@dataclass(frozen=True)
class Family:
    """The load levels of one workload operation on one backend in one mode: what one
    throughput-vs-load plot shows.

    Attributes:
        backend, label (the operation's label without the level), size_bytes, mode.
        points: every level × configuration, ordered by panel, level, then series order.
    """

    backend: str
    label: str
    size_bytes: int | None
    mode: str
    points: tuple[Point, ...]

    @property
    def title(self) -> str:
        """``full handshake on aws-lc (socket)``, with the size for a transfer."""
        head = f"{self.label} {fmt_size(self.size_bytes)}".strip()
        return f"{head} on {self.backend} ({self.mode} mode)"

    @property
    def slug(self) -> str:
        """An HTML-id-safe key, unique per family."""
        size = "-" if self.size_bytes is None else str(self.size_bytes)
        return re.sub(r"[^A-Za-z0-9_-]+", "_", f"{self.backend}-{self.label}-{size}-{self.mode}")

    def panels(self) -> list[tuple[str, str, str]]:
        """The PANELS that have points, in order."""
        kinds = {p.panel for p in self.points}
        return [p for p in PANELS if p[0] in kinds]

    def series(self) -> list[tuple[str, str]]:
        """(series name, colour) of every configuration with a point, in series order."""
        seen: dict[str, str] = {}
        for p in self.points:
            seen.setdefault(p.series, p.colour)
        return list(seen.items())


def operation_label(cell_label: str, load: str) -> str:
    """The operation's label of a workload cell: its label without `` @ <level>``."""
    suffix = f" @ {parse_load(load).label}"
    return cell_label[:-len(suffix)] if cell_label.endswith(suffix) else cell_label


def _mode(s: CellSummary, outcomes: Sequence[Outcome]) -> str:
    for o in outcomes:
        if o.result and o.result.get("mode"):
            return str(o.result["mode"])
    return str(s.cell.params.get("mode") or DEFAULT_MODE.get(s.cell.op, "socket"))


#: Workloads with report sections of their own (report/storage_sections.py), left out of
#: "Throughput vs load" and the latency objective, whose connection and server columns do not
#: apply to them.
OWN_SECTIONS = ("storage",)
#: Jobs (``targets:N`` levels: report/fleet_sections.py), left out of every section here unless
#: asked for by name (``families(ops=...)``): a job's figures are its own (targets per minute,
#: phases, processes).
JOBS = ("fleet-job",)


def families(run: StoredRun, ops: Sequence[str] | None = None, exclude: Sequence[str] = ()) -> list[Family]:
    """The run's workload cells arranged by (backend, operation label, size, mode), in
    first-seen order; empty for a run without workloads. ``ops``: only cells of these
    workloads; ``exclude``: none of these; jobs (``JOBS``) only when named in ``ops``.
    Unparsable load levels are skipped."""
    order = {name: i for i, name in enumerate(view.series_order(run))}
    keyed: dict[tuple, list[Point]] = {}
    for s in run.summaries.values():
        c = s.cell
        if not c.is_workload or (ops is not None and c.op not in ops) or c.op in exclude:
            continue
        if c.op in JOBS and (ops is None or c.op not in ops):
            continue
        try:
            load = parse_load(str(c.load))
        except ValueError:
            continue
        outs = view.outcomes_of(run, s)
        series = view.series_name(run, s)
        point = Point(s, load, series, view.colour_of(run, series), tuple(view.measured(outs)))
        key = (c.backend, operation_label(c.label, str(c.load)), c.size_bytes, _mode(s, outs))
        keyed.setdefault(key, []).append(point)
    panel_order = {p[0]: i for i, p in enumerate(PANELS)}
    return [Family(b, label, size, mode,
                   tuple(sorted(pts, key=lambda p: (panel_order[p.panel], p.x, order.get(p.series, len(order))))))
            for (b, label, size, mode), pts in keyed.items()]


def has_workloads(run: StoredRun) -> bool:
    """True when the run has at least one workload cell."""
    return any(s.cell.is_workload for s in run.summaries.values())


# ---------------------------------------------------------------------------- figures per cell

def throughput_estimate(point: Point) -> stats.Estimate | None:
    """Transactions/s of a cell: the geometric mean over its measured repetitions with the
    ``BAND_LEVEL`` t interval of the mean of their logs (``stats.log_mean``; no bounds with fewer
    than ``stats.MIN_BLOCKS`` repetitions), or None when none was measured."""
    values = [o.throughput.ops_per_s for o in point.outcomes if o.throughput and o.throughput.ops_per_s > 0]
    if not values:
        return None
    return stats.log_mean(values, BAND_LEVEL, min_n=stats.MIN_BLOCKS)


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if values else None


def client_cpu_ns_per_tx(point: Point) -> float | None:
    """The client side's CPU ns per transaction of a level (``generic.client_cpu_ns_per_tx``
    over its measured repetitions)."""
    return generic.client_cpu_ns_per_tx(o.result for o in point.outcomes)


def server_cpu_ns_per_tx(point: Point) -> float | None:
    """The server side's CPU ns per transaction of a level, ``server.cpu_ns /
    server.transactions`` (``generic.server_cpu_ns_per_tx``)."""
    return generic.server_cpu_ns_per_tx(o.result for o in point.outcomes)


def late_text(point: Point) -> str:
    """Open levels: late transactions (started more than 1 ms after they were due) summed over
    the measured repetitions, with their share of the transactions: ``12 (0.4 %)``; '' for a
    closed level, '—' when the results carry no count."""
    if point.load.kind != "open":
        return ""
    late = [(o.result.get("late"), o.result.get("ops") or 0) for o in point.outcomes if o.result]
    late = [(n, ops) for n, ops in late if n is not None]
    if not late:
        return "—"
    n, ops = sum(x for x, _ in late), sum(ops for _, ops in late)
    return f"{n:,} ({100.0 * n / ops:.1f} %)" if ops else f"{n:,}"


def verdict_text(run: StoredRun, point: Point) -> str:
    """The level's verdict against the baseline as the analysis made it (``Verdict.text``),
    ``baseline`` for the baseline itself, ``n/a: <why>`` without one."""
    s = point.summary
    if run.study is not None and s.cell.configuration == run.study.baseline:
        return "baseline"
    d = view.delta_for(run, s)
    if d is None:
        return "n/a: no baseline to compare with"
    if d.status != "ok" or d.verdict is None:
        return f"n/a: {d.reason}" if d.reason else "n/a"
    return d.verdict.text


def verdict_kind(run: StoredRun, point: Point) -> str:
    """The level's verdict kind for CSS: ``baseline``, the verdict's kind (``slower``,
    ``faster``, ``equivalent``, ``inconclusive``), or ``na`` without one."""
    s = point.summary
    if run.study is not None and s.cell.configuration == run.study.baseline:
        return "baseline"
    d = view.delta_for(run, s)
    return d.verdict.kind if d is not None and d.verdict is not None and d.status == "ok" else "na"


def merged_latency(point: Point) -> stats.Latency | None:
    """Percentiles (ns) of the cell's measured repetitions' histograms merged (as the latency
    section's CDF), or None without any."""
    hists = [o.result["histogram"] for o in point.outcomes if o.result and o.result.get("histogram")]
    if not hists:
        return None
    try:
        return stats.latency_of(stats.merge_histograms(hists))
    except ValueError:
        return None


def corrected(point: Point) -> bool:
    """True when the level's latency is measured from each transaction's due time (open loads;
    the results' ``load.corrected`` when present)."""
    for o in point.outcomes:
        load = (o.result or {}).get("load") or {}
        if "corrected" in load:
            return bool(load["corrected"])
    return point.load.kind == "open"


def correction_text(point: Point) -> str:
    """What a level's latency is timed from, in words: corrected for coordinated omission
    (open: from when each transaction was due) or not (closed: from its actual start)."""
    if corrected(point):
        return "from when each transaction was due: corrected for coordinated omission"
    return ("from each transaction's actual start: not corrected for coordinated omission "
            "(a stall shows in fewer transactions than it delayed)")


def representative(point: Point) -> Outcome | None:
    """The repetition whose CPU timeline is shown: the last measured block's (its latest
    attempt)."""
    return max(point.outcomes, key=lambda o: (o.repetition.block, o.repetition.attempt), default=None)


def timeline_series(samples: Sequence[dict[str, Any]] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t_s, cpu_pct, steal_pct) of a worker timeline (``client_timeline`` or
    ``server.timeline``): time in s since the cell started, user + system CPU in % of one CPU,
    steal in % of the host's CPUs; shape (k,) each, empty without samples."""
    rows = [s for s in samples or () if isinstance(s, dict) and s.get("t_ms") is not None]
    t = np.asarray([float(s["t_ms"]) / 1000.0 for s in rows])
    cpu = np.asarray([float(s.get("user_pct") or 0.0) + float(s.get("system_pct") or 0.0) for s in rows])
    steal = np.asarray([float(s.get("steal_pct") or 0.0) for s in rows])
    return t, cpu, steal


def _num(x: float) -> str:
    """3 significant digits below 1000, whole numbers with thousands separators from 1000 on."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def _ms(ns: float | None) -> str:
    return "—" if ns is None else _num(ns / 1e6)


def _us(ns: float | None) -> str:
    return "—" if ns is None else _num(ns / 1e3)


def bytes_per_tx(point: Point) -> int:
    """Bytes each transaction carries (``tls-bulk``'s ``size_bytes``; 0 for handshakes)."""
    return next((int((o.result or {}).get("bytes_per_op") or 0) for o in point.outcomes), 0)


def _cpu(ns: float | None, nbytes: int) -> str:
    """CPU per transaction in µs, and per byte in ns where a transaction carries bytes
    (``212 µs · 0.21 ns/B``): what a transfer's sender and receiver each spend per byte."""
    if ns is None or not nbytes:
        return _us(ns)
    return f"{_us(ns)} · {ns / nbytes:.3g} ns/B"


def _mb_s(e: stats.Estimate | None, nbytes: int) -> str:
    """`` · 4592 MB/s`` (10⁶ bytes/s at the estimate's transactions/s) for a transfer; ''."""
    if e is None or not nbytes:
        return ""
    return f" · {e.value * nbytes / 1e6:.4g} MB/s"


def _tps(e: stats.Estimate | None) -> str:
    """``412 [398, 427]`` (transactions/s with the band), ``412`` without bounds, '—'."""
    if e is None:
        return "—"
    if e.low is None or e.high is None:
        return fmt_count(e.value)
    return f"{fmt_count(e.value)} [{fmt_count(e.low)}, {fmt_count(e.high)}]"


def _render(template: str, **context: Any) -> str:
    """Render a template given as text with the report's environment (autoescaping, filters)."""
    return environment().from_string(template).render(**context)


def _gid(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def _log_x(ax, xs: Sequence[float]) -> None:
    """A log x axis when the levels span 10× or more, with the levels as ticks."""
    xs = sorted({x for x in xs if x > 0})
    if xs and xs[-1] / xs[0] >= 10:
        ax.set_xscale("log")
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    if xs:
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())


# ------------------------------------------------------------------------ throughput vs load

def throughput_svg(family: Family, plot_id: str) -> str:
    """Transactions/s against load level for one family, as ``<svg class="plot
    throughput-load">``: one panel per kind of level (closed: x = connections; paced and open:
    x = rate per s; log x when the levels span ≥ 10×), one line per configuration through the
    geometric means of its repetitions, shaded with their 95 % interval
    (``throughput_estimate``). Each line's SVG group has the id
    ``<plot_id>-series-<configuration>-<panel>``. Returns the SVG text."""
    panels = family.panels()
    fig = plots._figure(3.6 * len(panels) + 0.6, 3.8)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (kind, xlabel, title) in zip(axes, panels):
        pts = [p for p in family.points if p.panel == kind]
        for series, colour in family.series():
            mine = [(p.x, throughput_estimate(p)) for p in pts if p.series == series]
            mine = [(x, e) for x, e in mine if e is not None]
            if not mine:
                continue
            xs = np.asarray([x for x, _ in mine])
            ys = np.asarray([e.value for _, e in mine])
            line, = ax.plot(xs, ys, marker="o", markersize=4, color=colour, linewidth=1.6, label=series)
            line.set_gid(f"series-{_gid(series)}-{kind}")
            banded = [(x, e) for x, e in mine if e.low is not None and e.high is not None]
            if banded:
                band = ax.fill_between([x for x, _ in banded], [e.low for _, e in banded],
                                       [e.high for _, e in banded], color=colour, alpha=0.18, linewidth=0)
                band.set_gid(f"band-{_gid(series)}-{kind}")
        if kind in ("paced", "open"):
            xs_all = sorted({p.x for p in pts})
            ax.plot(xs_all, xs_all, color="#999999", linewidth=0.8, linestyle=":", label="offered")
        _log_x(ax, [p.x for p in pts])
        ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel, fontsize=8.5)
        ax.set_title(title, fontsize=9, loc="left")
        ax.grid(True, color="#e5e5e5", linewidth=0.6)
        ax.yaxis.set_major_formatter(_count_formatter())
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel("transactions per second", fontsize=8.5)
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7.5, frameon=False)
    title = f"throughput vs load: {family.title}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.subplots_adjust(left=0.12 if len(panels) == 1 else 0.08, right=0.98, top=0.84, bottom=0.27, wspace=0.25)
    return plots._svg(fig, plot_id, "throughput-load", title)


def _plain_formatter(minor: bool = False):
    """Tick labels of a log axis as plain numbers (``2``, ``5``, ``10``); minor ticks only at
    2 and 5 × a power of ten."""
    from matplotlib.ticker import FuncFormatter

    def fmt(v: float, _p: Any) -> str:
        if v <= 0:
            return ""
        lead = v / 10 ** math.floor(math.log10(v) + 1e-9)
        if minor and round(lead, 6) not in (2.0, 5.0):
            return ""
        return f"{v:g}"
    return FuncFormatter(fmt)


def _count_formatter():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _p: fmt_count(v) if v else "0")


def level_rows(run: StoredRun, family: Family) -> list[dict[str, Any]]:
    """One row per level × configuration of a family (display strings): ``level`` (the load's
    text and label), ``configuration``, ``tps`` (transactions/s [95 % CI]), ``p50``/``p99``
    (ms, medians over repetitions), ``client_cpu``/``server_cpu`` (µs per transaction; for a
    transfer also ns per byte, and MB/s beside the transactions/s),
    ``late`` (open levels), ``verdict``, ``kind`` (the verdict kind or baseline/na, for CSS),
    ``status`` and ``reason`` (a cell not measured), ``reps`` (measured/analysed) and
    ``measured`` (any repetition measured)."""
    rows = []
    for p in family.points:
        s = p.summary
        v = verdict_text(run, p)
        kind = verdict_kind(run, p)
        rows.append({"level": f"{p.load.label} ({p.load.text})", "configuration": p.configuration,
                     "tps": _tps(throughput_estimate(p)) + _mb_s(throughput_estimate(p), bytes_per_tx(p)),
                     "p50": _ms(s.p50_ns), "p99": _ms(s.p99_ns),
                     "client_cpu": _cpu(client_cpu_ns_per_tx(p), bytes_per_tx(p)),
                     "server_cpu": _cpu(server_cpu_ns_per_tx(p), bytes_per_tx(p)),
                     "late": late_text(p), "verdict": v, "kind": kind, "status": s.status,
                     "reason": s.reason, "reps": f"{len(p.outcomes)}/{s.repetitions}",
                     "measured": bool(p.outcomes)})
    return rows


def _server_header(family: Family) -> str:
    if family.mode == "memory":
        return "server side's share of CPU µs / transaction"
    return "server CPU µs / transaction"


_THROUGHPUT_HTML = """\
{% from "sections/macros.html.j2" import not_measured_row %}
<p>Transactions per second against the load level: the line goes through each configuration's
geometric mean over its measured repetitions, the shaded band is the {{ level }} % t interval of
that mean (on the log scale, across repetitions; none with fewer than {{ min_n }}). A closed
level is a number of client connections, each starting its next transaction when its last one
ended; an open level is an offered rate (the dotted line: every offered transaction served).
CPU per transaction is CPU time over the window divided by its transactions{% if memory %};
in memory mode both sides run in one thread and "server" is the server side's share{% endif %}.
The verdict is the level's comparison with the baseline {{ baseline }} (see the summary).</p>
{% for f in figures %}
<figure class="plot" data-plot="throughput-load" data-group="{{ f.slug }}">
{{ f.svg }}
  <figcaption>
    <table class="workload-levels" id="levels-{{ f.slug }}">
      <thead><tr><th>Level</th><th>Configuration</th><th class="num">Transactions/s<div class="sub">{{ level }} % CI</div></th>
        <th class="num">p50 ms</th><th class="num">p99 ms</th><th class="num">client CPU µs / transaction</th>
        <th class="num">{{ f.server_header }}</th><th class="num">late (open)</th><th class="num">reps</th><th>Verdict</th></tr></thead>
      <tbody>
{% for r in f.rows %}
{% if r.measured %}
        <tr class="verdict-{{ r.kind }}"><td>{{ r.level }}</td><td>{{ r.configuration }}</td><td class="num">{{ r.tps }}</td>
          <td class="num">{{ r.p50 }}</td><td class="num">{{ r.p99 }}</td><td class="num">{{ r.client_cpu }}</td>
          <td class="num">{{ r.server_cpu }}</td><td class="num">{{ r.late }}</td><td class="num">{{ r.reps }}</td>
          <td class="verdict">{{ r.verdict }}</td></tr>
{% else %}
{{ not_measured_row(r, 8) }}
{% endif %}
{% endfor %}
      </tbody>
    </table>
  </figcaption>
</figure>
{% endfor %}
"""


@register(order=22)
def throughput_vs_load(run: StoredRun) -> list[Section]:
    """"Throughput vs load": per family (backend, operation, size, mode) a plot of
    transactions/s against the load level (``throughput_svg``) and a table of every level ×
    configuration (``level_rows``). Markdown: the tables. Nothing without workload cells."""
    fams = families(run, exclude=OWN_SECTIONS)
    if not fams:
        return []
    baseline = run.study.baseline if run.study else ""
    tables = [(f, level_rows(run, f)) for f in fams]

    def html() -> str:
        figures = [{"slug": f.slug, "svg": Markup(throughput_svg(f, f"throughput-load-{f.slug}")),
                    "rows": rows, "server_header": _server_header(f)} for f, rows in tables]
        return _render(_THROUGHPUT_HTML, figures=figures, level=f"{BAND_LEVEL * 100:g}",
                       min_n=stats.MIN_BLOCKS, baseline=baseline,
                       memory=any(f.mode == "memory" for f in fams))

    md = (f"Transactions/s: geometric mean over the measured repetitions with its "
          f"{BAND_LEVEL * 100:g} % t interval (log scale, across repetitions). p50/p99: medians over "
          f"repetitions. CPU per transaction: CPU time over the window ÷ transactions. Verdict: the "
          f"level against the baseline {baseline}.\n")
    for f, rows in tables:
        md += f"\n**{f.title}**\n\n" + md_table(
            ["Level", "Configuration", f"Transactions/s ({BAND_LEVEL * 100:g} % CI)", "p50 ms", "p99 ms",
             "client CPU µs/tx", _server_header(f).replace(" / transaction", "/tx"), "late", "Verdict"],
            [[r["level"], r["configuration"], r["tps"] if r["measured"]
              else f"not measured: {r['status']}", r["p50"], r["p99"], r["client_cpu"], r["server_cpu"],
              r["late"], r["verdict"]] for r in rows],
            align="llrrrrrrl")
    return [Section("throughput-load", "Throughput vs load", html, md)]


# ------------------------------------------------------------------------- latency objective

@dataclass(frozen=True)
class Objective:
    """One configuration's answer to a p99 bound over its open levels.

    Attributes:
        family: its family; series: the configuration; bound_ms: the bound.
        met: the highest rate (per s) met below the first miss, with its p99 (ns), or None.
        missed: the first rate whose p99 is over the bound, with its p99, or None.
        rates: every open rate measured, ascending.
    """

    family: Family
    series: str
    bound_ms: float
    met: tuple[float, float] | None
    missed: tuple[float, float] | None
    rates: tuple[float, ...]

    @property
    def text(self) -> str:
        """The answer in one sentence, naming rates and their p99."""
        def at(r: tuple[float, float]) -> str:
            return f"{r[0]:g}/s (p99 {fmt_ns(r[1])})"
        if self.missed is None and self.met is not None:
            return f"every measured rate met it, up to {at(self.met)} — measure higher rates"
        if self.met is None and self.missed is not None:
            return f"no measured rate met it: the lowest, {at(self.missed)}, is over"
        if self.met is None:
            return "no open level was measured"
        return f"{at(self.met)} met it; {at(self.missed)} did not"  # type: ignore[arg-type]


def _bound_of(run: StoredRun, label: str) -> float | None:
    if run.study is None:
        return None
    for o in run.study.operations:
        if o.label == label and getattr(o, "p99_bound_ms", None):
            return float(o.p99_bound_ms)
    return None


def objectives(run: StoredRun) -> list[Objective]:
    """Per family whose operation has ``p99_bound_ms`` and per configuration: scanning its open
    rates upwards, the highest whose p99 (median across measured repetitions, the summary's
    ``p99_ns``) is at or under the bound before the first that is over, and that first one."""
    out = []
    for f in families(run):
        bound = _bound_of(run, f.label)
        if bound is None:
            continue
        for series, _ in f.series():
            pts = sorted((p for p in f.points if p.series == series and p.panel == "open"
                          and p.summary.p99_ns is not None), key=lambda p: p.x)
            met = missed = None
            for p in pts:
                if p.summary.p99_ns <= bound * 1e6:  # type: ignore[operator]
                    met = (p.x, float(p.summary.p99_ns))  # type: ignore[arg-type]
                else:
                    missed = (p.x, float(p.summary.p99_ns))  # type: ignore[arg-type]
                    break
            out.append(Objective(f, series, bound, met, missed, tuple(p.x for p in pts)))
    return out


_OBJECTIVE_HTML = """\
<p>For each operation with a latency objective (<code>p99_bound_ms</code>): the highest open-loop
rate at which each configuration's p99 latency (median across repetitions, corrected for
coordinated omission) stays at or under the bound, and the first measured rate at which it does
not. The objective lies between them; measure rates in between to narrow it.</p>
{% for g in groups %}
<h3>{{ g.title }}: p99 ≤ {{ g.bound }} ms</h3>
<ul class="objective" id="objective-{{ g.slug }}">
{% for o in g.entries %}
  <li><strong>{{ o.series }}</strong>: {{ o.text }}</li>
{% endfor %}
</ul>
{% endfor %}
"""


@register(order=24)
def latency_objective(run: StoredRun) -> list[Section]:
    """"Latency objective": per operation with ``p99_bound_ms``, per configuration, the
    highest open rate whose p99 stays under the bound and the first that does not
    (``objectives``). Nothing without such an operation."""
    objs = objectives(run)
    if not objs:
        return []
    groups: dict[str, dict[str, Any]] = {}
    for o in objs:
        g = groups.setdefault(o.family.slug, {"title": o.family.title, "slug": o.family.slug,
                                              "bound": f"{o.bound_ms:g}", "entries": []})
        g["entries"].append({"series": o.series, "text": o.text})
    html = _render(_OBJECTIVE_HTML, groups=list(groups.values()))
    md = ("Highest open-loop rate whose p99 (median across repetitions) stays under the bound, "
          "and the first that does not.\n")
    for g in groups.values():
        md += f"\n**{g['title']}**, p99 ≤ {g['bound']} ms:\n\n" + "".join(
            f"- {i['series']}: {i['text']}\n" for i in g["entries"])
    return [Section("latency-objective", "Latency objective", html, md)]


# ------------------------------------------------------------------------- latency per level

def percentiles_svg(family: Family, plot_id: str) -> str:
    """p50, p90, p99 and p99.9 latency (merged histograms of the measured repetitions,
    ``merged_latency``) against the load level for one family, as ``<svg class="plot
    latency-load">``: a panel per kind of level, log y; colour = configuration, line style =
    percentile (p50 solid, p90 dashed, p99 dash-dot, p99.9 dotted). Line groups have ids
    ``<plot_id>-pct-<configuration>-<percentile>-<panel>``. Returns the SVG text."""
    from matplotlib.lines import Line2D
    panels = family.panels()
    fig = plots._figure(3.6 * len(panels) + 0.6, 4.0)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    lat = {id(p): merged_latency(p) for p in family.points}
    for ax, (kind, xlabel, title) in zip(axes, panels):
        pts = [p for p in family.points if p.panel == kind]
        for series, colour in family.series():
            mine = [(p.x, lat[id(p)]) for p in pts if p.series == series and lat[id(p)] is not None]
            if not mine:
                continue
            for name, attr, style in PERCENTILE_STYLES:
                line, = ax.plot([x for x, _ in mine], [getattr(l, attr) / 1e6 for _, l in mine], linestyle=style,
                                marker="o", markersize=3, color=colour, linewidth=1.3)
                line.set_gid(f"pct-{_gid(series)}-{name.replace('.', '')}-{kind}")
        _log_x(ax, [p.x for p in pts])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_plain_formatter())
        ax.yaxis.set_minor_formatter(_plain_formatter(minor=True))
        ax.set_xlabel(xlabel, fontsize=8.5)
        corr = "corrected for coordinated omission" if kind == "open" else "not corrected for coordinated omission"
        ax.set_title(f"{title} ({corr})", fontsize=8, loc="left")
        ax.grid(True, which="both", color="#eeeeee", linewidth=0.6)
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel("latency per transaction, ms (log scale)", fontsize=8.5)
    handles = [Line2D([], [], color=c, linewidth=2, label=s) for s, c in family.series()]
    handles += [Line2D([], [], color="#444444", linestyle=st, linewidth=1.3, label=n) for n, _, st in PERCENTILE_STYLES]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7.5, frameon=False)
    title = f"latency percentiles vs load: {family.title}"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.subplots_adjust(left=0.12 if len(panels) == 1 else 0.08, right=0.98, top=0.84, bottom=0.26, wspace=0.25)
    return plots._svg(fig, plot_id, "latency-load", title)


def percentile_rows(family: Family) -> list[dict[str, Any]]:
    """One row per level × configuration: ``level``, ``configuration``, ``p50``/``p90``/
    ``p99``/``p999`` (ns, from the merged histograms; None when not measured), ``count``
    (transactions recorded) and ``correction`` (``correction_text``)."""
    rows = []
    for p in family.points:
        l = merged_latency(p)
        rows.append({"level": f"{p.load.label} ({p.load.text})", "configuration": p.configuration,
                     "p50": l.p50_ns if l else None, "p90": l.p90_ns if l else None,
                     "p99": l.p99_ns if l else None, "p999": l.p999_ns if l else None,
                     "count": l.count if l else None, "corrected": corrected(p),
                     "correction": correction_text(p)})
    return rows


_PERCENTILES_HTML = """\
<p>Latency percentiles of each level, every measured repetition's histogram merged (as in the
latency distribution above), against the load level; colour is the configuration, line style the
percentile. <strong>Open</strong> levels are corrected for coordinated omission: each
transaction's latency runs from when it was due, so time spent queued behind busy client threads
counts, as a user arriving at that moment would see it. <strong>Closed</strong> levels are not:
each connection waits for its last transaction before starting the next, and latency runs from
that start, so a stall delays later transactions without showing in their latency, and the tail
is understated.</p>
{% for f in figures %}
<figure class="plot" data-plot="latency-load" data-group="{{ f.slug }}">
{{ f.svg }}
  <figcaption>
    <table class="percentiles">
      <thead><tr><th>Level</th><th>Configuration</th><th class="num">transactions recorded</th><th class="num">p50</th>
        <th class="num">p90</th><th class="num">p99</th><th class="num">p99.9</th><th>Latency measured</th></tr></thead>
      <tbody>
{% for r in f.rows %}
        <tr><td>{{ r.level }}</td><td>{{ r.configuration }}</td><td class="num">{{ r["count"] | rate }}</td>
          <td class="num">{{ r.p50 | ns }}</td><td class="num">{{ r.p90 | ns }}</td><td class="num">{{ r.p99 | ns }}</td>
          <td class="num">{{ r.p999 | ns }}</td><td class="sub">{{ r.correction }}</td></tr>
{% endfor %}
      </tbody>
    </table>
  </figcaption>
</figure>
{% endfor %}
"""


@register(order=33)
def latency_per_level(run: StoredRun) -> list[Section]:
    """"Latency percentiles per level": per family, p50/p90/p99/p99.9 against the load level
    (``percentiles_svg``) and a table saying for each level whether its latency is corrected
    for coordinated omission. Markdown: the table."""
    fams = families(run)
    if not fams:
        return []
    tables = [(f, percentile_rows(f)) for f in fams]

    def html() -> str:
        figures = [{"slug": f.slug, "svg": Markup(percentiles_svg(f, f"latency-load-{f.slug}")), "rows": rows}
                   for f, rows in tables]
        return _render(_PERCENTILES_HTML, figures=figures)

    md = ("Percentiles of every measured repetition merged. Open levels are corrected for coordinated "
          "omission (latency from when each transaction was due); closed levels are not (from each "
          "transaction's actual start: a stall is understated).\n")
    for f, rows in tables:
        md += f"\n**{f.title}**\n\n" + md_table(
            ["Level", "Configuration", "p50", "p90", "p99", "p99.9", "corrected for coordinated omission"],
            [[r["level"], r["configuration"], fmt_ns(r["p50"]), fmt_ns(r["p90"]), fmt_ns(r["p99"]),
              fmt_ns(r["p999"]), "yes" if r["corrected"] else "no"] for r in rows],
            align="llrrrrl")
    return [Section("latency-load", "Latency percentiles per load level", html, md)]


# ------------------------------------------------------------------------------- CPU over time

def cpu_timeline_svg(points: Sequence[Point], plot_id: str, title: str) -> str:
    """CPU over one representative repetition (``representative``) of each configuration at
    one level, as ``<svg class="plot cpu-timeline">``: top panel, user + system CPU in % of one
    CPU against time in s, client solid and server dashed, colour = configuration; bottom
    panel, steal in % of the host's CPUs (client's samples). Line groups have ids
    ``<plot_id>-cpu-<configuration>-<client|server>`` and ``<plot_id>-steal-<configuration>``.
    Returns the SVG text."""
    fig = plots._figure(7.2, 3.8)
    ax, ax_steal = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    drawn = False
    for p in points:
        o = representative(p)
        if o is None or not o.result:
            continue
        r = o.result
        sides = [("client", r.get("client_timeline"), "-"),
                 ("server", (r.get("server") or {}).get("timeline"), "--")]
        for side, samples, style in sides:
            t, cpu, _ = timeline_series(samples)
            if t.size == 0:
                continue
            line, = ax.plot(t, cpu, linestyle=style, color=p.colour, linewidth=1.4,
                            label=f"{p.series} {side} (block {o.repetition.block})")
            line.set_gid(f"cpu-{_gid(p.series)}-{side}")
            drawn = True
        t, _, steal = timeline_series(r.get("client_timeline"))
        if t.size:
            line, = ax_steal.plot(t, steal, color=p.colour, linewidth=1.0, linestyle=":")
            line.set_gid(f"steal-{_gid(p.series)}")
    ax.set_ylabel("CPU, % of one CPU\n(user + system)", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.grid(True, color="#eeeeee", linewidth=0.6)
    if drawn:
        ax.legend(fontsize=7, frameon=False, loc="best", ncol=2)
    else:
        ax.text(0.5, 0.5, "no CPU samples in the results", transform=ax.transAxes, ha="center")
    ax_steal.set_ylabel("steal, %\nof host CPUs", fontsize=8)
    ax_steal.set_ylim(bottom=0)
    ax_steal.set_xlabel("time since the cell started, s", fontsize=8.5)
    ax_steal.grid(True, color="#eeeeee", linewidth=0.6)
    for a in (ax, ax_steal):
        a.tick_params(labelsize=8)
    ax.set_title(title, fontsize=10, loc="left")
    fig.subplots_adjust(left=0.13, right=0.98, top=0.9, bottom=0.13, hspace=0.12)
    return plots._svg(fig, plot_id, "cpu-timeline", title)


def cpu_rows(points: Sequence[Point]) -> list[dict[str, Any]]:
    """One row per configuration at one level, from its representative repetition: ``block``,
    ``client``/``server`` (mean user + system CPU % of one CPU over the samples, None without
    samples), ``steal`` (the largest steal % sample) and ``samples``."""
    rows = []
    for p in points:
        o = representative(p)
        r = (o.result if o else None) or {}
        _, c, steal = timeline_series(r.get("client_timeline"))
        _, s, _ = timeline_series((r.get("server") or {}).get("timeline"))
        rows.append({"configuration": p.configuration, "block": o.repetition.block if o else None,
                     "client": float(c.mean()) if c.size else None, "server": float(s.mean()) if s.size else None,
                     "steal": float(steal.max()) if steal.size else None, "samples": int(c.size)})
    return rows


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f} %"


_CPU_HTML = """\
<p>CPU use over the lifetime of one repetition per configuration (the last measured block), as
the worker sampled it every 100 ms: user + system CPU time of the client (solid) and of the
server process (dashed) in % of one CPU (200 % = two CPUs busy), and steal (the share of the
host's CPUs the hypervisor gave to others) below. In memory mode both sides run in one thread,
shown as the client.</p>
{% for f in figures %}
<figure class="plot" data-plot="cpu-timeline" data-group="{{ f.slug }}">
{{ f.svg }}
  <figcaption>
    <table class="cpu-timeline">
      <thead><tr><th>Configuration</th><th class="num">block</th><th class="num">client CPU, mean</th>
        <th class="num">server CPU, mean</th><th class="num">steal, max</th><th class="num">samples</th></tr></thead>
      <tbody>
{% for r in f.rows %}
        <tr><td>{{ r.configuration }}</td><td class="num">{{ r.block if r.block is not none else "—" }}</td>
          <td class="num">{{ r.client_text }}</td><td class="num">{{ r.server_text }}</td>
          <td class="num">{{ r.steal_text }}</td><td class="num">{{ r.samples }}</td></tr>
{% endfor %}
      </tbody>
    </table>
  </figcaption>
</figure>
{% endfor %}
"""


@register(order=43)
def cpu_over_time(run: StoredRun) -> list[Section]:
    """"CPU over time": per workload level (each cell group), the client's and the server's
    CPU % and the steal % over one representative repetition of each configuration
    (``cpu_timeline_svg``), with their means. Markdown: the means."""
    levels: list[tuple[str, str, list[Point]]] = []
    for f in families(run):
        by_level: dict[str, list[Point]] = {}
        for p in f.points:
            by_level.setdefault(p.load.text, []).append(p)
        for text, pts in by_level.items():
            title = f"{f.title} @ {pts[0].load.label}"
            levels.append((title, f"{f.slug}-{_gid(text)}", pts))
    if not levels:
        return []
    tables = []
    for title, slug, pts in levels:
        rows = cpu_rows(pts)
        for r in rows:
            r.update(client_text=_pct(r["client"]), server_text=_pct(r["server"]), steal_text=_pct(r["steal"]))
        tables.append((title, slug, pts, rows))

    def html() -> str:
        figures = [{"slug": slug, "rows": rows,
                    "svg": Markup(cpu_timeline_svg(pts, f"cpu-timeline-{slug}", f"CPU over time: {title}"))}
                   for title, slug, pts, rows in tables]
        return _render(_CPU_HTML, figures=figures)

    md = ("Mean user + system CPU (% of one CPU) over one repetition per configuration (the last "
          "measured block), sampled every 100 ms; steal: the largest sample.\n\n")
    md += md_table(["Level", "Configuration", "block", "client CPU", "server CPU", "steal max"],
                   [[title, r["configuration"], r["block"] if r["block"] is not None else "—", r["client_text"],
                     r["server_text"], r["steal_text"]] for title, _, _, rows in tables for r in rows],
                   align="llrrrr")
    return [Section("cpu-timeline", "CPU over time", html, md)]
