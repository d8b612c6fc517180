"""Compare two stored runs: what differs between their hosts, then every cell measured in both;
or the hosts of one run spread over several machines (``compare_hosts``).

Run A is the baseline. Cells are matched by (configuration, backend, label, size_bytes), whatever
CPU mask they ran under: a mask that differs is named first among the host differences. Two
runs share no blocks, so each matched pair gets Welch's interval on the log values of each
run's repetitions (``analysis.compare_unpaired``) — adjusted together over all matched cells
unless ``multiplicity`` is off — and the verdict a study would give, against the same margin:
"x % slower [CI]", "equivalent within ±m %" or "inconclusive". ``failing`` is the regression
gate of ``cryptoperf compare --fail-on``. Cells measured in only one run are listed as
unmatched. Host differences come first because they are usually the explanation: another
CPU, kernel, hypervisor or library version.

``compare_hosts`` compares the machines of one run (a study whose repetitions ran on several
nodes): its outcomes are split by the machine that ran them (``Outcome.host``, else the run's
host), each machine's share is summarised as a run of its own, and each machine is compared
with the baseline machine exactly as ``compare_runs`` compares two runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from cryptoperf import analysis, stats
from cryptoperf.cpumask import BASELINE
from cryptoperf.errors import NoComparison, UsageError
from cryptoperf.model import CellSummary, Delta, Outcome
from cryptoperf.stored import StoredRun

#: host checks that read a moment (steal, other load), not a setting: two runs always differ a
#: little, so only a change of state (ok → warning) is reported
SAMPLED_CHECKS = ("steal", "other load")


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


@dataclass
class Comparison:
    """Run B against run A.

    Attributes:
        a, b: the runs (A is the baseline).
        host: host differences (empty when the fingerprints and the matched cells' CPU masks
            agree), a CPU mask difference first (``mask_differences``).
        deltas: one per matched cell, in run A's order; ``baseline`` and ``configuration`` are
            the cell's configuration; ratios are B ÷ A. An ``n/a`` delta still carries both
            p50 medians when each side has a measured repetition.
        only_a, only_b: cells measured in one run only.
        settings: how the verdicts were decided (margin, multiplicity).
        comparisons: deltas with an interval; level: each interval's level after adjustment.
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

    @property
    def method(self) -> str:
        """How the intervals were made (``analysis.method_text``)."""
        return analysis.method_text(self.settings, self.comparisons, self.level, paired=False, deltas=self.deltas)

    def failing(self, fail_on: Sequence[str]) -> list[Delta]:
        """The deltas that fail a regression gate: with ``slower`` in ``fail_on``, those
        "slower" beyond the margin (not "x % slower, within the ±m % margin"); with
        ``inconclusive``, the undecided ones (a delta without an interval counts as undecided)."""
        out = []
        for d in self.deltas:
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

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``baseline_run`` and ``run`` (id, kind, study, started_at, status),
        ``host_differences``, ``deltas`` (``Delta.as_dict``, verdicts included), ``unmatched``
        (cells with the run id they are in), ``analysis`` (settings, comparisons, level,
        method)."""
        def run(r: StoredRun) -> dict[str, Any]:
            m = r.meta
            return {"id": r.id, "kind": m.get("kind"), "study": m.get("study_name"),
                    "started_at": m.get("started_at"), "status": m.get("status")}
        unmatched = ([{"run_id": self.a.id, **s.cell.as_dict()} for s in self.only_a]
                     + [{"run_id": self.b.id, **s.cell.as_dict()} for s in self.only_b])
        return {"baseline_run": run(self.a), "run": run(self.b),
                "host_differences": [h.as_dict() for h in self.host],
                "deltas": [d.as_dict() for d in self.deltas], "unmatched": unmatched,
                "analysis": {"settings": self.settings.as_dict(), "comparisons": self.comparisons,
                             "level": self.level, "method": self.method}}


def compare_runs(a: StoredRun, b: StoredRun, margin_pct: float | None = None,
                 multiplicity: bool = True, names: tuple[str, str] | None = None) -> Comparison:
    """Compare run ``b`` with run ``a`` (the baseline), cell by cell.

    ``margin_pct`` defaults to run A's study margin (the default margin for a ``speed`` run).
    A cell with fewer than ``stats.MIN_BLOCKS`` measured repetitions on either side (every
    ``speed`` cell) gets an ``n/a`` delta saying so, with both medians. ``names`` name the two
    sides in those reasons (default ``run <id>``).
    """
    margin = float(a.option("margin_pct")) if margin_pct is None else margin_pct
    settings = analysis.Settings(margin_pct=margin, multiplicity=multiplicity,
                                 noise_threshold_pct=float(a.option("noise_threshold_pct")))
    in_b = {match_key(s): s for s in b.summaries.values()}
    in_a = {match_key(s) for s in a.summaries.values()}
    pairs, only_a = [], []
    for s_a in a.summaries.values():
        s_b = in_b.get(match_key(s_a))
        if s_b is None:
            only_a.append(s_a)
        else:
            pairs.append((s_a, s_b))
    deltas, m, level = analysis.compare_unpaired(pairs, names or (f"run {a.id}", f"run {b.id}"), settings,
                                                 analysis.context_of(a.host, a.study))
    only_b = [s for s in b.summaries.values() if match_key(s) not in in_a]
    return Comparison(a=a, b=b, host=mask_differences(pairs) + host_differences(a.host, b.host), deltas=deltas,
                      only_a=only_a,
                      only_b=only_b, settings=settings, comparisons=m, level=level)


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
    ``compare_runs`` (margin: the run's study margin unless ``margin_pct``).

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
                                names=(base.name, h.name)) for h in hosts[1:]]
    return HostComparison(run=run, baseline=base, hosts=hosts, comparisons=comparisons)
