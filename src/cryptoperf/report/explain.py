"""How an explanation is shown: the functions that take a CPU difference, from the explain
document (``explain.pair``), which ``--json`` prints and the store keeps — one ``view`` of it that
the terminal, the Markdown and the HTML report each lay out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cryptoperf.explain.attribution import Attribution
from cryptoperf.explain.extensions import MaskRow
from cryptoperf.report.render import md_table
from cryptoperf.report.text import fmt_ns

#: Rows shown: the ones covering this share of the change, at least AT_LEAST, at most AT_MOST.
COVERING, AT_LEAST, AT_MOST = 0.9, 8, 15
#: Functions named in the summary line.
NAMED = 8


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "−") + fmt_ns(abs(ns))


def _interval(e) -> str:
    if e.low is None or e.high is None:
        return _signed(e.value)
    return f"{_signed(e.value)} [{_signed(e.low)}, {_signed(e.high)}]"


@dataclass(frozen=True)
class View:
    """An explanation as every output shows it: the ``lead`` line, the table (``columns``,
    ``rows`` of formatted cells: the functions that take most of the change), the ``notes``
    under it (what the top rows add up to, what the study measured, the sampling cost), and the
    same change per library (``library_columns``, ``libraries``; empty for one library)."""

    lead: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...]
    library_columns: tuple[str, ...] = ()
    libraries: tuple[tuple[str, ...], ...] = ()


def view(doc: Mapping[str, Any]) -> View:
    """The ``View`` of an explain document (``explain.pair.explain_pair``'s, or a stored one)."""
    att = Attribution.from_dict(doc["attribution"])
    size = f" ({doc['size_bytes']} B)" if doc.get("size_bytes") else ""
    lead = (f"{doc['operation']}{size} on {doc['backend']}: {doc['configuration']} against {doc['reference']}, "
            f"{att.blocks} profiled blocks: CPU per operation {fmt_ns(att.a_ns)} → {fmt_ns(att.b_ns)}, "
            f"change {_interval(att.total)} (95 %)")
    decided = att.decided
    rows = list(att.top(COVERING)) if decided else []
    rows = (rows + [r for r in att.rows[len(rows):AT_LEAST]])[:AT_MOST]
    tail = (f"{doc['reference']} ns/op", f"{doc['configuration']} ns/op", "change ns/op (95 % CI)", "share")

    def cells(rs) -> tuple[tuple[str, ...], ...]:
        return tuple((r.function, fmt_ns(r.a_ns), fmt_ns(r.b_ns), _interval(r.change),
                      f"{100 * r.share:.0f} %" if decided else "—") for r in rs)

    libs = [r for r in att.libraries if abs(r.change.value) >= 0.005 * abs(att.total.value)][:AT_MOST]
    return View(lead, ("function (library)", *tail), cells(rows), tuple(_notes(doc, att)),
                ("library", *tail) if len(att.libraries) > 1 else (),
                cells(libs) if len(att.libraries) > 1 else ())


def _notes(doc: Mapping[str, Any], att: Attribution) -> list[str]:
    notes = []
    if not att.decided:
        moved = [r.function for r in att.rows if r.change.low is not None and (r.change.low > 0 or r.change.high < 0)]
        notes.append(f"the total change is not distinguishable from 0 in {att.blocks} profiled blocks, so no share "
                     "of it is given (more --blocks would sharpen it)")
        if moved:
            names = ", ".join(moved[:NAMED]) + (f" and {len(moved) - NAMED} more" if len(moved) > NAMED else "")
            notes.append(f"{len(moved)} function(s) changed beyond their own intervals (the work moved between "
                         f"them): {names}")
    else:
        top = att.top()
        names = ", ".join(r.function for r in top[:NAMED]) + (f" and {len(top) - NAMED} more" if len(top) > NAMED else "")
        notes.append(f"{len(top)} function(s) add up to {100 * att.top_share():.0f} % of the change: {names}")
        if len(att.libraries) > 1:
            libs = att.top(rows=att.libraries)
            share = sum(r.share for r in libs)
            notes.append(f"by library, {len(libs)} add up to {100 * share:.0f} % of it: "
                         + ", ".join(f"{r.function} {_signed(r.change.value)}" for r in libs[:NAMED]))
    m, k = doc.get("measured"), doc.get("scale") or {}
    if m and "a_ns_per_op" in m:
        notes.append(f"the study's own {m['blocks']} blocks measured {fmt_ns(m['a_ns_per_op'])} → "
                     f"{fmt_ns(m['b_ns_per_op'])} per operation, a change of {_signed(m['change_ns_per_op'])} "
                     f"[{_signed(m['low'])}, {_signed(m['high'])}] (run {doc['run']}, the same processes' CPU)")
        if k.get("to") == "study":
            notes.append(f"on the study's scale: each side's profile is scaled to the study's CPU per operation "
                         f"(× {k['reference']:.3f} and × {k['configuration']:.3f}), so the parts add up to the "
                         "study's change; the interval is the profiled blocks'")
    elif m:
        notes.append(f"the study measured a change of {_signed(m['change_ns_per_op'])} "
                     f"[{_signed(m['low'])}, {_signed(m['high'])}] per operation (run {doc['run']})")
    else:
        notes.append(f"run {doc['run']} has too few measured blocks of this pair to set beside it")
    cost = doc.get("sampling_cost")
    if cost is not None and doc.get("sampling_cost_from") == "cpu_per_op":
        notes.append(f"sampling cost: the profiled repetitions took {100 * cost:+.1f} % CPU per operation against "
                     "the study's own (the sampler's work on every sample; none of their figures enters the study)")
    elif cost is not None:
        notes.append(f"sampling cost: the profiled repetitions ran at {100 * (1 + cost):.0f} % of the study's "
                     "ops/s (none of their figures enters the study)")
    if att.window_share < 0.8:
        notes.append(f"the measured window was {100 * att.window_share:.0f} % of the CPU sampled in the worker "
                     "(start-up, known-answer tests and warm-up are the rest, spread over the window's functions); "
                     "a study with longer seconds sharpens it")
    return notes


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """A Rich table of formatted cells: the first column left, the figures right."""
    t = Table(show_lines=False)
    for i, name in enumerate(columns):
        t.add_column(escape(name), justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*(escape(c) for c in r))
    return t


def print_attribution(console: Console, doc: Mapping[str, Any]) -> None:
    """Print the explanation's ``view``: its lead line, table and notes."""
    v = view(doc)
    console.print(escape(v.lead))
    console.print(_table(v.columns, v.rows))
    if v.libraries:
        console.print(_table(v.library_columns, v.libraries))
    for note in v.notes:
        console.print(escape(note))


def markdown(doc: Mapping[str, Any]) -> str:
    """The explanation's ``view`` as Markdown: lead, table, notes."""
    v = view(doc)
    parts = [v.lead, md_table(list(v.columns), [list(r) for r in v.rows], align="lrrrr")]
    if v.libraries:
        parts.append(md_table(list(v.library_columns), [list(r) for r in v.libraries], align="lrrrr"))
    return "\n\n".join([*parts, "\n".join(f"- {n}" for n in v.notes)])


def print_extensions(console: Console, doc: Mapping[str, Any], rows: "list[MaskRow]") -> None:
    """Print the extension attribution: per mask, what it clears here, the p50 latency change
    with its interval, the verdict and the share of the slowdowns; then what the operation
    depends on."""
    t = Table()
    for name, justify in (("mask", "left"), ("clears (present here)", "left"), ("p50 latency masked", "right"),
                          ("verdict", "left"), ("share", "right")):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        change = f"{100 * (r.ratio - 1):+.1f} % [{100 * (r.low - 1):+.1f}, {100 * (r.high - 1):+.1f}]"
        t.add_row(r.name, ", ".join(r.clears), change, escape(r.text),
                  f"{100 * r.share:.0f} %" if r.share is not None else "—")
    console.print(f"{doc['operation']} on {doc['backend']}: each extension group masked alone against all of "
                  f"them (run {doc['run']})")
    console.print(t)
    dep = doc["depends_on"]
    console.print(f"{doc['operation']} depends on: {', '.join(dep)}" if dep else
                  f"{doc['operation']} depends on none of the groups masked (at this noise)")
    if doc.get("shared_flags"):
        console.print(f"every group it depends on clears {', '.join(doc['shared_flags'])}: the groups overlap there, "
                      "so that is the likelier cause, and their shares overlap too")
    inter = doc.get("interaction")
    console.print(escape(inter["text"]) if inter else
                  "whether the groups add up was not measured (fewer than two groups to mask at once, or a side "
                  "did not measure)")

