"""Compare stored runs: what differs between their hosts, then every cell measured on both
sides; or the hosts of one run spread over several machines (``compare_hosts``).

Side A is the baseline. Each side is one run or several runs of the same build (``compare
3,4,5 6,7,8``), and side A may take the same study's earlier runs on the same host and build
as its history (``history_runs``). Cells are matched by (configuration, backend, label,
size_bytes), whatever CPU mask they ran under: a mask that differs is named first among the
host differences.

Two runs share no blocks, and a run as a whole shifts from one run to the next (process
layout, CPU frequency, the host's other tenants, page placement) by an amount no number of
repetitions inside it shrinks; on CI a job also changes the machine (another VM, other
neighbours, another hostname). So the runs, or the CI jobs that made them, are the unit
(``across_runs``): runs of one job (``across_runs.Session``) are compared run by run, runs of
several jobs job by job, each with the t interval on the units' means when there are three
units or more, which measures their variation; with one unit per side nothing measures it, and
each unit is assumed to vary by ``DEFAULT_RUN_SD_PCT`` (runs of one job) or
``DEFAULT_JOB_SD_PCT`` (two jobs) — the comparison says so. Repetitions far outside their run
are set aside first and named. The intervals are adjusted together over all matched cells
unless ``multiplicity`` is off, and each gets the verdict a study would give against the same
margin: "x % slower [CI]", "equivalent within ±m %" or "inconclusive". ``failing`` is the
regression gate of ``cryptoperf compare --fail-on``; ``Comparison.detectable`` what it can
catch. Cells measured on one side only are listed as unmatched. Host differences come first
because they are usually the explanation: another CPU, kernel, hypervisor or library version.
A history (``select_history``) is matched on what makes results comparable, not on the
hostname, and names every difference it accepted.

``compare_hosts`` compares the machines of one run (a study whose repetitions ran on several
nodes, side by side over the same hours): its outcomes are split by the machine that ran them
(``Outcome.host``, else the run's host), each machine's share is summarised as a run of its
own, and each machine is compared with the baseline machine by Welch's interval on their
repetitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from cryptoperf import across_runs, analysis, stats
from cryptoperf.cpumask import BASELINE
from cryptoperf.errors import NoComparison, UsageError
from cryptoperf.model import CellSummary, Delta, Outcome
from cryptoperf.store.stored_run import StoredRun

#: host checks that read a moment (steal, other load), not a setting: two runs always differ a
#: little, so only a change of state (ok → warning) is reported
SAMPLED_CHECKS = ("steal", "other load")



#: metric key (``stats.METRICS``) → a summary's per-repetition values of it.
_PER_REPETITION = {"latency": lambda s: s.p50_samples_ns, "throughput": lambda s: s.ops_per_s_samples,
                   "cpu_per_op": lambda s: s.process_cpu_ns_per_op_samples,
                   "server_cpu_per_op": lambda s: tuple(s.server_cpu_ns_per_op_by_block.values())}


def figure_of_merit(s: CellSummary, metric: str) -> stats.Estimate | None:
    """A cell's figure of merit in one run, what a study's trend over its runs plots: the
    geometric mean over its measured repetitions of ``metric`` (``stats.METRICS`` key:
    ``latency`` = per-repetition p50 in ns, ``throughput`` = ops/s, ``cpu_per_op`` = the worker
    process's CPU ns per operation) with its 95 % t interval on the log scale
    (``stats.log_mean``; no bounds below ``stats.MIN_BLOCKS`` repetitions) — the values ``compare``
    builds its interval on. None without a measured repetition. Raises KeyError for an unknown
    metric."""
    values = [v for v in _PER_REPETITION[metric](s) if v and v > 0]
    if not values:
        return None
    return stats.log_mean(values, min_n=stats.MIN_BLOCKS)

@dataclass(frozen=True)
class HostDifference:
    """One host property that differs: ``field`` (e.g. ``kernel``, ``library openssl``) and its
    value in run A and run B as text ('—' when absent)."""

    field: str
    a: str
    b: str

    def as_dict(self) -> dict[str, str]:
        """``field``, ``a``, ``b``."""
        return dict(self.__dict__)


def _hypervisor(hv: Any) -> str:
    if not isinstance(hv, dict):
        return "—"
    kind = hv.get("type") or {True: "yes", False: "none"}.get(hv.get("present"), "unknown")
    return f"{kind}, container {hv['container']}" if hv.get("container") else str(kind)


def _library(lib: Any) -> str:
    if not isinstance(lib, dict):
        return "—"
    text = f"{lib.get('library') or ''} {lib.get('library_version') or ''}".strip() or "?"
    return text + (" (FIPS)" if lib.get("fips") else "")


def _text(v: Any) -> str:
    if v is None or v == "":
        return "—"
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v)) or "none"
    return str(v)


def host_differences(a: dict[str, Any], b: dict[str, Any]) -> list[HostDifference]:
    """The properties of host fingerprints ``a`` and ``b`` (``hostinfo.fingerprint`` + checks)
    that differ, in this order: CPU model, crypto flags, logical CPUs, machine, kernel,
    hypervisor, hostname, worker version, library version per backend (union of both runs'
    backends), then host checks whose reading differs (``check cpu governor``, …; for the
    sampled checks in SAMPLED_CHECKS, only a change of state)."""
    out: list[HostDifference] = []

    def add(name: str, va: str, vb: str) -> None:
        if va != vb:
            out.append(HostDifference(name, va, vb))

    for key, name in (("cpu_model", "CPU model"), ("crypto_flags", "crypto flags"),
                      ("logical_cpus", "logical CPUs"), ("machine", "machine"), ("kernel", "kernel")):
        add(name, _text(a.get(key)), _text(b.get(key)))
    add("hypervisor", _hypervisor(a.get("hypervisor")), _hypervisor(b.get("hypervisor")))
    add("hostname", _text(a.get("hostname")), _text(b.get("hostname")))
    add("worker version", _text(a.get("worker_version")), _text(b.get("worker_version")))
    libs_a, libs_b = a.get("libraries") or {}, b.get("libraries") or {}
    for backend in list(libs_a) + [k for k in libs_b if k not in libs_a]:
        add(f"library {backend}", _library(libs_a.get(backend)), _library(libs_b.get(backend)))
    checks_a = {c.get("name"): c for c in a.get("checks") or [] if isinstance(c, dict)}
    checks_b = {c.get("name"): c for c in b.get("checks") or [] if isinstance(c, dict)}
    for name in list(checks_a) + [k for k in checks_b if k not in checks_a]:
        ca, cb = checks_a.get(name) or {}, checks_b.get(name) or {}
        if name in SAMPLED_CHECKS:  # a moment's reading: differs only when the state does
            if ca.get("state") != cb.get("state"):
                out.append(HostDifference(f"check {name}", f"{_text(ca.get('state'))} ({_text(ca.get('value'))})",
                                          f"{_text(cb.get('state'))} ({_text(cb.get('value'))})"))
            continue
        add(f"check {name}", _text(ca.get("value")), _text(cb.get("value")))
    return out


def _mask(cpu: str) -> str:
    return "none (unmasked)" if cpu == BASELINE else cpu


def mask_differences(pairs: Sequence[tuple[CellSummary, CellSummary]]) -> list[HostDifference]:
    """The CPU masks of matched cells that differ between run A and run B: one ``CPU mask``
    difference per pair of masks (``none (unmasked)`` → ``no-aesni``), naming how many of the
    matched cells it concerns when not all. A mask changes the code a library runs as much as
    another CPU would, so it is reported with the host's differences."""
    changed: dict[tuple[str, str], int] = {}
    for a, b in pairs:
        if a.cell.cpu != b.cell.cpu:
            key = (a.cell.cpu, b.cell.cpu)
            changed[key] = changed.get(key, 0) + 1
    return [HostDifference("CPU mask" if n == len(pairs) else f"CPU mask ({n} of {len(pairs)} cells)",
                           _mask(ca), _mask(cb)) for (ca, cb), n in changed.items()]


def match_key(s: CellSummary) -> tuple[str, str, str, int | None]:
    """(configuration, backend, label, size_bytes): the cells of two runs with equal keys are
    compared."""
    c = s.cell
    return (c.configuration, c.backend, c.label, c.size_bytes)


#: ``--fail-on undecided``: the same as ``inconclusive``, in the gate's own word.
UNDECIDED = "undecided"
#: What a regression gate's ``--fail-on`` may name (``failing``).
FAIL_ON = (stats.SLOWER, UNDECIDED, stats.INCONCLUSIVE)

#: The run-to-run sd (%) assumed for one run per side of one job (``across_runs``).
DEFAULT_RUN_SD_PCT = across_runs.DEFAULT_RUN_SD_PCT
#: The between-job sd (%) assumed for one job per side (``across_runs``).
DEFAULT_JOB_SD_PCT = across_runs.DEFAULT_JOB_SD_PCT


def failing(deltas: Sequence[Delta], fail_on: Sequence[str]) -> list[Delta]:
    """The deltas that fail a regression gate: with ``slower`` in ``fail_on``, those "slower"
    beyond the margin (not "x % slower, within the ±m % margin"); with ``inconclusive`` (or its
    synonym ``undecided``), the undecided ones (a delta without an interval counts as
    undecided)."""
    if UNDECIDED in fail_on:
        fail_on = tuple(fail_on) + (stats.INCONCLUSIVE,)
    out = []
    for d in deltas:
        v = d.verdict
        if v is None:
            bad = stats.INCONCLUSIVE in fail_on
        elif v.kind == stats.SLOWER:
            bad = stats.SLOWER in fail_on and not v.within_margin
        else:
            bad = v.kind in fail_on
        if bad:
            out.append(d)
    return out


@dataclass(frozen=True)
class Undecided:
    """A comparison the gate could not decide, with the worst its interval leaves possible.

    Attributes:
        delta: the comparison (its verdict ``inconclusive``, or no verdict at all).
        worst: the largest slowdown its interval allows, in the metric's own words
            (``p50 latency 31.3 % higher``, ``23.0 % fewer ops/s``); '' without an interval.
        worst_pct: that slowdown as the change of the metric in % (+31.3, −23.0); None without
            an interval.
    """

    delta: Delta
    worst: str
    worst_pct: float | None

    def as_dict(self) -> dict[str, Any]:
        """``cell`` (backend/label/size/configuration), ``worst``, ``worst_pct``."""
        d = self.delta
        return {"cell": f"{d.backend}/{d.label}/{d.size_bytes}/{d.configuration}", "worst": self.worst,
                "worst_pct": self.worst_pct}


def undecided(deltas: Sequence[Delta]) -> list[Undecided]:
    """The comparisons of ``deltas`` that decided nothing (inconclusive, or no interval), each
    with the largest slowdown its decisive interval allows: the upper bound of a latency or CPU
    ratio, the lower bound of a throughput ratio — what a gate that passed them has not ruled
    out."""
    out = []
    for d in deltas:
        if d.verdict is not None and d.verdict.kind != stats.INCONCLUSIVE:
            continue
        ci = d.decisive
        if ci is None:
            out.append(Undecided(d, "", None))
            continue
        key = stats.metric_key(d.verdict.metric)
        higher_is_slower = stats.METRICS[key][1]
        bound = ci.high if higher_is_slower else ci.low
        pct = (bound - 1.0) * 100.0
        if (bound > 1.0) != higher_is_slower:
            out.append(Undecided(d, "no slowdown", pct))
            continue
        amount = f"{stats.factor_text(bound)}×" if stats.factor_form(bound) else f"{abs(pct):.1f} %"
        out.append(Undecided(d, stats.change_words(key, bound > 1.0, amount), pct))
    return out


def _ids(runs: Sequence[StoredRun]) -> str:
    return ("run " if len(runs) == 1 else "runs ") + ", ".join(str(r.id) for r in runs)


def session(run: StoredRun) -> across_runs.Session:
    """The session that made ``run`` (its CI job, its boot: ``across_runs.Session.of``)."""
    return across_runs.Session.of(run.meta)


def jobs(runs: Sequence[StoredRun]) -> list[list[StoredRun]]:
    """``runs`` grouped by the session that made them (``session``), in first-seen order."""
    out: dict[str, list[StoredRun]] = {}
    for r in runs:
        out.setdefault(session(r).key, []).append(r)
    return list(out.values())


def _jobs_text(units: Sequence[Sequence[StoredRun]]) -> str:
    """``1 job (run 8)``, ``3 jobs (runs 7, 6, 5; run 4; run 3)``."""
    return (f"{len(units)} job{'s' if len(units) != 1 else ''} ("
            + "; ".join(_ids(u) for u in units) + ")")


@dataclass
class Comparison:
    """Side B against side A, cell by cell.

    Attributes:
        a, b: the first run of each side (A is the baseline); runs_a, runs_b: every run of each
            side, ``a`` and ``b`` first (side A's history after the runs named).
        host: host differences between ``a`` and ``b`` (empty when the fingerprints and the
            matched cells' CPU masks agree), a CPU mask difference first (``mask_differences``).
        deltas: one per matched cell, in run A's order; ``baseline`` and ``configuration`` are
            the cell's configuration; ratios are B ÷ A. An ``n/a`` delta still carries both
            p50 medians when each side has a measured repetition.
        only_a, only_b: cells measured on one side only.
        settings: how the verdicts were decided (margin, multiplicity).
        comparisons: deltas with an interval; level: each interval's level after adjustment.
        run_sd_pct: the run-to-run sd assumed (one run per side of one job), None when the runs
            measured it, when they are of several jobs, or for the machines of one run
            (``compare_hosts``).
        job_sd_pct: the between-job sd assumed when the runs are of one job per side (None
            otherwise).
        history: how many of ``runs_a`` are history (``select_history``), not named by the user;
            selection: how they were chosen (None without ``--history``).
        names: the sides' names (``run 3``, ``runs 3, 4, 5``, a machine's name).
        set_aside: the repetitions set aside as disturbed (``across_runs.SetAside``).
        spreads: per delta, how much its units vary (``across_runs.Spread``, or None).
    """

    a: StoredRun
    b: StoredRun
    host: list[HostDifference]
    deltas: list[Delta]
    only_a: list[CellSummary]
    only_b: list[CellSummary]
    settings: analysis.Settings
    comparisons: int
    level: float
    runs_a: list[StoredRun] = field(default_factory=list)
    runs_b: list[StoredRun] = field(default_factory=list)
    run_sd_pct: float | None = None
    history: int = 0
    names: tuple[str, str] = ("A", "B")
    job_sd_pct: float | None = None
    selection: "HistorySelection | None" = None
    set_aside: list[across_runs.SetAside] = field(default_factory=list)
    spreads: list[across_runs.Spread | None] = field(default_factory=list)
    assumed_sd_pct: tuple[float, float] = (DEFAULT_RUN_SD_PCT, DEFAULT_JOB_SD_PCT)

    @property
    def unit(self) -> str:
        """``run`` when every run compared was made by one session (one job), else ``job``."""
        return "run" if len(jobs(self.runs_a + self.runs_b)) <= 1 else "job"

    @property
    def unknown_sessions(self) -> list[StoredRun]:
        """The runs compared that recorded no session (stored before cryptoperf recorded jobs)."""
        return [r for r in self.runs_a + self.runs_b if not session(r).known]

    @property
    def run_variation(self) -> str:
        """How the variation of whole runs (or jobs) entered the intervals, in one sentence."""
        unknown = self.unknown_sessions
        legacy = (f"; {_ids(unknown)} recorded no job or boot (stored before cryptoperf recorded them): each "
                  "counted as a job of its own" if unknown and len(self.runs_a) + len(self.runs_b) > 1 else "")
        hist = (f" ({len(self.runs_a) - self.history} named and {self.history} earlier runs of the same study on a "
                f"comparable host and the same build)" if self.history else "")
        if self.unit == "job":
            ja, jb = jobs(self.runs_a), jobs(self.runs_b)
            if len(ja) + len(jb) >= 3:
                return (f"jobs as the unit: the runs come from {len(ja) + len(jb)} jobs (CI jobs, else boots), which "
                        f"vary more than the runs of one job, so the intervals are t intervals on each job's mean "
                        f"of its runs' geometric means, {_jobs_text(jb)} against {_jobs_text(ja)}{hist}, and the "
                        f"spread between jobs is measured{legacy}")
            return (f"between-job variation is unknown (one job per side): each job is assumed to vary by an sd of "
                    f"{self.job_sd_pct:g} % (--job-sd) on top of the spread between its runs (its repetitions' "
                    f"with one run), {_jobs_text(jb)} against {_jobs_text(ja)}{hist}; runs from 3 jobs or more "
                    f"(--history K over the baseline's earlier jobs) measure it{legacy}")
        if len(self.runs_a) + len(self.runs_b) >= 3:
            return (f"runs as the unit: the intervals are t intervals on each run's geometric mean, "
                    f"{_ids(self.runs_b)} against {_ids(self.runs_a)}{hist}, all made in one session "
                    f"({session(self.a).text}), so the spread between runs is measured")
        if self.run_sd_pct is None:
            return "the machines of one run, measured over the same hours: Welch intervals on their repetitions"
        return (f"run-to-run variation is unknown (one run per side and no history): each run is assumed to "
                f"vary by an sd of {self.run_sd_pct:g} % on top of its repetitions' spread (--run-sd); several "
                "runs per side (compare A1,A2,A3 B1,B2,B3) or --history K measure it")

    @property
    def method(self) -> str:
        """How the intervals were made (``analysis.method_text``), with the screen of disturbed
        repetitions for comparisons across runs."""
        how = self.run_variation
        if self.settings.outlier_screen and self.spreads and any(s is not None for s in self.spreads):
            n = len({s.cell for s in self.set_aside})
            how += f", {across_runs.SCREEN_TEXT}" + (f" (in {n} comparison{'s' if n != 1 else ''})" if n else "")
        return analysis.method_text(self.settings, self.comparisons, self.level, paired=False, deltas=self.deltas,
                                    how=how)

    @property
    def spread(self) -> across_runs.SpreadSummary | None:
        """How much the units of this comparison vary, over its cells, against the sd assumed
        when a comparison has one unit per side (``across_runs.spread_summary``)."""
        return across_runs.spread_summary(self.spreads, *self.assumed_sd_pct)

    def detectable(self) -> across_runs.Detectable | None:
        """The smallest slowdown this comparison's gate catches 80 % of the time at the spread
        its units showed (``across_runs.detectable``), None without an interval."""
        return across_runs.detectable(self.spreads, self.comparisons, self.settings.level, self.settings.margin_pct,
                                      *self.assumed_sd_pct)

    def failing(self, fail_on: Sequence[str]) -> list[Delta]:
        """The deltas that fail a regression gate (``failing``)."""
        return failing(self.deltas, fail_on)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``baseline_run`` and ``run`` (id, kind, study, started_at, status of
        each side's first run), ``baseline_runs`` and ``runs`` (every run id of each side),
        ``history_runs`` (side A's runs taken from history), ``history`` (``HistorySelection.as_dict``,
        None without ``--history``), ``run_variation`` (``method`` sentence, ``unit`` run or job,
        ``jobs`` (each side's run ids per job), ``sessions`` (per run id: job, boot_id),
        ``assumed_run_sd_pct``, ``assumed_job_sd_pct``, ``spread``: ``SpreadSummary.as_dict``
        with its ``warning``), ``set_aside`` (the disturbed repetitions, ``SetAside.as_dict``),
        ``detectable_change`` (``Detectable.as_dict`` or None), ``host_differences``,
        ``deltas`` (``Delta.as_dict``, verdicts included), ``unmatched`` (cells with the run id
        they are in), ``analysis`` (settings, comparisons, level, method)."""
        def run(r: StoredRun) -> dict[str, Any]:
            m = r.meta
            return {"id": r.id, "kind": m.get("kind"), "study": m.get("study_name"),
                    "started_at": m.get("started_at"), "status": m.get("status")}
        unmatched = ([{"run_id": self.a.id, **s.cell.as_dict()} for s in self.only_a]
                     + [{"run_id": self.b.id, **s.cell.as_dict()} for s in self.only_b])
        runs_a, runs_b = self.runs_a or [self.a], self.runs_b or [self.b]
        spread, detectable = self.spread, self.detectable()
        variation = {"method": self.run_variation, "unit": self.unit,
                     "jobs": {"baseline": [[r.id for r in u] for u in jobs(runs_a)],
                              "candidate": [[r.id for r in u] for u in jobs(runs_b)]},
                     "sessions": {str(r.id): {"job": session(r).job, "boot_id": session(r).boot_id}
                                  for r in runs_a + runs_b},
                     "assumed_run_sd_pct": self.run_sd_pct, "assumed_job_sd_pct": self.job_sd_pct,
                     "spread": spread.as_dict() if spread is not None else None}
        return {"baseline_run": run(self.a), "run": run(self.b),
                "baseline_runs": [r.id for r in runs_a], "runs": [r.id for r in runs_b],
                "history_runs": [r.id for r in runs_a[len(runs_a) - self.history:]] if self.history else [],
                "history": self.selection.as_dict() if self.selection is not None else None,
                "run_variation": variation, "set_aside": [s.as_dict() for s in self.set_aside],
                "detectable_change": detectable.as_dict() if detectable is not None else None,
                "host_differences": [h.as_dict() for h in self.host],
                "deltas": [d.as_dict() for d in self.deltas], "unmatched": unmatched,
                "analysis": {"settings": self.settings.as_dict(), "comparisons": self.comparisons,
                             "level": self.level, "method": self.method}}


def compare_runs(a: StoredRun, b: StoredRun, margin_pct: float | None = None, multiplicity: bool = True,
                 names: tuple[str, str] | None = None,
                 run_sd_pct: float | None = DEFAULT_RUN_SD_PCT) -> Comparison:
    """Compare run ``b`` with run ``a`` (the baseline), cell by cell: ``compare_run_sets`` with
    one run per side (``run_sd_pct`` assumed when both are of one job; None for Welch's interval
    on the repetitions alone, as for the machines of one run)."""
    return compare_run_sets([a], [b], margin_pct, multiplicity, names, run_sd_pct)


def compare_run_sets(runs_a: Sequence[StoredRun], runs_b: Sequence[StoredRun], margin_pct: float | None = None,
                     multiplicity: bool = True, names: tuple[str, str] | None = None,
                     run_sd_pct: float | None = DEFAULT_RUN_SD_PCT, history: int | "HistorySelection" = 0,
                     job_sd_pct: float | None = DEFAULT_JOB_SD_PCT, outlier_screen: bool = True) -> Comparison:
    """Compare the runs of side B with those of side A (the baseline), cell by cell, with the
    runs or the jobs that made them as the unit (``across_runs.compare_cells``; module docstring).

    ``runs_a``/``runs_b``: one run or more each, the first of each named in the host
    differences; the last ``history`` runs of ``runs_a`` came from ``select_history`` (a count,
    or the ``HistorySelection`` itself, whose accepted differences the comparison then carries).
    A cell is matched when the first run of side A has it and some run of side B does; each
    side's runs of it are compared as a set. ``margin_pct`` defaults to the first A run's study
    margin (the default margin for a ``speed`` run). ``names`` name the two sides in reasons
    (default ``run <id>``/``runs <ids>``). ``run_sd_pct``: the run-to-run sd assumed with one run
    per side of one job (None: Welch on the repetitions, needing ``stats.MIN_BLOCKS`` on each
    side); ``job_sd_pct``: the between-job sd assumed with one job per side (None: the default).
    ``outlier_screen`` False keeps every repetition (only to measure what the screen buys,
    ``cryptoperf.simulate.runs``). Raises ValueError for an empty side.
    """
    if not runs_a or not runs_b:
        raise ValueError("each side needs a run")
    selection = history if isinstance(history, HistorySelection) else None
    history = len(selection.runs) if selection is not None else int(history)
    a, b = runs_a[0], runs_b[0]
    margin = float(a.option("margin_pct")) if margin_pct is None else margin_pct
    settings = analysis.Settings(margin_pct=margin, multiplicity=multiplicity, outlier_screen=outlier_screen,
                                 noise_threshold_pct=float(a.option("noise_threshold_pct")))
    names = names or (_ids(runs_a[:len(runs_a) - history] or runs_a), _ids(runs_b))
    job_sd_pct = DEFAULT_JOB_SD_PCT if job_sd_pct is None else job_sd_pct

    def side(runs: Sequence[StoredRun], key: tuple) -> list[across_runs.RunCell]:
        return [across_runs.RunCell(s, session(r).key, f"run {r.id}")
                for r in runs for s in r.summaries.values() if match_key(s) == key]

    keys_b = {match_key(s) for r in runs_b for s in r.summaries.values()}
    keys_a = {match_key(s) for s in a.summaries.values()}
    sets, only_a = [], []
    for s_a in a.summaries.values():
        key = match_key(s_a)
        if key in keys_b:
            sets.append((side(runs_a, key), side(runs_b, key)))
        else:
            only_a.append(s_a)
    run_sd = None if run_sd_pct is None else run_sd_pct / 100.0
    result = across_runs.compare_cells(sets, names, settings, analysis.context_of(a.host, a.study), run_sd,
                                       job_sd_pct / 100.0)
    firsts = [(x[0].summary, y[0].summary) for x, y in sets]
    only_b = [s for s in b.summaries.values() if match_key(s) not in keys_a]
    units = jobs(list(runs_a) + list(runs_b))
    one_job = len(units) <= 1
    return Comparison(a=a, b=b, host=mask_differences(firsts) + host_differences(a.host, b.host),
                      deltas=result.deltas, only_a=only_a, only_b=only_b, settings=settings,
                      comparisons=result.comparisons, level=result.level, runs_a=list(runs_a), runs_b=list(runs_b),
                      run_sd_pct=run_sd_pct if one_job and len(runs_a) + len(runs_b) < 3 else None,
                      history=history, names=names,
                      job_sd_pct=job_sd_pct if not one_job and len(jobs(runs_a)) + len(jobs(runs_b)) < 3 else None,
                      selection=selection, set_aside=result.set_aside, spreads=result.spreads,
                      assumed_sd_pct=(DEFAULT_RUN_SD_PCT if run_sd_pct is None else run_sd_pct, job_sd_pct))


#: Host properties a history accepts differing: they do not change what a result measures (a CI
#: runner's hostname changes with every job); the host checks' readings are a moment's.
ACCEPTED = ("hostname",)


def _differs(a: StoredRun, c: StoredRun) -> list[HostDifference]:
    """The host differences between ``a`` and ``c`` that make ``c`` no repeat of ``a``: every
    one but ``ACCEPTED`` and the host checks' readings."""
    return [d for d in host_differences(a.host, c.host) if d.field not in ACCEPTED and not d.field.startswith("check ")]


def same_build(a: StoredRun, c: StoredRun) -> bool:
    """True when run ``c`` is of the same study (or both ``speed``) as ``a``, on a comparable
    host — the same CPU model, crypto flags, logical CPUs, machine, kernel and hypervisor —
    with the same worker and library versions: what makes ``c`` a repeat of ``a`` rather than a
    change. The hostname (``ACCEPTED``) and the host checks' readings may differ."""
    if (a.meta.get("kind"), a.meta.get("study_name")) != (c.meta.get("kind"), c.meta.get("study_name")):
        return False
    return not _differs(a, c)


@dataclass
class HistorySelection:
    """The history of a run (``select_history``): the earlier runs taken, what they were
    allowed to differ in, and the runs left out with why.

    Attributes:
        asked: how many runs were asked for (``--history K``).
        runs: the runs taken, newest first.
        accepted: (field, number of distinct values) of every host property that differs
            among the run and its history and was accepted (``ACCEPTED``, host checks),
            e.g. ``("hostname", 6)``.
        left_out: (run id, why) of each run examined and left out, e.g. ``(7, "kernel differs")``.
    """

    asked: int
    runs: list[StoredRun]
    accepted: list[tuple[str, int]] = field(default_factory=list)
    left_out: list[tuple[int, str]] = field(default_factory=list)
    of: int | None = None

    @property
    def text(self) -> str:
        """``history: 5 runs (9, 8, 7, 6, 5) from 5 jobs; accepted differences: hostname (6
        values)``; with fewer runs than asked, ``history: 1 of the 5 earlier runs asked for
        repeat run 10 (…): run 9 from 1 job; …; left out: run 8 (kernel differs)``."""
        units = len(jobs(self.runs))
        found = (", ".join(str(r.id) for r in self.runs) + f" from {units} job{'s' if units != 1 else ''}"
                 if self.runs else "")
        if len(self.runs) < self.asked:
            text = (f"history: {len(self.runs)} of the {self.asked} earlier runs asked for repeat run {self.of} "
                    "(same study, CPU, kernel, hypervisor, worker and libraries)"
                    + (f": {'runs' if len(self.runs) > 1 else 'run'} {found}" if found else ""))
        else:
            text = f"history: {len(self.runs)} run{'s' if len(self.runs) != 1 else ''} ({found.replace(' from', ') from', 1)}"
        accepted = ", ".join(f"{f} ({n} values)" for f, n in self.accepted) or "none"
        text += f"; accepted differences: {accepted}"
        if self.left_out:
            shown = ", ".join(f"run {i} ({why})" for i, why in self.left_out[:6])
            text += f"; left out: {shown}" + (f" and {len(self.left_out) - 6} more" if len(self.left_out) > 6 else "")
        return text

    def as_dict(self) -> dict[str, Any]:
        """``of`` (the run whose history it is), ``asked``, ``runs`` (ids), ``accepted_differences``
        ([{field, values}]), ``left_out`` ([{run_id, why}])."""
        return {"of": self.of, "asked": self.asked, "runs": [r.id for r in self.runs],
                "accepted_differences": [{"field": f, "values": n} for f, n in self.accepted],
                "left_out": [{"run_id": i, "why": why} for i, why in self.left_out]}


def select_history(a: StoredRun, candidates: Sequence[StoredRun], k: int) -> HistorySelection:
    """Up to ``k`` runs of ``candidates`` (newest first) that repeat ``a`` (``same_build``),
    ``a`` itself left out: the history that measures how much ``a``'s cells vary from run to
    run and job to job (``compare --history K``), with the differences it accepted among them
    and the runs examined and left out, each with its first differences."""
    runs: list[StoredRun] = []
    left: list[tuple[int, str]] = []
    for c in candidates:
        if c.id == a.id or len(runs) >= max(k, 0):
            continue
        if (a.meta.get("kind"), a.meta.get("study_name")) != (c.meta.get("kind"), c.meta.get("study_name")):
            left.append((c.id, "another study" if a.meta.get("kind") == c.meta.get("kind") else "another kind"))
            continue
        differs = _differs(a, c)
        if differs:
            left.append((c.id, ", ".join(d.field for d in differs[:2]) + (" differ" if len(differs) > 1 else " differs")))
            continue
        runs.append(c)
    values: dict[str, set[str]] = {}
    for c in runs:
        for d in host_differences(a.host, c.host):
            if d.field in ACCEPTED or d.field.startswith("check "):
                values.setdefault(d.field, {d.a}).add(d.b)
    return HistorySelection(k, runs, [(f, len(v)) for f, v in values.items()], left, a.id)


def history_runs(a: StoredRun, candidates: Sequence[StoredRun], k: int) -> list[StoredRun]:
    """The runs ``select_history`` takes: up to ``k`` of ``candidates`` (newest first) that
    repeat ``a`` (``same_build``), ``a`` itself left out."""
    return select_history(a, candidates, k).runs


# --------------------------------------------------------------------------- hosts of one run


def host_key(host: dict[str, Any]) -> tuple[str, str]:
    """(hostname, CPU model) of a host fingerprint: the machines of one run are told apart by
    it (a machine keeps it from one repetition to the next; the checks' readings do not)."""
    return (str(host.get("hostname") or ""), str(host.get("cpu_model") or ""))


@dataclass
class HostShare:
    """The repetitions of one run that one machine ran.

    Attributes:
        name: the machine's name in tables and ``--baseline-host``: its hostname, with the CPU
            model in parentheses when two machines of the run share a hostname.
        host: its fingerprint (the first of its repetitions').
        run: its repetitions as a stored run of their own (the run's meta and study, this
            host), analysed with the run's settings.
    """

    name: str
    host: dict[str, Any]
    run: StoredRun

    @property
    def repetitions(self) -> int:
        """Analysed repetitions (neither calibration nor superseded) this machine ran."""
        return len(analysis.analysed(self.run.outcomes))

    @property
    def measured(self) -> int:
        """How many of them were measured (status ok)."""
        return sum(1 for o in analysis.analysed(self.run.outcomes) if o.ok)

    def as_dict(self) -> dict[str, Any]:
        """``name``, ``hostname``, ``cpu_model``, ``repetitions``, ``measured``."""
        hostname, cpu = host_key(self.host)
        return {"name": self.name, "hostname": hostname or None, "cpu_model": cpu or None,
                "repetitions": self.repetitions, "measured": self.measured}


def host_shares(run: StoredRun) -> list[HostShare]:
    """The machines that ran ``run``'s repetitions, in the order of their first repetition:
    each repetition goes to ``Outcome.host`` (the machine that ran it), or to the run's own
    host when that is None (every repetition of a run on one machine)."""
    groups: dict[tuple[str, str], tuple[dict[str, Any], list[Outcome]]] = {}
    for o in run.outcomes:
        host = o.host if o.host is not None else run.host
        groups.setdefault(host_key(host), (host, []))[1].append(o)
    hostnames = [k[0] for k in groups]
    out = []
    for i, ((hostname, cpu), (host, outcomes)) in enumerate(groups.items()):
        name = hostname or cpu or f"host {i + 1}"
        if hostname and hostnames.count(hostname) > 1:
            name = f"{hostname} ({cpu or '?'})"
        meta = dict(run.meta, host=host)
        out.append(HostShare(name, host, StoredRun.from_outcomes(meta, run.study, outcomes, run.analysis.settings)))
    return out


@dataclass
class HostComparison:
    """The machines of one run side by side: each against the baseline machine.

    Attributes:
        run: the stored run.
        baseline: the baseline machine's share; hosts: every machine's, baseline first.
        comparisons: one ``Comparison`` per other machine (A = the baseline machine, B = that
            one), in the order of ``hosts[1:]``: host differences, a delta per cell both
            measured (Welch's interval on each machine's repetitions, adjusted over that
            machine's matched cells, with the verdict), the cells only one measured.
    """

    run: StoredRun
    baseline: HostShare
    hosts: list[HostShare]
    comparisons: list[Comparison]

    def failing(self, fail_on: Sequence[str]) -> list[tuple[str, Delta]]:
        """(machine name, delta) of every delta failing the gate (``Comparison.failing``)."""
        return [(h.name, d) for h, c in zip(self.hosts[1:], self.comparisons) for d in c.failing(fail_on)]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``run`` (id, kind, study, started_at, status), ``baseline_host``,
        ``hosts`` (``HostShare.as_dict``), ``comparisons`` (per other machine: ``host``,
        ``host_differences``, ``deltas``, ``unmatched`` with the machine each cell is on,
        ``analysis``)."""
        m = self.run.meta
        comparisons = []
        for h, c in zip(self.hosts[1:], self.comparisons):
            d = c.as_dict()
            unmatched = ([{"host": self.baseline.name, **s.cell.as_dict()} for s in c.only_a]
                         + [{"host": h.name, **s.cell.as_dict()} for s in c.only_b])
            comparisons.append({"host": h.name, "baseline_host": self.baseline.name,
                                "host_differences": d["host_differences"], "deltas": d["deltas"],
                                "unmatched": unmatched, "analysis": d["analysis"]})
        return {"run": {"id": self.run.id, "kind": m.get("kind"), "study": m.get("study_name"),
                        "started_at": m.get("started_at"), "status": m.get("status")},
                "baseline_host": self.baseline.name, "hosts": [h.as_dict() for h in self.hosts],
                "comparisons": comparisons}


def compare_hosts(run: StoredRun, baseline_host: str | None = None, margin_pct: float | None = None,
                  multiplicity: bool = True) -> HostComparison:
    """Compare the machines that ran ``run``: each against ``baseline_host`` (a machine's
    name, or its hostname; default the first machine, ``host_shares``), cell by cell, with
    ``compare_runs`` and Welch's interval on the repetitions (the machines ran over the same
    hours: no run-to-run sd is assumed; margin: the run's study margin unless ``margin_pct``).

    Raises NoComparison when the run ran on one machine only; UsageError when
    ``baseline_host`` names none of its machines (the message lists them).
    """
    hosts = host_shares(run)
    if len(hosts) < 2:
        raise NoComparison(f"run {run.id} ran on one host only ({hosts[0].name if hosts else 'no repetition'}), "
                           "so there are no hosts to compare; `compare --by host` needs a run whose "
                           "repetitions ran on several machines")
    if baseline_host is not None:
        chosen = [h for h in hosts if baseline_host in (h.name, host_key(h.host)[0])]
        if not chosen:
            raise UsageError(f"--baseline-host {baseline_host}: run {run.id} ran on "
                             + ", ".join(h.name for h in hosts) + "; name one of them")
        hosts.remove(chosen[0])
        hosts.insert(0, chosen[0])
    base = hosts[0]
    comparisons = [compare_runs(base.run, h.run, margin_pct=margin_pct, multiplicity=multiplicity,
                                names=(base.name, h.name), run_sd_pct=None) for h in hosts[1:]]
    return HostComparison(run=run, baseline=base, hosts=hosts, comparisons=comparisons)
