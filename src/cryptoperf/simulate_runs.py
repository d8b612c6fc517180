"""Simulated comparisons across runs: how often does ``cryptoperf compare --fail-on slower``
fail a build that did not change?

A run as a whole shifts from one run to the next (process layout, CPU frequency, the host's
other tenants, page placement); no number of repetitions inside a run shrinks that shift. This
module draws runs with a known truth and feeds them through the project's own compare path
(``analysis.compare_runs``, hence ``stats.runs_log_ratio`` / ``stats.run_sd_log_ratio`` /
Welch, ``stats.adjusted_level``, ``stats.decide``, then ``compare.failing``), exactly as
``compare.compare_run_sets`` does for stored runs, and counts:

- **gate failures**: comparisons where at least one cell fails ``--fail-on slower`` (a verdict
  "slower" beyond the margin);
- **called**: how often one cell's verdict is "slower" or "faster";
- **coverage**: how often a cell's interval contains the true ratio.

The noise model, per repetition r of cell c in run k:

    value = true × exp(u_k,c + ε),  u_k,c ~ Normal(0, run_sd²),  ε ~ Normal(0, σ²)

with σ = sqrt(log(1 + cv²)); ``shared`` is the share of the run shift's variance common to every
cell of a run (a slower CPU clock slows everything), the rest is the cell's own. ``python -m
cryptoperf.simulate`` prints these figures beside the study engine's (docs/methodology.md,
"Across runs"); tests/test_simulation.py asserts the acceptance figures on a smaller draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cryptoperf import analysis, compare, stats
from cryptoperf.model import Cell, CellSummary
from cryptoperf.simulate import cell_summary

#: The compare settings simulated: plain Welch on each run's repetitions (what compare did
#: before runs were the unit), the default assumed run-to-run sd with one run per side, and
#: runs as the unit (several runs per side or a history).
WELCH, ASSUMED, RUNS = "welch", "assumed", "runs"


@dataclass(frozen=True)
class RunScenario:
    """One simulated pair of run sets and truth.

    Attributes:
        name: shown in the table.
        cells: cells compared (each an independent operation).
        run_sd: true run-to-run standard deviation of a cell's log mean (fraction).
        shared: share (0..1) of the run shift's variance common to every cell of a run.
        cv: coefficient of variation of one repetition inside a run (fraction).
        repetitions: repetitions per cell per run.
        runs_a, runs_b: runs on each side (side A: the named baseline run and its history).
        true_ratio: side B ÷ side A for every cell.
        run_sd_assumed: the ``--run-sd`` of a one-run-per-side comparison (fraction), None for
            Welch on the repetitions alone.
        margin_pct: the equivalence margin.
    """

    name: str
    cells: int = 1
    run_sd: float = 0.0
    shared: float = 0.0
    cv: float = 0.01
    repetitions: int = 10
    runs_a: int = 1
    runs_b: int = 1
    true_ratio: float = 1.0
    run_sd_assumed: float | None = compare.DEFAULT_RUN_SD_PCT / 100.0
    margin_pct: float = 2.0

    @property
    def setting(self) -> str:
        """``runs``, ``assumed`` or ``welch``: how the comparison treats run-to-run variation."""
        if self.runs_a + self.runs_b >= 3:
            return RUNS
        return WELCH if self.run_sd_assumed is None else ASSUMED


@dataclass(frozen=True)
class RunFigures:
    """What the simulated comparisons of one scenario said.

    Attributes:
        scenario: the scenario; trials: comparisons simulated.
        gate_fails: share of comparisons failing ``--fail-on slower``.
        called: share of cells called "slower" or "faster".
        coverage: share of cells whose latency interval contains the true ratio.
        all_covered: share of comparisons in which every cell's interval contains it (what the
            multiplicity adjustment holds at 95 %).
    """

    scenario: RunScenario
    trials: int
    gate_fails: float
    called: float
    coverage: float
    all_covered: float


def _side(sc: RunScenario, cells: Sequence[Cell], runs: int, truth: float,
          rng: np.random.Generator) -> list[list[CellSummary]]:
    """``runs`` simulated runs of every cell: per cell, the list of its runs' summaries."""
    sigma = math.sqrt(math.log1p(sc.cv * sc.cv))
    out: list[list[CellSummary]] = [[] for _ in cells]
    for _ in range(runs):
        common = rng.normal(0.0, sc.run_sd * math.sqrt(sc.shared)) if sc.run_sd and sc.shared else 0.0
        for i, cell in enumerate(cells):
            own = rng.normal(0.0, sc.run_sd * math.sqrt(1.0 - sc.shared)) if sc.run_sd else 0.0
            values = 1000.0 * truth * np.exp(common + own + rng.normal(0.0, sigma, sc.repetitions))
            out[i].append(cell_summary(cell, {b + 1: float(v) for b, v in enumerate(values)}))
    return out


def simulate_comparison(sc: RunScenario, rng: np.random.Generator) -> list:
    """One simulated comparison of ``sc``: its deltas (``model.Delta``) from
    ``analysis.compare_runs``, side B against side A, as ``compare.compare_run_sets`` makes them."""
    cells = [Cell("sim", "sim", f"op{i}", "sim-op") for i in range(sc.cells)]
    a = _side(sc, cells, sc.runs_a, 1.0, rng)
    b = _side(sc, cells, sc.runs_b, sc.true_ratio, rng)
    settings = analysis.Settings(margin_pct=sc.margin_pct)
    deltas, _, _ = analysis.compare_runs(list(zip(a, b)), ("A", "B"), settings, run_sd=sc.run_sd_assumed)
    return deltas


def run_compare(sc: RunScenario, trials: int, seed: int = 1) -> RunFigures:
    """Simulate ``trials`` comparisons of ``sc`` from ``seed`` and count gate failures
    (``compare.failing`` with ``--fail-on slower``), calls and coverage."""
    rng = np.random.default_rng(seed)
    fails = called = covered = every = n = 0
    for _ in range(trials):
        deltas = simulate_comparison(sc, rng)
        fails += bool(compare.failing(deltas, (stats.SLOWER,)))
        hits = [d.latency is not None and d.latency.contains(sc.true_ratio) for d in deltas]
        every += all(hits)
        covered += sum(hits)
        called += sum(d.verdict is not None and d.verdict.kind in (stats.SLOWER, stats.FASTER) for d in deltas)
        n += len(deltas)
    return RunFigures(sc, trials, fails / trials, called / max(n, 1), covered / max(n, 1), every / trials)


def scenarios() -> list[RunScenario]:
    """The table docs/methodology.md quotes ("Across runs"): A/A at run-to-run sd 0–2 % for 1
    and 12 cells (CV 1 %, 10 repetitions per run) under plain Welch (the old compare), the
    assumed sd with one run per side, and runs as the unit (a baseline with 5 runs of history
    against one run; 3 runs against 3); then how often a true +5 % and +10 % fail the gate."""
    out = []
    for cells in (1, 12):
        for sd in (0.0, 0.005, 0.01, 0.02):
            tag = f"{cells} cell{'s' if cells > 1 else ''}, run sd {sd * 100:g} %"
            out += [RunScenario(f"{tag}: Welch, 1 run per side", cells, sd, run_sd_assumed=None),
                    RunScenario(f"{tag}: assumed sd 2 %, 1 run per side", cells, sd),
                    RunScenario(f"{tag}: 1 run + 5 of history vs 1", cells, sd, runs_a=6),
                    RunScenario(f"{tag}: 3 runs vs 3", cells, sd, runs_a=3, runs_b=3)]
    for ratio, sd in ((1.05, 0.01), (1.10, 0.01), (1.10, 0.02)):
        tag = f"+{(ratio - 1) * 100:.0f} %, run sd {sd * 100:g} %"
        out += [RunScenario(f"{tag}: assumed sd 2 %, 1 run per side", 1, sd, true_ratio=ratio),
                RunScenario(f"{tag}: 1 run + 5 of history vs 1", 1, sd, runs_a=6, true_ratio=ratio),
                RunScenario(f"{tag}: 3 runs vs 3", 1, sd, runs_a=3, runs_b=3, true_ratio=ratio)]
    return out


def table(figures: Sequence[RunFigures]) -> str:
    """The figures as a Markdown table (docs/methodology.md)."""
    lines = ["| scenario | trials | gate fails | called (per cell) | coverage (per cell) | all cells covered |",
             "|---|---|---|---|---|---|"]
    for f in figures:
        lines.append(f"| {f.scenario.name} | {f.trials} | {f.gate_fails * 100:.1f} % | {f.called * 100:.1f} % "
                     f"| {f.coverage * 100:.1f} % | {f.all_covered * 100:.1f} % |")
    return "\n".join(lines)
