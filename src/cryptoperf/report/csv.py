"""The CSV report: one row per repetition — configuration × operation × size × block — with
units in the column names (``p50_ns``, ``ops_per_s``, ``process_cpu_ns_per_op``, ``steal_pct``). Rows
are grouped by cell (in first-seen order) and ordered by block; ``position`` is the place in the
block's random order. Repetitions that were not measured keep their row, with empty figures and
the reason; a disturbed repetition that was run again keeps its row with ``superseded`` 1
(``disturbed`` says why). Calibration repetitions are left out."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from cryptoperf.store import rows as rows_mod
from cryptoperf.report import view
from cryptoperf.store.stored_run import StoredRun

#: The columns, in order: the run, then ``rows.ROW_COLUMNS``. Durations are ns, rates per
#: second, shares in percent.
COLUMNS = ("run_id",) + rows_mod.ROW_COLUMNS


def rows(run: StoredRun) -> list[dict[str, Any]]:
    """The CSV rows of ``run`` as dicts keyed by ``COLUMNS`` (None for empty cells), each a
    ``rows.repetition_row`` with its ``params`` as JSON text and flags as 0/1."""
    cpus = int(run.host.get("logical_cpus") or 1)
    out = []
    for g in view.groups(run):
        for s in g.cells:
            for o in view.outcomes_of(run, s):
                row = rows_mod.repetition_row(o, cpus)
                row.update(run_id=run.id, params=json.dumps(row["params"], sort_keys=True), fips=int(row["fips"]),
                           superseded=int(row["superseded"]))
                out.append({k: row[k] for k in COLUMNS})
    return out


def render(run: StoredRun) -> str:
    """The CSV report of ``run`` as text: a header of ``COLUMNS``, then ``rows(run)``."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in rows(run):
        w.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()
