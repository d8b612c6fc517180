"""The commands on stored runs: ``cryptoperf report`` (one run's report), ``list``, ``compare``
(run against run, or the machines of one run; a regression gate with --fail-on) and
``publish`` (the store as a static website)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from cryptoperf import compare as compare_mod
from cryptoperf.store import stored_run as stored
from cryptoperf.cli.app import STORE_HELP, cli, err_console, out_console, say_using
from cryptoperf.engine import DEFAULT_OUT_DIR
from cryptoperf.errors import StoreError, UsageError
from cryptoperf.report import formats as report_formats
from cryptoperf.report import json as report_json
from cryptoperf.report import terminal
from cryptoperf.report.text import fmt_date, host_line, side_name, verdict_counts
from cryptoperf.report.render import write_text as render_write
from cryptoperf.store.db import FORMAT_VERSION, shown_default


@cli.command()
@click.argument("run_id", required=False, default="latest", metavar="[RUN_ID|latest]")
@click.option("--format", "-f", "fmt", type=click.Choice(list(report_formats.FORMATS)), default="html",
              show_default=True,
              help="html: one self-contained file with plots; md: tables for a ticket; json: the "
                   "complete document; csv: one row per configuration × operation × repetition.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help=f"File to write (never overwritten: an existing file is an error); '-' for stdout "
                   f"[default: {DEFAULT_OUT_DIR}/<study>-<UTC start>-run<id>.<ext>, with -2, -3 … "
                   "added if taken].")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=f"Store to read: a SQLite file or a postgresql:// URL [default: {shown_default()}].")
@click.option("--reference", "reference", metavar="CONFIG", default=None,
              help="Re-analyse the run with configuration CONFIG as the reference instead of the study's "
                   "baseline: every other configuration compared with it, paired by block, adjusted as a "
                   "family of its own.")
def report(run_id: str, fmt: str, output: str | None, store_path: str | None, reference: str | None) -> None:
    """Write the report of a stored run (the newest study run by default) and print its path.

    Every figure is recomputed from the store (the run's worker results, blocks, study file
    and analysis settings), so the report matches what the study printed. RUN_ID is a number
    from the store or `latest` (the newest study run). The run used is named on stderr.
    With --reference CONFIG, any pair the blocks ran side by side can be compared after the fact.
    """
    if output not in (None, "-") and Path(output).exists():
        raise StoreError(f"{output} exists and cryptoperf never overwrites a file; remove it or pass "
                         "another -o PATH")
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
        if reference is not None:
            run = run.against(reference)
        text = report_formats.render(run, fmt, store.location)
    if output == "-":
        say_using(run)
        click.echo(text, nl=False)
        return
    if output:
        written = render_write(text, Path(output), fix="pass another -o PATH")
    else:
        written = render_write(text, report_formats.default_path(DEFAULT_OUT_DIR, run, fmt), unique=True)
    say_using(run)
    click.echo(str(written))



@cli.command("list")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=STORE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the runs as one JSON document.")
def list_runs(store_path: str | None, as_json: bool) -> None:
    """List the stored runs: id, date, study, host (CPU model, kernel), cells, status.

    The ids are what `cryptoperf compare`, `cryptoperf plan` and `cryptoperf.load()` take
    (`latest` names the newest study run). A run whose process ended without finishing it
    (killed, or the machine stopped) shows as interrupted, with the repetitions it kept.
    """
    with stored.open_store(store_path) as store:
        runs = stored.list_runs(store)
        path = store.location
    if as_json:
        click.echo(json.dumps({"format_version": FORMAT_VERSION, "kind": "runs", "store": path,
                               "runs": runs}, indent=1))
        return
    out = out_console()
    if not runs:
        out.print(f"no runs in store {path}", markup=False)
        return
    out.print(terminal.runs_table(runs))
    out.print(f"store: {path}", markup=False)


FAIL_ON = compare_mod.FAIL_ON


@cli.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="[RUN_B]", required=False)
@click.option("--by", "by", type=click.Choice(["host"]), default=None,
              help="--by host RUN: the machines that ran one run's repetitions side by side (a run "
                   "spread over several nodes), each against the first (or --baseline-host).")
@click.option("--baseline-host", "baseline_host", metavar="NAME", default=None,
              help="With --by host: the machine the others are compared with (its hostname) "
                   "[default: the one that ran the run's first repetition].")
@click.option("--history", "history", type=click.IntRange(0, 100), default=0, metavar="K",
              help="Add to side A up to K earlier runs of the same study (or speed) on a comparable "
                   "host (same CPU model and flags, logical CPUs, machine, kernel, hypervisor; any "
                   "hostname) with the same worker and library versions, newest first, so that the "
                   "spread between runs and jobs is measured; the differences accepted are listed "
                   "[default: 0].")
@click.option("--run-sd", "run_sd_pct", type=click.FloatRange(0, 100), default=compare_mod.DEFAULT_RUN_SD_PCT,
              show_default=True, metavar="PCT",
              help="With one run per side, both of one job: the run-to-run standard deviation (%) "
                   "assumed for each run, since nothing measures it; 0 trusts the repetitions alone.")
@click.option("--job-sd", "job_sd_pct", type=click.FloatRange(0, 100), default=compare_mod.DEFAULT_JOB_SD_PCT,
              show_default=True, metavar="PCT",
              help="With runs of one job per side (a CI job, else a boot: see --job of speed and "
                   "study): the between-job standard deviation (%) assumed for each job on top of "
                   "the spread between its runs, since nothing measures it; 3 jobs or more measure it.")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=STORE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of the tables.")
@click.option("--margin", "margin_pct", type=click.FloatRange(0, 100), default=None, metavar="PCT",
              help="Equivalence margin in % [default: run A's study margin_pct, 2].")
@click.option("--no-multiplicity", is_flag=True,
              help="Do not adjust the intervals of all matched cells together.")
@click.option("--fail-on", "fail_on", type=click.Choice(FAIL_ON), multiple=True,
              help="Exit with status 1 when any matched cell's verdict is 'slower' beyond the margin "
                   "(a slowdown whose interval lies inside ±margin does not fail) and, with --fail-on "
                   "undecided (or inconclusive), when any is undecided: a regression gate for CI "
                   "pipelines. A gate that passes names what it could not decide and the largest "
                   "slowdown it leaves possible. Repeatable.")
def compare(run_a: str, run_b: str | None, by: str | None, baseline_host: str | None, history: int,
            run_sd_pct: float, job_sd_pct: float, store_path: str | None, as_json: bool, margin_pct: float | None,
            no_multiplicity: bool, fail_on: tuple[str, ...]) -> int:
    """Compare stored runs RUN_B with RUN_A (the baseline); ids from `cryptoperf list`, or
    `latest`; a side may be several runs of the same build, comma-separated (`3,4,5`).

    Prints the host differences first (CPU model, flags, kernel, hypervisor, library versions),
    then one row per cell measured on both sides — matched by configuration, backend, operation
    label and size — with the latency Δ and its interval, the throughput Δ, the verdict (B
    against A: "x % slower", "equivalent within ±m %" or "inconclusive") and the noise; then the
    cells measured on one side only. With --fail-on it is a regression gate: exit 1 when a
    verdict fails it, 0 otherwise.

    A whole run shifts from one run to the next by more than its repetitions show, and a CI job
    (another machine) by more than the runs of one job, so runs — or the jobs that made them,
    when the runs span several — are the unit: with three units or more (`compare 1,2,3
    4,5,6`, or --history K) each cell's interval is the t interval on their means, which
    measures that shift; with one unit per side it is assumed (--run-sd for runs of one job,
    --job-sd for two jobs), and the output says so. A repetition far outside its run is set
    aside first and named. `previous` and `latest~N` count runs of the other side's kind (speed
    with speed). The sharpest gate puts both builds in one study (blocks pair them).

    With --by host RUN, the same for the machines of one run whose repetitions ran on several
    (told apart by hostname and CPU model): each machine's repetitions against the baseline
    machine's, cell by cell.

    \b
    cryptoperf compare 12 13 --fail-on slower
    cryptoperf compare 12 13 --history 5 --fail-on slower
    cryptoperf compare 10,11,12 13,14,15 --fail-on slower
    """
    if by == "host":
        if run_b is not None:
            raise UsageError(f"compare --by host takes one run (the machines of run {run_a}), not two; "
                             f"drop {run_b}")
        return _compare_hosts(run_a, baseline_host, store_path, as_json, margin_pct, no_multiplicity, fail_on)
    if baseline_host is not None:
        raise UsageError("--baseline-host goes with --by host RUN (the machines of one run)")
    if run_b is None:
        raise UsageError("compare needs two runs, RUN_A RUN_B (e.g. `cryptoperf compare 3 4`), or "
                         "--by host RUN for the machines of one run")
    with stored.open_store(store_path) as store:
        kind = _kind(store, [run_a, run_b])
        runs_a, runs_b = _side(store, run_a, "RUN_A", kind), _side(store, run_b, "RUN_B", kind)
        named = {r.id for r in runs_a + runs_b}
        if len(runs_a) + len(runs_b) > 2 and {r.id for r in runs_a} & {r.id for r in runs_b}:
            raise UsageError(f"run {sorted({r.id for r in runs_a} & {r.id for r in runs_b})[0]} is on both sides; "
                             "a run is compared with other runs")
        kinds = {r.meta.get("kind") for r in runs_a + runs_b}
        if len(kinds) > 1:
            other = next(r for r in runs_a + runs_b if r.meta.get("kind") != runs_a[0].meta.get("kind"))
            raise UsageError(f"run {runs_a[0].id} is a {runs_a[0].meta.get('kind')} run and run {other.id} a "
                             f"{other.meta.get('kind')} run: compare runs of one kind (their cells never match)")
        selection = _history(store, runs_a[0], named, history) if history > 0 else None
    earlier = selection.runs if selection is not None else []
    for r in runs_a + runs_b:
        say_using(r)
    c = compare_mod.compare_run_sets(runs_a + earlier, runs_b, margin_pct=margin_pct,
                                     multiplicity=not no_multiplicity, run_sd_pct=run_sd_pct,
                                     history=selection if selection is not None else 0, job_sd_pct=job_sd_pct)
    failing = c.failing(fail_on)
    if as_json:
        click.echo(json.dumps(report_json.compare_document("compare", c, fail_on, [("", d) for d in failing]), indent=1))
        return 1 if failing else 0
    out = out_console()
    for r in c.runs_a + c.runs_b:
        out.print(f"run {r.id}: {r.meta.get('study_name') or r.meta.get('kind')}, "
                  f"{fmt_date(r.meta.get('started_at'))}, {r.meta.get('status')}, "
                  f"{compare_mod.session(r).text}", markup=False)
    if selection is not None:
        out.print(selection.text, markup=False, soft_wrap=True)
    out.print(host_line(c.a.host).replace("host:", f"host of run {c.a.id}:", 1), markup=False)
    out.print(f"across runs: {c.run_variation}", markup=False, soft_wrap=True)
    _print_comparison(out, c, c.names[0], c.names[1], "run", "runs")
    spread = c.spread
    if spread is not None and c.unit == "job" or spread is not None and spread.sd_pct is not None:
        out.print(spread.text, markup=False, soft_wrap=True)
    if spread is not None and spread.warning:
        out.print(spread.warning, markup=False, soft_wrap=True)
    terminal.print_gate(out, fail_on, [("", d) for d in failing], [("", u) for u in compare_mod.undecided(c.deltas)])
    detectable = c.detectable() if fail_on else None
    if detectable is not None:
        out.print(detectable.text, markup=False, soft_wrap=True)
    return 1 if failing else 0


def _kind(store: object, texts: list[str]) -> str | None:
    """The kind of run (``study``, ``speed``) that ``previous`` and ``latest~N`` count among in
    ``compare``: the kind of the first run named by number, else that of the newest run."""
    runs = store.runs()  # type: ignore[attr-defined]
    by_id = {int(r["id"]): r.get("kind") for r in runs}
    for text in texts:
        for item in text.split(","):
            if item.strip().isdigit() and int(item) in by_id:
                return by_id[int(item)]
    return runs[-1].get("kind") if runs else None


def _side(store: object, text: str, what: str, kind: str | None = None) -> list[stored.StoredRun]:
    """The runs a comma-separated ``text`` names (ids or ``latest``, ``previous``, ``latest~N``
    among runs of ``kind``), loaded; UsageError for an empty item or a run named twice."""
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise UsageError(f"{what} {text!r}: name runs by id, comma-separated (e.g. 3,4,5)")
    runs = [stored.load_run(store, stored.resolve_id(store, t, kind=kind)) for t in items]
    ids = [r.id for r in runs]
    if len(set(ids)) < len(ids):
        raise UsageError(f"{what} {text!r} names run {next(i for i in ids if ids.count(i) > 1)} twice")
    return runs


def _history(store: object, a: stored.StoredRun, named: set[int], k: int) -> compare_mod.HistorySelection:
    """Up to ``k`` earlier runs repeating ``a`` (``compare.select_history``), newest first, none
    of the ``named`` ones; reads only runs of the same kind and study, at most 4k + 8 of them."""
    metas = [m for m in reversed(stored.list_runs(store))
             if m["id"] not in named and m["id"] < a.id and m["kind"] == a.meta.get("kind")
             and m["study"] == a.meta.get("study_name") and m["supported"]][:4 * k + 8]
    return compare_mod.select_history(a, [stored.load_run(store, m["id"]) for m in metas], k)


def _print_comparison(out: Console, c: compare_mod.Comparison, a: int | str, b: int | str,
                      side: str, sides: str) -> None:
    """The host differences, the delta table, its notes and verdict counts, and the unmatched
    cells of one comparison; ``a`` and ``b`` name the sides (run ids or machine names)."""
    if c.host:
        out.print(terminal.host_differences_table(c.host, a, b))
    else:
        out.print("host differences: none (same CPU model, flags, CPU mask, kernel, hypervisor and library versions)",
                  markup=False)
    notes = terminal.Notes()
    if c.deltas:
        out.print(terminal.compare_table(c.deltas, a, b, c.settings.noise_threshold_pct, notes, c.level))
    else:
        out.print(f"no cell was measured in both {sides}", markup=False)
    notes.print(out)
    out.print(f"verdicts: {verdict_counts(c.deltas)}; {c.method}", markup=False, soft_wrap=True)
    for name, cells in ((a, c.only_a), (b, c.only_b)):
        if cells:
            out.print(f"unmatched, only {'in' if side == 'run' else 'on'} {side_name(name)}: "
                      + ", ".join(f"{s.cell.key} ({s.cell.op})" for s in cells), markup=False)


def _compare_hosts(run_id: str, baseline_host: str | None, store_path: str | None, as_json: bool,
                   margin_pct: float | None, no_multiplicity: bool, fail_on: tuple[str, ...]) -> int:
    """``compare --by host RUN``: each machine of the run against the baseline machine; exit 1
    when --fail-on fails, 0 otherwise."""
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
    hc = compare_mod.compare_hosts(run, baseline_host, margin_pct=margin_pct, multiplicity=not no_multiplicity)
    say_using(run)
    failing = hc.failing(fail_on)
    if as_json:
        click.echo(json.dumps(report_json.compare_document("compare_hosts", hc, fail_on, failing), indent=1))
        return 1 if failing else 0
    out = out_console()
    out.print(f"run {run.id}: {run.meta.get('study_name') or run.meta.get('kind')}, "
              f"{fmt_date(run.meta.get('started_at'))}, {run.meta.get('status')}; "
              f"{len(hc.hosts)} hosts, baseline {hc.baseline.name}", markup=False)
    for h in hc.hosts:
        out.print(host_line(h.host).replace("host:", f"host {h.name} ({h.measured} of {h.repetitions} "
                                                      "repetitions measured):", 1), markup=False)
    for h, c in zip(hc.hosts[1:], hc.comparisons):
        _print_comparison(out, c, hc.baseline.name, h.name, "host", "hosts")
    terminal.print_gate(out, fail_on, failing, [(h.name, u) for h, cc in zip(hc.hosts[1:], hc.comparisons)
                                        for u in compare_mod.undecided(cc.deltas)])
    return 1 if failing else 0


@cli.command()
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=STORE_HELP)
def publish(directory: str, store_path: str | None) -> None:
    """Write a static website of the store into DIR, servable by any web server (or opened as
    files): no server-side code, nothing fetched from the network, relative links only.

    \b
    index.html            every run: study, start, status, host, library versions, cells,
                          verdicts; filter by study, host and library version
    runs/<id>.html        each run's HTML report (as `cryptoperf report` writes it)
    compare/<a>-<b>.html  each study run against the previous run of its study
    trend/<study>.html    per study, each operation's figure of merit across its runs with
                          its interval, host changes marked

    Publishing again into DIR updates it: pages whose runs did not change are kept, the others
    rewritten, pages of runs no longer in the store removed. DIR must be new, empty, or made by
    `cryptoperf publish` (it keeps a list of its files in DIR/.cryptoperf-site.json); a
    directory holding other files is refused. Prints the path of index.html; more in
    docs/publishing.md.

    \b
    cryptoperf publish site/ --store runs.sqlite
    python -m http.server -d site/      # or any static web server; then open http://localhost:8000/
    """
    from cryptoperf import publish as publish_mod

    err = err_console()
    with stored.open_store(store_path) as store:
        site = publish_mod.publish(store, directory, progress=terminal.StepProgress(err))
    for line in site.skipped:
        err.print(f"note: no page for {line}", markup=False, soft_wrap=True)
    def count(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    err.print(f"published {count(site.runs, 'run report')}, {count(site.compares, 'comparison')} and "
              f"{count(site.trends, 'trend page')} ({count(site.written, 'page')} written, {site.kept} unchanged, "
              f"{site.removed} removed)", markup=False, soft_wrap=True)
    click.echo(str(site.index))
