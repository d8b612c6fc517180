"""``cryptoperf gate``: a regression gate that runs both builds in one study.

A pipeline that can build the baseline and the candidate (two worker binaries of its own, or
two libraries) compares them best side by side: one study with a configuration per build, every
randomised block running both, each comparison paired block by block. Whatever shifts a whole
job — another runner, its CPU frequency, a neighbour — shifts both sides of every block alike
and cancels, which no comparison of runs made in different jobs can do. The study is an
ordinary one (``gate_study_text`` writes it; it is stored and reported like any other):
sequential (``until = "decided"``), so an unchanged build stops once every operation is
equivalent within the margin and a regression once it is decided, with the looks adjusted for.

The gate fails on the verdicts ``compare.failing`` fails on ("slower" beyond the margin, and
with ``undecided`` every inconclusive comparison), and states the smallest slowdown it would
have caught 80 % of the time at the noise it measured (``detectable_change``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from cryptoperf import compare, cpumask, stats
from cryptoperf.errors import UsageError
from cryptoperf.model import Delta
from cryptoperf.study import Study, parse

#: The two configurations of a gate's study.
BASELINE, CANDIDATE = "baseline", "candidate"
#: The design ``cryptoperf gate`` runs by default (docs/ci-gate.md; sized by
#: ``cryptoperf.simulate.gate``): blocks at the first look, the most blocks, and the budget of
#: one repetition (s), for 12 operations within about 10 minutes of a 2-core runner.
DEFAULT_BLOCKS = 6
DEFAULT_MAX_BLOCKS = 18
DEFAULT_SECONDS = 0.3
DEFAULT_WARMUP_S = 0.1


@dataclass(frozen=True)
class GateDesign:
    """What a gate measures and how.

    Attributes:
        baseline_worker, candidate_worker: the two worker binaries (paths).
        backends: backends both run (default ``openssl``).
        ops: operation names; sizes: message sizes (bytes) for those that take one.
        params: worker parameters for every operation that takes them (``digest``...).
        blocks, max_blocks: blocks at the first look and at most (sequential when larger).
        seconds, warmup_s: the measuring budget and warm-up of one repetition (s).
        margin_pct: the equivalence margin (%).
        candidate_cpu: a CPU capability mask the candidate's workers run under
            (``cpumask.NAMES``): a candidate that lost a CPU extension, to check that the gate
            sees what that costs.
        name: the study's name (stored, and in the JSON file's name).
    """

    baseline_worker: str
    candidate_worker: str
    backends: tuple[str, ...] = ("openssl",)
    ops: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    blocks: int = DEFAULT_BLOCKS
    max_blocks: int = DEFAULT_MAX_BLOCKS
    seconds: float = DEFAULT_SECONDS
    warmup_s: float = DEFAULT_WARMUP_S
    margin_pct: float = stats.DEFAULT_MARGIN_PCT
    candidate_cpu: str = cpumask.BASELINE
    name: str = "gate"


def _toml(value: Any) -> str:
    """A TOML literal for a string, number or list of them."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def gate_study_text(d: GateDesign, takes_message: Mapping[str, bool]) -> str:
    """The study file of gate ``d``: configurations ``baseline`` and ``candidate``, each with its
    own ``worker``, on ``d.backends``, one operation per op (with ``d.sizes`` where
    ``takes_message[op]``), sequential from ``d.blocks`` to ``d.max_blocks`` blocks. Raises
    UsageError for a design without operations or with fewer than 3 blocks."""
    if not d.ops:
        raise UsageError("gate needs at least one --op (e.g. --op rsa2048-sign --op aes-128-gcm-seal --size 16k)")
    if d.blocks < stats.MIN_BLOCKS or d.max_blocks < d.blocks:
        raise UsageError(f"--blocks {d.blocks} --max-blocks {d.max_blocks}: a gate needs at least "
                         f"{stats.MIN_BLOCKS} blocks, and --max-blocks at least --blocks")
    lines = ["[study]", f"name = {_toml(d.name)}", f"baseline = {_toml(BASELINE)}",
             f"backends = {_toml(list(d.backends))}", f"repetitions = {d.blocks}",
             f"seconds = {d.seconds!r}", f"warmup_s = {d.warmup_s!r}", f"margin_pct = {d.margin_pct!r}"]
    if d.max_blocks > d.blocks:
        lines += ['until = "decided"', f"max_repetitions = {d.max_blocks}"]
    for name, worker in ((BASELINE, d.baseline_worker), (CANDIDATE, d.candidate_worker)):
        lines += ["", "[[configuration]]", f"name = {_toml(name)}", f"worker = {_toml(worker)}"]
        if name == CANDIDATE and d.candidate_cpu != cpumask.BASELINE:
            lines.append(f"cpu = {_toml(d.candidate_cpu)}")
        if d.params:
            lines.append("params = { " + ", ".join(f"{k} = {_toml(v)}" for k, v in d.params.items()) + " }")
    for op in d.ops:
        lines += ["", "[[operation]]", f"op = {_toml(op)}"]
        if d.sizes and takes_message.get(op, False):
            lines.append(f"sizes = {_toml(list(d.sizes))}")
    return "\n".join(lines) + "\n"


def gate_study(d: GateDesign, takes_message: Mapping[str, bool], where: str | os.PathLike) -> Study:
    """The parsed study of gate ``d`` (``gate_study_text``), named as if it were a file in the
    directory ``where``. Raises UsageError for a worker path that is not an executable file
    (before any worker runs), StudyError as a study file would."""
    for flag, path in (("--baseline-worker", d.baseline_worker), ("--candidate-worker", d.candidate_worker)):
        p = Path(path)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise UsageError(f"{flag} {path}: not an executable file"
                             + ("" if p.exists() else " (nothing is there)") + "; give the path of a built worker")
    text = gate_study_text(d, takes_message)
    return parse(text, str(Path(where) / f"{d.name}.toml"))


def detectable_change(d: Delta, comparisons: int, looks: int = 1, power: float = stats.DEFAULT_POWER) -> float | None:
    """The smallest slowdown (a fraction: 0.05 for 5 %) that the comparison ``d`` would call
    "slower" with probability ``power`` at the noise it measured, with as many blocks as it
    used and its intervals adjusted over ``comparisons`` × ``looks`` (``stats.smallest_effect``):
    the per-block log-ratio standard deviation is read back from its decisive interval (whose
    half-width is t × sd / √n). None without an interval of 3 blocks or more; ``math.inf``
    when no slowdown up to ×11 would be caught that often."""
    ci = d.decisive
    if ci is None or ci.n < stats.MIN_BLOCKS or ci.low <= 0:
        return None
    q = stats.t_quantile(ci.level, ci.n - 1)
    sd = math.log(ci.high / ci.low) / (2.0 * q) * math.sqrt(ci.n)
    if sd <= 0:
        return 0.0
    cv = math.sqrt(math.expm1(sd * sd / 2.0))  # a repetition's CV whose pair has this spread
    return stats.smallest_effect(ci.n, cv, comparisons, looks, target=power)


@dataclass(frozen=True)
class GateOutcome:
    """What a gate decided.

    Attributes:
        failing: the comparisons that fail it (``compare.failing``).
        undecided: those it could not decide (``compare.undecided``).
        detectable: (delta, smallest slowdown it would catch 80 % of the time, a fraction) for
            each comparison with an interval, the largest first.
    """

    failing: list[Delta]
    undecided: list[compare.Undecided]
    detectable: list[tuple[Delta, float]]

    @property
    def passed(self) -> bool:
        """True when no comparison fails the gate."""
        return not self.failing

    def detectable_text(self) -> str:
        """One sentence: the smallest slowdown of any one operation this gate would have caught
        80 % of the time, and the operation that bounds it; '' without an interval."""
        if not self.detectable:
            return ""
        d, worst = self.detectable[0]
        amount = "no slowdown up to ×11" if math.isinf(worst) else f"a slowdown of {worst * 100:.1f} %"
        return (f"detectable change: at the noise measured, {amount} in any one of its "
                f"{len(self.detectable)} comparison{'s' if len(self.detectable) != 1 else ''} fails this gate "
                f"{stats.DEFAULT_POWER * 100:.0f} % of the time (bounded by {d.backends} {d.label}, "
                f"{d.blocks} blocks)")

    def as_dict(self) -> dict[str, Any]:
        """``passed``, ``failing`` (cells), ``undecided`` (``Undecided.as_dict``),
        ``detectable_change_pct`` (per cell, and ``worst``)."""
        return {"passed": self.passed,
                "failing": [f"{d.backend}/{d.label}/{d.size_bytes}/{d.configuration}" for d in self.failing],
                "undecided": [u.as_dict() for u in self.undecided],
                "detectable_change_pct": {
                    "worst": (None if not self.detectable else
                              None if math.isinf(self.detectable[0][1]) else self.detectable[0][1] * 100),
                    "by_cell": {f"{d.backend}/{d.label}/{d.size_bytes}/{d.configuration}":
                                (None if math.isinf(x) else x * 100) for d, x in self.detectable}}}


def decide(deltas: Sequence[Delta], fail_on: Sequence[str], comparisons: int, looks: int) -> GateOutcome:
    """The gate's outcome from a study's ``deltas`` (``fail_on`` as ``compare.failing``;
    ``comparisons`` and ``looks`` as the study adjusted its intervals for)."""
    found = [(d, x) for d in deltas if (x := detectable_change(d, comparisons, looks)) is not None]
    found.sort(key=lambda p: p[1], reverse=True)
    return GateOutcome(compare.failing(deltas, fail_on), compare.undecided(deltas), found)
