"""The kernel's sampling profiler (``perf``), as ``explain`` uses it: whether it can run here,
a worker command wrapped in ``perf record -e cpu-clock``, and the samples per function read
back with ``perf report``.

``cpu-clock`` is the kernel's software CPU clock: it samples where a process is on a CPU at a
fixed frequency, and works in virtual machines without a hardware PMU. A sample is attributed
to its function where the symbol is known (the worker's own and its statically linked
libraries; a shared library's exported symbols) and otherwise to its library (``libcrypto.so.3
(unresolved)``); the kernel's samples are the kernel's.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
from collections import Counter
from pathlib import Path

from cryptoperf.errors import CryptoperfError

#: Samples per second per CPU (a prime, so that it does not beat with periodic work).
FREQUENCY_HZ = 4999
#: How perf records each sample's call chain (for the flame graph): ``dwarf`` copies the top of
#: the stack with every sample and unwinds it afterwards from the binaries' unwind tables, which
#: works through code built without frame pointers (Rust, the libraries' assembly) where ``fp``
#: stops; bytes copied per sample.
CALL_GRAPH = "dwarf,16384"
#: Environment variable that replaces CALL_GRAPH (``none``: no call chains, no flame graph).
CALL_GRAPH_ENV = "CRYPTOPERF_PERF_CALL_GRAPH"


def call_graph() -> str:
    """perf record's call-chain option (``--call-graph MODE `` or nothing), from CALL_GRAPH_ENV or
    CALL_GRAPH."""
    mode = os.environ.get(CALL_GRAPH_ENV, CALL_GRAPH)
    return "" if mode == "none" else f"--call-graph {shlex.quote(mode)} "
#: What to install where perf is missing.
INSTALL = "Debian: apt-get install linux-perf; Ubuntu: apt-get install linux-tools-generic"


class PerfUnavailable(CryptoperfError):
    """perf is missing or refused here (one line saying how to allow it)."""


def unavailable(perf: str | None = None) -> str | None:
    """Why ``perf record -e cpu-clock`` cannot sample a child process here, or None when it
    can: not installed, or refused (``kernel.perf_event_paranoid`` above 2 for a non-root user,
    a container without the perf_event_open system call), with how to allow it."""
    perf = perf or shutil.which("perf")
    if perf is None:
        return f"perf is not installed ({INSTALL})"
    try:
        paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        paranoid = None
    try:
        res = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-o", "/dev/null", "--", "true"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"perf could not run: {e}"
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["(no output)"])[-1].strip()
        allow = ("allow it with `sysctl kernel.perf_event_paranoid=2` (or run as root)"
                 if paranoid is not None and paranoid > 2 and os.geteuid() != 0
                 else "a container needs the perf_event_open system call allowed (e.g. docker --privileged "
                      "or a seccomp profile that permits it)")
        return f"perf is refused here ({last}); {allow}"
    return None


#: The environment variables naming the FIFOs through which the worker enables and disables
#: perf's events at its window's edges (the worker's measure::profile).
CTL_ENV, ACK_ENV = "CRYPTOPERF_PROFILE_CTL", "CRYPTOPERF_PROFILE_ACK"


def wrapper(directory: Path, worker: str | os.PathLike, out_env: str = "CRYPTOPERF_PERF_OUT",
            perf: str | None = None, exports: "dict[str, str] | None" = None) -> Path:
    """An executable ``directory/worker-under-perf`` that runs ``worker`` with its arguments
    under ``perf record -e cpu-clock`` at ``FREQUENCY_HZ``, writing the samples to the file
    the environment variable ``out_env`` names, its events disabled until the worker enables
    them at its window's start through the FIFOs ``CTL_ENV`` and ``ACK_ENV`` name (set all
    three per process: ``control_fifos``); ``exports`` are set for the worker first (what the
    orchestrator gives a worker build by its binary's identity, which the wrapper hides: the
    FIPS build's provider). Returns its path."""
    perf = perf or shutil.which("perf") or "perf"
    path = directory / "worker-under-perf"
    env = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (exports or {}).items())
    path.write_text(f'#!/bin/sh\n{env}exec {shlex.quote(perf)} record -q -e cpu-clock -F {FREQUENCY_HZ} -D -1 {call_graph()}'
                    f'--control "fifo:${CTL_ENV},${ACK_ENV}" '
                    f'-o "${out_env}" -- {shlex.quote(str(worker))} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def control_fifos(directory: Path, name: str) -> dict[str, str]:
    """Two new FIFOs in ``directory`` for one profiled process, as the environment the wrapper
    and the worker read (``CTL_ENV``, ``ACK_ENV``)."""
    ctl, ack = directory / f"{name}.ctl", directory / f"{name}.ack"
    for p in (ctl, ack):
        p.unlink(missing_ok=True)
        os.mkfifo(p, 0o600)
    return {CTL_ENV: str(ctl), ACK_ENV: str(ack)}


def script(data: Path, perf: str | None = None) -> str:
    """``perf script``'s text of the perf data file ``data`` (each sample a header line and its
    call chain, leaf first). Raises PerfUnavailable (one line) when perf script fails."""
    perf = perf or shutil.which("perf") or "perf"
    try:
        # --no-inline: frames are the functions the code is in (an inlined callee's name would
        # come from the debug line tables, slowly, and only where they exist)
        res = subprocess.run([perf, "script", "--no-inline", "-i", str(data)], capture_output=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise PerfUnavailable(f"perf script could not read {data} in 600 s") from None
    if res.returncode != 0:
        last = (res.stderr.decode(errors="replace").strip().splitlines() or ["(no output)"])[-1].strip()
        raise PerfUnavailable(f"perf script could not read {data}: {last}")
    return res.stdout.decode(errors="replace")


#: A frame of perf script's text: address, symbol (with +offset) or [unknown], (library).
_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
_HEADER_FRAME = re.compile(r"cpu-clock:?\s+([0-9a-f]+\s+.*\(.*\))\s*$")


def _frame(text: str) -> tuple[str | None, str] | None:
    """(symbol or None when unresolved, library) of one frame's text."""
    m = _FRAME.match(text)
    if m is None:
        return None
    sym, dso = m.group(1), m.group(2)
    dso = os.path.basename(dso) if dso.startswith("/") else "kernel" if dso == "[kernel.kallsyms]" else dso
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
    return (None if sym in ("[unknown]", "") or sym.startswith("0x") else sym), dso


def function_of(frames: list[tuple[str | None, str]]) -> str:
    """The function a sample is attributed to, from its call chain ``frames`` (leaf first):
    ``"symbol (library)"`` for a known leaf; for a leaf without a symbol (a stripped library's
    internal code), its library and the nearest caller with a symbol in that library —
    ``"libcrypto.so.3 (unresolved, under BN_mod_exp_mont_consttime)"`` — or
    ``"libcrypto.so.3 (unresolved)"`` when no caller says more."""
    sym, dso = frames[0]
    if sym is not None:
        return f"{sym} ({dso})"
    for caller, caller_dso in frames[1:]:
        if caller_dso != dso:
            break
        if caller is not None:
            return f"{dso} (unresolved, under {caller})"
    return f"{dso} (unresolved)"


def parse_script(text: str) -> Counter:
    """``perf script`` text → samples per function (``function_of`` each sample's chain)."""
    out: Counter = Counter()
    frames: list[tuple[str | None, str]] = []

    def flush() -> None:
        if frames:
            out[function_of(frames)] += 1
            frames.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
        elif line.startswith("\t"):
            f = _frame(line)
            if f is not None and f[1] != "inlined":
                frames.append(f)
        else:  # a sample's header; without call chains its one frame is on it
            flush()
            m = _HEADER_FRAME.search(line)
            f = _frame(m.group(1)) if m else None
            if f is not None:
                frames.append(f)
    flush()
    return out
