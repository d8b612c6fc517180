"""Load levels: the grammar a study writes them in, and what a level needs from the host.

A workload (a TLS handshake, a transfer, an IKE phase 1, file I/O, a fleet job) is measured at
**load levels**, written as the worker reads them (docs/worker-protocol.md, "Workloads"); which
kinds of level a workload accepts, and the limits on each, are the worker's (its ``hello``:
``WorkerRules.workloads[op].levels`` and ``WorkerRules.limits``):

- ``closed:N`` — N client connections, each starting its next transaction when its last one
  ended (a closed loop);
- ``closed:N@RATE`` — the same, paced to RATE transactions per second overall, latency timed
  from each transaction's actual start: what most load generators do, and it hides stalls
  (coordinated omission);
- ``open:RATE`` or ``open:RATE/THREADS`` — transactions due at RATE per second whatever happened
  before, latency measured from when each was due (corrected for coordinated omission, as wrk2
  does), taken by THREADS client threads (default: the worker's ``open_threads``);
- ``open:LOW..HIGH`` — a rate sweep: the open levels LOW, 2·LOW, 4·LOW, … up to HIGH
  (``expand_loads``), for finding the highest rate whose p99 stays under a bound;
- ``open:100MB/s`` (or ``open:100MB/s/THREADS``) — an open level given as a byte rate, for a
  workload whose spec accepts ``open_bytes`` levels: the offered transactions per second are the
  rate over the bytes of one transaction (the spec's ``bytes_per_tx_param``, an I/O's size),
  worked out when the request is made (``worker_load``). The CPU such a level needs is what
  capacity planning asks ("what does it cost to sustain 100 MB/s?");
- ``targets:N`` — a job over N targets, for a job workload (its spec says ``job``): a fixed
  amount of work rather than a time window; its throughput is targets per minute and its
  concurrency the job's own (``cap`` targets in flight per slice, ``slices`` slices).

Each level is its own row: the cell's label is the operation's label with the level
(``full handshake @ c=10``, ``@ 500/s``), so verdicts compare configurations at each level.

A level's connections each hold a file descriptor: ``descriptor_problem`` and
``job_descriptor_problem`` say, before anything runs, when ``ulimit -n`` is too low for one.
"""

from __future__ import annotations

import dataclasses
import math
import re
import resource
from dataclasses import dataclass
from typing import Mapping


#: The level of a workload operation that gives none (and whose worker announces no default).
DEFAULT_LOAD = "closed:1"
SYNTAX = ("closed:N, closed:N@RATE, open:RATE or open:RATE/THREADS (N, THREADS at least 1, at most the "
          "worker's max_concurrency; RATE per second), a byte rate open:100MB/s for a workload that takes "
          "one, or targets:N for a job")
_NUM = r"(\d+(?:\.\d+)?)"
_CLOSED = re.compile(r"^closed:(\d+)(?:@" + _NUM + r")?$")
_OPEN = re.compile(r"^open:" + _NUM + r"(?:/(\d+))?$")
#: A byte rate: ``open:100MB/s``, ``open:1.5GB/s/8``, ``open:200MiB/s`` (decimal MB = 10⁶ B, as
#: MB/s is printed everywhere in cryptoperf; MiB = 2²⁰ B).
_TARGETS = re.compile(r"^targets:(\d+)$")
_OPEN_BYTES = re.compile(r"^open:" + _NUM + r"\s*(KB|MB|GB|KiB|MiB|GiB)/s(?:/(\d+))?$", re.IGNORECASE)
_BYTE_UNITS = {"kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30}
#: File descriptors a process keeps beside its connections (stdio, pipes, the listener, the
#: libraries' files), counted generously.
FD_RESERVE = 64


@dataclass(frozen=True)
class Load:
    """A parsed load level.

    Attributes:
        text: as written (``closed:10``).
        kind: ``closed``, ``open`` or ``targets``.
        connections: client threads, each holding one connection at a time; None for an open
            level that names no thread count, parsed without the worker's limits (it runs the
            worker's ``open_threads``).
        rate_per_s: the pace (closed) or arrival rate (open) in transactions per second; None
            for an unpaced closed loop and for a byte-rate level (its transactions per second
            depend on the I/O size: ``per_s``).
        bytes_per_s: an open level given as a byte rate (``open:100MB/s``), else None.
        targets: a job level's targets (``targets:N``, kind ``targets``), else None; such a
            level's ``connections`` is 1 (a job's concurrency is its cap and slices).
    """

    text: str
    kind: str
    connections: int | None
    rate_per_s: float | None
    bytes_per_s: float | None = None
    targets: int | None = None

    @property
    def level_kind(self) -> str:
        """The kind of level a workload's spec must accept for it (``WorkloadSpec.levels``):
        ``closed``, ``open``, ``open_bytes`` (a byte rate) or ``targets``."""
        return "open_bytes" if self.bytes_per_s is not None else self.kind

    @property
    def label(self) -> str:
        """Short text for a row label: ``c=10``, ``c=1 @ 200/s`` (paced), ``500/s`` (open),
        ``100 MB/s`` (a byte rate), ``1000 targets`` (a job)."""
        if self.targets is not None:
            return f"{self.targets} target{'s' if self.targets != 1 else ''}"
        if self.bytes_per_s is not None:
            return f"{self.bytes_per_s / 1e6:g} MB/s"
        rate = None if self.rate_per_s is None else f"{self.rate_per_s:g}/s"
        if self.kind == "open":
            return rate or ""
        return f"c={self.connections}" + (f" paced {rate}" if rate else "")

    @property
    def level(self) -> float:
        """The number a throughput-vs-load plot puts on its x axis: connections for a closed
        loop, the rate for an open one (bytes per second for a byte rate), the targets of a job."""
        if self.targets is not None:
            return float(self.targets)
        if self.kind == "closed":
            return float(self.connections)
        return float(self.bytes_per_s if self.bytes_per_s is not None else self.rate_per_s or 0.0)

    def per_s(self, bytes_per_tx: int | None) -> float | None:
        """Transactions per second this level offers (paced or open), or None (an unpaced
        closed loop): a byte rate divided by ``bytes_per_tx``. Raises ValueError for a byte
        rate without a positive ``bytes_per_tx``."""
        if self.bytes_per_s is None:
            return self.rate_per_s
        if not bytes_per_tx or bytes_per_tx <= 0:
            raise ValueError(f"load '{self.text}' is a byte rate; it needs the bytes per transaction")
        return self.bytes_per_s / bytes_per_tx


def parse_load(text: str, limits: Mapping[str, float] | None = None) -> Load:
    """Parse a load level. With the worker's ``limits`` (``WorkerRules.limits``), also check
    its counts against them (``max_concurrency``, ``max_targets``) and give an open level
    without a thread count the worker's ``open_threads``; without them, check the syntax only
    (what a study file alone can tell).

    Raises ValueError with one line naming the syntax (also for a number too large to be a
    count or a finite rate), or the limit a count is above."""
    t = text.strip()
    if len(t) > 200:  # no level is that long; and int() refuses 4300 digits
        raise ValueError(f"load '{t[:40]}…' ({len(t)} characters) is not one of {SYNTAX}")
    load = _parse(t)
    if load is None:
        raise ValueError(f"load '{text}' is not one of {SYNTAX}")
    if limits is None:
        return load
    if load.connections is None:
        load = dataclasses.replace(load, connections=int(limits["open_threads"]))
    for count, what, limit in ((load.connections, "connections (or threads)", "max_concurrency"),
                               (load.targets, "targets", "max_targets")):
        if count is not None and count > limits[limit]:
            raise ValueError(f"load '{t}' asks for {count} {what}, above the worker's limit of "
                             f"{limits[limit]:.0f} ({limit} in its hello)")
    return load


def _parse(t: str) -> Load | None:
    """``t`` (stripped) as a Load, its counts at least 1 and its rate positive and finite; None
    when it is none of the syntaxes."""
    m = _CLOSED.match(t)
    if m:
        n = int(m.group(1))
        rate = float(m.group(2)) if m.group(2) else None
        if n >= 1 and (rate is None or 0 < rate < math.inf):
            return Load(t, "closed", n, rate)
    m = _OPEN.match(t)
    if m:
        rate = float(m.group(1))
        threads = int(m.group(2)) if m.group(2) else None
        if 0 < rate < math.inf and (threads is None or threads >= 1):
            return Load(t, "open", threads, rate)
    m = _TARGETS.match(t)
    if m and int(m.group(1)) >= 1:
        return Load(t, "targets", 1, None, targets=int(m.group(1)))
    m = _OPEN_BYTES.match(t)
    if m:
        rate = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
        threads = int(m.group(3)) if m.group(3) else None
        if 0 < rate < math.inf and (threads is None or threads >= 1):
            return Load(t, "open", threads, None, rate)
    return None


def worker_load(text: str, bytes_per_tx: int | None) -> str:
    """The level as the worker reads it: ``text`` itself, or for a byte rate the open level
    of its transactions per second, with its thread count if it names one (``open:100MB/s/16``
    with 64 KiB I/Os → ``open:1525.88/16``; without one the worker's ``open_threads`` take it).
    Raises ValueError (one line) for a byte rate without ``bytes_per_tx``."""
    load = parse_load(text)
    if load.bytes_per_s is None:
        return text
    threads = "" if load.connections is None else f"/{load.connections}"
    return f"open:{load.per_s(bytes_per_tx):.6g}{threads}"


_SWEEP = re.compile(r"^open:" + _NUM + r"\.\." + _NUM + r"(?:/(\d+))?$")
#: Most levels one sweep may expand to.
MAX_SWEEP_LEVELS = 16


def expand_loads(texts: list[str] | tuple[str, ...]) -> list[str]:
    """The load levels a study's ``loads`` list stands for: each level as written, and each
    rate sweep ``open:LOW..HIGH`` (or ``open:LOW..HIGH/THREADS``) as the open levels LOW, 2·LOW,
    4·LOW, … up to HIGH (HIGH itself included), so a report can name the highest rate whose p99
    stays under a bound. Raises ValueError (one line) for a malformed sweep or one of more than
    ``MAX_SWEEP_LEVELS`` levels."""
    out: list[str] = []
    for text in texts:
        m = _SWEEP.match(text.strip())
        if not m:
            out.append(text)
            continue
        low, high = float(m.group(1)), float(m.group(2))
        suffix = f"/{m.group(3)}" if m.group(3) else ""
        if not 0 < low < high < math.inf:
            raise ValueError(f"rate sweep '{text.strip()[:60]}' needs 0 < LOW < HIGH (finite rates)")
        rates = []
        r = low
        while r < high and len(rates) <= MAX_SWEEP_LEVELS:
            rates.append(r)
            r *= 2
        rates.append(high)
        if len(rates) > MAX_SWEEP_LEVELS:
            raise ValueError(f"rate sweep '{text}' doubles into {len(rates)} levels; at most "
                             f"{MAX_SWEEP_LEVELS}: narrow it")
        out += [f"open:{x:g}{suffix}" for x in rates]
    return out


def row_label(label: str, load: str | None, threads: int | None = None) -> str:
    """A cell's row label: the operation's label, with the load level when there is one
    (``full handshake @ c=10``), else with a primitive's own thread count when it has one
    (``sign @ 2 threads``)."""
    if load is not None:
        return f"{label} @ {parse_load(load).label}"
    return label if threads is None else f"{label} @ {threads} thread{'s' if threads != 1 else ''}"


def job_descriptor_problem(values: Mapping[str, int]) -> str | None:
    """Why this host cannot run a job whose connection parameters (``WorkloadSpec.
    connection_params``) have ``values`` (name → whole number, e.g. ``{"cap": 20, "slices":
    2}``), or None: one process of the job may hold their product in connections, each beside
    ``FD_RESERVE`` descriptors; the soft RLIMIT_NOFILE must cover that. The number of targets
    does not enter: a finished target's connection is closed."""
    connections = math.prod(values.values())
    need = connections + FD_RESERVE
    soft = _limit_below(need)
    if soft is not None:
        given = " and ".join(f"{k} = {v}" for k, v in values.items())
        return (f"a job with {given} needs about {need} file descriptors in an agent process ({connections} "
                f"connections + {FD_RESERVE}), but the limit is {soft} (ulimit -n); raise it or lower "
                f"{next(iter(values), 'its concurrency')}")
    return None


def descriptor_problem(load: Load, mode: str) -> str | None:
    """Why this host cannot serve the level, or None: in socket mode each connection holds a
    descriptor in the client process and one in the server process, beside ``FD_RESERVE``;
    the soft RLIMIT_NOFILE must cover that. (A job level's descriptors depend on its cap and
    slices instead: ``job_descriptor_problem``.) ``load`` is parsed with the worker's limits
    (its connections known)."""
    if mode != "socket" or load.targets is not None:
        return None
    need = load.connections + FD_RESERVE
    soft = _limit_below(need)
    if soft is not None:
        return (f"load '{load.text}' needs about {need} file descriptors per process "
                f"({load.connections} connections + {FD_RESERVE}), but the limit is {soft} "
                f"(ulimit -n); raise it or use fewer connections")
    return None


def _limit_below(need: int) -> int | None:
    """The soft RLIMIT_NOFILE (``ulimit -n``) when it is below ``need`` descriptors, else None."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY and need > soft else None
