"""The pages of a published site (``cryptoperf publish``) other than the run reports: the index
of runs, a comparison of two runs and the trend of a study across runs. Each is one
self-contained HTML page (inline CSS and SVG; the index's filter is a small inline script;
nothing is fetched from the network) that links to the others with relative addresses only, so
the site works from ``file://`` and from any path of any web server.

Formatting only: a comparison is ``compare.compare_runs``' ``Comparison``, a trend point is
``compare.figure_of_merit`` of each run's cell, and host changes are
``compare.host_differences``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from markupsafe import Markup

from cryptoperf import __version__, stats
from cryptoperf.builds import DEFAULT as DEFAULT_BUILD
from cryptoperf.compare import Comparison, HostDifference, figure_of_merit, host_differences, match_key
from cryptoperf.model import Delta
from cryptoperf.report import text as fmt
from cryptoperf.report import plots, view
from cryptoperf.report.economics import report_css
from cryptoperf.report.sections.core import plot_verdict_text
from cryptoperf.report.render import environment
from cryptoperf.report.text import (configuration_text, fmt_count, fmt_date, fmt_ns, interval_header,
                                      verdict_counts)
from cryptoperf.store.stored_run import StoredRun

#: A link shown at the top of a page: (relative href, text).
Link = tuple[str, str]

#: Fields of ``compare.host_differences`` that name another machine: figures on either side
#: of such a change are not comparable. The others (kernel, worker version, library per
#: backend) are new software on the same machine; host checks (a moment's reading) are ignored.
HOST_FIELDS = ("CPU model", "crypto flags", "logical CPUs", "machine", "hypervisor", "hostname")


def _page(template: str, **context: Any) -> str:
    """Render a site template with the report's CSS and the generator's version."""
    return environment().get_template(template).render(css=Markup(report_css()), version=__version__,
                                                       **context)


# ------------------------------------------------------------------------------ run facts

def host_label(host: Mapping[str, Any]) -> str:
    """``buildbox (Intel Xeon …)``: the host name and CPU model of a fingerprint, '?' for the
    parts it lacks."""
    return f"{host.get('hostname') or '?'} ({host.get('cpu_model') or '?'})"


def library_versions(run: StoredRun) -> list[str]:
    """The library releases a run measured, one ``backend: library version`` string each
    (``openssl: OpenSSL 3.0.13``; ``aws-lc [fips]: AWS-LC FIPS 3.0.0 (FIPS)`` for another
    worker build), limited to the backends and builds its cells used (every library of the
    host when it has no cells), in the fingerprint's order."""
    h = run.host
    used = {(s.cell.build, s.cell.backend) for s in run.summaries.values()}
    out = []

    def text(backend: str, build: str | None, lib: Mapping[str, Any] | None) -> str:
        lib = lib or {}
        name = f"{lib.get('library') or ''} {lib.get('library_version') or ''}".strip() or "?"
        return f"{backend}{f' [{build}]' if build else ''}: {name}{' (FIPS)' if lib.get('fips') else ''}"

    for backend, lib in (h.get("libraries") or {}).items():
        if not used or (DEFAULT_BUILD, backend) in used:
            out.append(text(backend, None, lib))
    for build, b in (h.get("builds") or {}).items():
        for backend, lib in ((b or {}).get("libraries") or {}).items():
            if (build, backend) in used:
                out.append(text(backend, build, lib))
    return out


# ----------------------------------------------------------------------------------- index

@dataclass(frozen=True)
class IndexRow:
    """One run in the index.

    Attributes:
        id, kind, study ('' for a ``speed`` run), started (UTC ISO 8601), status: the run.
        host: ``host_label`` of its fingerprint ('' when it could not be read).
        cpu_masks: the CPU masks its cells ran under (``format.mask_text``; '' when it could not
            be read).
        libraries: ``library_versions`` of the run.
        cells: distinct cells; verdicts: ``verdict counts`` text ('' without comparisons).
        page, compare, trend: relative links to the run's report, its comparison with the
            previous run of its study and its study's trend page ('' where there is none).
        problem: why the run has no page (a format this cryptoperf cannot read), else ''.
    """

    id: int
    kind: str
    study: str
    started: str
    status: str
    host: str = ""
    cpu_masks: str = ""
    libraries: tuple[str, ...] = ()
    cells: int = 0
    verdicts: str = ""
    page: str = ""
    compare: str = ""
    trend: str = ""
    problem: str = ""


@dataclass(frozen=True)
class TrendLink:
    """A study's trend page in the index: ``study``, its ``href``, the ``runs`` on it and the
    ``operations`` (cells) it plots."""

    study: str
    href: str
    runs: int
    operations: int


def index_html(rows: Sequence[IndexRow], trends: Sequence[TrendLink], store: str) -> str:
    """The site's index page: the trend pages, then every run newest first — id, kind, study,
    start (UTC), status, host, CPU masks, library versions, cells, verdicts and links — with a filter by
    study, host and library version (an inline script; without JavaScript every run shows).
    ``store`` names the store the site was made from. Returns the HTML text."""
    ordered = sorted(rows, key=lambda r: r.id, reverse=True)
    options = {
        "study": sorted({r.study or r.kind for r in rows}),
        "host": sorted({r.host for r in rows if r.host}),
        "library": sorted({lib for r in rows for lib in r.libraries}),
    }
    return _page("publish_index.html.j2", links=[], rows=ordered, trends=trends, options=options, store=store,
                 fmt_date=fmt_date)


# --------------------------------------------------------------------------------- compare

def _run_facts(run: StoredRun) -> dict[str, Any]:
    m = run.meta
    return {"id": run.id, "study": m.get("study_name") or m.get("kind") or "", "status": m.get("status") or "",
            "started": fmt_date(m.get("started_at")), "host": host_label(run.host)}


def _compare_rows(c: Comparison) -> list[dict[str, Any]]:
    rows = []
    for d in c.deltas:
        row: dict[str, Any] = {"backend": d.backend, "operation": fmt.operation(d.label, d.size_bytes),
                               "configuration": configuration_text(d.configuration or "—", d.cpu, d.build),
                               "p50_a": fmt_ns(d.baseline_p50_ns), "p50_b": fmt_ns(d.p50_ns),
                               "latency": "", "latency_ci": "", "throughput": "", "reps": "",
                               "noise": "", "noisy": False, "verdict": "", "kind": "na", "note": ""}
        if d.op and d.baseline_op and d.op != d.baseline_op:
            row["note"] = f"{d.baseline_op} in run {c.a.id}, {d.op} in run {c.b.id}"
        if d.status != "ok" or d.latency is None or d.throughput is None or d.verdict is None:
            row["verdict"] = f"n/a: {d.reason}" if d.reason else "n/a"
            if d.p50_ns and d.baseline_p50_ns:
                row["latency"] = f"{(d.p50_ns / d.baseline_p50_ns - 1) * 100:+.1f} %"
        else:
            noise = (d.noise or 0.0) * 100
            row.update(latency=fmt.change_point_text(d.latency), latency_ci=fmt.interval_text(d.latency),
                       throughput=fmt.change_text(d.throughput), reps=str(d.blocks),
                       noise=f"CV {noise:.1f} %", noisy=noise > c.settings.noise_threshold_pct,
                       verdict=d.verdict.text + (f" ({d.library_change})" if d.library_change else ""),
                       kind=d.verdict.kind)
        rows.append(row)
    return rows


def _compare_forest(c: Comparison) -> tuple[str, list[str]]:
    """(the forest plot of the comparisons with an interval, '' when none; what is not
    plotted, each as ``<where>: n/a: <reason>``)."""
    groups: dict[tuple, list[Delta]] = {}
    missing = []
    for d in c.deltas:
        where = f"{fmt.operation(d.label, d.size_bytes)} on {d.backend}, {d.configuration or '—'}"
        if d.status == "ok" and d.verdict is not None and d.decisive is not None:
            groups.setdefault((d.label, d.size_bytes), []).append(d)
        else:
            missing.append(f"{where}: n/a" + (f": {d.reason}" if d.reason else ""))
    if not groups:
        return "", missing
    forest = [plots.ForestGroup(fmt.operation(*key), [
        plots.ForestRow(f"{d.backend} {configuration_text(d.configuration, d.cpu, d.build)}".strip(),
                        d.decisive.ratio, d.decisive.low, d.decisive.high, d.verdict.kind,
                        plot_verdict_text(d.verdict, d.decisive)) for d in ds])
              for key, ds in groups.items()]
    metric = c.settings.metric
    svg = plots.forest_svg(forest, c.settings.margin_pct, "compare-forest",
                           f"{metric} change, run {c.b.id} vs run {c.a.id}",
                           f"{metric}, run {c.b.id} ÷ run {c.a.id}, log scale; bars: {c.level * 100:.4g} % intervals")
    return svg, missing


def compare_html(c: Comparison, links: Sequence[Link], run_pages: Mapping[int, str]) -> str:
    """Run B against run A (``compare.compare_runs``) as one page: the two runs (linked to
    their reports through ``run_pages``: run id → relative href), the host differences, a
    forest plot of every matched cell with an interval (B ÷ A, the ± margin shaded), the table
    of matched cells (p50 in each run, latency Δ with its interval, throughput Δ, repetitions,
    verdict, noise) and the cells measured in one run only. ``links`` go above the title.
    Returns the HTML text."""
    svg, missing = _compare_forest(c)
    only = [(run.id, [f"{s.cell.key} ({s.cell.op})" for s in cells])
            for run, cells in ((c.a, c.only_a), (c.b, c.only_b)) if cells]
    return _page("publish_compare.html.j2", links=list(links), a=_run_facts(c.a), b=_run_facts(c.b),
                 pages=run_pages, host=c.host, rows=_compare_rows(c), svg=Markup(svg) if svg else None,
                 missing=missing, only=only, counts=verdict_counts(c.deltas), method=c.method,
                 ci=interval_header(c.level), margin=c.settings.margin_pct, metric=c.settings.metric,
                 level=c.level)


# ----------------------------------------------------------------------------------- trend

#: metric key (``stats.METRICS``) → (axis label, formatter); the figure itself is
#: ``compare.figure_of_merit``'s.
_FIGURES: dict[str, tuple[str, Callable[[float], str]]] = {
    "latency": ("p50 latency", fmt_ns),
    "throughput": ("operations per second", fmt_count),
    "cpu_per_op": ("worker process CPU per operation", fmt_ns),
    "server_cpu_per_op": ("server process CPU per transaction", fmt_ns),
}


@dataclass(frozen=True)
class Change:
    """What changed between two consecutive runs of a study: ``before`` and ``after`` (run
    ids), ``index`` (position of ``after`` in the trend, from 1), ``kind`` (``host`` when a
    field of HOST_FIELDS differs, else ``software``) and the ``differences``."""

    before: int
    after: int
    index: int
    kind: str
    differences: tuple[HostDifference, ...]

    def fields_for(self, backend: str) -> list[str]:
        """The fields that matter to a cell on ``backend``: every host and software field but
        the libraries of other backends."""
        return [d.field for d in self.differences
                if not d.field.startswith("library ") or d.field == f"library {backend}"]


def host_changes(runs: Sequence[StoredRun]) -> list[Change]:
    """The changes of host fingerprint between consecutive ``runs`` (time order), as
    ``compare.host_differences`` finds them, host checks left out."""
    out = []
    for i in range(1, len(runs)):
        diffs = tuple(d for d in host_differences(runs[i - 1].host, runs[i].host)
                      if not d.field.startswith("check "))
        if diffs:
            kind = "host" if any(d.field in HOST_FIELDS for d in diffs) else "software"
            out.append(Change(runs[i - 1].id, runs[i].id, i, kind, diffs))
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "x"


def trend_operations(runs: Sequence[StoredRun]) -> list[tuple[tuple, str, str]]:
    """Every operation (cell) measured in ``runs``, as (``compare.match_key``, title, anchor
    id), in the newest run's report order and then the older runs' cells as first seen."""
    seen: dict[tuple, tuple[str, str]] = {}
    for run in reversed(runs):
        for g in view.groups(run):
            for s in g.cells:
                key = match_key(s)
                if key not in seen:
                    c = s.cell
                    conf = configuration_text(c.configuration, c.cpu, c.build) if c.configuration else ""
                    title = f"{fmt.operation(c.label, c.size_bytes)} on {c.backend}" + (f", {conf}" if conf else "")
                    seen[key] = (title, "op-" + _slug("-".join(str(p) for p in (c.backend, c.label,
                                                                                 c.size_bytes, c.configuration,
                                                                                 c.cpu, c.build))))
    anchors: set[str] = set()
    out = []
    for key, (title, anchor) in seen.items():
        while anchor in anchors:
            anchor += "_"
        anchors.add(anchor)
        out.append((key, title, anchor))
    return out


def trend_html(study: str, runs: Sequence[StoredRun], links: Sequence[Link], run_pages: Mapping[int, str],
               compare_pages: Mapping[int, str]) -> str:
    """The trend page of study ``study``: for every operation (cell) its figure of merit
    (``compare.figure_of_merit``, on the newest run's ``verdict_on`` metric) in each of ``runs`` (oldest
    first), one plot each with the runs' intervals, host changes (``host_changes``) drawn as
    markers between runs and listed, and a table of the values linking each run's report
    (``run_pages``: run id → href) and its comparison with the previous run (``compare_pages``:
    run id → href). Returns the HTML text."""
    runs = list(runs)
    newest = runs[-1]
    verdict_on = newest.analysis.settings.verdict_on
    changes = host_changes(runs)
    labels = [f"#{r.id}" for r in runs]
    sections: list[dict[str, Any]] = []
    by_group: dict[str, dict[str, Any]] = {}
    for key, title, anchor in trend_operations(runs):
        configuration, backend, label, size = key
        cells = [next((s for s in r.summaries.values() if match_key(s) == key), None) for r in runs]
        some = next(s for s in cells if s is not None)
        metric = stats.metric_for(verdict_on, some.cell.load)
        name, formatter = _FIGURES[metric]
        estimates = [figure_of_merit(s, metric) if s is not None else None for s in cells]
        points = [plots.TrendPoint(lab, e.value if e else None, e.low if e else None, e.high if e else None)
                  for lab, e in zip(labels, estimates)]
        marks = []
        for ch in changes:
            fields = ch.fields_for(backend)
            if ch.kind == "host":
                fields = [f for f in fields if f in HOST_FIELDS]
            if fields:
                marks.append(plots.TrendMark(ch.index - 1, ch.kind, f"new {ch.kind}: {', '.join(fields)}"))
        colour = view.colour_of(newest, view.series_name(newest, some)) if some.cell.configuration else plots.PALETTE[0]
        svg = plots.trend_svg(points, marks, f"trend-{anchor}", title, name, formatter, colour)
        values = []
        for r, s, e in zip(runs, cells, estimates):
            if e is None:
                text, ci = ("not measured" if s is None else f"{s.status}: {s.reason}".rstrip(": ")), ""
            else:
                text = formatter(e.value)
                ci = f"[{formatter(e.low)}, {formatter(e.high)}]" if e.low is not None and e.high is not None else "no interval"
            values.append({"run": r.id, "started": fmt_date(r.meta.get("started_at")), "value": text, "ci": ci,
                           "n": e.n if e else 0, "page": run_pages.get(r.id, ""),
                           "compare": compare_pages.get(r.id, "")})
        group_title = f"{fmt.operation(label, size)} on {backend}"
        group = by_group.get(group_title)
        if group is None:
            group = by_group[group_title] = {"title": group_title, "figures": []}
            sections.append(group)
        group["figures"].append({"anchor": anchor, "title": title, "svg": Markup(svg), "metric": name,
                                 "values": values})
    return _page("publish_trend.html.j2", links=list(links), study=study, runs=len(runs),
                 first=fmt_date(runs[0].meta.get("started_at")), last=fmt_date(newest.meta.get("started_at")),
                 sections=sections, changes=changes, pages=run_pages, compare_pages=compare_pages,
                 metric=newest.analysis.settings.metric)
