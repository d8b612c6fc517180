"""``cryptoperf gate``: the baseline's and the candidate's worker builds in one study, paired
block by block; exit 1 when the candidate is slower (``engine.gate``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Sequence

import click

from cryptoperf import compare, cpumask, engine
from cryptoperf.cli.app import cli, err_console, out_console
from cryptoperf.cli.measure import SizeType, _speed_params
from cryptoperf.engine import DEFAULT_OUT_DIR, gate as gate_mod
from cryptoperf.engine.speed import check_names
from cryptoperf.report import json as report_json
from cryptoperf.report import study_text, terminal
from cryptoperf.report.text import host_line, verdict_counts
from cryptoperf.store.db import shown_default


def _duration(seconds: float) -> str:
    """``4 min 12 s`` / ``38 s``."""
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s" if m else f"{s} s"


@cli.command()
@click.option("--baseline-worker", required=True, type=click.Path(dir_okay=False), metavar="PATH",
              help="The baseline's worker binary (e.g. the main branch's build of cryptoperf-worker).")
@click.option("--candidate-worker", required=True, type=click.Path(dir_okay=False), metavar="PATH",
              help="The candidate's worker binary (the change's build).")
@click.option("--op", "-o", "ops", multiple=True, required=True, metavar="OP",
              help="An operation to gate (repeatable), as `cryptoperf backends` names it: rsa2048-sign, "
                   "aes-128-gcm-seal, sha256, ...")
@click.option("--backend", "-b", "backends", multiple=True, metavar="B",
              help="Backend both builds run the operations on (repeatable) [default: openssl].")
@click.option("--size", "-s", "sizes", multiple=True, metavar="SIZE", type=SizeType(),
              help="Message size for the operations that take one (repeatable): bytes, or 16k, 1M.")
@click.option("--param", "-p", "param_values", multiple=True, metavar="NAME=VALUE",
              help="A worker parameter for every operation that takes it, e.g. --param digest=sha384.")
@click.option("--blocks", type=click.IntRange(3, 1000), default=gate_mod.DEFAULT_BLOCKS, show_default=True,
              help="Blocks at the first look (each runs both builds of every operation once).")
@click.option("--max-blocks", type=click.IntRange(3, 1000), default=gate_mod.DEFAULT_MAX_BLOCKS, show_default=True,
              help="Most blocks: undecided operations get more blocks, up to this (sequential looks, adjusted for).")
@click.option("--seconds", type=click.FloatRange(0, None, min_open=True), default=gate_mod.DEFAULT_SECONDS,
              show_default=True, help="Measuring budget of one repetition, s.")
@click.option("--warmup", "warmup_s", type=click.FloatRange(0, None), default=gate_mod.DEFAULT_WARMUP_S,
              show_default=True, help="Warm-up of one repetition, s.")
@click.option("--margin", "margin_pct", type=click.FloatRange(0, 100), default=2.0, show_default=True, metavar="PCT",
              help="Equivalence margin in %: a slowdown whose whole interval lies inside ±PCT % does not fail.")
@click.option("--candidate-cpu", type=click.Choice(cpumask.NAMES), default=cpumask.BASELINE, show_default=True,
              help="Run the candidate's workers under this CPU capability mask (e.g. no-aesni): a candidate "
                   "that lost an extension, to see the gate catch what it costs.")
@click.option("--fail-on", "fail_on", type=click.Choice(compare.FAIL_ON), multiple=True, default=("slower",),
              show_default=True,
              help="Exit 1 when an operation is 'slower' beyond the margin; with `undecided` also when one "
                   "is undecided at --max-blocks. Repeatable.")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=f"Store for the gate's run [default: {shown_default()}].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=DEFAULT_OUT_DIR, show_default=True,
              help="Directory for the gate study's JSON document.")
@click.option("--json", "as_json", is_flag=True, help="Print the gate's outcome as JSON on stdout.")
def gate(baseline_worker: str, candidate_worker: str, ops: tuple[str, ...], backends: tuple[str, ...],
         sizes: tuple[int, ...], param_values: tuple[str, ...], blocks: int, max_blocks: int, seconds: float,
         warmup_s: float, margin_pct: float, candidate_cpu: str, fail_on: tuple[str, ...], store_path: str | None,
         out_dir: str, as_json: bool) -> int:
    """A regression gate for a pipeline that builds both sides: the baseline's and the
    candidate's worker binaries as two configurations of one study, every randomised block
    running both, each operation compared block by block. Whatever shifts the whole job (the
    runner, its clock, a neighbour) shifts both sides alike and cancels. Sequential: an unchanged
    build stops once every operation is equivalent within ±margin, a regression once it is
    decided. Exit status 1 when an operation is slower beyond the margin, else 0; the output
    states the smallest slowdown the gate would have caught 80 % of the time at the noise it
    measured. docs/ci-gate.md.

    \b
    cryptoperf gate --baseline-worker main/cryptoperf-worker --candidate-worker pr/cryptoperf-worker \\
        --op rsa2048-sign --op aes-128-gcm-seal --size 16k
    """
    started = time.monotonic()
    err, out = err_console(), out_console()
    _, hello = engine.default_worker()
    canonical = check_names("operation", ops, hello.ops)
    chosen = tuple(check_names("backend", backends, hello.backend_names)) or ("openssl",)
    design = gate_mod.GateDesign(str(Path(baseline_worker).resolve()), str(Path(candidate_worker).resolve()),
                                 backends=chosen, ops=tuple(canonical), sizes=tuple(sizes),
                                 params=_speed_params(param_values), blocks=blocks,
                                 max_blocks=max(blocks, max_blocks), seconds=seconds, warmup_s=warmup_s,
                                 margin_pct=margin_pct, candidate_cpu=candidate_cpu)
    takes = {op: hello.rules.takes_message(op) for op in canonical}
    plan = engine.prepare_study(gate_mod.gate_study(design, takes, Path.cwd()), console=err)
    engine.check_before_running(plan, out_dir, store_path, None, err)
    say = lambda line: err.print(line, markup=False, soft_wrap=True)  # noqa: E731
    say(study_text.plan_line(plan))
    say(study_text.power_line(plan))
    run = engine.run_study(plan, store=store_path, out_dir=out_dir, progress=terminal.ProgressBar(err),
                           reports=False, console=err, on_host=lambda host, checks, _busy: say(host_line(host)),
                           check_host=False)
    a = run.analysis
    outcome = gate_mod.decide(run.deltas, fail_on, a.comparisons, len(plan.looks))
    wall_s = time.monotonic() - started
    if as_json:
        click.echo(json.dumps(_document(run, outcome, fail_on, wall_s), indent=1))
        return 0 if outcome.passed else 1
    notes = terminal.Notes()
    out.print(terminal.delta_table(run.deltas, plan.study.baseline, notes, a.level))
    notes.print(out)
    out.print(f"verdicts: {verdict_counts(run.deltas)}; {a.method}", markup=False, soft_wrap=True)
    terminal.print_gate(out, fail_on, [("", d) for d in outcome.failing], [("", u) for u in outcome.undecided])
    text = outcome.detectable_text()
    if text:
        out.print(text, markup=False, soft_wrap=True)
    out.print(f"gate: {_duration(wall_s)} wall time, run {run.id} in {run.store_path}", markup=False, soft_wrap=True)
    return 0 if outcome.passed else 1


def _document(run: engine.StudyRun, outcome: gate_mod.GateOutcome, fail_on: Sequence[str], wall_s: float) -> dict:
    """The gate's JSON: the run (id, store, the study document's path), ``fail_on``, the
    outcome (``GateOutcome.as_dict``), every delta (``Delta.as_dict``), the method and the wall
    time (s)."""
    a = run.analysis
    return {"format_version": report_json.FORMAT_VERSION, "kind": "gate", "run_id": run.id,
            "store": str(run.store_path), "document": str(run.json_path) if run.json_path else None,
            "fail_on": list(fail_on), **outcome.as_dict(), "deltas": [d.as_dict() for d in run.deltas],
            "analysis": {"comparisons": a.comparisons, "level": a.level, "method": a.method}, "wall_s": wall_s}
