"""The typed model every stage shares: cell, block, repetition, outcome, cell summary, delta.

Words, one per idea:

- a **cell** is one thing measured: (configuration, backend, operation label, message size),
  with its worker operation, parameters, CPU mask and worker build resolved;
- cells that are compared with each other (same backend, label and size) form a **group**;
- a **block** runs every configuration of one group once, in a seeded random order; the
  comparison of a configuration with the baseline pairs the two within each block;
- a **repetition** is one cell's measurement in one block, in one fresh worker process
  (block 0 holds the calibration repetitions, which fix the batch size and are not analysed);
- an **outcome** is what came of a repetition (measured, unsupported, invalid, failed);
- a **stored run** is one invocation of ``study`` or ``speed`` as the store keeps it (``store/stored_run.py``);
  "run" means nothing else.

``analysis`` computes summaries and deltas from outcomes; it imports this module, never the
runner (``run/``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from cryptoperf import levels, stats
from cryptoperf.builds import DEFAULT as DEFAULT_BUILD, is_fips
from cryptoperf.cpumask import BASELINE
from cryptoperf.result import WorkerResult

if TYPE_CHECKING:
    from cryptoperf.workload_spec import WorkloadSpec

OK, UNSUPPORTED, INVALID, FAILED = "ok", "unsupported", "invalid", "failed"
#: A cell summary's status (never an outcome's) when its measured repetitions ran on different
#: libraries (``analysis.library_change``): its figures are kept, its comparisons are n/a.
REJECTED = "rejected"
#: The block number of calibration repetitions (they fix each group's batch size).
CALIBRATION_BLOCK = 0
#: How ``Outcome.disturbed`` of a superseded outcome starts when it was not disturbed but
#: belonged to a block whose Ray node was lost mid-block: the whole block ran again, so that
#: its paired comparison never mixes two machines.
RETRIED = "retried: "

#: Cell attributes that follow the key's four parts as ``/name=value`` when not at their default.
_KEY_ATTRS = (("cpu", BASELINE), ("build", DEFAULT_BUILD))


@dataclass(frozen=True)
class ServerSpec:
    """An operation's server under test, for one configuration (``run.server`` starts it).

    Attributes:
        command: the command line, a template (``nginx -p {dir} -c {dir}/nginx.conf``), split
            as a shell would (``shlex``) after rendering; no shell runs it.
        files: template files (paths inside the study's directory) rendered into the
            repetition's directory under their own names.
        env: environment variables for the server (templates), added to the orchestrator's.
        ready_s: how long the server may take to accept a verified TLS handshake.
        cert: the certificate kind to make (``rsa2048``, ``rsa4096``, ``ecdsa-p256``,
            ``ed25519``): the ``cert`` the workload's parameters ask the client to check.
        variables: the configuration's variables (name → value) for the templates.
        study_dir: the directory ``files`` are relative to.
    """

    command: str
    files: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    ready_s: float = 10.0
    cert: str = "ecdsa-p256"
    variables: Mapping[str, str] = field(default_factory=dict, hash=False)
    study_dir: str = "."


#: The key of ``Cell.params`` holding a primitive cell's own thread count: not a worker
#: parameter (``worker_params`` leaves it out), the run request's ``threads``.
THREADS_PARAM = "threads"


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
        cpu: the CPU capability mask its workers run under (``cpumask.NAMES``).
        build: the worker build its repetitions use (``builds.BUILDS``: ``default``, ``fips``, ...).
        spec: a workload cell's spec as the worker announced it (``WorkerRules.workloads``), set
            when the cell is planned; None for a primitive and for a cell rebuilt from the store.
            Not part of the cell's identity (not compared, not stored).
        server: the server under test its repetitions start (an operation's ``server``), set
            when the cell is planned; None otherwise. Not part of its identity either.
        paired_on: for a configuration that runs on a backend its study's baseline does not
            (``Study.paired_on``: both pinned to one backend each), the baseline's backend,
            whose cells this one is paired with block by block; None when the cell pairs on its
            own backend. Set from the study when the cell is planned or loaded; not part of the
            cell's identity.
    """

    configuration: str
    backend: str
    label: str
    op: str
    params: Mapping[str, str] = field(default_factory=dict, hash=False)
    size_bytes: int | None = None
    cpu: str = BASELINE
    build: str = DEFAULT_BUILD
    spec: "WorkloadSpec | None" = field(default=None, hash=False, compare=False, repr=False)
    server: ServerSpec | None = field(default=None, hash=False, compare=False, repr=False)
    paired_on: str | None = field(default=None, hash=False, compare=False)

    @property
    def fips(self) -> bool:
        """True when the cell runs in a FIPS worker build (``fips``, ``go-fips``)."""
        return is_fips(self.build)

    @property
    def load(self) -> str | None:
        """The load level of a workload cell (``closed:10``, ``open:500``; ``workload``), or
        None for a primitive operation."""
        return self.params.get("load")

    @property
    def threads(self) -> int | None:
        """A primitive cell's own thread count (an operation's ``threads = [...]``, kept in its
        params as ``THREADS_PARAM``), or None: the study's ``threads``; None for a workload."""
        n = self.params.get(THREADS_PARAM)
        return int(n) if n is not None and not self.is_workload else None

    @property
    def operation_label(self) -> str:
        """The label of the cell's ``[[operation]]``: its row label without the load level or
        thread count ``levels.row_label`` added (``full handshake @ c=10`` → ``full handshake``)."""
        suffix = levels.row_label("", self.load, self.threads)
        return self.label[:-len(suffix)] if suffix and self.label.endswith(suffix) else self.label

    @property
    def is_workload(self) -> bool:
        """True for a workload cell (a TLS handshake, a transfer, an IKE phase 1 at a load
        level) rather than one primitive operation."""
        return self.load is not None

    @property
    def group(self) -> tuple[str, str, int | None]:
        """(backend, label, size_bytes): cells of one group run in the same blocks and are
        compared with each other; the backend is the one the cell is paired on (``paired_on``,
        else its own)."""
        return (self.paired_on or self.backend, self.label, self.size_bytes)

    @property
    def key(self) -> str:
        """A text key unique within a stored run, ``backend/label/size/configuration`` (size
        ``-`` when None), followed by ``/cpu=<mask>`` for a CPU mask other than baseline and
        ``/build=<name>`` for another worker build than the default. For display and request
        ids; the store keeps cpu and build in columns of their own and never parses keys."""
        size = "-" if self.size_bytes is None else str(self.size_bytes)
        key = f"{self.backend}/{self.label}/{size}/{self.configuration}"
        for name, default in _KEY_ATTRS:
            value = getattr(self, name)
            if value != default:
                key += f"/{name}={value}"
        return key

    def worker_params(self) -> dict[str, Any]:
        """The ``params`` object of the worker's run request (with ``size_bytes`` if set, and a
        byte-rate load level as the transactions per second the worker reads, from the bytes per
        transaction its ``spec`` names: ``levels.worker_load``; without a spec, the level as
        written). Raises ValueError for a byte rate whose bytes per transaction are not a number."""
        p: dict[str, Any] = {k: v for k, v in self.params.items() if k != THREADS_PARAM or self.is_workload}
        if self.load is not None and self.spec is not None:
            p["load"] = levels.worker_load(self.load, self.spec.bytes_per_tx(p))
        if self.size_bytes is not None:
            p["size_bytes"] = self.size_bytes
        return p

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``cell`` (the key), ``configuration``, ``backend``, ``label``,
        ``op``, ``params``, ``size_bytes``, ``cpu``, ``build``, ``fips``, and ``paired_on``
        when the cell is paired on another backend than its own."""
        out = {"cell": self.key, "configuration": self.configuration, "backend": self.backend,
               "label": self.label, "op": self.op, "params": dict(self.params),
               "size_bytes": self.size_bytes, "cpu": self.cpu, "build": self.build, "fips": self.fips}
        if self.paired_on is not None:
            out["paired_on"] = self.paired_on
        return out


def paired(outcomes: Iterable["Outcome"], paired_on: Mapping[str, str]) -> list["Outcome"]:
    """``outcomes`` with each cell's ``paired_on`` set from ``paired_on`` (configuration name →
    the backend its cells pair on, ``Study.paired_on``) where the cell runs on another backend;
    outcomes whose cell is already so are returned as they are, the others as copies."""
    out = []
    for o in outcomes:
        want = paired_on.get(o.cell.configuration)
        want = want if want != o.cell.backend else None
        if o.cell.paired_on == want:
            out.append(o)
            continue
        rep = dataclasses.replace(o.repetition, cell=dataclasses.replace(o.cell, paired_on=want))
        out.append(dataclasses.replace(o, repetition=rep))
    return out


def speed_cell_attrs(key: str) -> dict[str, str]:
    """``{"cpu": mask, "build": name}`` from the key of a cell without a configuration name
    (``cryptoperf speed``), where the ``/name=value`` suffixes cannot be confused with a
    configuration name. Used only to upgrade stores of format 1, which kept them nowhere else."""
    out = dict(_KEY_ATTRS)
    parts = key.split("/")
    while len(parts) > 4:
        name, sep, value = parts[-1].partition("=")
        if not sep or name not in out:
            break
        out[name] = value
        parts.pop()
    return out


@dataclass(frozen=True)
class Repetition:
    """One cell measured once, in one fresh worker process.

    Attributes:
        cell: the cell.
        block: 1-based block number (``CALIBRATION_BLOCK`` = 0 for calibration).
        position: 0-based place of this cell in its block's random order.
        index: 0-based place in the whole schedule.
        attempt: 1, or 2 for the re-run of a repetition disturbed by steal or other load.
        batch: operations per timed sample the worker is told to use (one per group, the same
            for every configuration compared); None lets the worker calibrate.
    """

    cell: Cell
    block: int
    position: int = 0
    index: int = 0
    attempt: int = 1
    batch: int | None = None

    @property
    def request_id(self) -> str:
        """The run request's ``id``: ``<cell key>#<block>``."""
        return f"{self.cell.key}#{self.block}"

    @property
    def calibration(self) -> bool:
        """True for a calibration repetition (block 0)."""
        return self.block == CALIBRATION_BLOCK


@dataclass
class Outcome:
    """What came of one repetition.

    Attributes:
        repetition: the planned repetition.
        status: ``ok``, ``unsupported`` (the backend lacks the operation: an answer, not an
            error), ``invalid`` (validation failed, never timed) or ``failed`` (crash, timeout,
            refused request, unreadable result).
        reason: why, for every status but ok ('' for ok).
        result: the worker's ``result`` message, decoded (``result.WorkerResult``), or None
            when there is none.
        latency: latency figures (ns) from the histogram, for ok outcomes.
        throughput: derived figures (ops_per_s, bytes_per_s, process_cpu_ns_per_op, steal_pct), for ok.
        stderr_tail: the worker's last stderr lines for failed repetitions.
        started_at, finished_at: UTC ISO 8601 timestamps.
        disturbed: why the host disturbed this repetition (steal above the study's limit, or
            other load above its steady level by more than the limit: ``run.disturbance``), ''
            if it did not (a constant load its block shared is not a disturbance).
        superseded: True when a later attempt of the same cell and block replaces it (a
            disturbed repetition that was re-run, or one of a block that ran again on another
            Ray node, ``disturbed`` starting with ``RETRIED``); superseded outcomes are stored,
            not analysed.
        host: the host fingerprint (``hostinfo.fingerprint``, plus ``ray_node``: its Ray node
            id and address) of the machine that ran it, when that is not the run's host (the
            Ray executor's nodes); None: the run's host.
    """

    repetition: Repetition
    status: str
    reason: str = ""
    result: WorkerResult | None = None
    latency: stats.Latency | None = None
    throughput: stats.Throughput | None = None
    stderr_tail: str = ""
    started_at: str = ""
    finished_at: str = ""
    disturbed: str = ""
    superseded: bool = False
    host: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True if the repetition was measured."""
        return self.status == OK

    @property
    def cell(self) -> Cell:
        """The repetition's cell."""
        return self.repetition.cell


def outcome_from_result(rep: Repetition, result: WorkerResult) -> Outcome:
    """Turn a worker's decoded ``result`` into an Outcome, deriving latency and throughput for
    ``ok`` results; an ok result whose histogram or counters cannot be read becomes ``failed``."""
    status = result.status
    cell = rep.cell
    if cell.cpu != BASELINE and result.cpu_mask != cell.cpu:
        return Outcome(rep, FAILED, f"the worker did not verify CPU mask '{cell.cpu}' "
                       f"(its result names {result.cpu_mask!r}); rebuild it with `pip install .`",
                       result)
    if status in (UNSUPPORTED, INVALID):
        return Outcome(rep, status, result.reason or status, result)
    if status == OK and cell.fips and result.fips is not True:
        return Outcome(rep, FAILED, f"the FIPS worker measured {cell.backend} without reporting "
                       f"FIPS mode (its result says fips={result.fips!r}); not counted as FIPS",
                       result)
    if status != OK:
        return Outcome(rep, FAILED, f"worker returned unknown status {status!r}", result)
    if rep.batch is not None and result.batch != rep.batch:
        return Outcome(rep, FAILED, f"the worker timed batches of {result.batch} operations, not "
                       f"the {rep.batch} asked for; rebuild it with `pip install .`", result)
    try:
        if result.histogram is None:
            raise ValueError("the result has no histogram")
        latency = stats.latency_from_histogram(result.histogram)
        tp = stats.throughput(result)
    except ValueError as e:
        return Outcome(rep, FAILED, f"unreadable result: {e}", result)
    return Outcome(rep, OK, "", result, latency, tp)


@dataclass(frozen=True)
class CellSummary:
    """Every analysed repetition of one cell (calibration and superseded ones excluded).

    Attributes:
        cell: the cell.
        repetitions: repetitions analysed; ok: those measured.
        status: ``ok`` if every repetition measured, else the status of the first that did not
            (``unsupported``, ``invalid``, ``failed``); ``rejected`` when the measured
            repetitions ran on different libraries (``analysis.library_change``); reason: why.
        p50_ns, p99_ns, ops_per_s, bytes_per_s, process_cpu_ns_per_op: medians over measured
            repetitions (None without any).
        blocks_run: the blocks in which the cell had a repetition, measured or not.
        p50_by_block_ns, ops_per_s_by_block, process_cpu_ns_per_op_by_block: block → the measured
            repetition's value, in block order (what paired comparisons use).
        cv_p50, cv_ops_per_s: coefficient of variation across repetitions (fractions).
        steal_pct: mean steal % over the measured repetitions (None if unknown).
        disturbed: measured repetitions flagged as disturbed (after their one re-run).
        batch: operations per timed sample (of the first measured repetition); timing:
            ``batched`` or ``individual``.
        library_version: ``library library_version`` as the worker reported it.
        device_process_cpu_ns_per_op: median over measured repetitions of the CPU per
            operation of the device's own process on this host (a PKCS#11 token's daemon;
            ``stats.Throughput``), None where the work is all in the worker.
        server_cpu_ns_per_op, server_cpu_ns_per_op_by_block: a workload's server side, its
            process's CPU ns per transaction it completed over the window
            (``workloads.side_cpu_ns_per_tx(result, "server")``): the median, and block → the
            measured repetition's value; None and {} without a server side.
    """

    cell: Cell
    repetitions: int
    ok: int
    status: str
    reason: str
    p50_ns: float | None
    p99_ns: float | None
    ops_per_s: float | None
    bytes_per_s: float | None
    process_cpu_ns_per_op: float | None
    blocks_run: tuple[int, ...]
    p50_by_block_ns: Mapping[int, float]
    ops_per_s_by_block: Mapping[int, float]
    process_cpu_ns_per_op_by_block: Mapping[int, float]
    cv_p50: float
    cv_ops_per_s: float
    steal_pct: float | None
    disturbed: int
    batch: int | None
    timing: str | None
    library_version: str | None
    device_process_cpu_ns_per_op: float | None = None
    server_cpu_ns_per_op: float | None = None
    server_cpu_ns_per_op_by_block: Mapping[int, float] = field(default_factory=dict)

    @property
    def host_cpu_ns_per_op(self) -> float | None:
        """The host's CPU per operation: the worker process's, plus the device's own process's
        where it has one (``device_process_cpu_ns_per_op``)."""
        if self.process_cpu_ns_per_op is None:
            return None
        return self.process_cpu_ns_per_op + (self.device_process_cpu_ns_per_op or 0.0)

    @property
    def p50_samples_ns(self) -> tuple[float, ...]:
        """Per-repetition p50 latency (ns), in block order."""
        return tuple(self.p50_by_block_ns.values())

    @property
    def ops_per_s_samples(self) -> tuple[float, ...]:
        """Per-repetition ops/s, in block order."""
        return tuple(self.ops_per_s_by_block.values())

    @property
    def process_cpu_ns_per_op_samples(self) -> tuple[float, ...]:
        """Per-repetition CPU ns per operation, in block order."""
        return tuple(self.process_cpu_ns_per_op_by_block.values())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (cell flattened into its fields, per-block values as lists in block
        order with ``blocks`` naming their block numbers, ``blocks_run`` every block the cell
        ran in)."""
        d = {k: v for k, v in self.__dict__.items()
             if k not in ("cell", "blocks_run", "p50_by_block_ns", "ops_per_s_by_block",
                          "process_cpu_ns_per_op_by_block", "server_cpu_ns_per_op_by_block")}
        d.update(self.cell.as_dict())
        d["blocks_run"] = list(self.blocks_run)
        d["blocks"] = list(self.p50_by_block_ns)
        d["p50_samples_ns"] = list(self.p50_samples_ns)
        d["ops_per_s_samples"] = list(self.ops_per_s_samples)
        d["process_cpu_ns_per_op_samples"] = list(self.process_cpu_ns_per_op_samples)
        d["server_cpu_ns_per_op_samples"] = list(self.server_cpu_ns_per_op_by_block.values())
        return d


@dataclass(frozen=True)
class Delta:
    """One configuration against its baseline in one group (or one cell of run B against the
    same cell of run A, for ``cryptoperf compare``).

    Attributes:
        backend, label, size_bytes: the group (``backend``: the configuration's own).
        baseline_backend: the backend of the side it is compared with, when that differs (an
            implementation against another, paired in the same blocks), else None.
        configuration, baseline: configuration names; op, baseline_op: their worker ops.
        cpu, build: the configuration's CPU mask and worker build.
        status: ``ok`` when an interval could be computed, else ``n/a`` with ``reason``.
        blocks: paired blocks used (or, unpaired, the smaller side's repetitions).
        dropped: blocks left out because either side did not measure in them.
        baseline_p50_ns, p50_ns: medians of per-repetition p50 latency (ns).
        latency: configuration ÷ baseline of per-repetition p50 latency, with its interval at
            the study's adjusted level; throughput: the same for ops/s; cpu_per_op: for CPU ns
            per operation (None without CPU times in enough blocks); server_cpu_per_op: for a
            workload's server CPU ns per transaction (None without a server side in enough
            blocks).
        verdict: decided from the interval of the study's ``verdict_on`` metric (latency by
            default) and the margin; ``verdict.metric`` names it.
        noise: the larger coefficient of variation (fraction) of the two sides' p50.
        note: e.g. ``8 of 10 blocks (2 dropped: ...)``, ``block 7 set aside as an outlier
            (...)``.
        set_aside: the blocks left out of every interval of the comparison as outliers of the
            metric its verdict is decided on (``outliers.outlier_blocks``), ascending.
        batch: operations per timed sample on both sides (they are equal within a study).
        library_version, baseline_library_version: the library release each side ran
            (``library library_version`` as the workers reported it), which differ when a
            configuration changes the build (FIPS module, another OpenSSL).
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
    cpu: str = BASELINE
    build: str = DEFAULT_BUILD
    blocks: int = 0
    dropped: int = 0
    baseline_p50_ns: float | None = None
    p50_ns: float | None = None
    latency: stats.Interval | None = None
    throughput: stats.Interval | None = None
    cpu_per_op: stats.Interval | None = None
    server_cpu_per_op: stats.Interval | None = None
    verdict: stats.Verdict | None = None
    noise: float | None = None
    note: str = ""
    batch: int | None = None
    library_version: str | None = None
    baseline_library_version: str | None = None
    set_aside: tuple[int, ...] = ()
    baseline_backend: str | None = None

    @property
    def decisive(self) -> "stats.Interval | None":
        """The interval the verdict was decided on (``verdict.metric``: latency, throughput or
        CPU time per operation), None without a verdict."""
        if self.verdict is None:
            return None
        key = next((k for k, (name, _) in stats.METRICS.items() if name == self.verdict.metric), "latency")
        return {"latency": self.latency, "throughput": self.throughput, "cpu_per_op": self.cpu_per_op,
                "server_cpu_per_op": self.server_cpu_per_op}[key]

    @property
    def library_change(self) -> str:
        """``AWS-LC 5.12.0 → AWS-LC-FIPS 4.2.0`` when the two sides ran different library
        releases, else ''."""
        a, b = self.baseline_library_version, self.library_version
        return f"{a} → {b}" if a and b and a != b else ""

    @property
    def group(self) -> tuple[str, str, int | None]:
        """(backend, label, size_bytes) of the group it was paired in (``Cell.group``): the
        baseline's backend when the two sides ran on different ones."""
        return (self.baseline_backend or self.backend, self.label, self.size_bytes)

    @property
    def backends(self) -> str:
        """The backend for display: ``aws-lc``, or ``ring vs aws-lc`` when the configuration ran
        on another backend than the one it is compared with."""
        return f"{self.backend} vs {self.baseline_backend}" if self.baseline_backend else self.backend

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; intervals as ``Interval.as_dict``, the verdict as ``Verdict.as_dict``;
        ``baseline_backend`` is the backend of the side compared with when it differs from
        ``backend`` (two implementations compared), else None."""
        d = dict(self.__dict__)
        for k in ("latency", "throughput", "cpu_per_op", "server_cpu_per_op", "verdict"):
            d[k] = d[k].as_dict() if d[k] is not None else None
        return d
