"""Plan: expand a study into cells and an interleaved schedule of runs.

A *cell* is one thing measured: (configuration, backend, operation label, message size), with
the worker op name and parameters resolved. A *run* is one repetition of one cell, in one
fresh worker process. Cells that are compared with each other (same backend, label and size,
different configurations) form a *group*; the schedule runs, for every repetition, every group
with its configurations back to back, so configurations alternate A B C A B C … and slow drift
(thermal, frequency, neighbours) hits all of them alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from cryptoperf.builds import DEFAULT as DEFAULT_BUILD
from cryptoperf.cpumask import BASELINE
from cryptoperf.study import Study

#: Cell attributes that follow the key's four parts as ``/name=value`` when not at their default.
_KEY_ATTRS = (("cpu", BASELINE), ("build", DEFAULT_BUILD))


@dataclass(frozen=True)
class Cell:
    """One measured thing.

    Attributes:
        configuration: configuration name ('' for ``cryptoperf speed``).
        backend: worker backend name.
        label: row label (the operation's label in a study, the op name in ``speed``).
        op: worker operation name after template substitution.
        params: worker parameters other than ``size_bytes`` (``digest``, ``padding``).
        size_bytes: message size, or None for operations without a message (or to let the
            worker use its default size).
        cpu: the CPU capability mask the cell's workers run under (``cpumask.NAMES``); its
            worker is started with that mask's ``OPENSSL_ia32cap`` and verifies it.
        build: the worker build its runs use (``builds.BUILDS``: ``default``, ``fips``, ...).
    """

    configuration: str
    backend: str
    label: str
    op: str
    params: Mapping[str, str] = field(default_factory=dict, hash=False)
    size_bytes: int | None = None
    cpu: str = BASELINE
    build: str = DEFAULT_BUILD

    @property
    def group(self) -> tuple[str, str, int | None]:
        """(backend, label, size_bytes): cells with the same group are compared."""
        return (self.backend, self.label, self.size_bytes)

    @property
    def key(self) -> str:
        """A stable text key, ``backend/label/size/configuration`` (size ``-`` when None),
        followed by ``/cpu=<mask>`` for a CPU mask other than baseline and ``/build=<name>``
        for a worker build other than the default."""
        size = "-" if self.size_bytes is None else str(self.size_bytes)
        key = f"{self.backend}/{self.label}/{size}/{self.configuration}"
        for name, default in _KEY_ATTRS:
            value = getattr(self, name)
            if value != default:
                key += f"/{name}={value}"
        return key

    def worker_params(self) -> dict[str, Any]:
        """The ``params`` object of the worker's run request (with ``size_bytes`` if set)."""
        p: dict[str, Any] = dict(self.params)
        if self.size_bytes is not None:
            p["size_bytes"] = self.size_bytes
        return p


def attrs_from_key(key: str) -> dict[str, str]:
    """``{"cpu": mask, "build": name}`` of a cell from its ``key`` (defaults where the key
    names none)."""
    out = dict(_KEY_ATTRS)
    parts = key.split("/")
    while parts:
        name, sep, value = parts[-1].partition("=")
        if not sep or name not in out:
            break
        out[name] = value
        parts.pop()
    return out


@dataclass(frozen=True)
class Run:
    """One repetition of one cell. ``repetition`` is 1-based; ``index`` is the 0-based position
    in the schedule."""

    cell: Cell
    repetition: int
    index: int

    @property
    def request_id(self) -> str:
        """The run request's ``id``: ``<cell key>#<repetition>``."""
        return f"{self.cell.key}#{self.repetition}"


@dataclass(frozen=True)
class Settings:
    """Worker settings shared by every run of a plan (seconds, warmup_s in s; timeout_s in s)."""

    seconds: float
    warmup_s: float
    threads: int
    timeout_s: float


def run_request(run: Run, settings: Settings) -> dict[str, Any]:
    """The worker protocol's ``run`` request for ``run`` (docs/worker-protocol.md)."""
    return {
        "type": "run",
        "id": run.request_id,
        "backend": run.cell.backend,
        "op": run.cell.op,
        "params": run.cell.worker_params(),
        "threads": settings.threads,
        "warmup_s": settings.warmup_s,
        "seconds": settings.seconds,
        "batch": None,
        "cpu_mask": run.cell.cpu,
    }


def expand(study: Study) -> list[Cell]:
    """Every cell of a study (whose ``backends`` are resolved, see
    ``study.check_against_worker``), ordered backend → operation → size → configuration."""
    cells = []
    for backend in study.backends or ():
        for operation in study.operations:
            for size in operation.sizes or (None,):
                for config in study.configurations:
                    if backend not in study.backends_of(config):
                        continue
                    op, params = study.resolve(config, operation)
                    cells.append(Cell(config.name, backend, operation.label, op, params, size,
                                      config.cpu, config.build))
    # configurations pinned to a backend not in [study] backends
    extra = [c for c in study.configurations
             if c.backend and c.backend not in (study.backends or ())]
    for config in extra:
        for operation in study.operations:
            for size in operation.sizes or (None,):
                op, params = study.resolve(config, operation)
                cells.append(Cell(config.name, config.backend, operation.label, op, params, size,
                                  config.cpu, config.build))
    return cells


def groups(cells: Iterable[Cell]) -> dict[tuple[str, str, int | None], list[Cell]]:
    """Cells by ``Cell.group``, in first-seen order, each list in the given order."""
    out: dict[tuple[str, str, int | None], list[Cell]] = {}
    for c in cells:
        out.setdefault(c.group, []).append(c)
    return out


def schedule(cells: Sequence[Cell], repetitions: int) -> list[Run]:
    """Interleaved runs: for rep in 1..R, for each group, for each configuration: one run.

    So the configurations of a group alternate (A B C A B C …) and each repetition visits every
    cell once before the next begins. ``repetitions`` must be >= 1.
    """
    if repetitions < 1:
        raise ValueError("repetitions must be >= 1")
    runs: list[Run] = []
    grouped = groups(cells)
    for rep in range(1, repetitions + 1):
        for group_cells in grouped.values():
            for cell in group_cells:
                runs.append(Run(cell, rep, len(runs)))
    return runs


def estimated_seconds(n_runs: int, settings: Settings, per_run_overhead_s: float = 0.3) -> float:
    """A rough wall-clock estimate for ``n_runs`` runs: warm-up + budget + process start and
    validation (``per_run_overhead_s``) each, in seconds."""
    return n_runs * (settings.warmup_s + settings.seconds + per_run_overhead_s)
