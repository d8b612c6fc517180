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
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cryptoperf import analysis, builds, cpumask, hostinfo, schedule, study as study_mod, workerbuild
from cryptoperf.errors import UsageError
from cryptoperf.model import CALIBRATION_BLOCK, OK, Cell, Outcome, Repetition
from cryptoperf.report import formats as report_formats
from cryptoperf.report import json as report_json
from cryptoperf.report.json import outcome_dict
from cryptoperf.report.terminal import ProgressBar
from cryptoperf.run import local
from cryptoperf.run.worker import Hello, fetch_hello
from cryptoperf.store import Store
from cryptoperf.stored import StoredRun, settings_of
from cryptoperf.study import Study
from cryptoperf.worker_path import find_worker

DEFAULT_OUT_DIR = "cryptoperf-results"
DEFAULT_SPEED_OPS = ("sha256", "aes-128-gcm-seal", "chacha20-poly1305-seal", "rsa2048-sign",
                     "rsa2048-verify", "ecdsa-p256-sign", "ecdsa-p256-verify", "ed25519-sign",
                     "x25519-derive", "ml-kem-768-encaps")

Workers = dict[str, tuple[Path, Hello]]


def default_worker() -> tuple[Path, Hello]:
    """The default worker build's path and ``hello``. Raises WorkerError subclasses."""
    path = find_worker()
    return path, fetch_hello(path)


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
    """

    study: Study
    cells: list[Cell]
    settings: schedule.Settings
    workers: Workers
    analysis: analysis.Settings
    looks: tuple[int, ...]

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
        """A rough wall-clock estimate: calibration plus the first look's blocks, in s."""
        return (schedule.calibration_seconds(len(self.cells), self.settings)
                + schedule.estimated_seconds(len(self.cells) * self.looks[0], self.settings))


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
    settings = schedule.Settings(seconds=s.seconds, warmup_s=s.warmup_s, threads=s.threads, timeout_s=s.timeout_s)
    looks = schedule.looks(s.repetitions, s.max_repetitions if s.until == "decided" else None)
    return StudyPlan(s, schedule.expand(s), settings, workers, settings_of(s, margin_pct, multiplicity), looks)


def run_study(source: str | os.PathLike | Study | StudyPlan, *, store: str | os.PathLike | None = None,
              out_dir: str | os.PathLike | None = DEFAULT_OUT_DIR, progress: local.Progress | bool | None = None,
              reports: bool = True, setup: bool = True, margin_pct: float | None = None,
              multiplicity: bool | None = None, console: Any = None,
              on_host: Callable[[dict[str, Any], list[hostinfo.CheckResult]], None] | None = None) -> "StudyRun":
    """Run a study and return it as a stored run, analysed.

    Args:
        source: a study file's path, a parsed ``Study`` or a ``StudyPlan``.
        store: the SQLite store (default: the user's, ``store.default_path()``).
        out_dir: where the JSON document (and, with ``reports``, the HTML report and Markdown
            summary beside it) go; None writes no files.
        progress: a ``run.local.Progress``; True draws a progress bar on stderr; None is silent.
        setup: build a missing setup worker build (openssl@3.6) first.
        margin_pct, multiplicity: override the study's ``margin_pct`` / ``multiplicity``.
        on_host: called with the host fingerprint and checks before measuring.

    Returns a ``StudyRun`` (a ``StoredRun``: ``.deltas``, ``.summaries``, ``.analysis``, ...,
    plus the paths written). Raises StudyError, UsageError, StoreError, WorkerError
    subclasses; on KeyboardInterrupt the repetitions finished so far are in the store and the
    run is marked interrupted.
    """
    plan = source if isinstance(source, StudyPlan) else plan_study(
        source, setup=setup, margin_pct=margin_pct, multiplicity=multiplicity, console=console)
    if progress is True:
        progress = ProgressBar()
    bar = progress or local.NoProgress()
    s = plan.study
    _, hello = plan.workers[builds.DEFAULT]
    host = hostinfo.fingerprint(hello.raw, {n: h.raw for n, (_, h) in plan.workers.items() if n != builds.DEFAULT})
    checks = hostinfo.run_checks()
    host["checks"] = [c.as_dict() for c in checks]
    if on_host is not None:
        on_host(host, checks)
    paths = {n: p for n, (p, _) in plan.workers.items()}
    unmasked = unmasked_vectors(plan.workers)
    disturbed = _disturbance(s, int(hello.cpu.get("logical_cpus") or os.cpu_count() or 1))
    outcomes: list[Outcome] = []
    started = local.utc_now()
    status = "interrupted"
    with Store(store) as st:
        run_id = st.begin_run("study", started, host, study_name=s.name, study_toml=s.text, seed=s.seed,
                              analysis=plan.analysis.as_dict(), process=hostinfo.process_identity())

        def record(o: Outcome) -> None:
            outcomes.append(o)
            st.add_result(run_id, outcome_dict(o))

        def execute(reps: list[Repetition], what: str) -> None:
            local.execute(reps, plan.settings, paths, on_outcome=record, progress=bar, description=what,
                          disturbed=disturbed, unmasked=unmasked)

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
        finally:
            st.finish_run(run_id, local.utc_now(), status)
            meta = next(r for r in st.runs() if int(r["id"]) == run_id)
            run = StudyRun.from_outcomes(meta, s, outcomes, plan.analysis)
            run.store_path = st.path
            if out_dir is not None:
                run.json_path = report_json.write(report_json.study_document(run, st.path),
                                                  report_json.result_path(out_dir, s.name, started, run_id))
        if reports and out_dir is not None and run.json_path is not None:
            run.reports = report_formats.write_beside(run, run.json_path, ("html", "md"), st.path)
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
    cal = {o.cell.key: o for o in outcomes if o.repetition.block == CALIBRATION_BLOCK}
    batches = {g: schedule.group_batch((cal[c.key].result or {}).get("batch") for c in members
                                       if c.key in cal and cal[c.key].status == OK)
               for g, members in schedule.groups(cells).items()}
    runnable = [c for c in cells if c.key not in cal or cal[c.key].status in (OK, "failed")]
    return batches, runnable


@dataclass
class StudyRun(StoredRun):
    """A stored run that ``run_study`` just made, with the files it wrote.

    Attributes (besides ``StoredRun``'s): store_path: the store; json_path: the JSON document
    (None when no ``out_dir``); reports: format → path of the HTML and Markdown reports."""

    store_path: Path | None = None
    json_path: Path | None = None
    reports: dict[str, Path] = field(default_factory=dict)


# --------------------------------------------------------------------------- speed


@dataclass
class SpeedRun:
    """What ``speed`` measured: the outcomes (one per backend × operation × size), the host, the
    worker settings and the stored run's id (None when not stored)."""

    outcomes: list[Outcome]
    host: dict[str, Any]
    settings: dict[str, Any]
    started_at: str
    finished_at: str
    run_id: int | None
    store_path: Path | None


def speed(backends: Sequence[str] = (), ops: Sequence[str] = (), sizes: Sequence[int] = (), *,
          seconds: float = 0.5, warmup_s: float = 0.2, threads: int = 1, timeout_s: float | None = None,
          cpu: str = cpumask.BASELINE, fips: bool = False, library: str = builds.SYSTEM_LIBRARY,
          setup: bool = True, store: str | os.PathLike | None = None,
          progress: local.Progress | bool | None = None, console: Any = None) -> SpeedRun:
    """Measure operations on backends: one repetition per (backend, operation, size), each in a
    fresh worker process; stored as a ``speed`` run.

    Defaults: every backend of the worker build, ``DEFAULT_SPEED_OPS``, the worker's default
    size. Raises UsageError (bad names or values, checked against the worker's rules),
    WorkerError subclasses, StoreError.
    """
    if timeout_s is not None and timeout_s <= warmup_s + seconds:
        raise UsageError(f"--timeout {timeout_s:g} s does not exceed --warmup + --seconds = "
                         f"{warmup_s + seconds:g} s; raise --timeout")
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
    check_names("backend", backends, hello.backend_names, allow_mock=True)
    check_names("operation", ops, hello.ops)
    for name, value, limit in (("--seconds", seconds, "max_seconds"), ("--warmup", warmup_s, "max_warmup_s"),
                               ("--threads", threads, "max_threads")):
        if value > rules.limits[limit]:
            raise UsageError(f"{name} {value:g} is above the worker's limit of {rules.limits[limit]:g}")
    for size in sizes:
        if size > rules.limits["max_size_bytes"]:
            raise UsageError(f"--size {size} is above the worker's limit of {int(rules.limits['max_size_bytes'])} bytes")
    cpumask.check_hello(hello.raw.get("cpu_masks"), [cpu])
    chosen_ops = tuple(ops) or tuple(o for o in DEFAULT_SPEED_OPS if o in hello.ops)
    cells = [Cell("", b, op, op, {}, size, cpu, build)
             for b in (tuple(backends) or hello.backend_names) for op in chosen_ops
             for size in (sizes if sizes and rules.takes_message(op) else (None,))]
    settings = schedule.Settings(seconds=seconds, warmup_s=warmup_s, threads=threads,
                                 timeout_s=timeout_s or warmup_s + seconds + 60)
    reps = [Repetition(c, 1, position=0, index=i) for i, c in enumerate(cells)]
    host = hostinfo.fingerprint(hello.raw)
    host["checks"] = [c.as_dict() for c in hostinfo.run_checks()]
    if progress is True:
        progress = ProgressBar()
    started = local.utc_now()
    with Store(store) as st:
        run_id = st.begin_run("speed", started, host, seed=None, process=hostinfo.process_identity())
        status = "interrupted"
        try:
            outcomes = local.execute(reps, settings, path, progress=progress or None,
                                     on_outcome=lambda o: st.add_result(run_id, outcome_dict(o)),
                                     unmasked=unmasked_vectors({build: workers[build]}))
            status = "complete"
        finally:
            st.finish_run(run_id, local.utc_now(), status)
        store_path = st.path
    info = {"seconds": seconds, "warmup_s": warmup_s, "threads": threads, "cpu": cpu,
            "openssl_ia32cap": cpumask.MASKS[cpu], "build": build,
            "builds": {n: dict(zip(("available", "path_or_reason"), builds.status(n))) for n in builds.BUILDS}}
    return SpeedRun(outcomes, host, info, started, local.utc_now(), run_id, store_path)


def check_names(kind: str, given: Sequence[str], known: Sequence[str], allow_mock: bool = False) -> None:
    """UsageError for the first name in ``given`` not in ``known``, with "did you mean" and the
    known names (``mock`` backends pass with ``allow_mock``)."""
    import difflib
    for name in given:
        if name in known or (allow_mock and (name == "mock" or name.startswith("mock:"))):
            continue
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise UsageError(f"unknown {kind} '{name}'{hint} (known: {', '.join(known)})")
