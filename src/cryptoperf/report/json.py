"""JSON documents: complete results (histograms included), with ``format_version``.

Two kinds, both ``{"format_version": 4, "kind": ..., "cryptoperf_version": ..., "host": ...}``:

- ``speed``: ``results`` — one entry per (backend, op, size) with at least ``backend``,
  ``library_version``, ``op``, ``size_bytes``, ``status``, ``ops_per_s``, ``bytes_per_s``,
  ``p50_ns``, ``p99_ns``, ``process_cpu_ns_per_op``, ``batch`` (numbers are null unless status is ok;
  geometric means over the row's repetitions, with ``intervals`` and ``per_repetition``), and
  every other field of its worker result as received (``rows.speed_entry``: validation,
  capabilities, histogram, and a workload's ``server``, ``negotiated``, own part ...); with
  ``--baseline`` a ``baseline`` section (each backend's ops/s against the baseline's).
- ``study``: ``study`` (options and the file's text), ``repetitions`` (every repetition: its cell,
  block and place in the block's order, outcome, derived figures and the worker's full result
  message; calibration repetitions have block 0), ``cells`` (summaries over repetitions),
  ``deltas`` (vs the baseline, with intervals and verdicts) and ``analysis`` (how the
  intervals were made: level, multiplicity, margin).

The format changelog is in ``store/db.py`` (the store and the documents share the version).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from cryptoperf import __version__, speedstats, stats
from cryptoperf.store import rows
from cryptoperf.compare import undecided
from cryptoperf.report.render import write_text
from cryptoperf.store.db import FORMAT_VERSION
from cryptoperf.store.stored_run import StoredRun


def speed_row_entry(row: speedstats.SpeedRow, logical_cpus: int = 1) -> dict[str, Any]:
    """One ``speed`` result entry for a (backend, op, size) row over its repetitions: the
    fields of ``rows.speed_entry`` (of its first measured repetition: the repetition's row and
    every other field of the worker's result, a workload's included) with ``ops_per_s``,
    ``bytes_per_s``, ``p50_ns``, ``p99_ns``, ``p999_ns`` and ``process_cpu_ns_per_op`` the geometric
    means over the measured repetitions (the values themselves for one), plus
    ``repetitions`` and ``repetitions_ok`` (counts), ``intervals`` (``ops_per_s``,
    ``bytes_per_s``, ``p50_ns``, ``process_cpu_ns_per_op`` → ``{value, ci_low, ci_high, level, n}``,
    bounds null below 3 repetitions; null without a measurement) and ``per_repetition`` (one
    ``rows.speed_entry`` per repetition). With more than one
    measured repetition ``histogram`` holds them all (merged), and ``p90_ns``, ``max_ns``,
    ``mean_ns``, ``stddev_ns`` are the merged histogram's."""
    first = row.measured[0] if row.measured else row.outcomes[0]
    entry = rows.speed_entry(first, logical_cpus)
    entry.update(status=row.status, reason=row.reason, size_bytes=entry["size_bytes"],
                 repetitions=len(row.outcomes), repetitions_ok=len(row.measured))
    estimates = {"ops_per_s": row.ops_per_s, "bytes_per_s": row.bytes_per_s, "p50_ns": row.p50_ns,
                 "process_cpu_ns_per_op": row.process_cpu_ns_per_op}
    if row.measured:
        entry.update({k: e.value if e is not None else None for k, e in estimates.items()})
        entry.update(p99_ns=row.p99_ns, p999_ns=row.p999_ns, steal_pct=row.steal_pct)
    entry["intervals"] = {k: e.as_dict() if e is not None else None for k, e in estimates.items()}
    if len(row.measured) > 1:
        merged = stats.merge_histograms([o.result.histogram for o in row.measured if o.result and o.result.histogram])
        lat = stats.latency_of(merged)
        entry.update(histogram=merged.encode().decode("ascii"), p90_ns=lat.p90_ns, max_ns=lat.max_ns,
                     mean_ns=lat.mean_ns, stddev_ns=lat.stddev_ns)
    entry["per_repetition"] = [rows.speed_entry(o, logical_cpus) for o in row.outcomes]
    return entry


def speed_document(run: StoredRun, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``speed`` JSON document of a ``speed`` run, from its analysis (``run.speed``):
    ``results`` one ``speed_row_entry`` per (backend, op, size) row, in table order; with a
    baseline backend, ``baseline``: ``{backend, metric, level, comparisons}``, each comparison a
    ``speedstats.BaselineRatio.as_dict`` (another backend's ops/s ÷ the baseline's, with its
    interval); ``analysis``: the run's analysis (``Analysis.as_dict``: a workload's figures per
    level and side among them). ``settings``: the worker settings the call used (``engine.SpeedRun.settings``;
    {} for a run read back from the store, which does not keep them)."""
    m, speed = run.meta, run.speed
    cpus = int(run.host.get("logical_cpus") or 1)
    doc = {"format_version": FORMAT_VERSION, "kind": "speed", "cryptoperf_version": __version__,
           "started_at": m.get("started_at") or "", "finished_at": m.get("finished_at") or "",
           "settings": dict(settings or {}), "host": dict(run.host),
           "results": [speed_row_entry(r, cpus) for r in speed.rows], "analysis": run.analysis.as_dict()}
    if speed.baseline is not None:
        doc["baseline"] = {"backend": speed.baseline, "metric": "ops_per_s", "level": speedstats.LEVEL,
                           "comparisons": [c.as_dict() for c in speed.ratios]}
    return doc


def study_document(run: StoredRun, store_path: str | Path) -> dict[str, Any]:
    """The complete ``study`` JSON document of a run (see module doc); ``store_path`` (the
    store's ``Store.location``: a path, or a URL with its password masked) goes into
    ``store.path``."""
    assert run.study is not None
    m = run.meta
    return {"format_version": FORMAT_VERSION, "kind": "study", "cryptoperf_version": __version__,
            "status": m.get("status") or "", "started_at": m.get("started_at") or "",
            "finished_at": m.get("finished_at") or "", "study": rows.study_dict(run.study),
            "host": dict(run.host), "store": {"path": str(store_path), "run_id": run.id},
            "analysis": run.analysis.as_dict(),
            "repetitions": [rows.repetition_entry(o) for o in run.outcomes],
            "cells": [s.as_dict() for s in run.summaries.values()],
            "deltas": [d.as_dict() for d in run.deltas],
            "explanations": [explanation_entry(e) for e in run.explanations]}


def explanation_entry(explanation: dict[str, Any]) -> dict[str, Any]:
    """A stored explanation as the study document lists it: the explain document and when it
    was made (its flame graph is in the HTML report and the store, not in the JSON)."""
    return {k: v for k, v in explanation.items() if k != "flamegraph_svg"}


def run_document(run: StoredRun, store_path: str | Path) -> dict[str, Any]:
    """The document of a stored run: a ``study`` document for a study, else a ``speed``
    document. ``stderr_tail`` is '' when rebuilt from the store (which does not keep it)."""
    if run.study is None:
        return speed_document(run)
    return study_document(run, store_path)


def compare_document(kind: str, comparison: Any, fail_on: Sequence[str],
                     failing: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """The JSON document of ``cryptoperf compare``: ``kind`` ``compare`` for run against run
    (``compare.Comparison``) or ``compare_hosts`` for the machines of one run (its
    ``compare.compare_hosts`` result), with the regression gate's ``fail_on`` and the cells that fail it
    (``failing``: (machine name or '', delta) pairs, named ``[machine: ]backend/label/size/configuration``),
    and ``undecided``: every comparison the gate could not decide with the largest slowdown its
    interval leaves possible (``compare.undecided``)."""
    groups = comparison.comparisons if kind == "compare_hosts" else [comparison]
    return {"format_version": FORMAT_VERSION, "kind": kind, "cryptoperf_version": __version__,
            **comparison.as_dict(), "fail_on": list(fail_on),
            "failing": [f"{where + ': ' if where else ''}{d.backend}/{d.label}/{d.size_bytes}/{d.configuration}"
                        for where, d in failing],
            "undecided": [u.as_dict() for c in groups for u in undecided(c.deltas)]}


def result_path(out_dir: str | Path, study_name: str, started_at: str, run_id: int | None = None) -> Path:
    """``<out_dir>/<study>-<UTC timestamp>-run<id>.json``, e.g.
    ``key-size-20250101T120000Z-run7.json``: the run id keeps two studies of one name started
    in the same second apart (and ``write`` never overwrites a file in any case)."""
    stamp = re.sub(r"[^0-9TZ]", "", started_at.split(".")[0]) + "Z"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", study_name) or "study"
    tail = f"-run{run_id}" if run_id is not None else ""
    return Path(out_dir) / f"{safe}-{stamp}{tail}.json"


def write(document: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``document`` as indented JSON to a new file at ``path`` (creating directories;
    ``<stem>-2.json`` … if the name is taken: nothing is overwritten); return the path written.
    Raises StoreError if it cannot be written."""
    return write_text(json.dumps(document, indent=1) + "\n", path, fix="pass --out DIR", unique=True)
