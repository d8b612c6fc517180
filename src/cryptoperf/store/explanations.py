"""Explanations kept with their run: what ``cryptoperf explain`` (or a study with
``explain = true``) found about one comparison of a stored run — the attribution document and,
where a renderer was at hand, its differential flame graph — so that every report of the run
shows the same explanation instead of computing one of its own.

Table ``explanations``: one row per explained comparison (run, configuration, reference,
backend, operation label, size); explaining it again replaces the row. The table is made the
first time an explanation is saved (a store of format 4 written before it existed has none; an
older cryptoperf ignores it), so it needs no format change: reading a store without it gives no
explanations.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import sqlalchemy as sa
from sqlalchemy import Column, ForeignKey, Integer, Table, Text

from cryptoperf.store.db import METADATA, Store

explanations_table = Table(
    "explanations", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("configuration", Text, nullable=False),
    Column("reference", Text, nullable=False),
    Column("backend", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("size_bytes", Integer),
    Column("made_at", Text, nullable=False),               # UTC ISO 8601
    Column("doc_json", Text, nullable=False),              # the explain document (kind "explain")
    Column("flamegraph_svg", Text),                        # differential flame graph, or NULL
)

#: The document keys that name the comparison an explanation is of.
KEYS = ("configuration", "reference", "backend", "operation", "size_bytes")


def save(store: Store, run_id: int, doc: Mapping[str, Any], made_at: str, svg: str | None = None) -> None:
    """Keep ``doc`` (an explain document: ``configuration``, ``reference``, ``backend``,
    ``operation``, ``size_bytes`` and the attribution) and its flame graph ``svg`` with run
    ``run_id``, replacing an earlier explanation of the same comparison, in one transaction.
    Raises StoreError (one line) when the store cannot be written."""
    where = _where(run_id, doc)
    try:
        with store.writing() as conn:
            explanations_table.create(conn, checkfirst=True)
            conn.execute(sa.delete(explanations_table).where(*where))
            conn.execute(sa.insert(explanations_table).values(
                run_id=run_id, configuration=doc["configuration"], reference=doc["reference"],
                backend=doc["backend"], label=doc["operation"], size_bytes=doc.get("size_bytes"), made_at=made_at,
                doc_json=json.dumps(doc), flamegraph_svg=svg))
    except sa.exc.SQLAlchemyError as e:
        raise store.error(e, "write an explanation to") from None


def load(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Run ``run_id``'s explanations, oldest first: each the stored document plus ``made_at``
    and ``flamegraph_svg`` (None when none was rendered); [] when the store has none."""
    try:
        with store.engine.connect() as conn:
            if not sa.inspect(conn).has_table("explanations"):
                return []
            rows = conn.execute(sa.select(explanations_table).where(explanations_table.c.run_id == run_id)
                                .order_by(explanations_table.c.id)).mappings().all()
    except sa.exc.SQLAlchemyError as e:
        raise store.error(e, "read") from None
    return [{**json.loads(r["doc_json"]), "made_at": r["made_at"], "flamegraph_svg": r["flamegraph_svg"]}
            for r in rows]


def _where(run_id: int, doc: Mapping[str, Any]) -> list[Any]:
    t = explanations_table.c
    size = doc.get("size_bytes")
    return [t.run_id == run_id, t.configuration == doc["configuration"], t.reference == doc["reference"],
            t.backend == doc["backend"], t.label == doc["operation"],
            t.size_bytes.is_(None) if size is None else t.size_bytes == size]
