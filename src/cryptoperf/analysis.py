"""Analysis: from outcomes to per-cell summaries and to deltas with intervals and verdicts.

This is where the study's structure meets ``stats``. Within a study, each configuration is
compared with the baseline of the same group **block by block** (and so is each ``[[contrast]]``,
one configuration against another, its reference): one log ratio per block in
which both measured (blocks where either side did not drop out, and the delta says how many),
a t interval on those (from 5 blocks, on those left once the outlier blocks of the verdict's
metric are set aside: ``outliers.outlier_blocks``, named in the delta's note), every interval of
the study adjusted together for multiplicity
(Bonferroni, on by default), and a verdict against the equivalence margin. Stored runs have no
blocks in common, so ``across_runs`` compares them with the runs (or the CI jobs that made them)
as the unit, on the helpers below. The error rates of these rules are measured by simulation
(``cryptoperf.simulate``, docs/methodology.md "Statistics").

Everything is computed once per stored run (``analyse``) and every report is rendered from the
resulting ``Analysis``; nothing here imports the runner.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from cryptoperf import speedstats, stats, workloads
from cryptoperf import scaling as scaling_mod
from cryptoperf.stats import outliers
from cryptoperf.cpumask import BASELINE as BASELINE_MASK
from cryptoperf.model import INVALID, OK, REJECTED, UNSUPPORTED, Cell, CellSummary, Delta, Outcome
from cryptoperf.run import disturbance
from cryptoperf.result import WorkerResult
from cryptoperf.workloads import WorkloadAnalysis, access

MIN_BLOCKS = stats.MIN_BLOCKS


@dataclass(frozen=True)
class Settings:
    """How a stored run's comparisons are decided.

    Attributes:
        level: family-wise confidence level (0.95): with ``multiplicity``, all of a study's
            intervals hold together with this probability; without, each one alone does.
        margin_pct: equivalence margin m: "equivalent" means the interval lies inside ± m %.
        multiplicity: adjust the intervals of all comparisons together (Bonferroni).
        looks: how many times a sequential study (``until = "decided"``) may look at its
            comparisons (1 for a fixed study); the adjustment covers every look.
        noise_threshold_pct: CV across repetitions above which the noise table warns (it
            does not enter any verdict).
        verdict_on: the metric verdicts are decided on (``stats.METRICS``: ``latency``, the
            per-repetition p50; ``throughput``, ops/s; ``cpu_per_op``, CPU ns per operation).
        speed_baseline: a ``speed`` run's ``--baseline`` backend, which its other backends
            are compared with (``speedstats``); None for a study, or without one.
        outlier_screen: set outlier blocks aside from paired comparisons (``_screened``);
            False only to measure what the screen buys (``cryptoperf.simulate``).
        verdict_on_ops: operation label → the metric that operation's verdicts are decided on
            (its ``[[operation]] verdict_on``), instead of ``verdict_on``.
    """

    level: float = stats.DEFAULT_LEVEL
    margin_pct: float = stats.DEFAULT_MARGIN_PCT
    multiplicity: bool = True
    looks: int = 1
    noise_threshold_pct: float = 10.0
    verdict_on: str = "latency"
    speed_baseline: str | None = None
    outlier_screen: bool = True
    verdict_on_ops: Mapping[str, str] = field(default_factory=dict)

    def verdict_on_of(self, label: str) -> str:
        """The ``verdict_on`` of the cells whose row label is ``label``: their operation's own
        (``verdict_on_ops``, keyed by the operation's label; a row of it is that label, or that
        label with `` @ `` and its load level or thread count), else the study's."""
        for op_label, metric in self.verdict_on_ops.items():
            if label == op_label or label.startswith(op_label + " @ "):
                return metric
        return self.verdict_on

    @property
    def metric(self) -> str:
        """The verdicts' metric for people, e.g. ``p50 latency``."""
        if self.verdict_on == stats.BY_LOAD:
            text = ("throughput for closed loads and jobs, CPU time per operation for byte-rate loads, "
                    "p50 latency for other open loads and primitives")
        else:
            text = stats.METRICS[self.verdict_on][0]
        own = "; ".join(f"{label}: {stats.METRICS[m][0] if m in stats.METRICS else m}"
                        for label, m in self.verdict_on_ops.items())
        return f"{text} ({own})" if own else text

    def family(self, comparisons: int) -> tuple[int, int]:
        """(comparisons, looks) each interval is adjusted over (``stats.adjusted_level``): the
        ``comparisons`` with ``multiplicity`` (at least 1), else 1; the sequential looks either
        way."""
        return (max(comparisons, 1) if self.multiplicity else 1), self.looks

    def as_dict(self) -> dict[str, Any]:
        """Field name → value."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Settings":
        """Settings from ``as_dict`` output (unknown keys ignored, missing ones default)."""
        known = {k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class Context:
    """What the analysis of a run needs beyond its outcomes and settings.

    Attributes:
        series: the configurations in display order (the baseline, then the study file's), for
            the workload figures' ordering; empty for ``speed``.
        host_cpus: the CPUs of the host the run measured on (CPU % of the host).
        transactions: workload → (one, many): what one transaction is as the worker names it
            (``("handshake", "handshakes")``), for verdict texts; workloads it does not name read
            "transaction(s)".
        p99_bounds_ms: operation label → its latency objective (``p99_bound_ms``).
        contrasts: the study's ``[[contrast]]`` pairs, (reference, configuration) each.
        max_other_load_pct: the study's limit on other load (``max_other_load_pct``), None for
            ``speed``; host: the run's host fingerprint (its CPUs, for repetitions without their
            own) — both for the repetitions kept beside a steady load (``constant_load``).
    """

    series: tuple[str, ...] = ()
    host_cpus: int = 1
    transactions: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    p99_bounds_ms: Mapping[str, float] = field(default_factory=dict)
    contrasts: tuple[tuple[str, str], ...] = ()
    max_other_load_pct: float | None = None
    host: Mapping[str, Any] = field(default_factory=dict)

    def transaction(self, op: str, load: str | None) -> stats.Transaction:
        """What one operation of a cell is, for its verdict's text: a primitive's ``operation``
        (``ops/s``); a workload's transaction (``handshakes/s``); a job's in targets per minute,
        the figure a job is judged by (``targets/min``)."""
        if load is None:
            return stats.OPERATION
        one, many = self.transactions.get(op, ("transaction", "transactions"))
        return stats.Transaction.named(one, many, "min" if load.startswith("targets") else "s")


def context_of(host: Mapping[str, Any] | None, study: Any = None) -> Context:
    """The ``Context`` of a run from its host fingerprint (CPUs; what the worker called a
    transaction of each workload, ``hostinfo.fingerprint``'s ``workloads``) and its study
    (configuration order, latency objectives, contrasts; None for ``speed``)."""
    host = host or {}
    words = {}
    for name, spec in (host.get("workloads") or {}).items():
        t = (spec or {}).get("transaction") or {}
        if t.get("one") and t.get("many"):
            words[name] = (str(t["one"]), str(t["many"]))
    try:
        cpus = max(1, int(host.get("logical_cpus") or 1))
    except (TypeError, ValueError):
        cpus = 1
    series: tuple[str, ...] = ()
    bounds: dict[str, float] = {}
    pairs = tuple((c.baseline, c.configuration) for c in getattr(study, "contrasts", ()))
    if study is not None:
        series = (study.baseline,) + tuple(c.name for c in study.configurations if c.name != study.baseline)
        bounds = {o.label: float(o.p99_bound_ms) for o in study.operations if getattr(o, "p99_bound_ms", None)}
    limit = getattr(study, "max_other_load_pct", None)
    return Context(series, cpus, words, bounds, pairs, None if limit is None else float(limit), dict(host))


def decided_on(deltas: Iterable[Delta]) -> str:
    """The metrics the verdicts of ``deltas`` were decided on, most used first, with their
    counts when there are several: ``throughput``; ``throughput (12 comparisons), p50 latency
    (4)``; '' without verdicts."""
    counts: dict[str, int] = {}
    for d in deltas:
        if d.verdict is not None:
            counts[d.verdict.metric] = counts.get(d.verdict.metric, 0) + 1
    if len(counts) <= 1:
        return next(iter(counts), "")
    (first, n), *rest = sorted(counts.items(), key=lambda kv: -kv[1])
    return ", ".join([f"{first} ({n} comparison{'s' if n != 1 else ''})"] + [f"{m} ({k})" for m, k in rest])


#: How the paired intervals' outlier screen works, in every report's method (``method_text``).
SCREEN_TEXT = (f"outlier blocks set aside (generalized ESD test with false alarms at 1/{1 / outliers.OUTLIER_ALPHA_SHARE:g} "
               f"of the error rate of the interval, only beyond ±{outliers.OUTLIER_FLOOR_PCT:g} % of the median ratio, at most "
               f"{outliers.OUTLIER_MAX_SHARE * 100:g} % of the blocks, from {outliers.OUTLIER_MIN_BLOCKS} blocks)")


def method_text(settings: Settings, comparisons: int, level: float, paired: bool = True,
                deltas: Iterable[Delta] = (), how: str | None = None) -> str:
    """How the intervals of a stored run were made, for every report: e.g. "95 % intervals,
    paired t on per-block log ratios, outlier blocks set aside (…; in 2 comparisons); Bonferroni
    over 24 comparisons: each interval at 99.79 %", ending with the metrics the verdicts of
    ``deltas`` were decided on (``decided_on``; the settings' metric when there are none).
    ``how`` replaces the interval's description (e.g. runs as the unit,
    ``compare.Comparison.run_variation``)."""
    how = how or ("paired t interval on per-block log ratios" if paired
                  else "Welch t interval on the log values of each run's repetitions")
    if paired and settings.outlier_screen:
        deltas = list(deltas)
        screened = sum(1 for d in deltas if d.set_aside)
        how += f", {SCREEN_TEXT}" + (f" (in {screened} comparison{'s' if screened != 1 else ''})" if screened else "")
    text = f"{settings.level * 100:g} % intervals, {how}"
    if settings.multiplicity and comparisons > 1 or settings.looks > 1:
        looks = f" and {settings.looks} looks" if settings.looks > 1 else ""
        text += (f"; Bonferroni over {comparisons} comparison{'s' if comparisons != 1 else ''}{looks}: "
                 f"each interval at {level * 100:.4g} % so that all hold together at {settings.level * 100:g} %")
    elif not settings.multiplicity and comparisons > 1:
        text += f"; no multiplicity adjustment (each of the {comparisons} intervals holds alone at {settings.level * 100:g} %)"
    return text + f"; equivalence margin ±{settings.margin_pct:g} %; verdicts on {decided_on(deltas) or settings.metric}"


@dataclass(frozen=True)
class Disturbance:
    """A repetition the host disturbed (steal or other load above the study's limits).

    Attributes:
        cell: the cell's key; block: its block; why: what disturbed it.
        rerun: True for an attempt that was run again (superseded: not analysed), False for one
            that was analysed, flagged (its re-run was disturbed too).
    """

    cell: str
    block: int
    why: str
    rerun: bool

    def as_dict(self) -> dict[str, Any]:
        """``cell``, ``block``, ``why``, ``rerun``."""
        return {"cell": self.cell, "block": self.block, "why": self.why, "rerun": self.rerun}


def disturbances(outcomes: Iterable[Outcome]) -> tuple[Disturbance, ...]:
    """The disturbed repetitions of a run (calibration left out), by cell then block."""
    out = []
    for o in outcomes:
        if o.repetition.calibration:
            continue
        if o.superseded:
            out.append(Disturbance(o.cell.key, o.repetition.block, o.disturbed or "disturbed", True))
        elif o.disturbed and o.ok:
            out.append(Disturbance(o.cell.key, o.repetition.block, o.disturbed, False))
    return tuple(sorted(out, key=lambda d: (d.cell, d.block, not d.rerun)))


@dataclass
class Analysis:
    """Everything derived from a stored run's outcomes, computed once.

    Attributes:
        summaries: per-cell summaries, by cell key, in first-seen order.
        deltas: every configuration against the baseline of its group, then the contrasts.
        settings: how they were decided.
        comparisons: the deltas with an interval (the family the adjustment covers).
        level: the confidence level of each interval after the adjustment.
        cpu_masks: every CPU mask other than ``baseline`` its cells ran under → whether it took
            any capability away on the machine that ran them (``cpu_masks``).
        workloads: the workload figures, per level, side and phase (``workloads.analyse``).
        fips_unapproved: cell key → why the FIPS module does not approve the operation as its
            cells timed it in FIPS mode (``fips_unapproved``); what such a cell costs is not
            what a FIPS deployment pays.
        histograms: cell key → the encoded latency histograms of its measured repetitions, in
            block order (``distribution`` merges them).
        disturbances: the repetitions the host disturbed (``Disturbance``), in block order.
        speed: a run without a study (``speed``): its rows and baseline comparisons
            (``speedstats.analyse``); None for a study.
        reference: the configuration a stored run was re-analysed against instead of its
            study's baseline (``report --reference``), with its own family; None.
        constant_load: the analysed repetitions that ran above the study's other-load limit
            beside a steady load shared by their block, and were kept
            (``run.disturbance.constant_load``); None when none did, and for ``speed``.
    """

    summaries: dict[str, CellSummary]
    deltas: list[Delta]
    settings: Settings = field(default_factory=Settings)
    comparisons: int = 0
    level: float = stats.DEFAULT_LEVEL
    cpu_masks: dict[str, bool | None] = field(default_factory=dict)
    workloads: WorkloadAnalysis = field(default_factory=WorkloadAnalysis)
    fips_unapproved: dict[str, str] = field(default_factory=dict)
    histograms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    disturbances: tuple[Disturbance, ...] = ()
    speed: speedstats.SpeedAnalysis | None = None
    reference: str | None = None
    constant_load: disturbance.ConstantLoad | None = None
    _distributions: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def distribution(self, key: str) -> tuple[stats.Latency, np.ndarray, np.ndarray] | None:
        """The latency distribution of cell ``key``, its measured repetitions' histograms merged:
        (percentiles, CDF values ns, CDF fractions: ``stats.cdf``), or None without any. Merged
        when first asked for (only the HTML report draws it) and kept."""
        cached = self._distributions.get(key)
        if cached is None and self.histograms.get(key):
            merged = stats.merge_histograms(list(self.histograms[key]))
            cached = self._distributions[key] = (stats.latency_of(merged), *stats.cdf(merged))
        return cached

    def detectable_change(self) -> tuple[float, float, int] | None:
        """(change, cv, blocks): the smallest true change (fraction) one of this run's
        comparisons calls "slower" 80 % of the time (``stats.smallest_effect``) at the noise
        the run measured — the median over its decided comparisons of the per-block spread of
        the log ratio, as a CV per repetition — over their median block count, with the run's
        adjustment; None without a decided comparison."""
        intervals = [d.decisive for d in self.deltas if d.decisive is not None and d.decisive.n >= 2]
        if not intervals:
            return None
        sd = float(np.median([ci.se_log * math.sqrt(ci.n) for ci in intervals]))
        cv = math.sqrt(math.expm1(sd * sd / 2.0))  # a block's log ratio: sd² = 2 log(1 + cv²)
        blocks = int(np.median([ci.n for ci in intervals]))
        if cv <= 0:
            return None
        change = stats.smallest_effect(blocks, cv, *self.settings.family(self.comparisons), self.settings.level)
        return change, cv, blocks

    @property
    def scaling(self) -> tuple[scaling_mod.Scaling, ...]:
        """The operations measured at several thread counts, their throughput per count
        (``cryptoperf.scaling``)."""
        return scaling_mod.scaling(self.summaries.values())

    @property
    def method(self) -> str:
        """How the intervals were made and what the verdicts were decided on (``method_text``);
        a re-analysis against a ``reference`` says so, and that its comparisons are a family of
        their own."""
        text = method_text(self.settings, self.comparisons, self.level, deltas=self.deltas)
        if self.reference is None:
            return text
        n = self.comparisons
        return (f"re-analysed against the reference {self.reference}: every other configuration compared with it, "
                f"block by block, its {n} comparison{'s' if n != 1 else ''} adjusted as a family of their own "
                f"(not with the study's); {text}")

    def as_dict(self) -> dict[str, Any]:
        """``settings``, ``comparisons``, ``level``, ``method``, ``fips_unapproved`` (cell key →
        reason), ``reference`` (None unless re-analysed against one), ``cpu_masks`` (mask →
        whether it took a capability away, None when unknown), ``disturbances``
        (``Disturbance.as_dict``, block order), ``constant_load`` (``{repetitions, level_pct,
        cpus}``: those kept beside a steady other load above the limit; None),
        ``detectable_change`` (``{change, cv, blocks}``:
        the smallest slowdown, as a fraction, one comparison calls 80 % of the time at the
        noise measured; None) and ``workloads`` (``WorkloadAnalysis.as_dict``: every workload
        family's points per level with each side's CPU per transaction, throughput, bytes/s,
        latency and late share, with their bands; the latency objectives; each kind's own
        figures) and ``scaling`` (``Scaling.as_dict``: each operation measured at several
        thread counts, its throughput per count and where it peaked)."""
        detectable = self.detectable_change()
        return {"settings": self.settings.as_dict(), "comparisons": self.comparisons, "level": self.level,
                "method": self.method, "fips_unapproved": dict(self.fips_unapproved), "reference": self.reference,
                "cpu_masks": dict(self.cpu_masks), "disturbances": [d.as_dict() for d in self.disturbances],
                "detectable_change": None if detectable is None else dict(zip(("change", "cv", "blocks"), detectable)),
                "constant_load": None if self.constant_load is None else dataclasses.asdict(self.constant_load),
                "workloads": self.workloads.as_dict(), "scaling": [s.as_dict() for s in self.scaling]}


# --------------------------------------------------------------------------- summaries


def analysed(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """The outcomes an analysis uses: neither calibration repetitions nor superseded attempts."""
    return [o for o in outcomes if not o.repetition.calibration and not o.superseded]


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def summarize(outcomes: Sequence[Outcome]) -> dict[str, CellSummary]:
    """Summaries by cell key, in first-seen order, over each cell's analysed repetitions.

    A cell that has only a calibration outcome (it was unsupported or invalid there, so no
    block ran it) gets a summary with that status and 0 repetitions.
    """
    by_cell: dict[str, list[Outcome]] = {}
    calibrated: dict[str, Outcome] = {}
    for o in outcomes:
        if o.repetition.calibration:
            calibrated.setdefault(o.cell.key, o)
            by_cell.setdefault(o.cell.key, [])
        elif not o.superseded:
            by_cell.setdefault(o.cell.key, []).append(o)
    out = {}
    for key, reps in by_cell.items():
        if not reps:
            cal = calibrated[key]
            out[key] = _summary(cal.cell, [], cal)
            continue
        out[key] = _summary(reps[0].cell, sorted(reps, key=lambda o: o.repetition.block), None)
    return out


#: The fields of a worker's result that say which library measured: a cell whose measured
#: repetitions differ in one of them did not measure one thing (``library_change``).
IDENTITY_FIELDS = ("library", "library_version", "fips")


def _identity_text(result: WorkerResult, fields: Sequence[str]) -> str:
    def text(f: str) -> str:
        if f != "capabilities":
            return f"{f} {getattr(result, f)!r}"
        caps = result.capabilities
        return "capability vector " + str(caps.openssl_ia32cap if caps and caps.openssl_ia32cap else caps)
    return ", ".join(text(f) for f in fields)


def library_change(outcomes: Sequence[Outcome]) -> str | None:
    """Why the measured repetitions of one cell did not all run on the same library, or None:
    their results' ``library``, ``library_version`` or ``fips`` differ, or — among the
    repetitions of one machine (``Outcome.host``; a Ray study's nodes may differ in CPU) — their
    ``capabilities`` (the capability vector, the mask applied). One line naming the field, the
    blocks and the two values, e.g. ``library changed between repetitions: block 1 ran
    library_version '3.0.13', block 3 '3.0.15'``."""
    measured = [(o, o.result) for o in outcomes if o.ok and o.result is not None]
    if len(measured) < 2:
        return None
    first, a = measured[0]
    for o, b in measured[1:]:
        fields = [f for f in IDENTITY_FIELDS if getattr(b, f) != getattr(a, f)]
        if fields:
            break
    else:
        by_host: dict[str, tuple[Outcome, WorkerResult]] = {}
        for o, b in measured:
            host = o.host or {}
            where = str((host.get("ray_node") or {}).get("node_id") or host.get("hostname") or "")
            first, a = by_host.setdefault(where, (o, b))
            if a.capabilities != b.capabilities:
                fields = ["capabilities"]
                break
        else:
            return None
    return (f"library changed between repetitions: block {first.repetition.block} ran "
            f"{_identity_text(a, fields)}, block {o.repetition.block} "
            f"{_identity_text(b, fields)}; the cell is rejected (one library per cell), run it again")


def _summary(cell, reps: list[Outcome], calibration: Outcome | None) -> CellSummary:
    good = [o for o in reps if o.ok and o.latency and o.throughput]
    bad = [o for o in reps if not o.ok]
    if calibration is not None and not calibration.ok:
        bad = [calibration]
    changed = library_change(good)
    p50 = {o.repetition.block: float(o.latency.p50_ns) for o in good}
    ops = {o.repetition.block: o.throughput.ops_per_s for o in good}
    cpu = {o.repetition.block: o.throughput.process_cpu_ns_per_op for o in good if o.throughput.process_cpu_ns_per_op > 0}
    server = {o.repetition.block: v for o in good
              if (v := workloads.generic.side_cpu_ns_per_tx(o.result, "server")) is not None and v > 0}
    steals = [o.throughput.steal_pct for o in good if o.throughput.steal_pct is not None]
    source = reps or ([calibration] if calibration else [])
    lib = next((o.result.library_text for o in source if o.result is not None), None)
    first = good[0].result if good else None
    return CellSummary(
        cell=cell, repetitions=len(reps), ok=len(good),
        status=REJECTED if changed else bad[0].status if bad else OK,
        reason=changed or (bad[0].reason if bad else ""),
        p50_ns=_median(p50.values()), p99_ns=_median(o.latency.p99_ns for o in good),
        ops_per_s=_median(ops.values()), bytes_per_s=_median(o.throughput.bytes_per_s for o in good),
        process_cpu_ns_per_op=_median(cpu.values()),
        blocks_run=tuple(sorted({o.repetition.block for o in reps})),
        p50_by_block_ns=p50, ops_per_s_by_block=ops, process_cpu_ns_per_op_by_block=cpu,
        cv_p50=stats.cv(list(p50.values())), cv_ops_per_s=stats.cv(list(ops.values())),
        steal_pct=float(np.mean(steals)) if steals else None,
        disturbed=sum(1 for o in good if o.disturbed),
        batch=first.batch if first else None, timing=first.timing if first else None,
        library_version=lib,
        device_process_cpu_ns_per_op=_median(o.throughput.device_process_cpu_ns_per_op for o in good),
        server_cpu_ns_per_op=_median(server.values()), server_cpu_ns_per_op_by_block=server)


# --------------------------------------------------------------------------- deltas


@dataclass(frozen=True)
class _Pairs:
    """One metric's paired values of a comparison: the blocks, the configuration's and the
    baseline's value in each (same order), and their resolution (a fraction, as
    ``stats.paired_log_ratio``'s)."""

    blocks: tuple[int, ...]
    conf: tuple[float, ...]
    base: tuple[float, ...]
    resolution: float = 0.0

    def interval(self, level: float, set_aside: Sequence[int] = ()) -> stats.Interval | None:
        """The paired interval at ``level`` without the blocks ``set_aside`` (block numbers);
        None when fewer than ``MIN_BLOCKS`` remain."""
        out = [i for i, b in enumerate(self.blocks) if b in set(set_aside)]
        if len(self.blocks) - len(out) < MIN_BLOCKS:
            return None
        return stats.paired_log_ratio(self.conf, self.base, level, self.resolution, out)


@dataclass(frozen=True)
class _Pending:
    """A comparison before the multiplicity adjustment: its group, sides and raw intervals."""

    common: dict[str, Any]
    base: CellSummary
    conf: CellSummary
    blocks: int
    dropped: int
    latency: stats.Interval
    throughput: stats.Interval
    cpu: stats.Interval | None
    note: str
    pairs: Mapping[str, "_Pairs"] | None = None
    server: stats.Interval | None = None


def _side_problem(name: str, s: CellSummary | None) -> str | None:
    if s is None:
        return f"{name}: not run"
    if s.status == REJECTED:
        return f"{name}: {s.status}: {s.reason}"
    if s.ok > 0:
        return None
    if s.status != OK:
        return f"{name}: {s.status}: {s.reason}"
    return f"{name}: no measured repetition"


def _common(base: CellSummary | None, conf: CellSummary | None, configuration: str, baseline: str) -> dict[str, Any]:
    cell = (conf or base).cell  # type: ignore[union-attr]
    other = base.cell.backend if base is not None and base.cell.backend != cell.backend else None
    return dict(backend=cell.backend, label=cell.label, size_bytes=cell.size_bytes,
                configuration=configuration, baseline=baseline, op=conf.cell.op if conf else "",
                baseline_op=base.cell.op if base else "", cpu=cell.cpu, build=cell.build, baseline_backend=other)


def _paired(base: CellSummary, conf: CellSummary, common: dict[str, Any], names: tuple[str, str],
            level: float) -> _Pending | Delta:
    """The raw (unadjusted) paired intervals of ``conf`` against ``base``, or an n/a Delta."""
    both = [b for b in base.p50_by_block_ns if b in conf.p50_by_block_ns]
    all_blocks = sorted(set(base.blocks_run) & set(conf.blocks_run))  # blocks that ran both sides
    dropped = [b for b in all_blocks if b not in both]
    note = ""
    if dropped:
        shown = ", ".join(map(str, dropped[:8])) + (" …" if len(dropped) > 8 else "")
        note = (f"{len(both)} of {len(all_blocks)} blocks; {len(dropped)} dropped where {names[0]} or "
                f"{names[1]} did not measure (block {shown})")
    if len(both) < MIN_BLOCKS:
        why = f"only {len(both)} paired block{'s' if len(both) != 1 else ''}; an interval needs {MIN_BLOCKS}"
        if dropped:
            why += f" ({note})"
        return Delta(status="n/a", reason=why, blocks=len(both), dropped=len(dropped),
                     baseline_p50_ns=base.p50_ns, p50_ns=conf.p50_ns, **common)
    def pairs(blocks: Sequence[int], c: Mapping[int, float], b: Mapping[int, float], resolution: float = 0.0) -> _Pairs:
        return _Pairs(tuple(blocks), tuple(c[k] for k in blocks), tuple(b[k] for k in blocks), resolution)

    conf_p50, base_p50 = [conf.p50_by_block_ns[b] for b in both], [base.p50_by_block_ns[b] for b in both]
    by_metric = {
        "latency": pairs(both, conf.p50_by_block_ns, base.p50_by_block_ns,
                         stats.histogram_resolution(conf_p50) + stats.histogram_resolution(base_p50)),
        "throughput": pairs(both, conf.ops_per_s_by_block, base.ops_per_s_by_block)}
    cpu_blocks = [b for b in both if b in conf.process_cpu_ns_per_op_by_block and b in base.process_cpu_ns_per_op_by_block]
    if len(cpu_blocks) >= MIN_BLOCKS:
        by_metric["cpu_per_op"] = pairs(cpu_blocks, conf.process_cpu_ns_per_op_by_block, base.process_cpu_ns_per_op_by_block)
    server_blocks = [b for b in both if b in conf.server_cpu_ns_per_op_by_block and b in base.server_cpu_ns_per_op_by_block]
    if len(server_blocks) >= MIN_BLOCKS:
        by_metric["server_cpu_per_op"] = pairs(server_blocks, conf.server_cpu_ns_per_op_by_block,
                                               base.server_cpu_ns_per_op_by_block)
    lat, tp = by_metric["latency"].interval(level), by_metric["throughput"].interval(level)
    cpu = by_metric["cpu_per_op"].interval(level) if "cpu_per_op" in by_metric else None
    server = by_metric["server_cpu_per_op"].interval(level) if "server_cpu_per_op" in by_metric else None
    assert lat is not None and tp is not None  # len(both) >= MIN_BLOCKS
    return _Pending(common, base, conf, len(both), len(dropped), lat, tp, cpu, note, by_metric, server)


def _screened(p: _Pending, metric: str, level: float) -> tuple[_Pending, tuple[int, ...]]:
    """``p`` with the outlier blocks of its verdict's ``metric`` (a ``METRICS`` key) set aside
    from every one of its intervals, all recomputed at ``level`` (the adjusted level: the
    screen's false-alarm rate is a share of it, ``outliers.outlier_alpha``), and the note naming
    them; and those blocks. One screen per comparison, on the metric the verdict is decided on:
    a disturbed repetition is disturbed as a whole, and the figures of a comparison then rest on
    the same blocks. ``p`` unchanged and () when nothing is set aside."""
    pairs = (p.pairs or {}).get(metric)
    if pairs is None:
        return p, ()
    logs = np.log(pairs.conf) - np.log(pairs.base)
    floor = max(math.log1p(outliers.OUTLIER_FLOOR_PCT / 100.0), 2.0 * math.log1p(pairs.resolution))
    out = tuple(pairs.blocks[i] for i in outliers.outlier_blocks(logs, outliers.outlier_alpha(level), floor))
    if not out:
        return p, ()
    assert p.pairs is not None
    new = {m: q.interval(level, out) for m, q in p.pairs.items()}
    median = float(np.median(logs))
    factors = ", ".join(f"×{math.exp(logs[pairs.blocks.index(b)] - median):.2f}" for b in out)
    name = stats.METRICS[metric][0]
    what = (f"block {out[0]} set aside as an outlier" if len(out) == 1 else
            f"blocks {', '.join(map(str, out[:-1]))} and {out[-1]} set aside as outliers")
    note = "; ".join(x for x in (p.note, f"{what} ({name} ratio {factors} the median ratio)") if x)
    lat, tp = new["latency"], new["throughput"]
    assert lat is not None and tp is not None  # at most 20 % of at least 5 blocks go
    return replace(p, latency=lat, throughput=tp, cpu=new.get("cpu_per_op"), server=new.get("server_cpu_per_op"),
                   note=note), out


def _shortfall(names: tuple[str, str], base: CellSummary, conf: CellSummary) -> str:
    """``8 of 10 repetitions (run 3)`` for each side that did not measure every repetition."""
    return "; ".join(f"{x.ok} of {x.repetitions} repetitions ({who})" for who, x in zip(names, (base, conf))
                     if x.ok < x.repetitions)


def _unpaired(base: CellSummary, conf: CellSummary, common: dict[str, Any], names: tuple[str, str],
              level: float) -> _Pending | Delta:
    """The raw (unadjusted) Welch intervals of ``conf`` against ``base``, or an n/a Delta."""
    n = min(base.ok, conf.ok)
    if n < MIN_BLOCKS:
        short = names[0] if base.ok < MIN_BLOCKS else names[1]
        return Delta(status="n/a", reason=f"{short}: only {min(base.ok, conf.ok)} measured repetition(s); "
                     f"an interval needs {MIN_BLOCKS} on each side",
                     blocks=n, baseline_p50_ns=base.p50_ns, p50_ns=conf.p50_ns, **common)
    lat = stats.welch_log_ratio(conf.p50_samples_ns, base.p50_samples_ns, level)
    tp = stats.welch_log_ratio(conf.ops_per_s_samples, base.ops_per_s_samples, level)
    cpu = (stats.welch_log_ratio(conf.process_cpu_ns_per_op_samples, base.process_cpu_ns_per_op_samples, level)
           if min(len(conf.process_cpu_ns_per_op_samples), len(base.process_cpu_ns_per_op_samples)) >= MIN_BLOCKS else None)
    conf_server, base_server = (tuple(s.server_cpu_ns_per_op_by_block.values()) for s in (conf, base))
    server = (stats.welch_log_ratio(conf_server, base_server, level)
              if min(len(conf_server), len(base_server)) >= MIN_BLOCKS else None)
    return _Pending(common, base, conf, n, 0, lat, tp, cpu, _shortfall(names, base, conf), server=server)


def _finish(pending: Sequence[_Pending | Delta], settings: Settings,
            context: Context = Context()) -> tuple[list[Delta], int, float]:
    """Adjust the pending intervals together and decide their verdicts on
    ``settings.verdict_on``; returns the deltas in the given order, the family size and the
    per-interval level. A comparison without an interval of that metric (no CPU time in
    enough blocks) is ``n/a`` and not in the family."""
    def key(p: _Pending) -> str:
        return stats.metric_for(settings.verdict_on_of(p.conf.cell.label), p.conf.cell.load)

    def decided_on(p: _Pending) -> stats.Interval | None:
        return {"latency": p.latency, "throughput": p.throughput, "cpu_per_op": p.cpu,
                "server_cpu_per_op": p.server}[key(p)]

    m = sum(1 for p in pending if isinstance(p, _Pending) and decided_on(p) is not None)
    level = stats.adjusted_level(settings.level, *settings.family(m))
    out = []
    for p in pending:
        if isinstance(p, Delta):
            out.append(p)
            continue
        set_aside: tuple[int, ...] = ()
        if settings.outlier_screen and p.pairs is not None:
            p, set_aside = _screened(p, key(p), level)
        lat, tp = p.latency.at_level(level), p.throughput.at_level(level)
        cpu = p.cpu.at_level(level) if p.cpu is not None else None
        server = p.server.at_level(level) if p.server is not None else None
        batch = p.conf.batch if p.conf.batch == p.base.batch else None
        note = p.note
        if p.conf.batch != p.base.batch and p.conf.batch and p.base.batch:
            note = "; ".join(x for x in (note, f"batch sizes differ ({p.base.batch} vs {p.conf.batch}): "
                                         "the sides time different statistics") if x)
        chosen = decided_on(p)
        name, higher_is_slower = stats.METRICS[key(p)]
        libs = dict(library_version=p.conf.library_version, baseline_library_version=p.base.library_version)
        if chosen is None:
            out.append(Delta(status="n/a", reason=f"no {name} in {MIN_BLOCKS} paired blocks to decide on",
                             blocks=p.blocks, dropped=p.dropped, baseline_p50_ns=p.base.p50_ns,
                             p50_ns=p.conf.p50_ns, **libs, **p.common))
            continue
        chosen = chosen.at_level(level)
        out.append(Delta(status="ok", blocks=p.blocks, dropped=p.dropped,
                         baseline_p50_ns=p.base.p50_ns, p50_ns=p.conf.p50_ns, latency=lat, throughput=tp,
                         cpu_per_op=cpu, server_cpu_per_op=server,
                         verdict=stats.decide(chosen, settings.margin_pct, higher_is_slower, metric=name,
                                              transaction=context.transaction(p.conf.cell.op, p.conf.cell.load)),
                         noise=max(p.base.cv_p50, p.conf.cv_p50), note=note, batch=batch, set_aside=set_aside,
                         **libs, **p.common))
    return out, m, level


def deltas(summaries: Mapping[str, CellSummary], baseline: str, settings: Settings = Settings(),
           context: Context = Context()) -> tuple[list[Delta], int, float]:
    """Every configuration ≠ ``baseline`` against the baseline cell of its group, then each
    contrast of ``context`` (its configuration against its reference, ``Delta.baseline``) in
    every group where both have a cell, all paired by block and adjusted together, as one
    family. Returns (deltas, comparisons with an interval, per-interval level)."""
    groups: dict[tuple, dict[str, CellSummary]] = {}
    for s in summaries.values():
        groups.setdefault(s.cell.group, {})[s.cell.configuration] = s
    pending = [_against(by_config, name, baseline, "baseline", settings.level)
               for by_config in groups.values() for name in by_config if name != baseline]
    pending += [_against(by_config, name, ref, f"reference {ref}", settings.level) for ref, name in context.contrasts
                for by_config in groups.values() if ref in by_config and name in by_config]
    return _finish(pending, settings, context)


def _against(by_config: Mapping[str, CellSummary], name: str, reference: str, who: str,
             level: float) -> _Pending | Delta:
    """The raw paired intervals of configuration ``name`` against ``reference`` in one group
    (``who`` names the reference in reasons: ``baseline``), or an n/a Delta saying why none."""
    base, s = by_config.get(reference), by_config[name]
    common = _common(base, s, name, reference)
    # the configuration's own answer (unsupported, invalid) first: it is why no block
    # ran either side, and more useful than "the baseline has no repetition"
    own = _side_problem("this configuration", s) if s.status in (UNSUPPORTED, INVALID, REJECTED) else None
    problem = own or _side_problem(who, base) or _side_problem("this configuration", s)
    if problem:
        return Delta(status="n/a", reason=problem, **common)
    assert base is not None
    return _paired(base, s, common, (f"the {who}", "this configuration"), level)


def undecided(deltas: Iterable[Delta]) -> dict[tuple[str, str, int | None], set[str]]:
    """The comparisons a sequential study adds blocks to: by group, both configurations of
    every comparison whose verdict is inconclusive (the baseline or a contrast's reference,
    and the configuration compared with it); a comparison without an interval is not added
    to: more blocks cannot make an unsupported cell measure."""
    out: dict[tuple[str, str, int | None], set[str]] = {}
    for d in deltas:
        if d.verdict is not None and d.verdict.kind == stats.INCONCLUSIVE:
            out.setdefault(d.group, set()).update((d.baseline, d.configuration))
    return out


def cpu_masks(outcomes: Iterable[Outcome]) -> dict[str, bool | None]:
    """Every CPU mask other than ``baseline`` the analysed outcomes' cells ran under, in
    first-seen order → True when a measured repetition under it reports that it took a
    capability away (``cpu_mask_cleared``), False when those that say report that it took
    nothing away (the CPU lacks what it clears: its cells measured the unmasked code), None when
    none says."""
    out: dict[str, bool | None] = {}
    for o in analysed(outcomes):
        cpu = o.cell.cpu
        if cpu == BASELINE_MASK:
            continue
        took = access.cpu_mask_cleared(o.result) if o.ok else None
        seen = out.setdefault(cpu, None)
        if took is not None:
            out[cpu] = bool(seen) or took
    return out


def fips_unapproved(outcomes: Iterable[Outcome]) -> dict[str, str]:
    """Cell key → the worker's reason, for every cell whose analysed results ran in FIPS mode
    (``fips``) and say the FIPS module does not approve the operation as timed
    (``fips_approved`` false: X25519, SHA-1 signing, AES-GCM sealing with an outside nonce, ...),
    in first-seen order. Results of workers older than the field say nothing and are left out."""
    out: dict[str, str] = {}
    for o in analysed(outcomes):
        r = o.result
        if r is not None and r.fips is True and r.fips_approved is False:
            out.setdefault(o.cell.key, r.fips_reason or "not approved by the FIPS module")
    return out


def analyse(outcomes: Sequence[Outcome], baseline: str | None, settings: Settings = Settings(),
            order: Sequence[Cell] = (), context: Context = Context()) -> Analysis:
    """Summaries and (with a ``baseline`` configuration: a study) deltas of a stored run's
    outcomes, computed once, with the workload figures, CPU masks, histograms and disturbances;
    without a baseline (a ``speed`` run), its rows in the order of the cells ``order`` (then first
    seen) and their comparison with ``settings.speed_baseline``. ``context`` (``context_of``)
    says what the outcomes alone do not."""
    summaries = summarize(outcomes)
    ds, m, level = deltas(summaries, baseline, settings, context) if baseline is not None else ([], 0, settings.level)
    speed = speedstats.analyse(outcomes, order, settings.speed_baseline) if baseline is None else None
    kept = analysed(outcomes)
    hists: dict[str, list[str]] = {}
    for o in sorted(kept, key=lambda o: o.repetition.block):
        h = access.histogram(o.result) if o.ok and o.latency else None
        if h:
            hists.setdefault(o.cell.key, []).append(h)
    figures = workloads.analyse(summaries, kept, [d for d in ds if d.baseline == baseline], workloads.Context(
        baseline or "", context.series, context.host_cpus, context.p99_bounds_ms, context.transactions))
    steady = (disturbance.constant_load(outcomes, context.max_other_load_pct, context.host)
              if context.max_other_load_pct is not None else None)
    return Analysis(summaries, ds, settings, m, level, cpu_masks(outcomes), figures, fips_unapproved(outcomes),
                    {k: tuple(v) for k, v in hists.items()}, disturbances(outcomes), speed, constant_load=steady)


def compare_runs(pairs: Sequence[tuple[Sequence[CellSummary], Sequence[CellSummary]]], names: tuple[str, str],
                 settings: Settings = Settings(), context: Context = Context(),
                 run_sd: float | None = None, job_sd: float | None = None) -> tuple[list[Delta], int, float]:
    """Each cell's runs on side B against its runs on side A: ``across_runs.compare_runs``,
    where comparisons across runs live (kept here for its callers)."""
    from cryptoperf import across_runs  # it builds on this module
    return across_runs.compare_runs(pairs, names, settings, context, run_sd, job_sd)
