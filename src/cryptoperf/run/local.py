"""Execute repetitions on this machine: one fresh worker process each, one at a time.

Repetitions are strictly sequential (measurements must not compete for the CPU). Every
finished repetition — measured, unsupported, invalid or failed — is handed to ``on_outcome``
at once (the store commits it), so a crash of the orchestrator loses nothing already measured.
A worker that crashes, hangs past the timeout or refuses a request fails only its own
repetition; a missing worker binary or a protocol mismatch stops everything (no later
repetition could succeed). A measured repetition that the host disturbed (``disturbed`` says
why: steal, other load) is run once more right away; the first attempt is kept as superseded,
the second is analysed, and flagged if it was disturbed too.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from contextlib import contextmanager
from typing import Any, Callable, Mapping, Protocol, Sequence, Union

from cryptoperf import builds, cpumask, workdir, workload_spec
from cryptoperf.errors import (DeviceUnavailable, ProtocolMismatch, WorkerCrashed, WorkerError, WorkerNotFound,
                               WorkerRequestError, WorkerTimeout)
from cryptoperf.model import Cell, FAILED, INVALID, OK, Outcome, Repetition, outcome_from_result
from cryptoperf.run import server as server_mod
from cryptoperf.run.server import ServerError
from cryptoperf.run.worker import WorkerClient
from cryptoperf.schedule import Settings, run_request


def utc_now() -> str:
    """The current UTC time as ISO 8601 with a Z, to the millisecond."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


def execute_one(workers: Workers, rep: Repetition, settings: Settings,
                unmasked: Mapping[tuple[str, str], str] | None = None) -> Outcome:
    """Run ``rep`` in a fresh worker (``workers``: see ``worker_for``); never raises for a
    failure of this one repetition.

    The worker starts with ``OPENSSL_ia32cap`` set to the cell's CPU mask (every mask, baseline
    included, sets it: the same environment size for every configuration), and the request
    carries ``unmasked[(build, backend)]``, the capability vector the library reported in an
    unmasked process, for the worker to check its own against.
    Raises WorkerNotFound / ProtocolMismatch (fatal for every repetition).
    """
    started = utc_now()
    vector = (unmasked or {}).get((rep.cell.build, rep.cell.backend))
    needs_dir = rep.cell.spec is not None and rep.cell.spec.needs_dir  # a file workload's private directory
    try:
        with workdir.repetition_dir(needs_dir, settings.work_dir) as work, \
                _server_under_test(rep, settings) as server, \
                WorkerClient(worker_for(workers, rep.cell), env={**cpumask.worker_env(rep.cell.cpu), **settings.env}) as w:
            w.hello()
            request = run_request(rep, settings, vector)
            if work is not None:
                request["params"] = {**request["params"], workload_spec.DIR_PARAM: work}
            if server is not None:
                request["params"] = {**request["params"], **server.params(rep.cell.spec.server_under_test)}
            result = w.run(request, timeout_s=settings.timeout_s)
            died = server.died() if server is not None else None
        outcome = outcome_from_result(rep, result)
        if died and outcome.status == OK:
            outcome = Outcome(rep, INVALID, died, result=outcome.result)
        elif died:
            outcome.reason = f"{outcome.reason} ({died})" if outcome.reason else died
    except (WorkerNotFound, ProtocolMismatch, DeviceUnavailable):
        raise
    except ServerError as e:
        outcome = Outcome(rep, FAILED, f"server under test: {e}")
    except WorkerTimeout as e:
        outcome = Outcome(rep, FAILED, f"timeout: {e}" + _tail_hint(e.stderr_tail), stderr_tail=e.stderr_tail)
    except WorkerCrashed as e:
        outcome = Outcome(rep, FAILED, f"worker crashed: {e}", stderr_tail=e.stderr_tail)
    except WorkerRequestError as e:
        outcome = Outcome(rep, FAILED, f"worker refused the repetition ({e.code}): {e}")
    except WorkerError as e:
        outcome = Outcome(rep, FAILED, f"worker error: {e}")
    outcome.started_at, outcome.finished_at = started, utc_now()
    return outcome


@contextmanager
def _server_under_test(rep: Repetition, settings: Settings):
    """The cell's server under test (``Cell.server``), started for this repetition and stopped
    after it (``run.server.started``), under the cell's CPU mask as its worker is; None for a
    cell without one."""
    spec = rep.cell.server
    if spec is None:
        yield None
        return
    name = (spec.command.split() or ["server"])[0]
    with server_mod.started(spec, settings.work_dir, name, rep.cell.spec.server_under_test,
                            cpumask.worker_env(rep.cell.cpu)) as running:
        yield running


def _tail_hint(tail: str) -> str:
    last = tail.strip().splitlines()[-1] if tail.strip() else ""
    return f"; stderr: {last}" if last else ""


class Progress(Protocol):
    """What ``execute`` tells about its progress (``report.terminal.ProgressBar`` draws it)."""

    def begin(self, description: str, total: int) -> None:
        """A phase of ``total`` repetitions starts."""

    def starting(self, rep: Repetition) -> None:
        """``rep`` is about to run."""

    def finished(self, outcome: Outcome) -> None:
        """``outcome`` is done (re-runs of disturbed repetitions included)."""

    def end(self) -> None:
        """The phase is over."""


class NoProgress:
    """A ``Progress`` that shows nothing (the Python API's default)."""

    def begin(self, description: str, total: int) -> None:
        """Nothing."""

    def starting(self, rep: Repetition) -> None:
        """Nothing."""

    def finished(self, outcome: Outcome) -> None:
        """Nothing."""

    def end(self) -> None:
        """Nothing."""


def execute(reps: Sequence[Repetition], settings: Settings, workers: Workers,
            on_outcome: Callable[[Outcome], None] | None = None, progress: Progress | None = None,
            description: str = "measuring", disturbed: Callable[[Outcome], str] | None = None,
            unmasked: Mapping[tuple[str, str], str] | None = None,
            run_one: Callable[[Repetition], Outcome] | None = None) -> list[Outcome]:
    """Execute ``reps`` in order, one fresh worker each; return the outcomes in order (a re-run
    follows the attempt it supersedes). ``run_one`` runs one repetition instead of
    ``execute_one`` (the Ray executor's jobs spread over nodes).

    ``on_outcome`` is called with each outcome as soon as it exists (before the next
    repetition starts). ``disturbed`` says why the host disturbed a measured outcome ('' if it
    did not); such a repetition is run once more at once. Raises WorkerNotFound /
    ProtocolMismatch; exceptions from ``on_outcome`` propagate.
    """
    progress = progress or NoProgress()
    one = run_one or (lambda r: execute_one(workers, r, settings, unmasked))
    outcomes: list[Outcome] = []
    progress.begin(description, len(reps))
    try:
        for rep in reps:
            progress.starting(rep)
            outcome = one(rep)
            why = disturbed(outcome) if disturbed and outcome.ok and not rep.calibration else ""
            if why:
                outcome.disturbed, outcome.superseded = why, True
                _emit(outcome, outcomes, on_outcome, progress)
                again = dataclasses.replace(rep, attempt=rep.attempt + 1)
                progress.starting(again)
                outcome = one(again)
                if outcome.ok:
                    outcome.disturbed = disturbed(outcome)
            _emit(outcome, outcomes, on_outcome, progress)
    finally:
        progress.end()
    return outcomes


class LocalExecutor:
    """The default executor: every repetition on this machine, one at a time (``execute``).

    The interface the engine drives (the Ray executor, ``run.ray.RayExecutor``, has the same):
    ``start(plan)`` before the run is stored (returns what to add to the run's host
    fingerprint, nothing here), ``execute(...)`` for each phase, ``close()`` at the end, and the
    counts ``retried_blocks`` and ``failed_blocks`` (blocks run again or lost with a node;
    always 0 here)."""

    name = "local"
    retried_blocks = 0
    failed_blocks = 0

    def start(self, plan: Any) -> dict:
        """Nothing to prepare; returns {} (nothing to add to the host fingerprint). Raises
        StudyError for ``slices_on = "nodes"``, which needs the Ray executor."""
        study = getattr(plan, "study", None)
        if getattr(study, "slices_on", "host") != "host":
            raise study.error("study", 0, "slices_on", f"{study.slices_on!r} runs a job's slices on several Ray nodes; "
                              "run with --executor ray (docs/ray.md), or remove slices_on")
        return {}

    def execute(self, reps: Sequence[Repetition], settings: Settings, workers: Workers,
                on_outcome: Callable[[Outcome], None] | None = None, progress: Progress | None = None,
                description: str = "measuring", disturbed: Callable[[Outcome], str] | None = None,
                unmasked: Mapping[tuple[str, str], str] | None = None,
                on_superseded: Callable[[list[Outcome], str], None] | None = None) -> list[Outcome]:
        """``execute`` (this module's function) on this machine; ``on_superseded`` is never
        called (a block here never runs again whole)."""
        return execute(reps, settings, workers, on_outcome=on_outcome, progress=progress,
                       description=description, disturbed=disturbed, unmasked=unmasked)

    def close(self) -> None:
        """Nothing to release."""


def _emit(outcome: Outcome, outcomes: list[Outcome], on_outcome: Callable[[Outcome], None] | None,
          progress: Progress) -> None:
    outcomes.append(outcome)
    if on_outcome is not None:
        on_outcome(outcome)
    progress.finished(outcome)
