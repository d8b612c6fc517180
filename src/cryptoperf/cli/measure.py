"""``cryptoperf speed`` and ``cryptoperf study``: the commands that run the worker and measure.

Both parse their options, call one engine function (``engine.speed``, ``engine.prepare_study`` and
``engine.run_study``) that a Python user can call too, and print its answer.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

import click

from cryptoperf import analysis, builds, compare, cpumask, engine, opnames, study as study_mod
from cryptoperf.cli.app import cli, err_console, out_console
from cryptoperf.engine import DEFAULT_OUT_DIR, DEFAULT_SPEED_OPS, gate as gate_mod
from cryptoperf.errors import NoComparison, UsageError
from cryptoperf.report import json as report_json
from cryptoperf.report import study_text, terminal
from cryptoperf.report.text import cpu_title, host_line, verdict_counts
from cryptoperf.store.db import shown_default


JOB_HELP = ("Label of the CI job making the run, recorded with the machine's boot id as the run's session: "
            "`cryptoperf compare` counts the runs of one job as one unit. Default: what the CI sets — "
            "GitHub Actions (GITHUB_RUN_ID.GITHUB_RUN_ATTEMPT.GITHUB_JOB), GitLab (CI_JOB_ID), Buildkite "
            "(BUILDKITE_JOB_ID), CircleCI (CIRCLE_WORKFLOW_JOB_ID), Jenkins (BUILD_TAG, else BUILD_ID); "
            "elsewhere none, and the boot tells sessions apart; '' records none.")


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
              help="Backend to measure (repeatable); default: every library backend the worker has (a device backend such as pkcs11 only when named).")
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
@click.option("--runs", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Make this many independent runs, one after another, each stored as its own run "
                   "(a fresh set of worker processes and a fresh order each): what `cryptoperf "
                   "compare 1,2,3 4,5,6` needs to measure how much a whole run varies.")
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
@click.option("--job", "job", metavar="LABEL", default=None, help=JOB_HELP)
def speed(backends_: tuple[str, ...], ops: tuple[str, ...], sizes: tuple[int, ...],
          param_values: tuple[str, ...], repetitions: int, runs: int, baseline: str | None, seconds: float,
          warmup_s: float, threads: int, timeout_s: float | None, cpu: str, fips: bool, library: str,
          no_setup: bool, as_json: bool, store_path: str | None, no_store: bool, job: str | None) -> None:
    """Measure operations on backends: one row per (backend, operation, size).

    Each repetition is one fresh worker process; with --repetitions N every row runs N times in
    randomised blocks (a block runs every row once, in a seeded random order), and with N >= 3
    ops/s, p50 and CPU/op carry their 95 % interval. A backend that lacks an operation gives a
    row saying "unsupported", not an error. Where the worker batches k > 1 operations per timed
    sample, the percentiles are those of k-operation batch means (the table says so). A
    repetition the host disturbed (steal, other load: a study's default limits) is run again and
    flagged. Every `speed` call is stored as a run (see `cryptoperf list`) unless --no-store,
    with the session that made it (--job, else the CI's job, and the boot).

    \b
    cryptoperf speed --op SHA-256 --size 16k --repetitions 3 --baseline openssl
    cryptoperf speed --op rsa2048-sign --param padding=pss --param digest=sha384
    """
    err = err_console()
    if runs > 1 and no_store:
        raise UsageError("--runs makes runs to compare later: it needs the store (drop --no-store)")
    results = []
    for i in range(runs):
        if runs > 1:
            err.print(f"run {i + 1} of {runs}", markup=False)
        results.append(engine.speed(
            backends_, ops, sizes, seconds=seconds, warmup_s=warmup_s, threads=threads, timeout_s=timeout_s,
            cpu=cpu, fips=fips, library=library, params=_speed_params(param_values), repetitions=repetitions,
            baseline=baseline, setup=not no_setup, store=store_path, store_results=not no_store,
            progress=terminal.ProgressBar(err) if not as_json or err.is_terminal else None, console=err, job=job))
    if as_json:
        docs = [report_json.speed_document(r, r.settings) for r in results]
        click.echo(json.dumps(docs[0] if runs == 1 else {"runs": docs}, indent=1))
        return
    for result in results:
        _print_speed(result, repetitions, cpu, fips, library)
    stored_ids = [r.run_id for r in results if r.run_id is not None]
    if stored_ids:
        ids = ",".join(map(str, stored_ids))
        out_console().print(f"stored as run{'s' if len(stored_ids) > 1 else ''} {ids} in {results[0].store_path}"
                            + (f"; compare them as one side: cryptoperf compare {ids} <other runs>"
                               if len(stored_ids) > 1 else ""), markup=False, soft_wrap=True)


def _print_speed(result: engine.SpeedRun, repetitions: int, cpu: str, fips: bool, library: str) -> None:
    """One speed run's host line, table, notes and baseline ratios, on stdout."""
    out = out_console()
    out.print(host_line(result.host), markup=False)
    notes = terminal.Notes()
    title = ("cryptoperf speed" + cpu_title(cpu) + (" [FIPS worker]" if fips else "")
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
    for line in _disturbed_lines(result):
        out.print(line, markup=False, soft_wrap=True)
    build = result.settings["build"]
    for name, spec in builds.BUILDS.items():
        if (spec.setup is not None or spec.backends) and name != build:
            continue  # made on request (`cryptoperf setup`), or another worker's: not a missing part of this run
        available, why = builds.status(name)
        if not available:
            out.print(f"note: worker build '{name}' is unavailable: {why}", markup=False, soft_wrap=True)


def _disturbed_lines(result: engine.SpeedRun) -> list[str]:
    """One note per row whose repetitions the host disturbed: how many were run again, and how
    many were kept, flagged, because their re-run was disturbed too."""
    by_cell: dict[str, list] = {}
    for d in analysis.disturbances(result.outcomes):
        by_cell.setdefault(d.cell, []).append(d)
    out = []
    for cell, items in by_cell.items():
        again = [d for d in items if d.rerun]
        kept = [d for d in items if not d.rerun]
        what = f"{len(again)} repetition(s) disturbed by the host and run again (block " + \
            ", ".join(str(d.block) for d in again) + f": {again[0].why})" if again else ""
        flag = (f"{len(kept)} kept disturbed, its re-run disturbed too (block "
                + ", ".join(str(d.block) for d in kept) + f": {kept[0].why})") if kept else ""
        out.append(f"note: {cell.strip('/')}: " + "; ".join(x for x in (what, flag) if x))
    return out


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
@click.option("--allow-remote", "allow_remote", metavar="IP:PORT", multiple=True,
              help="Let an operation's connect (a TLS server already running) be this address, "
                   "though it is not a loopback one (repeatable). Without it, a study loads only "
                   "this machine's servers.")
@click.option("--job", "job", metavar="LABEL", default=None, help=JOB_HELP)
@click.option("--fail-on", "fail_on", type=click.Choice(compare.FAIL_ON), multiple=True,
              help="Exit with status 1 when a comparison is 'slower' beyond the margin (and, with "
                   "undecided, when one is undecided): a regression gate, e.g. of a study whose "
                   "configurations are a pipeline's baseline and candidate builds (worker = \"path\"). "
                   "Repeatable. docs/ci-gate.md.")
def study(file: str | None, store_path: str | None, out_dir: str, show_options: bool,
          dry_run: bool, no_report: bool, no_setup: bool, margin_pct: float | None,
          no_multiplicity: bool, executor: str, address: str | None, resume_id: str | None,
          allow_remote: tuple[str, ...], job: str | None, fail_on: tuple[str, ...]) -> int:
    """Run a study FILE (TOML): configurations against a baseline, with verdicts you can act on.

    Every cell (configuration × backend × operation × size) is calibrated once, then runs in
    `repetitions` randomised blocks: a block runs every configuration of a group once, each in a
    fresh worker, in a seeded random order. Each configuration is compared with the baseline
    block by block, and every comparison ends in a verdict: "x % slower/faster [CI]",
    "equivalent within ±m %", or "inconclusive" with the blocks that would decide it.
    Prints the delta table and the noise table; writes the complete results as JSON under
    --out and into the --store (each repetition as soon as it finishes), and beside the
    JSON the HTML report and a Markdown summary. The file format is in docs/study-files.md;
    `--options` lists every key.

    A configuration with `library = "openssl@3.6"` needs a worker built from source; the first
    study that needs it builds it (once, cached; see `cryptoperf setup`) unless --no-setup.
    """
    if show_options:
        click.echo(study_mod.options_help(engine.default_rules()), nl=False)
        return 0
    if file is None:
        raise UsageError("study needs a FILE (a study .toml); see `cryptoperf study --help`")
    err, out = err_console(), out_console()
    prior = None
    if resume_id is not None:
        engine.refuse_settings_on_resume(margin_pct, True if no_multiplicity else None)
        prior = engine.prior_run(file, resume_id, store_path)
    ex = engine.make_executor(executor, address) if not dry_run else None  # no Ray: one line, now
    plan = engine.prepare_study(file, setup=not no_setup, dry_run=dry_run, margin_pct=margin_pct,
                             multiplicity=False if no_multiplicity else None, console=err,
                             allow_remote=allow_remote)
    if prior is not None:
        plan = plan.resuming(prior)
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
    say(study_text.power_line(plan))
    warning = study_text.power_warning(plan)
    if warning:
        say(warning)
    if prior is not None:
        say(study_text.resume_line(prior, plan))
    if cluster:
        say(study_text.cluster_line(cluster))
    if dry_run:
        _dry_run(plan, say)
        return 0

    def show_host(host: dict, checks: list, busy_host) -> None:
        err.print(host_line(host), markup=False)
        busy = study_text.busy_line(busy_host) if executor == "local" else None
        if busy:  # says what the other-load check would, and what the study does about it
            say(busy)
            checks = [c for c in checks if c.name != "other load"]
        terminal.host_warnings(err, checks)

    run = engine.run_study(plan, store=store_path, out_dir=out_dir, progress=terminal.ProgressBar(err),
                           reports=not no_report, console=err, on_host=show_host, executor=ex, resume=prior,
                           check_host=False, job=job)
    a = run.analysis
    notes = terminal.Notes()
    out.print(terminal.delta_table(run.deltas, plan.study.baseline, notes, a.level))
    out.print(terminal.noise_table(run.summaries.values(), plan.study.noise_threshold_pct, notes))
    notes.print(out)
    out.print(f"verdicts: {verdict_counts(run.deltas)}; {a.method}", markup=False, soft_wrap=True)
    for line in terminal.mask_warnings(run.outcomes) + study_text.footer_lines(run):
        out.print(line, markup=False, soft_wrap=True)
    why = engine.no_comparison_reason(run)
    if why:
        raise NoComparison(why)
    if not fail_on:
        return 0
    outcome = gate_mod.decide(run.deltas, fail_on, a.comparisons, len(plan.looks))
    terminal.print_gate(out, fail_on, [("", d) for d in outcome.failing], [("", u) for u in outcome.undecided])
    if outcome.detectable_text():
        out.print(outcome.detectable_text(), markup=False, soft_wrap=True)
    return 0 if outcome.passed else 1


def _start_executor(ex: Any, plan: engine.PreparedStudy) -> dict:
    """Start the executor for ``plan`` (Ray: the cluster, its nodes' versions and the hosts
    checked, before anything is said); its Ray cluster description, or {} (local, dry run)."""
    if ex is None:
        return {}
    try:
        return ex.start(plan).get("ray") or {}
    except BaseException:
        ex.close()
        raise


def _dry_run(plan: engine.PreparedStudy, say: Callable[[str], None]) -> None:
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
