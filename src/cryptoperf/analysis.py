"""Analysis: from run outcomes to per-cell summaries and deltas vs the baseline.

This is where the study's structure meets ``stats``: runs are grouped into cells, cells into
comparisons, and ``stats`` computes the numbers and decides the verdicts. The report code only
formats what is computed here.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from cryptoperf import stats
from cryptoperf.plan import Cell
from cryptoperf.run.local import OK, RunOutcome

MIN_REPETITIONS = 2  # a confidence interval needs at least two repetitions per side


@dataclass(frozen=True)
class CellSummary:
    """All repetitions of one cell.

    Attributes:
        cell: the cell.
        runs: repetitions attempted; ok: repetitions measured.
        status: ``ok`` if every repetition measured, else the status of the first that did not
            (``unsupported``, ``invalid``, ``failed``); reason: its reason.
        p50_ns, p99_ns, ops_per_s, bytes_per_s, cpu_ns_per_op: medians over measured
            repetitions (None without any).
        p50_samples_ns, ops_per_s_samples: per-repetition values, in repetition order.
        cv_p50, cv_ops_per_s: coefficient of variation across repetitions (fractions).
        steal_pct: mean steal % over the measured repetitions (None if unknown).
        batch: operations per timed sample (of the first measured repetition).
        library_version: ``library library_version`` as the worker reported it.
    """

    cell: Cell
    runs: int
    ok: int
    status: str
    reason: str
    p50_ns: float | None
    p99_ns: float | None
    ops_per_s: float | None
    bytes_per_s: float | None
    cpu_ns_per_op: float | None
    p50_samples_ns: tuple[float, ...]
    ops_per_s_samples: tuple[float, ...]
    cv_p50: float
    cv_ops_per_s: float
    steal_pct: float | None
    batch: int | None
    library_version: str | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (cell flattened into its fields)."""
        d = {k: v for k, v in self.__dict__.items() if k != "cell"}
        d.update(cell_dict(self.cell))
        d["p50_samples_ns"] = list(self.p50_samples_ns)
        d["ops_per_s_samples"] = list(self.ops_per_s_samples)
        return d


def cell_dict(cell: Cell) -> dict[str, Any]:
    """A cell as a JSON-ready dict (``key``, configuration, backend, label, op, params, size,
    CPU mask, worker build)."""
    return {"cell": cell.key, "configuration": cell.configuration, "backend": cell.backend,
            "label": cell.label, "op": cell.op, "params": dict(cell.params),
            "size_bytes": cell.size_bytes, "cpu": cell.cpu, "build": cell.build}


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def summarize(outcomes: Sequence[RunOutcome]) -> dict[str, CellSummary]:
    """Summaries by cell key, in first-seen order, each over the cell's repetitions."""
    by_cell: dict[str, list[RunOutcome]] = {}
    for o in outcomes:
        by_cell.setdefault(o.run.cell.key, []).append(o)
    out = {}
    for key, runs in by_cell.items():
        runs = sorted(runs, key=lambda o: o.run.repetition)
        good = [o for o in runs if o.ok and o.latency and o.throughput]
        bad = [o for o in runs if not o.ok]
        p50s = tuple(float(o.latency.p50_ns) for o in good)
        opss = tuple(o.throughput.ops_per_s for o in good)
        steals = [o.throughput.steal_pct for o in good if o.throughput.steal_pct is not None]
        lib = next((f"{o.result.get('library', '')} {o.result.get('library_version', '')}".strip()
                    for o in runs if o.result), None)
        out[key] = CellSummary(
            cell=runs[0].run.cell, runs=len(runs), ok=len(good),
            status=bad[0].status if bad else OK, reason=bad[0].reason if bad else "",
            p50_ns=_median(p50s), p99_ns=_median(o.latency.p99_ns for o in good),
            ops_per_s=_median(opss), bytes_per_s=_median(o.throughput.bytes_per_s for o in good),
            cpu_ns_per_op=_median(o.throughput.cpu_ns_per_op for o in good),
            p50_samples_ns=p50s, ops_per_s_samples=opss,
            cv_p50=stats.cv(p50s), cv_ops_per_s=stats.cv(opss),
            steal_pct=float(np.mean(steals)) if steals else None,
            batch=good[0].result.get("batch") if good else None,
            library_version=lib)
    return out


@dataclass(frozen=True)
class Delta:
    """One configuration against the baseline on one backend, operation label and size.

    Attributes:
        backend, label, size_bytes: the comparison group.
        configuration, baseline: configuration names; op, baseline_op: their worker ops.
        status: ``ok`` when both sides have >= 2 measured repetitions, else ``n/a`` with
            ``reason`` saying which side is unsupported/invalid/failed.
        baseline_p50_ns, p50_ns: medians of per-repetition p50 latency (ns).
        latency: ratio of medians of per-rep p50 (configuration / baseline) with 95 % CI.
        throughput: ratio of medians of per-rep ops/s with 95 % CI.
        latency_verdict, throughput_verdict: from ``stats.classify``.
        noise: the larger CV (fraction) of the two sides (latency; throughput for its verdict).
        note: e.g. ``4 of 5 repetitions`` when some failed but enough remain.
        cpu: the CPU capability mask of the configuration's cells (``baseline`` = none).
        build: the worker build of the configuration's cells (``default``, ``fips``, ...).
    """

    backend: str
    label: str
    size_bytes: int | None
    configuration: str
    baseline: str
    op: str
    baseline_op: str
    status: str
    reason: str = ""
    baseline_p50_ns: float | None = None
    p50_ns: float | None = None
    latency: stats.RatioEstimate | None = None
    throughput: stats.RatioEstimate | None = None
    latency_verdict: stats.Verdict | None = None
    throughput_verdict: stats.Verdict | None = None
    noise: float | None = None
    note: str = ""
    cpu: str = "baseline"
    build: str = "default"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ratios as ``{ratio, ci_low, ci_high, level, delta_pct}``."""
        d = dict(self.__dict__)
        for k in ("latency", "throughput", "latency_verdict", "throughput_verdict"):
            d[k] = d[k].as_dict() if d[k] is not None else None
        return d


def _side_problem(name: str, s: CellSummary | None) -> str | None:
    if s is None:
        return f"{name}: not run"
    if s.ok >= MIN_REPETITIONS:
        return None
    if s.status != OK:
        return f"{name}: {s.status}: {s.reason}"
    return f"{name}: only {s.ok} measured repetition(s); a CI needs {MIN_REPETITIONS}"


def compare(base: CellSummary | None, s: CellSummary | None, *, configuration: str, baseline: str,
            seed: int, key: str, resamples: int = 10000, noise_threshold: float = 0.10,
            level: float = 0.95, base_name: str = "baseline",
            name: str = "this configuration") -> Delta:
    """One Delta: cell summary ``s`` against ``base`` (either may be None: not run).

    The comparison group (backend, label, size) is taken from whichever side exists. The CIs
    draw from a generator seeded with (``seed``, crc32 of ``key``), so the same key and seed
    give the same interval whatever else is compared. ``base_name``/``name`` name the sides in
    the ``reason`` of an ``n/a`` delta. ``noise_threshold`` is a fraction. Used by ``deltas``
    (configurations of one run) and by ``compare`` (the same cell in two stored runs).
    """
    cell = (s or base).cell  # type: ignore[union-attr]
    common = dict(backend=cell.backend, label=cell.label, size_bytes=cell.size_bytes,
                  configuration=configuration, baseline=baseline, op=s.cell.op if s else "",
                  baseline_op=base.cell.op if base else "", cpu=cell.cpu,
                  build=cell.build)
    problem = _side_problem(base_name, base) or _side_problem(name, s)
    if problem:
        return Delta(status="n/a", reason=problem, **common)
    assert base is not None and s is not None
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    lat = stats.ratio_of_medians(s.p50_samples_ns, base.p50_samples_ns, resamples, rng, level)
    tp = stats.ratio_of_medians(s.ops_per_s_samples, base.ops_per_s_samples, resamples, rng, level)
    lat_noise = max(s.cv_p50, base.cv_p50)
    tp_noise = max(s.cv_ops_per_s, base.cv_ops_per_s)
    short = (base_name, "config" if name == "this configuration" else name)
    notes = [f"{x.ok} of {x.runs} repetitions ({who})" for who, x in zip(short, (base, s))
             if x.ok < x.runs]
    return Delta(
        status="ok", baseline_p50_ns=base.p50_ns, p50_ns=s.p50_ns, latency=lat, throughput=tp,
        latency_verdict=stats.classify(lat, lat_noise, noise_threshold, higher_is_slower=True),
        throughput_verdict=stats.classify(tp, tp_noise, noise_threshold, higher_is_slower=False),
        noise=lat_noise, note="; ".join(notes), **common)


def deltas(summaries: dict[str, CellSummary], baseline: str, seed: int,
           resamples: int = 10000, noise_threshold: float = 0.10, level: float = 0.95) -> list[Delta]:
    """Every configuration ≠ ``baseline`` against the baseline cell of its group.

    Each delta draws from its own generator seeded with (``seed``, crc32 of the delta's key), so
    a delta's CI does not depend on which other deltas exist. ``noise_threshold`` is a fraction.
    """
    groups: dict[tuple, dict[str, CellSummary]] = {}
    for s in summaries.values():
        groups.setdefault(s.cell.group, {})[s.cell.configuration] = s
    out = []
    for (backend, label, size), by_config in groups.items():
        base = by_config.get(baseline)
        for name, s in by_config.items():
            if name == baseline:
                continue
            out.append(compare(base, s, configuration=name, baseline=baseline, seed=seed,
                               key=f"{backend}/{label}/{size}/{name}", resamples=resamples,
                               noise_threshold=noise_threshold, level=level))
    return out
