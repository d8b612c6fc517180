"""Profiled repetitions: a cell run in a fresh worker process under ``perf record``, as a study
runs it (same request, build, CPU mask and environment), in blocks that pair the reference
configuration with the one to explain in a random order, as the study's blocks do.

They are repetitions of their own, never the study's: nothing they measure enters a timed
figure or the store. What the sampler costs is measured instead (``Profiled.overhead``: the
profiled repetitions' ops/s against the same cells' unprofiled ones in the stored run).
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from cryptoperf import cpumask, providerbuild
from cryptoperf.errors import CryptoperfError
from cryptoperf.explain import perf, stacks
from cryptoperf.explain.attribution import Profile
from cryptoperf.model import Cell, Repetition
from cryptoperf.run.local import Workers, worker_for
from cryptoperf.run.worker import WorkerClient
from cryptoperf.schedule import Settings, run_request


class ProfileError(CryptoperfError):
    """A profiled repetition did not measure (one line naming the cell and why)."""


@dataclass(frozen=True)
class Profiled:
    """What the profiled blocks gave: one (A, B) pair of profiles per block, and each side's
    ops/s in those repetitions (for the sampler's cost)."""

    pairs: tuple[tuple[Profile, Profile], ...]
    ops_per_s: tuple[tuple[float, float], ...]


def _one(cell: Cell, block: int, workers: Workers, settings: Settings, directory: Path,
         perf_path: str | None) -> tuple[Profile, float]:
    """Run ``cell`` once under perf; its profile and ops/s. Raises ProfileError."""
    name = f"{block}-{cell.configuration}"
    out = directory / f"{name}.data"
    worker = worker_for(workers, cell)
    # what the orchestrator sets for this binary (the FIPS build's provider), which it could
    # not tell from the wrapper's path
    exports = {k: v for k, v in providerbuild.worker_env(worker, {}).items()}
    wrapped = perf.wrapper(directory, worker, perf=perf_path, exports=exports)
    env = {**cpumask.worker_env(cell.cpu), **settings.env, "CRYPTOPERF_PERF_OUT": str(out),
           **perf.control_fifos(directory, name)}
    rep = Repetition(cell, block)
    with WorkerClient(wrapped, env=env) as w:
        w.hello()
        result = w.run(run_request(rep, settings), timeout_s=settings.timeout_s)
    if result.status != "ok":
        raise ProfileError(f"{cell.key}: the profiled repetition was {result.status}: {result.reason}")
    if not result.ops or not result.cpu_ns_total or not result.wall_ns:
        raise ProfileError(f"{cell.key}: the profiled repetition measured no operation or no CPU")
    text = perf.script(out, perf_path)
    out.unlink(missing_ok=True)
    samples, folded = perf.parse_script(text), stacks.fold(text)
    if not samples:
        raise ProfileError(f"{cell.key}: perf recorded no sample (is the window long enough? seconds = {settings.seconds:g})")
    return Profile(samples, int(result.ops), window_cpu_ns(result), folded), result.ops / (result.wall_ns / 1e9)


def window_cpu_ns(result) -> float:
    """The CPU over the window of every process perf followed: the worker's measuring threads,
    and a workload's server side where the worker ran it in a process of its own (perf follows
    the worker's children), ns."""
    from cryptoperf.workloads import generic
    both = generic.side_cpu_ns_per_tx(result, "both")
    return both * result.ops if both is not None else float(result.cpu_ns_total)


def _tells_window(workers: Workers, cell: Cell) -> bool:
    """Whether the cell's worker build announces ``profile_control`` in its hello (it enables
    and disables a profiler at its window's edges)."""
    from cryptoperf.run.worker import fetch_hello
    hello = fetch_hello(worker_for(workers, cell))
    ctl = hello.raw.get("profile_control") or {}
    return ctl.get("ctl_env") == perf.CTL_ENV and ctl.get("ack_env") == perf.ACK_ENV


def check_ready(a: Cell, b: Cell, workers: Workers, perf_path: str | None = None) -> None:
    """Raise perf.PerfUnavailable when perf cannot sample here, ProfileError when a cell's worker
    build does not tell a profiler its window (one line each); nothing runs."""
    why = perf.unavailable(perf_path)
    if why is not None:
        raise perf.PerfUnavailable(why)
    for cell in (a, b):
        if not _tells_window(workers, cell):
            raise ProfileError(f"the worker build '{cell.build}' ({worker_for(workers, cell)}) does not tell a profiler "
                               "its window (no profile_control in its hello): rebuild it (`pip install .`, or "
                               "`cryptoperf setup` for a setup build)")


def run_blocks(a: Cell, b: Cell, blocks: int, workers: Workers, settings: Settings, seed: int = 0,
               perf_path: str | None = None,
               progress: Callable[[int, int, Cell], None] | None = None) -> Profiled:
    """``blocks`` profiled blocks of cells ``a`` (the reference) and ``b``, each block both in
    a seeded random order. Raises ProfileError when a repetition does not measure, and
    perf.PerfUnavailable when perf is missing or refused."""
    check_ready(a, b, workers, perf_path)
    rng = random.Random(seed)
    pairs, rates = [], []
    with tempfile.TemporaryDirectory(prefix="cryptoperf-explain-") as tmp:
        for block in range(1, blocks + 1):
            order = [a, b]
            rng.shuffle(order)
            got: dict[str, tuple[Profile, float]] = {}
            for i, cell in enumerate(order):
                if progress is not None:
                    progress(block, i, cell)
                got[cell.key] = _one(cell, block, workers, settings, Path(tmp), perf_path)
            pairs.append((got[a.key][0], got[b.key][0]))
            rates.append((got[a.key][1], got[b.key][1]))
    return Profiled(tuple(pairs), tuple(rates))


def overhead(profiled: Profiled, unprofiled: Mapping[str, float], a: Cell, b: Cell) -> float | None:
    """The sampler's cost: the profiled repetitions' geometric-mean ops/s over the unprofiled
    ones' (``unprofiled``: cell key → the stored run's ops/s), averaged over A and B, minus 1
    (−0.02: profiled ran 2 % slower); None without both unprofiled rates."""
    import math
    ratios = []
    for side, cell in ((0, a), (1, b)):
        base = unprofiled.get(cell.key)
        if not base:
            return None
        ratios.append(math.exp(sum(math.log(r[side]) for r in profiled.ops_per_s) / len(profiled.ops_per_s)) / base)
    return sum(ratios) / len(ratios) - 1.0
