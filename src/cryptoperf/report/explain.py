"""The terminal table of ``cryptoperf explain``: the functions that take a CPU difference, from
the attribution's document (``cli.explain``), which is also what ``--json`` prints."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cryptoperf.explain.attribution import Attribution
from cryptoperf.explain.extensions import MaskRow
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


def print_attribution(console: Console, doc: Mapping[str, Any], att: Attribution) -> None:
    """Print the attribution: a lead line with the total change, the table of the functions
    that take most of it, and what the study measured and what sampling cost."""
    console.print(f"{doc['operation']} on {doc['backend']}: {doc['configuration']} against {doc['reference']}, "
                  f"{att.blocks} profiled blocks: CPU per operation {fmt_ns(att.a_ns)} → {fmt_ns(att.b_ns)}, "
                  f"change {_interval(att.total)} (95 %)")
    decided = att.total.low is not None and (att.total.low > 0 or att.total.high < 0)
    rows = list(att.top(COVERING)) if decided else []
    rows = (rows + [r for r in att.rows[len(rows):AT_LEAST]])[:AT_MOST]
    t = Table(show_lines=False)
    for name, justify in (("function (library)", "left"), (f"{doc['reference']} ns/op", "right"),
                          (f"{doc['configuration']} ns/op", "right"), ("change ns/op (95 % CI)", "right"),
                          ("share", "right")):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(escape(r.function), fmt_ns(r.a_ns), fmt_ns(r.b_ns), _interval(r.change),
                  f"{100 * r.share:.0f} %" if decided else "—")
    console.print(t)
    top = att.top()
    if not decided:
        moved = [r.function for r in att.rows if r.change.low is not None and (r.change.low > 0 or r.change.high < 0)]
        console.print(f"the total change is not distinguishable from 0 in {att.blocks} profiled blocks, so no share of "
                      "it is given (more --blocks would sharpen it)")
        if moved:
            names = ", ".join(moved[:NAMED]) + (f" and {len(moved) - NAMED} more" if len(moved) > NAMED else "")
            console.print(escape(f"{len(moved)} function(s) changed beyond their own intervals (the work moved "
                                 f"between them): {names}"))
    else:
        names = ", ".join(r.function for r in top[:NAMED]) + (f" and {len(top) - NAMED} more" if len(top) > NAMED else "")
        console.print(escape(f"{len(top)} function(s) add up to {100 * att.top_share():.0f} % of the change: {names}"))
    m = doc.get("measured")
    if m:
        console.print(f"the study measured a change of {_signed(m['change_ns_per_op'])} "
                      f"[{_signed(m['low'])}, {_signed(m['high'])}] per operation (run {doc['run']})")
    else:
        console.print(f"run {doc['run']} has no CPU comparison of this pair to set beside it")
    if doc.get("sampling_cost") is not None:
        console.print(f"sampling cost: the profiled repetitions ran at {100 * (1 + doc['sampling_cost']):.0f} % "
                      "of the study's ops/s (none of their figures enters the study)")
    if att.window_share < 0.8:
        console.print(f"note: the measured window was {100 * att.window_share:.0f} % of the CPU sampled in the "
                      "worker (start-up, known-answer tests and warm-up are the rest, spread over the window's "
                      "functions); a study with longer seconds sharpens it")


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
    console.print("each group alone; whether they add up when masked together is not measured")

