"""Outcomes and studies as flat rows: the one flattener behind the CSV report
(``report/csv.py``), ``cryptoperf.load()`` (``store/frame.py``) and the JSON documents
(``report/json.py``), so the three never disagree on what a column means.

- ``repetition_row(o)``: one repetition, flat, units in the names (``ROW_COLUMNS``): the cell,
  its place in the blocks, the outcome, the library, and the figures derived from the worker's
  result (empty unless it was measured).
- ``speed_entry(o)``: the row and everything else the worker's result holds (its validation,
  capabilities, histogram, and a workload's fields: ``server``, ``negotiated``, its own part
  ...), as received: one repetition of the ``speed`` JSON document.
- ``repetition_entry(o)``: one repetition of the ``study`` JSON document (the cell's fields, the
  derived figures as objects, the worker's message as received under ``result``).
- ``study_dict(study)``: a study's every option, configuration and operation, field by field.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from cryptoperf.hostinfo import other_load_pct
from cryptoperf.model import Outcome
from cryptoperf.study import Study

#: ``repetition_row``'s keys, in order. Durations are ns, rates per second, shares in percent.
ROW_COLUMNS = ("configuration", "backend", "library", "library_version", "label", "op", "size_bytes", "params",
               "cpu", "build", "fips", "block", "position", "attempt", "superseded", "disturbed", "status",
               "reason", "threads", "timing", "batch", "ops", "wall_ns", "ops_per_s", "bytes_per_s",
               "p50_ns", "p90_ns", "p99_ns", "p999_ns", "min_ns", "max_ns", "mean_ns", "stddev_ns",
               "process_cpu_ns_per_op", "steal_pct", "busy_pct", "other_load_pct", "started_at", "finished_at")

#: The fields of a worker's message that only say which request it answers and how it ended:
#: the row has them already (``status``, ``reason``) or they name nothing measured.
_ENVELOPE = frozenset(("type", "id", "backend", "op", "status", "reason"))


def repetition_row(o: Outcome, logical_cpus: int = 1) -> dict[str, Any]:
    """One repetition as a flat dict keyed by ``ROW_COLUMNS``.

    ``size_bytes`` is the message size the worker used (its default when the cell named none;
    None for an operation without a message); ``params`` the parameters the worker ran with
    (its resolved ``params``, else those the cell asked for); ``fips`` the cell's build
    (``fips_reported`` in ``speed_entry`` is what the worker said); ``library``, ``threads``,
    ``timing``, ``batch`` what the worker reported (None without a result). ``ops``, ``wall_ns``
    and the figures derived from the result (latency from the histogram, throughput, CPU per
    operation, steal, busy, and ``other_load_pct``: other work's share of the
    ``logical_cpus``) are None unless the repetition was measured. Timestamps are None when
    unknown."""
    c, rep, r = o.cell, o.repetition, o.result
    params = dict(r.params) if r is not None and r.params else c.worker_params()
    row: dict[str, Any] = dict.fromkeys(ROW_COLUMNS)
    row.update(configuration=c.configuration, backend=c.backend, label=c.label, op=c.op,
               size_bytes=params.get("size_bytes", c.size_bytes), params=params, cpu=c.cpu, build=c.build,
               fips=c.fips, block=rep.block, position=rep.position, attempt=rep.attempt,
               superseded=o.superseded, disturbed=o.disturbed, status=o.status, reason=o.reason,
               started_at=o.started_at or None, finished_at=o.finished_at or None)
    if r is not None:
        row.update(library=r.library, library_version=r.library_version, threads=r.threads, timing=r.timing,
                   batch=r.batch)
    lat, tp = o.latency, o.throughput
    if o.ok and r is not None and lat is not None and tp is not None:
        row.update(ops=r.ops, wall_ns=r.wall_ns, ops_per_s=tp.ops_per_s, bytes_per_s=tp.bytes_per_s,
                   p50_ns=lat.p50_ns, p90_ns=lat.p90_ns, p99_ns=lat.p99_ns, p999_ns=lat.p999_ns,
                   min_ns=lat.min_ns, max_ns=lat.max_ns, mean_ns=lat.mean_ns, stddev_ns=lat.stddev_ns,
                   process_cpu_ns_per_op=tp.process_cpu_ns_per_op, steal_pct=tp.steal_pct, busy_pct=tp.busy_pct,
                   other_load_pct=other_load_pct(r, logical_cpus))
    return row


def result_fields(o: Outcome, beside: Mapping[str, Any]) -> dict[str, Any]:
    """Every field of the worker's message (as received) that is not in ``beside`` and says
    more than which request it answers: validation, capabilities, the histogram, CPU times,
    and a workload's fields (``load``, ``server``, ``negotiated``, its own part ...). {}
    without a result."""
    if o.result is None:
        return {}
    return {k: v for k, v in o.result.raw.items() if k not in _ENVELOPE and k not in beside}


def speed_entry(o: Outcome, logical_cpus: int = 1) -> dict[str, Any]:
    """One repetition of the ``speed`` JSON document: ``repetition_row`` with ``cpu_mask``
    (the cell's mask), ``fips_reported`` (the worker's ``fips``), then every other field of
    the worker's result as received (``result_fields``), so a workload's ``server``,
    ``negotiated`` or own part are there as a study's JSON has them."""
    entry = repetition_row(o, logical_cpus)
    entry.update(cpu_mask=o.cell.cpu, fips_reported=o.result.fips if o.result is not None else None)
    entry.update(result_fields(o, entry))
    return entry


def repetition_entry(o: Outcome) -> dict[str, Any]:
    """One repetition of the ``study`` JSON document: the cell's fields (``Cell.as_dict``:
    ``fips`` is the cell's build), ``block``, ``position``, ``attempt``, ``batch``
    (requested), ``superseded``, ``disturbed``, ``status``, ``reason``, ``fips_reported`` (what
    the worker said), timestamps, ``stderr_tail``, ``latency`` and ``throughput`` (derived;
    null unless ok), ``result`` (the worker's message as received, histogram included; null if
    there was none) and ``host`` (the fingerprint of the machine that ran it when that is not
    the run's host, e.g. a Ray node; null otherwise)."""
    rep = o.repetition
    d = rep.cell.as_dict()
    d.update(block=rep.block, position=rep.position, attempt=rep.attempt, batch=rep.batch,
             superseded=o.superseded, disturbed=o.disturbed, status=o.status, reason=o.reason,
             fips_reported=o.result.fips if o.result is not None else None,
             started_at=o.started_at, finished_at=o.finished_at, stderr_tail=o.stderr_tail,
             latency=o.latency.as_dict() if o.latency else None,
             throughput=o.throughput.as_dict() if o.throughput else None,
             result=dict(o.result.raw) if o.result is not None else None, host=o.host)
    return d


def _plain(value: Any) -> Any:
    """A study's value as JSON: a dataclass as its fields (those shown in its repr), a mapping
    as a dict, a tuple as a list."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def study_dict(study: Study) -> dict[str, Any]:
    """A study as JSON: every field of ``Study`` (options, ``configurations`` and
    ``operations`` each with every field of theirs, ``hosts`` as their selectors), the file's
    text as ``toml`` (not ``text``), without what is derived from the worker (``rules``) or
    from the text (``source``)."""
    d = _plain(study)
    d["backends"] = d["backends"] or []
    d["toml"] = d.pop("text")
    return d
