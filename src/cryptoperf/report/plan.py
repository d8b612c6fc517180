"""The answer of ``cryptoperf plan`` in each of its formats: ``text`` (the terminal lines,
``terminal.plan_lines``), ``json`` (one document), ``md`` (a short answer to paste into a ticket
or a chat: the question as asked, the run and host it used, the figures with their intervals) and
``html`` (the same as one self-contained page: the reports' CSS inline, no scripts, nothing
fetched). Every format ends with what the intervals do not cover (``economics.CAVEAT``).

Formatting only: every figure comes from ``economics.plan``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from markupsafe import Markup

from cryptoperf import __version__
from cryptoperf.economics import PER_BLOCK_TOTALS, PlanResult
from cryptoperf.report.render import environment, md_table
from cryptoperf.report.terminal import (fmt_date, fmt_money, fmt_ns, fmt_size, host_line, plan_lines,
                                        term_name)
from cryptoperf.store import FORMAT_VERSION
from cryptoperf.stored import StoredRun

#: format → file extension
FORMATS = {"text": ".txt", "json": ".json", "md": ".md", "html": ".html"}


def render(result: PlanResult, run: StoredRun, fmt: str) -> str:
    """``result`` (from ``economics.plan`` on ``run``) as text in format ``fmt`` (a key of
    FORMATS), ending in a newline. Raises ValueError for an unknown format."""
    if fmt == "text":
        return "\n".join(plan_lines(result, run.meta)) + "\n"
    if fmt == "json":
        return json.dumps(document(result, run), indent=1) + "\n"
    if fmt == "md":
        return markdown(result, run)
    if fmt == "html":
        return html(result, run)
    raise ValueError(f"unknown plan format '{fmt}' (known: {', '.join(FORMATS)})")


def document(result: PlanResult, run: StoredRun) -> dict[str, Any]:
    """The JSON document: ``format_version``, ``kind`` = ``plan``, ``cryptoperf_version``, the
    run's study name and start, then ``PlanResult.as_dict`` (``caveat`` last)."""
    return {"format_version": FORMAT_VERSION, "kind": "plan", "cryptoperf_version": __version__,
            "study_name": run.meta.get("study_name"), "started_at": run.meta.get("started_at"),
            **result.as_dict()}


# --------------------------------------------------------------------------- what both md and html show

def _rate(result: PlanResult) -> str:
    return f"{format(result.rate_per_s, ',.10g')} {result.unit}"


def question(result: PlanResult) -> str:
    """The question in words: ``CPU for 2,000 requests/s of sign + x25519-keygen + x25519-derive
    (openssl), and the change from rsa to ecdsa``."""
    what = result.request if result.request is not None else result.op
    o = result.options
    narrow = [f"{k} {o[key]}" for key, k in (("configuration", "configuration"), ("backend", "backend"))
              if o.get(key) is not None]
    if o.get("size_bytes") is not None:
        narrow.append(f"size {fmt_size(o['size_bytes'])}")
    text = f"CPU for {_rate(result)} of {what}" + (f" ({', '.join(narrow)})" if narrow else "")
    more = []
    if result.change is not None:
        more.append(f"the change from {o.get('from_config')} to {o.get('to_config')}")
    if result.offload:
        more.append("when an accelerator pays for itself")
    if more:
        text += ", " + (f"{more[0]} and {more[1]}" if len(more) == 2 else more[0])
    return text


def side_label(result: PlanResult, i: int) -> str:
    """Side ``i`` as a table row names it: ``old (rsa2048-sign)`` for one operation (with its
    size, and its backend when that is not the side's name), ``ecdsa`` for a request (its terms
    have tables of their own)."""
    name = result.side_name(i)
    if result.requests:
        return name
    c = result.cells[i]
    parts = [" ".join(x for x in (c["op"], fmt_size(c["size_bytes"])) if x)]
    if c["backend"] != name:
        parts.append(c["backend"])
    return f"{name} ({', '.join(parts)})"


def _ci(low: float | None, high: float | None, f) -> str:
    return "—" if low is None else f"{f(low)} – {f(high)}"


def _cores(x: float) -> str:
    return f"{x:.3g}"


def _per_core(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def figures(result: PlanResult) -> list[dict[str, str]]:
    """One row per side (the only one, or before and after a change): ``side``, ``cpu``,
    ``cpu_ci``, ``per_core``, ``cores``, ``cores_ci``, ``cost`` (formatted)."""
    rows = []
    for i, c in enumerate(result.cores):
        cost = result.cost_per_year(c.cores)
        rows.append({"side": side_label(result, i), "cpu": fmt_ns(c.cpu.estimate_ns),
                     "cpu_ci": _ci(c.cpu.low_ns, c.cpu.high_ns, fmt_ns), "per_core": _per_core(c.ops_per_s_per_core),
                     "cores": _cores(c.cores), "cores_ci": _ci(c.cores_low, c.cores_high, _cores),
                     "cost": "—" if cost is None else fmt_money(cost)})
    return rows


def terms(result: PlanResult) -> list[dict[str, Any]]:
    """For a composite request, one entry per side: ``side``, ``method`` (in words) and
    ``rows`` (``term``, ``backend``, ``configuration``, ``cpu``, ``cpu_ci``, ``share``)."""
    out = []
    for i, req in enumerate(result.requests):
        rows = [{"term": term_name(t), "backend": t.cell["backend"], "configuration": t.cell["configuration"] or "—",
                 "cpu": fmt_ns(t.cpu.estimate_ns), "cpu_ci": _ci(t.cpu.low_ns, t.cpu.high_ns, fmt_ns),
                 "share": f"{t.cpu_ns_per_request / req.cpu.estimate_ns * 100:.3g} %"} for t in req.terms]
        out.append({"side": result.side_name(i), "method": req.method_text, "rows": rows,
                    "per_block": req.method == PER_BLOCK_TOTALS})
    return out


def change_text(result: PlanResult) -> str | None:
    """The change as one sentence, or None without --from/--to."""
    ch = result.change
    if ch is None:
        return None
    if ch.delta_low is None:
        ci = "no interval with fewer than 3 paired blocks"
    else:
        how = ("the terms' paired intervals summed, conservative" if ch.method == "summed intervals"
               else f"{ch.blocks} paired blocks")
        ci = f"95 % CI {ch.delta_low:+.3g} – {ch.delta_high:+.3g} cores, {how}"
    cost = result.cost_per_year(ch.delta_cores)
    money = "" if cost is None else f", {cost:+,.2f} per year of CPU"
    return (f"{result.side_name(0)} → {result.side_name(1)} at {_rate(result)}: {ch.before.cores:.3g} → "
            f"{ch.after.cores:.3g} cores, {ch.delta_cores:+.3g} cores ({ch.delta_pct:+.1f} %; {ci}){money}")


def offload_rows(result: PlanResult) -> list[dict[str, str]]:
    """One row per side with an accelerator: ``side``, ``break_even``, ``units``, ``net``,
    ``verdict``."""
    rows = []
    for i, o in enumerate(result.offload):
        rows.append({"side": side_label(result, i), "break_even": f"{o.break_even.rate_per_s:.4g} ops/s",
                     "units": str(o.units), "net": fmt_money(o.saving_per_year),
                     "verdict": "pays" if o.pays else "does not pay"})
    return rows


def _context(result: PlanResult, run: StoredRun) -> dict[str, Any]:
    m = run.meta
    study = m.get("study_name") or m.get("kind") or "run"
    return {"question": question(result), "command": result.command(), "run_id": result.run_id,
            "study": study, "started": fmt_date(m.get("started_at")),
            "host": host_line(run.host).removeprefix("host: "), "unit": result.unit, "rate": _rate(result),
            "per": "request" if result.request is not None else "operation",
            "figures": figures(result), "terms": terms(result), "change": change_text(result),
            "offload": offload_rows(result), "caveat": result.caveat, "version": __version__,
            "priced": result.core_price_per_year is not None}


# --------------------------------------------------------------------------- Markdown

def markdown(result: PlanResult, run: StoredRun) -> str:
    """A short Markdown answer: the question and the command that asks it, the run and host
    measured, the figures with 95 % intervals (and the terms of a composite request), the change
    and the accelerator when asked, and the caveat. Ends with a newline."""
    c = _context(result, run)
    out = [f"# {c['question']}\n",
           f"`{c['command']}`\n",
           f"Measured in run {c['run_id']} ({c['study']}, {c['started']}) on {c['host']}.\n"]
    headers = ["", f"CPU per {c['per']}", "95 % CI", f"{c['unit']} per core", f"cores at {c['rate']}", "95 % CI"]
    rows = [[f["side"], f["cpu"], f["cpu_ci"], f["per_core"], f["cores"], f["cores_ci"]] for f in c["figures"]]
    if c["priced"]:
        headers.append("CPU per year")
        for r, f in zip(rows, c["figures"]):
            r.append(f["cost"])
    out.append(md_table(headers, rows))
    for t in c["terms"]:
        out.append(f"Request, {t['side']}:\n\n" + md_table(
            ["term", "backend", "configuration", "CPU per op", "95 % CI", "share"],
            [[r["term"], r["backend"], r["configuration"], r["cpu"], r["cpu_ci"], r["share"]] for r in t["rows"]],
            align="lllrrr") + f"\nInterval: {t['method']}.\n")
    if c["change"]:
        out.append(f"**Change** {c['change']}.\n")
    if c["offload"]:
        out.append("Accelerator:\n\n" + md_table(
            ["", "break-even", f"units at {c['rate']}", "net saving per year", ""],
            [[r["side"], r["break_even"], r["units"], r["net"], r["verdict"]] for r in c["offload"]]))
    out.append(f"**Not covered.** {c['caveat']}\n")
    return "\n".join(out)


# --------------------------------------------------------------------------- HTML

_STYLE = re.compile(r"<style>(.*?)</style>", re.DOTALL)


def report_css() -> str:
    """The CSS of the HTML report (``templates/report.html.j2``), so that a plan page looks
    like a report; '' if that template has no ``<style>`` element."""
    env = environment()
    assert env.loader is not None
    source, _, _ = env.loader.get_source(env, "report.html.j2")
    m = _STYLE.search(source)
    return m.group(1).strip() if m else ""


def html(result: PlanResult, run: StoredRun) -> str:
    """The answer as one self-contained HTML page (inline CSS, no scripts, nothing loaded from
    the network), with what the Markdown holds."""
    return environment().get_template("plan.html.j2").render(css=Markup(report_css()), **_context(result, run))


# --------------------------------------------------------------------------- files

def default_path(out_dir: str | Path, run: StoredRun, fmt: str) -> Path:
    """``<out_dir>/plan-run<id>.<ext>`` (written with ``render.write_text(..., unique=True)``:
    ``plan-run<id>-2.<ext>`` and so on when taken)."""
    return Path(out_dir) / f"plan-run{run.id}{FORMATS[fmt]}"
