"""What a workload announces about itself in the worker's ``hello`` (docs/worker-protocol.md,
"hello"): the level kinds it accepts, its modes, whether it runs a server side or needs a work
directory, whether a run is a job, whether it loads a server under test and through which
parameters, which of its parameters name files, and its sizing hints. (The figures computed for
it, and which way each is better, are the analysis': ``stats.METRICS`` and ``workloads/``.)

The worker is the one source of these traits, as it is of the operations' parameters: the
orchestrator reads them from ``WorkerRules.workloads[op]`` (``run.worker``) and knows no
workload by name. ``WorkloadSpec.from_hello`` parses one ``op_params`` entry; everything here is
frozen and made of plain values, so a spec travels with a cell to a Ray node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

#: The level kinds a workload may accept: ``closed:N``, ``open:RATE``, an open level given as a
#: byte rate (``open:100MB/s``) and a job over ``targets:N``.
LEVEL_KINDS = ("closed", "open", "open_bytes", "targets")


@dataclass(frozen=True)
class Memory:
    """Resident bytes of one repetition's processes, as the worker estimates them (``bytes``):

        base_bytes
        + socket_bytes                                              (mode socket only)
        + connections × (per_connection_bytes (× 2 in socket mode for a workload with a
                         server side) + Σ value(param) × k for param, k in per_connection_param)
        + targets × per_target_bytes
        + Σ value(param) × bytes for param, bytes in per_param_bytes
        + Σ value(a) × value(b) × bytes for a, b, bytes in per_param_product_bytes

    (``WorkloadSpec.memory_bytes`` computes it.)
    """

    base_bytes: int
    socket_bytes: int = 0
    per_connection_bytes: int = 0
    per_connection_param: Mapping[str, float] = field(default_factory=dict)
    per_target_bytes: int = 0
    per_param_bytes: Mapping[str, int] = field(default_factory=dict)
    per_param_product_bytes: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class Sizing:
    """What one repetition stores and holds, for the checks before a study runs: its result
    message's bytes (``result_bytes``, plus ``result_bytes_per_s`` per second of measuring
    window and ``result_bytes_per_target`` per target of a job) and its processes' ``memory``."""

    result_bytes: int
    result_bytes_per_s: int
    result_bytes_per_target: int
    memory: Memory


#: What a workload's ``spread`` names (``WorkloadSpec.spread``).
SPREAD_FIELDS = ("count_param", "index_param", "start_param", "merge_flag", "setup_ms_pointer")
#: The parameter through which cryptoperf gives each repetition of a ``needs_dir`` workload its
#: private work directory (docs/worker-protocol.md, "Workloads").
DIR_PARAM = "dir"
#: What a workload's ``server_under_test`` names: the parameter for the server's address, the CA
#: certificate that signed its certificate, its process id and its cgroup.
SERVER_UNDER_TEST_PARAMS = ("connect_param", "ca_file_param", "pid_param", "cgroup_param")
#: What it may also name (docs/worker-protocol.md, "Workloads"): the parameter for the server's
#: private directory, for a client certificate and its key from the same CA, and the file in
#: that directory whose appearance says the server is ready (instead of a TLS handshake).
SERVER_UNDER_TEST_OPTIONAL = ("dir_param", "client_cert_param", "client_key_param", "ready_file")


def _server_under_test(entry: Mapping[str, Any]) -> dict[str, str]:
    """``server_under_test`` as read from hello: every ``SERVER_UNDER_TEST_PARAMS`` (a KeyError
    names one that is missing) and those of ``SERVER_UNDER_TEST_OPTIONAL`` it gives."""
    out = {k: str(entry[k]) for k in SERVER_UNDER_TEST_PARAMS}
    out.update({k: str(entry[k]) for k in SERVER_UNDER_TEST_OPTIONAL if entry.get(k) is not None})
    return out


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload as its ``op_params`` entry in ``hello`` describes it.

    Attributes:
        name: the operation name (``op``).
        params: the run parameters it takes.
        levels: the level kinds it accepts, of ``LEVEL_KINDS``.
        bytes_per_tx_param: the parameter whose value is the bytes one transaction moves (what
            an ``open_bytes`` level divides by), its default in ``defaults``; or None.
        modes: the values of its ``mode`` parameter (empty: it takes none).
        default_mode: ``socket``, ``memory`` or ``file``: the mode when none is given.
        server: runs a server side in a process of its own in socket mode.
        needs_dir: a run needs a private work directory in its ``DIR_PARAM`` parameter.
        file_bytes_param: the parameter giving the bytes a run writes to that directory (its
            default in ``defaults``), or None.
        job: a run is a fixed job over ``targets:N``, not a time window.
        calibration_load: a job's calibration level (``targets:10``); None: a calibration
            repetition runs at the cell's own level.
        transaction: ``{"one": "handshake", "many": "handshakes"}``: what one transaction is.
        sizing: the estimates of ``Sizing``.
        server_under_test: the parameters through which it loads a server under test that
            cryptoperf starts (``connect_param``, ``ca_file_param``, ``pid_param``,
            ``cgroup_param``: its address, the CA certificate of its certificate, its process
            and its cgroup; and any of ``SERVER_UNDER_TEST_OPTIONAL``), or None for a workload
            that loads none.
        file_params: its parameters that name a file the worker reads (a study gives a path
            relative to its own directory; cryptoperf resolves it).
        connection_params: parameters whose product is the connections one process of a job
            may hold at once (a file descriptor each); empty when its levels say.
        defaults: each parameter's value when not given (``load`` among them).
        required: the parameters a run must give.
        job_kinds: a job's kinds (name → their parameters and what they do); empty otherwise.
        spread: how a job's parts run on several machines, or None: ``count_param`` (k parts),
            ``index_param`` and ``start_param`` (what each part's request adds: its index, the
            common start instant in ns since the Unix epoch) and ``merge_flag`` (the worker's
            flag merging the parts' results, one a line on stdin, into the job's) and
            ``setup_ms_pointer`` (a JSON pointer to a part's setup time in its result, ms).
    """

    name: str
    params: tuple[str, ...]
    levels: tuple[str, ...]
    bytes_per_tx_param: str | None
    modes: tuple[str, ...]
    default_mode: str
    server: bool
    needs_dir: bool
    file_bytes_param: str | None
    job: bool
    calibration_load: str | None
    transaction: Mapping[str, str]
    sizing: Sizing
    server_under_test: Mapping[str, str] | None = None
    file_params: tuple[str, ...] = ()
    connection_params: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    job_kinds: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    spread: Mapping[str, str] | None = None

    def set_by_cryptoperf(self) -> dict[str, str]:
        """The parameters cryptoperf sets itself for each repetition, which a study may not give:
        name → what to write instead. ``DIR_PARAM`` for a ``needs_dir`` workload; the process
        and cgroup parameters of its ``server_under_test`` (its address has a check of its own,
        and its CA file may be given when no server is started)."""
        out = {}
        if self.needs_dir:
            out[DIR_PARAM] = ("cryptoperf gives each repetition of a file workload its own private directory "
                              "under [study] work_dir; set work_dir to choose where")
        if self.server_under_test is not None:
            for role, what in (("pid_param", "process"), ("cgroup_param", "cgroup"), ("dir_param", "directory"),
                               ("client_cert_param", "client certificate"), ("client_key_param", "client key")):
                if role in self.server_under_test:
                    out[self.server_under_test[role]] = (f"cryptoperf passes the {what} of the server under test "
                                                         "it started (the operation's server key)")
        return out

    @classmethod
    def from_hello(cls, name: str, entry: Mapping[str, Any]) -> "WorkloadSpec":
        """The spec of workload ``name`` from its ``op_params`` entry. Raises KeyError,
        TypeError or ValueError when a field is missing or of the wrong shape (the caller
        words it: a worker older than this cryptoperf)."""
        sizing, memory = _mapping(entry["sizing"]), _mapping(entry["sizing"]["memory"])
        levels = _strings(entry["levels"])
        if not levels:
            raise ValueError(f"{name}: levels is empty")
        transaction = _mapping(entry["transaction"])
        return cls(
            name=name,
            params=_strings(entry["params"]),
            levels=levels,
            bytes_per_tx_param=_optional_str(entry["bytes_per_tx_param"]),
            modes=_strings(entry["modes"]),
            default_mode=str(entry["default_mode"]),
            server=_bool(entry["server"]),
            needs_dir=_bool(entry["needs_dir"]),
            file_bytes_param=_optional_str(entry["file_bytes_param"]),
            job=_bool(entry["job"]),
            calibration_load=_optional_str(entry["calibration_load"]),
            transaction={"one": str(transaction["one"]), "many": str(transaction["many"])},
            sizing=Sizing(
                result_bytes=_count(sizing["result_bytes"]),
                result_bytes_per_s=_count(sizing["result_bytes_per_s"]),
                result_bytes_per_target=_count(sizing["result_bytes_per_target"]),
                memory=Memory(
                    base_bytes=_count(memory["base_bytes"]),
                    socket_bytes=_count(memory["socket_bytes"]),
                    per_connection_bytes=_count(memory["per_connection_bytes"]),
                    per_connection_param={str(k): float(v) for k, v in _mapping(memory["per_connection_param"]).items()},
                    per_target_bytes=_count(memory["per_target_bytes"]),
                    per_param_bytes={str(k): _count(v) for k, v in _mapping(memory["per_param_bytes"]).items()},
                    per_param_product_bytes=tuple((str(a), str(b), _count(n))
                                                  for a, b, n in memory["per_param_product_bytes"]))),
            server_under_test=(_server_under_test(_mapping(entry["server_under_test"]))
                               if entry.get("server_under_test") is not None else None),
            file_params=_strings(entry["file_params"]),
            connection_params=_strings(entry["connection_params"]),
            defaults=dict(_mapping(entry["defaults"])),
            required=_strings(entry["required"]),
            job_kinds={str(k): dict(_mapping(v)) for k, v in _mapping(entry.get("job_kinds") or {}).items()},
            spread=({k: str(_mapping(entry["spread"])[k]) for k in SPREAD_FIELDS}
                    if entry.get("spread") is not None else None))

    @property
    def sized_params(self) -> tuple[str, ...]:
        """The parameters whose values enter the sizing or a byte rate (bytes per transaction,
        file bytes, the memory sum's): each must be a whole number."""
        m = self.sizing.memory
        names = [self.bytes_per_tx_param, self.file_bytes_param, *m.per_connection_param, *m.per_param_bytes,
                 *(p for a, b, _ in m.per_param_product_bytes for p in (a, b))]
        return tuple(dict.fromkeys(n for n in names if n is not None))

    def takes_level(self, kind: str) -> bool:
        """True if the workload accepts levels of ``kind`` (of ``LEVEL_KINDS``)."""
        return kind in self.levels

    def mode(self, params: Mapping[str, Any]) -> str:
        """The mode a run with ``params`` uses: its ``mode`` parameter, else ``default_mode``."""
        return str(params.get("mode", self.default_mode)) if self.modes else self.default_mode

    def value(self, name: str, params: Mapping[str, Any]) -> Any:
        """Parameter ``name`` of a run with ``params``: given, or the worker's default (None
        when neither)."""
        return params[name] if name in params else self.defaults.get(name)

    def number(self, name: str, params: Mapping[str, Any]) -> int:
        """``value(name, params)`` as a whole number. Raises ValueError (one line) when it is
        not one (or absent)."""
        value = self.value(name, params)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} {value!r} is not a whole number") from None

    def bytes_per_tx(self, params: Mapping[str, Any]) -> int | None:
        """The bytes one transaction of a run with ``params`` moves (``bytes_per_tx_param``'s
        value), None for a workload that names no such parameter. Raises ValueError (one line)
        when the value is not a whole number of bytes."""
        if self.bytes_per_tx_param is None:
            return None
        value = self.value(self.bytes_per_tx_param, params)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{self.bytes_per_tx_param} {value!r} is not a whole number of bytes") from None

    def file_bytes(self, params: Mapping[str, Any]) -> int:
        """The bytes a run with ``params`` writes to its work directory (``file_bytes_param``'s
        value; 0 for a workload that writes none). Raises ValueError (one line) when the value
        is not a whole number."""
        return 0 if self.file_bytes_param is None else self.number(self.file_bytes_param, params)

    def memory_bytes(self, params: Mapping[str, Any], connections: int, targets: int) -> int:
        """Resident bytes of one repetition with ``params`` at a level of ``connections``
        connections (or threads) and ``targets`` targets (0 for a time level): ``Memory``'s sum.
        Raises ValueError (one line) for a parameter of the sum that is not a whole number."""
        m = self.sizing.memory
        socket = self.mode(params) == "socket"
        per_connection = m.per_connection_bytes * (2 if socket and self.server else 1)
        per_connection += sum(self.number(p, params) * k for p, k in m.per_connection_param.items())
        total = m.base_bytes + (m.socket_bytes if socket else 0) + connections * per_connection
        total += targets * m.per_target_bytes
        total += sum(self.number(p, params) * n for p, n in m.per_param_bytes.items())
        total += sum(self.number(a, params) * self.number(b, params) * n for a, b, n in m.per_param_product_bytes)
        return int(total)

    def result_bytes(self, seconds: float, targets: int) -> int:
        """Bytes of one result message of a repetition measuring ``seconds`` s over
        ``targets`` targets (0 for a time level)."""
        s = self.sizing
        return s.result_bytes + int(s.result_bytes_per_s * seconds) + s.result_bytes_per_target * targets


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return tuple(str(v) for v in value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"expected a number of bytes, got {value!r}")
    return int(value)
