"""The Markdown report: what to paste into a ticket — the verdicts as a list with the method
that made their intervals, the summary table (delta vs baseline with intervals, blocks and
verdicts), key figures (p50, ops/s, CPU/op per configuration), the host in a few lines, and how
to reproduce. Sections come from the registry (``sections.build``); those with Markdown bodies
are included, in order. It has no plots and draws none: a section's HTML body, where the plots
are, is left unrendered (``Section.body_html`` is never called)."""

from __future__ import annotations

from cryptoperf.report import sections as sections_mod
from cryptoperf.report.html import title_of
from cryptoperf.store.stored_run import StoredRun


def render(run: StoredRun) -> str:
    """The Markdown report of ``run`` as text (GitHub-flavoured tables), ending in a newline."""
    m = run.meta
    out = [f"# {title_of(run)}\n"]
    if run.study is not None and run.study.description:
        out.append(f"{run.study.description}\n")
    head = f"Run {run.id} ({m.get('kind')}), started {m.get('started_at')}"
    if run.analysis.cpu_masks:
        head += f", under CPU mask {', '.join(run.analysis.cpu_masks)}"
    if m.get("status") != "complete":
        head += f" — **{m.get('status')}**: only the runs that finished are included"
    out.append(head + ".\n")
    for s in sections_mod.build(run):
        if s.markdown:
            out.append(f"## {s.title}\n\n{s.markdown.rstrip()}\n")
    return "\n".join(out)
