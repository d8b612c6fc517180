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
from pathlib import Path
from typing import Any, Mapping

from cryptoperf import PROTOCOL_VERSION, providerbuild
from cryptoperf.cpumask import ENV_VAR as MASK_ENV_VAR
from cryptoperf.errors import (DeviceUnavailable, ProtocolMismatch, WorkerCrashed, WorkerError, WorkerRequestError,
                               WorkerTimeout)
from cryptoperf.result import WorkerResult, decode
from cryptoperf.hello import Hello, WorkerRules

STDERR_TAIL_LINES = 20
HELLO_TIMEOUT_S = 60.0
_EOF = object()


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
            raise request_error(msg)
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
            raise request_error(msg)
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


def request_error(msg: dict) -> WorkerRequestError:
    """The exception for the worker's ``error`` answer ``msg``: ``DeviceUnavailable`` for
    ``device_unavailable``, else ``WorkerRequestError`` with its code."""
    code, message = msg.get("code", "?"), msg.get("message", "(no message)")
    return (DeviceUnavailable if code == "device_unavailable" else WorkerRequestError)(code, message)


def fetch_hello(path: str | os.PathLike, detail: bool = False, timeout_s: float = HELLO_TIMEOUT_S,
                env: Mapping[str, str] | None = None) -> Hello:
    """Start a worker without any capability mask in its environment (so the vectors its
    hello reports are the unmasked ones), with ``env`` on top of this process's (a device's
    token, for ``detail``'s support table), get its ``hello``, and close it. Raises WorkerError
    subclasses."""
    with WorkerClient(path, env={**unmasked_env(), **(env or {})}) as w:
        return w.hello(detail=detail, timeout_s=timeout_s)
