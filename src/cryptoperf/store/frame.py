"""``cryptoperf.load()``: stored runs as a pandas DataFrame, for notebooks and ad-hoc analysis.

pandas is optional (``pip install '.[data]'`` in the checkout); everything else in cryptoperf works
without it, so it is imported only when ``load`` is called.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from cryptoperf.errors import MissingDependency
from cryptoperf.model import Outcome
from cryptoperf.store.rows import ROW_COLUMNS, repetition_row
from cryptoperf.store.db import Store
from cryptoperf.store.stored_run import describe, load_run, open_store

if TYPE_CHECKING:  # pragma: no cover
    import pandas

#: The DataFrame's columns, in order: the run and its study, then ``rows.ROW_COLUMNS`` (without
#: ``params``). Units are in the names; numbers are NaN (or <NA>) for repetitions that were not
#: measured (status unsupported, invalid or failed).
COLUMNS = ("run_id", "study") + tuple(c for c in ROW_COLUMNS if c != "params")
_INT_COLUMNS = ("run_id", "size_bytes", "block", "position", "attempt", "batch", "threads", "ops", "wall_ns")
#: ``load(kind="levels")``'s columns, in order: one row per workload level of a configuration
#: (configuration × backend × operation × size × load level), from the run's analysis
#: (``Analysis.workloads``: the figures every report shows). ``level`` is the level as written,
#: ``panel`` its kind (``closed``, ``paced``, ``open``, ``targets``) and ``level_x`` its number
#: (connections, rate per s or targets); each side's CPU per transaction is the geometric mean
#: over the repetitions with its band (``_low``/``_high``): ``server`` the server's CPU over the
#: transactions it served, ``client`` the client's, ``process`` the worker's measuring threads.
LEVEL_COLUMNS = ("run_id", "study", "configuration", "vs", "backend", "label", "op", "size_bytes", "mode",
                 "level", "panel", "level_x", "repetitions", "tx_per_s", "tx_per_s_low", "tx_per_s_high",
                 "bytes_per_s", "p50_ns", "p99_ns", "late_share",
                 "server_cpu_ns_per_tx", "server_cpu_ns_per_tx_low", "server_cpu_ns_per_tx_high",
                 "client_cpu_ns_per_tx", "client_cpu_ns_per_tx_low", "client_cpu_ns_per_tx_high",
                 "process_cpu_ns_per_tx", "process_cpu_ns_per_tx_low", "process_cpu_ns_per_tx_high")
#: ``load()``'s kinds of frame.
KINDS = ("repetitions", "levels", "explanations")
#: ``load(kind="explanations")``'s columns: one row per function and per library of each
#: explanation kept with the run (``cryptoperf explain``, ``explain = true``): ``level``
#: ``function`` or ``library``, its CPU per operation in the reference and the configuration
#: explained, the change with its 95 % interval (ns) and its share of the total change.
EXPLANATION_COLUMNS = ("run_id", "study", "configuration", "reference", "backend", "label", "size_bytes", "level",
                       "name", "a_ns_per_op", "b_ns_per_op", "change_ns_per_op", "change_ns_per_op_low",
                       "change_ns_per_op_high", "share")
_FLOAT_COLUMNS = ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "min_ns", "max_ns", "mean_ns", "stddev_ns",
                  "ops_per_s", "bytes_per_s", "process_cpu_ns_per_op", "steal_pct", "busy_pct", "other_load_pct")


def _pandas():
    try:
        import pandas
    except ImportError:
        raise MissingDependency("cryptoperf.load() needs pandas, which is not installed; "
                                "run pip install '.[data]' in the cryptoperf checkout (or pip install pandas)") from None
    return pandas


def row(run_id: int, study: str | None, o: Outcome, logical_cpus: int = 1) -> dict[str, Any]:
    """One DataFrame row (a dict with every name in COLUMNS) for one repetition of one cell:
    ``rows.repetition_row`` (other load as a share of ``logical_cpus``) with the run's id and
    its study's name."""
    r = repetition_row(o, logical_cpus)
    r.update(run_id=run_id, study=study)
    return {c: r[c] for c in COLUMNS}


def explanation_rows(run_id: int, study: str | None, explanations: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``EXPLANATION_COLUMNS`` rows of a run's stored explanations (``StoredRun.explanations``)."""
    out = []
    for e in explanations:
        att = e["attribution"]
        for level, rows in (("function", att["rows"]), ("library", att.get("libraries", []))):
            for r in rows:
                c = r["change_ns_per_op"]
                out.append({"run_id": run_id, "study": study, "configuration": e["configuration"],
                            "reference": e["reference"], "backend": e["backend"], "label": e["operation"],
                            "size_bytes": e.get("size_bytes"), "level": level, "name": r["function"],
                            "a_ns_per_op": r["a_ns_per_op"], "b_ns_per_op": r["b_ns_per_op"],
                            "change_ns_per_op": c["value"], "change_ns_per_op_low": c["ci_low"],
                            "change_ns_per_op_high": c["ci_high"], "share": r["share"]})
    return out


def level_rows(run_id: int, study: str | None, analysis: Any) -> list[dict[str, Any]]:
    """``load(kind="levels")``'s rows of one run: one dict keyed by ``LEVEL_COLUMNS`` per
    workload point of its analysis (``Analysis.workloads``), in the families' order."""
    out = []
    for f in analysis.workloads.families:
        for p in f.points:
            c = p.summary.cell
            r: dict[str, Any] = dict.fromkeys(LEVEL_COLUMNS)
            r.update(run_id=run_id, study=study, configuration=p.series,
                     vs=p.delta.baseline if p.delta is not None else None, backend=c.backend, label=f.label,
                     op=c.op, size_bytes=c.size_bytes, mode=p.mode, level=p.load.text, panel=p.panel,
                     level_x=p.x, repetitions=len(p.blocks), late_share=p.late_share,
                     p50_ns=p.summary.p50_ns, p99_ns=p.summary.p99_ns)
            for name, e in (("tx_per_s", p.tx_per_s), *((f"{side}_cpu_ns_per_tx", p.cpu_ns_per_tx_estimate(side))
                                                        for side in ("server", "client", "process"))):
                if e is not None:
                    r.update({name: e.value, f"{name}_low": e.low, f"{name}_high": e.high})
            if p.bytes_per_s is not None:
                r["bytes_per_s"] = p.bytes_per_s.value
            out.append(r)
    return out


def load(run_id: int | str | Iterable[int | str] | None = None,
         store: str | Path | Store | None = None, kind: str = "repetitions") -> "pandas.DataFrame":
    """Stored results as a pandas DataFrame: with ``kind="repetitions"`` (the default) one row
    per configuration × backend × operation × size × block (every stored repetition, measured or
    not, calibration left out; a disturbed repetition that was run again has ``superseded`` True
    and ``disturbed`` saying why); with ``kind="levels"`` one row per workload level of a
    configuration with the figures the report's workload sections show (``LEVEL_COLUMNS``:
    transactions/s, bytes/s, latency, late share and each side's CPU per transaction, named by
    side, with their bands), none for a run without workloads; with ``kind="explanations"``
    one row per function and per library of each explanation kept with the run
    (``EXPLANATION_COLUMNS``), none for a run without one.

    Args:
        run_id: a run id, ``"latest"`` or None (the newest study run, named on stderr), or
            several ids (their rows concatenated, in the order given). Ids are those of
            ``cryptoperf list``.
        store: a store's path or URL (SQLite or PostgreSQL, as ``--store`` takes) or an open
            ``Store``; None for the default store (``store.default_location()``).
        kind: ``repetitions``, ``levels`` or ``explanations`` (``KINDS``).

    Returns:
        A DataFrame with the columns of ``COLUMNS`` (shape (n_rows, len(COLUMNS))):
        ``size_bytes`` is the message size the worker used (its default when the study gave
        none; <NA> for operations without a message); ids and
        counts as nullable integers (``Int64``), latencies in ns, throughput in ops/s and
        bytes/s, CPU time in ns per operation, steal and busy in % — NaN for repetitions that
        were not measured. Latency, throughput and CPU figures are derived exactly as the
        tables derive them (from the stored histogram and counters).

    Raises:
        ValueError for an unknown ``kind``.
        MissingDependency (an ImportError) if pandas is not installed.
        StoreError for a missing store, an unknown run id, or a run whose format version this
        cryptoperf cannot read.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind '{kind}' for cryptoperf.load (known: {', '.join(KINDS)})")
    pd = _pandas()
    ids = [run_id] if run_id is None or isinstance(run_id, (int, str)) else list(run_id)
    if isinstance(store, Store):
        rows = _rows(store, ids, kind)
    else:
        with open_store(store) as st:
            rows = _rows(st, ids, kind)
    if kind == "explanations":
        df = pd.DataFrame(rows, columns=list(EXPLANATION_COLUMNS))
        df["run_id"], df["size_bytes"] = df["run_id"].astype("Int64"), df["size_bytes"].astype("Int64")
        return df
    if kind == "levels":
        df = pd.DataFrame(rows, columns=list(LEVEL_COLUMNS))
        for col in ("run_id", "size_bytes", "repetitions"):
            df[col] = df[col].astype("Int64")
        for col in LEVEL_COLUMNS[LEVEL_COLUMNS.index("level_x"):]:
            if col != "repetitions":
                df[col] = df[col].astype("float64")
        return df
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in _INT_COLUMNS:
        df[col] = df[col].astype("Int64")
    for col in _FLOAT_COLUMNS:
        df[col] = df[col].astype("float64")
    return df


def _rows(store: Store, ids: list, kind: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for rid in ids:
        run = load_run(store, rid)
        if rid is None or str(rid) == "latest":  # say which run "the newest study run" was
            print(f"cryptoperf.load: using {describe(run)}", file=sys.stderr)
        if kind == "levels":
            rows += level_rows(run.id, run.meta.get("study_name"), run.analysis)
            continue
        if kind == "explanations":
            rows += explanation_rows(run.id, run.meta.get("study_name"), run.explanations)
            continue
        cpus = int(run.host.get("logical_cpus") or 1)
        rows += [row(run.id, run.meta.get("study_name"), o, cpus) for o in run.outcomes
                 if not o.repetition.calibration]
    return rows
