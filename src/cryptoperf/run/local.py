"""Execute a plan on this machine: one fresh worker process per run, one run at a time.

Runs are strictly sequential (measurements must not compete for the CPU). Every finished run
— measured, unsupported, invalid or failed — is handed to ``on_outcome`` at once (the store
commits it), so a crash of the orchestrator loses nothing already measured. A worker that
crashes, hangs past the timeout or refuses a request fails only its own run; a missing worker
binary or a protocol mismatch stops everything (no later run could succeed).
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from cryptoperf import builds, cpumask, stats
from cryptoperf.errors import (ProtocolMismatch, WorkerCrashed, WorkerError, WorkerNotFound,
                               WorkerRequestError, WorkerTimeout)
from cryptoperf.plan import Cell, Run, Settings, run_request
from cryptoperf.run.worker import WorkerClient

OK, UNSUPPORTED, INVALID, FAILED = "ok", "unsupported", "invalid", "failed"
STATUSES = (OK, UNSUPPORTED, INVALID, FAILED)


def utc_now() -> str:
    """The current UTC time as ISO 8601 with a Z, to the millisecond."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class RunOutcome:
    """What came of one run.

    Attributes:
        run: the planned run.
        status: ``ok``, ``unsupported`` (the backend lacks the operation: an answer, not an
            error), ``invalid`` (validation failed, never timed) or ``failed`` (crash, timeout,
            refused request, unreadable result).
        reason: why, for every status but ok ('' for ok).
        result: the worker's ``result`` message, or None when there is none.
        latency: latency figures (ns) from the histogram, for ok runs.
        throughput: derived figures (ops_per_s, bytes_per_s, cpu_ns_per_op, steal_pct), for ok.
        stderr_tail: the worker's last stderr lines for failed runs.
        started_at, finished_at: UTC ISO 8601 timestamps.
    """

    run: Run
    status: str
    reason: str = ""
    result: dict[str, Any] | None = None
    latency: stats.Latency | None = None
    throughput: stats.Throughput | None = None
    stderr_tail: str = ""
    started_at: str = ""
    finished_at: str = ""

    @property
    def ok(self) -> bool:
        """True if the run was measured."""
        return self.status == OK


def outcome_from_result(run: Run, result: dict[str, Any]) -> RunOutcome:
    """Turn a worker ``result`` message into a RunOutcome, deriving latency and throughput for
    ``ok`` results; an ok result whose histogram or counters cannot be read becomes ``failed``."""
    status = result.get("status")
    if run.cell.cpu != cpumask.BASELINE and result.get("cpu_mask") != run.cell.cpu:
        return RunOutcome(run, FAILED, f"the worker did not verify CPU mask '{run.cell.cpu}' "
                          f"(its result names {result.get('cpu_mask')!r}); rebuild it with `pip install .`",
                          result)
    if status in (UNSUPPORTED, INVALID):
        return RunOutcome(run, status, result.get("reason") or status, result)
    if status == OK and run.cell.build == builds.FIPS and result.get("fips") is not True:
        return RunOutcome(run, FAILED, f"the FIPS worker measured {run.cell.backend} without reporting "
                          f"FIPS mode (its result says fips={result.get('fips')!r}); not counted as FIPS",
                          result)
    if status != OK:
        return RunOutcome(run, FAILED, f"worker returned unknown status {status!r}", result)
    try:
        latency = stats.latency_from_histogram(result["histogram"])
        tp = stats.throughput(result)
    except (KeyError, ValueError) as e:
        return RunOutcome(run, FAILED, f"unreadable result: {e}", result)
    return RunOutcome(run, OK, "", result, latency, tp)


Workers = Union[str, os.PathLike, Mapping[str, Union[str, os.PathLike]]]


def worker_for(workers: Workers, cell: Cell) -> str | os.PathLike:
    """The binary for ``cell``: ``workers`` is one path (every cell uses it) or a mapping from
    build name (``Cell.build``) to path. Raises BuildUnavailable when the mapping lacks the
    cell's build."""
    if isinstance(workers, Mapping):
        try:
            return workers[cell.build]
        except KeyError:
            raise builds.BuildUnavailable(builds.missing_reason(cell.build)) from None
    return workers


def execute_one(worker_path: Workers, run: Run, settings: Settings) -> RunOutcome:
    """Run ``run`` in a fresh worker (``worker_path``: see ``worker_for``); never raises for a
    failure of this one run.

    The worker is started with ``OPENSSL_ia32cap`` set to the cell's CPU mask (removed for
    ``baseline``): the libraries read it only when they are loaded.
    Raises WorkerNotFound / ProtocolMismatch (fatal for every run).
    """
    started = utc_now()
    try:
        with WorkerClient(worker_for(worker_path, run.cell), env=cpumask.worker_env(run.cell.cpu)) as w:
            w.hello()
            result = w.run(run_request(run, settings), timeout_s=settings.timeout_s)
        outcome = outcome_from_result(run, result)
    except (WorkerNotFound, ProtocolMismatch):
        raise
    except WorkerTimeout as e:
        outcome = RunOutcome(run, FAILED, f"timeout: {e}" + _tail_hint(e.stderr_tail),
                             stderr_tail=e.stderr_tail)
    except WorkerCrashed as e:
        outcome = RunOutcome(run, FAILED, f"worker crashed: {e}", stderr_tail=e.stderr_tail)
    except WorkerRequestError as e:
        outcome = RunOutcome(run, FAILED, f"worker refused the run ({e.code}): {e}")
    except WorkerError as e:
        outcome = RunOutcome(run, FAILED, f"worker error: {e}")
    outcome.started_at, outcome.finished_at = started, utc_now()
    return outcome


def _tail_hint(tail: str) -> str:
    last = tail.strip().splitlines()[-1] if tail.strip() else ""
    return f"; stderr: {last}" if last else ""


def execute(runs: Sequence[Run], settings: Settings, worker_path: Workers,
            on_outcome: Callable[[RunOutcome], None] | None = None,
            console: Console | None = None, show_progress: bool = True,
            description: str = "measuring", log_lines: bool = False) -> list[RunOutcome]:
    """Execute ``runs`` in order, one fresh worker each; return their outcomes in order.

    ``on_outcome`` is called with each outcome as soon as it exists (before the next run
    starts). Progress goes to ``console`` (stderr by default): a live bar when ``show_progress``,
    one line per finished run when ``log_lines`` (for logs, where a live bar cannot show).
    Raises WorkerNotFound / ProtocolMismatch; exceptions from ``on_outcome`` propagate.
    """
    console = console or Console(stderr=True)
    outcomes: list[RunOutcome] = []
    progress = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TextColumn("{task.fields[current]}", markup=False),
                        TimeRemainingColumn(), console=console, transient=True,
                        disable=not show_progress)
    with progress:
        task = progress.add_task(description, total=len(runs), current="")
        for run in runs:
            c = run.cell
            size = f" {c.size_bytes} B" if c.size_bytes is not None else ""
            conf = f" ({c.configuration})" if c.configuration else ""
            if c.cpu != cpumask.BASELINE:
                conf += f" [cpu {c.cpu}]"
            if c.build != builds.DEFAULT:
                conf += f" [{c.build}]"
            progress.update(task, current=f"{c.backend} {c.op}{size}{conf} rep {run.repetition}")
            outcome = execute_one(worker_path, run, settings)
            outcomes.append(outcome)
            if log_lines:
                what = (f"p50 {outcome.latency.p50_ns} ns" if outcome.ok and outcome.latency
                        else f"{outcome.status}: {outcome.reason.splitlines()[0] if outcome.reason else ''}")
                console.print(f"[{len(outcomes)}/{len(runs)}] {c.backend} {c.op}{size}{conf} "
                              f"rep {run.repetition}: {what}", markup=False, highlight=False)
            if on_outcome is not None:
                on_outcome(outcome)
            progress.advance(task)
    return outcomes
