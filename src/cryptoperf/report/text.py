"""Every number, change, interval and host text the reports print, in one place: the terminal,
HTML, Markdown and the published site format a figure the same way. Plain strings only (no Rich,
no HTML); nothing here computes a figure — those come from the run's analysis.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from cryptoperf import stats
from cryptoperf.store.stored_run import kernel_release
from cryptoperf.workloads import access

__all__ = ["kernel_release"]  # the rest are defined here


# ------------------------------------------------------------------------------ numbers

def fmt_ns(ns: float | None) -> str:
    """A duration in ns with a fitting unit: ``850 ns``, ``12.3 µs``, ``4.56 ms``, ``1.20 s``."""
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def fmt_count(x: float | None) -> str:
    """A rate with an SI prefix, 3 significant digits: ``1.23 M``, ``845 k``, ``12.0``."""
    if x is None:
        return "—"
    x = float(f"{x:.3g}")  # round first, so 999.9999 reads "1 k", not "1e+03"
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}"
    return f"{x:.3g}"


def fmt_mb_s(bytes_per_s: float | None) -> str:
    """Bytes/s as MB/s (10^6 bytes), or '—' for operations without a message."""
    if bytes_per_s is None:
        return "—"
    mb = bytes_per_s / 1e6
    return f"{mb:.3g}" if mb < 1000 else f"{mb:.0f}"


def fmt_mb(mb: float) -> str:
    """MB/s as text: 4 significant digits below 1000 (``655.5``), whole numbers with thousands
    separators from there (``28,130``)."""
    return f"{mb:,.0f}" if mb >= 1000 else f"{mb:.4g}"


def fmt_size(size: int | None) -> str:
    """``4 KiB``, ``1 MiB``, ``100 B``; '' for None."""
    if size is None:
        return ""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def fmt_pct(pct: float | None, signed: bool = True) -> str:
    """``+12.3 %`` / ``-4.0 %`` (or unsigned), '—' for None."""
    if pct is None:
        return "—"
    return f"{pct:+.1f} %" if signed else f"{pct:.1f} %"


def fmt_cv(cv: float | None, n: int = 2) -> str:
    """A coefficient of variation (fraction) as ``3.2 %``; '—' with fewer than 2 values."""
    if cv is None or n < 2:
        return "—"
    return f"{cv * 100:.1f} %"


def fmt_num(x: float | None) -> str:
    """3 significant digits below 1000, whole numbers with thousands separators from 1000 on;
    '—' for None."""
    if x is None:
        return "—"
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def fmt_ms(ns: float | None) -> str:
    """ns as milliseconds without the unit (``fmt_num``): ``2.15``, ``1,204``; '—' for None."""
    return "—" if ns is None else fmt_num(ns / 1e6)


def fmt_us(ns: float | None) -> str:
    """ns as microseconds without the unit (``fmt_num``); '—' for None."""
    return "—" if ns is None else fmt_num(ns / 1e3)


def fmt_sig(x: float | None) -> str:
    """3 significant digits (``0.382``, ``41.2``); '—' for None."""
    return "—" if x is None else f"{x:.3g}"


def fmt_cores(cores: float | None) -> str:
    """``0.125 cores (12.5 % of a core)``; '—' for None."""
    if cores is None:
        return "—"
    return f"{cores:.3g} cores ({cores * 100:.3g} % of a core)"


def fmt_money(x: float) -> str:
    """Money per year with thousands separators and 2 decimals: ``1,234.50``."""
    return f"{x:,.2f}"


def fmt_date(iso: str | None) -> str:
    """``2026-11-23T09:05:12.345Z`` → ``2026-11-23 09:05 UTC``; '—' for None."""
    if not iso:
        return "—"
    text = str(iso).replace("T", " ")
    return f"{text[:16]} UTC" if text.endswith("Z") else text[:16]


def fmt_estimate(e: stats.Estimate | None, fmt=fmt_count) -> str:
    """An estimate with its interval, ``412 [398, 427]``; the value alone without bounds; '—'
    for None. ``fmt`` formats each number (``fmt_count`` by default)."""
    if e is None:
        return "—"
    if e.low is None or e.high is None:
        return fmt(e.value)
    return f"{fmt(e.value)} [{fmt(e.low)}, {fmt(e.high)}]"


# ------------------------------------------------------------------------------ changes

def change_text(ci: stats.Interval | None) -> str:
    """A change with its interval as the tables print it, in the scale verdicts use
    (``stats.factor_form``): ``+4.0 % [+3.0, +5.1]``, ``-47.6 % [-50.2, -44.9]`` (a decrease is
    always a percentage), ``13.5× [13.3, 13.7]`` from 2× up; '—' for None."""
    if ci is None:
        return "—"
    if stats.factor_form(ci.ratio):
        return f"{stats.factor_text(ci.ratio)}× [{stats.factor_text(ci.low)}, {stats.factor_text(ci.high)}]"
    return f"{ci.delta_pct:+.1f} % [{ci.low_pct:+.1f}, {ci.high_pct:+.1f}]"


def change_point_text(ci: stats.Interval | None) -> str:
    """The point change alone: ``+4.0 %``, ``-47.6 %``, ``13.5×``; '—' for None."""
    if ci is None:
        return "—"
    return f"{stats.factor_text(ci.ratio)}×" if stats.factor_form(ci.ratio) else f"{ci.delta_pct:+.1f} %"


def interval_text(ci: stats.Interval | None) -> str:
    """The interval alone: ``[+3.0, +5.1] %``, ``[13.3, 13.7]×`` from 2× up; '' for None."""
    if ci is None:
        return ""
    if stats.factor_form(ci.ratio):
        return f"[{stats.factor_text(ci.low)}, {stats.factor_text(ci.high)}]×"
    return f"[{ci.low_pct:+.1f}, {ci.high_pct:+.1f}] %"


def ratio_text(ci: stats.Interval | None) -> str:
    """A ratio to the baseline with its interval: ``0.59× [0.57, 0.61]``; '—' without one."""
    if ci is None:
        return "—"
    return f"{ci.ratio:.3g}× [{ci.low:.3g}, {ci.high:.3g}]"


def detectable_text(change: float) -> str:
    """A design's smallest detectable change (``stats.smallest_effect``, a fraction) in words:
    ``a change of 4.3 %``, or ``no change it can see`` when none reaches the power."""
    return "no change it can see" if math.isinf(change) else f"a change of {change * 100:.1f} %"


def interval_header(level: float) -> str:
    """``95 % CI`` / ``99.79 % CI`` (the per-interval level after adjustment)."""
    return f"{level * 100:.4g} % CI"


def verdict_counts(verdicts: Iterable[Any]) -> str:
    """``3 slower, 1 faster, 5 equivalent, 2 inconclusive`` (kinds with a count only), from
    deltas (their ``verdict``)."""
    counts: dict[str, int] = {}
    for d in verdicts:
        if d.verdict is not None:
            counts[d.verdict.kind] = counts.get(d.verdict.kind, 0) + 1
    return ", ".join(f"{counts[k]} {k}" for k in stats.VERDICT_KINDS if k in counts) or "no verdicts"


def verdict_header(deltas: Iterable[Any]) -> str:
    """``verdict (on p50 latency)``, ``verdict (on throughput / p50 latency)``: the column
    header naming the metrics the verdicts are decided on; ``verdict`` without any."""
    metrics = list(dict.fromkeys(d.verdict.metric for d in deltas if d.verdict is not None))
    return f"verdict (on {' / '.join(metrics)})" if metrics else "verdict"


# ------------------------------------------------------------------------------ names

def configuration_text(name: str, cpu: str, build: str = "default") -> str:
    """A configuration's name, with its CPU mask and worker build when they are not the
    defaults: ``aes-off [cpu no-aesni]``, ``on [fips]``."""
    out = name if cpu == "baseline" else f"{name} [cpu {cpu}]"
    return out if build == "default" else f"{out} [{build}]"


def comparison_text(d: Any, baseline: str) -> str:
    """A delta's configuration as its row names it (``configuration_text``), with `` vs
    <reference>`` for a contrast, a delta whose reference is not the run's ``baseline``:
    ``aes-256-xts vs aes-128-xts``."""
    text = configuration_text(d.configuration, d.cpu, d.build)
    return text if d.baseline == baseline else f"{text} vs {d.baseline}"


def cpu_title(cpu: str) -> str:
    """`` — CPU mask no-aesni`` for a table title ('' for baseline)."""
    return "" if cpu == "baseline" else f" — CPU mask {cpu}"


def operation(label: str, size: int | None) -> str:
    """An operation as tables name it: its label and message size, ``sha256 4 KiB`` — the size
    once, when a study's own label already ends with it (``label = "records 1400 B"``)."""
    size_text = fmt_size(size)
    if size_text and label.endswith(size_text):
        return label
    return f"{label} {size_text}".strip()


def operation_text(cell: Any) -> str:
    """A speed row's operation with the worker parameters it was given:
    ``rsa2048-sign digest=sha384 padding=pss``."""
    extra = " ".join(f"{k}={v}" for k, v in sorted(cell.params.items()))
    return f"{cell.op} {extra}".strip()


def side_name(side: int | str) -> str:
    """How a table names one side of a comparison: ``run 7`` for a run id, else the name as
    given (a machine's, in ``compare --by host``)."""
    return f"run {side}" if isinstance(side, int) else str(side)


def short_library(result: Any) -> str:
    """Library name and version of a worker result for a table cell; a multi-crate version list
    (RustCrypto) is cut after its first entry (the full list is in the JSON)."""
    return access.library_text(result, short=True)


# ------------------------------------------------------------------------------ host

def hypervisor_text(hv: Any) -> str:
    """A fingerprint's hypervisor in words: its type (``kvm``), ``yes (type unknown)``, ``none
    detected`` or ``unknown``, with ``, in container docker`` when in a container."""
    if not isinstance(hv, Mapping) or not hv:
        return "unknown"
    if hv.get("type"):
        text = str(hv["type"])
    elif hv.get("present") is True:
        text = "yes (type unknown)"
    elif hv.get("present") is False:
        text = "none detected"
    else:
        text = "unknown"
    if hv.get("container"):
        text += f", in container {hv['container']}"
    return text


def host_line(fp: Mapping[str, Any]) -> str:
    """One line naming the host: CPU, crypto flags, hypervisor, kernel release."""
    return (f"host: {fp.get('cpu_model')} × {fp.get('logical_cpus')}, flags "
            f"{' '.join(fp.get('crypto_flags') or []) or 'none'}, hypervisor {hypervisor_text(fp.get('hypervisor'))}, "
            f"kernel {kernel_release(fp)}")


def host_text(fp: Mapping[str, Any]) -> str:
    """A host in a sentence's words: ``a 2-CPU AMD EPYC 7B13 host (Linux 6.8.0)``."""
    kernel = kernel_release(fp)
    where = f" (Linux {kernel})" if kernel != "?" else ""
    return f"a {fp.get('logical_cpus', '?')}-CPU {fp.get('cpu_model') or 'unknown'} host{where}"


def mask_text(masks: Mapping[str, bool | None]) -> str:
    """A run's CPU masks (``Analysis.cpu_masks``: mask → whether it took anything away) in
    words: ``none (every cell ran unmasked)``, or the masks, each that took nothing away on this
    machine said so: ``no-aesni; no-bignum (took nothing away on this machine: its cells measured
    the unmasked code)``."""
    if not masks:
        return "none (every cell ran unmasked)"
    return "; ".join(m + (" (took nothing away on this machine: its cells measured the unmasked code)"
                          if took is False else "") for m, took in masks.items())
