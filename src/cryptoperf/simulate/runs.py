"""Simulated comparisons across runs: how often does ``cryptoperf compare --fail-on slower``
fail a build that did not change, and how often does it catch one that did?

A run as a whole shifts from one run to the next (process layout, CPU frequency, the host's
other tenants, page placement), and on CI a job shifts more (another runner, other neighbours);
no number of repetitions inside a run shrinks either. This module draws runs with a known truth
and feeds them through the project's own compare path, and counts:

- **gate failures**: comparisons where at least one cell fails ``--fail-on slower`` (a verdict
  "slower" beyond the margin): false failures for an unchanged build, the power for a changed one;
- **called**: how often one cell's verdict is "slower" or "faster";
- **coverage**: how often a cell's interval (or every cell's) contains the true ratio.

Two tables. ``scenarios``/``run_compare``: runs of one job, their cells' summaries given to
``across_runs.compare_runs`` (hence ``runs_log_ratio`` / ``run_sd_log_ratio`` / Welch,
``stats.adjusted_level``, ``stats.decide``, then ``compare.failing``). ``pipelines``/
``run_pipeline``: CI pipelines, whose runs are stored runs in memory (a host fingerprint per
runner, a session per job) selected by ``compare.select_history`` and compared by
``compare.compare_run_sets``, exactly as ``cryptoperf compare previous latest --history K`` does,
under the rules now and before (``BEFORE``: runs always the unit, every repetition kept, the
history matched on the hostname).

The noise model, per repetition r of cell c in run k of job j:

    value = true × exp(v_j,c + u_k,c + ε),  v ~ Normal(0, job_sd²),  u ~ Normal(0, run_sd²),
    ε ~ Normal(0, σ²)

with σ = sqrt(log(1 + cv²)), and disturbed repetitions multiplied by a factor; ``shared`` is
the share of a shift's variance common to every cell (a slower CPU clock slows everything), the
rest is the cell's own. ``python -m cryptoperf.simulate.runs`` prints both tables and the screen's
false alarms (docs/methodology.md, "Across runs"); tests/test_simulation_runs.py asserts the
acceptance figures on a smaller draw.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cryptoperf import across_runs, analysis, compare, stats
from cryptoperf.model import Cell, CellSummary
from cryptoperf.simulate.study import cell_summary
from cryptoperf.stats import outliers
from cryptoperf.store.stored_run import StoredRun

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
    ``across_runs.compare_runs``, side B against side A, as ``compare.compare_run_sets`` makes
    them for runs of one job."""
    cells = [Cell("sim", "sim", f"op{i}", "sim-op") for i in range(sc.cells)]
    a = _side(sc, cells, sc.runs_a, 1.0, rng)
    b = _side(sc, cells, sc.runs_b, sc.true_ratio, rng)
    settings = analysis.Settings(margin_pct=sc.margin_pct)
    deltas, _, _ = across_runs.compare_runs(list(zip(a, b)), ("A", "B"), settings, run_sd=sc.run_sd_assumed)
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


# --------------------------------------------------------------------------- CI pipelines

#: How the gate treated a pipeline's runs: as it does now (sessions, the screen, the history
#: matched without the hostname), or as it did before (every run its own unit whatever job made
#: it, every repetition kept, the history matched on the hostname too).
NOW, BEFORE = "now", "before"


@dataclass(frozen=True)
class Pipeline:
    """One simulated CI setting: the baseline's stored runs, the candidate's, and how the gate
    compares them (``cryptoperf compare previous latest --history K --fail-on slower``, or with
    ``history`` 0 every baseline run named against every candidate run).

    Attributes:
        name: shown in the table.
        cells: operations compared (independent: ``shared`` 0).
        job_sd: sd of a job's shift of a cell's log mean (another runner, its neighbours).
        run_sd: sd of a run's shift inside its job (runs made back to back in one job).
        cv: coefficient of variation of one repetition; repetitions: per cell per run.
        baseline_jobs: runs per job of the baseline's store, oldest first: (1,) * 6 is six
            main-branch jobs of one run each; (3,) is `speed --runs 3` in one job.
        candidate_jobs: runs per job of the candidate ((1,): one run in its own job).
        history: ``--history K``; 0 compares the named runs only (all of each side).
        hostname_per_job: every job on a runner of its own hostname (hosted CI).
        candidate_disturbed: factors of repetitions disturbed in the candidate's newest run, each
            one repetition of a random cell (a page-cache miss ×1.3, a migration ×3).
        disturbed_share, disturbed_factor: share of every repetition of every run multiplied
            by ``disturbed_factor``.
        regressed, true_ratio: the first ``regressed`` cells are ``true_ratio`` slower in the
            candidate (0: an unchanged build).
        shared: share of the job and run shifts' variance common to every cell.
        job_sd_pct: the ``--job-sd`` assumed with one job per side.
    """

    name: str
    cells: int = 1
    job_sd: float = 0.01
    run_sd: float = 0.0
    cv: float = 0.01
    repetitions: int = 10
    baseline_jobs: tuple[int, ...] = (1,) * 6
    candidate_jobs: tuple[int, ...] = (1,)
    history: int = 5
    hostname_per_job: bool = False
    candidate_disturbed: tuple[float, ...] = ()
    disturbed_share: float = 0.0
    disturbed_factor: float = 3.0
    regressed: int = 0
    true_ratio: float = 1.0
    shared: float = 0.0
    job_sd_pct: float = compare.DEFAULT_JOB_SD_PCT


@dataclass(frozen=True)
class PipelineFigures:
    """What the simulated gates of one pipeline said.

    Attributes:
        pipeline, rules (``NOW`` or ``BEFORE``), trials.
        gate_fails: share of pipelines whose gate fails (``--fail-on slower``): the false
            failures of an unchanged build, the power for a regressed one.
        all_covered: share whose every interval holds its cell's true ratio.
        assumed: share whose comparison assumed its spread (one unit per side).
        history: mean runs the history kept; units: the median units compared (both sides).
        set_aside: share of pipelines where a repetition was set aside as disturbed.
        detectable_pct: the median detectable change (``Comparison.detectable``, %) over the
            first ``DETECTABLE_TRIALS`` pipelines; None when not computed.
    """

    pipeline: Pipeline
    rules: str
    trials: int
    gate_fails: float
    all_covered: float
    assumed: float
    history: float
    units: float
    set_aside: float
    detectable_pct: float | None


#: Pipelines whose detectable change is computed (a root find per cell: slow).
DETECTABLE_TRIALS = 100


def _sim_host(hostname: str) -> dict:
    return {"hostname": hostname, "cpu_model": "Sim CPU", "crypto_flags": ["aes"], "logical_cpus": 2,
            "machine": "x86_64", "kernel": "Linux 6.1 sim", "hypervisor": {"present": True, "type": "kvm"},
            "worker_version": "sim", "libraries": {"sim": {"library": "Sim", "library_version": "1"}}}


def _sim_run(run_id: int, summaries: dict, job: int, p: Pipeline, rules: str) -> StoredRun:
    """A stored speed run in memory: its summaries, a host of its job's runner, its session."""
    process = ({"job": f"sim-{job}", "boot_id": f"boot-{job}"} if rules == NOW else {"boot_id": "one-boot"})
    meta = {"id": run_id, "kind": "speed", "study_name": None, "status": "complete",
            "started_at": f"2026-01-01T00:{run_id:02d}:00", "process": process,
            "host": _sim_host(f"runner-{job}" if p.hostname_per_job else "runner")}
    return StoredRun(meta, None, [], analysis.Analysis(summaries, []))


def _pipeline_runs(p: Pipeline, rules: str, rng: np.random.Generator) -> tuple[list[StoredRun], list[StoredRun]]:
    """The baseline's runs and the candidate's, oldest first, drawn job by job."""
    sigma = math.sqrt(math.log1p(p.cv * p.cv))
    cells = [Cell("", "sim", f"op{i}", "sim-op") for i in range(p.cells)]
    truth = [p.true_ratio if i < p.regressed else 1.0 for i in range(p.cells)]

    def shift(sd: float) -> np.ndarray:
        if not sd:
            return np.zeros(p.cells)
        return rng.normal(0.0, sd * math.sqrt(p.shared)) + rng.normal(0.0, sd * math.sqrt(1 - p.shared), p.cells)

    runs: list[list[StoredRun]] = [[], []]
    job = run_id = 0
    for side, layout in ((0, p.baseline_jobs), (1, p.candidate_jobs)):
        for k in layout:
            job += 1
            job_shift = shift(p.job_sd)
            for _ in range(k):
                run_id += 1
                logs = (job_shift + shift(p.run_sd))[:, None] + rng.normal(0.0, sigma, (p.cells, p.repetitions))
                if p.disturbed_share:
                    logs += math.log(p.disturbed_factor) * (rng.random(logs.shape) < p.disturbed_share)
                values = 1000.0 * np.exp(logs) * (np.array(truth)[:, None] if side else 1.0)
                summaries = {c.key: cell_summary(c, {b + 1: float(v) for b, v in enumerate(values[i])})
                             for i, c in enumerate(cells)}
                runs[side].append(_sim_run(run_id, summaries, job, p, rules))
    newest = runs[1][-1]
    for f in p.candidate_disturbed:
        s = newest.summaries[cells[int(rng.integers(p.cells))].key]
        block = int(rng.integers(p.repetitions)) + 1
        values = dict(s.p50_by_block_ns)
        values[block] *= f
        newest.summaries[s.cell.key] = cell_summary(s.cell, values)
    return runs[0], runs[1]


def simulate_gate(p: Pipeline, rules: str, rng: np.random.Generator) -> tuple[compare.Comparison, int]:
    """One simulated pipeline of ``p`` through the project's compare path: its comparison
    (``compare.select_history`` then ``compare.compare_run_sets``, as ``cryptoperf compare
    previous latest --history K`` makes it; the named runs only with ``history`` 0) and how many
    runs its history kept. ``rules`` ``BEFORE`` gives every run one session (runs the unit),
    keeps every repetition and keeps only history runs of the named run's hostname."""
    base, cand = _pipeline_runs(p, rules, rng)
    screen = rules == NOW
    if not p.history:
        return compare.compare_run_sets(base, cand, outlier_screen=screen, job_sd_pct=p.job_sd_pct), 0
    named, earlier = base[-1], base[-2::-1]
    if rules == BEFORE:
        earlier = [r for r in earlier if r.host["hostname"] == named.host["hostname"]]
    selection = compare.select_history(named, earlier, p.history)
    c = compare.compare_run_sets([named] + selection.runs, [cand[-1]], history=selection, outlier_screen=screen,
                                 job_sd_pct=p.job_sd_pct)
    return c, len(selection.runs)


def run_pipeline(p: Pipeline, trials: int, rules: str = NOW, seed: int = 1) -> PipelineFigures:
    """Simulate ``trials`` pipelines of ``p`` under ``rules`` from ``seed`` and count gate
    failures (``compare.failing`` with ``--fail-on slower``), coverage and what the gate said."""
    rng = np.random.default_rng(seed)
    truth = [p.true_ratio if i < p.regressed else 1.0 for i in range(p.cells)]
    fails = covered = assumed = kept = aside = 0
    units, detect = [], []
    for t in range(trials):
        c, k = simulate_gate(p, rules, rng)
        fails += bool(compare.failing(c.deltas, (stats.SLOWER,)))
        covered += all(d.latency is not None and d.latency.contains(truth[int(d.label[2:])]) for d in c.deltas)
        spreads = [s for s in c.spreads if s is not None]
        assumed += any(s.assumed for s in spreads)
        units += [spreads[0].units_a + spreads[0].units_b] if spreads else []
        kept += k
        aside += bool(c.set_aside)
        if t < DETECTABLE_TRIALS and p.regressed == 0:
            d = c.detectable()
            if d is not None:
                detect.append(d.pct)
    return PipelineFigures(p, rules, trials, fails / trials, covered / trials, assumed / trials, kept / trials,
                           float(np.median(units)) if units else 0.0, aside / trials,
                           float(np.median(detect)) if detect else None)


def pipelines() -> list[Pipeline]:
    """The rows docs/methodology.md ("Across runs", CI pipelines) tabulates: CV 1 % per
    repetition, 10 repetitions per run, the documented gate (`--history 5`, each main-branch
    job storing one run) unless a row says otherwise; an unchanged build, then regressions."""
    jobs2 = dict(job_sd=0.02, run_sd=0.005)
    return [
        Pipeline("jobs 1 % apart, 1 op"),
        Pipeline("jobs 1 % apart, 12 ops", cells=12),
        Pipeline("one ×3 repetition in the candidate, 1 op", candidate_disturbed=(3.0,)),
        Pipeline("one ×1.3 repetition in the candidate, 1 op", candidate_disturbed=(1.3,)),
        Pipeline("1 % of repetitions ×3 in every run, 12 ops", cells=12, disturbed_share=0.01),
        Pipeline("runner hostname differs per job, 1 op", hostname_per_job=True),
        Pipeline("runner hostname differs per job, 12 ops", cells=12, hostname_per_job=True),
        Pipeline("jobs 4 % apart, 1 op", job_sd=0.04),
        Pipeline("jobs 4 % apart, 12 ops", cells=12, job_sd=0.04),
        Pipeline("jobs 4 % apart, one run a side, 1 op", job_sd=0.04, baseline_jobs=(1,), history=0),
        Pipeline("jobs 4 % apart, one run a side, 12 ops", cells=12, job_sd=0.04, baseline_jobs=(1,), history=0),
        Pipeline("runs 0.5 % apart in jobs 2 % apart: 3 v 3 (one job a side)", baseline_jobs=(3,),
                 candidate_jobs=(3,), history=0, **jobs2),
        Pipeline("runs 0.5 % apart in jobs 2 % apart: 1 v history (jobs of 3 runs)", baseline_jobs=(3, 3),
                 **jobs2),
        Pipeline("runs 0.5 % apart in jobs 2 % apart: 1 v history (6 runs of one job)", baseline_jobs=(6,), **jobs2),
        Pipeline("runs 0.5 % apart in jobs 2 % apart: first gate (speed --runs 3 in one job v 1)",
                 baseline_jobs=(3,), **jobs2),
        Pipeline("+5 %, 1 op, jobs 1 % apart", regressed=1, true_ratio=1.05),
        Pipeline("+5 % in 1 of 12 ops, jobs 1 % apart", cells=12, regressed=1, true_ratio=1.05),
        Pipeline("+10 % in 1 of 12 ops, jobs 1 % apart", cells=12, regressed=1, true_ratio=1.10),
        Pipeline("+5 % in 1 of 12 ops, jobs 1 % apart, 10 jobs of history", cells=12, regressed=1, true_ratio=1.05,
                 baseline_jobs=(1,) * 11, history=10),
    ]


def pipeline_table(rows: Sequence[tuple[PipelineFigures, PipelineFigures]]) -> str:
    """(before, now) figures as a Markdown table (docs/methodology.md)."""
    lines = ["| pipeline | trials | gate fails before | gate fails now | all intervals cover | history runs "
             "kept (before → now) | units | assumed | set aside | detectable change |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for before, now in rows:
        p = now.pipeline
        hist = f"{before.history:.1f} → {now.history:.1f}" if p.history else "—"
        det = "—" if now.detectable_pct is None else ("none" if math.isinf(now.detectable_pct)
                                                       else f"{now.detectable_pct:.1f} %")
        lines.append(f"| {p.name} | {now.trials} | {before.gate_fails * 100:.1f} % | {now.gate_fails * 100:.1f} % "
                     f"| {now.all_covered * 100:.1f} % | {hist} | {now.units:g} | {now.assumed * 100:.0f} % "
                     f"| {now.set_aside * 100:.1f} % | {det} |")
    return "\n".join(lines)


def screen_false_alarms(runs: int, repetitions: int, cells: int, trials: int, seed: int = 1,
                        cv: float = 0.01) -> tuple[float, float]:
    """(share of clean cell comparisons in which ``across_runs.disturbed_repetitions`` sets
    anything aside, its nominal rate ``outliers.outlier_alpha``) for ``runs`` runs of
    ``repetitions`` lognormal repetitions (CV ``cv``, no disturbance) per cell, at the level
    of ``cells`` comparisons adjusted together (Bonferroni)."""
    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log1p(cv * cv))
    alpha = outliers.outlier_alpha(stats.adjusted_level(stats.DEFAULT_LEVEL, cells))
    hits = 0
    for _ in range(trials):
        values = [{b + 1: float(v) for b, v in enumerate(1000.0 * np.exp(rng.normal(0.0, sigma, repetitions)))}
                  for _ in range(runs)]
        hits += bool(across_runs.disturbed_repetitions(values, alpha, math.log1p(outliers.OUTLIER_FLOOR_PCT / 100)))
    return hits / trials, alpha


#: The between-job sds (%) ``assumed_sweep`` tries for ``--job-sd``.
SWEEP_JOB_SD_PCT = (2.0, 3.0, 3.5, 4.0, 5.0)


def assumed_sweep(trials: int, seed: int = 1) -> str:
    """How the pipelines that compare one job per side (``pipelines`` rows whose comparison
    assumes the between-job sd) fare at each ``SWEEP_JOB_SD_PCT``: a Markdown table of their
    gate failures (a 12-operation row at a quarter of ``trials``) and the detectable change of
    the first such row — how ``DEFAULT_JOB_SD_PCT`` was chosen (docs/methodology.md)."""
    import dataclasses
    rows = [p for p in pipelines() if p.regressed == 0 and len(p.baseline_jobs) == 1]
    head = "| --job-sd | " + " | ".join(p.name for p in rows) + " | detectable change (first) |"
    lines = [head, "|---" * (len(rows) + 2) + "|"]
    for sd in SWEEP_JOB_SD_PCT:
        cells, detect = [], "—"
        for i, p in enumerate(rows):
            f = run_pipeline(dataclasses.replace(p, job_sd_pct=sd), trials if p.cells == 1 else max(trials // 4, 100),
                             NOW, seed)
            cells.append(f"{f.gate_fails * 100:.1f} %")
            if i == 0 and f.detectable_pct is not None:
                detect = f"{f.detectable_pct:.1f} %"
        lines.append(f"| {sd:g} % | " + " | ".join(cells) + f" | {detect} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cryptoperf.simulate.runs [--trials N] [--seed S] [--tables ...]``: print the
    CI pipelines' table (before and now), the screen's false alarms and the runs-of-one-job
    table; a 12-operation row runs a quarter of the trials. Timings per row go to stderr."""
    p = argparse.ArgumentParser(prog="python -m cryptoperf.simulate.runs", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2000, help="simulated pipelines per one-operation row "
                   "[default: 2000]")
    p.add_argument("--seed", type=int, default=1, help="seed of the simulation [default: 1]")
    p.add_argument("--tables", default="pipelines,screen,sweep,runs",
                   help="which tables, comma-separated [default: all of pipelines,screen,sweep,runs]")
    a = p.parse_args(argv)
    tables = set(a.tables.split(","))
    if "pipelines" in tables:
        rows = []
        for pipe in pipelines():
            started = time.monotonic()
            n = a.trials if pipe.cells == 1 else max(a.trials // 4, 100)
            rows.append((run_pipeline(pipe, n, BEFORE, a.seed), run_pipeline(pipe, n, NOW, a.seed)))
            print(f"{pipe.name}: {time.monotonic() - started:.1f} s", file=sys.stderr)
        print("\nCI pipelines (cryptoperf compare previous latest --history K --fail-on slower):\n")
        print(pipeline_table(rows))
    if "screen" in tables:
        print("\nthe screen of disturbed repetitions on clean runs (share of cell comparisons with a "
              "repetition set aside, against its nominal rate):\n")
        print("| runs × repetitions | operations | set aside | nominal |\n|---|---:|---:|---:|")
        for runs, reps in ((7, 10), (7, 3), (2, 10)):
            for cells in (1, 12):
                share, alpha = screen_false_alarms(runs, reps, cells, a.trials * 5, a.seed)
                print(f"| {runs} × {reps} | {cells} | {share * 100:.3f} % | {alpha * 100:.3f} % |")
    if "sweep" in tables:
        print("\nthe assumed between-job sd (--job-sd) where one job per side is compared (gate fails):\n")
        print(assumed_sweep(a.trials, a.seed))
    if "runs" in tables:
        print("\nruns of one job (cryptoperf compare --fail-on slower):\n")
        print(table([run_compare(sc, a.trials if sc.cells == 1 else max(a.trials // 4, 100), a.seed)
                     for sc in scenarios()]))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
