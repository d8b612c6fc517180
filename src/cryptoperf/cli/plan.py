"""``cryptoperf plan``: the economics of an operation, or of a request made of several, measured
in a stored run (``cryptoperf.economics`` answers; ``report/economics.py`` renders)."""

from __future__ import annotations

from typing import Any

from pathlib import Path

import click

from cryptoperf import economics, opnames
from cryptoperf.store import stored_run as stored
from cryptoperf.cli.app import STORE_HELP, cli, say_using
from cryptoperf.engine import DEFAULT_OUT_DIR
from cryptoperf.errors import UsageError
from cryptoperf.report.render import write_text as render_write
from cryptoperf.workloads import fleet


@cli.command("plan")
@click.argument("run_id", required=False, default="latest")
@click.option("--op", "op", metavar="OP", help="Operation (or study label) to plan for, e.g. rsa2048-sign; with "
              "--targets, the job kind (the study's label, e.g. audit) when the run has several.")
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
@click.option("--accel-from", "accel_from", metavar="CONFIG",
              help="The accelerator as the run measured it: configuration CONFIG's rows of --op (a device "
                   "backend's, e.g. pkcs11) give its capacity (their highest throughput), host CPU and latency, "
                   "instead of --accel-ops-per-s and friends; with --accel-price-per-year.")
@click.option("--targets", "targets", type=int, metavar="N",
              help="Fleet jobs: plan a job over N targets (with --deadline or --rate in targets per minute): the "
                   "slices needed and the job's time with its interval, from the run's fleet jobs.")
@click.option("--deadline", "deadline", metavar="D", help="With --targets: the time the job must finish in: 10m, 90s, 1.5h.")
@click.option("--slices", "slices", type=int, metavar="K",
              help="With --targets: the job's time on K slices (and, with --deadline, whether it meets it).")
@click.option("--cores", "cores", type=int, metavar="H",
              help="With --targets: the management server's cores [default: the measuring host's CPUs].")
@click.option("--cap", "cap", type=int, metavar="C",
              help="With --targets: targets in flight per slice [default: the measured jobs' cap].")
@click.option("--level", "level", type=int, metavar="TARGETS",
              help="With --targets: the measured job level to plan from, by its number of targets [default: the largest].")
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
             accel_latency_us: float | None, accel_min_units: int, accel_from: str | None, store_path: str | None,
             fmt: str | None, as_json: bool, output: str | None, **job: Any) -> None:
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

    (d) with --targets N and --deadline D (or --rate R/min), on a fleet-job run: the slices
        (management workers) that finish N targets in time and the job's time with its
        prediction interval — Little's law, a target's time growing with the CPU's load between
        two limits (random arrivals, lockstep), from the measured time a target is in flight
        and CPU per target; --op picks the job kind, --slices/--cap/--cores ask about another
        setup, and anything beyond the measured concurrency, targets or cores is named as an
        extrapolation.

    \b
    cryptoperf plan --per-request "ecdsa-p256-sign + x25519-keygen + x25519-derive" --rate 2k
    cryptoperf plan --op rsa --from old --to new --rate 9.6 --format md -o plan.md
    cryptoperf plan 7 --op "full handshake @ c=2" --from rsa --to ecdsa --rate 3k
    cryptoperf plan 7 --per-request "sign + x25519-keygen + x25519-derive" --from rsa --to ecdsa
      --backend aws-lc --remainder-op "full handshake @ c=2" --rate 3k
    cryptoperf plan 12 --targets 500 --deadline 10m --configuration fips
    cryptoperf plan 9 --op "rsa2048 sign @ 1 thread" --configuration software --rate 500
      --core-price-per-year 500 --accel-from token --accel-price-per-year 1000

    Method and a worked example: docs/methodology.md, "Economics".
    """
    from cryptoperf.report import economics as report_economics

    if any(job.get(k) is not None for k in ("targets", "deadline", "slices", "cap")):
        if request or from_config or to_config or accel_ops_per_s is not None or accel_from is not None:
            raise UsageError("--targets plans a fleet job (--op picks its job kind); it does not go with "
                             "--per-request, --from/--to or an accelerator")
        _plan_job(run_id, job, rate, configuration, op, store_path, "json" if as_json else (fmt or "text"), output)
        return
    if job.get("cores") is not None or job.get("level") is not None:
        raise UsageError("--cores and --level go with --targets (a fleet job's plan)")
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
    accel = _typed_accelerator(accel_ops_per_s, accel_price_per_year, accel_host_cpu_us_per_op, accel_latency_us,
                               accel_min_units, accel_from)
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
        try:
            remainder_run = None if remainder_from is None else stored.load_run(store, remainder_from)
        except UsageError as e:
            raise UsageError(f"--remainder-from: {e}") from None
    if accel_from is not None:
        if not op:
            raise UsageError("--accel-from measures the accelerator on --op OP's rows; give --op")
        accel = economics.measured_accelerator(run, op, accel_from, accel_price_per_year, accel_min_units, side)
    result = economics.plan(run, op or None, rate_per_s, request=request, configuration=configuration,
                            backend=backend, size_bytes=size_bytes, from_config=from_config, to_config=to_config,
                            accelerator=accel, core_price_per_year=core_price_per_year, side=side,
                            remainder_run=remainder_run, remainder_op=remainder_op)
    text = report_economics.render(result, run, fmt)
    if output == "-" or (output is None and fmt != "html"):
        say_using(run)
        click.echo(text, nl=False)
        return
    target = Path(output) if output else report_economics.default_path(DEFAULT_OUT_DIR, run, fmt)
    written = render_write(text, target, fix="pass another -o PATH, or -o - for stdout", unique=output is None)
    say_using(run)
    click.echo(str(written))


def _typed_accelerator(ops_per_s: float | None, price_per_year: float | None, host_cpu_us_per_op: float,
                       latency_us: float | None, min_units: int, measured_from: str | None):
    """The accelerator the --accel-* options type in, or None when none is described (or when
    ``measured_from`` names the run's configuration that measured it: built once the run is
    loaded, ``economics.measured_accelerator``). Raises UsageError for an incomplete or
    contradictory description, EconomicsError for a figure out of range."""
    for name, value in (("--accel-host-cpu-us-per-op", host_cpu_us_per_op), ("--accel-latency-us", latency_us)):
        if value is not None:
            economics.check_number(name, value)
    typed = ops_per_s is not None or latency_us is not None or host_cpu_us_per_op != 0
    if measured_from is not None:
        if typed:
            raise UsageError("--accel-from measures the accelerator's capacity, host CPU and latency in the run; "
                             "leave out --accel-ops-per-s, --accel-host-cpu-us-per-op and --accel-latency-us")
        if price_per_year is None:
            raise UsageError("--accel-from needs --accel-price-per-year, what one unit costs per year")
        return None
    if not (typed or price_per_year is not None or min_units != 1):
        return None
    if ops_per_s is None or price_per_year is None:
        raise UsageError("describe the accelerator with both --accel-ops-per-s and --accel-price-per-year "
                         "(or measure it: --accel-from CONFIG)")
    return economics.Accelerator(ops_per_s_per_unit=ops_per_s, price_per_year=price_per_year,
                                 host_cpu_ns_per_op=host_cpu_us_per_op * 1e3,
                                 latency_ns=latency_us * 1e3 if latency_us is not None else None, min_units=min_units)


def _plan_job(run_id: str, job: dict[str, Any], rate: str | None, configuration: str | None, op: str | None,
              store_path: str | None, form: str, output: str | None) -> None:
    """``plan --targets N --deadline D | --rate R/min``: the fleet-job planner on a stored run;
    ``job`` holds ``targets``, ``deadline``, ``slices``, ``cap``, ``cores`` and ``level`` as given."""
    from cryptoperf.economics import jobs
    from cryptoperf.report import job_plan

    targets, deadline, slices = job.get("targets"), job.get("deadline"), job.get("slices")
    if targets is None:
        raise UsageError("--deadline and --slices plan a fleet job: give --targets N, the number of targets")
    if deadline is not None and rate is not None:
        raise UsageError("--targets takes either --deadline (e.g. 10m) or --rate (targets per minute), not both")
    if deadline is None and rate is None and slices is None:
        raise UsageError("--targets needs --deadline (e.g. 10m), --rate (targets per minute, e.g. 50/min) or --slices K")
    if form == "html":
        raise UsageError("plan --targets writes text, json or md; --format html is for an operation's economics")
    deadline_s = jobs.parse_duration(deadline) if deadline is not None else None
    rate_per_min = jobs.parse_targets_rate(rate) if rate is not None else None
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
    figures = run.analysis.workloads.of(fleet.KIND)
    if figures is None:
        raise UsageError(f"run {run.id} has no fleet jobs: plan --targets needs a fleet-job study's run")
    m = jobs.measured_level(figures, configuration, job.get("level"), op)
    answer = jobs.plan_job(m, targets, deadline_s, rate_per_min, job.get("cores"), slices, job.get("cap"))
    text = job_plan.render(answer, run.id, form)
    say_using(run)
    if output in (None, "-"):
        click.echo(text, nl=False)
        return
    click.echo(str(render_write(text, Path(output), fix="pass another -o PATH, or -o - for stdout")))
