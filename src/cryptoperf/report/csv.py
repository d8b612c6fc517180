"""The CSV report: one row per repetition — configuration × operation × size × block — with
units in the column names (``p50_ns``, ``ops_per_s``, ``cpu_ns_per_op``, ``steal_pct``). Rows
are grouped by cell (in first-seen order) and ordered by block; ``position`` is the place in the
block's random order. Repetitions that were not measured keep their row, with empty figures and
the reason; a disturbed repetition that was run again keeps its row with ``superseded`` 1
(``disturbed`` says why). Calibration repetitions are left out."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from cryptoperf.hostinfo import other_load_pct
from cryptoperf.report import view
from cryptoperf.stored import StoredRun

#: The columns, in order. Durations are ns, rates per second, shares in percent.
COLUMNS = ("run_id", "configuration", "backend", "library", "library_version", "label", "op",
           "size_bytes", "params", "cpu", "build", "fips", "block", "position", "attempt",
           "superseded", "disturbed", "status", "reason", "threads", "timing", "batch",
           "ops", "wall_ns", "ops_per_s", "bytes_per_s", "p50_ns", "p90_ns", "p99_ns", "p999_ns",
           "min_ns", "max_ns", "mean_ns", "stddev_ns", "cpu_ns_per_op", "steal_pct", "busy_pct",
           "other_load_pct",
           "started_at", "finished_at")


def rows(run: StoredRun) -> list[dict[str, Any]]:
    """The CSV rows of ``run`` as dicts keyed by ``COLUMNS`` (None for empty cells)."""
    out = []
    for g in view.groups(run):
        for s in g.cells:
            for o in view.outcomes_of(run, s):
                r = o.result or {}
                c, rep = o.cell, o.repetition
                row: dict[str, Any] = dict.fromkeys(COLUMNS)
                row.update(run_id=run.id, configuration=c.configuration, backend=c.backend,
                           library=r.get("library"), library_version=r.get("library_version"),
                           label=c.label, op=c.op, size_bytes=c.size_bytes,
                           params=json.dumps(r.get("params") or c.worker_params(), sort_keys=True),
                           cpu=c.cpu, build=c.build, fips=int(c.fips), block=rep.block,
                           position=rep.position, attempt=rep.attempt, superseded=int(o.superseded),
                           disturbed=o.disturbed, status=o.status, reason=o.reason,
                           threads=r.get("threads"), timing=r.get("timing"), batch=r.get("batch"),
                           started_at=o.started_at, finished_at=o.finished_at)
                if o.ok and o.latency and o.throughput:
                    lat, tp = o.latency, o.throughput
                    row.update(ops=r.get("ops"), wall_ns=r.get("wall_ns"), ops_per_s=tp.ops_per_s,
                               bytes_per_s=tp.bytes_per_s, p50_ns=lat.p50_ns, p90_ns=lat.p90_ns,
                               p99_ns=lat.p99_ns, p999_ns=lat.p999_ns, min_ns=lat.min_ns,
                               max_ns=lat.max_ns, mean_ns=lat.mean_ns, stddev_ns=lat.stddev_ns,
                               cpu_ns_per_op=tp.cpu_ns_per_op, steal_pct=tp.steal_pct,
                               busy_pct=tp.busy_pct,
                               other_load_pct=other_load_pct(r, int(run.host.get("logical_cpus") or 1)))
                out.append(row)
    return out


def render(run: StoredRun) -> str:
    """The CSV report of ``run`` as text: a header of ``COLUMNS``, then ``rows(run)``."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in rows(run):
        w.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()
