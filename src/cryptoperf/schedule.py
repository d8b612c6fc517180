"""Schedule: expand a study into cells, and cells into randomised complete blocks.

A block runs every configuration of one group (same backend, operation label and size; a
configuration pinned to another backend than the baseline's joins the baseline's group, so two
implementations are compared block by block) once,
in an order drawn from the study's seed; the groups themselves are visited in a fresh random
order in every round of blocks. So drift (thermal, frequency, a neighbour on the host) hits
every configuration alike, and no configuration always goes first, which a fixed order would
alias onto it. The order is stored with every repetition (block and position), and the
analysis pairs each configuration with the baseline of the same block.

Before the blocks, one calibration repetition per cell (block 0) measures briefly and reports
the worker's batch size and whether the cell is supported; every repetition of a group then
uses one batch size, the largest any of its configurations needed, so the two sides of every
comparison time the same statistic.
"""

from __future__ import annotations

import secrets
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from cryptoperf import levels
from cryptoperf.model import CALIBRATION_BLOCK, THREADS_PARAM, Cell, Outcome, Repetition, ServerSpec
from cryptoperf.study import Study
from cryptoperf.study.types import base_dir

#: Measuring budget of a calibration repetition, in s: long enough for the worker to calibrate
#: and time a few batches, short enough to cost little next to the blocks.
CALIBRATION_SECONDS = 0.05

Group = tuple[str, str, "int | None"]


def expand(study: Study) -> list[Cell]:
    """Every cell of a study (whose ``backends`` are resolved, see
    ``study.check_against_worker``), ordered backend → operation → size → configuration; a
    workload's cells carry its spec (``Cell.spec``)."""
    cells = []

    def specs_of(config) -> Mapping:
        return study.rules_for(config).workloads if study.rules is not None else {}

    def add(backend: str, operation, configs) -> None:
        resolved = {c.name: study.resolve(c, operation) for c in configs}
        # each configuration's op resolved against its own worker's workload specs
        specs = {op: spec for c in configs if (spec := specs_of(c).get(op := resolved[c.name][0])) is not None}
        workloads = [op for op, _ in resolved.values() if op in specs]
        default = specs[workloads[0]].defaults.get("load") if workloads else None
        loads = operation.loads or ((default or levels.DEFAULT_LOAD,) if workloads else (None,))
        # a primitive's thread counts, each a row (None: the study's threads, the label as written)
        threads = operation.threads if operation.threads and not workloads else (None,)
        for size in operation.sizes or (None,):
            for load in loads:
                for n in threads:
                    for config in configs:
                        op, params = resolved[config.name]
                        p = dict(params) if load is None else {**params, "load": load}
                        if n is not None:
                            p[THREADS_PARAM] = str(n)
                        cells.append(Cell(config.name, backend, levels.row_label(operation.label, load, n), op, p,
                                          size, config.cpu, config.build,
                                          spec=specs_of(config).get(op), server=server_spec(study, config, operation, p),
                                          paired_on=study.paired_on(config)))

    for backend in study.backends or ():
        for operation in study.operations:
            add(backend, operation, [c for c in study.configurations if backend in study.backends_of(c)])
    # configurations pinned to a backend not in [study] backends
    extra = [c for c in study.configurations
             if c.backend and c.backend not in (study.backends or ())]
    for config in extra:
        for operation in study.operations:
            add(config.backend, operation, [config])
    return cells


def server_spec(study: Study, config, operation, params: Mapping[str, str]) -> ServerSpec | None:
    """The server under test of ``operation`` for ``config`` (None without ``server``): its
    templates as written, the configuration's variables to fill them, and the certificate kind
    the workload's resolved ``params`` ask the client to check."""
    if operation.server is None:
        return None
    return ServerSpec(command=operation.server, files=operation.server_files,
                      env=tuple(sorted(operation.server_env.items())), ready_s=operation.server_ready_s,
                      cert=params.get("cert", "ecdsa-p256"),
                      variables={k: str(v) for k, v in config.variables.items()},
                      study_dir=base_dir(study.path))


def groups(cells: Iterable[Cell]) -> dict[Group, list[Cell]]:
    """Cells by ``Cell.group``, in first-seen order, each list in the given order."""
    out: dict[Group, list[Cell]] = {}
    for c in cells:
        out.setdefault(c.group, []).append(c)
    return out


#: The largest seed ``fresh_seed`` draws (a run's seed is printed and may be pasted into a study
#: file: nine digits at most).
FRESH_SEED_MAX = 10**9


def fresh_seed() -> int:
    """A new seed for one run's block order, from the operating system's randomness, in
    [0, ``FRESH_SEED_MAX``)."""
    return secrets.randbelow(FRESH_SEED_MAX)


def new_run_seed(pinned: int | None) -> int:
    """The seed of a new run's block order: ``pinned`` (a study file's ``seed``) when given, else
    a fresh one (``fresh_seed``)."""
    return pinned if pinned is not None else fresh_seed()


def _rng(seed: int, *parts: Any) -> np.random.Generator:
    """A generator for one random choice of the schedule: the study's seed with ``parts``
    (block number, a group's text), so an order does not depend on what else is scheduled."""
    return np.random.default_rng([seed] + [zlib.crc32(str(p).encode()) for p in parts])


def calibration(cells: Sequence[Cell]) -> list[Repetition]:
    """One calibration repetition per cell (block 0, in cell order)."""
    return [Repetition(c, CALIBRATION_BLOCK, position=i, index=i) for i, c in enumerate(cells)]


def blocks(cells: Sequence[Cell], first: int, last: int, seed: int,
           batches: Mapping[Group, int | None] | None = None, start_index: int = 0) -> list[Repetition]:
    """Blocks ``first`` .. ``last`` (1-based, inclusive) of every group of ``cells``.

    For each block number, the groups are visited in a seeded random order, and within each
    group its cells run in a seeded random order (``position`` records it). Only the cells
    given are scheduled: pass a group's baseline and its undecided configurations to add
    blocks to those comparisons only. ``batches`` gives each group's batch size (absent: the
    worker calibrates). Returns the repetitions in execution order, ``index`` counting from
    ``start_index``. Raises ValueError if ``first`` < 1 or ``last`` < ``first``.
    """
    if first < 1 or last < first:
        raise ValueError(f"blocks must be 1 <= first <= last, got {first}..{last}")
    grouped = groups(cells)
    names = list(grouped)
    out: list[Repetition] = []
    for b in range(first, last + 1):
        for gi in _rng(seed, "groups", b).permutation(len(names)):
            g = names[int(gi)]
            members = grouped[g]
            order = _rng(seed, "block", b, "/".join(map(str, g))).permutation(len(members))
            for pos, ci in enumerate(order):
                out.append(Repetition(members[int(ci)], b, position=pos, index=start_index + len(out),
                                      batch=(batches or {}).get(g)))
    return out


def missing(reps: Sequence[Repetition], done: Iterable[Outcome]) -> tuple[list[Repetition], list[Outcome]]:
    """What a resumed study still has to run of ``reps`` (one phase's schedule, in order),
    given the outcomes ``done`` it already has.

    A repetition is done when an outcome of the same cell and block is not superseded. A
    calibration repetition stands alone; a block of a group (every configuration of the group
    once, block > 0) is all or nothing: when some of its repetitions are done and others not
    (the study stopped mid-block), the whole block runs again, because its configurations are
    compared with each other and must run close together in time. Returns the repetitions to
    run (in the given order) and the outcomes of cut blocks, which the caller keeps as
    superseded."""
    finished: dict[tuple[str, int], Outcome] = {}
    for o in done:
        if not o.superseded:
            finished[(o.cell.key, o.repetition.block)] = o
    by_block: dict[tuple, list[Repetition]] = {}
    for r in reps:
        by_block.setdefault((r.cell.key,) if r.calibration else (r.cell.group, r.block), []).append(r)
    cut: list[Outcome] = []
    skip: set[int] = set()
    for members in by_block.values():
        have = [finished[(r.cell.key, r.block)] for r in members if (r.cell.key, r.block) in finished]
        if len(have) == len(members):
            skip.update(id(r) for r in members)
        else:
            cut += have
    todo = [r for r in reps if id(r) not in skip]
    return todo, cut


def looks(repetitions: int, max_repetitions: int | None) -> tuple[int, ...]:
    """The block counts at which a sequential study (``until = "decided"``) looks at its
    comparisons: ``repetitions``, then doubling, then ``max_repetitions`` (e.g. 10, 20, 40, 60
    for 10 and 60). Without ``max_repetitions`` (a fixed study): just ``(repetitions,)``."""
    if max_repetitions is None or max_repetitions <= repetitions:
        return (repetitions,)
    out = [repetitions]
    while out[-1] * 2 < max_repetitions:
        out.append(out[-1] * 2)
    out.append(max_repetitions)
    return tuple(out)


@dataclass(frozen=True)
class Settings:
    """Worker settings shared by every repetition (seconds, warmup_s, timeout_s in s;
    ``work_dir``: where a file workload's repetitions get their private directories, None for
    the system's temporary directory; ``env``: see below)."""

    seconds: float
    warmup_s: float
    threads: int
    timeout_s: float
    work_dir: str | None = None
    #: Variables every worker of the run gets on top of the orchestrator's environment: a device
    #: backend's token (``pkcs11.Token.worker_env``: module, label, PIN file; never a PIN).
    env: Mapping[str, str] = field(default_factory=dict)


def run_request(rep: Repetition, settings: Settings,
                unmasked_vector: str | None = None) -> dict[str, Any]:
    """The worker protocol's ``run`` request for ``rep`` (docs/worker-protocol.md).

    A calibration repetition measures for ``CALIBRATION_SECONDS`` without warm-up, at the
    level ``calibration_load`` gives (a job's: at most its spec's calibration targets).
    ``unmasked_vector`` is the capability vector the cell's library reported in a process
    started without a mask, which the worker checks its vector against (baseline: equal).
    """
    req = {
        "type": "run",
        "id": rep.request_id,
        "backend": rep.cell.backend,
        "op": rep.cell.op,
        "params": rep.cell.worker_params(),
        # A workload takes its concurrency from its load level, and times every transaction.
        "threads": 1 if rep.cell.is_workload else rep.cell.threads or settings.threads,
        "warmup_s": 0.0 if rep.calibration else settings.warmup_s,
        "seconds": min(CALIBRATION_SECONDS, settings.seconds) if rep.calibration else settings.seconds,
        "batch": None if rep.cell.is_workload else rep.batch,
        "cpu_mask": rep.cell.cpu,
    }
    if unmasked_vector is not None:
        req["cpu_vector_unmasked"] = unmasked_vector
    if rep.calibration:
        small = calibration_load(rep.cell)
        if small is not None:
            req["params"]["load"] = small
    return req


def calibration_load(cell: Cell) -> str | None:
    """The level a calibration repetition of ``cell`` runs at, when not its own: a job's spec
    names a small one (``calibration_load``, e.g. ``targets:10``: the calibration tells whether
    the cell runs and is valid, and a job has no batch size to calibrate), and a job level below
    it keeps its own. None for every other cell (it calibrates at its own level)."""
    small = cell.spec.calibration_load if cell.spec is not None else None
    if small is None or cell.load is None:
        return None
    own, cal = levels.parse_load(cell.load), levels.parse_load(small)
    if own.targets is not None and cal.targets is not None and own.targets <= cal.targets:
        return None
    return small


#: Start-up of a workload's repetition beyond a primitive's, in s: the server process, its
#: certificates and the cross-checks; measured about 0.65 s on average over
#: studies/tls-handshake.toml on a 2-vCPU VM (2026-11-23) and 0.78-0.89 s over fips-modules'
#: handshakes (FIPS builds at the top) on a 2-vCPU AMD EPYC (2026-11-29).
WORKLOAD_OVERHEAD_S = 0.8


#: A job repetition's start-up beyond its targets' work, in s (agents issuing the targets'
#: certificates, the slices, the probe), and a job's seconds per target on 2 cores, both rough
#: figures measured with the release worker on a 2-vCPU VM (AWS-LC, RSA-2048: 1.5–5 ms per
#: target depending on the job kind; RSA-4096 about three times that) for estimates only.
JOB_OVERHEAD_S = 0.8
JOB_SECONDS_PER_TARGET = 0.006


@dataclass(frozen=True)
class JobTime:
    """What the worker plans for one job repetition (its ``check`` answer), in s.

    Attributes:
        work_s: its targets' set-up and cryptography, the worker's rough estimate
            (``planned_work_s``); None: ``JOB_SECONDS_PER_TARGET`` per target.
        wait_s: its latency model's waits scheduled on its threads (``planned_wait_s``).
    """

    work_s: float | None = None
    wait_s: float = 0.0


def job_seconds(load: str | None, planned: JobTime = JobTime()) -> float:
    """A rough wall-clock estimate of one job repetition at ``load`` (``targets:N``) as the
    worker ``planned`` it, in s: the process start, then the longer of the targets' own work and
    their latency model's waits — a thread waiting for the network leaves the CPUs to the
    others, so the two overlap. (Held against whole studies: docs/methodology.md, "Time
    estimates".)"""
    n = levels.parse_load(load).targets if load else None
    work = planned.work_s if planned.work_s is not None else (n or 1) * JOB_SECONDS_PER_TARGET
    return JOB_OVERHEAD_S + max(work, planned.wait_s)


def job_cell_seconds(cell: Cell, blocks: int, calibration: JobTime = JobTime(), each: JobTime = JobTime()) -> float:
    """A rough wall-clock estimate of a job cell's calibration and ``blocks`` repetitions, in s
    (``job_seconds``), as the worker planned them (``calibration``: its calibration
    repetition; ``each``: every other)."""
    return job_seconds(calibration_load(cell) or cell.load, calibration) + blocks * job_seconds(cell.load, each)


def estimated_seconds(n_repetitions: int, settings: Settings, per_repetition_overhead_s: float = 0.05) -> float:
    """A rough wall-clock estimate for ``n_repetitions``: warm-up + budget + process start and
    validation (``per_repetition_overhead_s``, ~50 ms measured with the release worker) each, in
    seconds."""
    return n_repetitions * (settings.warmup_s + settings.seconds + per_repetition_overhead_s)


def calibration_seconds(n_cells: int, settings: Settings, per_repetition_overhead_s: float = 0.05) -> float:
    """A rough wall-clock estimate of the calibration repetitions, in seconds."""
    return n_cells * (min(CALIBRATION_SECONDS, settings.seconds) + per_repetition_overhead_s)


def group_batch(calibrated: Iterable[int | None]) -> int | None:
    """The batch size a group uses: the largest its configurations calibrated to (the fastest
    operation's, so that every sample of every configuration lasts at least the worker's
    target), or None when none calibrated."""
    ks = [k for k in calibrated if k]
    return max(ks) if ks else None
