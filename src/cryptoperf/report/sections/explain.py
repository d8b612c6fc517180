"""Report section: how to explain each decided verdict — the ``cryptoperf explain`` command
that attributes the comparison's change of CPU per operation to functions (docs/explain.md),
and for a CPU-mask configuration the one that says which extension groups the operation needs.

55  Why: explaining a verdict — one row per slower/faster comparison the worker's own process
                                 measured (a server under test is another program): the command

Every row is the run's comparisons (``run.analysis.deltas``); nothing is computed here.
"""

from __future__ import annotations

import base64
import re
import shlex
from types import SimpleNamespace
from typing import Any

from cryptoperf.model import BASELINE
from cryptoperf.report.explain import markdown, view
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.store.stored_run import StoredRun

LEAD = ("Why a configuration is slower or faster: an explanation runs profiled blocks of the comparison's two "
        "cells under perf and attributes the change of CPU per operation to the functions that take it, with "
        "intervals (docs/explain.md); a comparison not explained yet shows the command that explains it, and "
        "for a CPU mask a second one that says which extension groups the operation depends on. The profiled "
        "repetitions are separate from this run's: none of their figures enters a table above.")


def anchor(d) -> str:
    """The HTML id of a comparison's explain row (``<backend>-<label>[-<size>]-<configuration>``,
    lower case, dashes)."""
    size = f"-{d.size_bytes}" if getattr(d, "size_bytes", None) else ""
    return re.sub(r"[^a-z0-9]+", "-", f"{d.backend}-{d.label}{size}-{d.configuration}".lower()).strip("-")


def _explained(run: StoredRun, d) -> dict | None:
    """The stored explanation of comparison ``d`` (the latest one), or None."""
    found = [e for e in run.explanations if e.get("configuration") == d.configuration and e.get("reference") == d.baseline
             and e.get("backend") == d.backend and e.get("operation") == d.label and e.get("size_bytes") == d.size_bytes]
    return found[-1] if found else None


def rows(run: StoredRun) -> list[dict[str, str]]:
    """One row per decided (slower/faster) comparison whose cells have no server under test;
    ``explained``: the anchor of its stored explanation ('' when none)."""
    out = []
    summaries = run.analysis.summaries
    for d in run.analysis.deltas:
        if d.verdict is None or d.verdict.kind not in ("slower", "faster"):
            continue
        cell = next((s.cell for s in summaries.values() if s.cell.configuration == d.configuration
                     and s.cell.label == d.label and s.cell.backend == d.backend), None)
        if cell is None or cell.server is not None:
            continue
        command = (f"cryptoperf explain {run.id} --config {shlex.quote(d.configuration)} --reference "
                   f"{shlex.quote(d.baseline)} --op {shlex.quote(d.label)} --backend {d.backend}"
                   + (f" --size {d.size_bytes}" if d.size_bytes else ""))
        if d.cpu != BASELINE and not cell.is_workload:
            size = f" --size {cell.size_bytes}" if cell.size_bytes else ""
            command += f"  ;  cryptoperf explain --extensions --op {cell.op}{size} --backend {d.backend}"
        e = _explained(run, d)
        out.append({"what": f"{d.label} on {d.backend}: {d.configuration} vs {d.baseline}",
                    "verdict": d.verdict.text, "command": command, "anchor": anchor(d),
                    "explained": f"why-{anchor(d)}" if e is not None else ""})
    return out


def explanations(run: StoredRun) -> list[dict[str, Any]]:
    """Each stored explanation laid out (``report.explain.view``), with its anchor and its flame
    graph as a data URI (an <img>: the SVG's own script stays inert and its ids apart)."""
    out = []
    for e in run.explanations:
        v = view(e)
        key = anchor(SimpleNamespace(backend=e["backend"], label=e["operation"], configuration=e["configuration"],
                                     size_bytes=e.get("size_bytes")))
        svg = e.get("flamegraph_svg")
        out.append({"id": f"why-{key}", "view": v, "markdown": markdown(e),
                    "flamegraph": ("data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()) if svg else "",
                    "no_flamegraph": e.get("flamegraph_missing") or "", "made_at": e.get("made_at", "")})
    return out


@register(order=55)
def explain(run: StoredRun) -> list[Section]:
    """"Why: explaining a verdict", for a study run with decided comparisons; nothing without."""
    if run.study is None:
        return []
    table = rows(run)
    kept = explanations(run)
    if not table and not kept:
        return []
    html = fragment("sections/explain.html.j2", lead=LEAD, rows=table, explanations=kept)
    md = LEAD + "\n\n" + md_table(["Comparison", "Verdict", "Explain it"],
                                  [[r["what"], r["verdict"], "explained below" if r["explained"] else f"`{r['command']}`"]
                                   for r in table], align="lll")
    for e in kept:
        md += "\n\n" + e["markdown"]
    return [Section("explain", "Why: explaining a verdict", html, md)]
