"""The report's sections, contributed through one registry.

A *section builder* takes a ``StoredRun`` and returns zero or more ``Section``s (a title, an
HTML body and, for what belongs in a ticket, a Markdown body). Builders register themselves
with ``@register(order)``; the HTML and Markdown reports render whatever ``build`` returns, in
``order``, without knowing any section by name. The answer (``answer.py``) and the core
sections (verdicts at a glance, noise warning, summary, key figures, latency, throughput and CPU, host, reproduction) are registered
the same way in ``core.py``, the sections every workload has in ``workloads.py``; a workload with
figures of its own (``cryptoperf.workloads.<kind>``) has its sections in a module of this
package named for it (``storage.py``, ``fleet.py``, ``ike.py``), listed one line each in ``MODULES``. Every
builder reads only the run's analysis (``run.analysis``) and its meta and host:

    from cryptoperf.report.sections import Section, register

    @register(order=35)
    def phases(run):
        if not has_phases(run):
            return []
        return [Section("phases", "Per-phase timeline", html, markdown)]

An HTML body that draws plots is given as a function of no arguments instead of a string
(``Section("latency", "Latency", lambda: draw(run))``): it is called only when the HTML report
is rendered (``Section.body_html``), so the Markdown report, which has no plots, never runs
matplotlib.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Union

if TYPE_CHECKING:  # pragma: no cover
    from cryptoperf.store.stored_run import StoredRun


@dataclass(frozen=True)
class Section:
    """One part of a report.

    Attributes:
        id: HTML id and anchor (unique in a report), e.g. ``summary``.
        title: the heading.
        html: the body as HTML, or a function of no arguments returning it (called only by
            the HTML report: for bodies with plots); builders escape what they insert
            (``render.fragment`` does).
        markdown: the body as Markdown for the ticket summary; '' to leave it out of Markdown.
        css_class: extra class of the HTML ``<section>``, e.g. ``warning``.
    """

    id: str
    title: str
    html: Union[str, Callable[[], str]]
    markdown: str = ""
    css_class: str = ""

    def body_html(self) -> str:
        """The HTML body, rendering it now if it was given as a function."""
        return self.html() if callable(self.html) else self.html


SectionBuilder = Callable[["StoredRun"], Iterable[Section]]

#: (order, name, builder), kept sorted by order then name.
_REGISTRY: list[tuple[int, str, SectionBuilder]] = []



#: The modules of this package whose builders the report has, one line each: importing one
#: registers its builders (``builders``).
MODULES = (
    "answer",
    "core",
    "workloads",
    "sessions",
    "storage",
    "fleet",
    "ike",
    "explain",
)


def register(order: int, name: str | None = None) -> Callable[[SectionBuilder], SectionBuilder]:
    """Decorator: register a section builder at position ``order`` (lower first; the core
    sections use 0, 1, 6, 10–60 in steps of 10 and 70). ``name`` defaults to the function's name;
    registering a name again replaces the earlier builder. Returns the builder unchanged."""
    def deco(builder: SectionBuilder) -> SectionBuilder:
        key = name or builder.__name__
        _REGISTRY[:] = [r for r in _REGISTRY if r[1] != key]
        _REGISTRY.append((order, key, builder))
        _REGISTRY.sort(key=lambda r: (r[0], r[1]))
        return builder
    return deco


def builders() -> list[tuple[int, str, SectionBuilder]]:
    """Every registered (order, name, builder), in report order (built-in modules loaded)."""
    for module in MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return list(_REGISTRY)


def build(run: "StoredRun") -> list[Section]:
    """Every section of ``run``'s report, in order: each builder's sections, in turn.

    Raises ValueError if two sections share an id.
    """
    out: list[Section] = []
    for _, _, builder in builders():
        out.extend(builder(run))
    ids = [s.id for s in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"report sections with the same id: {', '.join(dup)}")
    return out
