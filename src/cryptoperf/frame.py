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
from cryptoperf.rows import ROW_COLUMNS, repetition_row
from cryptoperf.store import Store
from cryptoperf.stored import describe, load_run, open_store

if TYPE_CHECKING:  # pragma: no cover
    import pandas

#: The DataFrame's columns, in order: the run and its study, then ``rows.ROW_COLUMNS`` (without
#: ``params``). Units are in the names; numbers are NaN (or <NA>) for repetitions that were not
#: measured (status unsupported, invalid or failed).
COLUMNS = ("run_id", "study") + tuple(c for c in ROW_COLUMNS if c != "params")
_INT_COLUMNS = ("run_id", "size_bytes", "block", "position", "attempt", "batch", "threads", "ops", "wall_ns")
_FLOAT_COLUMNS = ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "min_ns", "max_ns", "mean_ns", "stddev_ns",
                  "ops_per_s", "bytes_per_s", "cpu_ns_per_op", "steal_pct", "busy_pct", "other_load_pct")


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


def load(run_id: int | str | Iterable[int | str] | None = None,
         store: str | Path | Store | None = None) -> "pandas.DataFrame":
    """Stored results as a pandas DataFrame: one row per configuration × backend × operation ×
    size × block (every stored repetition, measured or not, calibration left out; a disturbed
    repetition that was run again has ``superseded`` True and ``disturbed`` saying why).

    Args:
        run_id: a run id, ``"latest"`` or None (the newest study run, named on stderr), or
            several ids (their rows concatenated, in the order given). Ids are those of
            ``cryptoperf list``.
        store: a store's path or URL (SQLite or PostgreSQL, as ``--store`` takes) or an open
            ``Store``; None for the default store (``store.default_location()``).

    Returns:
        A DataFrame with the columns of ``COLUMNS`` (shape (n_rows, len(COLUMNS))):
        ``size_bytes`` is the message size the worker used (its default when the study gave
        none; <NA> for operations without a message); ids and
        counts as nullable integers (``Int64``), latencies in ns, throughput in ops/s and
        bytes/s, CPU time in ns per operation, steal and busy in % — NaN for repetitions that
        were not measured. Latency, throughput and CPU figures are derived exactly as the
        tables derive them (from the stored histogram and counters).

    Raises:
        MissingDependency (an ImportError) if pandas is not installed.
        StoreError for a missing store, an unknown run id, or a run whose format version this
        cryptoperf cannot read.
    """
    pd = _pandas()
    ids = [run_id] if run_id is None or isinstance(run_id, (int, str)) else list(run_id)
    if isinstance(store, Store):
        rows = _rows(store, ids)
    else:
        with open_store(store) as st:
            rows = _rows(st, ids)
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in _INT_COLUMNS:
        df[col] = df[col].astype("Int64")
    for col in _FLOAT_COLUMNS:
        df[col] = df[col].astype("float64")
    return df


def _rows(store: Store, ids: list) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for rid in ids:
        run = load_run(store, rid)
        if rid is None or str(rid) == "latest":  # say which run "the newest study run" was
            print(f"cryptoperf.load: using {describe(run)}", file=sys.stderr)
        cpus = int(run.host.get("logical_cpus") or 1)
        rows += [row(run.id, run.meta.get("study_name"), o, cpus) for o in run.outcomes
                 if not o.repetition.calibration]
    return rows
