"""The client side of the worker protocol (docs/worker-protocol.md, version 1).

``WorkerClient`` spawns one worker process, greets it with ``hello`` (refusing another protocol
version), sends ``run`` requests and reads their results, each decoded here, once, into a
typed ``result.WorkerResult``. Responses are read by a dedicated
reader thread into a queue, so every wait has a timeout; stderr is collected by a second
thread (its tail explains crashes). The child is killed on timeout and on any exception.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from cryptoperf import PROTOCOL_VERSION, providerbuild
from cryptoperf.cpumask import ENV_VAR as MASK_ENV_VAR
from cryptoperf.errors import (ProtocolMismatch, WorkerCrashed, WorkerError, WorkerRequestError,
                               WorkerTimeout)
from cryptoperf.result import WorkerResult, decode
from cryptoperf.workload_spec import WorkloadSpec

STDERR_TAIL_LINES = 20
HELLO_TIMEOUT_S = 60.0
_EOF = object()


@dataclass(frozen=True)
class Hello:
    """The worker's ``hello`` answer.

    Attributes:
        protocol: protocol version (1).
        worker_version: the worker crate's version.
        cpu: ``{"model": str, "flags": [str], "logical_cpus": int, "tsc": bool}``.
        backends: one dict per backend: ``backend``, ``library``, ``library_version``, ``fips``,
            and with ``detail`` also ``ops`` (list of ``{op, status, reason}``).
        ops: every canonical operation name the worker knows.
        raw: the whole message.
        rules: the operation rules, workload specs and limits it announced (``WorkerRules``).
    """

    protocol: int
    worker_version: str
    cpu: Mapping[str, Any]
    backends: tuple[Mapping[str, Any], ...]
    ops: tuple[str, ...]
    raw: Mapping[str, Any] = field(repr=False)
    rules: "WorkerRules" = field(repr=False, compare=False)

    @property
    def backend_names(self) -> tuple[str, ...]:
        """The real backends' names (the mock backends are never listed)."""
        return tuple(b["backend"] for b in self.backends)


    def unmasked_vectors(self) -> dict[str, str]:
        """``{backend: "0x<word0>:0x<word1>"}``: the capability vector each maskable library
        reported in this (unmasked) worker process; what a baseline repetition's library must
        report too (``cpu_vector_unmasked`` of the run request)."""
        out = {}
        for b in self.backends:
            caps = b.get("capabilities") or {}
            if caps.get("maskable") and caps.get("openssl_ia32cap"):
                out[b["backend"]] = str(caps["openssl_ia32cap"])
        return out


#: The limits every hello announces (docs/worker-protocol.md, "hello"): threads of a primitive
#: run, measuring and warm-up seconds, message bytes, connections (or threads) of one workload
#: level, client threads of ``open:RATE``, targets of one job level.
LIMITS = ("max_threads", "max_seconds", "max_warmup_s", "max_size_bytes", "max_concurrency", "open_threads",
          "max_targets")
#: What a worker too old for this orchestrator is told.
TOO_OLD = "this worker is older than the orchestrator; rebuild it with `pip install .`"


@dataclass(frozen=True)
class WorkerRules:
    """What a worker accepts, as its ``hello`` announces it (docs/worker-protocol.md): the one
    source of these rules for the study parser, ``cryptoperf speed`` and the tests' fake worker.

    Attributes:
        backends: real backend names; ops: every operation name.
        op_params: op → the run parameters it takes (``size_bytes``, ``digest``, ``padding``).
        default_size_bytes: op → the message size used when none is given (None: no message).
        param_values: parameter → its allowed values (``digest``, ``padding``).
        limits: ``LIMITS`` → value (``max_threads``, ``max_seconds``, ``max_warmup_s``,
            ``max_size_bytes``, ``max_concurrency``, ``open_threads``, ``max_targets``).
        workloads: the ops that are workloads (``op_params`` says ``workload: true``) → their
            spec (``workload_spec.WorkloadSpec``: level kinds, modes, sizing, metrics, ...);
            they take the parameters ``op_params`` lists plus a load level.
        fips: primitive op → its standing under the FIPS module (``FipsApproval``), from its
            ``op_params`` entry's ``fips`` (empty from a worker that does not announce it).
    """

    backends: tuple[str, ...]
    ops: tuple[str, ...]
    op_params: Mapping[str, frozenset[str]]
    default_size_bytes: Mapping[str, int | None]
    param_values: Mapping[str, tuple[str, ...]]
    limits: Mapping[str, float]
    workloads: Mapping[str, WorkloadSpec] = field(default_factory=dict)
    fips: Mapping[str, "FipsApproval"] = field(default_factory=dict)

    @classmethod
    def from_hello(cls, hello: Mapping[str, Any]) -> "WorkerRules":
        """The rules of a ``hello`` message. Raises ProtocolMismatch (one line) when it lacks
        them, or a workload's spec, or a limit (a worker older than this cryptoperf)."""
        try:
            entries = hello["op_params"]
            op_params = {op: frozenset(r["params"]) for op, r in entries.items()}
            sizes = {op: r.get("default_size_bytes") for op, r in entries.items()}
            values = {k: tuple(v) for k, v in hello["param_values"].items()}
            limits = {k: float(hello["limits"][k]) for k in LIMITS}
            backends = tuple(b["backend"] for b in hello["backends"])
            ops = tuple(hello["ops"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ProtocolMismatch(f"the worker's hello lacks its operation rules or limits ({_what(e)}): "
                                   f"{TOO_OLD}") from None
        workloads = {}
        for op, entry in entries.items():
            if isinstance(entry, Mapping) and entry.get("workload"):
                try:
                    workloads[op] = WorkloadSpec.from_hello(op, entry)
                except (KeyError, TypeError, ValueError, AttributeError) as e:
                    raise ProtocolMismatch(f"the worker's hello lacks the spec of workload '{op}' ({_what(e)}): "
                                           f"{TOO_OLD}") from None
        try:
            fips = {op: FipsApproval.from_hello(e["fips"]) for op, e in entries.items()
                    if isinstance(e, Mapping) and isinstance(e.get("fips"), Mapping)}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ProtocolMismatch(f"the worker's hello has a malformed FIPS approval entry ({_what(e)}): "
                                   f"{TOO_OLD}") from None
        return cls(backends, ops, op_params, sizes, values, limits, workloads, fips)

    def fips_unapproved(self, op: str, params: Mapping[str, Any]) -> str | None:
        """Why the FIPS module does not approve primitive ``op`` with run ``params`` (its
        defaults filled in), or None when it does or the worker does not say."""
        a = self.fips.get(op)
        return a.problem(params) if a is not None else None

    @property
    def op_defaults(self) -> dict[str, Mapping[str, Any]]:
        """Workload → the value each of its parameters takes when not given (its spec's
        ``defaults``: e.g. ``load``, a job's ``cap`` and ``slices``)."""
        return {op: spec.defaults for op, spec in self.workloads.items()}

    def takes(self, op: str, param: str) -> bool:
        """True if ``op`` takes the run parameter ``param`` (``size_bytes``, ``digest``,
        ``padding``)."""
        return param in self.op_params.get(op, ())

    def takes_message(self, op: str) -> bool:
        """True if ``op`` processes a message whose size is a parameter."""
        return self.takes(op, "size_bytes")


@dataclass(frozen=True)
class FipsApproval:
    """Whether the FIPS module approves a primitive as the worker times it (hello's
    ``op_params[op].fips``; the worker's table follows the module's own service indicator and
    the NIST rules it cites: docs/worker-protocol.md, "FIPS build").

    Attributes:
        approved: the operation with its default parameters; reason: why not ('' if approved).
        not_approved_with: parameter → value → why the operation is not approved with that value
            (e.g. ``{"digest": {"sha1": "SHA-1 is disallowed for signature generation ..."}}``).
    """

    approved: bool
    reason: str = ""
    not_approved_with: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_hello(cls, entry: Mapping[str, Any]) -> "FipsApproval":
        """From an ``op_params[op].fips`` object; raises TypeError/KeyError when malformed."""
        with_ = {str(k): {str(v): str(r) for v, r in vs.items()} for k, vs in (entry.get("not_approved_with") or {}).items()}
        return cls(bool(entry["approved"]), str(entry.get("reason") or ""), with_)

    def problem(self, params: Mapping[str, Any]) -> str | None:
        """Why the module does not approve the operation with ``params``, or None."""
        if not self.approved:
            return self.reason or "not an approved service of the FIPS module"
        for param, values in self.not_approved_with.items():
            value = params.get(param)
            if value is not None and str(value) in values:
                return values[str(value)]
        return None


def _what(e: Exception) -> str:
    """The missing or malformed field an exception of the hello parsing names, as text."""
    return f"no field {e.args[0]!r}" if isinstance(e, KeyError) and e.args else str(e)


class WorkerClient:
    """One worker process. Use as a context manager::

        with WorkerClient(path) as w:
            hello = w.hello()
            result = w.run(request, timeout_s=60)

    Raises (all WorkerError): WorkerCrashed if the process dies or cannot start,
    WorkerTimeout if an answer does not come in time (the process is killed),
    ProtocolMismatch if it speaks another protocol version, WorkerRequestError for an
    ``error`` answer. After any exception inside the ``with`` block the process is killed.
    """

    def __init__(self, path: str | os.PathLike, env: Mapping[str, str] | None = None):
        self.path = Path(path)
        self._env = dict(env) if env is not None else None
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._threads: list[threading.Thread] = []

    # -- process management ---------------------------------------------------------------

    def start(self) -> None:
        """Spawn the worker. Raises WorkerCrashed if it cannot be started."""
        try:
            self._proc = subprocess.Popen(
                [str(self.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=providerbuild.worker_env(self.path, self._env), text=True, encoding="utf-8",
                errors="replace", bufsize=1)
        except OSError as e:
            raise WorkerCrashed(f"cannot start worker {self.path}: {e.strerror or e}") from None
        self._threads = [
            threading.Thread(target=self._read_stdout, name="worker-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name="worker-stderr", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        assert self._proc and self._proc.stdout
        try:
            for line in self._proc.stdout:
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(_EOF)

    def _read_stderr(self) -> None:
        assert self._proc and self._proc.stderr
        try:
            for line in self._proc.stderr:
                self._stderr.append(line.rstrip("\n"))
        except (OSError, ValueError):
            pass

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        """The last ``lines`` lines the worker wrote to stderr, joined by newlines."""
        return "\n".join(list(self._stderr)[-lines:])

    def kill(self) -> None:
        """Kill the worker (if running) and reap it; safe to call twice."""
        p = self._proc
        if p is None:
            return
        if p.poll() is None:
            p.kill()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._join_readers()
        for stream in (p.stdin, p.stdout, p.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def _join_readers(self) -> None:
        for t in self._threads:
            t.join(timeout=2)

    def close(self, timeout_s: float = 5.0) -> None:
        """Say ``bye`` and wait up to ``timeout_s`` s for a clean exit, then kill."""
        p = self._proc
        if p is None:
            return
        if p.poll() is None:
            try:
                self._send({"type": "bye"})
                assert p.stdin
                p.stdin.close()
                p.wait(timeout=timeout_s)
            except (OSError, subprocess.TimeoutExpired, WorkerError):
                pass
        self.kill()

    def __enter__(self) -> "WorkerClient":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.kill()

    # -- protocol ---------------------------------------------------------------------------

    def _send(self, message: Mapping[str, Any]) -> None:
        p = self._proc
        if p is None or p.stdin is None:
            raise WorkerError("worker not started")
        try:
            p.stdin.write(json.dumps(message) + "\n")
            p.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._crashed("the worker exited before reading the request") from None

    def _crashed(self, what: str) -> WorkerCrashed:
        p = self._proc
        rc = None
        if p is not None:
            try:
                rc = p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                p.kill()
        self._join_readers()
        tail = self.stderr_tail()
        status = _describe_exit(rc)
        last = tail.splitlines()[-1].strip() if tail else "no stderr output"
        return WorkerCrashed(f"{what} ({status}); stderr: {last}", rc, tail)

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            raise WorkerTimeout(f"the worker did not answer within {timeout_s:g} s and was killed",
                                timeout_s, self.stderr_tail()) from None
        if line is _EOF:
            raise self._crashed("the worker exited without answering")
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            self.kill()
            raise WorkerError(f"the worker wrote a line that is not JSON on stdout: {line[:120]!r}; "
                              "workers must write logs to stderr only") from None
        if not isinstance(msg, dict) or "type" not in msg:
            self.kill()
            raise WorkerError(f"the worker sent a message without a type: {line[:120]!r}")
        return msg

    def hello(self, detail: bool = False, timeout_s: float = HELLO_TIMEOUT_S) -> Hello:
        """Send ``hello``; return the worker's capabilities.

        Raises ProtocolMismatch if the worker refuses protocol 1, announces another version or
        lacks rules, limits or workload specs this cryptoperf reads (``WorkerRules.from_hello``:
        a worker older than the orchestrator).
        """
        request: dict[str, Any] = {"type": "hello", "protocol": PROTOCOL_VERSION}
        if detail:
            request["detail"] = True
        self._send(request)
        msg = self._receive(timeout_s)
        if msg["type"] == "error":
            if msg.get("code") == "protocol_mismatch":
                self.kill()
                raise ProtocolMismatch(
                    f"worker {self.path} refused protocol {PROTOCOL_VERSION}: {msg.get('message', '')}; "
                    "reinstall both with `pip install .`")
            raise WorkerRequestError(msg.get("code", "?"), f"worker refused hello: {msg.get('message', '')}")
        if msg["type"] != "hello":
            raise WorkerError(f"worker answered hello with a '{msg['type']}' message")
        if msg.get("protocol") != PROTOCOL_VERSION:
            self.kill()
            raise ProtocolMismatch(
                f"worker {self.path} speaks protocol {msg.get('protocol')}, this cryptoperf speaks "
                f"{PROTOCOL_VERSION}; reinstall both with `pip install .`")
        try:
            hello = Hello(protocol=msg["protocol"], worker_version=str(msg.get("worker_version", "?")),
                          cpu=msg.get("cpu", {}), backends=tuple(msg["backends"]),
                          ops=tuple(msg["ops"]), raw=msg, rules=WorkerRules.from_hello(msg))
        except (KeyError, TypeError) as e:
            raise WorkerError(f"worker hello lacks a required field: {e}") from None
        except ProtocolMismatch as e:
            self.kill()
            raise ProtocolMismatch(f"worker {self.path}: {e}") from None
        return hello

    def run(self, request: Mapping[str, Any], timeout_s: float) -> WorkerResult:
        """Send one ``run`` request; return its ``result`` message (status ok, unsupported or
        invalid), decoded once here (``result.decode``; the message as received is its
        ``raw``). ``timeout_s`` bounds the whole wait, in seconds.

        Raises WorkerTimeout (worker killed), WorkerCrashed (with the stderr tail),
        WorkerRequestError (an ``error`` answer: unknown backend/op, bad params) or
        UnreadableResult (a WorkerError: a result with a field of the wrong type).
        """
        self._send(request)
        msg = self._receive(timeout_s)
        if msg["type"] == "error":
            raise WorkerRequestError(msg.get("code", "?"), msg.get("message", "(no message)"))
        if msg["type"] != "result":
            raise WorkerError(f"worker answered run with a '{msg['type']}' message")
        if msg.get("id") != request.get("id"):
            raise WorkerError(f"worker answered run {request.get('id')!r} with id {msg.get('id')!r}")
        return decode(msg)

    def check(self, request: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send a ``check`` (a ``run`` request's fields, ``type`` check): whether the worker can
        run that combination at all, nothing measured. Returns the ``checked`` message
        (``status`` supported or unsupported, ``reason``). Raises as ``run``."""
        self._send({**request, "type": "check"})
        msg = self._receive(timeout_s)
        if msg["type"] == "error":
            raise WorkerRequestError(msg.get("code", "?"), msg.get("message", "(no message)"))
        if msg["type"] != "checked":
            raise WorkerError(f"worker answered check with a '{msg['type']}' message")
        return msg


def _describe_exit(rc: int | None) -> str:
    if rc is None:
        return "still running, killed"
    if rc < 0:
        import signal
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def unmasked_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without ``OPENSSL_ia32cap``: the
    environment of a worker asked for the libraries' own, unmasked capability vectors."""
    env = dict(os.environ if base is None else base)
    env.pop(MASK_ENV_VAR, None)
    return env


def fetch_hello(path: str | os.PathLike, detail: bool = False, timeout_s: float = HELLO_TIMEOUT_S) -> Hello:
    """Start a worker without any capability mask in its environment (so the vectors its
    hello reports are the unmasked ones), get its ``hello``, and close it. Raises WorkerError
    subclasses."""
    with WorkerClient(path, env=unmasked_env()) as w:
        return w.hello(detail=detail, timeout_s=timeout_s)
