"""``cryptoperf speed``: backends × operations × sizes measured in blocks, without a study file,
stored and analysed once as a ``SpeedRun``."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cryptoperf import analysis, builds, cpumask, hostinfo, schedule
from cryptoperf import levels, opnames, speedstats
from cryptoperf.errors import UsageError, did_you_mean
from cryptoperf.model import OK, Cell, Outcome, Repetition
from cryptoperf.report.terminal import ProgressBar
from cryptoperf.run import disturbance, local
from cryptoperf.hello import Hello, WorkerRules
from cryptoperf.store.db import FORMAT_VERSION, Store
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.study import options_for
from cryptoperf.engine.prepare import open_devices
from cryptoperf.engine.workers import unmasked_vectors, worker_builds


DEFAULT_SPEED_OPS = ("sha256", "aes-128-gcm-seal", "chacha20-poly1305-seal", "rsa2048-sign",
                     "rsa2048-verify", "ecdsa-p256-sign", "ecdsa-p256-verify", "ed25519-sign",
                     "x25519-derive", "ml-kem-768-encaps")


@dataclass
class SpeedRun(StoredRun):
    """What ``speed`` measured, as the stored run it is (a ``StoredRun`` of kind ``speed``,
    analysed once: ``analysis.speed`` holds its rows and baseline comparisons), with what the
    call knew beyond the store: ``settings`` (the worker settings, build and notes: the JSON
    document's ``settings``), ``store_path`` (None when not stored), ``cells`` (the rows, in
    table order: backend, operation, size), ``notes`` (lines saying how options were applied,
    e.g. which operations took ``--size``)."""

    settings: dict[str, Any] = field(default_factory=dict)
    store_path: Path | str | None = None
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> int | None:
        """The stored run's id (None when not stored)."""
        return self.meta.get("id")

    @property
    def started_at(self) -> str:
        """When it started (UTC ISO 8601)."""
        return str(self.meta.get("started_at") or "")

    @property
    def finished_at(self) -> str:
        """When it finished (UTC ISO 8601)."""
        return str(self.meta.get("finished_at") or "")

    @property
    def repetitions(self) -> int:
        """Blocks asked for."""
        return int(self.settings.get("repetitions") or 1)

    @property
    def baseline(self) -> str | None:
        """The backend the others are compared with, or None."""
        return self.speed.baseline

    def rows(self) -> list[speedstats.SpeedRow]:
        """One row per (backend, operation, size) over its repetitions, as analysed."""
        return list(self.speed.rows)

    def baseline_ratios(self) -> list[speedstats.BaselineRatio]:
        """Every other backend's ops/s against the baseline backend's, per operation and size,
        as analysed; [] without a baseline."""
        return list(self.speed.ratios)


#: Most repetitions (blocks) ``speed`` runs.
MAX_SPEED_REPETITIONS = 1000


@dataclass(frozen=True)
class _SpeedPlan:
    """``speed``'s arguments checked against its worker: the cells, where they run, and how."""

    cells: list[Cell]
    worker: Path
    hello: Hello
    build: str
    settings: schedule.Settings
    unmasked: dict[tuple[str, str], str]
    baseline: str | None
    info: dict[str, Any]
    notes: list[str]


def speed(backends: Sequence[str] = (), ops: Sequence[str] = (), sizes: Sequence[int | str] = (), *,
          seconds: float = 0.5, warmup_s: float = 0.2, threads: int = 1, timeout_s: float | None = None,
          cpu: str = cpumask.BASELINE, fips: bool = False, library: str = builds.SYSTEM_LIBRARY,
          params: Mapping[str, str] | None = None, repetitions: int = 1, baseline: str | None = None,
          seed: int | None = None, setup: bool = True, store: str | os.PathLike | None = None,
          store_results: bool = True, progress: local.Progress | bool | None = None,
          console: Any = None, job: str | None = None) -> SpeedRun:
    """Measure operations on backends: each (backend, operation, size) ``repetitions`` times,
    each in a fresh worker process, in randomised blocks (a block runs every row once, in an
    order drawn from ``seed``, or from a fresh seed when None, stored with the run; blocks after the first use the batch size the first measured for
    each row); stored as a ``speed`` run, and returned as that stored run, analysed once.

    Args:
        backends, ops: names as people write them: operations match ignoring case and
            punctuation, with the common aliases (``opnames.canonical_op``: ``SHA-256`` →
            ``sha256``), backends ignoring case and punctuation. Defaults: every backend of the
            worker build, ``DEFAULT_SPEED_OPS``.
        sizes: message sizes, bytes as ints or strings with a binary suffix (``"16k"``,
            ``"1MiB"``: ``opnames.parse_size``, k = 1024); applied to the operations that take
            a message (a note names the others); none of them taking one is an error. Default:
            the worker's size.
        params: worker parameters (``digest``, ``padding``) → value, checked against the
            worker's allowed values; applied to the operations that take them (a note names
            the others); none of them taking one is an error.
        repetitions: blocks, 1..``MAX_SPEED_REPETITIONS``; 3 or more give every figure a 95 %
            interval (``speedstats``).
        baseline: a backend among those measured, the others are compared with
            (``SpeedRun.baseline_ratios``; stored with the run's analysis settings).
        store, store_results: the store the run is recorded in (a path or URL, as
            ``run_study`` takes; default: ``store.default_location()``);
            with ``store_results`` False nothing is stored (``run_id`` is None).
        job: the label of the CI job making the run (``--job``), recorded with the boot id as
            the run's session; None: the CI's own variables (``hostinfo.ci_job``), '' none.

    A repetition the host disturbed (steal above the study default ``max_steal_pct``, other
    load above its steady level by more than ``max_other_load_pct``: ``run.disturbance``, the
    rule studies apply) is run again at once and the first attempt kept as superseded; a re-run
    disturbed too is analysed, flagged.

    Raises UsageError (bad names or values, checked against the worker's rules), WorkerError
    subclasses, StoreError.
    """
    if not 1 <= repetitions <= MAX_SPEED_REPETITIONS:
        raise UsageError(f"--repetitions {repetitions} is out of range; give 1 to {MAX_SPEED_REPETITIONS}")
    try:
        job = hostinfo.ci_job(job)
    except ValueError as e:
        raise UsageError(f"--job: {e}") from None
    if timeout_s is not None and timeout_s <= warmup_s + seconds:
        raise UsageError(f"--timeout {timeout_s:g} s does not exceed --warmup + --seconds = "
                         f"{warmup_s + seconds:g} s; raise --timeout")
    plan = _plan_speed(backends, ops, sizes, seconds=seconds, warmup_s=warmup_s, threads=threads,
                       timeout_s=timeout_s, cpu=cpu, fips=fips, library=library, params=params or {},
                       baseline=baseline, setup=setup, console=console)
    seed = schedule.new_run_seed(seed)
    plan.info.update(repetitions=repetitions, seed=seed)
    host = hostinfo.fingerprint(plan.hello.raw)
    host["checks"] = [c.as_dict() for c in hostinfo.run_checks()]
    before = hostinfo.load_before()
    if before is not None:
        host["load_before"] = before
    disturbed = speed_disturbance(plan.hello, before["other_load_pct"] if before is not None else None)
    if progress is True:
        progress = ProgressBar()
    settings = analysis.Settings(speed_baseline=plan.baseline)
    started = local.utc_now()

    def measure(on_outcome: Callable[[Outcome], None] | None) -> list[Outcome]:
        return speed_blocks(plan.cells, repetitions, seed, plan.settings, plan.worker, progress=progress or None,
                            on_outcome=on_outcome, unmasked=plan.unmasked, disturbed=disturbed)

    if not store_results:
        outcomes = measure(None)
        meta = {"id": None, "kind": "speed", "started_at": started, "finished_at": local.utc_now(),
                "status": "complete", "host": host, "seed": seed, "analysis": settings.as_dict(),
                "format_version": FORMAT_VERSION, "process": hostinfo.process_identity(job)}
        store_path = None
    else:
        with Store(store) as st:
            run_id = st.begin_run("speed", started, host, seed=seed, analysis=settings.as_dict(),
                                  process=hostinfo.process_identity(job))
            status = "interrupted"
            try:
                outcomes = measure(lambda o: st.add_outcome(run_id, o))
                status = "complete"
            finally:
                st.finish_run(run_id, local.utc_now(), status)
            meta = next(r for r in st.runs() if int(r["id"]) == run_id)
            store_path = st.path if st.path is not None else st.location
    return SpeedRun(meta, None, outcomes, analysis.analyse(outcomes, None, settings, plan.cells),
                    settings=plan.info, store_path=store_path, cells=plan.cells, notes=plan.notes)


def _plan_speed(backends: Sequence[str], ops: Sequence[str], sizes: Sequence[int | str], *, seconds: float,
                warmup_s: float, threads: int, timeout_s: float | None, cpu: str, fips: bool, library: str,
                params: Mapping[str, str], baseline: str | None, setup: bool, console: Any) -> _SpeedPlan:
    """``speed``'s arguments checked against the worker build they need (made first with
    ``setup``), and its cells. Raises UsageError, WorkerError subclasses."""
    if fips and library != builds.SYSTEM_LIBRARY:
        raise UsageError(f"--fips with --library {library} is not supported: the FIPS build uses the "
                         "system OpenSSL")
    if library != builds.SYSTEM_LIBRARY:
        other = [b for b in backends if b != builds.LIBRARY_BACKEND]
        if other:
            raise UsageError(f"--library {library} changes only the {builds.LIBRARY_BACKEND} backend; "
                             f"drop --backend {other[0]}")
        backends = (builds.LIBRARY_BACKEND,)
    build = builds.for_configuration(fips, library, _own_worker(backends))
    who = "--fips" if fips else f"--library {library}"
    if builds.get(build).backends:
        who = f"--backend {', '.join(backends)}" + (" --fips" if fips else "")
    openssl_fips = f"{who} (the openssl backend in the FIPS build)" if fips and (not backends or builds.LIBRARY_BACKEND in backends) else None
    workers = worker_builds({build: who}, setup=setup, console=console, openssl_fips=openssl_fips)
    path, hello = workers[build]
    rules = hello.rules
    backends = check_names("backend", backends, hello.backend_names, allow_mock=True)
    ops = check_names("operation", ops, hello.ops)
    for name, value, limit in (("--seconds", seconds, "max_seconds"), ("--warmup", warmup_s, "max_warmup_s"),
                               ("--threads", threads, "max_threads")):
        if value > rules.limits[limit]:
            raise UsageError(f"{name} {value:g} is above the worker's limit of {rules.limits[limit]:g}")
    checked_sizes = speed_sizes(sizes, rules.limits["max_size_bytes"])
    cpumask.check_hello(hello.raw.get("cpu_masks"), [cpu])
    chosen_ops = tuple(ops) or tuple(o for o in DEFAULT_SPEED_OPS if o in hello.ops)
    notes = sizes_note(checked_sizes, chosen_ops, rules)
    op_params, more = speed_params(params, chosen_ops, rules)
    notes += more
    for op in chosen_ops:
        if (spec := rules.workloads.get(op)) is not None and "load" not in op_params[op]:
            # A workload's concurrency is its load level: --threads N is N connections; a job's
            # level is its targets (the worker's default unless --param load=targets:N).
            op_params[op]["load"] = (f"closed:{threads}" if spec.takes_level("closed")
                                     else str(spec.defaults.get("load") or levels.DEFAULT_LOAD))
    chosen_backends = tuple(backends) or rules.libraries
    if baseline is not None:
        baseline = speed_baseline(baseline, chosen_backends)
    cells = [Cell("", b, op, op, op_params[op], size, cpu, build, spec=rules.workloads.get(op))
             for b in chosen_backends for op in chosen_ops
             for size in (checked_sizes if checked_sizes and rules.takes_message(op) else (None,))]
    settings = schedule.Settings(seconds=seconds, warmup_s=warmup_s, threads=threads,
                                 timeout_s=timeout_s or warmup_s + seconds + 60,
                                 env=open_devices(cells, hello, path))
    info = {"seconds": seconds, "warmup_s": warmup_s, "threads": threads, "cpu": cpu,
            "openssl_ia32cap": cpumask.value(cpu), "build": build,
            "params": {k: v for p in op_params.values() for k, v in p.items()}, "baseline": baseline,
            "notes": notes,
            "builds": {n: dict(zip(("available", "path_or_reason"), builds.status(n))) for n in builds.BUILDS}}
    return _SpeedPlan(cells, path, hello, build, settings, unmasked_vectors({build: workers[build]}), baseline,
                      info, notes)


def _own_worker(backends: Sequence[str]) -> str | None:
    """The backend whose own worker (``builds.worker_of``: the Go worker for ``go``) ``speed``'s
    ``--backend`` list runs in, or None for the default worker's. Raises UsageError when the
    list names backends of different workers (one speed run starts one worker)."""
    owners = {b: builds.worker_of(b) for b in backends}
    own = sorted({b for b, w in owners.items() if w is not None})
    if not own:
        return None
    if len(own) < len(backends) or len({owners[b].name for b in own}) > 1:
        others = [b for b in backends if b not in own]
        raise UsageError(f"--backend {own[0]} runs in a worker of its own ({owners[own[0]].binary}), "
                         f"--backend {(others or own[1:])[0]} in another; measure them in two speed runs, "
                         f"or side by side in a study (docs/study-files.md)")
    return own[0]


def check_names(kind: str, given: Sequence[str], known: Sequence[str], allow_mock: bool = False) -> list[str]:
    """The names in ``given`` as ``known`` spells them, in order, each once: an ``operation``
    through ``opnames.canonical_op`` (case, punctuation and aliases: ``SHA-256`` → ``sha256``,
    ``ecdsa-secp256r1-sign`` → ``ecdsa-p256-sign``), any other kind ignoring case and
    punctuation (``AWS-LC`` → ``aws-lc``); ``mock`` backends pass as given with
    ``allow_mock``.

    Raises UsageError for the first unknown name, listing the known ones; "did you mean" only
    proposes, for an operation, one of the same algorithm and parameters
    (``opnames.unknown_op_hint``: ``sha257`` gets none), for other kinds the closest spelling.
    """
    out: list[str] = []
    for name in given:
        if allow_mock and (name == "mock" or name.startswith("mock:")):
            found: str | None = name
        elif kind == "operation":
            found = opnames.canonical_op(name, known)
        else:
            found = opnames.canonical_name(name, known)
        if found is None:
            if kind == "operation":
                hint = opnames.unknown_op_hint(name, known)
            else:
                hint = did_you_mean(name, known)
            raise UsageError(f"unknown {kind} '{name}'{hint} (known: {', '.join(known)})")
        if found not in out:
            out.append(found)
    return out


def speed_sizes(sizes: Sequence[int | str], max_size_bytes: float) -> tuple[int, ...]:
    """``--size`` values as bytes (ints, or strings read by ``opnames.parse_size``: ``16k`` =
    16384), each once, in order. Raises UsageError for one that is not a size, below 1 byte or
    above the worker's ``max_size_bytes``."""
    out: list[int] = []
    for s in sizes:
        try:
            n = opnames.parse_size(s)
        except ValueError as e:
            raise UsageError(f"--size {s}: {e}") from None
        if n < 1:
            raise UsageError(f"--size {s} is not a message size: give at least 1 byte")
        if n > max_size_bytes:
            raise UsageError(f"--size {n} is above the worker's limit of {int(max_size_bytes)} bytes")
        if n not in out:
            out.append(n)
    return tuple(out)


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names)


def sizes_note(sizes: Sequence[int], ops: Sequence[str], rules: WorkerRules) -> list[str]:
    """Check ``--size`` against the operations and the worker's ``rules``: no note when every
    operation takes a message; one note line naming those that take none (sizes apply to the
    others). Raises UsageError when none takes one: an operation without a message has no size
    (as a study refuses ``sizes`` on it)."""
    if not sizes:
        return []
    unsized = [op for op in ops if not rules.takes_message(op)]
    if len(unsized) == len(ops):
        verb = "has" if len(unsized) == 1 else "have"
        raise UsageError(f"--size: {_listing(unsized)} {verb} no message, so no size; remove --size "
                         "(sizes apply to operations with a message: digests, MACs, AEADs, signatures)")
    if not unsized:
        return []
    sized = [op for op in ops if rules.takes_message(op)]
    verb = "has" if len(unsized) == 1 else "have"
    return [f"--size applies to {_listing(sized)}; {_listing(unsized)} {verb} no message, so no size"]


def speed_params(params: Mapping[str, str], ops: Sequence[str],
                 rules: WorkerRules) -> tuple[dict[str, dict[str, str]], list[str]]:
    """``--param`` name → value checked against the worker's rules (``rules``: ``WorkerRules``;
    known names, allowed values — spelt as the worker does: ``SHA-384`` → ``sha384``) and
    applied to the operations that take each: (op → its params, note lines naming the
    operations a parameter does not apply to). Raises UsageError for an unknown name or value,
    or a parameter none of ``ops`` takes."""
    per_op: dict[str, dict[str, str]] = {op: {} for op in ops}
    notes: list[str] = []
    known = tuple(sorted(set(rules.param_values).union(*rules.op_params.values()) - {"size_bytes"}))
    for name, value in params.items():
        if name in ("size_bytes", "size"):
            raise UsageError(f"--param {name}: give message sizes with --size")
        if name not in known:
            hint = did_you_mean(name, known)
            raise UsageError(f"--param {name}: unknown worker parameter{hint} (known: {_listing(known)})")
        if name == "load":
            try:
                levels.parse_load(str(value))
            except ValueError as e:
                raise UsageError(f"--param load: {e}") from None
        allowed = rules.param_values.get(name)
        if allowed is None:  # a free-form value (load, rsa_bits, port): the worker checks it
            canonical = str(value)
        else:
            canonical = value if value in allowed else opnames.canonical_op(str(value), allowed)
        if canonical is None:
            if name == "digest":
                hint = opnames.unknown_op_hint(str(value), allowed)
            else:
                hint = did_you_mean(str(value), allowed)
            raise UsageError(f"--param {name}={value}: not one of {_listing(allowed)}{hint}")
        takers = [op for op in ops if rules.takes(op, name)]
        if not takers:
            every = [op for op in rules.ops if rules.takes(op, name)]
            raise UsageError(f"--param {name}={canonical}: no operation measured takes a {name} "
                             f"({_listing(ops)}); {name} applies to {_listing(every)}")
        for op in takers:
            per_op[op][name] = canonical
        others = [op for op in ops if op not in takers]
        if others:
            notes.append(f"--param {name}={canonical} applies to {_listing(takers)}; "
                         f"{_listing(others)} take{'s' if len(others) == 1 else ''} no {name}")
    return per_op, notes


def speed_baseline(baseline: str, backends: Sequence[str]) -> str:
    """``--baseline``: the backend among ``backends`` (the measured ones) it names, ignoring
    case and punctuation. Raises UsageError when it is none of them, or the only one."""
    found = opnames.canonical_name(baseline, backends)
    if found is None:
        raise UsageError(f"--baseline {baseline} is not among the backends measured "
                         f"({_listing(backends)}); name one of them, or add --backend {baseline}")
    if len(backends) < 2:
        raise UsageError(f"--baseline {found} needs another backend to compare with; measure two or "
                         "more (--backend, or none for every backend)")
    return found


def speed_disturbance(hello: Hello, level_pct: float | None = None) -> Callable[[Outcome], str]:
    """The disturbed-repetition rule of a ``speed`` run (``run.disturbance.Rule``): a study's
    with the study file's defaults ``max_steal_pct`` and ``max_other_load_pct``, on the
    worker's logical CPUs, its steady level seeded with ``level_pct`` (the other load measured
    before the run, or None)."""
    opts = options_for("study")
    limits = disturbance.Limits(float(opts["max_steal_pct"].default), float(opts["max_other_load_pct"].default),
                                level_pct)
    return limits.rule(int((hello.cpu or {}).get("logical_cpus") or os.cpu_count() or 1))


def speed_blocks(cells: Sequence[Cell], repetitions: int, seed: int, settings: schedule.Settings,
                 workers: local.Workers, progress: local.Progress | None = None,
                 on_outcome: Callable[[Outcome], None] | None = None,
                 unmasked: Mapping[tuple[str, str], str] | None = None,
                 disturbed: Callable[[Outcome], str] | None = None) -> list[Outcome]:
    """Run ``repetitions`` blocks of ``cells`` (``schedule.blocks``: a block runs every cell
    once, in an order drawn from ``seed`` and the block number; ``position`` is the place in
    the block), each repetition in a fresh worker. Blocks after the first use the batch size
    the first measured for each cell, so that every repetition of a row times the same
    statistic, and skip the cells the first found unsupported or invalid (more repetitions
    cannot change that answer). ``disturbed`` (``speed_disturbance``) says why the host
    disturbed a measured repetition, which then runs again at once (``run.local.execute``).
    Returns the outcomes in execution order, a superseded attempt before its re-run.

    The blocks are ``schedule.blocks``' (as a study's); the loop stays apart from
    ``_run_study``'s because ``speed``'s first block is measured, where a study calibrates in a
    block 0 it does not analyse: sharing that loop would cost every row one more repetition."""
    def numbered(reps: list[Repetition]) -> list[Repetition]:
        at: dict[int, int] = {}
        out = []
        for r in reps:
            out.append(dataclasses.replace(r, position=at.get(r.block, 0)))
            at[r.block] = at.get(r.block, 0) + 1
        return out

    what = "speed" if repetitions == 1 else "speed: block 1"
    outcomes = local.execute(numbered(schedule.blocks(cells, 1, 1, seed)), settings, workers,
                             on_outcome=on_outcome, progress=progress, description=what, unmasked=unmasked,
                             disturbed=disturbed)
    if repetitions > 1:
        first = {o.cell.key: o for o in outcomes}
        batches = {o.cell.group: o.result.batch if o.result else None for o in outcomes if o.ok}
        later = [c for c in cells if c.key not in first or first[c.key].status in (OK, "failed")]
        if later:
            reps = numbered(schedule.blocks(later, 2, repetitions, seed, batches, start_index=len(outcomes)))
            outcomes += local.execute(reps, settings, workers, on_outcome=on_outcome, progress=progress,
                                      description=f"speed: blocks 2-{repetitions}", unmasked=unmasked,
                                      disturbed=disturbed)
    return outcomes
