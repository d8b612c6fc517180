"""The errors cryptoperf raises on purpose.

Every message is one line that says what went wrong, where (file, line, field where there is
one) and how to fix it. Only ``cli/app.py`` turns these into exit codes: ``exit_code`` is 2 for
errors in what the user typed or wrote (usage, study files) and 1 for everything else.
"""

from __future__ import annotations

import difflib
import unicodedata
from typing import Iterable

#: Longest message a StudyError carries: a value of megabytes is elided, never echoed whole.
MAX_MESSAGE = 1000


def _escaped(text: str) -> str:
    """``text`` with every character that would break or hide a line escaped: control and
    format characters (newlines, ESC, bidirectional overrides, ...), surrogates, private-use and
    unassigned code points, and the Unicode line and paragraph separators."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] != "C" and cat not in ("Zl", "Zp"):
            out.append(ch)
        elif ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` as one printable line of at most ``limit`` characters (``limit`` >= 100):
    every character that would break or hide the line written as its escape (``\\n``,
    ``\\x1b``, ``\\u2028``), and the middle of a longer text replaced by ``…(N characters)…``
    (N counted in ``text``), so that a message quoting a value of a study file stays one
    bounded line whatever the value holds. Takes time in proportion to ``limit``, not to
    ``text``."""
    if len(text) <= limit:
        line = _escaped(text)
        if len(line) <= limit:
            return line
    head_n = (limit - 40) * 2 // 3
    tail_n = limit - 40 - head_n
    head = _escaped(text[:head_n])[:head_n]
    tail = _escaped(text[len(text) - tail_n:])[-tail_n:]
    return f"{head}…({len(text) - head_n - tail_n} characters)…{tail}"


#: Longest word or candidate ``closest`` compares: no misspelling is that long, and difflib's time
#: grows with the length (a study file's key of megabytes must not take minutes).
SUGGEST_MAX_CHARS = 64


def closest(word: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest in spelling to ``word`` (``difflib.get_close_matches``, at least
    ``cutoff`` alike), or None; words and candidates longer than ``SUGGEST_MAX_CHARS`` are left
    out."""
    if len(word) > SUGGEST_MAX_CHARS:
        return None
    close = difflib.get_close_matches(word, [c for c in candidates if len(c) <= SUGGEST_MAX_CHARS], n=1,
                                      cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the candidate ``closest`` to ``word``, or '': the suggestion
    every "unknown ..." message of cryptoperf ends with."""
    close = closest(word, candidates)
    return f"; did you mean '{close}'?" if close else ""


class CryptoperfError(Exception):
    """Base of every error cryptoperf raises on purpose; ``str(err)`` is the one-line message."""

    exit_code = 1


class UsageError(CryptoperfError):
    """A command-line argument is wrong (unknown backend or operation, value out of range)."""

    exit_code = 2


class StudyError(CryptoperfError):
    """A study file is malformed or inconsistent.

    Attributes:
        path: the study file as given.
        line: 1-based line of the offending key or table, or None when unknown.
        field: what is wrong, e.g. ``configuration 'x', field 'rsa_bits'``, or None.
        problem: the message without the location.
    """

    exit_code = 2

    def __init__(self, path: str, line: int | None, field: str | None, problem: str):
        self.path, self.line, self.field, self.problem = str(path), line, field, problem
        where = self.path if line is None else f"{self.path}:{line}"
        # one bounded line whatever the file holds (a key with a newline, a value of megabytes)
        super().__init__(one_line(f"{where}: {field}: {problem}" if field else f"{where}: {problem}"))


class WorkerError(CryptoperfError):
    """The worker binary is missing, speaks another protocol, or misbehaved."""


class WorkerNotFound(WorkerError):
    """No ``cryptoperf-worker`` binary was found (see ``builds.find_worker``)."""


class ProtocolMismatch(WorkerError):
    """The worker does not speak this orchestrator's protocol version."""


class WorkerCrashed(WorkerError):
    """The worker exited before answering.

    Attributes:
        returncode: the exit status (negative: killed by that signal), or None.
        stderr_tail: the last lines the worker wrote to stderr ('' if none).
    """

    def __init__(self, message: str, returncode: int | None = None, stderr_tail: str = ""):
        super().__init__(message)
        self.returncode, self.stderr_tail = returncode, stderr_tail


class WorkerTimeout(WorkerError):
    """The worker did not answer within the timeout and was killed.

    Attributes:
        timeout_s: the timeout that expired, in seconds.
        stderr_tail: the last lines the worker wrote to stderr ('' if none).
    """

    def __init__(self, message: str, timeout_s: float, stderr_tail: str = ""):
        super().__init__(message)
        self.timeout_s, self.stderr_tail = timeout_s, stderr_tail


class WorkerRequestError(WorkerError):
    """The worker answered a request with ``{"type":"error"}``.

    Attributes:
        code: the protocol's error code (``unknown_backend``, ``unknown_op``, ``bad_params``, ...).
    """

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class DeviceUnavailable(WorkerRequestError):
    """The worker could not reach a backend's device (``device_unavailable``: a PKCS#11 module
    that is not configured or does not load, a token not found, a wrong or locked PIN). Fatal
    for the study: it stops at the first such answer instead of trying the PIN again, keeping
    what was measured. The message never holds the PIN."""


class StoreError(CryptoperfError):
    """The store (a SQLite file or a PostgreSQL database) or the JSON output cannot be reached,
    opened or written; the message names the store with any password masked."""


class NoSuchRun(StoreError, UsageError):
    """The run id the user gave is not a number, not ``latest``, or not in the store: a store
    error (``except StoreError`` catches it) with a usage error's exit code, 2."""


class WorkDirError(CryptoperfError):
    """The work directory of a file workload cannot hold a repetition's private directory: it
    became a symbolic link or something other than a directory after the up-front check, or the
    directory cannot be made there. The message names the directory."""


class EconomicsError(UsageError):
    """The figures given to ``cryptoperf plan`` allow no answer: a negative or zero number where
    a positive one is needed, an operation the run does not have, or an accelerator that never
    pays for itself at its price and capacity."""


class NoComparison(CryptoperfError):
    """A study that ran but could compare nothing (every configuration but the baseline
    unsupported, invalid or failed where the baseline ran): its results are stored, but it
    answers no question, so it does not end as a success."""


class MissingDependency(CryptoperfError, ImportError):
    """An optional dependency is not installed (e.g. pandas for ``cryptoperf.load``); the
    message names the ``pip install`` that fixes it."""


class RayError(CryptoperfError):
    """The Ray executor (``--executor ray``) cannot run the study: Ray is not installed, the
    cluster at ``--address`` cannot be reached or refuses the connection, no node of the
    cluster can run a block, or a block's task failed in a way no retry can help. The message
    names the address or the node."""


class RayNotInstalled(RayError):
    """``--executor ray`` without Ray installed; the message names the ``pip install`` that
    fixes it."""


class NodeMismatch(RayError):
    """A Ray node runs another cryptoperf or worker version than the driver (or has no
    worker): refused, with the node's address, host name and versions in the message."""


class SetupError(CryptoperfError):
    """``cryptoperf setup`` (or a study's first-use build) cannot make a worker build: cargo is
    missing, the build failed (the message gives cargo's last error line and where its full
    output is), or the built worker does not report the library it should."""


class StudyInterrupted(KeyboardInterrupt):
    """A study stopped by Ctrl-C (or SIGTERM) while measuring: every repetition it finished is
    in the store under ``run_id``, and ``cryptoperf study FILE --resume RUN_ID`` continues it.
    A KeyboardInterrupt, so that code catching Ctrl-C catches it too."""

    def __init__(self, run_id: int, path: str, store: str):
        self.run_id, self.path, self.store = run_id, path, store
        super().__init__(f"interrupted; the repetitions finished so far are in store {store} as run "
                         f"{run_id}: `cryptoperf study {path} --resume {run_id}` continues it")


class PreflightError(UsageError):
    """A study that this host cannot run to the end, found before its first repetition
    (``preflight.check``): the output directory or the store cannot be written, too little
    disk or memory for what the study needs. The message names the figure needed and the
    figure available; exit code 2."""
