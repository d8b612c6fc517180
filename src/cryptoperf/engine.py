"""The engine: the study and speed pipelines as a Python API (``cli.py`` only parses and prints).

    import cryptoperf
    run = cryptoperf.run_study("studies/quick.toml", store="runs.sqlite")
    for d in run.deltas:
        print(d.label, d.configuration, d.verdict.text if d.verdict else d.reason)

A study goes: parse the file → ask the worker(s) for their ``hello`` (operation rules, limits,
unmasked capability vectors) and check the study against them → expand it into cells → one
calibration repetition per cell (support, and each group's batch size) → randomised complete
blocks → with ``until = "decided"``, more blocks for the inconclusive comparisons only, at the
planned looks → analysis, once → the JSON document and the HTML/Markdown reports, all rendered
from that one ``StoredRun``. Every repetition is committed to the store as it finishes.

Repetitions run through an executor: this machine, one at a time (``run/local.py``, the
default), or a Ray cluster, each randomised block a task on one node (``run/ray.py``,
``executor="ray"``; Ray is imported only then).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cryptoperf import analysis, builds, cpumask, hostinfo, schedule, study as study_mod, workerbuild
from cryptoperf import opnames, paths, preflight, speedstats, workload
from cryptoperf.errors import StudyError, StudyInterrupted, UsageError, WorkerError, did_you_mean
from cryptoperf.model import CALIBRATION_BLOCK, OK, RETRIED, Cell, Outcome, Repetition
from cryptoperf.report import formats as report_formats
from cryptoperf.report import json as report_json
from cryptoperf.report.terminal import ProgressBar
from cryptoperf.run import local
from cryptoperf.run.worker import Hello, WorkerClient, WorkerRules, fetch_hello
from cryptoperf.store import FORMAT_VERSION, Store
from cryptoperf.stored import StoredRun, load_run, open_store, settings_of
from cryptoperf.study import Study
from cryptoperf.builds import find_worker

DEFAULT_OUT_DIR = "cryptoperf-results"
DEFAULT_SPEED_OPS = ("sha256", "aes-128-gcm-seal", "chacha20-poly1305-seal", "rsa2048-sign",
                     "rsa2048-verify", "ecdsa-p256-sign", "ecdsa-p256-verify", "ed25519-sign",
                     "x25519-derive", "ml-kem-768-encaps")

Workers = dict[str, tuple[Path, Hello]]


def default_worker() -> tuple[Path, Hello]:
    """The default worker build's path and ``hello``. Raises WorkerError subclasses."""
    path = find_worker()
    return path, fetch_hello(path)


def default_rules() -> WorkerRules | None:
    """The default worker build's rules (``WorkerRules``), or None when no worker answers: for
    help texts that list what the worker announces (each workload's params)."""
    try:
        return default_worker()[1].rules
    except WorkerError:
        return None


def worker_builds(needed: Mapping[str, str], setup: bool = False, missing_ok: bool = False,
                  default: tuple[Path, Hello] | None = None, console: Any = None) -> Workers:
    """Path and hello of every worker build in ``needed`` (build name → who needs it, e.g.
    "configuration 'fips-on'"), the default build always included (``default`` if given).

    A build that ``cryptoperf setup`` makes (``openssl@3.6``) and that is missing or out of
    date is built first when ``setup`` (``workerbuild.ensure``, its progress on ``console``).
    With ``missing_ok`` such a build, when missing, is left out (dry runs). Otherwise raises
    BuildUnavailable naming who needs a missing build, why it is missing and how to make it;
    SetupError when building it fails."""
    out = {builds.DEFAULT: default or default_worker()}
    for name, who in needed.items():
        if name in out:
            continue
        try:
            out[name] = workerbuild.ensure(name, who, auto=setup and not missing_ok, console=console)
        except builds.BuildUnavailable:
            if missing_ok and builds.get(name).setup is not None:
                continue
            raise
    return out


def unmasked_vectors(workers: Workers) -> dict[tuple[str, str], str]:
    """(build, backend) → the capability vector the backend's library reported in that build's
    unmasked ``hello`` process."""
    return {(name, backend): vector for name, (_, h) in workers.items()
            for backend, vector in h.unmasked_vectors().items()}


def _disturbance(study: Study, logical_cpus: int) -> Callable[[Outcome], str]:
    def why(o: Outcome) -> str:
        return hostinfo.disturbance(o.result, logical_cpus, study.max_steal_pct, study.max_other_load_pct)
    return why


# --------------------------------------------------------------------------- study


@dataclass
class StudyPlan:
    """A study checked against its workers and expanded, before anything is measured.

    Attributes:
        study: the study, its backends and worker rules resolved.
        cells: every cell; settings: the worker settings of its repetitions.
        workers: build → (path, hello) of every worker build it needs (a missing setup build
            absent in a dry run).
        analysis: how its comparisons will be decided.
        looks: block counts at which a sequential study looks ((repetitions,) if fixed).
        skipped: ``optional`` operations left out, operation label → why (one line each).
    """

    study: Study
    cells: list[Cell]
    settings: schedule.Settings
    workers: Workers
    analysis: analysis.Settings
    looks: tuple[int, ...]
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def first_blocks(self) -> list[Repetition]:
        """The repetitions of the first look's blocks (batch sizes not yet calibrated)."""
        return schedule.blocks(self.cells, 1, self.looks[0], self.study.seed)

    def unsupported(self) -> dict[str, str]:
        """Cell key → why it will not run, as far as the workers' hellos tell before anything
        is measured (a dry run asks the default build for every operation's support; other
        builds and non-default parameters are only known at calibration)."""
        out = {}
        for name, (_, h) in self.workers.items():
            support = {(b["backend"], o["op"]): o for b in h.backends for o in b.get("ops") or []}
            for c in self.cells:
                o = support.get((c.backend, c.op))
                if c.build == name and o is not None and o.get("status") != "supported":
                    out[c.key] = f"{o.get('status')}: {o.get('reason') or ''}".strip(": ")
        return out

    def default_size(self, cell: Cell) -> int | None:
        """The message size the worker uses for ``cell`` when the study gives none (None for an
        operation without a message)."""
        if cell.size_bytes is not None:
            return cell.size_bytes
        return self.study.rules.default_size_bytes.get(cell.op) if self.study.rules else None

    def estimated_seconds(self) -> float:
        """A rough wall-clock estimate: calibration plus the first look's blocks, in s. A
        workload's repetition also starts its server process, makes its certificates and runs
        its cross-checks (``schedule.WORKLOAD_OVERHEAD_S``); a job's takes time by its targets
        (``schedule.job_seconds``)."""
        total = 0.0
        jobs = [c for c in self.cells if c.spec is not None and c.spec.job]
        timed = [c for c in self.cells if c not in jobs]
        for cells, overhead in ((sum(not c.is_workload for c in timed), 0.05),
                                (sum(c.is_workload for c in timed), schedule.WORKLOAD_OVERHEAD_S)):
            total += (schedule.calibration_seconds(cells, self.settings, overhead)
                      + schedule.estimated_seconds(cells * self.looks[0], self.settings, overhead))
        # A job is a fixed amount of work: its time grows with its targets, not with `seconds`.
        total += sum(schedule.job_cell_seconds(c, self.looks[0]) for c in jobs)
        return total


def plan_study(source: str | os.PathLike | Study, *, setup: bool = True, dry_run: bool = False,
               margin_pct: float | None = None, multiplicity: bool | None = None,
               console: Any = None) -> StudyPlan:
    """Parse (unless given a Study) and check a study against its workers, and expand it.

    The study is checked against the default worker's rules before any worker build is made,
    so a typo does not wait for a build. ``setup`` builds missing setup builds (openssl@3.6);
    ``dry_run`` tolerates them missing. Raises StudyError, UsageError, WorkerError subclasses.
    """
    s = source if isinstance(source, Study) else study_mod.load(source)
    if len(s.configurations) < 2:
        raise s.error("study", 0, "baseline",
                      f"the study has only its baseline configuration '{s.baseline}', so it compares "
                      "nothing; add a [[configuration]] to compare with it (or measure it alone with "
                      "`cryptoperf speed`)")
    if margin_pct is not None and not 0 <= margin_pct <= 100:
        raise UsageError(f"--margin {margin_pct:g} is out of range; give a percentage from 0 to 100")
    path = find_worker()
    hello = fetch_hello(path, detail=dry_run)
    s = study_mod.check_against_worker(s, hello.rules)
    needed: dict[str, str] = {}
    for c in s.configurations:
        needed.setdefault(c.build, f"{s.path}: configuration '{c.name}'")
    workers = worker_builds(needed, setup=setup, missing_ok=dry_run, default=(path, hello), console=console)
    for name, (_, h) in workers.items():
        cpumask.check_hello(h.raw.get("cpu_masks"), [c.cpu for c in s.configurations if c.build == name])
    cells = schedule.expand(s)
    work_dir = check_work_dir(s, cells)
    settings = schedule.Settings(seconds=s.seconds, warmup_s=s.warmup_s, threads=s.threads, timeout_s=s.timeout_s,
                                 work_dir=work_dir)
    looks = schedule.looks(s.repetitions, s.max_repetitions if s.until == "decided" else None)
    skipped = check_workloads(s, cells, workers)
    if skipped:
        cells = [c for c in cells if not any(c.label == workload.row_label(label, c.load) for label in skipped)]
    return StudyPlan(s, cells, settings, workers, settings_of(s, margin_pct, multiplicity), looks,
                     skipped=skipped)


def check_work_dir(s: Study, cells: Sequence[Cell]) -> str | None:
    """The directory a study's file workloads (their spec ``needs_dir``) write under
    (``work_dir``, default ``<data dir>/work``), checked before anything runs: writable, and
    with room for the largest file a cell asks for (its spec's ``file_bytes_param``, or the
    worker's default) twice over. None when the study has no file workload. Raises StudyError
    (one line) otherwise."""
    files = [c for c in cells if c.spec is not None and c.spec.needs_dir]
    if not files:
        return None
    root = s.work_dir or str(paths.data_dir() / "work")
    sizes = []
    for c in files:
        try:
            sizes.append(c.spec.file_bytes(c.params))
        except ValueError as e:
            raise s.error("study", 0, None, str(e)) from None
    problem = workload.writable_problem(root, 2 * max(sizes))
    if problem:
        raise s.error("study", 0, "work_dir" if s.work_dir else None, problem)
    return root


#: Time a worker may take to answer one ``check`` (an RSA-4096 identity is made once per process).
CHECK_TIMEOUT_S = 60.0


def check_workloads(s: Study, cells: Sequence[Cell], workers: Workers) -> dict[str, str]:
    """Ask each worker build whether it can run the study's workload combinations at all (the
    worker's ``check``: its TLS implementations configured as asked, a storage scheme and
    layer available, nothing measured), before the first repetition. Raises StudyError, one
    line at the operation, for the first combination a library or the host lacks
    (X25519MLKEM768 on ring or on OpenSSL 3.0, ...): a study that asks for it would measure
    nothing there — unless the operation is ``optional``: then it is returned, operation label →
    why (the first combination refused), for the caller to skip whole (a dm-crypt layer on a
    kernel without device-mapper). Builds missing in a dry run are skipped."""
    skipped: dict[str, str] = {}
    seen: set[tuple] = set()
    by_build: dict[str, list[Cell]] = {}
    for c in cells:
        if not c.is_workload:
            continue
        key = (c.build, c.backend, c.op, tuple(sorted((k, v) for k, v in c.params.items() if k != "load")))
        if key not in seen and c.build in workers and not c.backend.startswith("mock"):
            seen.add(key)
            by_build.setdefault(c.build, []).append(c)
    for build, todo in by_build.items():
        path, _ = workers[build]
        with WorkerClient(path) as w:
            w.hello()
            for c in todo:
                answer = w.check({"id": c.key, "backend": c.backend, "op": c.op, "params": c.worker_params()},
                                 timeout_s=CHECK_TIMEOUT_S)
                if answer.get("status") == "unsupported":
                    o = next(o for o in s.operations if c.label == workload.row_label(o.label, c.load))
                    if o.optional:
                        skipped.setdefault(o.label, f"configuration '{c.configuration}' on {c.backend}: "
                                                    f"{answer.get('reason')}")
                        continue
                    raise s.error("operation", o.index, "params",
                                  f"configuration '{c.configuration}' on {c.backend}: {answer.get('reason')}; "
                                  "remove that combination, or pin the configuration to a backend that has it")
    return skipped


def run_study(source: str | os.PathLike | Study | StudyPlan, *, store: str | os.PathLike | None = None,
              out_dir: str | os.PathLike | None = DEFAULT_OUT_DIR, progress: local.Progress | bool | None = None,
              reports: bool = True, setup: bool = True, margin_pct: float | None = None,
              multiplicity: bool | None = None, console: Any = None,
              on_host: Callable[[dict[str, Any], list[hostinfo.CheckResult]], None] | None = None,
              executor: str | Any = "local", address: str | None = None,
              resume: StoredRun | int | str | None = None, check_host: bool = True) -> "StudyRun":
    """Run a study and return it as a stored run, analysed.

    Args:
        source: a study file's path, a parsed ``Study`` or a ``StudyPlan``.
        store: the store: a SQLite file's path, or a ``sqlite:///`` or ``postgresql://`` URL
            (default: ``store.default_location()``, the user's or ``$CRYPTOPERF_STORE``).
        out_dir: where the JSON document (and, with ``reports``, the HTML report and Markdown
            summary beside it) go; None writes no files.
        progress: a ``run.local.Progress``; True draws a progress bar on stderr; None is silent.
        setup: build a missing setup worker build (openssl@3.6) first.
        margin_pct, multiplicity: override the study's ``margin_pct`` / ``multiplicity``.
        on_host: called with the host fingerprint and checks before measuring.
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
    if resume is not None:
        refuse_settings_on_resume(margin_pct, multiplicity)
        prior = resume if isinstance(resume, StoredRun) else prior_run(
            source.study.path if isinstance(source, StudyPlan) else source, resume, store)
    ex = make_executor(executor, address)
    try:
        plan = source if isinstance(source, StudyPlan) else plan_study(
            source, setup=setup, margin_pct=margin_pct, multiplicity=multiplicity, console=console)
        if prior is not None:
            plan = dataclasses.replace(plan, analysis=prior.analysis.settings)
        if check_host:
            check_before_running(plan, out_dir, store, prior, console)
        return _run_study(plan, ex, store=store, out_dir=out_dir, progress=progress, reports=reports,
                          on_host=on_host, prior=prior)
    finally:
        ex.close()


def check_before_running(plan: StudyPlan, out_dir: str | os.PathLike | None, store: str | os.PathLike | None,
                         prior: StoredRun | None = None, console: Any = None) -> None:
    """What is checked before the first repetition, once, by ``cryptoperf study`` (before it
    prints the plan) or ``run_study``: the output directory, the store, disk, memory and
    threads (``preflight.check``; its warnings go to ``console``), and for a resumed run
    ``prior`` this machine and its libraries (``check_resume_host``). Raises PreflightError or
    UsageError, one line."""
    preflight.announce(preflight.check(plan, out_dir, store), console)
    if prior is not None:
        check_resume_host(prior, host_fingerprint(plan))


def refuse_settings_on_resume(margin_pct: float | None, multiplicity: bool | None) -> None:
    """Raise UsageError when a resumed run is given ``--margin`` or ``--no-multiplicity``
    (not None): it keeps the analysis settings it was started with."""
    if margin_pct is not None or multiplicity is not None:
        raise UsageError("a resumed run keeps the analysis settings it was started with; leave out "
                         "--margin and --no-multiplicity with --resume")


def study_sha256(text: str) -> str:
    """The SHA-256 of a study file's text (UTF-8), in hex: what ``--resume`` compares."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: Host fingerprint keys that must be equal for a run to resume on this machine: a run's
#: blocks are compared with each other, so they must all come from one machine and one set of
#: libraries.
RESUME_HOST_KEYS = ("cpu_model", "crypto_flags", "logical_cpus", "kernel", "machine", "worker_version",
                    "libraries", "builds")


def prior_run(source: str | os.PathLike | Study, run_id: int | str, store: str | os.PathLike | None) -> StoredRun:
    """The stored run that ``cryptoperf study FILE --resume RUN_ID`` continues, checked.

    ``source`` is the study file (or its parsed Study): its text must be the one stored with
    the run, byte for byte (SHA-256 compared). Raises NoSuchRun / StoreError (no store, no such
    run), UsageError when the run is not a study's, is complete, or is still running (its
    process alive on this machine, or on another machine this one cannot check), StudyError
    when the file changed since the run started — each one line."""
    s = source if isinstance(source, Study) else study_mod.load(source)
    with open_store(store) as st:
        prior = load_run(st, run_id)
    meta = prior.meta
    rid = prior.id
    if meta.get("kind") != "study" or not meta.get("study_toml"):
        raise UsageError(f"run {rid} is a {meta.get('kind')} run, not a study's: only a study resumes")
    status = str(meta.get("status"))
    if status == "complete":
        raise UsageError(f"run {rid} (study {meta.get('study_name')}) is complete: nothing to resume; "
                         f"`cryptoperf report {rid}` shows it")
    if status == "running":
        proc = meta.get("process") or {}
        where = (f"process {proc.get('pid')} on {proc.get('hostname')}" if proc else "another process")
        alive = hostinfo.process_alive(proc)
        raise UsageError(f"run {rid} is still marked running by {where}"
                         + (", which is alive; wait for it or stop it first" if alive else
                            ", which this machine cannot check; resume it there, or after it stopped"))
    old, new = study_sha256(meta["study_toml"]), study_sha256(s.text)
    if old != new:
        raise StudyError(s.path, None, None,
                         f"the file changed since run {rid} started (SHA-256 {new[:12]}… now, {old[:12]}… "
                         "then); resume with the file as it was, or run it as a new study without --resume")
    return prior


def host_fingerprint(plan: StudyPlan) -> dict[str, Any]:
    """This machine's fingerprint (``hostinfo.fingerprint``) with the plan's worker builds'
    libraries, as a run stores it (before the host checks are added)."""
    _, hello = plan.workers[builds.DEFAULT]
    return hostinfo.fingerprint(hello.raw, {n: h.raw for n, (_, h) in plan.workers.items() if n != builds.DEFAULT})


def check_resume_host(prior: StoredRun, host: Mapping[str, Any]) -> None:
    """Raise UsageError (one line) when run ``prior`` was started on a machine or with
    libraries other than ``host`` (this machine's ``host_fingerprint``): the keys of
    ``RESUME_HOST_KEYS`` must be equal."""
    for key in RESUME_HOST_KEYS:
        if prior.host.get(key) != host.get(key):
            raise UsageError(f"run {prior.id} cannot resume on this machine: its {key.replace('_', ' ')} was "
                             f"{_short(prior.host.get(key))}, here it is {_short(host.get(key))}; its blocks "
                             "must all come from one machine and one set of libraries (run the study anew here)")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def make_executor(executor: str | Any, address: str | None = None) -> Any:
    """The executor ``run_study`` uses: ``"local"`` → ``run.local.LocalExecutor``; ``"ray"`` →
    ``run.ray.RayExecutor(address)`` (the only place that module is imported); an object is
    used as it is. Raises UsageError for another name, or for ``address`` without Ray."""
    if not isinstance(executor, str):
        return executor
    if executor == "ray":
        from cryptoperf.run.ray import RayExecutor
        return RayExecutor(address)
    if executor != "local":
        raise UsageError(f"--executor {executor!r} is not one of local, ray")
    if address is not None:
        raise UsageError("--address is the Ray cluster's address: give it with --executor ray")
    return local.LocalExecutor()


def _run_study(plan: StudyPlan, ex: Any, *, store: str | os.PathLike | None, out_dir: str | os.PathLike | None,
               progress: local.Progress | bool | None, reports: bool,
               on_host: Callable[[dict[str, Any], list[hostinfo.CheckResult]], None] | None,
               prior: StoredRun | None = None) -> "StudyRun":
    """``run_study`` once its plan and executor are made (and, to resume, the run it
    continues): see there."""
    if progress is True:
        progress = ProgressBar()
    bar = progress or local.NoProgress()
    s = plan.study
    _, hello = plan.workers[builds.DEFAULT]
    host = host_fingerprint(plan)
    checks = hostinfo.run_checks()
    host["checks"] = [c.as_dict() for c in checks]
    host.update(ex.start(plan))  # Ray: connect, check the nodes' versions and hosts, before storing
    if on_host is not None:
        on_host(host, checks)
    if any(c.spec is not None and c.spec.needs_dir for c in plan.cells):
        workload.sweep_stale(plan.settings.work_dir)  # what a study killed with SIGKILL left
    paths = {n: p for n, (p, _) in plan.workers.items()}
    unmasked = unmasked_vectors(plan.workers)
    disturbed = _disturbance(s, int(hello.cpu.get("logical_cpus") or os.cpu_count() or 1))
    outcomes: list[Outcome] = list(prior.outcomes) if prior is not None else []
    rows: dict[int, int] = {}  # id(outcome) → its results row
    if prior is not None:
        rows.update({id(o): rid for o, rid in zip(prior.outcomes, prior.row_ids)})
    started = prior.meta["started_at"] if prior is not None else local.utc_now()
    status = "interrupted"
    with Store(store) as st:
        if prior is None:
            run_id = st.begin_run("study", started, host, study_name=s.name, study_toml=s.text, seed=s.seed,
                                  analysis=plan.analysis.as_dict(), process=hostinfo.process_identity())
        else:
            run_id = prior.id
            st.reopen_run(run_id, hostinfo.process_identity())

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
            ex.execute(reps, plan.settings, paths, on_outcome=record, progress=bar, description=what,
                       disturbed=disturbed, unmasked=unmasked, on_superseded=superseded)

        try:
            execute(schedule.calibration(plan.cells), f"{s.name}: calibrating")
            batches, runnable = calibrated(plan.cells, outcomes)
            runnable = comparable(runnable, s.baseline)
            done = 0
            for look in plan.looks if runnable else ():
                if done == 0:
                    cells = runnable
                else:
                    current = analysis.analyse(outcomes, s.baseline, plan.analysis)
                    still = analysis.undecided(current.deltas)
                    if not still:
                        break
                    cells = [c for c in runnable if c.group in still
                             and (c.configuration == s.baseline or c.configuration in still[c.group])]
                what = f"{s.name}: blocks {done + 1}-{look}" + (" (inconclusive only)" if done else "")
                execute(schedule.blocks(cells, done + 1, look, s.seed, batches,
                                        start_index=len(outcomes)), what)
                done = look
            status = "complete"
        except KeyboardInterrupt:
            raise StudyInterrupted(run_id, str(s.path), st.location) from None
        finally:
            st.finish_run(run_id, local.utc_now(), status)
            meta = next(r for r in st.runs() if int(r["id"]) == run_id)
            run = StudyRun.from_outcomes(meta, s, outcomes, plan.analysis)
            run.store_path = st.path if st.path is not None else st.location
            run.executor, run.retried_blocks, run.failed_blocks = ex.name, ex.retried_blocks, ex.failed_blocks
            if out_dir is not None:
                run.json_path = report_json.write(report_json.study_document(run, st.location),
                                                  report_json.result_path(out_dir, s.name, started, run_id))
        if reports and out_dir is not None and run.json_path is not None:
            run.reports = report_formats.write_beside(run, run.json_path, ("html", "md"), st.location)
    return run


def comparable(cells: Sequence[Cell], baseline: str) -> list[Cell]:
    """The cells of the groups that can answer something: the group's baseline and at least one
    other configuration are among ``cells``. The others would measure without comparing."""
    out = []
    for members in schedule.groups(cells).values():
        names = {c.configuration for c in members}
        if baseline in names and len(names) > 1:
            out += members
    return out


def no_comparison_reason(run: StoredRun) -> str | None:
    """Why a study run compared nothing (one line), or None if it decided at least one
    comparison."""
    if any(d.status == "ok" for d in run.deltas):
        return None
    first = next((d for d in run.deltas if d.reason), None)
    example = f" (e.g. {first.label} on {first.backend}, {first.configuration}: {first.reason})" if first else ""
    return (f"study {run.study.name if run.study else '?'} compared nothing: no configuration was measured "
            f"beside the baseline in enough blocks{example}; its results are stored as run {run.id}")


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


# --------------------------------------------------------------------------- speed


@dataclass
class SpeedRun(StoredRun):
    """What ``speed`` measured, as the stored run it is (a ``StoredRun`` of kind ``speed``,
    analysed once: ``analysis.speed`` holds its rows and baseline comparisons), with what the
    call knew beyond the store: ``settings`` (the worker settings, build and notes: the JSON
    document's ``settings``), ``store_path`` (None when not stored), ``cells`` (the rows, in
    table order: backend, operation, size), ``notes`` (lines saying how options were applied,
    e.g. which operations took ``--size``)."""

    settings: dict[str, Any] = field(default_factory=dict)
    store_path: Path | str | None = None
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> int | None:
        """The stored run's id (None when not stored)."""
        return self.meta.get("id")

    @property
    def started_at(self) -> str:
        """When it started (UTC ISO 8601)."""
        return str(self.meta.get("started_at") or "")

    @property
    def finished_at(self) -> str:
        """When it finished (UTC ISO 8601)."""
        return str(self.meta.get("finished_at") or "")

    @property
    def repetitions(self) -> int:
        """Blocks asked for."""
        return int(self.settings.get("repetitions") or 1)

    @property
    def baseline(self) -> str | None:
        """The backend the others are compared with, or None."""
        return self.speed.baseline

    def rows(self) -> list[speedstats.SpeedRow]:
        """One row per (backend, operation, size) over its repetitions, as analysed."""
        return list(self.speed.rows)

    def baseline_ratios(self) -> list[speedstats.BaselineRatio]:
        """Every other backend's ops/s against the baseline backend's, per operation and size,
        as analysed; [] without a baseline."""
        return list(self.speed.ratios)


#: Most repetitions (blocks) ``speed`` runs.
MAX_SPEED_REPETITIONS = 1000


@dataclass(frozen=True)
class _SpeedPlan:
    """``speed``'s arguments checked against its worker: the cells, where they run, and how."""

    cells: list[Cell]
    worker: Path
    hello: Hello
    build: str
    settings: schedule.Settings
    unmasked: dict[tuple[str, str], str]
    baseline: str | None
    info: dict[str, Any]
    notes: list[str]


def speed(backends: Sequence[str] = (), ops: Sequence[str] = (), sizes: Sequence[int | str] = (), *,
          seconds: float = 0.5, warmup_s: float = 0.2, threads: int = 1, timeout_s: float | None = None,
          cpu: str = cpumask.BASELINE, fips: bool = False, library: str = builds.SYSTEM_LIBRARY,
          params: Mapping[str, str] | None = None, repetitions: int = 1, baseline: str | None = None,
          seed: int = 1, setup: bool = True, store: str | os.PathLike | None = None,
          store_results: bool = True, progress: local.Progress | bool | None = None,
          console: Any = None) -> SpeedRun:
    """Measure operations on backends: each (backend, operation, size) ``repetitions`` times,
    each in a fresh worker process, in randomised blocks (a block runs every row once, in an
    order drawn from ``seed``; blocks after the first use the batch size the first measured for
    each row); stored as a ``speed`` run, and returned as that stored run, analysed once.

    Args:
        backends, ops: names as people write them: operations match ignoring case and
            punctuation, with the common aliases (``opnames.canonical_op``: ``SHA-256`` →
            ``sha256``), backends ignoring case and punctuation. Defaults: every backend of the
            worker build, ``DEFAULT_SPEED_OPS``.
        sizes: message sizes, bytes as ints or strings with a binary suffix (``"16k"``,
            ``"1MiB"``: ``opnames.parse_size``, k = 1024); applied to the operations that take
            a message (a note names the others); none of them taking one is an error. Default:
            the worker's size.
        params: worker parameters (``digest``, ``padding``) → value, checked against the
            worker's allowed values; applied to the operations that take them (a note names
            the others); none of them taking one is an error.
        repetitions: blocks, 1..``MAX_SPEED_REPETITIONS``; 3 or more give every figure a 95 %
            interval (``speedstats``).
        baseline: a backend among those measured, the others are compared with
            (``SpeedRun.baseline_ratios``; stored with the run's analysis settings).
        store, store_results: the store the run is recorded in (a path or URL, as
            ``run_study`` takes; default: ``store.default_location()``);
            with ``store_results`` False nothing is stored (``run_id`` is None).

    Raises UsageError (bad names or values, checked against the worker's rules), WorkerError
    subclasses, StoreError.
    """
    if not 1 <= repetitions <= MAX_SPEED_REPETITIONS:
        raise UsageError(f"--repetitions {repetitions} is out of range; give 1 to {MAX_SPEED_REPETITIONS}")
    if timeout_s is not None and timeout_s <= warmup_s + seconds:
        raise UsageError(f"--timeout {timeout_s:g} s does not exceed --warmup + --seconds = "
                         f"{warmup_s + seconds:g} s; raise --timeout")
    plan = _plan_speed(backends, ops, sizes, seconds=seconds, warmup_s=warmup_s, threads=threads,
                       timeout_s=timeout_s, cpu=cpu, fips=fips, library=library, params=params or {},
                       baseline=baseline, setup=setup, console=console)
    plan.info.update(repetitions=repetitions, seed=seed)
    host = hostinfo.fingerprint(plan.hello.raw)
    host["checks"] = [c.as_dict() for c in hostinfo.run_checks()]
    if progress is True:
        progress = ProgressBar()
    settings = analysis.Settings(speed_baseline=plan.baseline)
    started = local.utc_now()

    def measure(on_outcome: Callable[[Outcome], None] | None) -> list[Outcome]:
        return speed_blocks(plan.cells, repetitions, seed, plan.settings, plan.worker, progress=progress or None,
                            on_outcome=on_outcome, unmasked=plan.unmasked)

    if not store_results:
        outcomes = measure(None)
        meta = {"id": None, "kind": "speed", "started_at": started, "finished_at": local.utc_now(),
                "status": "complete", "host": host, "seed": seed, "analysis": settings.as_dict(),
                "format_version": FORMAT_VERSION}
        store_path = None
    else:
        with Store(store) as st:
            run_id = st.begin_run("speed", started, host, seed=seed, analysis=settings.as_dict(),
                                  process=hostinfo.process_identity())
            status = "interrupted"
            try:
                outcomes = measure(lambda o: st.add_outcome(run_id, o))
                status = "complete"
            finally:
                st.finish_run(run_id, local.utc_now(), status)
            meta = next(r for r in st.runs() if int(r["id"]) == run_id)
            store_path = st.path if st.path is not None else st.location
    return SpeedRun(meta, None, outcomes, analysis.analyse(outcomes, None, settings, plan.cells),
                    settings=plan.info, store_path=store_path, cells=plan.cells, notes=plan.notes)


def _plan_speed(backends: Sequence[str], ops: Sequence[str], sizes: Sequence[int | str], *, seconds: float,
                warmup_s: float, threads: int, timeout_s: float | None, cpu: str, fips: bool, library: str,
                params: Mapping[str, str], baseline: str | None, setup: bool, console: Any) -> _SpeedPlan:
    """``speed``'s arguments checked against the worker build they need (made first with
    ``setup``), and its cells. Raises UsageError, WorkerError subclasses."""
    if fips and library != builds.SYSTEM_LIBRARY:
        raise UsageError(f"--fips with --library {library} is not supported: the FIPS build uses the "
                         "system OpenSSL")
    if library != builds.SYSTEM_LIBRARY:
        other = [b for b in backends if b != builds.LIBRARY_BACKEND]
        if other:
            raise UsageError(f"--library {library} changes only the {builds.LIBRARY_BACKEND} backend; "
                             f"drop --backend {other[0]}")
        backends = (builds.LIBRARY_BACKEND,)
    build = builds.for_configuration(fips, library)
    who = "--fips" if fips else f"--library {library}"
    workers = worker_builds({build: who}, setup=setup, console=console)
    path, hello = workers[build]
    rules = hello.rules
    backends = check_names("backend", backends, hello.backend_names, allow_mock=True)
    ops = check_names("operation", ops, hello.ops)
    for name, value, limit in (("--seconds", seconds, "max_seconds"), ("--warmup", warmup_s, "max_warmup_s"),
                               ("--threads", threads, "max_threads")):
        if value > rules.limits[limit]:
            raise UsageError(f"{name} {value:g} is above the worker's limit of {rules.limits[limit]:g}")
    checked_sizes = speed_sizes(sizes, rules.limits["max_size_bytes"])
    cpumask.check_hello(hello.raw.get("cpu_masks"), [cpu])
    chosen_ops = tuple(ops) or tuple(o for o in DEFAULT_SPEED_OPS if o in hello.ops)
    notes = sizes_note(checked_sizes, chosen_ops, rules)
    op_params, more = speed_params(params, chosen_ops, rules)
    notes += more
    for op in chosen_ops:
        if (spec := rules.workloads.get(op)) is not None and "load" not in op_params[op]:
            # A workload's concurrency is its load level: --threads N is N connections; a job's
            # level is its targets (the worker's default unless --param load=targets:N).
            op_params[op]["load"] = (f"closed:{threads}" if spec.takes_level("closed")
                                     else str(spec.defaults.get("load") or workload.DEFAULT_LOAD))
    chosen_backends = tuple(backends) or hello.backend_names
    if baseline is not None:
        baseline = speed_baseline(baseline, chosen_backends)
    cells = [Cell("", b, op, op, op_params[op], size, cpu, build, spec=rules.workloads.get(op))
             for b in chosen_backends for op in chosen_ops
             for size in (checked_sizes if checked_sizes and rules.takes_message(op) else (None,))]
    settings = schedule.Settings(seconds=seconds, warmup_s=warmup_s, threads=threads,
                                 timeout_s=timeout_s or warmup_s + seconds + 60)
    info = {"seconds": seconds, "warmup_s": warmup_s, "threads": threads, "cpu": cpu,
            "openssl_ia32cap": cpumask.MASKS[cpu], "build": build,
            "params": {k: v for p in op_params.values() for k, v in p.items()}, "baseline": baseline,
            "notes": notes,
            "builds": {n: dict(zip(("available", "path_or_reason"), builds.status(n))) for n in builds.BUILDS}}
    return _SpeedPlan(cells, path, hello, build, settings, unmasked_vectors({build: workers[build]}), baseline,
                      info, notes)


def check_names(kind: str, given: Sequence[str], known: Sequence[str], allow_mock: bool = False) -> list[str]:
    """The names in ``given`` as ``known`` spells them, in order, each once: an ``operation``
    through ``opnames.canonical_op`` (case, punctuation and aliases: ``SHA-256`` → ``sha256``,
    ``ecdsa-secp256r1-sign`` → ``ecdsa-p256-sign``), any other kind ignoring case and
    punctuation (``AWS-LC`` → ``aws-lc``); ``mock`` backends pass as given with
    ``allow_mock``.

    Raises UsageError for the first unknown name, listing the known ones; "did you mean" only
    proposes, for an operation, one of the same algorithm and parameters
    (``opnames.unknown_op_hint``: ``sha257`` gets none), for other kinds the closest spelling.
    """
    out: list[str] = []
    for name in given:
        if allow_mock and (name == "mock" or name.startswith("mock:")):
            found: str | None = name
        elif kind == "operation":
            found = opnames.canonical_op(name, known)
        else:
            found = opnames.canonical_name(name, known)
        if found is None:
            if kind == "operation":
                hint = opnames.unknown_op_hint(name, known)
            else:
                hint = did_you_mean(name, known)
            raise UsageError(f"unknown {kind} '{name}'{hint} (known: {', '.join(known)})")
        if found not in out:
            out.append(found)
    return out


def speed_sizes(sizes: Sequence[int | str], max_size_bytes: float) -> tuple[int, ...]:
    """``--size`` values as bytes (ints, or strings read by ``opnames.parse_size``: ``16k`` =
    16384), each once, in order. Raises UsageError for one that is not a size, below 1 byte or
    above the worker's ``max_size_bytes``."""
    out: list[int] = []
    for s in sizes:
        try:
            n = opnames.parse_size(s)
        except ValueError as e:
            raise UsageError(f"--size {s}: {e}") from None
        if n < 1:
            raise UsageError(f"--size {s} is not a message size: give at least 1 byte")
        if n > max_size_bytes:
            raise UsageError(f"--size {n} is above the worker's limit of {int(max_size_bytes)} bytes")
        if n not in out:
            out.append(n)
    return tuple(out)


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names)


def sizes_note(sizes: Sequence[int], ops: Sequence[str], rules: WorkerRules) -> list[str]:
    """Check ``--size`` against the operations and the worker's ``rules``: no note when every
    operation takes a message; one note line naming those that take none (sizes apply to the
    others). Raises UsageError when none takes one: an operation without a message has no size
    (as a study refuses ``sizes`` on it)."""
    if not sizes:
        return []
    unsized = [op for op in ops if not rules.takes_message(op)]
    if len(unsized) == len(ops):
        verb = "has" if len(unsized) == 1 else "have"
        raise UsageError(f"--size: {_listing(unsized)} {verb} no message, so no size; remove --size "
                         "(sizes apply to operations with a message: digests, MACs, AEADs, signatures)")
    if not unsized:
        return []
    sized = [op for op in ops if rules.takes_message(op)]
    verb = "has" if len(unsized) == 1 else "have"
    return [f"--size applies to {_listing(sized)}; {_listing(unsized)} {verb} no message, so no size"]


def speed_params(params: Mapping[str, str], ops: Sequence[str],
                 rules: WorkerRules) -> tuple[dict[str, dict[str, str]], list[str]]:
    """``--param`` name → value checked against the worker's rules (``rules``: ``WorkerRules``;
    known names, allowed values — spelt as the worker does: ``SHA-384`` → ``sha384``) and
    applied to the operations that take each: (op → its params, note lines naming the
    operations a parameter does not apply to). Raises UsageError for an unknown name or value,
    or a parameter none of ``ops`` takes."""
    per_op: dict[str, dict[str, str]] = {op: {} for op in ops}
    notes: list[str] = []
    known = tuple(sorted(set(rules.param_values).union(*rules.op_params.values()) - {"size_bytes"}))
    for name, value in params.items():
        if name in ("size_bytes", "size"):
            raise UsageError(f"--param {name}: give message sizes with --size")
        if name not in known:
            hint = did_you_mean(name, known)
            raise UsageError(f"--param {name}: unknown worker parameter{hint} (known: {_listing(known)})")
        if name == "load":
            try:
                workload.parse_load(str(value))
            except ValueError as e:
                raise UsageError(f"--param load: {e}") from None
        allowed = rules.param_values.get(name)
        if allowed is None:  # a free-form value (load, rsa_bits, port): the worker checks it
            canonical = str(value)
        else:
            canonical = value if value in allowed else opnames.canonical_op(str(value), allowed)
        if canonical is None:
            if name == "digest":
                hint = opnames.unknown_op_hint(str(value), allowed)
            else:
                hint = did_you_mean(str(value), allowed)
            raise UsageError(f"--param {name}={value}: not one of {_listing(allowed)}{hint}")
        takers = [op for op in ops if rules.takes(op, name)]
        if not takers:
            every = [op for op in rules.ops if rules.takes(op, name)]
            raise UsageError(f"--param {name}={canonical}: no operation measured takes a {name} "
                             f"({_listing(ops)}); {name} applies to {_listing(every)}")
        for op in takers:
            per_op[op][name] = canonical
        others = [op for op in ops if op not in takers]
        if others:
            notes.append(f"--param {name}={canonical} applies to {_listing(takers)}; "
                         f"{_listing(others)} take{'s' if len(others) == 1 else ''} no {name}")
    return per_op, notes


def speed_baseline(baseline: str, backends: Sequence[str]) -> str:
    """``--baseline``: the backend among ``backends`` (the measured ones) it names, ignoring
    case and punctuation. Raises UsageError when it is none of them, or the only one."""
    found = opnames.canonical_name(baseline, backends)
    if found is None:
        raise UsageError(f"--baseline {baseline} is not among the backends measured "
                         f"({_listing(backends)}); name one of them, or add --backend {baseline}")
    if len(backends) < 2:
        raise UsageError(f"--baseline {found} needs another backend to compare with; measure two or "
                         "more (--backend, or none for every backend)")
    return found


def speed_blocks(cells: Sequence[Cell], repetitions: int, seed: int, settings: schedule.Settings,
                 workers: local.Workers, progress: local.Progress | None = None,
                 on_outcome: Callable[[Outcome], None] | None = None,
                 unmasked: Mapping[tuple[str, str], str] | None = None) -> list[Outcome]:
    """Run ``repetitions`` blocks of ``cells`` (``schedule.blocks``: a block runs every cell
    once, in an order drawn from ``seed`` and the block number; ``position`` is the place in
    the block), each repetition in a fresh worker. Blocks after the first use the batch size
    the first measured for each cell, so that every repetition of a row times the same
    statistic, and skip the cells the first found unsupported or invalid (more repetitions
    cannot change that answer). Returns the outcomes in execution order.

    The blocks are ``schedule.blocks``' (as a study's); the loop stays apart from
    ``_run_study``'s because ``speed``'s first block is measured, where a study calibrates in a
    block 0 it does not analyse: sharing that loop would cost every row one more repetition."""
    def numbered(reps: list[Repetition]) -> list[Repetition]:
        at: dict[int, int] = {}
        out = []
        for r in reps:
            out.append(dataclasses.replace(r, position=at.get(r.block, 0)))
            at[r.block] = at.get(r.block, 0) + 1
        return out

    what = "speed" if repetitions == 1 else "speed: block 1"
    outcomes = local.execute(numbered(schedule.blocks(cells, 1, 1, seed)), settings, workers,
                             on_outcome=on_outcome, progress=progress, description=what, unmasked=unmasked)
    if repetitions > 1:
        first = {o.cell.key: o for o in outcomes}
        batches = {o.cell.group: o.result.batch if o.result else None for o in outcomes if o.ok}
        later = [c for c in cells if c.key not in first or first[c.key].status in (OK, "failed")]
        if later:
            reps = numbered(schedule.blocks(later, 2, repetitions, seed, batches, start_index=len(outcomes)))
            outcomes += local.execute(reps, settings, workers, on_outcome=on_outcome, progress=progress,
                                      description=f"speed: blocks 2-{repetitions}", unmasked=unmasked)
    return outcomes
