"""Figures of fleet jobs (the ``fleet-job`` workload: a management server's job over N simulated
targets, ``targets:N`` levels): targets per minute, job time, the CPU per target of each side,
targets in flight, the time per phase and its ratio to the baseline's, the processes' resources,
the failed targets, and the scalability factor between slice counts.

The worker's ``fleet`` object (docs/worker-protocol.md, "fleet-job") is decoded here into typed
jobs (``decode``), its per-target records read by the column names the worker sends.

Per-phase ratios are descriptive: a phase's time is a part of the job's, whose throughput the
level's verdict is decided on; the ratios show where the time went, with a ``BAND_LEVEL``
interval over the blocks that is not adjusted for multiplicity, and they carry no verdict
(docs/methodology.md, "Fleet jobs: phases").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from cryptoperf import stats
from cryptoperf.model import Outcome
from cryptoperf.workloads import access
from cryptoperf.workloads.generic import BAND_LEVEL, Family, Point, scaled

#: The workload these figures are of.
KIND = "fleet-job"
#: The result's object this module decodes.
PART = "fleet"
#: Process roles, in the order the worker lists them.
ROLES = ("coordinator", "slice", "agent")
#: The parts a phase's time is split into (``Job.phase_parts``), in the order tables show them.
PARTS = ("wait", "crypto_cpu", "other_cpu", "rest")


# ------------------------------------------------------------------------------ one job

@dataclass(frozen=True)
class Target:
    """One target of a job: ``target`` and ``slice`` numbers, ``status`` (``ok``/``failed``),
    and per phase (in the job's phase order) its (start, end) in µs since the job started, None
    for a phase not reached."""

    target: int
    slice: int
    status: str
    phases: tuple[tuple[float, float] | None, ...]
    #: Per phase: the latency model's wait in it and the slice thread's CPU over it (µs; None
    #: for a phase not reached, or from a worker that did not send them).
    waits: tuple[float | None, ...] = ()
    cpu: tuple[float | None, ...] = ()
    #: The management CPU the latency model burnt for this target (µs, in its last phase).
    other_cpu: float = 0.0

    @property
    def span(self) -> tuple[float, float] | None:
        """(first start, last end) over its phases, µs; None if it never started."""
        times = [t for ph in self.phases if ph is not None for t in ph]
        return (min(times), max(times)) if times else None


@dataclass(frozen=True)
class Process:
    """One process of a job: ``role`` (``coordinator``, ``slice``, ``agent``), ``index``,
    ``cpu_ns`` over the job, ``peak_rss_bytes``, ``max_fds``, its CPU samples on the job's
    clock (``timeline``: s since the job started, set-up before 0) and the CPU it was pinned to
    (``pinned_cpu``, None when not pinned)."""

    role: str
    index: int
    cpu_ns: float | None
    peak_rss_bytes: int | None
    max_fds: int | None
    timeline: access.Timeline
    pinned_cpu: int | None = None

    @property
    def label(self) -> str:
        """``slice 0``, ``agent 1``, ``coordinator``."""
        return "coordinator" if self.role == "coordinator" else f"{self.role} {self.index}"


@dataclass(frozen=True)
class Job:
    """One job as the worker ran it (the result's ``fleet`` object).

    Attributes:
        job: the job kind (``audit``, ``appconfig``, ``remediate``); targets, slices, cap,
            agents: its scale; digest, sign_digest, auth: what it ran; items, item_bytes,
            push_bytes, checks, file_bytes: what it moved; phases: its per-target phases, in
            order; completed, failed: targets; host_cpus: the CPUs it could use.
        stages: the job's own stages (``(name, start_us, end_us)``, e.g. signing what the
            targets verify).
        targets_: each target's record; failures: ``(target, slice, phase, reason)`` of each
            failed target; processes: every process.
        wall_s: the job's time (its start to its last target's end).
    """

    job: str
    targets: int
    slices: int
    cap: int
    agents: int
    digest: str
    sign_digest: str
    auth: str
    items: int
    item_bytes: int | None
    push_bytes: int
    checks: int
    file_bytes: int | None
    phases: tuple[str, ...]
    completed: int
    failed: int
    host_cpus: int | None
    stages: tuple[tuple[str, float, float], ...]
    targets_: tuple[Target, ...]
    failures: tuple[tuple[int, int, str, str], ...]
    processes: tuple[Process, ...]
    wall_s: float
    latency: Mapping[str, Any] | None = None
    #: The nodes its slices ran on (``slices_on = "nodes"``: the result's ``sub_jobs``), 1 on one host.
    nodes: int = 1

    def cpus_apart(self) -> tuple[int, int] | None:
        """(CPUs of the slices, CPUs of the agents) when every slice and agent was pinned and the
        two sets do not meet (the management side and the simulated targets had CPUs of their
        own); None when they shared the host's."""
        if self.nodes > 1:
            return None  # pinned on each node apart, but the CPUs' numbers are each node's own
        sl = [p.pinned_cpu for p in self.processes if p.role == "slice"]
        ag = [p.pinned_cpu for p in self.processes if p.role == "agent"]
        if not sl or not ag or None in sl or None in ag or set(sl) & set(ag):
            return None
        return len(set(sl)), len(set(ag))

    def phase_parts(self) -> dict[str, dict[str, list[float]]]:
        """Phase → part → values (ns) over the targets that reached the phase's end, the
        phase's time split: ``wait`` (the latency model's round trips and target work),
        ``crypto_cpu`` (the slice thread's CPU in it: TLS and the job's cryptography, its
        framing and I/O calls, the model's busy loop taken out), ``other_cpu`` (the model's
        management CPU, burnt in the last phase) and ``rest`` (what is left: the target's own
        cryptography and I/O, waiting for a CPU). Empty lists when the worker sent no split."""
        out: dict[str, dict[str, list[float]]] = {p: {k: [] for k in PARTS} for p in self.phases}
        last = len(self.phases) - 1
        for t in self.targets_:
            for k, (name, ph) in enumerate(zip(self.phases, t.phases)):
                if ph is None or k >= len(t.waits) or k >= len(t.cpu) or t.waits[k] is None or t.cpu[k] is None:
                    continue
                other = t.other_cpu if k == last else 0.0
                wall, wait, cpu = ph[1] - ph[0], float(t.waits[k]), float(t.cpu[k])
                parts = {"wait": wait, "crypto_cpu": max(cpu - other, 0.0), "other_cpu": other,
                         "rest": max(wall - wait - cpu, 0.0)}
                for key, v in parts.items():
                    out[name][key].append(1e3 * v)
        return out

    def phase_durations(self) -> dict[str, list[float]]:
        """Phase → the duration (ns) of that phase for every target that reached its end."""
        out: dict[str, list[float]] = {p: [] for p in self.phases}
        for t in self.targets_:
            for name, ph in zip(self.phases, t.phases):
                if ph is not None:
                    out[name].append(1e3 * (ph[1] - ph[0]))
        return out

    def in_flight(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Slice → (times µs, targets in flight from each time on), a step function over the
        job: a target is in flight from its first phase's start to its last phase's end."""
        per: dict[int, list[tuple[float, int]]] = {}
        for t in self.targets_:
            if t.span is not None:
                per.setdefault(t.slice, []).extend([(t.span[0], 1), (t.span[1], -1)])
        out = {}
        for s, events in per.items():
            events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
            times = np.asarray([e[0] for e in events])
            n = np.cumsum([e[1] for e in events])
            # the count after every event at one instant (a target ending as the next one starts)
            last = np.r_[times[1:] != times[:-1], True] if times.size else np.zeros(0, dtype=bool)
            out[s] = (times[last], n[last])
        return out

    def most_in_flight(self) -> int:
        """The most targets any one slice had in flight at once."""
        return max((int(n.max()) for _, n in self.in_flight().values() if n.size), default=0)


def _int(x: Any, default: int = 0) -> int:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else default


def _targets(records: Mapping[str, Any], phases: Sequence[str]) -> tuple[Target, ...]:
    """The records' rows read by the columns' names: ``target``, ``slice``, ``status``, then
    ``<phase>_start_us``, ``<phase>_end_us``, ``<phase>_wait_us`` and ``<phase>_cpu_us`` per
    phase, then ``manager_other_cpu_us`` (the last three absent from older workers)."""
    col = {str(name): i for i, name in enumerate(records.get("columns") or ())}
    out = []
    for row in records.get("rows") or ():
        def at(name: str) -> Any:
            i = col.get(name)
            return row[i] if i is not None and i < len(row) else None
        ph, waits, cpu = [], [], []
        for p in phases:
            a, b = at(f"{p}_start_us"), at(f"{p}_end_us")
            ph.append((float(a), float(b)) if a is not None and b is not None else None)
            w, c = at(f"{p}_wait_us"), at(f"{p}_cpu_us")
            waits.append(float(w) if w is not None else None)
            cpu.append(float(c) if c is not None else None)
        other = at("manager_other_cpu_us")
        out.append(Target(_int(at("target")), _int(at("slice")), str(at("status")), tuple(ph), tuple(waits),
                          tuple(cpu), float(other) if other is not None else 0.0))
    return tuple(out)


def decode(result: access.Result | None) -> Job | None:
    """The ``Job`` of a job's result, None without a ``fleet`` object."""
    f = access.part(result, PART)
    if not f:
        return None
    phases = tuple(str(p) for p in f.get("phases") or ())
    procs = []
    for p in f.get("processes") or ():
        if isinstance(p, Mapping):
            tl = access.timeline(access.samples(p.get("timeline"))).shifted(float(p.get("timeline_offset_ms") or 0.0) / 1000.0)
            pin = p.get("pinned_cpu")
            procs.append(Process(str(p.get("role")), _int(p.get("index")), p.get("cpu_ns"),
                                 p.get("peak_rss_bytes"), p.get("max_fds"), tl,
                                 pin if isinstance(pin, int) and not isinstance(pin, bool) else None))
    fails = tuple((_int(x.get("target")), _int(x.get("slice")), str(x.get("phase")), str(x.get("reason")))
                  for x in f.get("failures") or () if isinstance(x, Mapping))
    stages = tuple((str(s.get("name")), float(s.get("start_us") or 0), float(s.get("end_us") or 0))
                   for s in f.get("job_phases") or () if isinstance(s, Mapping))
    return Job(job=str(f.get("job")), targets=_int(f.get("targets")), slices=_int(f.get("slices"), 1),
               cap=_int(f.get("cap"), 1), agents=_int(f.get("agents")), digest=str(f.get("digest") or ""),
               sign_digest=str(f.get("sign_digest") or ""), auth=str(f.get("auth") or ""),
               items=_int(f.get("items")), item_bytes=f.get("item_bytes"), push_bytes=_int(f.get("push_bytes")),
               checks=_int(f.get("checks")), file_bytes=f.get("file_bytes"), phases=phases,
               completed=_int(f.get("completed")), failed=_int(f.get("failed")),
               host_cpus=f.get("host_cpus"), stages=stages,
               targets_=_targets(f.get("records") or {}, phases), failures=fails, processes=tuple(procs),
               wall_s=(access.wall_ns(result) or 0.0) / 1e9,
               latency=f.get("latency") if isinstance(f.get("latency"), Mapping) else None,
               nodes=max(1, len(f.get("sub_jobs") or ())))


# ------------------------------------------------------------------------------ a level

@dataclass(frozen=True)
class RoleUse:
    """The most one role's processes held over a level's jobs: ``peak_rss_bytes`` (VmHWM) and
    ``max_fds`` (most descriptors open at once); None where no process said."""

    role: str
    peak_rss_bytes: int | None
    max_fds: int | None

    def as_dict(self) -> dict[str, Any]:
        """``role``, ``peak_rss_bytes``, ``max_fds``."""
        return {"role": self.role, "peak_rss_bytes": self.peak_rss_bytes, "max_fds": self.max_fds}


@dataclass(frozen=True)
class JobPoint:
    """One job cell (a configuration at one number of targets) with its figures.

    Attributes:
        point: the generic figures (``point.tx_per_s`` is targets per second; its client side is
            the management server, coordinator and slices, per completed target; its server side
            the targets' agents, per target served).
        blocks: the blocks of its measured jobs; phase_medians: per block, phase → the median
            duration (ns) over that job's targets.
        phase_all_ns: phase → the median duration (ns) over every target of every measured job.
        phase_parts_ns: phase → part (``PARTS``) → its median (ns) over the same targets; empty
            from a worker that sent no split.
        latency: the latency model the jobs ran with (the result's ``latency``), None when off.
        target_s_by_block: per block, the mean time (s) a completed target of that job was in
            flight (its first phase's start to its last's end): Little's law's time in system,
            what ``plan --targets`` scales; wait_s_by_block: per block, the mean over the same
            targets of the latency model's waits (s; 0 when it was off).
        job_s: the median job time (s); failed, ran: targets failed and run over the jobs.
        most_in_flight: the most targets one slice had in flight in any of its jobs.
        roles: per process role, the most it held (``RoleUse``).
        representative: the last measured block's job, decoded (drawn as a timeline), and
            representative_block its block.
        failures: ``(block, target, slice, phase, reason)`` of every failed target.
    """

    point: Point
    blocks: tuple[int, ...]
    phase_medians: Mapping[int, Mapping[str, float]]
    phase_all_ns: Mapping[str, float]
    phase_parts_ns: Mapping[str, Mapping[str, float]]
    latency: Mapping[str, Any] | None
    target_s_by_block: Mapping[int, float]
    wait_s_by_block: Mapping[int, float]
    job_s: float | None
    failed: int
    ran: int
    most_in_flight: int | None
    roles: tuple[RoleUse, ...]
    representative: Job | None
    representative_block: int | None
    failures: tuple[tuple[int, int, int, str, str], ...]
    #: Where its CPU saturates on the host that measured it (``economics.jobs.Saturation``), None
    #: with fewer than 2 measured jobs.
    saturation: Any | None = None

    @property
    def targets_per_min(self) -> stats.Estimate | None:
        """Targets per minute (``point.tx_per_s`` × 60) with its band."""
        return scaled(self.point.tx_per_s, 60)

    @property
    def cap(self) -> int | None:
        """Targets one slice may have in flight."""
        return self.representative.cap if self.representative else None

    @property
    def connections(self) -> int | None:
        """Connections the job could hold at once (slices × cap)."""
        j = self.representative
        return j.slices * j.cap if j else None

    def as_dict(self) -> dict[str, Any]:
        """``cell`` (the point's key: its generic figures, CPU per target of each side included,
        are in the families), ``configuration``, ``targets``, ``targets_per_min``
        (``Estimate.as_dict``), ``job_s``, ``blocks``, ``phase_ns`` (phase → median ns over
        every target), ``phase_parts_ns``, ``target_s_by_block``, ``wait_s_by_block``,
        ``latency_model``, ``failed``, ``ran``, ``most_in_flight``, ``slices``, ``cap``,
        ``connections``, ``roles``, ``representative_block``, ``failures``
        (``[block, target, slice, phase, reason]``) and ``saturation`` (``cpu_busy`` 0–1 of the
        ``busiest`` side, ``cpu_bound``, ``knee_in_flight``, ``in_flight``, ``alone_s``; None
        with fewer than 2 measured jobs)."""
        j, sat = self.representative, self.saturation
        tpm = self.targets_per_min
        return {"cell": self.point.summary.cell.key, "configuration": self.point.series, "targets": int(self.point.x),
                "targets_per_min": tpm.as_dict() if tpm else None, "job_s": self.job_s, "blocks": list(self.blocks),
                "phase_ns": dict(self.phase_all_ns), "phase_parts_ns": {k: dict(v) for k, v in self.phase_parts_ns.items()},
                "target_s_by_block": dict(self.target_s_by_block), "wait_s_by_block": dict(self.wait_s_by_block),
                "latency_model": dict(self.latency) if self.latency else None, "failed": self.failed, "ran": self.ran,
                "most_in_flight": self.most_in_flight, "slices": j.slices if j else None, "cap": self.cap,
                "connections": self.connections, "roles": [r.as_dict() for r in self.roles],
                "representative_block": self.representative_block, "failures": [list(f) for f in self.failures],
                "saturation": None if sat is None else {
                    "cpu_busy": sat.cpu_busy, "busiest": sat.busiest, "cpu_bound": sat.cpu_bound,
                    "knee_in_flight": sat.knee_in_flight, "in_flight": sat.in_flight, "alone_s": sat.alone_s}}


def _roles(jobs: Sequence[Job]) -> tuple[RoleUse, ...]:
    out = []
    for role in ROLES:
        mine = [p for j in jobs for p in j.processes if p.role == role]
        rss = [int(p.peak_rss_bytes) for p in mine if p.peak_rss_bytes is not None]
        fds = [int(p.max_fds) for p in mine if p.max_fds is not None]
        out.append(RoleUse(role, max(rss) if rss else None, max(fds) if fds else None))
    return tuple(out)


def job_point(p: Point, outcomes: Sequence[Outcome]) -> JobPoint:
    """The ``JobPoint`` of a job cell from its measured repetitions (block order)."""
    medians: dict[int, dict[str, float]] = {}
    every: dict[str, list[float]] = {}
    parts: dict[str, dict[str, list[float]]] = {}
    in_flight: dict[int, float] = {}
    waited: dict[int, float] = {}
    jobs, fails, blocks = [], [], []
    rep: tuple[int, int, Job] | None = None
    for o in outcomes:
        job = decode(o.result)
        if job is None:
            continue
        jobs.append(job)
        blocks.append(o.repetition.block)
        if rep is None or (o.repetition.block, o.repetition.attempt) >= rep[:2]:
            rep = (o.repetition.block, o.repetition.attempt, job)
        for phase, ds in job.phase_durations().items():
            every.setdefault(phase, []).extend(ds)
            if ds:
                medians.setdefault(o.repetition.block, {})[phase] = float(np.median(ds))
        done = [t for t in job.targets_ if t.status == "ok" and t.span is not None]
        if done:
            in_flight[o.repetition.block] = float(np.mean([t.span[1] - t.span[0] for t in done])) / 1e6
            waited[o.repetition.block] = float(np.mean([sum(w or 0.0 for w in t.waits) for t in done])) / 1e6
        for phase, split in job.phase_parts().items():
            for part, vs in split.items():
                parts.setdefault(phase, {}).setdefault(part, []).extend(vs)
        fails += [(o.repetition.block, *f) for f in job.failures]
    walls = [j.wall_s for j in jobs]
    return JobPoint(point=p, blocks=tuple(blocks), phase_medians=medians,
                    phase_all_ns={ph: float(np.median(ds)) for ph, ds in every.items() if ds},
                    phase_parts_ns={ph: {k: float(np.median(v)) for k, v in split.items() if v}
                                    for ph, split in parts.items() if any(split.values())},
                    latency=next((j.latency for j in jobs if j.latency), None), target_s_by_block=in_flight,
                    wait_s_by_block=waited,
                    job_s=float(np.median(walls)) if walls else None, failed=sum(j.failed for j in jobs),
                    ran=sum(j.targets for j in jobs),
                    most_in_flight=max((j.most_in_flight() for j in jobs), default=None), roles=_roles(jobs),
                    representative=rep[2] if rep else None,
                    representative_block=rep[0] if rep else None, failures=tuple(fails))


# ------------------------------------------------------------------------------ phases

@dataclass(frozen=True)
class PhaseRow:
    """One phase of one configuration at one level: the median duration (ns) over every target
    of every measured job, and its ratio to the baseline's (``phase_ratio``: descriptive, no
    verdict; None for the baseline and with fewer than 2 paired blocks)."""

    phase: str
    series: str
    median_ns: float | None
    ratio: stats.Interval | None

    def as_dict(self) -> dict[str, Any]:
        """``phase``, ``configuration``, ``median_ns``, ``ratio`` (``Interval.as_dict``, None)."""
        return {"phase": self.phase, "configuration": self.series, "median_ns": self.median_ns,
                "ratio": self.ratio.as_dict() if self.ratio else None}


def phase_ratio(blocks: Mapping[int, float], baseline: Mapping[int, float],
                level: float = BAND_LEVEL) -> stats.Interval | None:
    """A phase's time against the baseline's, paired by block: the geometric mean over the
    blocks both measured of the per-block ratio of median durations, with its ``level`` t
    interval (``stats.paired_log_ratio``; not adjusted for multiplicity: it describes where the
    time went and decides nothing). None with fewer than 2 such blocks."""
    common = [b for b in blocks if b in baseline]
    if len(common) < 2:
        return None
    try:
        return stats.paired_log_ratio([blocks[b] for b in common], [baseline[b] for b in common], level)
    except ValueError:
        return None


def phase_rows(points: Sequence[JobPoint], baseline: str) -> tuple[PhaseRow, ...]:
    """``PhaseRow``s of one level's points (one per configuration, in series order), per
    configuration, per phase in the job's order."""
    base = next((p for p in points if p.point.series == baseline), None)
    rows = []
    for p in points:
        phases = list(dict.fromkeys(ph for b in p.phase_medians.values() for ph in b))
        for ph in phases:
            ratio = None
            if base is not None and p is not base:
                ratio = phase_ratio({b: m[ph] for b, m in p.phase_medians.items() if ph in m},
                                    {b: m[ph] for b, m in base.phase_medians.items() if ph in m})
            rows.append(PhaseRow(ph, p.point.series, p.phase_all_ns.get(ph), ratio))
    return tuple(rows)


# ------------------------------------------------------------------------------ families

@dataclass(frozen=True)
class JobLevel:
    """One number of targets of a job family: its points (series order) and their phases."""

    targets: int
    points: tuple[JobPoint, ...]
    phases: tuple[PhaseRow, ...]

    def as_dict(self) -> dict[str, Any]:
        """``targets``, ``cells`` (its points' keys) and ``phases`` (``PhaseRow.as_dict``)."""
        return {"targets": self.targets, "cells": [p.point.summary.cell.key for p in self.points],
                "phases": [r.as_dict() for r in self.phases]}


@dataclass(frozen=True)
class JobFamily:
    """The levels of one job kind (a ``generic.Family`` of job cells) with their figures.

    Attributes:
        family: the generic family; points: its points' job figures, in the family's order.
        levels: every number of targets with a measured point, ascending.
        example: a measured job (what the kind runs, for its description), or None.
    """

    family: Family
    points: tuple[JobPoint, ...]
    levels: tuple[JobLevel, ...]
    example: Job | None

    @property
    def largest(self) -> JobLevel | None:
        """The level with the most targets."""
        return self.levels[-1] if self.levels else None

    def as_dict(self) -> dict[str, Any]:
        """``family`` (``Family.identity``), ``job`` (the example job's kind), ``points``
        (``JobPoint.as_dict``) and ``levels`` (``JobLevel.as_dict``)."""
        return {"family": self.family.identity(), "job": self.example.job if self.example else None,
                "points": [p.as_dict() for p in self.points], "levels": [lv.as_dict() for lv in self.levels]}


@dataclass(frozen=True)
class Scalability:
    """A configuration whose slices differ from the baseline's at one level.

    Attributes:
        family: the job family; point: the configuration's; k, k0: its and the baseline's slices.
        factor: the throughput ratio k ÷ k0 slices (the comparison's interval), None without one.
        cpus: the host's CPUs; agents: the agent processes (whether the CPUs bounded it is
            measured: ``economics.jobs.saturation``).
    """

    family: JobFamily
    point: JobPoint
    k: int
    k0: int
    factor: stats.Interval | None
    cpus: int
    agents: int

    def as_dict(self) -> dict[str, Any]:
        """``cell``, ``configuration``, ``slices`` and ``baseline_slices``, ``factor``
        (``Interval.as_dict``), ``ideal`` (k ÷ k0), ``cpus`` and ``agents`` (the point's
        saturation is in its ``JobPoint.as_dict``)."""
        return {"cell": self.point.point.summary.cell.key, "configuration": self.point.point.series,
                "slices": self.k, "baseline_slices": self.k0, "factor": self.factor.as_dict() if self.factor else None,
                "ideal": self.k / self.k0 if self.k0 else None, "cpus": self.cpus, "agents": self.agents}


@dataclass(frozen=True)
class FleetFigures:
    """Every fleet-job figure of a run: ``families``, ``scalability`` (configurations whose
    slices differ from the baseline's), and the targets failed and run over every measured job."""

    families: tuple[JobFamily, ...]
    scalability: tuple[Scalability, ...]
    failed: int
    ran: int

    def as_dict(self) -> dict[str, Any]:
        """``families`` (``JobFamily.as_dict``), ``scalability`` (``Scalability.as_dict``),
        ``failed`` and ``ran`` (targets over every measured job)."""
        return {"families": [f.as_dict() for f in self.families], "scalability": [s.as_dict() for s in self.scalability],
                "failed": self.failed, "ran": self.ran}


def _family(f: Family, measured: Mapping[str, Sequence[Outcome]], baseline: str) -> JobFamily:
    points = tuple(job_point(p, measured.get(p.summary.cell.key, ())) for p in f.points)
    points = tuple(replace(p, saturation=saturation(p)) for p in points)
    levels = []
    for x in sorted({p.point.x for p in points if p.blocks}):
        pts = tuple(sorted((p for p in points if p.point.x == x and p.blocks), key=lambda p: p.point.order))
        levels.append(JobLevel(int(x), pts, phase_rows(pts, baseline)))
    example = next((p.representative for p in points if p.representative), None)
    return JobFamily(f, points, tuple(levels), example)


def _scalability(fam: JobFamily, baseline: str, host_cpus: int) -> list[Scalability]:
    base = {p.point.x: p for p in fam.points if p.point.series == baseline}
    out = []
    for p in fam.points:
        b = base.get(p.point.x)
        if p.point.series == baseline or b is None or p.representative is None or b.representative is None:
            continue
        mine, theirs = p.representative, b.representative
        if mine.slices == theirs.slices:
            continue
        d = p.point.delta
        factor = d.throughput if d is not None and d.status == "ok" else None
        out.append(Scalability(fam, p, mine.slices, theirs.slices, factor,
                               int(mine.host_cpus or host_cpus or 1), mine.agents))
    return out


def saturation(point: JobPoint) -> Any | None:
    """Where a job cell's CPU saturates on the host that measured it
    (``economics.jobs.saturation``: how busy its jobs kept the CPUs, and the knee), None with
    fewer than 2 measured jobs."""
    from cryptoperf.economics import jobs  # economics reads these figures: imported when used
    from cryptoperf.economics.cost import EconomicsError
    try:
        return jobs.saturation(jobs.measured_point(point))
    except EconomicsError:
        return None


def analyse(families: Sequence[Family], measured: Mapping[str, Sequence[Outcome]], context: Any) -> FleetFigures:
    """The ``FleetFigures`` of a run's job families (``measured``: cell key → its measured
    repetitions, block order; ``context``: a ``workloads.Context``)."""
    fams = tuple(_family(f, measured, context.baseline) for f in families)
    scal = tuple(s for f in fams for s in _scalability(f, context.baseline, context.host_cpus))
    failed = sum(p.failed for f in fams for p in f.points)
    ran = sum(p.ran for f in fams for p in f.points)
    return FleetFigures(fams, scal, failed, ran)
