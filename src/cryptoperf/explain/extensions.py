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

from cryptoperf import stats

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


#: The configuration that masks the groups at once.
TOGETHER = "together"


def together(masks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of ``masks`` to mask at once (``masks_to_try``'s): each but those whose present
    flags another mask clears too (no-avx512 inside no-avx2); [] when fewer than two remain."""
    keep = [m for m in masks if not any(o is not m and set(m["present"]) < set(o["present"]) for o in masks)]
    return [m["name"] for m in keep] if len(keep) >= 2 else []


@dataclass(frozen=True)
class Interaction:
    """Whether the groups' costs add up: ``masks`` masked at once; ``together`` (p50 latency
    ratio, masked at once ÷ all) and ``alone`` (the product of each mask's own ratio, paired
    blocks); ``ratio`` = together ÷ alone with ``low``/``high`` at ``level``; ``kind``:
    ``add up`` (inside ± ``margin_pct``), ``more together``, ``less together`` or
    ``inconclusive``; ``blocks`` used."""

    masks: tuple[str, ...]
    together: float
    alone: float
    ratio: float
    low: float | None
    high: float | None
    level: float
    margin_pct: float
    kind: str
    blocks: int

    def as_dict(self) -> dict[str, Any]:
        """Every field, ``masks`` as a list."""
        return {**self.__dict__, "masks": list(self.masks)}

    @property
    def text(self) -> str:
        """One sentence saying what the interaction is."""
        span = (f"{self.ratio:.3g}× [{self.low:.3g}, {self.high:.3g}]" if self.low is not None
                else f"{self.ratio:.3g}× (no interval)")
        head = (f"masked together ({' + '.join(self.masks)}): {self.together:.3g}× slower; each alone, multiplied: "
                f"{self.alone:.3g}×; together ÷ alone {span}")
        return head + {
            "add up": f": the groups' costs add up (within ±{self.margin_pct:g} %)",
            "more together": ": they do not add up — together they cost more than each alone says (one group's "
                             "code stands in for another's when only one is masked)",
            "less together": ": they do not add up — together they cost less than each alone says (the groups "
                             "serve one code path, so masking one already takes it away, or the masks overlap: a "
                             "capability both clear is counted in each)",
            "inconclusive": f": whether they add up is not decided at this noise (more --blocks would decide it)",
        }[self.kind]


def interaction(summaries: Mapping[str, Any], masks: Sequence[str], level: float,
                margin_pct: float) -> Interaction | None:
    """The ``Interaction`` of ``masks`` from an extensions run's ``summaries`` (cell key →
    ``CellSummary``, one operation: configurations ``all``, each mask and ``together``); None
    when a side did not measure or fewer than 3 blocks ran every configuration."""
    by_config = {s.cell.configuration: s for s in summaries.values()}
    names = ["all", TOGETHER, *masks]
    if any(n not in by_config or not by_config[n].p50_by_block_ns for n in names):
        return None
    blocks = sorted(set.intersection(*(set(by_config[n].p50_by_block_ns) for n in names)))
    if len(blocks) < 3:
        return None
    p = {n: by_config[n].p50_by_block_ns for n in names}
    logs = {n: [math.log(p[n][b] / p["all"][b]) for b in blocks] for n in [TOGETHER, *masks]}
    x = [logs[TOGETHER][i] - sum(logs[m][i] for m in masks) for i in range(len(blocks))]
    est = stats.mean_interval(x, level)
    margin = math.log(1 + margin_pct / 100)
    if est.low is None or est.high is None:
        kind = "inconclusive"
    elif -margin <= est.low and est.high <= margin:
        kind = "add up"
    elif est.low > 0:
        kind = "more together"
    elif est.high < 0:
        kind = "less together"
    else:
        kind = "inconclusive"
    mean = lambda v: math.exp(sum(v) / len(v))  # noqa: E731
    return Interaction(tuple(masks), mean(logs[TOGETHER]), math.exp(sum(sum(logs[m]) / len(blocks) for m in masks)),
                       math.exp(est.value), None if est.low is None else math.exp(est.low),
                       None if est.high is None else math.exp(est.high), level, margin_pct, kind, len(blocks))


def study_text(op: str, backend: str, masks: Sequence[Mapping[str, Any]], blocks: int,
               size_bytes: int | None = None) -> str:
    """The study of ``op`` on ``backend``: baseline ``all``, one configuration per mask, and
    ``together`` (``together(masks)`` joined) when two or more can be masked at once."""
    lines = ['[study]', f'name = "extensions-{op}-{backend}"',
             f'description = "{op} on {backend}: every CPU extension group masked alone"',
             'baseline = "all"', f'backends = ["{backend}"]', f'repetitions = {blocks}', f'seconds = {SECONDS}',
             f'warmup_s = {WARMUP_S}',
             'power_note = "it asks which extension groups an operation depends on, large effects; the report names '
             'the blocks that would decide a small one"', '',
             '[[configuration]]', 'name = "all"', 'description = "every extension the CPU has"', '']
    for m in masks:
        lines += ['[[configuration]]', f'name = "{m["name"]}"', f'cpu = "{m["name"]}"', '']
    joint = together(masks)
    if joint:
        lines += ['[[configuration]]', f'name = "{TOGETHER}"', f'cpu = "{"+".join(joint)}"',
                  'description = "the groups masked at once: do their costs add up?"', '']
    lines += ['[[operation]]', f'op = "{op}"']
    if size_bytes is not None:
        lines.append(f'sizes = [{size_bytes}]')
    return "\n".join(lines) + "\n"


def shared_flags(rows: Sequence[MaskRow]) -> list[str]:
    """The flags every group the operation depends on clears (``slower`` rows, two or more),
    in the first one's order: where groups overlap, the likelier cause; [] otherwise."""
    slow = [r for r in rows if r.kind == "slower"]
    if len(slow) < 2:
        return []
    common = set(slow[0].clears).intersection(*(set(r.clears) for r in slow[1:]))
    return [f for f in slow[0].clears if f in common]


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
