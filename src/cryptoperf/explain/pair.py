"""Explaining one comparison of a stored run: the profiled blocks of its two cells, the
attribution, the flame graph, and the document every output of it serialises (``explain``'s
table and ``--json``, and the reports of the run, which read it back from the store).

``explain_pair`` is what ``cryptoperf explain`` runs; ``explain_decided`` is what a study with
``explain = true`` runs after its last block: every decided comparison it can explain.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

from cryptoperf import __version__, stats
from cryptoperf.explain import attribution, perf, profile, stacks
from cryptoperf.model import OK, Cell
from cryptoperf.store.db import FORMAT_VERSION

#: Blocks profiled when not told.
DEFAULT_BLOCKS = 5
#: Blocks profiled per comparison by a study's ``explain = true`` (each costs two repetitions).
STUDY_BLOCKS = 3


def measured(run, ref: Cell, cell: Cell, level: float = 0.95) -> dict | None:
    """What the stored ``run``'s own repetitions of the pair measured, in the profile's terms:
    per block, each side's CPU per operation of every process the profile follows
    (``profile.window_cpu_ns``: the worker's measuring threads, and a workload's server side in
    a process of its own), B − A; their mean with a paired t interval at ``level`` (ns), and
    each side's mean; None with fewer than 2 blocks that measured both."""
    per: dict[str, dict[int, float]] = {ref.key: {}, cell.key: {}}
    for o in run.outcomes:
        if (o.cell.key in per and o.status == OK and not o.superseded and o.repetition.block > 0
                and o.result is not None and o.result.ops):
            per[o.cell.key][o.repetition.block] = profile.window_cpu_ns(o.result) / o.result.ops
    blocks = sorted(set(per[ref.key]) & set(per[cell.key]))
    if len(blocks) < 2:
        return None
    change = stats.mean_interval([per[cell.key][b] - per[ref.key][b] for b in blocks], level)
    return {"change_ns_per_op": change.value, "low": change.low, "high": change.high, "level": level,
            "blocks": len(blocks), "a_ns_per_op": sum(per[ref.key][b] for b in blocks) / len(blocks),
            "b_ns_per_op": sum(per[cell.key][b] for b in blocks) / len(blocks)}


def explain_pair(run, ref: Cell, cell: Cell, workers: dict, settings, blocks: int = DEFAULT_BLOCKS,
                 progress: Callable[[int, int, Cell], None] | None = None) -> tuple[dict[str, Any], str | None]:
    """Profile ``blocks`` blocks of ``ref`` and ``cell`` (cells of the stored ``run``, run by
    ``workers`` — build → worker path — with the study's ``settings``) and explain the change:
    the explain document (``kind`` "explain": the attribution — the profiles' shares on the
    study's own scale, ``scale``: each side's factor, so that the parts add up to what the study
    measured (``measured``; the profiled repetitions' own scale when the run has too few
    blocks of the pair) —, the sampling cost, whether a flame graph was drawn and why not) and
    the differential flame graph's SVG (None without inferno). Raises perf.PerfUnavailable,
    profile.ProfileError (one line each)."""
    profiled = profile.run_blocks(ref, cell, blocks, workers, settings, seed=run.id, progress=progress)
    study = measured(run, ref, cell)
    scale = (1.0, 1.0) if study is None else attribution.study_scale(profiled.pairs, study["a_ns_per_op"],
                                                                      study["b_ns_per_op"])
    att = attribution.attribute(profiled.pairs, scale=scale)
    rates = {k: s.ops_per_s for k, s in run.analysis.summaries.items() if s.ops_per_s}
    svg = flamegraph(profiled, ref, cell, scale)
    doc = {"format_version": FORMAT_VERSION, "kind": "explain", "cryptoperf_version": __version__, "run": run.id,
           "configuration": cell.configuration, "reference": ref.configuration, "operation": cell.label,
           "op": cell.op, "backend": cell.backend, "size_bytes": cell.size_bytes, "attribution": att.as_dict(),
           "scale": {"reference": scale[0], "configuration": scale[1], "to": "profiled" if study is None else "study"},
           "sampling_cost": sampling_cost(scale) if study is not None else profile.overhead(profiled, rates, ref, cell),
           "sampling_cost_from": "cpu_per_op" if study is not None else "ops_per_s", "measured": study,
           "flamegraph": svg is not None, "flamegraph_missing": None if svg is not None else
           (stacks.missing() or "no call stacks were recorded")}
    return doc, svg


def sampling_cost(scale: tuple[float, float]) -> float:
    """What sampling cost, from each side's scale to the study (``attribution.study_scale``):
    how much more CPU per operation the profiled repetitions took than the study's own, the
    mean over the two sides (0.10: 10 % more)."""
    return (1 / scale[0] + 1 / scale[1]) / 2 - 1


def flamegraph(profiled: profile.Profiled, ref: Cell, cell: Cell,
               scale: tuple[float, float] = (1.0, 1.0)) -> str | None:
    """The differential flame graph of the profiled blocks (``stacks.draw``), each side scaled
    as the attribution is, or None."""
    if stacks.missing() is not None:
        return None
    a = stacks.mean([stacks.ns_per_op(pa.stacks, pa.ns_per_op * scale[0]) for pa, _ in profiled.pairs])
    b = stacks.mean([stacks.ns_per_op(pb.stacks, pb.ns_per_op * scale[1]) for _, pb in profiled.pairs])
    what = cell.label + (f" ({cell.size_bytes} B)" if cell.size_bytes else "")
    with tempfile.TemporaryDirectory(prefix="cryptoperf-flamegraph-") as tmp:
        return stacks.draw(a, b, f"{what} on {cell.backend}: {cell.configuration} against {ref.configuration}",
                           f"width: CPU per operation in {cell.configuration}; red: more than in "
                           f"{ref.configuration}, blue: less ({len(profiled.pairs)} profiled blocks)", Path(tmp))


def decided_pairs(run, cells) -> list[tuple[Cell, Cell]]:
    """The (reference, cell) pairs of ``run``'s decided (slower or faster) comparisons that
    explain can profile (no server under test), from the prepared ``cells``."""
    out = []
    for d in run.analysis.deltas:
        if d.verdict is None or d.verdict.kind not in ("slower", "faster"):
            continue
        cell = next((c for c in cells if c.configuration == d.configuration and c.label == d.label
                     and c.backend == d.backend and c.size_bytes == d.size_bytes), None)
        ref = next((c for c in cells if c.configuration == d.baseline and c.label == d.label
                    and c.backend == d.backend and c.size_bytes == d.size_bytes), None)
        if cell is not None and ref is not None and cell.server is None and ref.server is None:
            out.append((ref, cell))
    return out


def explain_decided(run, prepared, store, console, blocks: int = STUDY_BLOCKS) -> list[dict[str, Any]]:
    """``explain = true``: explain each of ``run``'s decided comparisons (``decided_pairs``) and
    keep each explanation in ``store`` with the run; returns them as ``StoredRun.explanations``
    holds them. When perf cannot sample here, or a worker build cannot tell perf its window,
    one line on ``console`` says so and nothing is explained; a comparison whose profiled
    repetition fails is left out with one line."""
    from cryptoperf.run.local import utc_now
    from cryptoperf.store import explanations
    pairs = decided_pairs(run, prepared.cells)
    if not pairs:
        return []
    why = perf.unavailable()
    if why is not None:
        console.print(f"explain = true: nothing explained: {why}")
        return []
    workers = {name: path for name, (path, _) in prepared.workers.items()}
    out = []
    for i, (ref, cell) in enumerate(pairs, 1):
        console.print(f"explaining {i}/{len(pairs)}: {cell.label} on {cell.backend}, {cell.configuration} "
                      f"against {ref.configuration} ({blocks} profiled blocks)", highlight=False)
        try:
            profile.check_ready(ref, cell, workers)
            doc, svg = explain_pair(run, ref, cell, workers, prepared.settings, blocks)
        except (perf.PerfUnavailable, profile.ProfileError) as e:
            console.print(f"explain = true: {cell.label} on {cell.backend} not explained: {e}", highlight=False)
            continue
        made = utc_now()
        explanations.save(store, run.id, doc, made, svg)
        out.append({**doc, "made_at": made, "flamegraph_svg": svg})
    return out
