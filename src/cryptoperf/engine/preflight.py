"""Checks made before the first repetition of a study: what can be known before measuring is
known before measuring.

``check(plan, out_dir, store)`` refuses, with one line naming the figure, a study that would
measure for hours and then fail to keep what it measured or run out of a resource part-way:

- the output directory (``--out``) cannot be written, or cannot take a hard link (the reports
  are written aside and linked into place: ``report.render.write_text``);
- the store cannot be written: a SQLite file or its directory on a read-only filesystem (the
  file, its ``-wal`` and ``-shm`` beside it), a PostgreSQL server in read-only mode (a standby)
  or a role that may not insert;
- the filesystem of the store, of the output directory and of the work files has less room than
  the study will write (``estimate``: the bytes a repetition stores, measured from real results,
  times the repetitions planned, plus the reports);
- memory: the most the study's processes hold at once, for its heaviest cell, plus what the
  orchestrator keeps of every result, exceeds ``MemAvailable`` (``/proc/meminfo``);

and returns warnings, one line each, for what does not stop a study but colours its figures: a
cell whose threads (``threads``, or a workload's ``closed:N`` connections) exceed the logical
CPUs, where latency then includes time spent descheduled.

File descriptors (a workload's connections, a job's cap × slices, against ``ulimit -n``) and the
work directory of a file workload (writable, room for its files) are checked when the study is
checked against the worker (``study.check_against_worker``, ``engine.check_work_dir``); their
figures enter here only where they share a filesystem with the results.

The per-repetition figures are from the real worker: a workload's are the estimates its spec
announces in hello (``WorkloadSpec.sizing``), a primitive's this module's constants
(docs/reliability.md, "Checked before the first repetition", has the host and the runs they come
from).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from cryptoperf import levels, schedule
from cryptoperf.errors import PreflightError

if TYPE_CHECKING:  # engine imports this module
    from cryptoperf.engine.prepare import PreparedStudy
    from cryptoperf.model import Cell

MiB = 1 << 20

# --- bytes stored per repetition: the worker's result message as JSON (the store keeps it whole,
# histogram and, for a job, every target's record), plus the row's other columns. A workload's
# result grows with its window or its targets: its size is the worker's estimate (its spec's
# ``sizing``, ``WorkloadSpec.result_bytes``).
# Measured with the release worker (docs/reliability.md): a primitive's result 1.8-2.4 KB (0.3 to
# 2 s).
#: A primitive operation's result.
PRIMITIVE_RESULT_BYTES = 4 << 10
#: A results row's columns beside the result (cell, params, host, timestamps).
ROW_BYTES = 1 << 10
#: The reports beside the JSON document: the HTML report's fixed part (styles, script) ...
REPORT_BYTES = 2 * MiB
#: ... and per cell (its rows and inline SVG plots, in HTML and Markdown).
REPORT_BYTES_PER_CELL = 64 << 10

# --- memory at the peak: repetitions run one at a time on a machine (the local executor; a Ray
# node runs one block at a time), so the peak is the heaviest cell's processes, plus what the
# orchestrator keeps of every result so far. A workload's processes are the worker's estimate
# (its spec's ``sizing.memory``, ``WorkloadSpec.memory_bytes``); a primitive's:
#: A worker process's resident memory (libraries, tables, one measuring thread; a worker
#: measured 11-13 MiB peak RSS).
WORKER_RSS_BYTES = 32 * MiB
#: Each further thread: its stack as used (Rust reserves 2 MiB of address space per thread but
#: touches a small part) and its state.
THREAD_BYTES = 256 << 10
#: Python objects per byte of result JSON the orchestrator keeps (every outcome is in memory
#: until the reports are written; measured 4.4 for a primitive's, 6.4 for a job's).
PYTHON_BYTES_PER_RESULT_BYTE = 8
#: The orchestrator's own resident memory (Python, numpy, scipy, matplotlib, SQLAlchemy: 138
#: MiB measured once imported, more while plotting).
ORCHESTRATOR_BYTES = 256 * MiB


@dataclass(frozen=True)
class Needs:
    """What a study needs, estimated before it runs.

    Attributes:
        repetitions: repetitions that may be stored: calibration plus every block up to the
            last planned look, each possibly twice (a disturbed repetition is re-run once).
        store_bytes: bytes the store grows by (results rows; a SQLite store's write-ahead log
            may hold a second copy until it is checkpointed: counted twice there).
        report_bytes: the JSON document (every result again, indented) and the HTML and
            Markdown reports beside it, in the output directory.
        work_bytes: a file workload's files at once (``engine.check_work_dir``: twice the
            largest), in the work directory; 0 without one.
        memory_bytes: resident memory at the peak: the heaviest cell's processes plus the
            orchestrator with every result in memory.
        heaviest: the cell whose processes need the most (its key and what they are).
    """

    repetitions: int
    store_bytes: int
    report_bytes: int
    work_bytes: int
    memory_bytes: int
    heaviest: str = ""
    per_cell_memory: dict[str, int] = field(default_factory=dict, repr=False)


def result_bytes(cell: "Cell", calibration: bool = False, seconds: float = 1.0) -> int:
    """The bytes one repetition of ``cell`` stores (its result and row), estimated: a
    workload's from its spec's sizing (growing with the window of ``seconds`` s, or with a job's
    targets — a calibration repetition's at its calibration level, ``schedule.calibration_load``),
    a primitive's ``PRIMITIVE_RESULT_BYTES``."""
    if cell.spec is None:
        return ROW_BYTES + PRIMITIVE_RESULT_BYTES
    load = (schedule.calibration_load(cell) if calibration else None) or cell.load
    return ROW_BYTES + cell.spec.result_bytes(seconds, _targets(load))


def _targets(load: str | None) -> int:
    """The targets of a job level, 0 for any other level (or none)."""
    return (levels.parse_load(load).targets or 0) if load else 0


def cell_memory(cell: "Cell", threads: int, limits: Mapping[str, float] | None = None) -> tuple[int, str]:
    """Resident bytes the processes of one repetition of ``cell`` hold at once, and what they
    are (one phrase): a primitive's worker and its ``threads`` (the study's); a workload's as
    its spec's ``sizing.memory`` sums them (``WorkloadSpec.memory_bytes``: its processes, a
    thread per connection, a job's processes and targets, buffers per I/O) at the cell's level,
    whose open levels without a thread count run the worker's ``open_threads`` (``limits``).
    Raises ValueError (one line) for a parameter of the sum that is not a whole number."""
    spec = cell.spec
    if spec is None:
        return WORKER_RSS_BYTES + threads * THREAD_BYTES, f"{threads} thread(s)"
    load = levels.parse_load(str(cell.load), limits)
    n, targets = load.connections or 1, load.targets or 0
    need = spec.memory_bytes(cell.params, n, targets)
    mem = spec.sizing.memory
    named = sorted({*mem.per_param_bytes, *(p for a, b, _ in mem.per_param_product_bytes for p in (a, b))})
    scale = ", ".join(f"{p} {spec.value(p, cell.params)}" for p in named)
    if load.targets is not None:
        what = f"a job of {targets} {spec.transaction['many'] if targets != 1 else spec.transaction['one']}"
    else:
        what = f"{n} connection(s)"
        mode = spec.mode(cell.params)
        what += (", client and server processes" if mode == "socket" and spec.server
                 else f" in one process ({mode} mode)")
    return need, what + (f" ({scale})" if scale else "")


def planned_repetitions(prepared: "PreparedStudy") -> list[tuple["Cell", bool]]:
    """Every repetition that may be stored, as (cell, is calibration): one calibration per
    cell, then every block up to the last look, each twice (a disturbed one is re-run once)."""
    out: list[tuple[Cell, bool]] = []
    blocks = prepared.looks[-1]
    for c in prepared.cells:
        out.append((c, True))
        out += [(c, False)] * (2 * blocks)
    return out


def estimate(prepared: "PreparedStudy") -> Needs:
    """``Needs`` of a prepared study (see there); the figures are the module's constants for
    primitives and each workload's spec (its sizing, as the worker announces it)."""
    reps = planned_repetitions(prepared)
    results = sum(result_bytes(c, cal, prepared.settings.seconds) for c, cal in reps)
    limits = prepared.study.rules.limits if prepared.study.rules is not None else None
    per_cell = {}
    what = {}
    for c in prepared.cells:
        per_cell[c.key], what[c.key] = cell_memory(c, c.threads or prepared.settings.threads, limits)
    heaviest = max(per_cell, key=per_cell.__getitem__) if per_cell else ""
    # the JSON document holds every result again (indented: about 1.3×); the reports per cell
    report = int(1.3 * results) + REPORT_BYTES + REPORT_BYTES_PER_CELL * len(prepared.cells)
    work = 2 * max((_file_bytes(c) for c in prepared.cells), default=0)
    memory = (ORCHESTRATOR_BYTES + PYTHON_BYTES_PER_RESULT_BYTE * results
              + (per_cell[heaviest] if heaviest else 0))
    return Needs(repetitions=len(reps), store_bytes=results, report_bytes=report, work_bytes=work,
                 memory_bytes=memory, heaviest=f"{heaviest} ({what[heaviest]})" if heaviest else "",
                 per_cell_memory=per_cell)


def _file_bytes(cell: "Cell") -> int:
    """The bytes a repetition of ``cell`` writes to its work directory (its spec's
    ``file_bytes_param``), 0 for a cell that writes none or whose value is not a number (the
    study's check says so)."""
    if cell.spec is None or not cell.spec.needs_dir:
        return 0
    try:
        return cell.spec.file_bytes(cell.params)
    except ValueError:
        return 0


# --------------------------------------------------------------------------- the checks


def _existing(p: Path) -> Path:
    """``p`` or its nearest ancestor that exists (what a directory would be made in)."""
    p = Path(os.path.abspath(p))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _mib(n: int | float) -> str:
    return f"{n / MiB:,.0f} MiB" if n >= 10 * MiB else f"{n / MiB:.1f} MiB"


def directory_problem(directory: str | os.PathLike, what: str, link: bool = False) -> str | None:
    """Why files cannot be written in ``directory`` (made if missing, as the writer would), or
    None. Nothing is left behind: a missing directory is probed in its nearest existing
    ancestor, without making it; the probe (and with ``link`` its hard link) is removed.
    ``what`` names it in the message (``--out``, ``store``)."""
    d = Path(directory)
    here = _existing(d)
    if not here.is_dir():
        return f"{what} {d} cannot be made: {here} is a file, not a directory"
    try:
        fd, probe = tempfile.mkstemp(prefix=".cryptoperf-probe-", dir=here)
    except OSError as e:
        return f"{what} {d} is not writable: {e.strerror or e} ({here})"
    try:
        os.write(fd, b"x")
        os.close(fd)
        if link:
            try:
                os.link(probe, probe + ".link")
                os.unlink(probe + ".link")
            except OSError as e:
                return (f"{what} {d} cannot take hard links ({e.strerror or e}), which cryptoperf writes "
                        "its files with (written aside, then linked into place)")
    except OSError as e:
        return f"{what} {d} is not writable: {e.strerror or e} ({here})"
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass
    return None


def mem_available(meminfo: str | os.PathLike = "/proc/meminfo") -> int | None:
    """``MemAvailable`` in bytes (the kernel's estimate of memory available to a new workload
    without swapping), or None where there is no such file or line."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def thread_warnings(prepared: "PreparedStudy", logical_cpus: int) -> list[str]:
    """One line per thread count above ``logical_cpus``: the study's ``threads`` for its
    primitive operations, each ``closed:N`` level's N connections (one client thread each) —
    except for file workloads (``needs_dir``), whose threads beyond the CPUs mostly wait on the
    device, as a queue depth does: one note for all of their levels instead."""
    over: dict[str, list[str]] = {}
    file_levels: list[str] = []
    for c in prepared.cells:
        if c.is_workload:
            load = levels.parse_load(str(c.load))
            if load.kind == "closed" and load.connections > logical_cpus:
                if c.spec is not None and c.spec.needs_dir:
                    file_levels.append(load.text)
                    continue
                over.setdefault(f"load {load.text} ({load.connections} client threads)", []).append(c.label)
        elif (c.threads or prepared.settings.threads) > logical_cpus:
            over.setdefault(f"threads = {c.threads or prepared.settings.threads}", []).append(c.label)
    out = []
    for what, labels in over.items():
        names = sorted(set(labels))
        shown = ", ".join(names[:3]) + (" …" if len(names) > 3 else "")
        out.append(f"warning: {what} exceed{'s' if what.startswith('load') else ''} the {logical_cpus} logical "
                   f"CPUs ({shown}): latency then includes time spent descheduled")
    if file_levels:
        shown_levels = ", ".join(dict.fromkeys(file_levels))
        out.append(f"note: file workload levels {shown_levels} run more threads than the {logical_cpus} logical CPUs: "
                   "threads waiting on the device are a queue depth, but reads served from the page cache "
                   "compete for the CPUs, and their latency then includes time spent descheduled")
    return out


def _same_filesystem(paths: Iterable[tuple[str, Path, int]]) -> dict[int, list[tuple[str, Path, int]]]:
    by_dev: dict[int, list[tuple[str, Path, int]]] = {}
    for name, p, need in paths:
        if need > 0:
            by_dev.setdefault(os.stat(_existing(p)).st_dev, []).append((name, p, need))
    return by_dev


def disk_problem(needs: Needs, parts: list[tuple[str, Path, int]]) -> str | None:
    """Why the filesystems of ``parts`` (what, where, bytes it needs) lack room, or None: the
    parts on one filesystem are added up and compared with its free bytes."""
    for items in _same_filesystem(parts).values():
        total = sum(n for _, _, n in items)
        where = _existing(items[0][1])
        free = shutil.disk_usage(where).free
        if total > free:
            detail = ", ".join(f"{name} {_mib(n)} ({p})" for name, p, n in items)
            return (f"the study needs about {_mib(total)} of disk for {needs.repetitions} repetitions and "
                    f"their reports ({detail}), but that filesystem has {_mib(free)} free; free space or "
                    "pass --out/--store on another filesystem")
    return None


def check(prepared: "PreparedStudy", out_dir: str | os.PathLike | None, store: str | os.PathLike | None = None, *,
          meminfo: str | os.PathLike = "/proc/meminfo", logical_cpus: int | None = None,
          needs: Needs | None = None) -> list[str]:
    """Check a prepared study against this host before its first repetition (see the module doc).

    Args:
        prepared: the ``engine.PreparedStudy``.
        out_dir: where the JSON document and reports go (None: no files).
        store: the store as ``run_study`` takes it (None: ``store.default_location()``).
        meminfo: the file ``MemAvailable`` is read from.
        logical_cpus: the CPUs the worker sees (default: its hello's ``cpu.logical_cpus``).
        needs: the estimate to check (default ``estimate(prepared)``).

    Returns warning lines (threads above the logical CPUs). Raises PreflightError (one line,
    exit 2) for what would stop the study later; StoreError when a PostgreSQL store cannot be
    reached; nothing is created or left behind.
    """
    from cryptoperf import builds
    from cryptoperf.store.db import Location, writable_problem
    needs = needs or estimate(prepared)
    if out_dir is not None:
        problem = directory_problem(out_dir, "--out", link=True)
        if problem:
            raise PreflightError(f"{problem}; pass --out DIR to write elsewhere")
    where = Location(store)
    problem = writable_problem(where)
    if problem is None and where.path is not None:
        problem = directory_problem(where.path.parent, f"store {where.path}: its directory")
    if problem:
        raise PreflightError(problem + ("; pass --store PATH to use another file" if where.path is not None else ""))
    parts: list[tuple[str, Path, int]] = []
    if where.path is not None:
        parts.append(("store", where.path.parent, 2 * needs.store_bytes))
    if out_dir is not None:
        parts.append(("reports", Path(out_dir), needs.report_bytes))
    if prepared.settings.work_dir is not None:
        parts.append(("work files", Path(prepared.settings.work_dir), needs.work_bytes))
    problem = disk_problem(needs, parts)
    if problem:
        raise PreflightError(problem)
    available = mem_available(meminfo)
    if available is not None and needs.memory_bytes > available:
        raise PreflightError(
            f"the study needs about {_mib(needs.memory_bytes)} of memory at its peak (its heaviest cell "
            f"{needs.heaviest}, and the orchestrator with {needs.repetitions} results), but {_mib(available)} "
            "is available (MemAvailable); free memory, or lower the cell's load, targets or threads")
    if logical_cpus is None:
        _, hello = prepared.workers[builds.DEFAULT]
        logical_cpus = int(hello.cpu.get("logical_cpus") or os.cpu_count() or 1)
    return thread_warnings(prepared, logical_cpus)


class PreflightWarning(UserWarning):
    """A warning ``check`` returned, raised through ``warnings`` when no console prints it."""


def announce(lines: Iterable[str], console: Any = None) -> None:
    """Print ``lines`` (``check``'s warnings) on ``console`` (a rich Console), or without one
    issue each as a ``PreflightWarning``."""
    for line in lines:
        if console is not None:
            console.print(line, markup=False, soft_wrap=True)
        else:
            warnings.warn(line, PreflightWarning, stacklevel=3)
