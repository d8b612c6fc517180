"""Which repetitions the host disturbed, and which only shared a constant load with their block.

Each repetition's worker reads ``/proc/stat`` around its window: steal (CPU time the hypervisor
took) and other load (busy CPUs beyond the worker's own threads, ``hostinfo.other_load_pct``).
A repetition with more steal than the study's ``max_steal_pct`` is disturbed. Other load is
judged against the host's **steady level**, not against zero: a load that stays the same is
seen by every configuration of a block, so a paired comparison (log ratio within a block)
shares it, and re-running every repetition under it buys nothing — the re-run sees it too. Only
a repetition whose other load rises above the steady level by more than ``max_other_load_pct``
(a spike: another process starting, a burst) is disturbed and run again. On a quiet host the
level is about 0 and the rule is the plain limit.

The steady level is the (lower) median of the other load over the last ``WINDOW`` judged
repetitions — seeded, on this machine, with the load measured just before the study (the host
checks' ``/proc/stat`` window) — when more than half of those values lie within
``max_other_load_pct`` of it; otherwise there is no steady level and the limit applies from
zero. A spike therefore never becomes the level by itself, and a load that starts mid-study
becomes the level after a few repetitions (the first ones under it are re-run, as transient).
A load that drops is not a disturbance (a re-run cannot bring it back). The same level is also
kept per group of cells (``Cell.group``: one operation at one load level, across
configurations), and a repetition is disturbed only above both its group's level and the
study's: what a neighbour gets depends on what the worker leaves it — a ``nice``'d busy loop gets
a whole CPU of two beside a one-connection cell and almost nothing beside a four-connection one —
so a level learnt on one group says nothing of another's.

``Limits`` is what a study sets (picklable: the Ray executor sends it to its nodes) and
``Limits.rule`` makes the callable both executors give ``run.local.execute`` as
``disturbed``; one rule per sequence of repetitions on one machine (a study here, a block on a
Ray node), since it remembers their loads. ``constant_load`` tells, from stored outcomes alone,
how many analysed repetitions ran above the limit beside a steady load and were kept.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from cryptoperf import hostinfo

if TYPE_CHECKING:  # pragma: no cover
    from cryptoperf.model import Outcome
    from cryptoperf.result import WorkerResult
    from cryptoperf.study import Study

#: How many recent repetitions' other load the steady level is taken from.
WINDOW = 5


@dataclass(frozen=True)
class Limits:
    """A study's disturbance limits, and the other load measured before it.

    Attributes:
        max_steal_pct: steal above this share of the CPUs (%) disturbs a repetition.
        max_other_load_pct: other load above the steady level by more than this share of all
            CPUs (%) disturbs a repetition; also the band within which loads count as steady.
        level_pct: other load (% of all CPUs) measured on this machine just before the study,
            the first value of the steady level's window; None when not measured (a Ray node).
    """

    max_steal_pct: float
    max_other_load_pct: float
    level_pct: float | None = None

    @classmethod
    def of(cls, study: "Study", level_pct: float | None = None) -> "Limits":
        """The limits ``study`` sets, with the other load measured before it (or None)."""
        return cls(study.max_steal_pct, study.max_other_load_pct, level_pct)

    def busy(self) -> bool:
        """True when the load measured before the study is above ``max_other_load_pct``: the
        host was already busy (``Busy``)."""
        return self.level_pct is not None and self.level_pct > self.max_other_load_pct

    def rule(self, logical_cpus: int) -> "Rule":
        """A fresh ``Rule`` for repetitions on a machine of ``logical_cpus``."""
        return Rule(self, logical_cpus)


@dataclass(frozen=True)
class Busy:
    """The host was already busy when a study started: the other load measured just before it
    (``hostinfo.load_before``) above the study's ``max_other_load_pct``.

    Attributes:
        level_pct: that other load, % of all the CPUs.
        cpus: the host's logical CPUs (``logical_cpus``), None when unknown.
        window_s: how long it was measured over, s.
    """

    level_pct: float
    cpus: int | None
    window_s: float

    @property
    def cpus_used(self) -> float | None:
        """The other load in CPUs (``level_pct`` of ``cpus``), None when ``cpus`` is unknown."""
        return self.level_pct * self.cpus / 100 if self.cpus else None

    @classmethod
    def of(cls, study: "Study", host: Mapping[str, Any]) -> "Busy | None":
        """Whether ``host`` (a fingerprint carrying ``load_before``) was busy for ``study``;
        None when it was not, or when no load was measured before it."""
        before = host.get("load_before") or {}
        limits = Limits.of(study, before.get("other_load_pct"))
        if not limits.busy():
            return None
        return cls(float(limits.level_pct), logical_cpus(host), float(before.get("window_s", 0)))


class Rule:
    """Why the host disturbed a measured outcome ('' if it did not), by ``Limits``, remembering
    the other load of the outcomes it judged (``steady_level``). Call it once per measured,
    non-calibration outcome, in the order they ran (``run.local.execute`` does)."""

    def __init__(self, limits: Limits, logical_cpus: int):
        self.limits = limits
        self.logical_cpus = logical_cpus
        self.recent: deque[float] = self._window()
        self.by_group: dict[Any, deque[float]] = {}

    def _window(self) -> deque[float]:
        """A new window of recent loads, seeded with the load measured before the study."""
        window: deque[float] = deque(maxlen=WINDOW)
        if self.limits.level_pct is not None:
            window.append(float(self.limits.level_pct))
        return window

    def steady_level(self, group: Any = None) -> float | None:
        """The steady other load (% of all CPUs) of the recent repetitions (of ``group``'s, when
        given): the lower median of their loads when more than half of them lie within
        ``max_other_load_pct`` of it; None otherwise (or with none)."""
        recent = self.recent if group is None else self.by_group.get(group, ())
        if not recent:
            return None
        level = statistics.median_low(recent)
        near = sum(1 for x in recent if abs(x - level) <= self.limits.max_other_load_pct)
        return float(level) if 2 * near > len(recent) else None

    def __call__(self, outcome: "Outcome") -> str:
        """'' or why (steal; other load above the steady level plus the limit), for ``outcome``,
        judged with its cell's group (``Cell.group``); its other load then joins the recent loads."""
        return self.judge(outcome.result, outcome.repetition.cell.group)

    def judge(self, result: "WorkerResult | None", group: Any = None) -> str:
        """``__call__`` on a worker result (None: not disturbed, nothing remembered) of a cell of
        ``group``.

        Other load is judged against two steady levels, and disturbs only above both (each plus
        the limit): the study's recent repetitions', and those of the repetition's own group.
        The group's matters because what a neighbour gets depends on what the worker leaves it:
        a ``nice``'d busy loop took a whole CPU of two beside one-connection cells and almost
        nothing beside four-connection ones, so one study-wide level called every
        one-connection repetition after a four-connection one a spike — and its re-run saw the
        same. The group's window starts from the load measured before the study, as the
        study's does."""
        if result is None:
            return ""
        lim = self.limits
        why = []
        total, steal = result.total_ticks, result.steal_ticks
        if total and steal is not None and 100.0 * steal / total > lim.max_steal_pct:
            why.append(f"steal {100.0 * steal / total:.1f} % > {lim.max_steal_pct:g} %")
        other = hostinfo.other_load_pct(result, self.logical_cpus)
        if other is not None:
            if group is not None and group not in self.by_group:
                self.by_group[group] = self._window()
            overall = self.steady_level() or 0.0
            own = self.steady_level(group) or 0.0 if group is not None else overall
            level = max(overall, own)
            if other > level + lim.max_other_load_pct:
                why.append(f"other load {other:.0f} % of the CPUs > {lim.max_other_load_pct:g} %" if level < 1 else
                           f"other load {other:.0f} % of the CPUs, {other - level:.0f} points above its "
                           f"steady {level:.0f} % (> {lim.max_other_load_pct:g})")
            self.recent.append(other)
            if group is not None:
                self.by_group[group].append(other)
        return "; ".join(why)


@dataclass(frozen=True)
class ConstantLoad:
    """Analysed repetitions that ran above the other-load limit beside a steady load and were
    kept (not disturbed: their block shared the load).

    Attributes:
        repetitions: how many; level_pct: the median other load over them (% of all CPUs);
        cpus: that level in CPUs of the machine (level × logical CPUs / 100; the first
        machine's when a Ray run had several).
    """

    repetitions: int
    level_pct: float
    cpus: float


def constant_load(outcomes: Iterable["Outcome"], max_other_load_pct: float,
                  host: Mapping[str, Any] | None = None) -> ConstantLoad | None:
    """The analysed (measured, not calibration, not superseded), undisturbed repetitions whose
    other load was above ``max_other_load_pct``: those ``Rule`` kept because a steady load was
    shared by their block. Read from the stored results alone (each outcome's ``host``, else the
    run's ``host``, gives the logical CPUs). None when there are none."""
    loads, cpus = [], None
    for o in outcomes:
        if not o.ok or o.superseded or o.disturbed or o.repetition.calibration or o.result is None:
            continue
        n = logical_cpus(o.host or host)
        other = hostinfo.other_load_pct(o.result, n) if n else None
        if other is not None and other > max_other_load_pct:
            loads.append(other)
            cpus = cpus or n
    if not loads:
        return None
    level = statistics.median(loads)
    return ConstantLoad(len(loads), level, level * (cpus or 0) / 100.0)


def logical_cpus(host: Mapping[str, Any] | None) -> int | None:
    """The logical CPUs of a host fingerprint (``hostinfo.fingerprint``): the worker's count (its
    hello), else Python's; None when neither is there."""
    if not host:
        return None
    worker = host.get("worker_cpu") or {}
    n = worker.get("logical_cpus") if isinstance(worker, Mapping) else None
    return int(n or host.get("logical_cpus") or 0) or None
