"""``cryptoperf plan`` on a stored run: pick the cells a question names, read their CPU per
operation (for a workload, one side's CPU per transaction: ``sides``), and answer with a typed
``PlanResult`` — (a) cores at a rate, (b) the cost of a change of configuration, (c) an
accelerator's break-even — which ``report/economics.py`` renders in every format.

Errors: ``EconomicsError`` (exit 2 from the CLI) for a question the run cannot answer: an
operation, configuration, backend, size or side it lacks, an ambiguous choice, a cell without
enough measured repetitions, a remainder from another host.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from cryptoperf import compare, levels, opnames, stats
from cryptoperf.economics.accelerator import Accelerator, Offload, offload
from cryptoperf.economics.cost import (Change, CoresAtRate, change, check_number, cores_at_rate, cpu_cost,
                                       parse_rate)
from cryptoperf.economics.request import (Remainder, RequestCpu, parse_request, remainder, request_change,
                                          request_cpu, request_text, with_remainder)
from cryptoperf.economics.sides import SIDE_TEXT, WORKLOAD_SIDES, cell_sides, default_side, side_samples
from cryptoperf.errors import EconomicsError
from cryptoperf.model import CellSummary
from cryptoperf.store.stored_run import StoredRun

#: What every answer of ``cryptoperf plan`` ends with, in every format: what its intervals do
#: not cover.
CAVEAT = ("The intervals cover the variation between repetitions on the measured host only: not "
          "other hosts or CPU generations, not the mix of full and resumed handshakes, not the rest "
          "of the stack (network, TLS record layer, application), and not queueing at high utilisation.")

#: What a composite request without ``--remainder-from`` says, in every format.
REMAINDER_LEFT_OUT = (
    "The non-crypto remainder is left out: these are the request's cryptographic operations only. "
    "A real handshake also costs its connection, the kernel's socket work, the record layer and the "
    "library's bookkeeping — on a TLS server often more than the primitives; add it, measured, with "
    "--remainder-from RUN --remainder-op CELL (a workload run on the same host).")

#: Host properties that must agree for a remainder (a workload minus primitives) to mean anything.
SAME_HOST = ("CPU model", "crypto flags", "logical CPUs", "machine", "kernel", "hypervisor", "hostname")


# --------------------------------------------------------------------------- the cells of a question

def find_cells(run: StoredRun, op: str, configuration: str | None = None, backend: str | None = None,
               size_bytes: int | None = None, flag: str = "--op") -> list[CellSummary]:
    """The cells of ``run`` whose operation or label is ``op`` (or whose operation ``op``
    names in another spelling: ``opnames.canonical_op``), narrowed by the other arguments
    (None: any), in the run's order. ``flag`` is the option ``op`` came from, for the messages.

    Raises EconomicsError when the run has no such operation, or nothing is left after
    narrowing (naming what the run has).
    """
    cells = list(run.summaries.values())
    if not cells:
        raise EconomicsError(f"run {run.id} has no results")
    chosen = [s for s in cells if op in (s.cell.op, s.cell.label)]
    if not chosen:  # another spelling of an operation of the run: ECDSA-P256-sign, SHA-256
        known = sorted({s.cell.op for s in cells})
        spelt = opnames.canonical_op(op, known)
        chosen = [s for s in cells if s.cell.op == spelt]
    if not chosen:
        ops = sorted({s.cell.op for s in cells} | {s.cell.label for s in cells})
        fix = "pick one with --op" if flag == "--op" else f"use those names in {flag}"
        raise EconomicsError(f"run {run.id} has no operation '{op}' (it has: {', '.join(ops)}); {fix}")
    for what, want, get in (("configuration", configuration, lambda s: s.cell.configuration),
                            ("backend", backend, lambda s: s.cell.backend),
                            ("size", size_bytes, lambda s: s.cell.size_bytes)):
        if want is None:
            continue
        left = [s for s in chosen if get(s) == want]
        if not left:
            have = sorted({str(get(s)) for s in chosen})
            raise EconomicsError(f"run {run.id} has no '{op}' cell with {what} {want} "
                                 f"(it has: {', '.join(have)})")
        chosen = left
    return chosen


def _one(run: StoredRun, cells: list[CellSummary], op: str, flag: str = "--op") -> CellSummary:
    if len(cells) > 1:
        what = f"--op {op}" if flag == "--op" else f"'{op}' in --per-request"
        raise EconomicsError(
            f"{what} matches {len(cells)} cells of run {run.id} ({', '.join(s.cell.key for s in cells)}); "
            "choose one with --backend, --size or --configuration (or compare two with --from/--to)")
    return cells[0]


def _counterpart(run: StoredRun, first: CellSummary, to_config: str) -> CellSummary:
    """The cell of ``to_config`` with the same backend, label and size as ``first``."""
    other = next((s for s in run.summaries.values()
                  if s.cell.group == first.cell.group and s.cell.configuration == to_config), None)
    if other is None:
        raise EconomicsError(f"run {run.id} has no cell {first.cell.backend}/{first.cell.label}/"
                             f"{first.cell.size_bytes} in configuration '{to_config}'")
    return other


#: One configuration of a question: (name as typed, count, cell) per term (one term for --op).
Terms = list[tuple[str, float, CellSummary]]


def _pick(run: StoredRun, names: list[tuple[str, float]], flag: str, configuration: str | None,
          backend: str | None, size_bytes: int | None, to_config: str | None) -> list[Terms]:
    """The terms' cells, one list per configuration (the first, then --to's)."""
    found = {}
    for name, _ in names:
        cells = find_cells(run, name, configuration, backend, None, flag)
        # --size narrows the terms that take a message; in a request, others (x25519-keygen) keep theirs
        if size_bytes is not None and (flag == "--op" or any(s.cell.size_bytes is not None for s in cells)):
            cells = find_cells(run, name, configuration, backend, size_bytes, flag)
        found[name] = cells
    # in a request, the terms that match one cell fix the configuration and backend of the others
    # (ecdsa-p256-sign is measured in one configuration: its x25519-keygen is that one's)
    for attr in ("configuration", "backend"):
        fixed = {getattr(c[0].cell, attr) for c in found.values() if len(c) == 1}
        if len(fixed) == 1:
            value = next(iter(fixed))
            found = {n: [s for s in c if getattr(s.cell, attr) == value] or c if len(c) > 1 else c
                     for n, c in found.items()}
    configs: list[Terms] = [[], []] if to_config is not None else [[]]
    for name, count in names:
        first = _one(run, found[name], name, flag)
        picks = [first] if to_config is None else [first, _counterpart(run, first, to_config)]
        for terms, s in zip(configs, picks):
            same = next((i for i, (_, _, t) in enumerate(terms) if t.cell.key == s.cell.key), None)
            if same is None:
                terms.append((name, count, s))
            else:  # e.g. a label and its op: one cell, counts added
                terms[same] = (terms[same][0], terms[same][1] + count, s)
    return configs


def _samples(run: StoredRun, s: CellSummary, side: str) -> Mapping[int, float]:
    """Block → CPU ns per op (per transaction on ``side``) of ``s``, with enough repetitions
    for an interval, or EconomicsError."""
    samples = side_samples(run, s, side)
    if not samples:
        why = f" ({s.status}: {s.reason})" if s.status != "ok" else ""
        raise EconomicsError(f"cell {s.cell.key} of run {run.id} has no measured repetition{why}")
    if len(samples) < stats.MIN_BLOCKS:
        n = len(samples)
        raise EconomicsError(
            f"run {run.id} has {n} measured repetition{'s' if n != 1 else ''} of {s.cell.key} "
            f"({s.cell.op}); a cost to plan with needs an interval, which needs "
            f"{stats.MIN_BLOCKS}: plan on a study run, or on `cryptoperf speed --repetitions "
            f"{stats.MIN_BLOCKS}`")
    return samples


def _side(run: StoredRun, cells: Sequence[CellSummary], asked: str | None) -> str:
    """The side to price for ``cells`` (one question's cells of one kind): ``asked`` if every
    cell measured it, else the cells' default; EconomicsError naming what a cell has."""
    for s in cells:
        sides = cell_sides(run, s)
        if asked is None and sides == ("client",):
            raise EconomicsError(f"{s.cell.key} of run {run.id} did not measure its server's CPU (an "
                                 "external server): give --side client to price the client's")
        if asked is not None and asked not in sides:
            if sides == ("process",):
                raise EconomicsError(
                    f"{s.cell.key} of run {run.id} has no server side (its only CPU figure is the worker's); "
                    "--side is for workloads that run a server")
            raise EconomicsError(f"{s.cell.key} of run {run.id} measured {', '.join(sides)} CPU, not {asked}")
    return asked or default_side(cell_sides(run, cells[0]))


# --------------------------------------------------------------------------- the answer

@dataclass(frozen=True)
class PlanResult:
    """The answer of ``cryptoperf plan``, rendered by ``report/economics.py``.

    Attributes:
        run_id, rate_per_s: what was asked; ``rate_per_s`` is operations (transactions) per
            second for ``op``, requests per second for ``request``.
        op: the operation (or label) asked with --op, or None for a composite request.
        side: whose CPU is priced (``sides.SIDES``): ``server``, ``client`` or ``both`` for a
            workload with a server side, ``process`` (the worker's) otherwise and for the terms
            of a composite request.
        cells: the cell(s) used, as ``Cell.as_dict``: for --op one, or two with --from/--to
            (before, after); for a request every term's cell, configuration after configuration.
        cores: (a) cores at the rate, one per configuration (one, or before and after); for a
            request with a remainder, of the primitives plus the remainder.
        change: (b) the change from the first configuration to the second, or None.
        offload: (c) one per cell when an accelerator was described (never for a request).
        core_price_per_year: the price of a core, or None.
        request: the composite request as ``request_text`` writes it, or None.
        requests: for a composite request, its primitives' CPU per configuration.
        remainder: the measured non-crypto remainder added to a request, or None (for a request:
            left out, and ``remainder_note`` says so).
        options: the narrowing asked (configuration, backend, size_bytes, from_config,
            to_config, side; None when not given), to write the question back.
        level: confidence level of the intervals.
    """

    run_id: int
    op: str | None
    rate_per_s: float
    side: str
    cells: tuple[dict[str, Any], ...]
    cores: tuple[CoresAtRate, ...]
    change: Change | None = None
    offload: tuple[Offload, ...] = ()
    core_price_per_year: float | None = None
    request: str | None = None
    requests: tuple[RequestCpu, ...] = ()
    remainder: Remainder | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    level: float = stats.DEFAULT_LEVEL

    @property
    def per(self) -> str:
        """What one unit of the rate is: ``request``, ``transaction`` (a workload) or
        ``operation``."""
        if self.request is not None:
            return "request"
        return "transaction" if self.cells[0]["params"].get("load") is not None else "operation"

    @property
    def unit(self) -> str:
        """``requests/s``, ``transactions/s`` or ``ops/s``."""
        return {"request": "requests/s", "transaction": "transactions/s"}.get(self.per, "ops/s")

    @property
    def side_text(self) -> str:
        """Whose CPU, in words: ``server CPU``, ``worker CPU``, ``worker CPU + server CPU remainder``."""
        if self.remainder is not None:
            return f"{SIDE_TEXT[self.side]} + {SIDE_TEXT[self.remainder.side]} remainder"
        return SIDE_TEXT[self.side]

    @property
    def remainder_note(self) -> str | None:
        """For a request without a remainder, that it is left out (``REMAINDER_LEFT_OUT``)."""
        return REMAINDER_LEFT_OUT if self.request is not None and self.remainder is None else None

    @property
    def caveat(self) -> str:
        """What the intervals do not cover (``CAVEAT``)."""
        return CAVEAT

    def cost_per_year(self, cores: float) -> float | None:
        """``cores`` × the core price per year, or None without a price."""
        return None if self.core_price_per_year is None else cores * self.core_price_per_year

    def config_name(self, i: int) -> str:
        """A short name for configuration ``i`` (0, or 1 after a change): its configuration
        when the run has several (``old``), else the backend, else ``request``/the op."""
        cells = [t.cell for t in self.requests[i].terms] if self.requests else [self.cells[i]]
        confs = {c["configuration"] for c in cells}
        if len(confs) == 1 and next(iter(confs)):
            return str(next(iter(confs)))
        backends = {c["backend"] for c in cells}
        return str(next(iter(backends))) if len(backends) == 1 else (self.request or self.op or "")

    def command(self) -> str:
        """The ``cryptoperf plan`` command line that asks this question again (without
        --store and the output options)."""
        args = ["cryptoperf", "plan", str(self.run_id)]
        args += ["--per-request", self.request] if self.request is not None else ["--op", str(self.op)]
        args += ["--rate", format(self.rate_per_s, ".10g")]
        for key, flag in (("configuration", "--configuration"), ("backend", "--backend"),
                          ("size_bytes", "--size"), ("from_config", "--from"), ("to_config", "--to")):
            if self.options.get(key) is not None:
                args += [flag, str(self.options[key])]
        if self.remainder is not None:
            args += ["--remainder-from", str(self.remainder.run_id), "--remainder-op", self.remainder.cell["cell"]]
        side = self.remainder.side if self.remainder is not None else self.side
        if side in WORKLOAD_SIDES:
            args += ["--side", side]
        if self.core_price_per_year is not None:
            args += ["--core-price-per-year", format(self.core_price_per_year, "g")]
        if self.offload:
            args += _accelerator_args(self.offload[0].accelerator)
        return shlex.join(args)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; with a core price, ``cores`` entries and ``change`` carry
        ``cost_per_year`` / ``delta_cost_per_year``; ``requests`` and ``remainder`` (null when
        left out, ``remainder_note`` then saying so) for a composite request; ``caveat`` last."""
        cores = [dict(c.as_dict(), cost_per_year=self.cost_per_year(c.cores)) for c in self.cores]
        ch = self.change.as_dict() if self.change else None
        if ch is not None and self.change is not None:
            ch["delta_cost_per_year"] = self.cost_per_year(self.change.delta_cores)
        return {"run_id": self.run_id, "op": self.op, "request": self.request, "unit": self.unit,
                "side": self.side, "side_text": self.side_text, "rate_per_s": self.rate_per_s,
                "command": self.command(), "core_price_per_year": self.core_price_per_year,
                "cells": list(self.cells), "requests": [r.as_dict() for r in self.requests],
                "remainder": self.remainder.as_dict() if self.remainder else None,
                "remainder_note": self.remainder_note, "cores": cores, "change": ch,
                "offload": [o.as_dict() for o in self.offload], "caveat": self.caveat}


def _accelerator_args(acc: Accelerator) -> list[str]:
    if acc.measured_from is not None:
        args = ["--accel-from", acc.measured_from, "--accel-price-per-year", format(acc.price_per_year, "g")]
        return args + (["--accel-min-units", str(acc.min_units)] if acc.min_units != 1 else [])
    args = ["--accel-ops-per-s", format(acc.ops_per_s_per_unit, "g"),
            "--accel-price-per-year", format(acc.price_per_year, "g")]
    if acc.host_cpu_ns_per_op:
        args += ["--accel-host-cpu-us-per-op", format(acc.host_cpu_ns_per_op / 1e3, "g")]
    if acc.latency_ns is not None:
        args += ["--accel-latency-us", format(acc.latency_ns / 1e3, "g")]
    if acc.min_units != 1:
        args += ["--accel-min-units", str(acc.min_units)]
    return args


def measured_accelerator(run: StoredRun, op: str, configuration: str, price_per_year: float,
                         min_units: int = 1, side: str | None = None) -> Accelerator:
    """The accelerator ``configuration`` of ``run`` measured (a device backend's rows, e.g. a
    PKCS#11 token's), instead of figures typed in: among its rows of ``op`` (an operation, or a
    study label with or without its ``@ N threads`` or ``@ c=N``), capacity = the highest
    throughput (ops/s per unit: a lower bound when the device would take more sessions than the
    run gave it), host CPU per operation = that row's CPU on the side the plan prices (``side``,
    as ``plan``'s: the server's per handshake for a workload with a server — where the key
    signs —, else the host's: the worker process's, plus the token daemon's where the module
    talks to one — for an in-process token such as SoftHSM2 the worker's is all of the work),
    latency = the p50 of the row with the fewest sessions (threads, or a workload's
    connections). Every figure is the analysis' median over the row's measured repetitions.

    Raises EconomicsError when ``configuration`` has no measured row of ``op``, or its rows did
    not measure ``side``."""
    labels = {s.cell.operation_label for s in find_cells(run, op)}  # every row of op's operations
    rows = [s for s in run.summaries.values()
            if s.cell.configuration == configuration and s.cell.operation_label in labels and s.ops_per_s]
    if not rows:
        configs = sorted({s.cell.configuration for s in run.summaries.values()})
        raise EconomicsError(f"--accel-from {configuration}: run {run.id} has no measured row of '{op}' in "
                             f"configuration '{configuration}' (configurations: {', '.join(configs)})")
    priced = _side(run, rows, side)
    cpu = {s.cell.key: _host_cpu_ns_per_op(run, s, priced) for s in rows}
    rows = [s for s in rows if cpu[s.cell.key]]
    if not rows:
        raise EconomicsError(f"--accel-from {configuration}: run {run.id} has no {SIDE_TEXT[priced]} measured "
                             f"on the rows of '{op}' in configuration '{configuration}'")
    best = max(rows, key=lambda s: s.ops_per_s)
    fewest = min(rows, key=_sessions)
    counts = sorted({_sessions(s) for s in rows})
    bound = (f"the most throughput of {len(counts)} session counts ({', '.join(map(str, counts))}): a lower bound "
             "of its capacity" if len(counts) > 1 else "one session count: a lower bound of its capacity")
    note = (f"measured in run {run.id}, configuration '{configuration}': capacity and host CPU "
            f"({SIDE_TEXT[priced]}) from '{best.cell.label}' ({bound}), latency from '{fewest.cell.label}'")
    return Accelerator(ops_per_s_per_unit=best.ops_per_s, price_per_year=price_per_year,
                       host_cpu_ns_per_op=cpu[best.cell.key], latency_ns=fewest.p50_ns,
                       min_units=min_units, measured_from=configuration, measured_note=note)


def _host_cpu_ns_per_op(run: StoredRun, s: CellSummary, side: str) -> float | None:
    """The figure of row ``s`` the report shows for ``side``: a workload level's CPU per
    transaction on that side (``workloads.generic.Point.cpu_ns_per_tx``), else the host's CPU
    per operation (the summary's: the worker process's, plus a token daemon's where it has one)."""
    point = run.analysis.workloads.point_of(s.cell.key)
    if point is not None and side != "process":
        return point.cpu_ns_per_tx(side)
    return s.host_cpu_ns_per_op


def _sessions(s: CellSummary) -> int:
    """The concurrent sessions of a row: its threads, or its load level's connections (1 for
    an open level without a thread count)."""
    if s.cell.threads:
        return s.cell.threads
    return (levels.parse_load(s.cell.load).connections or 1) if s.cell.load else 1


# --------------------------------------------------------------------------- plan

def _check_question(run: StoredRun, op: str | None, request: str | None, configuration: str | None,
                    from_config: str | None, to_config: str | None, accelerator: Accelerator | None,
                    core_price_per_year: float | None) -> None:
    if (op is None) == (request is None):
        raise EconomicsError("give either --op OP (one operation) or --per-request 'OP + OP …' "
                             "(the operations of one request), not both" if op is not None else
                             "plan needs --op OP (one operation) or --per-request 'OP + OP …'")
    if (from_config is None) != (to_config is None):
        raise EconomicsError("--from and --to go together: give both configurations of the change")
    if from_config is not None and configuration is not None:
        raise EconomicsError("give either --configuration or --from/--to, not both")
    if accelerator is not None and request is not None:
        raise EconomicsError(
            "an accelerator's capacity and break-even are per operation of one kind, and --per-request "
            "mixes several: plan the offloaded operation alone, with --op OP and --rate (its count × the "
            "request rate)")
    if accelerator is not None and core_price_per_year is None:
        raise EconomicsError("an accelerator needs --core-price-per-year to be compared with the CPU it saves")
    if core_price_per_year is not None:
        check_number("--core-price-per-year", core_price_per_year)
    if to_config is not None:
        configs = sorted({s.cell.configuration for s in run.summaries.values()})
        if to_config not in configs:
            raise EconomicsError(f"run {run.id} has no configuration '{to_config}' (it has: {', '.join(configs)})")


def plan(run: StoredRun, op: str | None, rate_per_s: float | str, *, request: str | None = None,
         configuration: str | None = None, backend: str | None = None, size_bytes: int | None = None,
         from_config: str | None = None, to_config: str | None = None,
         accelerator: Accelerator | None = None, core_price_per_year: float | None = None,
         side: str | None = None, remainder_run: StoredRun | None = None,
         remainder_op: str | None = None) -> PlanResult:
    """(a) cores for ``rate_per_s`` of ``op`` in ``run`` — or of ``request``, a composite
    request (``parse_request``), ``rate_per_s`` then being requests per second; (b) with
    ``from_config`` and ``to_config``, the cores before and after that change; (c) with
    ``accelerator`` and ``core_price_per_year``, the break-even rate and what offloading saves
    at the rate (for ``op`` only).

    ``op`` (and each term of ``request``) is an operation or a study label, resolved to one
    cell (in a request, terms matching one cell fix the configuration and backend of terms that
    match several, if they all agree on it, and ``size_bytes`` narrows only the terms measured
    with a message size); with ``from_config``/``to_config`` the "to" cell is the one with the
    same backend, label and size in ``to_config`` (its op may differ, e.g. rsa2048-sign →
    rsa4096-sign). ``rate_per_s`` may be text (``parse_rate``: ``2k``, ``1M/s``).

    ``side`` (``server``, ``client``, ``both``) chooses whose CPU a workload cell is priced
    with; by default its server's when it has one (``sides.default_side``). With a request,
    ``remainder_op`` names a workload cell of ``remainder_run`` (default ``run``; a cell key, or a
    label or op matching one cell, or one with the configuration and backend of the request's
    first configuration) whose ``side`` CPU per transaction minus the request's
    primitives is added to the request (``request.remainder``); both runs must come from the
    same host.

    Raises EconomicsError for a negative rate or price, both or neither of ``op`` and
    ``request``, an op/configuration/backend/size/side the run lacks, an ambiguous choice, a
    cell without enough measured repetitions, --from without --to, an accelerator with a
    composite request, an accelerator that never pays, or a remainder from another host.
    """
    rate = parse_rate(rate_per_s)
    _check_question(run, op, request, configuration, from_config, to_config, accelerator, core_price_per_year)
    if request is None and (remainder_op is not None or remainder_run is not None):
        raise EconomicsError("--remainder-from/--remainder-op add a workload's non-crypto rest to --per-request; "
                             "with --op, plan the workload cell itself")
    if remainder_run is not None and remainder_op is None:
        raise EconomicsError("--remainder-from needs --remainder-op CELL: the workload cell (its label, or the "
                             "key `cryptoperf report` shows) whose CPU per transaction the remainder comes from")
    if request is not None and side is not None and remainder_op is None:
        raise EconomicsError("--side chooses a workload's side; the terms of --per-request are primitive "
                             "operations (the worker's CPU): give it with --remainder-op")
    options = dict(configuration=configuration, backend=backend, size_bytes=size_bytes,
                   from_config=from_config, to_config=to_config, side=side)
    flag = "--op" if request is None else "--per-request"
    names = [(str(op), 1.0)] if request is None else parse_request(request)
    configs = _pick(run, names, flag, from_config or configuration, backend, size_bytes, to_config)
    if request is None:
        return _plan_op(run, op, rate, [terms[0][2] for terms in configs], side, accelerator,
                        core_price_per_year, options)
    reqs = [request_cpu([(n, c, s.cell.as_dict(), _samples(run, s, "process")) for n, c, s in terms])
            for terms in configs]
    rem = None
    if remainder_op is not None:
        rem = _remainder(run, remainder_run or run, remainder_op, side, reqs[0], [s for _, _, s in configs[0]])
    totals = [r.cpu for r in reqs] if rem is None else with_remainder(reqs, rem)
    ch = None
    if len(reqs) == 2:
        ch = request_change(rate, reqs[0], reqs[1])
        if rem is not None:  # the remainder is the same on both: the difference stays, the ratio does not
            ch = dataclasses.replace(ch, before=cores_at_rate(rate, totals[0]), after=cores_at_rate(rate, totals[1]),
                                     ratio=None)
    return PlanResult(run_id=run.id, op=None, rate_per_s=rate, side="process",
                      cells=tuple(s.cell.as_dict() for terms in configs for _, _, s in terms),
                      cores=tuple(cores_at_rate(rate, t) for t in totals), change=ch,
                      core_price_per_year=core_price_per_year,
                      request=request_text([(n, c) for n, c, _ in configs[0]]), requests=tuple(reqs),
                      remainder=rem, options=options)


def _plan_op(run: StoredRun, op: str | None, rate: float, chosen: list[CellSummary], side: str | None,
             accelerator: Accelerator | None, core_price_per_year: float | None,
             options: dict[str, Any]) -> PlanResult:
    used = _side(run, chosen, side)
    costs = [cpu_cost(_samples(run, s, used)) for s in chosen]
    offloads = []
    if accelerator is not None:
        assert core_price_per_year is not None
        for c, s in zip(costs, chosen):
            try:
                offloads.append(offload(rate, c.estimate_ns, accelerator, core_price_per_year, s.p50_ns))
            except EconomicsError as e:
                raise EconomicsError(f"{s.cell.key} ({s.cell.op}): {e}") from None
    return PlanResult(run_id=run.id, op=op, rate_per_s=rate, side=used, cells=tuple(s.cell.as_dict() for s in chosen),
                      cores=tuple(cores_at_rate(rate, c) for c in costs),
                      change=change(rate, costs[0], costs[1]) if len(costs) == 2 else None,
                      offload=tuple(offloads), core_price_per_year=core_price_per_year, options=options)


def _remainder_cell(rrun: StoredRun, name: str, terms: list[CellSummary]) -> CellSummary:
    """The workload cell ``name`` of ``rrun``: a cell key, or a label or op matching one cell —
    or several, of which one has the configuration (and if need be the backend) all of
    ``terms`` (the request's first configuration) have."""
    by_key = rrun.summaries.get(name)
    cells = [by_key] if by_key is not None else find_cells(rrun, name, flag="--remainder-op")
    for attrs in (("configuration",), ("configuration", "backend")):
        where = {tuple(getattr(s.cell, a) for a in attrs) for s in terms}
        if len(cells) > 1 and len(where) == 1:
            cells = [s for s in cells if tuple(getattr(s.cell, a) for a in attrs) in where] or cells
    if len(cells) > 1:
        raise EconomicsError(f"--remainder-op {name} matches {len(cells)} cells of run {rrun.id}; give one "
                             f"of their keys: {', '.join(repr(s.cell.key) for s in cells)}")
    if not cells[0].cell.is_workload:
        raise EconomicsError(f"--remainder-op {name}: {cells[0].cell.key} of run {rrun.id} is a primitive "
                             "operation; the remainder comes from a workload (a TLS handshake at a load level)")
    return cells[0]


def _remainder(run: StoredRun, rrun: StoredRun, name: str, side: str | None, primitives: RequestCpu,
               terms: list[CellSummary]) -> Remainder:
    cell = _remainder_cell(rrun, name, terms)
    if rrun.id != run.id:
        backends = {s.cell.backend for s in terms} | {cell.cell.backend}
        wanted = set(SAME_HOST) | {f"library {b}" for b in backends}
        diffs = [d for d in compare.host_differences(run.host, rrun.host) if d.field in wanted]
        if diffs:
            what = "; ".join(f"{d.field}: {d.a} vs {d.b}" for d in diffs[:3])
            raise EconomicsError(f"--remainder-from run {rrun.id} ran on another host than run {run.id} ({what}): "
                                 "a remainder subtracts primitives from a workload measured on the same host")
    used = _side(rrun, [cell], side)
    return remainder(_samples(rrun, cell, used), primitives, run_id=rrun.id, cell=cell.cell.as_dict(),
                     side=used)
