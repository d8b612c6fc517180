"""Plots for the HTML report, rendered by matplotlib (Agg, no display) to static SVG text that
is inlined in the page: no JavaScript, no fonts or scripts fetched, opens offline.

Every SVG's root element carries ``class="plot <kind>"`` and a unique ``id``; the ids inside it
(clip paths) are prefixed with that id, so several plots can share one page. Text stays text
(``svg.fonttype = none``): small files, searchable labels.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from html import escape
from typing import Any, Mapping, Sequence

import numpy as np

from cryptoperf.report.text import fmt_count, fmt_ns

#: Colours by configuration position (matplotlib's tab10), so a configuration keeps its colour
#: across every plot of a report.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")

#: Percentiles marked on latency plots: (fraction, label).
MARKED = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9"))

_MAX_POINTS = 600  # a CDF curve is thinned to about this many steps (file size, render time)


def colour(index: int) -> str:
    """The colour of the configuration at ``index`` (cycling through PALETTE)."""
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True)
class Curve:
    """One configuration's latency distribution.

    Attributes:
        label: legend text.
        values_ns, fraction: the CDF (``stats.cdf``): ascending values (ns) and the cumulative
            share (0–1] of recorded values at or below each, shape (k,) both.
        marks: percentile label (``p50``…) → value in ns, drawn as markers on the curve.
        colour: line colour.
    """

    label: str
    values_ns: np.ndarray
    fraction: np.ndarray
    marks: Mapping[str, float] = field(default_factory=dict)
    colour: str = PALETTE[0]


@dataclass(frozen=True)
class Bars:
    """One configuration's per-repetition throughput and CPU cost.

    Attributes:
        label: axis text; colour: bar colour.
        ops_per_s: operations per second of each measured repetition.
        process_cpu_ns_per_op: CPU time per operation (ns) of each measured repetition.
    """

    label: str
    ops_per_s: Sequence[float]
    process_cpu_ns_per_op: Sequence[float]
    colour: str = PALETTE[0]


def gid(text: str) -> str:
    """``text`` made safe for an SVG id part (anything but letters, digits, ``_`` and ``-``
    becomes ``_``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def log_x(ax, xs: Sequence[float]) -> None:
    """A log x axis when the levels ``xs`` span 10× or more, with the levels as ticks."""
    xs = sorted({x for x in xs if x > 0})
    if xs and xs[-1] / xs[0] >= 10:
        ax.set_xscale("log")
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    if xs:
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())


def estimate_line(ax, points: Sequence[tuple[float, object]], colour_: str, label: str, suffix: str) -> None:
    """Draw on ``ax`` one series of estimates — (x, ``stats.Estimate``) pairs in x order — as a
    line through their values with markers, shaded with their band where they have one; the
    line's SVG group id is ``series-<suffix>``, the band's ``band-<suffix>``."""
    line, = ax.plot([x for x, _ in points], [e.value for _, e in points], marker="o", markersize=4,
                    color=colour_, linewidth=1.6, label=label)
    line.set_gid(f"series-{suffix}")
    banded = [(x, e) for x, e in points if e.low is not None and e.high is not None]
    if banded:
        band = ax.fill_between([x for x, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded],
                               color=colour_, alpha=0.18, linewidth=0)
        band.set_gid(f"band-{suffix}")


def plain_formatter(minor: bool = False):
    """Tick labels of a log axis as plain numbers (``2``, ``5``, ``10``); minor ticks only at
    2 and 5 × a power of ten."""
    from matplotlib.ticker import FuncFormatter

    def fmt(v: float, _p) -> str:
        if v <= 0:
            return ""
        lead = v / 10 ** math.floor(math.log10(v) + 1e-9)
        if minor and round(lead, 6) not in (2.0, 5.0):
            return ""
        return f"{v:g}"
    return FuncFormatter(fmt)


def count_formatter():
    """Tick labels as rates with an SI prefix (``fmt_count``), ``0`` at zero."""
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _p: fmt_count(v) if v else "0")


def figure(width_in: float, height_in: float):
    """A matplotlib figure of that size (inches, 96 dpi) on the Agg backend."""
    return _figure(width_in, height_in)


def svg(fig, plot_id: str, kind: str, title: str) -> str:
    """``fig`` as an inline ``<svg class="plot <kind>" id="<plot_id>">`` with a title (ids inside
    prefixed with ``plot_id``)."""
    return _svg(fig, plot_id, kind, title)


def legend_below(fig, handles, labels: Sequence[str] | None = None, fontsize: float = 7.5):
    """A legend of ``handles`` under the figure, outside every axes (so it never covers data),
    in as many columns as fit the figure's width with each label's width counted generously
    (DejaVu Sans digits are 0.64 em; 0.66 em per character is assumed); the saved SVG grows to
    hold it (``svg`` saves the tight bounding box). Returns the legend."""
    labels = list(labels) if labels is not None else [h.get_label() for h in handles]
    widest = max((len(t) for t in labels), default=1) * fontsize * 0.66 / 72.0 + 0.55  # + handle, gap
    ncol = max(1, min(len(labels), int(fig.get_figwidth() * 0.95 // widest)))
    legend = fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
                        fontsize=fontsize, frameon=False)
    return legend


def _figure(width_in: float, height_in: float):
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    return Figure(figsize=(width_in, height_in), dpi=96)


def _svg(fig, plot_id: str, kind: str, title: str) -> str:
    """Serialise ``fig`` as an inline ``<svg>`` element (no XML prolog), ids prefixed."""
    import matplotlib
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": plot_id}):
        # the tight bounding box holds every artist (titles, axis labels, a legend under the
        # plot), with a margin for a browser whose font is a little wider than matplotlib's
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.15)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{plot_id}-{m.group(1)}"', text)
    text = re.sub(r'url\(#([^)]+)\)', lambda m: f'url(#{plot_id}-{m.group(1)})', text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{plot_id}-{m.group(1)}"', text)
    attrs = (f'<svg class="plot {escape(kind)}" id="{escape(plot_id)}" role="img" '
             f'aria-label="{escape(title)}"')
    text = attrs + text[len("<svg"):]
    head_end = text.index(">") + 1
    return text[:head_end] + f"\n<title>{escape(title)}</title>" + text[head_end:]


def _thin(values: np.ndarray, fraction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most about _MAX_POINTS steps, keeping the first and last and every marked tail."""
    if values.size <= _MAX_POINTS:
        return values, fraction
    # evenly spaced in log(value), plus all of the top 0.2 % where the tail lives
    grid = np.unique(np.geomspace(values[0], values[-1], _MAX_POINTS))
    idx = np.unique(np.concatenate([np.searchsorted(values, grid).clip(0, values.size - 1),
                                    np.nonzero(fraction >= 0.998)[0][:_MAX_POINTS],
                                    [0, values.size - 1]]))
    return values[idx], fraction[idx]


def _ns_formatter():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _pos: fmt_ns(v).replace(" ", "\u2009"))


def latency_cdf_svg(curves: Sequence[Curve], plot_id: str, title: str,
                    xlabel: str = "latency per operation (log scale)") -> str:
    """Overlaid latency CDFs of ``curves`` as an ``<svg class="plot latency-cdf">``.

    x: latency per operation (ns, log scale; ``xlabel`` says what a value is, e.g. the mean of
    a batch); y: cumulative share on a logit scale (labelled as percentiles, so p90, p99 and
    p99.9 get room); dotted guides and markers at p50, p90, p99 and p99.9 (the ``marks`` of
    each curve). A curve with no values is left out. Returns the SVG text.
    """
    fig = _figure(7.2, 3.6)
    ax = fig.add_subplot()
    curves = [c for c in curves if len(c.values_ns)]
    lo = min((float(c.values_ns[0]) for c in curves), default=1.0)
    hi = max((float(c.values_ns[-1]) for c in curves), default=10.0)
    y_lo, y_hi = 0.01, 0.9999
    for frac, name in MARKED:
        ax.axhline(frac, color="#999999", linewidth=0.6, linestyle=":", zorder=1)
    for c in curves:
        v, f = _thin(np.asarray(c.values_ns, float), np.asarray(c.fraction, float))
        # steps: up at each value; start at the bottom edge of the plot
        xs = np.concatenate([[v[0]], v])
        ys = np.concatenate([[y_lo / 2], f]).clip(y_lo / 2, 1 - (1 - y_hi) / 2)
        ax.step(xs, ys, where="pre", color=c.colour, linewidth=1.6, label=c.label, zorder=3)
        for frac, name in MARKED:
            if name in c.marks:
                ax.plot([c.marks[name]], [frac], marker="o", markersize=4, color=c.colour,
                        zorder=4, linestyle="none")
    ax.set_xscale("log")
    ax.set_yscale("logit")
    if hi <= lo * 1.5:
        lo, hi = lo / 1.5, hi * 1.5
    ax.set_xlim(lo / 1.15, hi * 1.15)
    ax.set_ylim(y_lo, y_hi)
    from matplotlib.ticker import FixedLocator, LogLocator, NullLocator
    ax.yaxis.set_major_locator(FixedLocator([0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999]))
    ax.set_yticklabels(["p1", "p10", "p50", "p90", "p99", "p99.9", "p99.99"])
    ax.yaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(_ns_formatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of operations at or below")
    ax.grid(True, which="major", axis="x", color="#dddddd", linewidth=0.6)
    if curves:
        legend_below(fig, ax.get_legend_handles_labels()[0], fontsize=8)
    else:
        ax.text(0.5, 0.5, "no measured repetitions", transform=ax.transAxes, ha="center")
    ax.set_title(title, fontsize=10, loc="left")
    fig.subplots_adjust(left=0.11, right=0.98, top=0.9, bottom=0.15)
    return _svg(fig, plot_id, "latency-cdf", title)


def _bar_panel(ax, bars: Sequence[Bars], attr: str, label: str, fmt) -> None:
    ys = np.arange(len(bars))[::-1]
    for y, b in zip(ys, bars):
        vals = np.asarray(getattr(b, attr), float)
        if vals.size == 0:
            ax.text(0, y, "  n/a", va="center", fontsize=8, color="#777777")
            continue
        med = float(np.median(vals))
        ax.barh(y, med, color=b.colour, alpha=0.55, height=0.6, zorder=2)
        ax.errorbar(med, y, xerr=[[med - vals.min()], [vals.max() - med]], fmt="none",
                    ecolor="#333333", capsize=4, linewidth=1, zorder=3)
        ax.plot(vals, np.full(vals.size, y), "o", markersize=3, color="#222222", zorder=4)
        ax.annotate(fmt(med), (vals.max(), y), xytext=(5, 0), textcoords="offset points",
                    va="center", fontsize=7, color="#333333")
    ax.set_yticks(ys, [b.label for b in bars], fontsize=8)
    ax.set_ylim(-0.6, len(bars) - 0.4)
    ax.set_xlabel(label, fontsize=9)
    top = max((max(getattr(b, attr)) for b in bars if len(getattr(b, attr))), default=1.0)
    ax.set_xlim(0, top * 1.3 or 1.0)  # room on the right for the median's label
    ax.grid(True, axis="x", color="#e5e5e5", linewidth=0.6, zorder=0)
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: fmt(v) if v else "0"))


def throughput_cpu_svg(bars: Sequence[Bars], plot_id: str, title: str) -> str:
    """Throughput (ops/s) and CPU time per operation (ns), side by side, one bar per
    configuration, as an ``<svg class="plot throughput-cpu">``: bar = median of the
    repetitions, whisker = their min–max, dots = each repetition. Returns the SVG text."""
    height = 1.0 + 0.42 * max(1, len(bars))
    fig = _figure(7.2, height)
    ax_tp, ax_cpu = fig.subplots(1, 2, sharey=True)
    _bar_panel(ax_tp, bars, "ops_per_s", "operations per second", fmt_count)
    _bar_panel(ax_cpu, bars, "process_cpu_ns_per_op", "worker process CPU per operation\n(a workload: its client side)", fmt_ns)
    ax_cpu.tick_params(axis="y", left=False)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    label_in = min(2.2, 0.25 + 0.065 * max((len(b.label) for b in bars), default=4))
    fig.subplots_adjust(left=label_in / 7.2, right=0.97, wspace=0.08,
                        top=1 - 0.35 / height, bottom=0.55 / height)
    return _svg(fig, plot_id, "throughput-cpu", title)


# ------------------------------------------------------------------------------ forest plot

#: Colours of the verdict kinds (``stats.VERDICT_KINDS``), as the HTML report's CSS has them.
VERDICT_COLOURS = {"slower": "#b3261e", "faster": "#1b7a33", "equivalent": "#1f5fa8",
                   "inconclusive": "#c07a00"}
_BAND_COLOUR = "#dfe9f5"

#: Tick candidates of the forest plot's ratio axis, as % change, most wanted first (after 0 and
#: the margin): the axis keeps those that fit without crowding their neighbours.
_TICK_PCT = (100, -50, 10, -10, 1000, -90, 50, -25, 25, 5, -5, 1, -1, 200, 500, -75, 75, 20, -20, 2, -2,
             10000, 2000, 5000, 300, -99, -95, -80, 0.5, -0.5, 0.2, -0.2, 0.1, -0.1)


@dataclass(frozen=True)
class ForestRow:
    """One comparison in a forest plot.

    Attributes:
        label: the row's text, e.g. ``aws-lc masked [cpu no-aesni]``.
        ratio, low, high: configuration ÷ baseline and its interval's bounds (ratios > 0).
        kind: the verdict kind (``stats.VERDICT_KINDS``), which picks the colour.
        text: the verdict as shown right of the row.
    """

    label: str
    ratio: float
    low: float
    high: float
    kind: str
    text: str


@dataclass(frozen=True)
class ForestGroup:
    """Rows shown under one heading (an operation and size, e.g. ``sign 4 KiB``)."""

    title: str
    rows: Sequence[ForestRow]


def pct_label(ratio: float) -> str:
    """A ratio as a signed % change for an axis: ``−10 %``, ``0``, ``+100 %`` (``−`` is U+2212)."""
    pct = (ratio - 1.0) * 100.0
    if abs(pct) < 1e-9:
        return "0"
    text = f"{pct:+.0f}" if abs(pct) >= 10 else f"{pct:+.2g}"
    return f"{text} %".replace("-", "\u2212")


def ratio_ticks(lo: float, hi: float, margin_pct: float, min_gap: float) -> list[float]:
    """Ticks (ratios, ascending) for a log ratio axis from ``lo`` to ``hi``: 1 (0 %) always,
    then 1 ± margin and round % changes (``_TICK_PCT``) in order of preference, each kept only
    when its distance in log ratio from every kept tick is at least ``min_gap`` × ln(hi / lo)."""
    span = math.log(hi / lo)
    chosen = [1.0]
    wanted = [margin_pct, -margin_pct] if 0 < margin_pct < 100 else []
    for pct in [*wanted, *_TICK_PCT]:
        r = 1.0 + pct / 100.0
        if r <= 0 or not lo <= r <= hi:
            continue
        if all(abs(math.log(r / c)) >= min_gap * span for c in chosen):
            chosen.append(r)
    return sorted(chosen)


def _text_in(chars: int, fontsize: float = 8.0) -> float:
    """A generous width in inches of ``chars`` characters of sans-serif text at ``fontsize``."""
    return chars * fontsize * 0.52 / 72.0


def _forest_range(rows: Sequence[ForestRow], m: float) -> tuple[float, float]:
    """The ratio axis of a forest plot: every interval and the ± ``m`` margin band, at least ±3
    margins (±1 % without one) around 0, and a little room beyond the extremes."""
    lo = min([r.low for r in rows] + [1.0 - m if m < 1 else 0.5])
    hi = max([r.high for r in rows] + [1.0 + m])
    least = max(3 * m, 0.01)
    lo, hi = min(lo, 1.0 / (1.0 + least)), max(hi, 1.0 + least)
    pad = 0.05 * math.log(hi / lo)
    return lo * math.exp(-pad), hi * math.exp(pad)


#: A forest row whose ratio is beyond this factor either way of 0 % (×4, ÷4) is drawn off-scale
#: at the axis edge when other rows are within it, so that one large ratio does not squeeze them.
OFF_SCALE = 4.0


def _off_scale(rows: Sequence[ForestRow]) -> set[int]:
    """Indexes of the rows drawn off-scale (``OFF_SCALE``): none when every row, or none, is
    beyond it."""
    far = {i for i, r in enumerate(rows) if not 1.0 / OFF_SCALE <= r.ratio <= OFF_SCALE}
    return far if far and len(far) < len(rows) else set()


def _forest_row(ax: Any, r: "ForestRow", i: int, y: float, edge: float | None) -> None:
    """Row ``i`` of a forest plot at height ``y``: a dot at the ratio and a bar over its interval
    (gids ``dot-<kind>-<i>``, ``interval-<i>``), or, with ``edge`` (off the axis), an arrowhead
    at that edge of the axis."""
    c = VERDICT_COLOURS.get(r.kind, "#555555")
    if edge is not None:
        dot, = ax.plot([edge], [y], linestyle="none", marker=">" if r.ratio > 1 else "<", markersize=7, color=c,
                       zorder=4, clip_on=False)
        dot.set_gid(f"dot-{r.kind}-{i}")
        return
    bar, = ax.plot([r.low, r.high], [y, y], color=c, linewidth=2.2, solid_capstyle="butt", zorder=3)
    bar.set_gid(f"interval-{i}")
    ax.plot([r.low, r.high], [y, y], linestyle="none", marker="|", markersize=6, markeredgewidth=1.2, color=c,
            zorder=3)
    dot, = ax.plot([r.ratio], [y], linestyle="none", marker="o", markersize=5.5, color=c, markeredgecolor="white",
                   markeredgewidth=0.6, zorder=4)
    dot.set_gid(f"dot-{r.kind}-{i}")


def forest_svg(groups: Sequence[ForestGroup], margin_pct: float, plot_id: str, title: str,
               xlabel: str) -> str:
    """A forest plot of comparisons as an ``<svg class="plot forest">``: one row per
    ``ForestRow`` under its group's heading, top to bottom; x = configuration ÷ baseline on a log
    axis, ticks labelled as % change; a dot at the ratio and a bar over its interval, coloured
    by verdict kind; the ± ``margin_pct`` % equivalence band shaded (with dashed edges, so it
    shows however wide the axis is) and a line at 0 %; the verdict text right of each row. When
    some rows lie beyond ×``OFF_SCALE`` (or ÷) and others do not, the axis spans the others and
    those rows are an arrowhead at the edge, named in the x label, with their verdict text.

    SVG groups carry ids for tests and tools (prefixed with ``plot_id`` like every id):
    ``dot-<kind>-<n>`` (n counts rows from 0), ``interval-<n>``, ``equivalence-band``,
    ``zero-line``. Returns the SVG text.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    from matplotlib.transforms import blended_transform_factory

    rows = [r for g in groups for r in g.rows]
    m = margin_pct / 100.0
    far = _off_scale(rows)
    lo, hi = _forest_range([r for i, r in enumerate(rows) if i not in far], m)
    if far:
        xlabel += f"; ▸ ◂: beyond ×{OFF_SCALE:g} / ÷{OFF_SCALE:g}, off the axis (its verdict on the right)"

    width = 10.8
    left_in = min(3.2, 0.25 + _text_in(max([len(r.label) + 2 for r in rows] + [len(g.title) for g in groups])))
    right_in = min(3.6, 0.2 + _text_in(max(len(r.text) for r in rows), 7.5))
    axis_in = max(3.2, width - left_in - right_in)
    width = left_in + axis_in + right_in
    n_rows, n_groups = len(rows), len(groups)
    body_in = 0.24 * n_rows + 0.3 * n_groups
    top_in, bottom_in = 0.4, 0.95
    height = body_in + top_in + bottom_in
    fig = _figure(width, height)
    ax = fig.add_axes((left_in / width, bottom_in / height, axis_in / width, body_in / height))

    # y: group headings and rows top to bottom, one unit per line
    y = 0.0
    heading_y, row_y = [], []
    for g in groups:
        heading_y.append(y)
        y -= 1.0
        for _ in g.rows:
            row_y.append(y)
            y -= 0.82
        y -= 0.25
    ax.set_ylim(y + 0.5, 0.6)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)

    band = ax.axvspan(1.0 - m, 1.0 + m, color=_BAND_COLOUR, zorder=0, linewidth=0)
    band.set_gid("equivalence-band")
    for edge in (1.0 - m, 1.0 + m):
        ax.axvline(edge, color="#8fb0d6", linewidth=0.7, linestyle=(0, (3, 2)), zorder=1)
    zero = ax.axvline(1.0, color="#444444", linewidth=1.0, zorder=2)
    zero.set_gid("zero-line")

    label_at = blended_transform_factory(fig.transFigure, ax.transData)
    verdict_at = blended_transform_factory(ax.transAxes, ax.transData)
    x0 = 0.12 / width
    i = 0
    for g, gy in zip(groups, heading_y):
        fig.text(x0, gy, g.title, transform=label_at, ha="left", va="center", fontsize=8.5,
                 fontweight="bold")
        ax.axhline(gy + 0.55, color="#dddddd", linewidth=0.6, zorder=0)
        for r in g.rows:
            edge = (hi if r.ratio > 1 else lo) if i in far else None
            _forest_row(ax, r, i, row_y[i], edge)
            fig.text(x0 + 0.14 / width, row_y[i], r.label, transform=label_at, ha="left", va="center", fontsize=8)
            ax.text(1.015, row_y[i], r.text, transform=verdict_at, ha="left", va="center", fontsize=7.5,
                    color=VERDICT_COLOURS.get(r.kind, "#555555"))
            i += 1

    ax.xaxis.set_major_locator(FixedLocator(ratio_ticks(lo, hi, margin_pct, 0.55 / axis_in)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: pct_label(v)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.tick_params(axis="x", labelsize=8)
    ax.set_yticks([])
    ax.grid(True, axis="x", color="#eeeeee", linewidth=0.6, zorder=0)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel(xlabel, fontsize=8.5)
    fig.text(x0, 1 - 0.2 / height, title, ha="left", va="center", fontsize=10)

    kinds = [k for k in VERDICT_COLOURS if any(r.kind == k for r in rows)]
    handles = [Line2D([], [], color=VERDICT_COLOURS[k], marker="o", markersize=5, linewidth=2.2, label=k)
               for k in kinds]
    handles.append(Patch(facecolor=_BAND_COLOUR, edgecolor="#8fb0d6", linestyle="--",
                         label=f"±{margin_pct:g} % equivalence band"))
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(left_in / width, 0.0),
               ncol=len(handles), fontsize=7.5, frameon=False, handlelength=1.6, columnspacing=1.2)
    return _svg(fig, plot_id, "forest", title)


# ------------------------------------------------------------------------------- trend plot

#: Colours of the change markers of a trend plot: a new host (absolute figures are not
#: comparable across it) and new software on the same host (a library or worker release).
CHANGE_COLOURS = {"host": "#b3261e", "software": "#7f7f7f"}


@dataclass(frozen=True)
class TrendPoint:
    """One run's figure of merit in a trend plot.

    Attributes:
        label: the x tick text of the run, e.g. ``#7``.
        value: the figure (ns for latencies and CPU times, per second for rates), or None when
            the run did not measure the operation (a gap in the line).
        low, high: its interval's bounds in the same unit, or None when the run has too few
            repetitions for one (the point is drawn hollow).
    """

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class TrendMark:
    """A change between two consecutive runs of a trend plot.

    Attributes:
        before: index of the last point before the change (the marker is drawn half-way to the
            next point).
        kind: ``host`` (another machine: figures on either side are not comparable) or
            ``software`` (another library or worker release on the same host); picks the
            colour (``CHANGE_COLOURS``).
        text: what changed, written along the marker (cut to 36 characters), e.g. ``new host:
            hostname, CPU model``.
    """

    before: int
    kind: str
    text: str


def trend_svg(points: Sequence[TrendPoint], marks: Sequence[TrendMark], plot_id: str, title: str,
              ylabel: str, fmt, colour_: str = PALETTE[0]) -> str:
    """A figure of merit across runs as an ``<svg class="plot trend">``: x = the runs in time
    order (one position each, ticks labelled with ``TrendPoint.label``), y = the figure
    (linear, formatted by ``fmt``: a function of a float returning text, e.g. ``fmt_ns``); a
    dot per run with its interval as an error bar (hollow without an interval), joined by a
    line that breaks where a run did not measure the operation; each ``TrendMark`` a vertical
    line between its two runs with its text along it.

    SVG groups carry ids (prefixed with ``plot_id`` like every id): ``point-<i>`` (i indexes
    ``points``), ``change-<kind>-<before>``. Returns the SVG text.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    from matplotlib.transforms import offset_copy

    n = len(points)
    fig = _figure(7.2, 2.7)
    ax = fig.add_subplot()
    xs = np.arange(n, dtype=float)
    ys = np.array([np.nan if p.value is None else p.value for p in points], dtype=float)
    ax.plot(xs, ys, color=colour_, linewidth=1.2, zorder=2)
    for i, p in enumerate(points):
        if p.value is None:
            continue
        has_ci = p.low is not None and p.high is not None
        if has_ci:
            bar = ax.errorbar([i], [p.value], yerr=[[p.value - p.low], [p.high - p.value]], fmt="none",
                              ecolor=colour_, elinewidth=1.2, capsize=3, zorder=3)
            for artist in bar.lines[2]:
                artist.set_gid(f"point-{i}-interval")
        dot, = ax.plot([i], [p.value], linestyle="none", marker="o", markersize=5, color=colour_,
                       markerfacecolor=colour_ if has_ci else "white", markeredgewidth=1.2, zorder=4)
        dot.set_gid(f"point-{i}")
    measured = [v for p in points if p.value is not None
                for v in (p.value, p.low if p.low is not None else p.value,
                          p.high if p.high is not None else p.value)]
    if measured:
        lo, hi = min(measured), max(measured)
        pad = (hi - lo) * 0.12 or abs(hi) * 0.05 or 1.0
        ax.set_ylim(max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad * 2.2)  # room for the marks' text
    else:
        ax.text(0.5, 0.5, "not measured in any run", transform=ax.transAxes, ha="center")
    ax.set_xlim(-0.6, max(n - 1, 0) + 0.6)
    for m in marks:
        line = ax.axvline(m.before + 0.5, color=CHANGE_COLOURS.get(m.kind, "#555555"), linewidth=1.0,
                          linestyle=(0, (4, 2)) if m.kind == "host" else (0, (1, 2)), zorder=1)
        line.set_gid(f"change-{m.kind}-{m.before}")
        text = m.text if len(m.text) <= 36 else m.text[:35].rstrip(" ,") + "…"
        ax.text(m.before + 0.5, 0.98, text, rotation=90, rotation_mode="anchor", ha="right",
                va="baseline", fontsize=6.5,
                transform=offset_copy(ax.get_xaxis_transform(), fig=fig, x=-3, units="points"),
                color=CHANGE_COLOURS.get(m.kind, "#555555"))
    step = max(1, math.ceil(n / 14))  # at most about 14 tick labels
    ax.xaxis.set_major_locator(FixedLocator([float(i) for i in range(0, n, step)]))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _p: points[int(round(v))].label if 0 <= round(v) < n else ""))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: fmt(v).replace(" ", "\u2009")))
    ax.tick_params(labelsize=8)
    ax.set_xlabel("run, oldest first", fontsize=8.5)
    ax.set_ylabel(ylabel, fontsize=8.5)
    ax.grid(True, axis="y", color="#e5e5e5", linewidth=0.6, zorder=0)
    for side in ("right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(title, fontsize=10, loc="left")
    fig.subplots_adjust(left=0.13, right=0.98, top=0.88, bottom=0.2)
    return _svg(fig, plot_id, "trend", title)
