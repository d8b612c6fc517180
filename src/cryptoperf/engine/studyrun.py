"""Running a planned study: calibration, randomised blocks, sequential looks, one analysis,
the store and the reports (``run_study``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from cryptoperf import analysis, builds, hostinfo, schedule
from cryptoperf import workdir
from cryptoperf.engine import preflight
from cryptoperf.errors import StudyInterrupted, UsageError
from cryptoperf.model import CALIBRATION_BLOCK, OK, RETRIED, Cell, Outcome, Repetition
from cryptoperf.report import formats as report_formats
from cryptoperf.report import json as report_json
from cryptoperf.report.terminal import ProgressBar
from cryptoperf.run import disturbance, local
from cryptoperf.store.db import Store
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.study import Study
from cryptoperf.engine.prepare import PreparedStudy, comparable, disturbance_rule, prepare_study
from cryptoperf.engine.resume import check_resume_host, host_fingerprint, prior_run, refuse_settings_on_resume
from cryptoperf.engine.workers import make_executor, unmasked_vectors


DEFAULT_OUT_DIR = "cryptoperf-results"


def run_study(source: str | os.PathLike | Study | PreparedStudy, *, store: str | os.PathLike | None = None,
              out_dir: str | os.PathLike | None = DEFAULT_OUT_DIR, progress: local.Progress | bool | None = None,
              reports: bool = True, setup: bool = True, margin_pct: float | None = None,
              multiplicity: bool | None = None, console: Any = None,
              on_host: Callable[[dict[str, Any], list[hostinfo.CheckResult], disturbance.Busy | None], None] | None = None,
              executor: str | Any = "local", address: str | None = None,
              resume: StoredRun | int | str | None = None, check_host: bool = True,
              job: str | None = None) -> "StudyRun":
    """Run a study and return it as a stored run, analysed.

    Args:
        source: a study file's path, a parsed ``Study`` or a ``PreparedStudy``.
        store: the store: a SQLite file's path, or a ``sqlite:///`` or ``postgresql://`` URL
            (default: ``store.default_location()``, the user's or ``$CRYPTOPERF_STORE``).
        out_dir: where the JSON document (and, with ``reports``, the HTML report and Markdown
            summary beside it) go; None writes no files.
        progress: a ``run.local.Progress``; True draws a progress bar on stderr; None is silent.
        setup: build a missing setup worker build (openssl@3.6) first.
        margin_pct, multiplicity: override the study's ``margin_pct`` / ``multiplicity``.
        on_host: called with the host fingerprint, the checks and ``run.disturbance.Busy`` (or
            None: the host was not already busy) before measuring (the fingerprint's
            ``load_before``: the other load measured just before the study, ``hostinfo.load_before``).
        executor: where the repetitions run: ``"local"`` (this machine, one at a time),
            ``"ray"`` (blocks as Ray tasks on a Ray cluster, ``run.ray``; Ray is imported only
            then), or an executor object (``run.local.LocalExecutor``, ``run.ray.RayExecutor``).
        address: with ``executor="ray"``: the Ray head's ``HOST:PORT`` (None: ``RAY_ADDRESS``,
            else a private local Ray instance).
        resume: continue an interrupted run of this study in ``store`` (its id, or the
            ``StoredRun`` that ``prior_run`` checked) instead of starting a new one: the
            repetitions it finished are kept, only the missing ones run (a block the
            interruption cut in two runs again whole; its finished half is kept, superseded),
            under the same run id, with the analysis settings stored with it (``margin_pct`` and
            ``multiplicity`` must then be None). The study file must be the one the run was
            started with (``prior_run`` checks its text, by SHA-256).
        check_host: check the output directory, the store, disk, memory and threads against
            what the study needs, and a resumed run's machine, before its first repetition
            (``check_before_running``); False when the caller has (the CLI, before it prints
            the plan).
        job: the label of the CI job making the run (``--job``), recorded with the boot id as
            the run's session (a resumed run records the session resuming it); None: the CI's
            own variables (``hostinfo.ci_job``), '' none.

    Returns a ``StudyRun`` (a ``StoredRun``: ``.deltas``, ``.summaries``, ``.analysis``, ...,
    plus the paths written, and with Ray the blocks retried or failed). Raises StudyError,
    UsageError, StoreError, WorkerError subclasses, RayError subclasses (Ray missing, the
    cluster unreachable, a node refused, a ``hosts`` selector no node matches) before anything
    is stored; PreflightError when the output directory or the store cannot be written, or the
    host lacks the disk or memory the study needs (``preflight.check``, whose warnings go to
    ``console``); on KeyboardInterrupt the repetitions finished so far are in the store and the
    run is marked interrupted.
    """
    prior = None
    try:
        job = hostinfo.ci_job(job)
    except ValueError as e:
        raise UsageError(f"--job: {e}") from None
    if resume is not None:
        refuse_settings_on_resume(margin_pct, multiplicity)
        prior = resume if isinstance(resume, StoredRun) else prior_run(
            source.study.path if isinstance(source, PreparedStudy) else source, resume, store)
    ex = make_executor(executor, address)
    try:
        plan = source if isinstance(source, PreparedStudy) else prepare_study(
            source, setup=setup, margin_pct=margin_pct, multiplicity=multiplicity, console=console)
        if prior is not None:
            plan = plan.resuming(prior)
        if check_host:
            check_before_running(plan, out_dir, store, prior, console)
        return _run_study(plan, ex, store=store, out_dir=out_dir, progress=progress, reports=reports,
                          on_host=on_host, prior=prior, job=job, console=console)
    finally:
        ex.close()


def check_before_running(prepared: PreparedStudy, out_dir: str | os.PathLike | None, store: str | os.PathLike | None,
                         prior: StoredRun | None = None, console: Any = None) -> None:
    """What is checked before the first repetition, once, by ``cryptoperf study`` (before it
    prints the prepared) or ``run_study``: the output directory, the store, disk, memory and
    threads (``preflight.check``; its warnings go to ``console``), and for a resumed run
    ``prior`` this machine and its libraries (``check_resume_host``). Raises PreflightError or
    UsageError, one line."""
    preflight.announce(preflight.check(prepared, out_dir, store), console)
    if prior is not None:
        check_resume_host(prior, host_fingerprint(prepared))


def _run_study(prepared: PreparedStudy, ex: Any, *, store: str | os.PathLike | None, out_dir: str | os.PathLike | None,
               progress: local.Progress | bool | None, reports: bool,
               on_host: Callable[[dict[str, Any], list[hostinfo.CheckResult], disturbance.Busy | None], None] | None,
               prior: StoredRun | None = None, job: str | None = None, console: Any = None) -> "StudyRun":
    """``run_study`` once its prepared study and executor are made (and, to resume, the run it
    continues): see there."""
    if progress is True:
        progress = ProgressBar()
    bar = progress or local.NoProgress()
    s = prepared.study
    _, hello = prepared.workers[builds.DEFAULT]
    host = host_fingerprint(prepared)
    checks = hostinfo.run_checks()
    host["checks"] = [c.as_dict() for c in checks]
    before = hostinfo.load_before()
    if before is not None:
        host["load_before"] = before
    host.update(ex.start(prepared))  # Ray: connect, check the nodes' versions and hosts, before storing
    if on_host is not None:
        on_host(host, checks, disturbance.Busy.of(s, host))
    if any(c.spec is not None and c.spec.needs_dir for c in prepared.cells):
        workdir.sweep_stale(prepared.settings.work_dir)  # what a study killed with SIGKILL left
    paths = {n: p for n, (p, _) in prepared.workers.items()}
    unmasked = unmasked_vectors(prepared.workers)
    # the load measured here seeds the steady level of this machine's repetitions (a Ray node
    # learns its own from its blocks)
    level = before["other_load_pct"] if before is not None and ex.name == "local" else None
    disturbed = disturbance_rule(s, int(hello.cpu.get("logical_cpus") or os.cpu_count() or 1), level)
    outcomes: list[Outcome] = list(prior.outcomes) if prior is not None else []
    rows: dict[int, int] = {}  # id(outcome) → its results row
    if prior is not None:
        rows.update({id(o): rid for o, rid in zip(prior.outcomes, prior.row_ids)})
    started = prior.meta["started_at"] if prior is not None else local.utc_now()
    status = "interrupted"
    with Store(store) as st:
        if prior is None:
            run_id = st.begin_run("study", started, host, study_name=s.name, study_toml=s.text, seed=prepared.seed,
                                  analysis=prepared.analysis.as_dict(), process=hostinfo.process_identity(job))
        else:
            run_id = prior.id
            st.reopen_run(run_id, hostinfo.process_identity(job))

        def record(o: Outcome) -> None:
            rows[id(o)] = st.add_outcome(run_id, o)  # stored first: memory never holds more
            outcomes.append(o)

        def superseded(lost: list[Outcome], why: str) -> None:
            st.supersede(run_id, [rows[id(o)] for o in lost if id(o) in rows], why)

        def execute(reps: list[Repetition], what: str) -> None:
            if prior is not None:
                reps, cut = schedule.missing(reps, outcomes)
                if cut:  # a block the interruption cut in two runs again whole
                    why = f"{RETRIED}the study stopped mid-block; the block ran again whole when run {run_id} resumed"
                    for o in cut:
                        o.superseded, o.disturbed = True, why
                    superseded(cut, why)
                if not reps:
                    return
            ex.execute(reps, prepared.settings, paths, on_outcome=record, progress=bar, description=what,
                       disturbed=disturbed, unmasked=unmasked, on_superseded=superseded)

        try:
            execute(schedule.calibration(prepared.cells), f"{s.name}: calibrating")
            batches, runnable = calibrated(prepared.cells, outcomes)
            runnable = comparable(runnable, s.baseline, s.contrasts)
            done = 0
            for look in prepared.looks if runnable else ():
                if done == 0:
                    cells = runnable
                else:
                    current = analysis.analyse(outcomes, s.baseline, prepared.analysis, context=analysis.context_of(None, s))
                    still = analysis.undecided(current.deltas)  # both sides of each, contrasts' too
                    if not still:
                        break
                    cells = [c for c in runnable if c.configuration in still.get(c.group, ())]
                what = f"{s.name}: blocks {done + 1}-{look}" + (" (inconclusive only)" if done else "")
                execute(schedule.blocks(cells, done + 1, look, prepared.seed, batches,
                                        start_index=len(outcomes)), what)
                done = look
            status = "complete"
        except KeyboardInterrupt:
            raise StudyInterrupted(run_id, str(s.path), st.location) from None
        finally:
            st.finish_run(run_id, local.utc_now(), status)
            meta = next(r for r in st.runs() if int(r["id"]) == run_id)
            run = StudyRun.from_outcomes(meta, s, outcomes, prepared.analysis)
            run.store_path = st.path if st.path is not None else st.location
            run.executor, run.retried_blocks, run.failed_blocks = ex.name, ex.retried_blocks, ex.failed_blocks
            if status == "complete" and s.explain:
                run.explanations = _explain(run, prepared, st, console)
            if out_dir is not None:
                run.json_path = report_json.write(report_json.study_document(run, st.location),
                                                  report_json.result_path(out_dir, s.name, started, run_id))
        if reports and out_dir is not None and run.json_path is not None:
            run.reports = report_formats.write_beside(run, run.json_path, ("html", "md"), st.location)
    return run


def _explain(run: "StudyRun", prepared: PreparedStudy, st: Store, console: Any) -> list[dict[str, Any]]:
    """``explain = true``: the run's decided comparisons explained and kept with it
    (``explain.pair.explain_decided``), on this machine — not after a run whose repetitions ran
    on Ray nodes (one line says so: ``cryptoperf explain`` on a node explains one there)."""
    from rich.console import Console

    from cryptoperf.explain.pair import explain_decided
    console = console if console is not None else Console(stderr=True)
    if run.executor != "local":
        console.print(f"explain = true: not on {run.executor}: the repetitions ran on other machines; run "
                      f"`cryptoperf explain {run.id} --config ...` on one of them")
        return []
    return explain_decided(run, prepared, st, console)


def calibrated(cells: Sequence[Cell], outcomes: Sequence[Outcome]) -> tuple[dict, list[Cell]]:
    """From the calibration outcomes: each group's batch size (``schedule.group_batch``) and the
    cells worth running blocks of (neither unsupported nor invalid at calibration: more
    repetitions cannot change that answer; a failed calibration is tried again in the blocks)."""
    cal: dict[str, list[Outcome]] = {}
    for o in outcomes:
        if o.repetition.block == CALIBRATION_BLOCK and not o.superseded:
            cal.setdefault(o.cell.key, []).append(o)
    # With the Ray executor's every-node, each node calibrates: the group's batch is the largest
    # any node needed, and a cell runs where any node could measure it.
    batches = {g: schedule.group_batch(o.result.batch if o.result else None for c in members
                                       for o in cal.get(c.key, ()) if o.status == OK)
               for g, members in schedule.groups(cells).items()}
    runnable = [c for c in cells if c.key not in cal or any(o.status in (OK, "failed") for o in cal[c.key])]
    return batches, runnable


@dataclass
class StudyRun(StoredRun):
    """A stored run that ``run_study`` just made, with the files it wrote.

    Attributes (besides ``StoredRun``'s): store_path: the store (a SQLite file's path, or a
    PostgreSQL URL with its password masked); json_path: the JSON document
    (None when no ``out_dir``); reports: format → path of the HTML and Markdown reports;
    executor: ``local`` or ``ray``; retried_blocks: blocks Ray ran again whole after losing
    their worker or node; failed_blocks: blocks given up (their repetitions failed, with the
    reason)."""

    store_path: Path | str | None = None
    json_path: Path | None = None
    reports: dict[str, Path] = field(default_factory=dict)
    executor: str = "local"
    retried_blocks: int = 0
    failed_blocks: int = 0
