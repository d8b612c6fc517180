"""Extension attribution: which CPU extension groups an operation depends on, and how much each
alone is worth — with the verdict machinery, not single runs.

A study is written for one operation on one backend: the baseline with every extension the CPU
has, and one configuration per CPU mask the worker announces (``hello``'s ``cpu_masks``: AES-NI
and carry-less multiply, SHA-NI, AVX2, AVX-512, the big-number extensions BMI2/ADX/IFMA), each
masking one group alone; masks that clear nothing this CPU has are left out, said as such. It runs
as any study does (randomised blocks, fresh workers, masks verified from the vector the library
reports, Bonferroni over the masks), and each mask's verdict on the p50 latency says whether the
operation depends on that group: ``slower`` when masking it slows the operation. A group's share
is its slowdown (log scale) over the sum of the slowdowns of the groups it depends on.
Interactions (two groups that matter only together, or overlap) are not measured: each mask is
alone against the baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

#: What an extensions study measures, per repetition.
SECONDS, WARMUP_S = 0.3, 0.05


@dataclass(frozen=True)
class MaskRow:
    """One extension group: the mask's ``name``, what it ``clears`` of this CPU's flags, the
    change of p50 latency masked (``ratio`` with ``low``/``high``, masked ÷ all), the verdict's
    ``kind`` and text, and ``share`` of the slowdown among the groups the operation depends on
    (None for a group it does not depend on)."""

    name: str
    clears: tuple[str, ...]
    ratio: float
    low: float
    high: float
    kind: str
    text: str
    share: float | None

    def as_dict(self) -> dict[str, Any]:
        """Every field, ``clears`` as a list."""
        return {**self.__dict__, "clears": list(self.clears)}


def masks_to_try(cpu_masks: Sequence[Mapping[str, Any]], flags: Mapping[str, bool]) -> tuple[list[dict], list[str]]:
    """The announced masks (but baseline) that clear at least one flag this CPU has
    (``flags``: capability → present), each with ``present``: those flags; and the names of the
    masks left out because they clear nothing here."""
    use, skipped = [], []
    for m in cpu_masks:
        if m["name"] == "baseline":
            continue
        present = [f for f in m.get("clears", []) if flags.get(f)]
        if present:
            use.append({**m, "present": present})
        else:
            skipped.append(m["name"])
    return use, skipped


def study_text(op: str, backend: str, masks: Sequence[Mapping[str, Any]], blocks: int,
               size_bytes: int | None = None) -> str:
    """The study of ``op`` on ``backend``: baseline ``all`` and one configuration per mask."""
    lines = ['[study]', f'name = "extensions-{op}-{backend}"',
             f'description = "{op} on {backend}: every CPU extension group masked alone"',
             'baseline = "all"', f'backends = ["{backend}"]', f'repetitions = {blocks}', f'seconds = {SECONDS}',
             f'warmup_s = {WARMUP_S}',
             'power_note = "it asks which extension groups an operation depends on, large effects; the report names '
             'the blocks that would decide a small one"', '',
             '[[configuration]]', 'name = "all"', 'description = "every extension the CPU has"', '']
    for m in masks:
        lines += ['[[configuration]]', f'name = "{m["name"]}"', f'cpu = "{m["name"]}"', '']
    lines += ['[[operation]]', f'op = "{op}"']
    if size_bytes is not None:
        lines.append(f'sizes = [{size_bytes}]')
    return "\n".join(lines) + "\n"


def rows(deltas: Sequence[Any], masks: Sequence[Mapping[str, Any]]) -> list[MaskRow]:
    """One ``MaskRow`` per mask with a decided or undecided comparison in ``deltas`` (a run's
    ``Delta``s against ``all``), largest slowdown first."""
    by_name = {m["name"]: m for m in masks}
    found = [d for d in deltas if d.configuration in by_name and d.latency is not None and d.verdict is not None]
    slow = [d for d in found if d.verdict.kind == "slower"]
    total = sum(math.log(d.latency.ratio) for d in slow)
    out = [MaskRow(d.configuration, tuple(by_name[d.configuration]["present"]), d.latency.ratio, d.latency.low,
                   d.latency.high, d.verdict.kind, d.verdict.text,
                   math.log(d.latency.ratio) / total if d in slow and total > 0 else None) for d in found]
    return sorted(out, key=lambda r: -r.ratio)
