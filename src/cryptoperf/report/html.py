"""The HTML report: one self-contained file (inline CSS and SVG plots, no scripts, nothing
fetched from the network) made of the registered sections (``sections.build``)."""

from __future__ import annotations

from typing import Sequence

from cryptoperf import __version__
from cryptoperf.report import sections as sections_mod
from cryptoperf.report.render import environment
from cryptoperf.report.text import host_line
from cryptoperf.store.stored_run import StoredRun


def title_of(run: StoredRun) -> str:
    """``cryptoperf study report: key-size`` or ``cryptoperf speed report``."""
    if run.study is not None:
        return f"cryptoperf study report: {run.study.name}"
    name = run.meta.get("study_name")
    return f"cryptoperf {run.meta.get('kind', 'run')} report" + (f": {name}" if name else "")


def render(run: StoredRun, links: Sequence[tuple[str, str]] = ()) -> str:
    """The HTML report of ``run`` as text (UTF-8, one file).

    ``links``: (href, text) pairs shown above the title, e.g. ``("../index.html", "All runs")``
    where the report is one page of a published site (``cryptoperf publish``); none for a
    stand-alone report. Renders every registered section's HTML body (plots with matplotlib, a
    few tenths of a second per operation); raises ValueError if two sections share an id.
    """
    secs = sections_mod.build(run)
    m = run.meta
    return environment().get_template("report.html.j2").render(
        title=title_of(run), description=run.study.description if run.study else "",
        run_id=run.id, kind=m.get("kind", ""), status=m.get("status", ""),
        started_at=m.get("started_at", ""), finished_at=m.get("finished_at") or "",
        host_line=host_line(run.host).removeprefix("host: ") + (
            f", CPU mask {', '.join(run.analysis.cpu_masks)}" if run.analysis.cpu_masks else ""),
        sections=secs, version=__version__,
        links=list(links))
