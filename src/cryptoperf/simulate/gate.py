"""Simulated regression gates on the paired route: how often does ``cryptoperf gate`` fail a
build that did not change, and how often does it catch one that did?

The gate runs the baseline's and the candidate's workers as two configurations of one study
(``engine.gate``), so each pipeline here is one simulated study (``simulate.simulate_study``:
the engine's own schedule, sequential looks, outlier screen, intervals and verdicts through
``analysis.deltas``) of the gate's design, judged by ``compare.failing`` as the command judges
it. What shifts a whole CI job — another runner, its clock, a neighbour for minutes — enters
as the shared per-block drift (``Scenario.block_drift``), which the pairing cancels; disturbed
repetitions enter as ``outliers`` / ``outlier_count`` (a repetition × 3 or × 1.3).

Counted per scenario:

- **gate fails**: pipelines in which the gate fails (some operation "slower" beyond the
  margin) — for an unchanged build, the false-failure rate;
- **caught**: for a regressed operation, the share of pipelines that fail on *it* (power);
- **coverage**: the share of intervals that contain their true ratio;
- **mean blocks**: blocks per comparison at the end (the sequential design's cost).

``python -m cryptoperf.simulate.gate`` prints the table docs/methodology.md quotes
("Regression gates"); tests/test_simulation.py asserts the acceptance figures on a smaller draw.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cryptoperf import compare, stats
from cryptoperf.engine import gate as gate_mod
from cryptoperf.simulate.study import Scenario, simulate_study

#: The operations the documented recipe gates (docs/ci-gate.md).
RECIPE_OPS = 12


def design(name: str, groups: int = RECIPE_OPS, **kw) -> Scenario:
    """The default ``cryptoperf gate`` design (``engine.gate``: first look, most blocks, margin)
    for ``groups`` operations, one candidate each, with the noise and truth in ``kw``."""
    return Scenario(name, gate_mod.DEFAULT_BLOCKS, groups=groups, configs=1,
                    max_blocks=gate_mod.DEFAULT_MAX_BLOCKS, margin_pct=stats.DEFAULT_MARGIN_PCT, **kw)


@dataclass(frozen=True)
class GateFigures:
    """What a scenario's simulated gates said.

    Attributes:
        scenario: the scenario; pipelines: gates simulated.
        gate_fails: share of pipelines failing ``--fail-on slower``.
        caught: share of pipelines failing on the regressed operation(s) (None without one).
        coverage: share of intervals containing their true ratio.
        all_covered: share of pipelines in which every interval contains its true ratio (what
            the adjustment over operations and looks holds at 95 %).
        mean_blocks: mean blocks per comparison.
        seconds: wall time of the simulation.
    """

    scenario: Scenario
    pipelines: int
    gate_fails: float
    caught: float | None
    coverage: float
    all_covered: float
    mean_blocks: float
    seconds: float


def _group(label: str) -> int:
    return int(label[2:])  # simulated cells are labelled op0, op1, ...


def run_gates(sc: Scenario, pipelines: int, seed: int = 1) -> GateFigures:
    """Simulate ``pipelines`` gates of ``sc`` from ``seed``: each one study through the
    engine's analysis, judged by ``compare.failing`` with ``--fail-on slower``."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    regressed = {g for g, r in enumerate(sc.group_ratios) if r != 1.0}
    fails = caught = covered = every = n = blocks = 0
    for _ in range(pipelines):
        deltas = simulate_study(sc, rng)
        failing = compare.failing(deltas, (stats.SLOWER,))
        fails += bool(failing)
        caught += any(_group(d.label) in regressed for d in failing)
        hits = []
        for d in deltas:
            truth = sc.ratios()[0] * (sc.group_ratios[_group(d.label)] if sc.group_ratios else 1.0)
            blocks += d.blocks
            hits.append(d.latency is not None and d.latency.contains(truth))
        n += len(hits)
        covered += sum(hits)
        every += all(hits)
    return GateFigures(sc, pipelines, fails / pipelines, caught / pipelines if regressed else None,
                       covered / max(n, 1), every / pipelines, blocks / max(n, 1), time.perf_counter() - t0)


def one_regressed(change: float, groups: int = RECIPE_OPS) -> tuple[float, ...]:
    """Per-group ratios with the first of ``groups`` operations ``change`` slower (0.05: +5 %)."""
    return (1.0 + change,) + (1.0,) * (groups - 1)


def scenarios() -> list[Scenario]:
    """The table docs/methodology.md quotes ("Regression gates"): the default gate design over
    12 operations, an unchanged build at CV 1 % and 3 % per repetition, with a job-wide drift of
    10 % per block, one repetition ×3 or ×1.3 in every operation, 1 % of repetitions ×3; then a
    true +5 % (and +10 %) in one of the 12 at CV 1 %, 2 % and 3 %; then a noisy runner (a fifth
    of the repetitions ×1.5), unchanged and with +5 % in one operation."""
    out = []
    for cv in (0.01, 0.03):
        tag = f"unchanged, CV {cv * 100:g} %"
        out += [design(f"{tag}", cv=cv),
                design(f"{tag}, one repetition ×3 per operation", cv=cv, outlier_count=1, outlier_factor=3.0),
                design(f"{tag}, one repetition ×1.3 per operation", cv=cv, outlier_count=1, outlier_factor=1.3),
                design(f"{tag}, 1 % of repetitions ×3", cv=cv, outliers=0.01, outlier_factor=3.0)]
    for change, cv in ((0.05, 0.01), (0.05, 0.02), (0.05, 0.03), (0.10, 0.03)):
        out.append(design(f"+{change * 100:g} % in 1 of 12, CV {cv * 100:g} %", cv=cv,
                          group_ratios=one_regressed(change)))
    out.append(design("+5 % in 1 of 12, CV 1 %, 1 % of repetitions ×3", cv=0.01, outliers=0.01,
                      outlier_factor=3.0, group_ratios=one_regressed(0.05)))
    # a noisy runner, as bench/ci_gate met one: a neighbour slows a fifth of the repetitions ×1.5
    out += [design(f"{tag}noisy runner: 20 % of repetitions ×1.5, CV 1 %", cv=0.01, outliers=0.20, outlier_factor=1.5,
                   group_ratios=ratios)
            for tag, ratios in (("unchanged, ", ()), ("+5 % in 1 of 12, ", one_regressed(0.05)))]
    return out


def table(figures: Sequence[GateFigures]) -> str:
    """The figures as a Markdown table."""
    lines = ["| scenario | pipelines | gate fails | caught (the regressed operation) | coverage (per interval) "
             "| all intervals covered | mean blocks |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for f in figures:
        caught = "—" if f.caught is None else f"{f.caught * 100:.1f} %"
        lines.append(f"| {f.scenario.name} | {f.pipelines} | {f.gate_fails * 100:.1f} % | {caught} "
                     f"| {f.coverage * 100:.1f} % | {f.all_covered * 100:.1f} % | {f.mean_blocks:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cryptoperf.simulate.gate [--pipelines N] [--seed S]``: print the table."""
    p = argparse.ArgumentParser(prog="python -m cryptoperf.simulate.gate", description=__doc__.split("\n\n")[0])
    p.add_argument("--pipelines", type=int, default=2000, help="simulated gates per scenario [default: 2000]")
    p.add_argument("--seed", type=int, default=1, help="seed of the simulation [default: 1]")
    a = p.parse_args(argv)
    figures = []
    for sc in scenarios():
        f = run_gates(sc, a.pipelines, a.seed)
        figures.append(f)
        print(f"{sc.name}: {f.seconds:.1f} s", file=sys.stderr)
    print(table(figures))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
