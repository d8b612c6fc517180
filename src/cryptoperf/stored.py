"""A stored run, rebuilt from the store: what ``report``, ``compare``, ``plan`` and
``cryptoperf.load`` start from.

Only raw facts are stored (the worker's result messages and the study text); everything derived
(latency percentiles, throughput, summaries, deltas with CIs) is recomputed here with the same
code and the run's stored seed, so a report of an old run matches what its study printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptoperf import analysis
from cryptoperf.errors import StoreError
from cryptoperf.plan import Cell, Run, cpu_from_key
from cryptoperf.run import local
from cryptoperf.store import FORMAT_VERSION, Store
from cryptoperf.study import Study, parse


@dataclass
class StoredRun:
    """One run of the store with its derived figures.

    Attributes:
        meta: the ``runs`` row (id, kind, started_at, finished_at, study_name, status, seed,
            format_version, host).
        study: the parsed study (None for a ``speed`` run).
        outcomes: one RunOutcome per stored worker run, in the order they finished.
        summaries: per-cell summaries over repetitions (``analysis.summarize``), by cell key.
        deltas: every configuration vs the baseline (``analysis.deltas``); empty without a study.
    """

    meta: dict[str, Any]
    study: Study | None
    outcomes: list[local.RunOutcome]
    summaries: dict[str, analysis.CellSummary]
    deltas: list[analysis.Delta]

    @property
    def id(self) -> int:
        return int(self.meta["id"])

    @property
    def host(self) -> dict[str, Any]:
        return self.meta["host"]


def resolve_id(store: Store, run_id: str | int | None) -> int:
    """The id of ``run_id`` (an integer, or ``latest``/None for the newest run).

    Raises StoreError when the store is empty or has no such run.
    """
    runs = store.runs()
    if not runs:
        raise StoreError(f"store {store.path} holds no runs; run `cryptoperf study FILE` first "
                         "(or pass --store PATH)")
    if run_id is None or str(run_id) == "latest":
        return int(runs[-1]["id"])
    try:
        wanted = int(run_id)
    except ValueError:
        raise StoreError(f"run id must be a number or 'latest', got '{run_id}'") from None
    if not any(int(r["id"]) == wanted for r in runs):
        raise StoreError(f"no run {wanted} in store {store.path} (ids {runs[0]['id']}–{runs[-1]['id']}; "
                         "see `cryptoperf list`)")
    return wanted


def load_run(store: Store, run_id: str | int | None = None) -> StoredRun:
    """Rebuild run ``run_id`` (``latest`` by default) from ``store``.

    Raises StoreError for a missing run or a format version this build cannot read
    ("format version X is not supported").
    """
    rid = resolve_id(store, run_id)
    meta = next(r for r in store.runs() if int(r["id"]) == rid)
    version = int(meta.get("format_version") or 0)
    if version > FORMAT_VERSION or version < 1:
        raise StoreError(f"run {rid} in {store.path} has format version {version}, which is not "
                         f"supported by this cryptoperf (format {FORMAT_VERSION}); upgrade cryptoperf")
    study = None
    if meta.get("study_toml"):
        study = parse(meta["study_toml"], f"<study of run {rid}>")
    outcomes = [_outcome(row, i) for i, row in enumerate(store.results(rid))]
    summaries = analysis.summarize(outcomes)
    deltas: list[analysis.Delta] = []
    if study is not None:
        seed = meta.get("seed") if meta.get("seed") is not None else study.seed
        deltas = analysis.deltas(summaries, study.baseline, seed, study.bootstrap_resamples,
                                 study.noise_threshold_pct / 100.0)
    return StoredRun(meta, study, outcomes, summaries, deltas)


def _outcome(row: dict[str, Any], index: int) -> local.RunOutcome:
    cell = Cell(configuration=row["configuration"], backend=row["backend"], label=row["label"],
                op=row["op"], params=row["params"] or {}, size_bytes=row["size_bytes"],
                cpu=cpu_from_key(row["cell"]))
    run = Run(cell=cell, repetition=int(row["repetition"]), index=index)
    if row["status"] == local.OK and row["result"] is not None:
        o = local.outcome_from_result(run, row["result"])
    else:
        o = local.RunOutcome(run, row["status"], row["reason"], row["result"])
    o.started_at = row.get("started_at") or ""
    o.finished_at = row.get("finished_at") or ""
    return o
