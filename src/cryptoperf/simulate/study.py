"""Simulated studies: how often do cryptoperf's verdicts lie?

A verdict is only worth acting on if its error rates are known. This module generates
synthetic repetition values with a known truth and feeds them through the project's own
analysis (``analysis.deltas``, hence ``stats.paired_log_ratio``, ``stats.adjusted_level``,
``stats.decide``) exactly as a stored run is analysed, then counts:

- **false verdicts**: "x % slower/faster" when the truth is no change (A/A), per comparison
  and per study (family-wise, at least one false verdict among all comparisons);
- **coverage**: how often an interval contains the true ratio;
- **power**: how often a true change is called in the right direction;
- **equivalence**: how often a true no-change is called "equivalent within ±m %".

The noise model, per repetition of configuration c in block b at position p of its block:

    value = true_c × exp(drift_b + position_effect × [p == 0] + trend × p + ε),
    ε ~ Normal(0, σ²), σ = sqrt(log(1 + cv²))  (lognormal noise with that CV)

``drift_b`` ~ Normal(0, block_drift²) is shared by every repetition of a block (a host that is
faster or slower for a while: frequency, a neighbour, thermal state); the position effect and
the trend are what a fixed order would alias onto one configuration, and the randomised order
turns into noise. ``outliers`` is the chance that a repetition is disturbed (×
``outlier_factor``); ``outlier_count`` places exactly that many disturbed repetitions (×
``outlier_factor``) at random among each group's repetitions of the first blocks; ``bimodal``
is the chance that a repetition runs in a slow mode (× ``bimodal_factor``), each independently,
as RSA-2048 signing did on one host. ``python -m cryptoperf.simulate`` prints the figures docs/methodology.md
quotes; ``tests/test_simulation.py`` asserts the acceptance figures on a smaller draw.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from cryptoperf import analysis, schedule, stats
from cryptoperf.model import OK, Cell, CellSummary

BASELINE = "base"
#: How a simulated study orders each block's configurations: ``fixed`` (the baseline first in
#: every block: the design before randomised blocks), ``file`` (``schedule.blocks`` with one seed
#: for every simulated study, as when every run of a study file uses the seed the file pins),
#: ``run`` (``schedule.blocks`` with a fresh seed per study, as each run draws its own).
ORDERS = ("fixed", "file", "run")
#: The seed of the ``file`` order (what every shipped study file pinned before runs drew theirs).
FILE_SEED = 1


@dataclass(frozen=True)
class Scenario:
    """One simulated design and truth.

    Attributes:
        name: shown in the table.
        blocks: blocks per comparison (the study's ``repetitions``).
        groups: groups in the study (backend × operation × size).
        configs: configurations per group besides the baseline; comparisons = groups × configs.
        true_ratio: configuration ÷ baseline time per operation for every comparison (1.0:
            A/A), or per configuration of a group when a tuple.
        cv: coefficient of variation of one repetition (fraction).
        block_drift: standard deviation of the shared per-block log factor.
        position_effect: log slowdown of the first repetition of each block.
        trend: log drift per position within a block.
        outliers, outlier_factor: probability and size of a disturbed repetition.
        outlier_count: exactly this many disturbed repetitions (× ``outlier_factor``) per group,
            placed at random among the repetitions (baseline's and configurations') of its first
            ``blocks`` blocks, on top of ``outliers``.
        bimodal, bimodal_factor: probability that a repetition runs in a slow mode, and how
            much slower (each repetition independently, on top of the outliers).
        screen: set outlier blocks aside (``analysis.Settings.outlier_screen``); False shows
            what the plain mean of the log ratios gives on the same data.
        margin_pct, multiplicity: as the study's keys.
        max_blocks: with a value > blocks, a sequential study (``until = "decided"``).
        base_ns: the baseline's true time per operation, ns.
        group_ratios: per group, a factor on its configurations' true ratio (a change in some
            operations only: ``(1.05,) + (1.0,) * 11`` regresses the first of 12); () for none.
        quantised: each value read as the worker's histograms give a p50 (the highest value of
            its bucket: whole ns below 2,048 ns, 3 significant digits above).
        order: how each block's configurations are ordered (``ORDERS``): the real schedule
            (``schedule.blocks``) with a fresh seed per study (``run``) or one seed for all
            (``file``), or the baseline first in every block (``fixed``).
        paired: False analyses the same data unpaired (Welch on each side's repetitions, as
            ``cryptoperf compare`` must for two runs), to show what pairing buys.
        verdict_on: the metric verdicts are decided on (``analysis.Settings.verdict_on``); the
            simulated values stand for each metric of a single-threaded closed loop alike.
    """

    name: str
    blocks: int
    groups: int = 1
    configs: int = 1
    true_ratio: float | tuple[float, ...] = 1.0
    cv: float = 0.03
    block_drift: float = 0.10
    position_effect: float = 0.0
    trend: float = 0.0
    outliers: float = 0.0
    outlier_factor: float = 1.3
    outlier_count: int = 0
    bimodal: float = 0.0
    bimodal_factor: float = 2.0
    screen: bool = True
    margin_pct: float = stats.DEFAULT_MARGIN_PCT
    multiplicity: bool = True
    max_blocks: int | None = None
    order: str = "run"
    paired: bool = True
    base_ns: float = 1000.0
    quantised: bool = False
    group_ratios: tuple[float, ...] = ()
    verdict_on: str = "latency"

    @property
    def comparisons(self) -> int:
        """Comparisons per simulated study."""
        return self.groups * self.configs

    def ratios(self) -> tuple[float, ...]:
        """The true ratio of each configuration of a group."""
        if isinstance(self.true_ratio, tuple):
            return self.true_ratio
        return (self.true_ratio,) * self.configs


@dataclass(frozen=True)
class Figures:
    """What a scenario's simulated studies gave (fractions of comparisons unless noted).

    Attributes:
        scenario: the scenario; studies: simulated studies; comparisons: their comparisons.
        slower, faster, equivalent, inconclusive: share of verdicts of each kind.
        false_verdict: share of comparisons whose true ratio is 1 called slower or faster
            (None if no comparison is A/A).
        false_beyond_margin: the same, counting only verdicts whose interval reaches past the
            margin (not "x % slower, within the ±m % margin").
        familywise: share of studies with at least one false slower/faster verdict.
        coverage: share of intervals containing the true ratio.
        wrong_direction: share called faster when truly slower or the reverse.
        mean_blocks: mean paired blocks per comparison (grows in a sequential study).
        seconds: wall time of the simulation.
    """

    scenario: Scenario
    studies: int
    comparisons: int
    slower: float
    faster: float
    equivalent: float
    inconclusive: float
    false_verdict: float | None
    false_beyond_margin: float | None
    familywise: float
    coverage: float
    wrong_direction: float
    mean_blocks: float
    seconds: float


def _sigma(cv: float) -> float:
    return math.sqrt(math.log1p(cv * cv))


def cell_summary(cell: Cell, values: dict[int, float]) -> CellSummary:
    """A CellSummary of simulated per-block (or per-repetition) latencies, ns, block → value;
    ops/s and CPU are their inverse and themselves, as for a single-threaded closed loop, and so
    is a server side's CPU per transaction (a server doing the same work per transaction)."""
    v = list(values.values())
    ops = {b: 1e9 / x for b, x in values.items()}
    p50 = float(statistics.median(v))  # np.median's value; far cheaper on a few values
    return CellSummary(
        cell=cell, repetitions=len(v), ok=len(v), status=OK, reason="",
        p50_ns=p50, p99_ns=None, ops_per_s=float(statistics.median(ops.values())),
        bytes_per_s=None, process_cpu_ns_per_op=p50, blocks_run=tuple(values),
        p50_by_block_ns=values, ops_per_s_by_block=ops, process_cpu_ns_per_op_by_block=values,
        cv_p50=stats.cv(v), cv_ops_per_s=stats.cv(list(ops.values())), steal_pct=None,
        disturbed=0, batch=1, timing="individual", library_version=None,
        server_cpu_ns_per_op=p50, server_cpu_ns_per_op_by_block=values)


class _Study:
    """The values of one simulated study, drawn block by block as the engine would run them."""

    def __init__(self, sc: Scenario, rng: np.random.Generator):
        self.sc, self.rng = sc, rng
        self.sigma = _sigma(sc.cv)
        self.configs = [BASELINE] + [f"c{i}" for i in range(sc.configs)]
        self.truth = dict(zip(self.configs, (1.0,) + sc.ratios()))
        self.cells = {(g, c): Cell(c, "sim", f"op{g}", "sim-op") for g in range(sc.groups) for c in self.configs}
        self.key_of = {cell.key: k for k, cell in self.cells.items()}
        self.values: dict[tuple[int, str], dict[int, float]] = {k: {} for k in self.cells}
        if sc.order not in ORDERS:
            raise ValueError(f"unknown order '{sc.order}' (known: {', '.join(ORDERS)})")
        self.seed = FILE_SEED if sc.order == "file" else int(rng.integers(schedule.FRESH_SEED_MAX))

    def truth_of(self, group: int, c: str) -> float:
        """The true ratio of configuration ``c`` to the baseline in ``group``."""
        factor = self.sc.group_ratios[group] if self.sc.group_ratios and c != BASELINE else 1.0
        return self.truth[c] * factor

    def _order(self, first: int, last: int, keys: Sequence[tuple[int, str]]) -> list[tuple[int, int, str, int]]:
        """(block, group, configuration, position) of blocks ``first``..``last`` of the cells
        ``keys`` (each group's baseline first), in execution order: the engine's own schedule
        (``schedule.blocks``) from this study's seed, or the baseline first (``fixed``)."""
        if self.sc.order == "fixed":
            groups = sorted({g for g, _ in keys})
            return [(b, g, c, pos) for b in range(first, last + 1) for g in groups
                    for pos, c in enumerate(c for gg, c in keys if gg == g)]
        reps = schedule.blocks([self.cells[k] for k in keys], first, last, self.seed)
        return [(r.block, *self.key_of[r.cell.key], r.position) for r in reps]

    def _planted(self, order: Sequence[tuple[int, int, str, int]]) -> set[int]:
        """Positions in ``order`` of ``outlier_count`` repetitions per group, drawn at random."""
        out: set[int] = set()
        for g in sorted({group for _, group, _, _ in order}):
            mine = [i for i, (_, group, _, _) in enumerate(order) if group == g]
            out.update(int(i) for i in self.rng.choice(mine, min(self.sc.outlier_count, len(mine)), replace=False))
        return out

    def run_blocks(self, first: int, last: int, keys: Sequence[tuple[int, str]]) -> None:
        """Draw blocks ``first``..``last`` of the cells ``keys`` ((group, configuration), the
        baseline of each group included), in the order the engine would run them."""
        sc = self.sc
        drifts: dict[tuple[int, int], float] = {}
        order = self._order(first, last, keys)
        planted = self._planted(order) if first == 1 and sc.outlier_count else set()
        for i, (block, group, c, pos) in enumerate(order):
            if (block, group) not in drifts:
                drifts[(block, group)] = self.rng.normal(0.0, sc.block_drift) if sc.block_drift else 0.0
            e = self.rng.normal(0.0, self.sigma)
            if sc.outliers and self.rng.random() < sc.outliers:
                e += math.log(sc.outlier_factor)
            if i in planted:
                e += math.log(sc.outlier_factor)
            if sc.bimodal and self.rng.random() < sc.bimodal:
                e += math.log(sc.bimodal_factor)
            shift = drifts[(block, group)] + sc.trend * pos + (sc.position_effect if pos == 0 else 0.0)
            value = sc.base_ns * self.truth_of(group, c) * math.exp(shift + e)
            if sc.quantised:
                value = float(stats.histogram_bucket(value)[1])
            self.values[(group, c)][block] = value

    def analyse(self, settings: analysis.Settings) -> list:
        summaries = {self.cells[k].key: cell_summary(self.cells[k], v) for k, v in self.values.items()}
        if self.sc.paired:
            deltas, _, _ = analysis.deltas(summaries, BASELINE, settings)
            return deltas
        pairs = [([summaries[self.cells[(g, BASELINE)].key]], [summaries[self.cells[(g, c)].key]])
                 for g in range(self.sc.groups) for c in self.configs[1:]]
        deltas, _, _ = analysis.compare_runs(pairs, ("baseline", "configuration"), settings)
        return [replace(d, configuration=c) for d, (_, c) in
                zip(deltas, [(g, c) for g in range(self.sc.groups) for c in self.configs[1:]])]


def simulate_study(sc: Scenario, rng: np.random.Generator) -> list:
    """One simulated study of scenario ``sc``: its deltas (``model.Delta``), after the
    sequential looks when ``sc.max_blocks`` asks for them, exactly as the engine adds blocks
    (``analysis.undecided`` picks the comparisons that get more)."""
    study = _Study(sc, rng)
    looks = schedule.looks(sc.blocks, sc.max_blocks)
    settings = analysis.Settings(margin_pct=sc.margin_pct, multiplicity=sc.multiplicity, looks=len(looks),
                                 outlier_screen=sc.screen, verdict_on=sc.verdict_on)
    study.run_blocks(1, sc.blocks, list(study.cells))
    deltas = study.analyse(settings)
    for done, nxt in zip(looks, looks[1:]):
        open_ = analysis.undecided(deltas)
        if not open_:
            break
        keys = [(int(label[2:]), c) for (_, label, _), configs in open_.items()
                for c in study.configs if c in configs]  # the baseline first: it is in configs
        study.run_blocks(done + 1, nxt, keys)
        deltas = study.analyse(settings)
    return deltas


def run(sc: Scenario, studies: int, seed: int = 1) -> Figures:
    """Simulate ``studies`` studies of ``sc`` from ``seed`` and count what their verdicts said."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    kinds = {k: 0 for k in stats.VERDICT_KINDS}
    n = false = beyond = aa = covered = wrong = fw = blocks = 0
    for _ in range(studies):
        any_false = False
        for d in simulate_study(sc, rng):
            truth = _truth(sc, d.configuration)
            n += 1
            blocks += d.blocks
            if d.verdict is None:
                kinds[stats.INCONCLUSIVE] += 1
                continue
            kinds[d.verdict.kind] += 1
            decided = d.decisive
            # a metric whose higher values are faster (throughput) holds the inverse ratio
            covered += decided.contains(truth if stats.METRICS[stats.metric_key(d.verdict.metric)][1] else 1.0 / truth)
            called = d.verdict.kind in (stats.SLOWER, stats.FASTER)
            if truth == 1.0:
                aa += 1
                false += called
                beyond += called and not d.verdict.within_margin
                any_false |= called
            elif called and (d.verdict.kind == stats.SLOWER) != (truth > 1.0):
                wrong += 1
        fw += any_false
    return Figures(sc, studies, n, *(kinds[k] / n for k in stats.VERDICT_KINDS),
                   false_verdict=false / aa if aa else None,
                   false_beyond_margin=beyond / aa if aa else None, familywise=fw / studies,
                   coverage=covered / n, wrong_direction=wrong / n, mean_blocks=blocks / n,
                   seconds=time.perf_counter() - t0)


@dataclass(frozen=True)
class PhaseFigures:
    """What simulated fleet-like studies gave for their per-phase comparisons.

    Attributes:
        scenario: the level comparisons' scenario; phases: phases per job; counted: whether the
            phase comparisons joined the study's family (as comparisons with verdicts) or were
            descriptive intervals (``workloads.fleet.phase_ratio``) beside it.
        studies: simulated studies.
        familywise: share of studies with at least one false verdict (among the levels' and,
            when counted, the phases' comparisons whose truth is no change).
        phase_excludes_1: share of studies in which at least one descriptive phase interval
            (A/A) excludes 1: how often "a phase slowed" would have been printed about nothing.
        level_power: share of the levels' true changes called in their direction (None for A/A).
    """

    scenario: Scenario
    phases: int
    counted: bool
    studies: int
    familywise: float
    phase_excludes_1: float
    level_power: float | None


def run_phases(sc: Scenario, phases: int, studies: int, seed: int = 1, counted: bool = False) -> PhaseFigures:
    """Simulate ``studies`` fleet-like studies: the level comparisons of ``sc`` (its truth) and,
    per comparison, ``phases`` phase times with no true change, drawn with the same noise model
    (per-block medians). Each study's phases are either compared descriptively, as the fleet
    figures do (``workloads.fleet.phase_ratio``: a 95 % interval per phase, no verdict), or — with
    ``counted`` — added to the study's family as comparisons of their own, adjusted and decided
    with the levels' (``analysis.deltas``)."""
    from cryptoperf.workloads import fleet
    rng = np.random.default_rng(seed)
    settings = analysis.Settings(margin_pct=sc.margin_pct, multiplicity=sc.multiplicity, outlier_screen=sc.screen)
    fw = excl = called = changed = 0
    for _ in range(studies):
        study = _Study(sc, rng)
        study.run_blocks(1, sc.blocks, list(study.cells))
        phase_values = {(g, c, k): {} for g in range(sc.groups) for c in study.configs for k in range(phases)}
        for b in range(1, sc.blocks + 1):
            for g in range(sc.groups):
                drift = rng.normal(0.0, sc.block_drift) if sc.block_drift else 0.0
                for key in [k for k in phase_values if k[0] == g]:
                    phase_values[key][b] = 1000.0 * math.exp(drift + rng.normal(0.0, study.sigma))
        summaries = {study.cells[k].key: cell_summary(study.cells[k], v) for k, v in study.values.items()}
        if counted:
            for (g, c, k), v in phase_values.items():
                cell = Cell(c, "sim", f"op{g}-phase{k}", "sim-op")
                summaries[cell.key] = cell_summary(cell, v)
        deltas, _, _ = analysis.deltas(summaries, BASELINE, settings)
        false = False
        for d in deltas:
            truth = 1.0 if "-phase" in d.label else _truth(sc, d.configuration)
            call = d.verdict is not None and d.verdict.kind in (stats.SLOWER, stats.FASTER)
            if truth == 1.0:
                false |= call
            elif "-phase" not in d.label:
                changed += 1
                called += call and (d.verdict.kind == stats.SLOWER) == (truth > 1.0)
        fw += false
        excl += any(ci is not None and (ci.low > 1.0 or ci.high < 1.0)
                    for (g, c, k), v in phase_values.items() if c != BASELINE
                    for ci in [fleet.phase_ratio(v, phase_values[(g, BASELINE, k)])])
    return PhaseFigures(sc, phases, counted, studies, fw / studies, excl / studies,
                        called / changed if changed else None)


def _truth(sc: Scenario, configuration: str) -> float:
    return sc.ratios()[int(configuration[1:])]


def binomial_tolerance(p: float, n: int, z: float = 2.576) -> float:
    """z standard errors of a share p estimated from n draws (99 % two-sided for z = 2.576):
    how far a simulated rate may sit above its nominal value by chance alone."""
    return z * math.sqrt(p * (1.0 - p) / n)


# --------------------------------------------------------------------------- the figures


def acceptance_scenarios(default_blocks: int, min_blocks: int, max_blocks: int) -> list[Scenario]:
    """The scenarios docs/methodology.md reports and tests/test_simulation.py asserts."""
    out = []
    for b in sorted({min_blocks, 4, 5, default_blocks, 20}):
        out.append(Scenario(f"A/A, 1 comparison, {b} blocks", b, multiplicity=False, position_effect=0.02))
    out += [
        Scenario(f"A/A, 1 comparison, sequential {default_blocks}→{max_blocks}", default_blocks,
                 multiplicity=False, max_blocks=max_blocks),
        Scenario(f"A/A, 24 comparisons (8 groups × 3), {default_blocks} blocks", default_blocks,
                 groups=8, configs=3),
        Scenario(f"A/A, 24 comparisons, {min_blocks} blocks", min_blocks, groups=8, configs=3),
        Scenario(f"A/A, 24 comparisons, sequential {default_blocks}→{max_blocks}", default_blocks,
                 groups=8, configs=3, max_blocks=max_blocks),
        Scenario(f"+5 % at CV 3 %, 1 comparison, {default_blocks} blocks", default_blocks,
                 true_ratio=1.05, multiplicity=False),
        Scenario(f"+5 % at CV 3 %, inside 24 comparisons, {default_blocks} blocks", default_blocks,
                 groups=8, configs=3, true_ratio=1.05),
        Scenario(f"0 % at CV 1 %, 1 comparison, {default_blocks} blocks", default_blocks, cv=0.01,
                 multiplicity=False),
        Scenario(f"0 % at CV 1 %, inside 24 comparisons, {default_blocks} blocks", default_blocks, cv=0.01,
                 groups=8, configs=3),
    ]
    return out


def design_scenarios(default_blocks: int) -> list[Scenario]:
    """Scenarios that show what each part of the design buys (docs/methodology.md)."""
    n = default_blocks
    return [
        Scenario(f"+5 %, 10 % block drift, 2 % noise, paired, {n} blocks", n, true_ratio=1.05, cv=0.02,
                 multiplicity=False),
        Scenario(f"+5 %, 10 % block drift, 2 % noise, unpaired, {n} blocks", n, true_ratio=1.05, cv=0.02,
                 multiplicity=False, paired=False),
        Scenario(f"A/A, first-in-block 2 % slower, fixed order, {n} blocks", n, position_effect=0.02,
                 cv=0.01, multiplicity=False, order="fixed"),
        Scenario(f"A/A, first-in-block 2 % slower, random order, {n} blocks", n, position_effect=0.02,
                 cv=0.01, multiplicity=False),
        Scenario("A/A, first-in-block 2 % slower, tls-handshake's shape (8 groups × 3, 8 blocks), "
                 "one seed per file", 8, groups=8, configs=3, position_effect=0.02, cv=0.01, order="file"),
        Scenario("A/A, first-in-block 2 % slower, tls-handshake's shape (8 groups × 3, 8 blocks), "
                 "a fresh seed per run", 8, groups=8, configs=3, position_effect=0.02, cv=0.01),
        Scenario(f"A/A, 2 % of repetitions disturbed ×1.3, {n} blocks", n, outliers=0.02, multiplicity=False),
        Scenario(f"+10 % at CV 20 %, sequential {n}→{8 * n}", n, true_ratio=1.10, cv=0.20,
                 multiplicity=False, max_blocks=8 * n),
    ]


def outlier_scenarios(default_blocks: int) -> list[Scenario]:
    """Scenarios that show what setting outlier blocks aside buys and costs
    (docs/methodology.md, "Outlier blocks"): clean A/A rates with the screen on, and a true +5 %
    at CV 3 % with one ×3 repetition or 8 % of repetitions at ×2, with the screen off and on."""
    n = default_blocks
    plus5 = dict(true_ratio=1.05, cv=0.03, multiplicity=False)
    x3 = dict(outlier_count=1, outlier_factor=3.0)
    bimodal = dict(bimodal=0.08, bimodal_factor=2.0)
    out = [Scenario(f"A/A, clean, {b} blocks, screen on", b, multiplicity=False) for b in (5, n, 20)]
    out += [
        Scenario(f"A/A, clean, 24 comparisons, {n} blocks, screen on", n, groups=8, configs=3),
        Scenario(f"+5 %, clean, {n} blocks, screen off", n, screen=False, **plus5),
        Scenario(f"+5 %, clean, {n} blocks, screen on", n, **plus5),
    ]
    for label, extra in ((f"one ×3 repetition of {2 * n}", x3), ("8 % of repetitions ×2", bimodal)):
        for screen in (False, True):
            on = "on" if screen else "off"
            out += [Scenario(f"+5 %, {label}, {n} blocks, screen {on}", n, screen=screen, **plus5, **extra),
                    Scenario(f"A/A, {label}, {n} blocks, screen {on}", n, multiplicity=False, screen=screen,
                             **extra)]
    out += [
        Scenario(f"+5 %, one ×3 repetition, sequential {n}→{4 * n}, screen off", n, max_blocks=4 * n,
                 screen=False, **plus5, **x3),
        Scenario(f"+5 %, one ×3 repetition, sequential {n}→{4 * n}, screen on", n, max_blocks=4 * n,
                 **plus5, **x3),
        Scenario("+5 %, one ×3 repetition of 10, 5 blocks, screen on", 5, **plus5, **x3),
        Scenario(f"A/A, 8 % of repetitions ×2, 24 comparisons, {n} blocks, screen on", n, groups=8, configs=3,
                 **bimodal),
        Scenario(f"+5 %, 2 % of repetitions ×1.3, {n} blocks, screen on", n, outliers=0.02, **plus5),
    ]
    return out


def bca_coverage(blocks: int, studies: int, cv: float = 0.03, seed: int = 1) -> float:
    """Coverage of a 95 % BCa bootstrap interval (scipy.stats.bootstrap) of the mean per-block
    log ratio, on the same A/A data as the t interval: the alternative the t interval was
    chosen over."""
    from scipy import stats as sp
    rng = np.random.default_rng(seed)
    sigma = _sigma(cv)
    hits = 0
    for _ in range(studies):
        d = rng.normal(0, sigma, blocks) - rng.normal(0, sigma, blocks)
        if np.ptp(d) == 0:
            continue
        ci = sp.bootstrap((d,), np.mean, n_resamples=2000, method="BCa", random_state=rng).confidence_interval
        hits += ci.low <= 0.0 <= ci.high
    return hits / studies


def format_table(figures: Sequence[Figures]) -> str:
    """A Markdown table of ``figures``, one row per scenario."""
    def pct(x: float | None) -> str:
        return "—" if x is None else f"{x * 100:.1f} %"
    rows = ["| scenario | studies × comparisons | false slower/faster (A/A) | … beyond the margin | "
            "family-wise false | coverage | slower | faster | equivalent | inconclusive | mean blocks |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for f in figures:
        aa = f.false_verdict is not None
        rows.append(f"| {f.scenario.name} | {f.studies} × {f.scenario.comparisons} | {pct(f.false_verdict)} | "
                    f"{pct(f.false_beyond_margin)} | {pct(f.familywise) if aa else '—'} | {pct(f.coverage)} | "
                    f"{pct(f.slower)} | {pct(f.faster)} | {pct(f.equivalent)} | {pct(f.inconclusive)} | "
                    f"{f.mean_blocks:.1f} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class HintFigures:
    """How the "about N blocks would decide it" hint fared in one scenario.

    Attributes:
        scenario: the scenario (``blocks``: the blocks when the hint was given).
        studies: studies simulated; hinted: share inconclusive with a count N given (within
            ``limit``); decided: share of those that decided when run on to N blocks.
        median_hint: median N of the hinted ones (0 when none).
    """

    scenario: Scenario
    studies: int
    hinted: float
    decided: float
    median_hint: float


def hint_calibration(sc: Scenario, studies: int, seed: int = 1, limit: int = 400) -> HintFigures:
    """Simulate ``studies`` single-comparison studies of ``sc`` to ``sc.blocks`` blocks; where
    the verdict is inconclusive with a hint of N <= ``limit`` blocks (``stats.blocks_to_decide``),
    run the same study on to N blocks (the engine's schedule, as a longer study would) and count
    how often it then decides — what the hint's "~80 % probability" promises."""
    rng = np.random.default_rng(seed)
    settings = analysis.Settings(margin_pct=sc.margin_pct, multiplicity=sc.multiplicity)
    hinted, decided, hints = 0, 0, []
    for _ in range(studies):
        study = _Study(sc, rng)
        study.run_blocks(1, sc.blocks, list(study.cells))
        d = study.analyse(settings)[0]
        n = d.verdict.blocks_needed if d.verdict is not None and d.verdict.kind == stats.INCONCLUSIVE else None
        if n is None or n > limit:
            continue
        hinted += 1
        hints.append(n)
        study.run_blocks(sc.blocks + 1, n, list(study.cells))
        after = study.analyse(settings)[0]
        decided += after.verdict is not None and after.verdict.kind != stats.INCONCLUSIVE
    return HintFigures(sc, studies, hinted / studies, decided / max(hinted, 1), float(np.median(hints)) if hints else 0.0)


def hint_scenarios() -> list[Scenario]:
    """The hint's calibration table (docs/methodology.md): one comparison, margin ±2 %, CV 3 %,
    hinted after 3, 5 and 10 blocks, at a true 0, +3 % and +5 %."""
    return [Scenario(f"{ratio:+.0%} after {b} blocks".replace("+0%", "A/A"), b, true_ratio=1.0 + ratio, cv=0.03,
                     multiplicity=False, block_drift=0.0)
            for b in (3, 5, 10) for ratio in (0.0, 0.03, 0.05)]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cryptoperf.simulate [--studies N] [--seed S]``: print the figures table."""
    from cryptoperf import study as study_mod
    p = argparse.ArgumentParser(prog="python -m cryptoperf.simulate", description=__doc__.split("\n\n")[0])
    p.add_argument("--studies", type=int, default=20000, help="simulated studies per single-comparison "
                   "scenario (a 24-comparison scenario runs a tenth as many) [default: 20000]")
    p.add_argument("--seed", type=int, default=1, help="seed of the simulation [default: 1]")
    p.add_argument("--tables", default="acceptance,design,outliers,bca",
                   help="which tables to print, comma-separated [default: all of acceptance,design,outliers,bca]")
    a = p.parse_args(argv)
    tables = set(a.tables.split(","))
    opts = study_mod.options_for("study")
    default_blocks = int(opts["repetitions"].default)
    min_blocks = int(opts["repetitions"].min)
    max_blocks = 4 * default_blocks
    for title, scenarios in (("acceptance", acceptance_scenarios(default_blocks, min_blocks, max_blocks)),
                             ("design", design_scenarios(default_blocks)),
                             ("outliers", outlier_scenarios(default_blocks))):
        if title not in tables:
            continue
        figures = []
        for sc in scenarios:
            n = a.studies if sc.comparisons == 1 else max(a.studies // 10, 100)
            if sc.max_blocks and sc.max_blocks >= 8 * sc.blocks:
                n = max(n // 10, 100)
            f = run(sc, n, a.seed)
            figures.append(f)
            print(f"{sc.name}: {f.seconds:.1f} s", file=sys.stderr)
        print(f"\n{title}:\n")
        print(format_table(figures))
    if "bca" not in tables:
        return 0
    print("\nBCa bootstrap (scipy) vs t interval, A/A coverage of 95 % intervals:\n")
    print("| blocks | BCa coverage | t coverage |\n|---:|---:|---:|")
    for b in (min_blocks, 5, default_blocks):
        n = max(a.studies // 10, 200)
        t = run(Scenario("t", b, multiplicity=False, block_drift=0.0), n, a.seed).coverage
        print(f"| {b} | {bca_coverage(b, n, seed=a.seed) * 100:.1f} % | {t * 100:.1f} % |")
    print("\nthe blocks-needed hint, run on to the N it gave:\n")
    print("| scenario | studies | hinted | decided at N | median N |\n|---|---:|---:|---:|---:|")
    for sc in hint_scenarios():
        h = hint_calibration(sc, max(a.studies // 10, 200), a.seed)
        print(f"| {sc.name} | {h.studies} | {h.hinted * 100:.1f} % | {h.decided * 100:.1f} % | {h.median_hint:g} |")
    from cryptoperf.simulate import runs as simulate_runs  # it builds on this module
    print("\nacross runs (cryptoperf compare --fail-on slower):\n")
    print(simulate_runs.table([simulate_runs.run_compare(sc, max(a.studies // 10, 200), a.seed)
                               for sc in simulate_runs.scenarios()]))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
