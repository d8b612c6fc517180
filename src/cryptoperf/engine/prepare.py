"""A study checked against its workers and expanded into cells (``PreparedStudy``), before anything
is measured: the work directory, the workloads' combinations, what can be compared."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from rich.console import Console

from cryptoperf import builds, cpumask, providerbuild, schedule, stats, study as study_mod
from cryptoperf import levels, paths, pkcs11, workdir, workerbuild
from cryptoperf.errors import UsageError
from cryptoperf.model import Cell, Outcome, Repetition
from cryptoperf.run import disturbance, server as server_mod
from cryptoperf.run.worker import WorkerClient, fetch_hello
from cryptoperf.store.stored_run import StoredRun, settings_of
from cryptoperf.study import Study
from cryptoperf.builds import find_worker
from cryptoperf.engine.workers import Workers, worker_builds


#: The noise per repetition at which a design's power is stated (3 %: a quiet host's typical
#: coefficient of variation for a primitive; the report states the run's own).
DESIGN_CV = 0.03

#: The change a study's design should find 80 % of the time at ``DESIGN_CV`` by its last look
#: (5 %: a question about a few per cent), unless the study file says why not (``power_note``).
DESIGN_CHANGE = 0.05


def disturbance_rule(study: Study, logical_cpus: int,
                     level_pct: float | None = None) -> Callable[[Outcome], str]:
    """Why the host disturbed an outcome ('' if it did not), by the study's steal and other-load
    limits on a machine of ``logical_cpus``, other load judged against its steady level
    (seeded with ``level_pct``, the other load measured before the study):
    ``run.disturbance.Rule``. One rule for the whole study: it remembers the recent loads."""
    return disturbance.Limits.of(study, level_pct).rule(logical_cpus)


@dataclass
class PreparedStudy:
    """A study checked against its workers and expanded, before anything is measured.

    Attributes:
        study: the study, its backends and worker rules resolved.
        cells: every cell; settings: the worker settings of its repetitions.
        workers: build → (path, hello) of every worker build it needs (a missing setup build
            absent in a dry run).
        analysis: how its comparisons will be decided.
        looks: block counts at which a sequential study looks ((repetitions,) if fixed).
        skipped: ``optional`` operations left out, operation label → why (one line each).
        job_times: job cell key → (its calibration repetition's, each repetition's)
            ``schedule.JobTime``: the worker's ``check`` answers ``planned_work_s`` and
            ``planned_wait_s``, its own work and its latency model's waits.
        first_builds: what a first run must build before measuring → its estimated seconds
            (OpenSSL's FIPS provider, a setup worker build such as ``openssl@3.6``); empty when
            everything is built.
        seed: the seed of this run's block order: the study file's ``seed`` when it pins one,
            else drawn fresh for this plan (``schedule.new_run_seed``); a resumed run's is the
            stored one.
    """

    study: Study
    cells: list[Cell]
    settings: schedule.Settings
    workers: Workers
    analysis: analysis.Settings
    looks: tuple[int, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    job_times: dict[str, tuple[schedule.JobTime, schedule.JobTime]] = field(default_factory=dict)
    first_builds: dict[str, float] = field(default_factory=dict)

    @property
    def comparisons(self) -> int:
        """The comparisons the study will make: every cell of a configuration other than the
        baseline, and each ``[[contrast]]`` in every group where both its configurations have a
        cell (the family its intervals are adjusted over, with ``multiplicity``)."""
        groups = [{c.configuration for c in members} for members in schedule.groups(self.cells).values()]
        return (sum(1 for c in self.cells if c.configuration != self.study.baseline)
                + sum(1 for k in self.study.contrasts for names in groups if {k.baseline, k.configuration} <= names))

    def smallest_effect(self, cv: float = DESIGN_CV) -> tuple[float, float]:
        """(at the first look, by the last look): the smallest true change (fraction) one of
        this design's comparisons calls "slower" 80 % of the time at noise ``cv`` per
        repetition (``stats.smallest_effect``), with its intervals adjusted as the study's will
        be (``analysis.Settings.family``). The two are equal for a fixed study."""
        family = self.analysis.family(self.comparisons)
        return (stats.smallest_effect(self.looks[0], cv, *family, self.analysis.level),
                stats.smallest_effect(self.looks[-1], cv, *family, self.analysis.level))

    def misses_design_change(self) -> bool:
        """Whether this design, by its last look, finds less than ``DESIGN_CHANGE`` (5 %) 80 %
        of the time at ``DESIGN_CV`` (``smallest_effect``)."""
        return self.smallest_effect()[1] > DESIGN_CHANGE

    def resuming(self, prior: StoredRun) -> "PreparedStudy":
        """This plan continuing stored run ``prior``: its analysis settings and its block
        order's seed are the run's own."""
        return dataclasses.replace(self, analysis=prior.analysis.settings, seed=prior.seed)

    @property
    def first_blocks(self) -> list[Repetition]:
        """The repetitions of the first look's blocks (batch sizes not yet calibrated)."""
        return schedule.blocks(self.cells, 1, self.looks[0], self.seed)

    def unsupported(self) -> dict[str, str]:
        """Cell key → why it will not run, as far as the workers' hellos tell before anything
        is measured (a dry run asks the default build for every operation's support; other
        builds and non-default parameters are only known at calibration). Workload cells are
        not among them: ``check_workloads`` asked about each with its own parameters (the
        hello's answer is for the defaults: a TLS handshake with its key on a token needs its
        ``stack``)."""
        out = {}
        for name, (_, h) in self.workers.items():
            support = {(b["backend"], o["op"]): o for b in h.backends for o in b.get("ops") or []}
            for c in self.cells:
                o = support.get((c.backend, c.op))
                if c.build == name and o is not None and o.get("status") != "supported" and not c.is_workload:
                    out[c.key] = f"{o.get('status')}: {o.get('reason') or ''}".strip(": ")
        return out

    def fips_unapproved(self) -> dict[tuple[str, str], str]:
        """(configuration, operation label) → why the FIPS module does not approve the primitive
        that configuration times in FIPS mode (X25519, ChaCha20-Poly1305, SHA-1 signing, ...:
        ``WorkerRules.fips_unapproved``). Such a cell is measured all the same — what it costs
        in the FIPS build is still a figure — but never presented as an approved service."""
        rules = self.study.rules
        out: dict[tuple[str, str], str] = {}
        for c in self.cells:
            if c.fips and not c.is_workload and rules is not None:
                why = self.study.own_rules.get(c.build, rules).fips_unapproved(c.op, c.params)
                if why:
                    out.setdefault((c.configuration, c.label), f"{c.op}: {why}")
        return out

    def nothing_to_compare(self, unsupported: Mapping[str, str]) -> str | None:
        """Why the study would compare nothing once the cells the worker cannot run
        (``unsupported``: cell key → why) are left out — no configuration but the baseline has a
        cell beside it — or None."""
        if comparable([c for c in self.cells if c.key not in unsupported], self.study.baseline, self.study.contrasts):
            return None
        return (f"{self.study.path}: no configuration other than the baseline can run beside it "
                "(every such cell is unsupported), so the study would compare nothing")

    def default_size(self, cell: Cell) -> int | None:
        """The message size the worker uses for ``cell`` when the study gives none (None for an
        operation without a message)."""
        if cell.size_bytes is not None:
            return cell.size_bytes
        if self.study.rules is None:
            return None
        return self.study.own_rules.get(cell.build, self.study.rules).default_size_bytes.get(cell.op)

    def estimated_seconds(self, blocks: int | None = None) -> float:
        """A rough wall-clock estimate: calibration plus ``blocks`` blocks of every cell (default
        the first look's; a sequential study's worst case is its last look's,
        ``worst_case_seconds``), in s. A workload's repetition also starts its server process,
        makes its certificates and runs its cross-checks (``schedule.WORKLOAD_OVERHEAD_S``); a
        job's takes the time the worker planned for its targets' work and its latency model's
        waits (``job_times``, ``schedule.job_seconds``). What a first run builds first
        (``first_builds``) is added once."""
        blocks = self.looks[0] if blocks is None else blocks
        total = 0.0
        jobs = [c for c in self.cells if c.spec is not None and c.spec.job]
        timed = [c for c in self.cells if c not in jobs]
        for cells, overhead in ((sum(not c.is_workload for c in timed), 0.05),
                                (sum(c.is_workload for c in timed), schedule.WORKLOAD_OVERHEAD_S)):
            total += (schedule.calibration_seconds(cells, self.settings, overhead)
                      + schedule.estimated_seconds(cells * blocks, self.settings, overhead))
        # A job is a fixed amount of work: its time grows with its targets, not with `seconds`.
        total += sum(schedule.job_cell_seconds(c, blocks, *self.job_times.get(c.key, ())) for c in jobs)
        return total + sum(self.first_builds.values())

    def worst_case_seconds(self) -> float:
        """``estimated_seconds`` with every comparison running to the last look (all of a
        sequential study's blocks; a fixed study's estimate), in s."""
        return self.estimated_seconds(self.looks[-1])


def prepare_study(source: str | os.PathLike | Study, *, setup: bool = True, dry_run: bool = False,
               margin_pct: float | None = None, multiplicity: bool | None = None,
               console: Any = None, allow_remote: Sequence[str] = ()) -> PreparedStudy:
    """Parse (unless given a Study) and check a study against its workers, and expand it.

    The study is checked against the default worker's rules before any worker build is made,
    so a typo does not wait for a build. ``setup`` builds missing setup builds (openssl@3.6);
    ``dry_run`` tolerates them missing. Raises StudyError, UsageError, WorkerError subclasses.
    """
    s = source if isinstance(source, Study) else study_mod.load(source)
    if len(s.configurations) < 2:
        raise s.error("study", 0, "baseline",
                      f"the study has only its baseline configuration '{s.baseline}', so it compares "
                      "nothing; add a [[configuration]] to compare with it, or, to gate one build against "
                      "its stored runs, measure it with `cryptoperf speed --runs N` and compare with "
                      "`cryptoperf compare previous latest --history K` (docs/ci-gate.md)")
    if margin_pct is not None and not 0 <= margin_pct <= 100:
        raise UsageError(f"--margin {margin_pct:g} is out of range; give a percentage from 0 to 100")
    path = find_worker()
    hello = fetch_hello(path)  # (a dry run asks for the detailed one below, once the token is known)
    # a configuration with a worker of its own (a path, or the Go worker) is checked against that worker's hello
    own = {c.build: workerbuild.ensure(c.build, f"{s.path}: configuration '{c.name}'", auto=False, console=console)
           for c in s.configurations if builds.get(c.build).own_rules}
    s = study_mod.check_against_worker(s, hello.rules, {b: h.rules for b, (_, h) in own.items()})
    needed: dict[str, str] = {}
    for c in s.configurations:
        needed.setdefault(c.build, f"{s.path}: configuration '{c.name}'")
    openssl_fips = next((f"{s.path}: configuration '{c.name}' (the openssl backend in the FIPS build)" for c in s.configurations
                         if c.build == builds.FIPS and builds.LIBRARY_BACKEND in s.backends_of(c)), None)
    served = any(o.server is not None for o in s.operations)
    server_env = [v for o in s.operations if o.server is not None for v in o.server_env.values()]
    server_fips = next((f"{s.path}: configuration '{c.name}' (its server under test runs OpenSSL's FIPS provider)"
                        for c in s.configurations
                        if served and server_mod.asks_for_fips_provider([*c.variables.values(), *server_env])), None)
    if server_fips and setup and not dry_run:
        providerbuild.ensure(server_fips, console or Console(stderr=True, highlight=False))
    workers = worker_builds(needed, setup=setup, missing_ok=dry_run, default=(path, hello), console=console,
                            openssl_fips=openssl_fips, known=own)
    for name, (_, h) in workers.items():
        cpumask.check_hello(h.raw.get("cpu_masks"), [c.cpu for c in s.configurations if c.build == name])
    cells = schedule.expand(s)
    check_remote(s, cells, allow_remote)
    device_env = open_devices(cells, hello, path)
    if dry_run:
        # the dry run's support table, asked with the token's variables when a cell uses one
        workers = {**workers, builds.DEFAULT: (path, fetch_hello(path, detail=True, env=device_env or None))}
    work_dir = check_work_dir(s, cells)
    settings = schedule.Settings(seconds=s.seconds, warmup_s=s.warmup_s, threads=s.threads, timeout_s=s.timeout_s,
                                 work_dir=work_dir, env=device_env)
    looks = schedule.looks(s.repetitions, s.max_repetitions if s.until == "decided" else None)
    # a dry run builds nothing: the cells that will run on the provider it would build first
    # are not asked about (the worker would refuse them for want of it)
    provider_missing = not providerbuild.ready()
    unbuilt = dry_run and openssl_fips is not None and provider_missing
    skipped, job_times = check_workloads(s, cells, workers, lambda c: unbuilt and c.build == builds.FIPS
                                     and c.backend == builds.LIBRARY_BACKEND, env=device_env)
    if skipped:
        cells = [c for c in cells if not any(c.label == levels.row_label(label, c.load) for label in skipped)]
    first = {**({providerbuild.WHAT: providerbuild.BUILD_SECONDS}
                if (openssl_fips or server_fips) and provider_missing else {}),
             **{f"the {n} worker build": builds.get(n).setup.seconds for n in needed
                if n not in workers and builds.get(n).setup is not None}}
    return PreparedStudy(s, cells, settings, workers, settings_of(s, margin_pct, multiplicity), looks,
                     skipped=skipped, seed=schedule.new_run_seed(s.seed), job_times=job_times, first_builds=first)


def open_devices(cells: Sequence[Cell], hello: Any, worker: str | os.PathLike) -> dict[str, str]:
    """The variables that point the workers at the PKCS#11 token the cells' device backends
    use (the environment's, else cryptoperf's SoftHSM2 token, made now on first use;
    ``pkcs11.Token.worker_env``, never the PIN itself), for ``Settings.env``; empty when no
    cell uses a device. One worker opens the token and logs in, once, so a missing module or a
    wrong PIN stops the study here, before anything runs, in one line.

    Raises MissingDependency (SoftHSM2 not installed), DeviceUnavailable (the worker's words)."""
    devices = hello.rules.devices
    used = next((c for c in cells if devices.get(c.backend) == pkcs11.DEVICE), None)
    if used is None:
        return {}
    env = pkcs11.token().worker_env()
    with WorkerClient(worker, env={**os.environ, **env}) as w:
        w.hello()
        w.check(_check_request(used, None), timeout_s=60)
    return env


def check_work_dir(s: Study, cells: Sequence[Cell]) -> str | None:
    """The directory a study's file workloads (their spec ``needs_dir``) write under
    (``work_dir``, default ``<data dir>/work``), checked before anything runs: writable, and
    with room for the largest file a cell asks for (its spec's ``file_bytes_param``, or the
    worker's default) twice over; a study with a server under test uses its ``work_dir`` too,
    when it names one (else the system's temporary directory). None when the study has neither.
    Raises StudyError (one line) otherwise."""
    files = [c for c in cells if c.spec is not None and c.spec.needs_dir]
    if not files:
        if s.work_dir and any(c.server is not None for c in cells):  # servers' private directories
            problem = workdir.writable_problem(s.work_dir, 0)
            if problem:
                raise s.error("study", 0, "work_dir", problem)
            return s.work_dir
        return None
    root = s.work_dir or str(paths.data_dir() / "work")
    sizes = []
    for c in files:
        try:
            sizes.append(c.spec.file_bytes(c.params))
        except ValueError as e:
            raise s.error("study", 0, None, str(e)) from None
    problem = workdir.writable_problem(root, 2 * max(sizes))
    if problem:
        raise s.error("study", 0, "work_dir" if s.work_dir else None, problem)
    return root


#: Time a worker may take to answer one ``check`` (an RSA-4096 identity is made once per process).
CHECK_TIMEOUT_S = 60.0


def check_workloads(s: Study, cells: Sequence[Cell], workers: Workers,
                    not_yet: Callable[[Cell], bool] = lambda c: False, env: Mapping[str, str] | None = None
                    ) -> tuple[dict[str, str], dict[str, tuple[schedule.JobTime, schedule.JobTime]]]:
    """Ask each worker build whether it can run the study's workload combinations at all (the
    worker's ``check``: its TLS implementations configured as asked, a storage scheme and
    layer available, nothing measured), before the first repetition. Raises StudyError, one
    line at the operation, for the first combination a library or the host lacks
    (X25519MLKEM768 on ring or on OpenSSL 3.0, ...): a study that asks for it would measure
    nothing there — unless the operation is ``optional``: then it is returned, operation label →
    why (the first combination refused), for the caller to skip whole (a dm-crypt layer on a
    kernel without device-mapper). Builds missing in a dry run are skipped, as are the cells
    ``not_yet`` names (a dry run's cells on OpenSSL's FIPS provider before it is built). ``env``:
    variables the workers get on top of this process's (``open_devices``'s token).

    Also returns each job cell's planned time, cell key → (at its calibration level, at its
    own) ``schedule.JobTime``, from the worker's answers, for ``PreparedStudy.estimated_seconds``."""
    skipped: dict[str, str] = {}
    times: dict[str, tuple[schedule.JobTime, schedule.JobTime]] = {}
    seen: set[tuple] = set()
    by_build: dict[str, list[Cell]] = {}
    for c in cells:
        if not c.is_workload:
            continue
        key = _check_key(c)
        if key not in seen and c.build in workers and not c.backend.startswith("mock") and not not_yet(c):
            seen.add(key)
            by_build.setdefault(c.build, []).append(c)
    planned: dict[tuple, tuple[schedule.JobTime, schedule.JobTime]] = {}
    for build, todo in by_build.items():
        path, _ = workers[build]
        with WorkerClient(path, env={**os.environ, **env} if env else None) as w:
            w.hello()
            for c in todo:
                answer = w.check(_check_request(c, c.load), timeout_s=CHECK_TIMEOUT_S)
                if c.spec is not None and c.spec.job and answer.get("status") == "supported":
                    cal = schedule.calibration_load(c)
                    cal_answer = w.check(_check_request(c, cal), timeout_s=CHECK_TIMEOUT_S) if cal else answer
                    planned[_check_key(c)] = (_job_time(cal_answer), _job_time(answer))
                if answer.get("status") == "unsupported":
                    o = next(o for o in s.operations if c.label == levels.row_label(o.label, c.load))
                    if o.optional:
                        skipped.setdefault(o.label, f"configuration '{c.configuration}' on {c.backend}: "
                                                    f"{answer.get('reason')}")
                        continue
                    raise s.error("operation", o.index, "params",
                                  f"configuration '{c.configuration}' on {c.backend}: {answer.get('reason')}; "
                                  "remove that combination, or pin the configuration to a backend that has it")
    for c in cells:
        if _check_key(c) in planned:
            times[c.key] = planned[_check_key(c)]
    return skipped, times


def _check_key(c: Cell) -> tuple:
    """What the worker's ``check`` answer for workload cell ``c`` depends on: its build, backend,
    op and params, and for a job its level too (a job's planned time grows with its targets;
    other cells are asked once for all their levels)."""
    load = c.load if c.spec is not None and c.spec.job else None
    return (c.build, c.backend, c.op, load, tuple(sorted((k, v) for k, v in c.params.items() if k != "load")))


def _check_request(c: Cell, load: str | None) -> dict[str, Any]:
    """The worker's ``check`` request for cell ``c`` at ``load`` (its own when None); a server
    under test's parameters stand in (its address is known once it runs; the check needs one)."""
    params = c.worker_params()
    if load is not None and load != c.load and c.spec is not None:
        params["load"] = levels.worker_load(load, c.spec.bytes_per_tx(params))
    if c.server is not None:
        names = c.spec.server_under_test
        params.update({names["connect_param"]: "127.0.0.1:1", names["ca_file_param"]: "ca.pem", names["pid_param"]: "2"})
        params.update({names[role]: value for role, value in (("dir_param", "server"), ("client_cert_param", "client-cert.pem"),
                                                               ("client_key_param", "client-key.pem")) if role in names})
    return {"id": c.key, "backend": c.backend, "op": c.op, "params": params}


def _job_time(answer: Mapping[str, Any]) -> schedule.JobTime:
    """A ``check`` answer's ``planned_work_s`` and ``planned_wait_s`` (a field absent or not a
    number: unplanned, None and 0)."""
    def seconds(name: str) -> float | None:
        value = answer.get(name)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        return float(value) if ok else None
    return schedule.JobTime(seconds("planned_work_s"), seconds("planned_wait_s") or 0.0)


def _loopback(address: str) -> bool:
    """True for ``IP:PORT`` (or ``[IPv6]:PORT``) on a loopback address."""
    import ipaddress
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_remote(s: Study, cells: Sequence[Cell], allow_remote: Sequence[str]) -> None:
    """Refuse a cell whose ``connect`` (a server already running elsewhere) is not a loopback
    address, unless ``allow_remote`` (``--allow-remote``) names that address: cryptoperf loads
    only this machine's servers by default. Raises StudyError at the operation's params."""
    for c in cells:
        address = c.params.get("connect")
        if address and not _loopback(address) and address not in allow_remote:
            o = next(o for o in s.operations if c.label == levels.row_label(o.label, c.load))
            raise s.error("operation", o.index, "params",
                          f"connect {address} is not a loopback address; cryptoperf loads only this machine's "
                          f"servers unless `--allow-remote {address}` names it")


def comparable(cells: Sequence[Cell], baseline: str, contrasts: Sequence[Any] = ()) -> list[Cell]:
    """The cells of the groups that can answer something: the group's baseline and at least one
    other configuration are among ``cells``, or both sides of one of ``contrasts``
    (``study.Contrast``). The others would measure without comparing."""
    out = []
    for members in schedule.groups(cells).values():
        names = {c.configuration for c in members}
        if (baseline in names and len(names) > 1) or any({k.baseline, k.configuration} <= names for k in contrasts):
            out += members
    return out


def no_comparison_reason(run: StoredRun) -> str | None:
    """Why a study run compared nothing (one line), or None if it decided at least one
    comparison."""
    if any(d.status == "ok" for d in run.deltas):
        return None
    first = next((d for d in run.deltas if d.reason), None)
    example = f" (e.g. {first.label} on {first.backend}, {first.configuration}: {first.reason})" if first else ""
    return (f"study {run.study.name if run.study else '?'} compared nothing: no configuration was measured "
            f"beside the baseline in enough blocks{example}; its results are stored as run {run.id}")
