"""A stored run, rebuilt from the store: what ``report``, ``compare``, ``plan`` and
``cryptoperf.load`` start from.

Only raw facts are stored (the worker's result messages, the block and order of every
repetition, the study text and the analysis settings); everything derived (latency
percentiles, throughput, summaries, deltas with intervals and verdicts) is computed here, once,
with the same code a study uses, so a report of an old run matches what its study printed. A
study builds its ``StoredRun`` in memory the same way (``from_outcomes``) instead of reading
its results back.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cryptoperf import analysis, hostinfo, speedstats
from cryptoperf.errors import NoSuchRun, StoreError, UsageError
from cryptoperf.schedule import looks
from cryptoperf.model import Cell, CellSummary, Delta, Outcome, paired
from cryptoperf.store import explanations
from cryptoperf.store.db import FORMAT_VERSION, Location, Store
from cryptoperf.study import Study, options_for, parse


@dataclass
class StoredRun:
    """One stored run with everything derived from it.

    Attributes:
        meta: the ``runs`` row (id, kind, started_at, finished_at, study_name, status, seed,
            format_version, host, analysis).
        study: the parsed study (None for a ``speed`` run).
        outcomes: one Outcome per stored repetition (calibration and superseded ones
            included), in the order they finished.
        analysis: summaries and deltas (a study) or rows and baseline comparisons (a
            ``speed`` run, ``analysis.speed``), computed once (``analysis.analyse``).
        row_ids: the ``results`` row id of each outcome, in the same order, when read back
            from a store ([] when built in memory).
        explanations: the explanations kept with the run (``store.explanations.load``: each
            an explain document with its ``flamegraph_svg``), oldest first.
    """

    meta: dict[str, Any]
    study: Study | None
    outcomes: list[Outcome]
    analysis: analysis.Analysis
    row_ids: list[int] = field(default_factory=list)
    explanations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> int:
        """The run's id in its store."""
        return int(self.meta["id"])

    @property
    def host(self) -> dict[str, Any]:
        """The host fingerprint (with its checks)."""
        return self.meta["host"]

    @property
    def summaries(self) -> dict[str, CellSummary]:
        """Per-cell summaries, by cell key."""
        return self.analysis.summaries

    @property
    def deltas(self) -> list[Delta]:
        """Every configuration against the baseline (empty without a study)."""
        return self.analysis.deltas

    @property
    def seed(self) -> int:
        """The seed of this run's block order (see ``run_seed``)."""
        return run_seed(self.meta, self.study)

    def option(self, name: str) -> Any:
        """A ``[study]`` option of this run (e.g. ``noise_threshold_pct``): its study's value,
        or the study-file default for a run without a study (``speed``). KeyError for an
        unknown option."""
        return getattr(self.study, name) if self.study is not None else options_for("study")[name].default

    @classmethod
    def from_outcomes(cls, meta: dict[str, Any], study: Study | None, outcomes: list[Outcome],
                      settings: analysis.Settings, order: Sequence[Cell] = ()) -> "StoredRun":
        """A stored run from its outcomes, analysed once with ``settings`` (a ``speed`` run's
        rows in the order of the cells ``order``, then first seen)."""
        baseline = study.baseline if study is not None else None
        context = analysis.context_of(meta.get("host"), study)
        return cls(meta, study, outcomes, analysis.analyse(outcomes, baseline, settings, order, context))

    def against(self, reference: str) -> "StoredRun":
        """This run re-analysed with configuration ``reference`` in place of its study's
        baseline (``report --reference``): every other configuration compared with it, paired
        by block, the study's contrasts left out, as a family of their own
        (``Analysis.reference`` says so in the method). Its study is the stored one with
        ``reference`` as baseline, so every report names it. Raises UsageError, one line, for a
        run without a study or a ``reference`` it has no configuration of that name."""
        if self.study is None:
            raise UsageError(f"run {self.id} is a speed run: it has no configurations to take a reference from")
        names = [c.name for c in self.study.configurations]
        if reference not in names:
            raise UsageError(f"--reference {reference}: run {self.id} (study {self.study.name}) has no such "
                             f"configuration (configurations: {', '.join(names)})")
        study = dataclasses.replace(self.study, baseline=reference, contrasts=())
        run = dataclasses.replace(self, study=study, analysis=analysis.analyse(
            self.outcomes, reference, self.analysis.settings, (), analysis.context_of(self.meta.get("host"), study)))
        run.analysis.reference = reference
        return run

    @property
    def speed(self) -> "speedstats.SpeedAnalysis":
        """A ``speed`` run's rows and baseline comparisons (``analysis.speed``). Raises
        ValueError for a study's run, which has none."""
        if self.analysis.speed is None:
            raise ValueError(f"run {self.meta.get('id')} is a study's: it has deltas, not speed rows")
        return self.analysis.speed


def analysis_settings(meta: dict[str, Any], study: Study | None) -> analysis.Settings:
    """The analysis settings of a stored run: those stored with it (format 2), else its study's
    (format 1 runs stored none; their margin and multiplicity are the defaults)."""
    if meta.get("analysis"):
        return analysis.Settings.from_dict(meta["analysis"])
    if study is None:
        return analysis.Settings()
    return settings_of(study)


def settings_of(study: Study, margin_pct: float | None = None, multiplicity: bool | None = None) -> analysis.Settings:
    """The analysis settings of ``study``, with the command line's ``--margin`` /
    ``--no-multiplicity`` when given. A sequential study's looks come from its repetitions and
    max_repetitions."""
    return analysis.Settings(
        margin_pct=study.margin_pct if margin_pct is None else margin_pct,
        multiplicity=study.multiplicity if multiplicity is None else multiplicity,
        looks=len(looks(study.repetitions, study.max_repetitions if study.until == "decided" else None)),
        noise_threshold_pct=study.noise_threshold_pct, verdict_on=study.verdict_on,
        verdict_on_ops={o.label: o.verdict_on for o in study.operations if o.verdict_on is not None})


#: The seed every run used before a run drew its own (the study files' former default).
LEGACY_SEED = 1


def run_seed(meta: dict[str, Any], study: Study | None) -> int:
    """The seed of a run's block order: the stored one (every run stores the one it used), else
    its study file's, else ``LEGACY_SEED``."""
    if meta.get("seed") is not None:
        return int(meta["seed"])
    return study.seed if study is not None and study.seed is not None else LEGACY_SEED


#: ``latest``, ``previous``, ``latest~N``: a run named by its place among the newest.
_RELATIVE = re.compile(r"(latest|previous)(?:~(\d+))?")


def resolve_id(store: Store, run_id: str | int | None, kind: str | None = None) -> int:
    """The id of ``run_id``: an integer; ``latest``/None for the newest **study** run (a
    ``speed`` call is stored too, but is rarely what a report, a comparison or a plan means;
    the newest run of any kind when the store holds no study); ``previous`` for the one before
    it, ``latest~N`` (``previous~N``) for the one N (N + 1) before it, of the same kind. With
    ``kind`` (``speed``, ``study``: what ``compare`` passes, the kind of the runs it compares),
    ``latest``, ``previous`` and ``latest~N`` count among the runs of that kind only.

    Raises StoreError when the store is empty, NoSuchRun (a StoreError, exit code 2) when
    ``run_id`` is malformed or not in the store, or names a run further back than the store's
    runs (of that kind) go.
    """
    runs = store.runs()
    if not runs:
        raise StoreError(f"store {store.location} holds no runs; run `cryptoperf study FILE` first "
                         "(or pass --store with another store)")
    relative = _RELATIVE.fullmatch(str(run_id)) if run_id is not None else None
    if run_id is None or relative:
        back = (1 if relative and relative.group(1) == "previous" else 0) + int(relative.group(2) or 0 if relative else 0)
        if kind is not None:
            pool = [r for r in runs if r.get("kind") == kind]
            what = f"{kind} run{'s' if len(pool) != 1 else ''}"
        else:
            studies = [r for r in runs if r.get("kind") == "study"]
            pool = studies or runs
            what = "study runs" if studies else "runs"
        if back >= len(pool):
            raise NoSuchRun(f"'{run_id}' names the {kind + ' ' if kind else ''}run {back} before the newest, but the "
                            f"store {store.location} holds {len(pool)} {what}")
        return int(pool[-1 - back]["id"])
    try:
        wanted = int(run_id)
    except ValueError:
        raise NoSuchRun(f"run id must be a number, 'latest', 'previous' or 'latest~N', got '{run_id}'") from None
    if not any(int(r["id"]) == wanted for r in runs):
        raise NoSuchRun(f"no run {wanted} in store {store.location} (ids {runs[0]['id']}–{runs[-1]['id']}; "
                         "see `cryptoperf list`)")
    return wanted


def effective_status(meta: dict[str, Any]) -> str:
    """A run's status as it stands: the stored one, except that a run still marked
    ``running`` whose process is gone (killed, or the machine stopped) is ``interrupted``."""
    status = str(meta.get("status"))
    if status == "running" and hostinfo.process_alive(meta.get("process")) is False:
        return "interrupted"
    return status


def describe(run: "StoredRun") -> str:
    """One line naming a stored run, for "using …" messages: ``run 7 (study key-size, started
    2026-11-23 20:07 UTC, complete)``."""
    m = run.meta
    what = f"study {m.get('study_name')}" if m.get("kind") == "study" else str(m.get("kind"))
    started = str(m.get("started_at") or "?").replace("T", " ")[:16]
    return f"run {run.id} ({what}, started {started} UTC, {effective_status(m)})"


def load_run(store: Store, run_id: str | int | None = None) -> StoredRun:
    """Rebuild run ``run_id`` (``latest`` by default) from ``store``, analysed once.

    Raises StoreError for a missing run or a format version this build cannot read
    ("format version X is not supported").
    """
    rid = resolve_id(store, run_id)
    meta = next(r for r in store.runs() if int(r["id"]) == rid)
    meta["status"] = effective_status(meta)
    version = int(meta.get("format_version") or 0)
    if version > FORMAT_VERSION or version < 1:
        raise StoreError(f"run {rid} in {store.location}: format version {version} is not supported by "
                         f"this cryptoperf (it reads formats 1 to {FORMAT_VERSION}); upgrade cryptoperf")
    study = None
    if meta.get("study_toml"):
        study = parse(meta["study_toml"], f"<study of run {rid}>", stored=True)
    stored = store.outcomes(rid)
    outcomes = list(stored.values())
    if study is not None:  # cells paired across backends, as they were planned
        outcomes = paired(outcomes, study.pairing())
    run = StoredRun.from_outcomes(meta, study, outcomes, analysis_settings(meta, study))
    run.row_ids = list(stored)
    run.explanations = explanations.load(store, rid)
    return run


def open_store(location: str | Path | None = None) -> Store:
    """Open an existing store (a SQLite path, a ``sqlite:///`` or ``postgresql://`` URL; None
    for ``store.default_location()``) for reading; reading never creates one. Raises
    StoreError naming the store (a URL's password masked) when there is no SQLite file there,
    or no cryptoperf tables in the PostgreSQL database, or it cannot be reached."""
    where = Location(location)
    if where.path is not None and not where.path.is_file():
        raise StoreError(f"no store at {where.shown}; run `cryptoperf study FILE` or `cryptoperf speed` "
                         "first, or give another store (--store PATH or URL)")
    return Store(location, create=False)


def kernel_release(host: dict[str, Any]) -> str:
    """The kernel release from a host fingerprint (``Linux 6.8.0 #1 SMP …`` → ``6.8.0``), or '?'."""
    parts = str(host.get("kernel") or "").split(" ")
    return parts[1] if len(parts) > 1 else (parts[0] or "?")


def list_runs(store: Store) -> list[dict[str, Any]]:
    """Every run of ``store``, oldest first, as JSON-ready dicts for ``cryptoperf list``.

    Keys: ``id``, ``started_at``, ``finished_at`` (UTC ISO 8601), ``kind`` (study/speed),
    ``study`` (the study's name, None for speed), ``status`` (``effective_status``: a
    ``running`` run whose process is gone is ``interrupted``), ``format_version``,
    ``supported`` (False when this cryptoperf cannot read the run's format), ``cpu_model``,
    ``kernel`` (release), ``logical_cpus``, ``cells`` (distinct cells), ``results`` (worker
    runs) and ``ok`` (measured ones). Reads no result bodies, so it is fast on a large store.
    """
    counts = store.result_counts()
    out = []
    for r in store.runs():
        host = r.get("host") or {}
        version = int(r.get("format_version") or 0)
        c = counts.get(int(r["id"]), {"cells": 0, "results": 0, "ok": 0})
        out.append({"id": int(r["id"]), "started_at": r["started_at"], "finished_at": r["finished_at"],
                    "kind": r["kind"], "study": r.get("study_name"), "status": effective_status(r),
                    "format_version": version, "supported": 1 <= version <= FORMAT_VERSION,
                    "cpu_model": host.get("cpu_model"), "kernel": kernel_release(host),
                    "logical_cpus": host.get("logical_cpus"), **c})
    return out
