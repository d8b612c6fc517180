"""The command line: ``cryptoperf speed``, ``study``, ``report``, ``backends``, ``setup`` (the
worker builds ``pip install .`` does not make, e.g. ``openssl@3.6``), and on stored runs
``list``, ``compare``, ``plan`` (the economics of an operation: cores for a rate, the cost
of a change, accelerator break-even) and ``publish`` (the store as a static website).

This is the only module that turns errors into exit codes: every failure the user can cause
ends as one line ``cryptoperf: error: <what, where, fix>`` on stderr — exit 2 for usage and
study-file errors, 1 for others, 130 on Ctrl-C — never a traceback (set CRYPTOPERF_DEBUG=1 to
see one for an unexpected internal error).
"""

from __future__ import annotations

import json
import signal
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import click
from rich.console import Console

from cryptoperf import PROTOCOL_VERSION, __version__, builds, cpumask, economics, engine, study as study_mod
from cryptoperf import opnames, paths, workerbuild
from cryptoperf import compare as compare_mod
from cryptoperf import stored
from cryptoperf.engine import DEFAULT_OUT_DIR, DEFAULT_SPEED_OPS
from cryptoperf.errors import CryptoperfError, NoComparison, StoreError, StudyInterrupted, UsageError
from cryptoperf.report import formats as report_formats
from cryptoperf.report import json as report_json
from cryptoperf.report import study_text, terminal
from cryptoperf.report.render import write_text as render_write
from cryptoperf.run.worker import fetch_hello
from cryptoperf.store import FORMAT_VERSION, mask, shown_default
from cryptoperf.builds import find_worker


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _stdout() -> Console:
    return terminal.console_for_stdout()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cryptoperf",
                      message=f"%(prog)s %(version)s (worker protocol {PROTOCOL_VERSION})")
def cli() -> None:
    """What does this cryptographic configuration cost, and what will a change cost?

    Measurements run in the Rust worker `cryptoperf-worker`, one fresh process per repetition;
    this program schedules randomised blocks, compares (paired t intervals, verdicts against an
    equivalence margin, adjusted for multiplicity), stores (SQLite, or PostgreSQL shared by a
    team) and reports.

    \b
    cryptoperf backends                  which backends and operations the worker has
    cryptoperf speed --op rsa2048-sign   ops/s, MB/s, latency percentiles, CPU/op per backend
    cryptoperf study studies/quick.toml  compare configurations against a baseline
    cryptoperf report [RUN_ID]           HTML (or md, json, csv) report of a stored run
    cryptoperf setup openssl@3.6         build the worker with OpenSSL 3.6 (once, cached)
    cryptoperf list                      the stored runs
    cryptoperf compare 3 4               run 4 against run 3: host differences, deltas
    cryptoperf compare 3 4 --fail-on slower   the same as a regression gate (exit 1)
    cryptoperf compare --by host 5       one run's machines side by side, with verdicts
    cryptoperf plan --op rsa2048-sign --rate 9.6   cores, cost of a change, accelerator break-even
    cryptoperf plan --per-request "ecdsa-p256-sign + x25519-keygen + x25519-derive" --rate 2k
    cryptoperf publish site/             a static website: every run, comparisons, trends

    Runs are stored in runs.sqlite in cryptoperf's data directory, beside the worker builds
    `cryptoperf setup` caches: ~/.local/share/cryptoperf (platformdirs' user data directory), or
    $CRYPTOPERF_DATA_DIR when set; $CRYPTOPERF_STORE names another (a path, or a
    postgresql:// URL a team shares: docs/shared-store.md), and --store PATH|URL another for
    one command. A worked first hour: docs/first-hour.md.
    """


@cli.command()
@click.option("--no-detail", is_flag=True,
              help="Skip checking which backend supports which operation (faster).")
def backends(no_detail: bool) -> None:
    """List the worker's backends, library versions, and which operations each supports."""
    path = find_worker()
    hello = fetch_hello(path, detail=not no_detail)
    out = _stdout()
    out.print(terminal.backends_table(hello))
    notes = terminal.Notes()
    support = terminal.support_table(hello, notes)
    if support is not None:
        out.print(support)
        notes.print(out)
    else:
        out.print("operations: " + ", ".join(hello.ops))
    _list_builds()


@cli.command()
@click.argument("names", nargs=-1, metavar="[BUILD]...")
@click.option("--list", "list_only", is_flag=True,
              help="List the worker builds, whether each is built and where (the default without BUILD).")
@click.option("--force", is_flag=True, help="Rebuild even when a usable build is cached.")
def setup(names: tuple[str, ...], list_only: bool, force: bool) -> None:
    """Build worker builds that `pip install .` does not make, once, and cache them.

    \b
    openssl@3.6   the worker with OpenSSL 3.6 built from source (openssl-src 300.6.x) and
                  linked statically into its openssl backend: about 5-10 minutes on 2 cores;
                  what `library = "openssl@3.6"` in a study needs (which builds it on first use).

    Needs Rust's cargo (https://rustup.rs) and network access to crates.io. The binary goes to
    <data dir>/workers/<build>/ ($CRYPTOPERF_DATA_DIR, default: the user data directory), and is
    used only once it answers with the expected library version.
    """
    if list_only or not names:
        _list_builds()
        return
    for raw in names:
        workerbuild.recipe(raw)  # every name checked before anything is built
    err, out = _stderr(), _stdout()
    for name in dict.fromkeys(builds.resolve(n) for n in names):
        out.print(workerbuild.setup(name, force, err), markup=False, soft_wrap=True)


def _list_builds() -> None:
    """Print every worker build: name, built or not (path or why not), what it is."""
    out = _stdout()
    out.print(f"worker builds (cache: {paths.data_dir() / 'workers'}):", markup=False, soft_wrap=True)
    for b in workerbuild.states():
        label = b.name + (f" = {b.alias}" if b.alias else "")
        out.print(f"  {label:<26} {'built' if b.built else 'missing':<8} {b.description}", markup=False, soft_wrap=True)
        out.print(f"  {'':<26} {'':<8} {b.where}", markup=False, soft_wrap=True)


class SizeType(click.ParamType):
    """A message size on the command line: bytes, or a binary suffix (``16k`` = ``16KiB`` =
    16384, ``1M`` = ``1MiB``; ``opnames.parse_size``), at least 1 byte."""

    name = "size"

    def convert(self, value, param, ctx) -> int:
        """The size in bytes; click's one-line usage error for anything else."""
        if isinstance(value, int):
            n = value
        else:
            try:
                n = opnames.parse_size(value)
            except ValueError as e:
                self.fail(str(e), param, ctx)
        if n < 1:
            self.fail(f"{value} is not a message size: give at least 1 byte", param, ctx)
        return n


def _speed_params(values: Sequence[str]) -> dict[str, str]:
    """``--param NAME=VALUE`` values as a dict. Raises UsageError for one without ``=`` or a
    name given twice."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, value = v.partition("=")
        name, value = name.strip().lower(), value.strip()
        if not sep or not name or not value:
            raise UsageError(f"--param {v!r} is not NAME=VALUE; write e.g. --param digest=sha384")
        if name in out and out[name] != value:
            raise UsageError(f"--param {name} is given twice ({out[name]}, {value}); give one value")
        out[name] = value
    return out


@cli.command()
@click.option("--backend", "-b", "backends_", multiple=True, metavar="B",
              help="Backend to measure (repeatable); default: every backend the worker has.")
@click.option("--op", "-o", "ops", multiple=True, metavar="OP",
              help="Operation (repeatable); default: " + ", ".join(DEFAULT_SPEED_OPS) + ". Case, "
                   "punctuation and common aliases do not matter: SHA-256, SHA2-256 = sha256; "
                   "ecdsa-secp256r1-sign = ecdsa-p256-sign; ML-KEM-768-encaps = ml-kem-768-encaps.")
@click.option("--size", "-s", "sizes", multiple=True, metavar="SIZE", type=SizeType(),
              help="Message size (repeatable): bytes, or with a binary suffix, 16k = 16K = 16KiB = "
                   "16384 bytes, 1M = 1MiB (k means 1024, as in openssl speed); for the operations "
                   "with a message (a note names the others; none having one is an error); default: "
                   "the worker's (1024, or 32 for signatures); at most the worker's limit.")
@click.option("--param", "-p", "param_values", multiple=True, metavar="NAME=VALUE",
              help="Worker parameter (repeatable): digest=sha1|sha256|sha384|sha512|sha3-256 (RSA and "
                   "ECDSA sign/verify), padding=pkcs1|pss (RSA); applied to the operations that take "
                   "it (a note names the others; none taking it is an error).")
@click.option("--repetitions", "-r", type=click.IntRange(1, engine.MAX_SPEED_REPETITIONS), default=1,
              show_default=True,
              help="Run each row this many times, each in a fresh worker, in randomised blocks; 3 or "
                   "more give ops/s, p50 and CPU/op a 95 % interval (geometric means over repetitions).")
@click.option("--baseline", metavar="BACKEND", default=None,
              help="After the table, each other backend against this one on ops/s, per operation and "
                   "size (\"aws-lc: 1.32× faster [1.28, 1.36] than openssl\"); intervals paired by "
                   "block with --repetitions 3 or more, point ratios otherwise.")
@click.option("--seconds", type=click.FloatRange(0, None, min_open=True), default=0.5,
              show_default=True, help="Measuring time per repetition, per thread, in seconds.")
@click.option("--warmup", "warmup_s", type=click.FloatRange(0, None), default=0.2,
              show_default=True, help="Warm-up before measuring, in seconds.")
@click.option("--threads", "-t", type=click.IntRange(1, None), default=1,
              show_default=True, help="Threads running the operation at once.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0, 86400, min_open=True), default=None,
              help="Kill a repetition's worker after this many seconds [default: warm-up + seconds + 60].")
@click.option("--cpu", "cpu", type=click.Choice(cpumask.NAMES), default=cpumask.BASELINE,
              show_default=True,
              help="CPU capability mask to run under (OPENSSL_ia32cap, verified by the worker): "
                   "no-aesni turns AES-NI and PCLMULQDQ off, no-shani the SHA extensions, ... "
                   "ring and rustcrypto cannot be masked and say unsupported.")
@click.option("--fips", is_flag=True,
              help="Run in the FIPS worker build (cryptoperf-worker-fips): AWS-LC's FIPS module in "
                   "FIPS mode, OpenSSL with the host's FIPS provider where one is installed.")
@click.option("--library", type=click.Choice(list(builds.LIBRARIES)), default=builds.SYSTEM_LIBRARY,
              show_default=True,
              help=f"The OpenSSL the openssl backend links; {builds.OPENSSL_NEXT} runs the openssl "
                   f"backend only, in the worker `cryptoperf setup {builds.OPENSSL_NEXT}` builds "
                   "(built on first use unless --no-setup).")
@click.option("--no-setup", is_flag=True,
              help="Never build a worker on the spot: stop, naming the `cryptoperf setup` command.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document (a `results` list, one entry per row with its intervals; "
                   "with --baseline a `baseline` section) instead of the table.")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=f"Store to record the run in: a SQLite file or a postgresql:// URL [default: "
                   f"{shown_default()}]; every speed call is stored (it becomes a run `cryptoperf list` "
                   "shows) unless --no-store.")
@click.option("--no-store", is_flag=True, help="Measure and print only: store nothing.")
def speed(backends_: tuple[str, ...], ops: tuple[str, ...], sizes: tuple[int, ...],
          param_values: tuple[str, ...], repetitions: int, baseline: str | None, seconds: float,
          warmup_s: float, threads: int, timeout_s: float | None, cpu: str, fips: bool, library: str,
          no_setup: bool, as_json: bool, store_path: str | None, no_store: bool) -> None:
    """Measure operations on backends: one row per (backend, operation, size).

    Each repetition is one fresh worker process; with --repetitions N every row runs N times in
    randomised blocks (a block runs every row once, in a seeded random order), and with N >= 3
    ops/s, p50 and CPU/op carry their 95 % interval. A backend that lacks an operation gives a
    row saying "unsupported", not an error. Where the worker batches k > 1 operations per timed
    sample, the percentiles are those of k-operation batch means (the table says so). Every
    `speed` call is stored as a run (see `cryptoperf list`) unless --no-store.

    \b
    cryptoperf speed --op SHA-256 --size 16k --repetitions 3 --baseline openssl
    cryptoperf speed --op rsa2048-sign --param padding=pss --param digest=sha384
    """
    err = _stderr()
    result = engine.speed(backends_, ops, sizes, seconds=seconds, warmup_s=warmup_s, threads=threads,
                          timeout_s=timeout_s, cpu=cpu, fips=fips, library=library,
                          params=_speed_params(param_values), repetitions=repetitions, baseline=baseline,
                          setup=not no_setup,
                          store=store_path, store_results=not no_store, progress=terminal.ProgressBar(err) if not as_json or err.is_terminal
                          else None, console=err)
    if as_json:
        doc = report_json.speed_document(result, result.settings)
        click.echo(json.dumps(doc, indent=1))
        return
    out = _stdout()
    out.print(terminal.host_line(result.host), markup=False)
    notes = terminal.Notes()
    title = ("cryptoperf speed" + terminal.cpu_title(cpu) + (" [FIPS worker]" if fips else "")
             + (f" [{library} worker]" if library != builds.SYSTEM_LIBRARY else ""))
    out.print(terminal.speed_table(result.rows(), notes, title=title))
    notes.print(out)
    out.print(terminal.speed_interval_note(repetitions), markup=False, soft_wrap=True)
    for line in result.notes:
        out.print(f"note: {line}", markup=False, soft_wrap=True)
    for line in terminal.baseline_lines(result.baseline_ratios(), result.baseline or "", repetitions):
        out.print(line, markup=False, soft_wrap=True)
    for line in terminal.mask_warnings(result.outcomes):
        out.print(line, markup=False)
    build = result.settings["build"]
    for name, spec in builds.BUILDS.items():
        if spec.setup is not None and name != build:
            continue  # made on request (`cryptoperf setup`), not a missing part of the install
        available, why = builds.status(name)
        if not available:
            out.print(f"note: worker build '{name}' is unavailable: {why}", markup=False, soft_wrap=True)


@cli.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=f"Store for the results: a SQLite file or a postgresql://USER@HOST/DATABASE URL "
                   f"[default: {shown_default()}].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=DEFAULT_OUT_DIR,
              show_default=True, help="Directory for the study's JSON document and reports.")
@click.option("--options", "show_options", is_flag=True,
              help="Describe every key a study file may hold, and exit.")
@click.option("--dry-run", is_flag=True,
              help="Check the study, and the output directory, store, disk and memory it needs; "
                   "show the schedule; run nothing.")
@click.option("--no-report", is_flag=True,
              help="Write only the JSON document, not the HTML and Markdown reports beside it.")
@click.option("--no-setup", is_flag=True,
              help="Never build a worker on the spot: when a configuration's library (e.g. "
                   "openssl@3.6) is not built yet, stop, naming the `cryptoperf setup` command.")
@click.option("--margin", "margin_pct", type=float, default=None, metavar="PCT",
              help="Equivalence margin in % [default: the study's margin_pct, 2]: an interval "
                   "inside ±PCT % is 'equivalent'.")
@click.option("--no-multiplicity", is_flag=True,
              help="Do not adjust the study's intervals together (for a study with one planned "
                   "comparison); by default all of them hold at 95 % at once (Bonferroni).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: every repetition on this machine, one at a time. ray: each randomised block "
                   "as a Ray task on a node of a Ray cluster (one block per node at a time, each "
                   "repetition still in a fresh worker; the study's `hosts` picks nodes); needs "
                   "`pip install '.[ray]'`. See docs/ray.md.")
@click.option("--address", metavar="HOST:PORT", default=None,
              help="With --executor ray: the Ray head's address [default: $RAY_ADDRESS, else a "
                   "private local Ray instance on this machine].")
@click.option("--resume", "resume_id", metavar="RUN_ID", default=None,
              help="Continue run RUN_ID of this study (interrupted: Ctrl-C, a crash, kill -9, a "
                   "reboot) in the same --store: keep every repetition it finished and run only "
                   "the missing ones (a block cut in two runs again whole), under the same run id. "
                   "FILE must be the file it started with (its SHA-256 is checked), on the same "
                   "machine and libraries.")
def study(file: str | None, store_path: str | None, out_dir: str, show_options: bool,
          dry_run: bool, no_report: bool, no_setup: bool, margin_pct: float | None,
          no_multiplicity: bool, executor: str, address: str | None, resume_id: str | None) -> None:
    """Run a study FILE (TOML): configurations against a baseline, with verdicts you can act on.

    Every cell (configuration × backend × operation × size) is calibrated once, then runs in
    `repetitions` randomised blocks: a block runs every configuration of a group once, each in a
    fresh worker, in a seeded random order. Each configuration is compared with the baseline
    block by block, and every comparison ends in a verdict: "x % slower/faster [CI]",
    "equivalent within ±m %", or "inconclusive" with the blocks that would likely decide it.
    Prints the delta table and the noise table; writes the complete results as JSON under
    --out and into the --store (each repetition as soon as it finishes), and beside the
    JSON the HTML report and a Markdown summary. The file format is in docs/study-files.md;
    `--options` lists every key.

    A configuration with `library = "openssl@3.6"` needs a worker built from source; the first
    study that needs it builds it (once, cached; see `cryptoperf setup`) unless --no-setup.
    """
    if show_options:
        click.echo(study_mod.options_help(engine.default_rules()), nl=False)
        return
    if file is None:
        raise UsageError("study needs a FILE (a study .toml); see `cryptoperf study --help`")
    err, out = _stderr(), _stdout()
    prior = None
    if resume_id is not None:
        engine.refuse_settings_on_resume(margin_pct, True if no_multiplicity else None)
        prior = engine.prior_run(file, resume_id, store_path)
    ex = engine.make_executor(executor, address) if not dry_run else None  # no Ray: one line, now
    plan = engine.plan_study(file, setup=not no_setup, dry_run=dry_run, margin_pct=margin_pct,
                             multiplicity=False if no_multiplicity else None, console=err)
    # out dir, store, disk, memory, threads (and a resumed run's host): before the plan is
    # printed, in a dry run too
    engine.check_before_running(plan, out_dir, store_path, prior, err)
    say = lambda line: err.print(line, markup=False, soft_wrap=True)  # noqa: E731
    for line in study_text.skipped_lines(plan.skipped) + study_text.fips_lines(plan.fips_unapproved()):
        say(line)
    note = study_text.hosts_note(plan.study, executor)
    if note:
        say(note)
    cluster = _start_executor(ex, plan)
    say(study_text.plan_line(plan))
    if prior is not None:
        say(study_text.resume_line(prior))
    if cluster:
        say(study_text.cluster_line(cluster))
    if dry_run:
        _dry_run(plan, say)
        return

    def show_host(host: dict, checks: list) -> None:
        err.print(terminal.host_line(host), markup=False)
        terminal.host_warnings(err, checks)

    run = engine.run_study(plan, store=store_path, out_dir=out_dir, progress=terminal.ProgressBar(err),
                           reports=not no_report, console=err, on_host=show_host, executor=ex, resume=prior,
                           check_host=False)
    a = run.analysis
    notes = terminal.Notes()
    out.print(terminal.delta_table(run.deltas, plan.study.baseline, notes, a.level))
    out.print(terminal.noise_table(run.summaries.values(), plan.study.noise_threshold_pct, notes))
    notes.print(out)
    out.print(f"verdicts: {terminal.verdict_counts(run.deltas)}; {a.method}", markup=False, soft_wrap=True)
    for line in terminal.mask_warnings(run.outcomes) + study_text.footer_lines(run):
        out.print(line, markup=False, soft_wrap=True)
    why = engine.no_comparison_reason(run)
    if why:
        raise NoComparison(why)


def _start_executor(ex: Any, plan: engine.StudyPlan) -> dict:
    """Start the executor for ``plan`` (Ray: the cluster, its nodes' versions and the hosts
    checked, before anything is said); its Ray cluster description, or {} (local, dry run)."""
    if ex is None:
        return {}
    try:
        return ex.start(plan).get("ray") or {}
    except BaseException:
        ex.close()
        raise


def _dry_run(plan: engine.StudyPlan, say: Callable[[str], None]) -> None:
    """A dry run's schedule on stdout and what the worker cannot run on stderr; raises
    NoComparison when what is left compares nothing."""
    unsupported = plan.unsupported()
    for line in study_text.schedule_lines(plan, unsupported):
        click.echo(line)
    if unsupported:
        say(study_text.unsupported_line(unsupported, len(plan.cells)))
    why = plan.nothing_to_compare(unsupported)
    if why:
        raise NoComparison(why)


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
def report(run_id: str, fmt: str, output: str | None, store_path: str | None) -> None:
    """Write the report of a stored run (the newest study run by default) and print its path.

    Every figure is recomputed from the store (the run's worker results, blocks, study file
    and analysis settings), so the report matches what the study printed. RUN_ID is a number
    from the store or `latest` (the newest study run). The run used is named on stderr.
    """
    if output not in (None, "-") and Path(output).exists():
        raise StoreError(f"{output} exists and cryptoperf never overwrites a file; remove it or pass "
                         "another -o PATH")
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
        text = report_formats.render(run, fmt, store.location)
    if output == "-":
        _using(run)
        click.echo(text, nl=False)
        return
    if output:
        written = render_write(text, Path(output), fix="pass another -o PATH")
    else:
        written = render_write(text, report_formats.default_path(DEFAULT_OUT_DIR, run, fmt), unique=True)
    _using(run)
    click.echo(str(written))


def _using(run: stored.StoredRun) -> None:
    """Say on stderr which stored run a command works on."""
    _stderr().print(f"using {stored.describe(run)}", markup=False)


STORE_HELP = f"Store to read: a SQLite file or a postgresql:// URL [default: {shown_default()}]."


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
    out = _stdout()
    if not runs:
        out.print(f"no runs in store {path}", markup=False)
        return
    out.print(terminal.runs_table(runs))
    out.print(f"store: {path}", markup=False)


FAIL_ON = ("slower", "inconclusive")


@cli.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="[RUN_B]", required=False)
@click.option("--by", "by", type=click.Choice(["host"]), default=None,
              help="--by host RUN: the machines that ran one run's repetitions side by side (a run "
                   "spread over several nodes), each against the first (or --baseline-host).")
@click.option("--baseline-host", "baseline_host", metavar="NAME", default=None,
              help="With --by host: the machine the others are compared with (its hostname) "
                   "[default: the one that ran the run's first repetition].")
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
                   "inconclusive, when any is undecided: a regression gate for CI pipelines. Repeatable.")
def compare(run_a: str, run_b: str | None, by: str | None, baseline_host: str | None, store_path: str | None,
            as_json: bool, margin_pct: float | None, no_multiplicity: bool, fail_on: tuple[str, ...]) -> int:
    """Compare stored run RUN_B with RUN_A (the baseline); ids from `cryptoperf list`, or `latest`.

    Prints the host differences first (CPU model, flags, kernel, hypervisor, library versions),
    then one row per cell measured in both runs — matched by configuration, backend, operation
    label and size — with the latency Δ and its interval (Welch's t on the log values of each
    run's repetitions, adjusted over all matched cells), the throughput Δ, the verdict (run B
    against run A: "x % slower", "equivalent within ±m %" or "inconclusive") and the noise;
    then the cells measured in one run only. With --fail-on it is a regression gate: exit 1 when
    a verdict fails it, 0 otherwise.

    With --by host RUN, the same for the machines of one run whose repetitions ran on several
    (told apart by hostname and CPU model): each machine's repetitions against the baseline
    machine's, cell by cell.
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
        a = stored.load_run(store, run_a)
        b = stored.load_run(store, run_b)
    for r in (a, b):
        _using(r)
    c = compare_mod.compare_runs(a, b, margin_pct=margin_pct, multiplicity=not no_multiplicity)
    failing = c.failing(fail_on)
    if as_json:
        click.echo(json.dumps(report_json.compare_document("compare", c, fail_on, [("", d) for d in failing]), indent=1))
        return 1 if failing else 0
    out = _stdout()
    for r in (a, b):
        out.print(f"run {r.id}: {r.meta.get('study_name') or r.meta.get('kind')}, "
                  f"{terminal.fmt_date(r.meta.get('started_at'))}, {r.meta.get('status')}", markup=False)
    out.print(terminal.host_line(a.host).replace("host:", f"host of run {a.id}:", 1), markup=False)
    _print_comparison(out, c, a.id, b.id, "run", "runs")
    _print_gate(out, fail_on, [("", d) for d in failing])
    return 1 if failing else 0


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
    out.print(f"verdicts: {terminal.verdict_counts(c.deltas)}; {c.method}", markup=False, soft_wrap=True)
    for name, cells in ((a, c.only_a), (b, c.only_b)):
        if cells:
            out.print(f"unmatched, only {'in' if side == 'run' else 'on'} {terminal.side_name(name)}: "
                      + ", ".join(f"{s.cell.key} ({s.cell.op})" for s in cells), markup=False)


def _print_gate(out: Console, fail_on: tuple[str, ...], failing: list[tuple[str, object]]) -> None:
    """The regression gate's line, when --fail-on was given: (machine name or '', delta)."""
    if not fail_on:
        return
    if failing:
        out.print(f"regression gate (--fail-on {' '.join(fail_on)}): FAILED by {len(failing)} cell(s): "
                  + ", ".join(f"{where + ': ' if where else ''}{d.backend} {d.label} {d.configuration or ''}".strip()
                              for where, d in failing), markup=False, soft_wrap=True)
    else:
        out.print(f"regression gate (--fail-on {' '.join(fail_on)}): passed", markup=False)


def _compare_hosts(run_id: str, baseline_host: str | None, store_path: str | None, as_json: bool,
                   margin_pct: float | None, no_multiplicity: bool, fail_on: tuple[str, ...]) -> int:
    """``compare --by host RUN``: each machine of the run against the baseline machine; exit 1
    when --fail-on fails, 0 otherwise."""
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
    hc = compare_mod.compare_hosts(run, baseline_host, margin_pct=margin_pct, multiplicity=not no_multiplicity)
    _using(run)
    failing = hc.failing(fail_on)
    if as_json:
        click.echo(json.dumps(report_json.compare_document("compare_hosts", hc, fail_on, failing), indent=1))
        return 1 if failing else 0
    out = _stdout()
    out.print(f"run {run.id}: {run.meta.get('study_name') or run.meta.get('kind')}, "
              f"{terminal.fmt_date(run.meta.get('started_at'))}, {run.meta.get('status')}; "
              f"{len(hc.hosts)} hosts, baseline {hc.baseline.name}", markup=False)
    for h in hc.hosts:
        out.print(terminal.host_line(h.host).replace("host:", f"host {h.name} ({h.measured} of {h.repetitions} "
                                                                "repetitions measured):", 1), markup=False)
    for h, c in zip(hc.hosts[1:], hc.comparisons):
        _print_comparison(out, c, hc.baseline.name, h.name, "host", "hosts")
    _print_gate(out, fail_on, failing)
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

    err = _stderr()
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


@cli.command("plan")
@click.argument("run_id", required=False, default="latest")
@click.option("--op", "op", metavar="OP", help="Operation (or study label) to plan for, e.g. rsa2048-sign.")
@click.option("--per-request", "request", metavar="'OP + OP …'",
              help="A request made of several operations, e.g. 'ecdsa-p256-sign + x25519-keygen + "
                   "x25519-derive' (a TLS 1.3 server's full handshake); a term may have a count, "
                   "2*OP or OP*2. --rate is then requests per second. Not with --op.")
@click.option("--rate", "rate", metavar="N", help="Operations (or requests) per second to sustain: "
              "9.6, 2000, 2k, 2.5k/s, 1M.")
@click.option("--configuration", "configuration", metavar="C", help="Configuration of the run to use.")
@click.option("--backend", "backend", metavar="B", help="Backend of the run to use.")
@click.option("--size", "size", metavar="BYTES", help="Message size of the cell to use: 1024, 16k, 1MiB (k = 1024).")
@click.option("--side", "side", type=click.Choice(["server", "client", "both"]), default=None,
              help="Whose CPU to price a workload with: its server's (the default for a workload that runs a "
                   "server), its client's, or both added up. A primitive has one: the worker's.")
@click.option("--remainder-from", "remainder_from", metavar="RUN",
              help="With --per-request: a run (same host) with the workload whose non-crypto rest per "
                   "transaction (its CPU minus the request's primitives) is added [default: RUN_ID].")
@click.option("--remainder-op", "remainder_op", metavar="CELL",
              help="With --per-request: that workload's cell, by label (e.g. 'full handshake @ c=2': the cell "
                   "of the request's configuration and backend if it has several) or by key; its --side CPU "
                   "(server by default).")
@click.option("--from", "from_config", metavar="CONFIG", help="Cost of a change: from this configuration …")
@click.option("--to", "to_config", metavar="CONFIG", help="… to this one (same backend, label and size).")
@click.option("--core-price-per-year", type=float, metavar="Q",
              help="Price of one CPU core per year (any currency; the same as the accelerator's).")
@click.option("--accel-ops-per-s", type=float, metavar="A", help="Accelerator capacity: ops/s per unit.")
@click.option("--accel-price-per-year", type=float, metavar="P", help="Price of one accelerator unit per year.")
@click.option("--accel-host-cpu-us-per-op", type=float, default=0.0, show_default=True, metavar="H",
              help="Host CPU still spent per offloaded operation (driver, polling), in µs.")
@click.option("--accel-latency-us", type=float, metavar="L",
              help="Accelerator latency per operation as the application sees it, in µs (shown only).")
@click.option("--accel-min-units", type=int, default=1, show_default=True, metavar="M",
              help="Accelerator units bought whatever the load (2 for redundancy).")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help=STORE_HELP)
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json", "md", "html"]), default=None,
              help="text (the default), json (one document), md (a short answer to share), html (one "
                   "self-contained page).")
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help=f"File to write, '-' for stdout [default: stdout; for html {DEFAULT_OUT_DIR}/plan-run<id>.html, "
                   "or plan-run<id>-2.html … if taken]. An existing file is never replaced.")
def plan_cmd(run_id: str, op: str | None, request: str | None, rate: str | None, configuration: str | None,
             backend: str | None, size: str | None, side: str | None, remainder_from: str | None,
             remainder_op: str | None, from_config: str | None, to_config: str | None,
             core_price_per_year: float | None, accel_ops_per_s: float | None,
             accel_price_per_year: float | None, accel_host_cpu_us_per_op: float,
             accel_latency_us: float | None, accel_min_units: int, store_path: str | None,
             fmt: str | None, as_json: bool, output: str | None) -> None:
    """Economics of an operation, or of a request made of several, measured in stored run
    RUN_ID (default: latest).

    \b
    (a) cores needed for --rate: rate × CPU ns per op (or per request) / 1e9, from the
        geometric mean CPU time over repetitions (with its 95 % CI and range), and one
        core's capacity;
    (b) with --from C1 --to C2: cores before and after that change of configuration;
    (c) with --accel-ops-per-s, --accel-price-per-year and --core-price-per-year (with --op
        only): the rate above which offloading to the accelerator saves money, and what it
        saves at --rate.

    A workload (a TLS handshake at a load level) is priced with its server's CPU per
    transaction unless --side says otherwise; every answer names the side. With
    --per-request, --remainder-op adds what a workload measured on the same host spends
    per transaction beyond the request's primitives (the non-crypto rest); without it,
    the answer says the remainder is left out.

    \b
    cryptoperf plan --per-request "ecdsa-p256-sign + x25519-keygen + x25519-derive" --rate 2k
    cryptoperf plan --op rsa --from old --to new --rate 9.6 --format md -o plan.md
    cryptoperf plan 7 --op "full handshake @ c=2" --from rsa --to ecdsa --rate 3k
    cryptoperf plan 7 --per-request "sign + x25519-keygen + x25519-derive" --from rsa --to ecdsa
      --backend aws-lc --remainder-op "full handshake @ c=2" --rate 3k

    Method and a worked example: docs/methodology.md, "Economics".
    """
    from cryptoperf.report import economics as report_economics

    if op and request:
        raise UsageError("give either --op OP (one operation) or --per-request 'OP + OP …' "
                         "(the operations of one request), not both")
    if not op and request is None:
        raise UsageError("plan needs --op OP, the operation (or study label) to plan for, or --per-request "
                         "'OP + OP …' for a request of several; see `cryptoperf list` and `cryptoperf plan --help`")
    if rate is None:
        raise UsageError("plan needs --rate N, the operations (or requests) per second to sustain "
                         "(e.g. --rate 9.6, --rate 2k)")
    if as_json and fmt not in (None, "json"):
        raise UsageError(f"--json is --format json; it cannot go with --format {fmt}")
    fmt = "json" if as_json else (fmt or "text")
    rate_per_s = economics.parse_rate(rate)
    try:
        size_bytes = opnames.parse_size(size) if size is not None else None
    except ValueError as e:
        raise UsageError(f"--size: {e}") from None
    for name, value in (("--accel-host-cpu-us-per-op", accel_host_cpu_us_per_op),
                        ("--accel-latency-us", accel_latency_us)):
        if value is not None:
            economics.check_number(name, value)
    accel = None
    if (accel_ops_per_s is not None or accel_price_per_year is not None or accel_latency_us is not None
            or accel_host_cpu_us_per_op != 0 or accel_min_units != 1):
        if accel_ops_per_s is None or accel_price_per_year is None:
            raise UsageError("describe the accelerator with both --accel-ops-per-s and --accel-price-per-year")
        accel = economics.Accelerator(
            ops_per_s_per_unit=accel_ops_per_s, price_per_year=accel_price_per_year,
            host_cpu_ns_per_op=accel_host_cpu_us_per_op * 1e3,
            latency_ns=accel_latency_us * 1e3 if accel_latency_us is not None else None,
            min_units=accel_min_units)
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
        try:
            remainder_run = None if remainder_from is None else stored.load_run(store, remainder_from)
        except UsageError as e:
            raise UsageError(f"--remainder-from: {e}") from None
    result = economics.plan(run, op or None, rate_per_s, request=request, configuration=configuration,
                            backend=backend, size_bytes=size_bytes, from_config=from_config, to_config=to_config,
                            accelerator=accel, core_price_per_year=core_price_per_year, side=side,
                            remainder_run=remainder_run, remainder_op=remainder_op)
    text = report_economics.render(result, run, fmt)
    if output == "-" or (output is None and fmt != "html"):
        _using(run)
        click.echo(text, nl=False)
        return
    target = Path(output) if output else report_economics.default_path(DEFAULT_OUT_DIR, run, fmt)
    written = render_write(text, target, fix="pass another -o PATH, or -o - for stdout", unique=output is None)
    _using(run)
    click.echo(str(written))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cryptoperf`` console script; returns the exit status.

    0 success; 1 a worker, store or internal error; 2 a usage or study-file error; 130 Ctrl-C
    (or SIGTERM, which stops a study the same way: its finished repetitions stored, the run
    marked interrupted and resumable).
    """
    try:
        signal.signal(signal.SIGTERM, _terminated)
    except ValueError:
        pass  # not the main thread (an embedding program): SIGTERM keeps its handler
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="cryptoperf",
                      standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        return e.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        # click turns Ctrl-C into Abort; a study's own interruption (its run id) is the cause
        cause = e if isinstance(e, StudyInterrupted) else e.__cause__ or e.__context__
        if isinstance(cause, StudyInterrupted):
            return _fail(str(cause), 130)
        return _fail("interrupted; repetitions finished so far are in the store", 130)
    except click.exceptions.UsageError as e:
        hint = ""
        if e.ctx is not None:
            hint = f" (see `{e.ctx.command_path} --help`)"
        return _fail(e.format_message() + hint, 2)
    except click.exceptions.ClickException as e:
        return _fail(e.format_message(), 1)
    except CryptoperfError as e:
        return _fail(str(e), e.exit_code)
    except BrokenPipeError:
        return 1
    except Exception as e:  # never a traceback for the user
        if os.environ.get("CRYPTOPERF_DEBUG"):
            raise
        return _fail(f"internal error: {type(e).__name__}: {e} (rerun with CRYPTOPERF_DEBUG=1 "
                     "for the traceback, and please report it)", 1)


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM: stop as Ctrl-C does (KeyboardInterrupt), so the run is closed as interrupted."""
    raise KeyboardInterrupt


def _fail(message: str, code: int) -> int:
    one_line = mask(" ".join(str(message).split()))  # a store URL's password never shows
    try:
        sys.stderr.write(f"cryptoperf: error: {one_line}\n")
        sys.stderr.flush()
    except OSError:
        pass
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
