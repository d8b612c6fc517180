"""Rendering helpers shared by the report formats and the section builders: the Jinja2
environment (HTML, autoescaped) with the number formatters as filters, Markdown tables, and
writing a report file.

Formatting only: every number and verdict comes from ``analysis``/``stats``.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import jinja2

from cryptoperf.errors import StoreError
from cryptoperf.report.text import fmt_count, fmt_cv, fmt_mb_s, fmt_ns, fmt_pct, fmt_size


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The Jinja2 environment over ``report/templates`` (autoescaping on, strict undefined).

    Filters: ``ns`` (fmt_ns), ``rate`` (fmt_count), ``mb_s`` (fmt_mb_s), ``pct`` (signed
    fmt_pct), ``upct`` (unsigned), ``size`` (fmt_size), ``cv`` (fmt_cv).
    """
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("cryptoperf.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True)
    env.filters.update(ns=fmt_ns, rate=fmt_count, mb_s=fmt_mb_s, size=fmt_size, cv=fmt_cv,
                       pct=fmt_pct, upct=lambda x: fmt_pct(x, signed=False))
    return env


def fragment(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``; returns HTML (values escaped; mark
    pre-rendered HTML such as an SVG with ``markupsafe.Markup``)."""
    return environment().get_template(template).render(**context)


def md_escape(text: Any) -> str:
    """``text`` made safe for one Markdown table cell (pipes escaped, newlines as spaces)."""
    return re.sub(r"\s+", " ", str(text)).replace("|", "\\|").strip()


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """A GitHub-flavoured Markdown table. ``align`` has one letter per column, ``l`` or ``r``
    (default: first column left, the others right). Ends with a newline."""
    align = align or "l" + "r" * (len(headers) - 1)
    rule = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_text(text: str, path: str | Path, fix: str = "pass -o PATH", unique: bool = False) -> Path:
    """Write ``text`` (UTF-8) to a new file at ``path``, creating directories; return the path
    written. Nothing is ever overwritten: the file appears whole or not at all (written aside,
    then hard-linked into place, which fails if the name is taken).

    With ``unique``, a taken name is replaced by the first free ``<stem>-2<suffix>``,
    ``<stem>-3<suffix>``, … (for names cryptoperf chose itself); without, a taken name is a
    StoreError naming it (for a name the user gave). Raises StoreError naming the path and
    ``fix`` if it cannot be written.
    """
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        for n in range(1, 10_000):
            target = p if n == 1 else p.with_name(f"{p.stem}-{n}{p.suffix}")
            try:
                os.link(tmp, target)
                return target
            except FileExistsError:
                if not unique:
                    raise StoreError(f"{target} exists and cryptoperf never overwrites a file; "
                                     f"remove it or {fix}") from None
        raise StoreError(f"no free name beside {p}; {fix}")
    except OSError as e:
        raise StoreError(f"cannot write {p}: {e.strerror or e}; {fix}") from None
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass
