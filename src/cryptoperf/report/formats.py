"""The report formats of a stored run, chosen in one place: ``html`` (self-contained, with
plots), ``md`` (for a ticket), ``json`` (the complete document) and ``csv`` (one row per run)."""

from __future__ import annotations

import json as _json
import re
from pathlib import Path
from typing import Iterable

from cryptoperf.report.render import write_text
from cryptoperf.store.stored_run import StoredRun

#: format → file extension
FORMATS = {"html": ".html", "md": ".md", "json": ".json", "csv": ".csv"}


def render(run: StoredRun, fmt: str, store_path: str | Path) -> str:
    """The report of ``run`` in format ``fmt`` (a key of FORMATS) as text.

    ``store_path`` is recorded in the JSON document. Raises ValueError for an unknown format.
    """
    if fmt == "html":
        from cryptoperf.report import html
        return html.render(run)
    if fmt == "md":
        from cryptoperf.report import markdown
        return markdown.render(run)
    if fmt == "json":
        from cryptoperf.report import json as report_json
        return _json.dumps(report_json.run_document(run, store_path), indent=1) + "\n"
    if fmt == "csv":
        from cryptoperf.report import csv as report_csv
        return report_csv.render(run)
    raise ValueError(f"unknown report format '{fmt}' (known: {', '.join(FORMATS)})")


def default_path(out_dir: str | Path, run: StoredRun, fmt: str) -> Path:
    """``<out_dir>/<study>-<UTC start>-run<id>.<ext>`` — the name the study gave its JSON
    document (``speed-…`` for a speed run); ``…-run<id>-vs-<reference>.<ext>`` for a run
    re-analysed against another configuration (``StoredRun.against``)."""
    from cryptoperf.report.json import result_path
    name = run.study.name if run.study else (run.meta.get("study_name") or run.meta.get("kind") or "run")
    path = result_path(out_dir, name, run.meta.get("started_at") or "", run.id)
    reference = run.analysis.reference
    if reference:
        path = path.with_name(f"{path.stem}-vs-{re.sub(r'[^A-Za-z0-9._-]+', '_', reference)}{path.suffix}")
    return path.with_suffix(FORMATS[fmt])


def write_beside(run: StoredRun, json_path: str | Path, formats: Iterable[str],
                 store_path: str | Path) -> dict[str, Path]:
    """Write ``run``'s reports in ``formats`` next to its JSON document (same basename, the
    format's extension; a suffix ``-2`` … where a name is taken: nothing is overwritten);
    returns format → path. Raises StoreError if a file cannot be written."""
    base = Path(json_path)
    return {fmt: write_text(render(run, fmt, store_path), base.with_suffix(FORMATS[fmt]),
                            fix="pass --out DIR, or --no-report", unique=True)
            for fmt in formats}
