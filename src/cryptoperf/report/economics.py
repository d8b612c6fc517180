"""The answer of ``cryptoperf plan`` (an ``economics.PlanResult``) in each of its formats:
``text`` (the terminal lines), ``json`` (one document), ``md`` (a short answer to paste into a
ticket or a chat: the question as asked, the run and host it used, whose CPU it priced, the
figures with their intervals) and ``html`` (the same as one self-contained page: the reports'
CSS inline, no scripts, nothing fetched). Every format names the side whose CPU was priced
(server, client, both, or the worker's), says whether a composite request carries the measured
non-crypto remainder, and ends with what the intervals do not cover (``economics.CAVEAT``).

Formatting only: every figure comes from ``economics.plan``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from markupsafe import Markup

from cryptoperf import __version__, stats
from cryptoperf.economics import PER_BLOCK_TOTALS, SIDE_TEXT, SUMMED_INTERVALS, PlanResult
from cryptoperf.report.render import environment, md_table
from cryptoperf.report.text import fmt_cores, fmt_date, fmt_money, fmt_ns, fmt_size, host_line
from cryptoperf.store.db import FORMAT_VERSION
from cryptoperf.store.stored_run import StoredRun

#: format → file extension
FORMATS = {"text": ".txt", "json": ".json", "md": ".md", "html": ".html"}


def render(result: PlanResult, run: StoredRun, fmt: str) -> str:
    """``result`` (from ``economics.plan`` on ``run``) as text in format ``fmt`` (a key of
    FORMATS), ending in a newline. Raises ValueError for an unknown format."""
    if fmt == "text":
        return "\n".join(text_lines(result, run.meta)) + "\n"
    if fmt == "json":
        return json.dumps(document(result, run), indent=1) + "\n"
    if fmt == "md":
        return markdown(result, run)
    if fmt == "html":
        return html(result, run)
    raise ValueError(f"unknown plan format '{fmt}' (known: {', '.join(FORMATS)})")


def document(result: PlanResult, run: StoredRun) -> dict[str, Any]:
    """The JSON document: ``format_version``, ``kind`` = ``plan``, ``cryptoperf_version``, the
    run's study name and start, then ``PlanResult.as_dict`` (``side`` among it, ``caveat``
    last)."""
    return {"format_version": FORMAT_VERSION, "kind": "plan", "cryptoperf_version": __version__,
            "study_name": run.meta.get("study_name"), "started_at": run.meta.get("started_at"),
            **result.as_dict()}


# --------------------------------------------------------------------------- what every format says

def _rate(result: PlanResult) -> str:
    return f"{format(result.rate_per_s, ',.10g')} {result.unit}"


def _per_core(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _ci(low: float | None, high: float | None, f) -> str:
    return "—" if low is None else f"{f(low)} – {f(high)}"


def _cores(x: float) -> str:
    return f"{x:.3g}"


def _where(cell: Mapping) -> str:
    conf = f", configuration {cell['configuration']}" if cell["configuration"] else ""
    return f"on {cell['backend']}{conf}"


def term_name(term) -> str:
    """A term of a composite request (``economics.Term``) as shown: ``2 × x25519-derive``,
    ``sign (rsa2048-sign)`` when it was named by a study label, ``4 × sha256 1 KiB`` with a
    message size."""
    count = f"{term.count:g} × " if term.count != 1 else ""
    op = f" ({term.cell['op']})" if term.cell["op"] != term.name else ""
    size = f" {fmt_size(term.cell['size_bytes'])}" if term.cell.get("size_bytes") is not None else ""
    return f"{count}{term.name}{op}{size}"


def side_phrase(result: PlanResult) -> str:
    """Whose CPU was priced, as a phrase: ``the server CPU per transaction (the server process's
    CPU ÷ the server's own transactions); --side client, both for the others``."""
    if result.request is not None:
        text = f"the {SIDE_TEXT['process']} of each primitive (its threads' CPU ÷ operations)"
        rem = result.remainder
        if rem is not None:
            text += (f", plus the non-crypto remainder: the {SIDE_TEXT[rem.side]} per transaction of "
                     f"{rem.cell['cell']} in run {rem.run_id} minus those primitives")
        return text
    if result.side == "process":
        return f"the {SIDE_TEXT['process']} per {result.per} (its threads' CPU ÷ {result.per}s)"
    what = {"server": "the server process's CPU ÷ the server's own transactions",
            "client": "the client's CPU ÷ its transactions",
            "both": "the server's and the client's CPU per transaction added up"}[result.side]
    others = ", ".join(s for s in ("server", "client", "both") if s != result.side)
    return f"the {SIDE_TEXT[result.side]} per transaction ({what}); --side {others} for the others"


def remainder_sentence(result: PlanResult) -> str | None:
    """The remainder with its interval, or that it is left out; None for one operation."""
    rem = result.remainder
    if rem is None:
        return result.remainder_note
    ci = ("no interval" if rem.low_ns is None else
          f"{rem.level * 100:.3g} % CI {fmt_ns(rem.low_ns)} – {fmt_ns(rem.high_ns)}, conservative: the "
          "workload's and the primitives' intervals subtracted crosswise")
    return (f"Non-crypto remainder {fmt_ns(rem.estimate_ns)} per request ({ci}): the {SIDE_TEXT[rem.side]} "
            f"per transaction of {rem.cell['cell']} in run {rem.run_id}, {fmt_ns(rem.measured.estimate_ns)}, "
            f"minus the request's primitives, {fmt_ns(rem.primitives.cpu.estimate_ns)}; taken to stay the same "
            "when only the primitives change.")


def question(result: PlanResult) -> str:
    """The question in words: ``CPU for 2,000 requests/s of sign + x25519-keygen + x25519-derive
    (openssl), and the change from rsa to ecdsa``; ``Server CPU for …`` for a workload."""
    what = result.request if result.request is not None else result.op
    o = result.options
    narrow = [f"{k} {o[key]}" for key, k in (("configuration", "configuration"), ("backend", "backend"))
              if o.get(key) is not None]
    if o.get("size_bytes") is not None:
        narrow.append(f"size {fmt_size(o['size_bytes'])}")
    cpu = "CPU" if result.side == "process" and result.remainder is None else result.side_text
    cpu = cpu[0].upper() + cpu[1:]
    text = f"{cpu} for {_rate(result)} of {what}" + (f" ({', '.join(narrow)})" if narrow else "")
    more = []
    if result.change is not None:
        more.append(f"the change from {o.get('from_config')} to {o.get('to_config')}")
    if result.offload:
        more.append("when an accelerator pays for itself")
    if more:
        text += ", " + (f"{more[0]} and {more[1]}" if len(more) == 2 else more[0])
    return text


def config_label(result: PlanResult, i: int) -> str:
    """Configuration ``i`` as a table row names it: ``old (rsa2048-sign)`` for one operation
    (with its size, and its backend when that is not the configuration's name), ``ecdsa`` for
    a request (its terms have tables of their own)."""
    name = result.config_name(i)
    if result.requests:
        return name
    c = result.cells[i]
    parts = [" ".join(x for x in (c["op"], fmt_size(c["size_bytes"])) if x)]
    if c["backend"] != name:
        parts.append(c["backend"])
    return f"{name} ({', '.join(parts)})"


def figures(result: PlanResult) -> list[dict[str, str]]:
    """One row per configuration (the only one, or before and after a change): ``config``,
    ``cpu``, ``cpu_ci``, ``per_core``, ``cores``, ``cores_ci``, ``cost`` (formatted)."""
    rows = []
    for i, c in enumerate(result.cores):
        cost = result.cost_per_year(c.cores)
        rows.append({"config": config_label(result, i), "cpu": fmt_ns(c.cpu.estimate_ns),
                     "cpu_ci": _ci(c.cpu.low_ns, c.cpu.high_ns, fmt_ns), "per_core": _per_core(c.ops_per_s_per_core),
                     "cores": _cores(c.cores), "cores_ci": _ci(c.cores_low, c.cores_high, _cores),
                     "cost": "—" if cost is None else fmt_money(cost)})
    return rows


def terms(result: PlanResult) -> list[dict[str, Any]]:
    """For a composite request, one entry per configuration: ``config``, ``method`` (in
    words) and ``rows`` (``term``, ``backend``, ``configuration``, ``cpu``, ``cpu_ci``,
    ``share`` of the primitives)."""
    out = []
    for i, req in enumerate(result.requests):
        rows = [{"term": term_name(t), "backend": t.cell["backend"], "configuration": t.cell["configuration"] or "—",
                 "cpu": fmt_ns(t.cpu.estimate_ns), "cpu_ci": _ci(t.cpu.low_ns, t.cpu.high_ns, fmt_ns),
                 "share": f"{t.cpu_ns_per_request / req.cpu.estimate_ns * 100:.3g} %"} for t in req.terms]
        out.append({"config": result.config_name(i), "method": req.method_text, "rows": rows,
                    "primitives": fmt_ns(req.cpu.estimate_ns), "per_block": req.method == PER_BLOCK_TOTALS})
    return out


def change_text(result: PlanResult, money: bool = True) -> str | None:
    """The change as one sentence (with its cost per year when priced and ``money``), or None
    without --from/--to."""
    ch = result.change
    if ch is None:
        return None
    if ch.delta_low is None:
        ci = f"no interval with fewer than {stats.MIN_BLOCKS} paired blocks"
    else:
        how = ("the terms' paired intervals summed, conservative" if ch.method == SUMMED_INTERVALS
               else f"{ch.blocks} paired blocks")
        ci = f"95 % CI {ch.delta_low:+.3g} – {ch.delta_high:+.3g} cores, {how}"
    cost = result.cost_per_year(ch.delta_cores) if money else None
    ops = ""
    if not result.requests and result.cells[0]["op"] != result.cells[1]["op"]:
        ops = f" ({result.cells[0]['op']} → {result.cells[1]['op']})"
    return (f"{result.config_name(0)} → {result.config_name(1)}{ops} at {_rate(result)}, {result.side_text}: "
            f"{ch.before.cores:.3g} → {ch.after.cores:.3g} cores, {ch.delta_cores:+.3g} cores "
            f"({ch.delta_pct:+.1f} %; {ci})" + ("" if cost is None else f", {cost:+,.2f} per year of CPU"))


def offload_rows(result: PlanResult) -> list[dict[str, str]]:
    """One row per configuration with an accelerator: ``config``, ``break_even``, ``units``,
    ``net``, ``verdict``."""
    rows = []
    for i, o in enumerate(result.offload):
        rows.append({"config": config_label(result, i), "break_even": f"{o.break_even.rate_per_s:.4g} ops/s",
                     "units": str(o.units), "net": fmt_money(o.saving_per_year),
                     "verdict": "pays" if o.pays else "does not pay"})
    return rows


# --------------------------------------------------------------------------- text (the terminal)

def _ci_ns(cpu) -> str:
    return (f"95 % CI {fmt_ns(cpu.low_ns)} – {fmt_ns(cpu.high_ns)}" if cpu.low_ns is not None
            else f"no CI with fewer than {stats.MIN_BLOCKS} repetitions")


def _cores_line(c) -> str:
    return (f"  cores needed       {fmt_cores(c.cores)}"
            + (f"; 95 % CI {c.cores_low:.3g} – {c.cores_high:.3g}" if c.cores_low is not None else "")
            + f"; range {c.cores_min:.3g} – {c.cores_max:.3g}")


def _price_line(result: PlanResult, cores: float) -> list[str]:
    if result.core_price_per_year is None:
        return []
    return [f"  CPU cost           {fmt_money(result.cost_per_year(cores))} per year "
            f"(at {fmt_money(result.core_price_per_year)} per core-year)"]


def _request_lines(result: PlanResult) -> list[str]:
    lines = []
    for req, c in zip(result.requests, result.cores):
        cpu = req.cpu
        cells = [t.cell for t in req.terms]
        common = {_where(x) for x in cells}
        lines.append(f"request {_where(cells[0])}:" if len(common) == 1 else "request:")
        names = [term_name(t) for t in req.terms]
        width = max(map(len, names))
        of = "primitives" if result.remainder is not None else "request"
        for t, name in zip(req.terms, names):
            where = "" if len(common) == 1 else f" {_where(t.cell)}"
            share = t.cpu_ns_per_request / cpu.estimate_ns * 100 if cpu.estimate_ns else 0.0
            lines.append(f"  {name:<{width}}  {fmt_ns(t.cpu.estimate_ns)} per op "
                         f"({_ci_ns(t.cpu)}){where}, {share:.3g} % of the {of}")
        how = (f"geometric mean of the per-block totals over {cpu.repetitions} blocks"
               if req.method == PER_BLOCK_TOTALS else "sum of the terms' geometric means")
        label = "primitives" if result.remainder is not None else "CPU per request"
        lines += [f"  {label:<17}  {fmt_ns(cpu.estimate_ns)} ({how}; {_ci_ns(cpu)}, "
                  f"range {fmt_ns(cpu.min_ns)} – {fmt_ns(cpu.max_ns)})",
                  f"  interval           {req.method_text}"]
        if result.remainder is not None:
            lines.append(f"  CPU per request    {fmt_ns(c.cpu.estimate_ns)} (primitives + remainder; "
                         f"{_ci_ns(c.cpu)})")
        lines += [f"  one core sustains  {_per_core(c.ops_per_s_per_core)} requests/s (single thread: "
                  "1e9 / CPU ns per request)", _cores_line(c), *_price_line(result, c.cores)]
    return lines


def _op_lines(result: PlanResult) -> list[str]:
    lines = []
    label = f"{'CPU per ' + ('operation' if result.per == 'operation' else 'tx'):<17}"
    for cell, c in zip(result.cells, result.cores):
        cpu = c.cpu
        what = f"{cell['op']} {fmt_size(cell['size_bytes'])}".strip()
        if result.per == "transaction":
            what = cell["label"]
        lines += [
            f"{what} {_where(cell)}:",
            f"  {label}  {fmt_ns(cpu.estimate_ns)} ({result.side_text}; geometric mean of {cpu.repetitions} "
            f"repetition{'s' if cpu.repetitions != 1 else ''}; "
            f"{_ci_ns(cpu)}, range {fmt_ns(cpu.min_ns)} – {fmt_ns(cpu.max_ns)})",
            f"  one core sustains  {_per_core(c.ops_per_s_per_core)} {result.unit} (single thread: 1e9 / CPU ns "
            f"per {result.per})",
            _cores_line(c), *_price_line(result, c.cores),
        ]
    return lines


def _offload_lines(result: PlanResult, rate: str) -> list[str]:
    acc = result.offload[0].accelerator
    host = f", host CPU {fmt_ns(acc.host_cpu_ns_per_op)} per offloaded op" if acc.host_cpu_ns_per_op else ""
    lines = [f"accelerator: {acc.ops_per_s_per_unit:g} ops/s per unit, {fmt_money(acc.price_per_year)} "
             f"per unit-year, at least {acc.min_units} unit(s){host}; core "
             f"{fmt_money(result.offload[0].core_price_per_year)} per year"]
    if acc.measured_note:
        lines.append(f"  {acc.measured_note}")
    for cell, o in zip(result.cells, result.offload):
        be = o.break_even
        first = (f" (saves from {be.first_rate_per_s:.4g} ops/s, but not at every rate below "
                 f"{be.rate_per_s:.4g}: each unit added as the load passes a unit's capacity costs more "
                 f"than it saves at first)" if be.first_rate_per_s < be.rate_per_s else "")
        verdict = "pays" if o.pays else "does not pay"
        label = f"{cell['configuration']} ({cell['op']})" if cell["configuration"] else cell["op"]
        lines += [
            f"  {label}: break-even {be.rate_per_s:.4g} ops/s{first}",
            f"    at {rate} ops/s: offload saves {fmt_cores(o.cores_saved)} = "
            f"{fmt_money(o.cost_software_per_year - o.cores_host * o.core_price_per_year)} per year of CPU",
            f"    for {o.units} unit(s) at {fmt_money(o.units * acc.price_per_year)} per year: "
            f"net {fmt_money(o.saving_per_year)} per year — {verdict} at this rate",
        ]
        if acc.latency_ns is not None:
            lines.append(f"    latency: accelerator {fmt_ns(acc.latency_ns)} vs software p50 "
                         f"{fmt_ns(o.software_latency_ns)}")
    return lines


def text_lines(result: PlanResult, run_meta: Mapping) -> list[str]:
    """``cryptoperf plan`` as text lines: whose CPU; (a) CPU per operation (per transaction,
    or per composite request term by term, with the remainder or that it is left out) with
    its CI and spread, single-core capacity, cores at the rate; (b) the change with
    --from/--to; (c) the accelerator break-even and what offloading saves at the rate; last,
    what the intervals do not cover."""
    rate = format(result.rate_per_s, ",.10g")  # 9.6, 1,000,000
    asked = f" of {result.request}" if result.request is not None else ""
    lines = [f"run {result.run_id} ({run_meta.get('study_name') or run_meta.get('kind')}, "
             f"{fmt_date(run_meta.get('started_at'))}), at {rate} {result.unit}{asked}:",
             f"priced with {side_phrase(result)}"]
    rem = remainder_sentence(result)
    if rem:
        lines.append(rem)
    lines += _request_lines(result) if result.requests else _op_lines(result)
    if result.change is not None:
        lines.append(f"change {change_text(result, money=False)}")
        if result.core_price_per_year is not None:
            lines.append(f"  = {result.cost_per_year(result.change.delta_cores):+,.2f} per year of CPU")
    if result.offload:
        lines += _offload_lines(result, rate)
    lines.append(f"caveat: {result.caveat}")
    return lines


# --------------------------------------------------------------------------- Markdown

def _context(result: PlanResult, run: StoredRun) -> dict[str, Any]:
    m = run.meta
    study = m.get("study_name") or m.get("kind") or "run"
    return {"question": question(result), "command": result.command(), "run_id": result.run_id,
            "study": study, "started": fmt_date(m.get("started_at")),
            "host": host_line(run.host).removeprefix("host: "), "unit": result.unit, "rate": _rate(result),
            "per": result.per, "side": f"Priced with {side_phrase(result)}.", "remainder": remainder_sentence(result),
            "cpu_header": f"{result.side_text} per {result.per}",
            "figures": figures(result), "terms": terms(result), "change": change_text(result),
            "offload": offload_rows(result),
            "accelerator_note": result.offload[0].accelerator.measured_note if result.offload else None,
            "caveat": result.caveat, "version": __version__,
            "priced": result.core_price_per_year is not None}


def markdown(result: PlanResult, run: StoredRun) -> str:
    """A short Markdown answer: the question and the command that asks it, the run and host
    measured, whose CPU, the figures with 95 % intervals (and the terms of a composite request
    with its remainder, or that it is left out), the change and the accelerator when asked,
    and the caveat. Ends with a newline."""
    c = _context(result, run)
    out = [f"# {c['question']}\n",
           f"`{c['command']}`\n",
           f"Measured in run {c['run_id']} ({c['study']}, {c['started']}) on {c['host']}.\n",
           f"{c['side']}\n"]
    if c["remainder"]:
        out.append(f"{c['remainder']}\n")
    headers = ["", c["cpu_header"], "95 % CI", f"{c['unit']} per core", f"cores at {c['rate']}", "95 % CI"]
    rows = [[f["config"], f["cpu"], f["cpu_ci"], f["per_core"], f["cores"], f["cores_ci"]] for f in c["figures"]]
    if c["priced"]:
        headers.append("CPU per year")
        for r, f in zip(rows, c["figures"]):
            r.append(f["cost"])
    out.append(md_table(headers, rows))
    for t in c["terms"]:
        out.append(f"Request, {t['config']} (primitives {t['primitives']}):\n\n" + md_table(
            ["term", "backend", "configuration", "CPU per op", "95 % CI", "share"],
            [[r["term"], r["backend"], r["configuration"], r["cpu"], r["cpu_ci"], r["share"]] for r in t["rows"]],
            align="lllrrr") + f"\nInterval: {t['method']}.\n")
    if c["change"]:
        out.append(f"**Change** {c['change']}.\n")
    if c["offload"]:
        out.append("Accelerator" + (f" ({c['accelerator_note']})" if c["accelerator_note"] else "") + ":\n\n" + md_table(
            ["", "break-even", f"units at {c['rate']}", "net saving per year", ""],
            [[r["config"], r["break_even"], r["units"], r["net"], r["verdict"]] for r in c["offload"]]))
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
