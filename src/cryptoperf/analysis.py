"""Analysis: from outcomes to per-cell summaries and to deltas with intervals and verdicts.

This is where the study's structure meets ``stats``. Within a study, each configuration is
compared with the baseline of the same group **block by block**: one log ratio per block in
which both measured (blocks where either side did not drop out, and the delta says how many),
a t interval on those, every interval of the study adjusted together for multiplicity
(Bonferroni, on by default), and a verdict against the equivalence margin. Two stored runs have
no blocks in common, so ``compare_unpaired`` uses Welch's interval on the repetitions of each
side instead. The error rates of these rules are measured by simulation
(``cryptoperf.simulate``, docs/methodology.md "Statistics").

Everything is computed once per stored run (``analyse``) and every report is rendered from the
resulting ``Analysis``; nothing here imports the runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from cryptoperf import speedstats, stats
from cryptoperf.model import INVALID, OK, REJECTED, UNSUPPORTED, Cell, CellSummary, Delta, Outcome
from cryptoperf.result import WorkerResult

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
    """

    level: float = stats.DEFAULT_LEVEL
    margin_pct: float = stats.DEFAULT_MARGIN_PCT
    multiplicity: bool = True
    looks: int = 1
    noise_threshold_pct: float = 10.0
    verdict_on: str = "latency"
    speed_baseline: str | None = None

    @property
    def metric(self) -> str:
        """The verdicts' metric for people, e.g. ``p50 latency``."""
        if self.verdict_on == stats.BY_LOAD:
            return ("throughput for closed loads and jobs, CPU time per operation for byte-rate loads, "
                    "p50 latency for other open loads and primitives")
        return stats.METRICS[self.verdict_on][0]

    def as_dict(self) -> dict[str, Any]:
        """Field name → value."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "Settings":
        """Settings from ``as_dict`` output (unknown keys ignored, missing ones default)."""
        known = {k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


def method_text(settings: Settings, comparisons: int, level: float, paired: bool = True) -> str:
    """How the intervals of a stored run were made, for every report: e.g. "95 % intervals,
    paired t on per-block log ratios; Bonferroni over 24 comparisons: each interval at
    99.79 %"."""
    how = ("paired t interval on per-block log ratios" if paired
           else "Welch t interval on the log values of each run's repetitions")
    text = f"{settings.level * 100:g} % intervals, {how}"
    if settings.multiplicity and comparisons > 1 or settings.looks > 1:
        looks = f" and {settings.looks} looks" if settings.looks > 1 else ""
        text += (f"; Bonferroni over {comparisons} comparison{'s' if comparisons != 1 else ''}{looks}: "
                 f"each interval at {level * 100:.4g} % so that all hold together at {settings.level * 100:g} %")
    elif not settings.multiplicity and comparisons > 1:
        text += f"; no multiplicity adjustment (each of the {comparisons} intervals holds alone at {settings.level * 100:g} %)"
    return text + f"; equivalence margin ±{settings.margin_pct:g} %; verdicts on {settings.metric}"


@dataclass
class Analysis:
    """Everything derived from a stored run's outcomes, computed once.

    Attributes:
        summaries: per-cell summaries, by cell key, in first-seen order.
        deltas: every configuration against the baseline of its group.
        settings: how they were decided.
        comparisons: the deltas with an interval (the family the adjustment covers).
        level: the confidence level of each interval after the adjustment.
        speed: a run without a study (``speed``): its rows and baseline comparisons
            (``speedstats.analyse``); None for a study.
    """

    summaries: dict[str, CellSummary]
    deltas: list[Delta]
    settings: Settings = field(default_factory=Settings)
    comparisons: int = 0
    level: float = stats.DEFAULT_LEVEL
    speed: speedstats.SpeedAnalysis | None = None

    @property
    def method(self) -> str:
        """How the intervals were made (``method_text``)."""
        return method_text(self.settings, self.comparisons, self.level)

    def as_dict(self) -> dict[str, Any]:
        """``settings``, ``comparisons``, ``level``, ``method``."""
        return {"settings": self.settings.as_dict(), "comparisons": self.comparisons,
                "level": self.level, "method": self.method}


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
    cpu = {o.repetition.block: o.throughput.cpu_ns_per_op for o in good if o.throughput.cpu_ns_per_op > 0}
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
        cpu_ns_per_op=_median(cpu.values()),
        blocks_run=tuple(sorted({o.repetition.block for o in reps})),
        p50_by_block_ns=p50, ops_per_s_by_block=ops, cpu_ns_per_op_by_block=cpu,
        cv_p50=stats.cv(list(p50.values())), cv_ops_per_s=stats.cv(list(ops.values())),
        steal_pct=float(np.mean(steals)) if steals else None,
        disturbed=sum(1 for o in good if o.disturbed),
        batch=first.batch if first else None, timing=first.timing if first else None,
        library_version=lib)


# --------------------------------------------------------------------------- deltas


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
    return dict(backend=cell.backend, label=cell.label, size_bytes=cell.size_bytes,
                configuration=configuration, baseline=baseline, op=conf.cell.op if conf else "",
                baseline_op=base.cell.op if base else "", cpu=cell.cpu, build=cell.build)


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
    lat = stats.paired_log_ratio([conf.p50_by_block_ns[b] for b in both],
                                 [base.p50_by_block_ns[b] for b in both], level)
    tp = stats.paired_log_ratio([conf.ops_per_s_by_block[b] for b in both],
                                [base.ops_per_s_by_block[b] for b in both], level)
    cpu_blocks = [b for b in both if b in conf.cpu_ns_per_op_by_block and b in base.cpu_ns_per_op_by_block]
    cpu = (stats.paired_log_ratio([conf.cpu_ns_per_op_by_block[b] for b in cpu_blocks],
                                  [base.cpu_ns_per_op_by_block[b] for b in cpu_blocks], level)
           if len(cpu_blocks) >= MIN_BLOCKS else None)
    return _Pending(common, base, conf, len(both), len(dropped), lat, tp, cpu, note)


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
    cpu = (stats.welch_log_ratio(conf.cpu_ns_per_op_samples, base.cpu_ns_per_op_samples, level)
           if min(len(conf.cpu_ns_per_op_samples), len(base.cpu_ns_per_op_samples)) >= MIN_BLOCKS else None)
    notes = [f"{x.ok} of {x.repetitions} repetitions ({who})" for who, x in zip(names, (base, conf))
             if x.ok < x.repetitions]
    return _Pending(common, base, conf, n, 0, lat, tp, cpu, "; ".join(notes))


def _finish(pending: Sequence[_Pending | Delta], settings: Settings) -> tuple[list[Delta], int, float]:
    """Adjust the pending intervals together and decide their verdicts on
    ``settings.verdict_on``; returns the deltas in the given order, the family size and the
    per-interval level. A comparison without an interval of that metric (no CPU time in
    enough blocks) is ``n/a`` and not in the family."""
    def key(p: _Pending) -> str:
        return stats.metric_for(settings.verdict_on, p.conf.cell.load)

    def decided_on(p: _Pending) -> stats.Interval | None:
        return {"latency": p.latency, "throughput": p.throughput, "cpu_per_op": p.cpu}[key(p)]

    m = sum(1 for p in pending if isinstance(p, _Pending) and decided_on(p) is not None)
    level = (stats.adjusted_level(settings.level, max(m, 1) if settings.multiplicity else 1, settings.looks))
    out = []
    for p in pending:
        if isinstance(p, Delta):
            out.append(p)
            continue
        lat, tp = p.latency.at_level(level), p.throughput.at_level(level)
        cpu = p.cpu.at_level(level) if p.cpu is not None else None
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
                         cpu_per_op=cpu,
                         verdict=stats.decide(chosen, settings.margin_pct, higher_is_slower, metric=name),
                         noise=max(p.base.cv_p50, p.conf.cv_p50), note=note, batch=batch, **libs, **p.common))
    return out, m, level


def deltas(summaries: Mapping[str, CellSummary], baseline: str,
           settings: Settings = Settings()) -> tuple[list[Delta], int, float]:
    """Every configuration ≠ ``baseline`` against the baseline cell of its group, paired by
    block, adjusted together. Returns (deltas, comparisons with an interval, per-interval
    level)."""
    groups: dict[tuple, dict[str, CellSummary]] = {}
    for s in summaries.values():
        groups.setdefault(s.cell.group, {})[s.cell.configuration] = s
    pending: list[_Pending | Delta] = []
    for by_config in groups.values():
        base = by_config.get(baseline)
        for name, s in by_config.items():
            if name == baseline:
                continue
            common = _common(base, s, name, baseline)
            # the configuration's own answer (unsupported, invalid) first: it is why no block
            # ran either side, and more useful than "the baseline has no repetition"
            own = _side_problem("this configuration", s) if s.status in (UNSUPPORTED, INVALID, REJECTED) else None
            problem = own or _side_problem("baseline", base) or _side_problem("this configuration", s)
            if problem:
                pending.append(Delta(status="n/a", reason=problem, **common))
                continue
            assert base is not None
            pending.append(_paired(base, s, common, ("the baseline", "this configuration"), settings.level))
    return _finish(pending, settings)


def undecided(deltas: Iterable[Delta]) -> dict[tuple[str, str, int | None], set[str]]:
    """The comparisons a sequential study adds blocks to: by group, the configurations whose
    verdict is inconclusive (a comparison without an interval is not added to: more blocks
    cannot make an unsupported cell measure)."""
    out: dict[tuple[str, str, int | None], set[str]] = {}
    for d in deltas:
        if d.verdict is not None and d.verdict.kind == stats.INCONCLUSIVE:
            out.setdefault(d.group, set()).add(d.configuration)
    return out


def analyse(outcomes: Sequence[Outcome], baseline: str | None, settings: Settings = Settings(),
            order: Sequence[Cell] = ()) -> Analysis:
    """Summaries and (with a ``baseline`` configuration: a study) deltas of a stored run's
    outcomes, computed once; without one (a ``speed`` run), its rows in the order of the cells
    ``order`` (then first seen) and their comparison with ``settings.speed_baseline``."""
    summaries = summarize(outcomes)
    if baseline is None:
        speed = speedstats.analyse(outcomes, order, settings.speed_baseline)
        return Analysis(summaries, [], settings, 0, settings.level, speed)
    ds, m, level = deltas(summaries, baseline, settings)
    return Analysis(summaries, ds, settings, m, level)


def compare_unpaired(pairs: Sequence[tuple[CellSummary, CellSummary]], names: tuple[str, str],
                     settings: Settings = Settings()) -> tuple[list[Delta], int, float]:
    """``b`` against ``a`` for every pair (a, b) of the same cell in two stored runs, with
    Welch intervals adjusted together; ``names`` name the two runs in reasons. Returns (deltas,
    comparisons with an interval, per-interval level)."""
    pending: list[_Pending | Delta] = []
    for a, b in pairs:
        c = a.cell
        common = _common(a, b, c.configuration, c.configuration)
        problem = _side_problem(names[0], a) or _side_problem(names[1], b)
        if problem:
            pending.append(Delta(status="n/a", reason=problem, baseline_p50_ns=a.p50_ns, p50_ns=b.p50_ns,
                                 **common))
            continue
        pending.append(_unpaired(a, b, common, names, settings.level))
    return _finish(pending, settings)
