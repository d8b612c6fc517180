"""Check a parsed study against the rules its worker announced in ``hello``
(``hello.WorkerRules``): backend and operation names, the worker parameters and their
values, message sizes, the worker's limits, and each workload operation's params and load levels
against its spec (``WorkerRules.workloads``). The worker is the one source of those rules;
nothing here repeats them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable, Mapping

from cryptoperf import builds, hostinfo, levels, opnames
from cryptoperf.errors import did_you_mean
from cryptoperf.study.options import WORKER_PARAMS, num_text
from cryptoperf.study.parse import file_param_problem, toml_repr
from cryptoperf.study.types import Configuration, Operation, Study, param_value

if TYPE_CHECKING:
    from cryptoperf.hello import WorkerRules
    from cryptoperf.workload_spec import WorkloadSpec

#: Most cells a study may expand to (configurations × backends × operations × sizes × loads);
#: each runs ``repetitions`` + 1 times, so more would not finish anyway.
MAX_CELLS = 50_000


def check_against_worker(study: Study, rules: "WorkerRules",
                         own: "Mapping[str, WorkerRules] | None" = None) -> Study:
    """Check the study against the rules the worker announced in its ``hello``: backend and
    (substituted) operation names, the worker parameters each configuration sets (known names,
    allowed values), message sizes only on operations that take one and within the worker's
    limit, and warm-up, measuring time and threads within the worker's limits. A configuration
    with a worker of its own (``worker``: a path build) is checked against that worker's rules
    (``own``: build → rules), the others against ``rules`` (the default build's).

    Returns the study with ``rules`` set and ``backends`` filled in (the worker's, when the
    file named none). Raises StudyError at the offending line, listing the known names. The
    ``mock`` backends (``mock``, ``mock:SCALE``, ``mock:crash``, ``mock:hang``) are accepted
    for tests.
    """
    own = own or {}

    def rules_of(c: Configuration) -> "WorkerRules":
        return own.get(c.build, rules)

    def known_backend(b: str, r: "WorkerRules") -> bool:
        return b in r.backends or b == "mock" or b.startswith("mock:")

    for b in study.backends or ():
        if not known_backend(b, rules):
            raise study.error("study", 0, "backends",
                              f"unknown backend '{b}'{did_you_mean(b, rules.backends)} (known: {', '.join(rules.backends)})")
    for c in study.configurations:
        backends = rules_of(c).backends
        if c.backend is not None and not known_backend(c.backend, rules_of(c)):
            raise study.error("configuration", c.index, "backend",
                              f"unknown backend '{c.backend}'{did_you_mean(c.backend, backends)} "
                              f"(known: {', '.join(backends)})")
    for key, limit_name in (("seconds", "max_seconds"), ("warmup_s", "max_warmup_s"), ("threads", "max_threads")):
        value, limit = getattr(study, key), rules.limits[limit_name]
        if value > limit:
            unit = "" if key == "threads" else " s"
            raise study.error("study", 0, key, f"{num_text(value)}{unit} is above the worker's limit of "
                              f"{num_text(limit)}{unit} ({limit_name} in its hello)")
    for c in study.configurations:
        for name in WORKER_PARAMS:
            for key, value in ((name, c.variables.get(name)), ("params", c.params.get(name))):
                allowed = rules.param_values.get(name, ())
                if value is not None and param_value(name, str(value), rules) not in allowed:
                    raise study.error("configuration", c.index, key,
                                      f"{name} {toml_repr(value)} is not one of {', '.join(allowed)}"
                                      f"{_param_hint(name, str(value), allowed)}")
    study = dataclasses.replace(study, rules=rules, own_rules=dict(own), backends=study.backends or rules.libraries)
    per_backend = sum(max(1, len(o.sizes or ())) * max(1, len(o.loads or ())) for o in study.operations)
    cells = per_backend * sum(len(study.backends_of(c)) for c in study.configurations)
    if cells > MAX_CELLS:
        raise study.error("study", 0, None, f"the study expands to {cells} cells (configurations × backends × "
                          f"operations × sizes × loads); at most {MAX_CELLS}: split it")
    for c in study.configurations:
        r = rules_of(c)
        for o in study.operations:
            written = study.op_name(c, o)
            op = opnames.canonical_op(written, r.ops)
            if op is None:
                via = f" (from '{o.op}' in configuration '{c.name}')" if written != o.op else ""
                raise study.error("operation", o.index, "op",
                                  f"unknown operation '{written}'{via}{opnames.unknown_op_hint(written, r.ops)}; "
                                  f"known: {', '.join(r.ops)}")
            _check_workload(study, c, o, op, r)
            if o.sizes is not None:
                if not r.takes(op, "size_bytes"):
                    raise study.error("operation", o.index, "sizes",
                                      f"'{op}' has no message, so no size; remove sizes from this operation")
                big = [n for n in o.sizes if n > r.limits["max_size_bytes"]]
                if big:
                    raise study.error("operation", o.index, "sizes",
                                      f"{big[0]} bytes is above the worker's limit of "
                                      f"{num_text(r.limits['max_size_bytes'])} bytes (max_size_bytes in its hello)")
    base = study.configuration(study.baseline)
    base_backends = set(study.backends_of(base))
    for c in study.configurations:
        missing = [b for b in study.backends_of(c) if b not in base_backends]
        if missing and study.paired_on(c) is None:
            why = (f" (library = \"{c.library}\" runs on backend {builds.LIBRARY_BACKEND} only)"
                   if c.library != builds.SYSTEM_LIBRARY else "")
            fix = ("pin this configuration to one backend (backend = \"...\") to compare it, block by block, "
                   f"with the baseline on {base_backends and sorted(base_backends)[0]}"
                   if len(base_backends) == 1 else
                   "pin the baseline to one backend (backend = \"...\") and this configuration to one, to "
                   "compare them across backends block by block")
            raise study.error("configuration", c.index, "library" if why else "backend",
                              f"runs on {', '.join(missing)}{why} where the baseline '{base.name}' does not, "
                              f"so it has no baseline cell to be paired with; {fix}")
    return study


def _check_workload(study: Study, config: Configuration, o: Operation, op: str, rules: "WorkerRules") -> None:
    """A workload operation's ``params`` (each one the workload takes, enumerated values among
    the allowed ones, after ``{var}``) and ``loads`` (file descriptors enough for each level; a
    named port free); ``params`` and ``loads`` on a primitive operation are errors. Raises
    StudyError at the key."""
    _check_server(study, o, op, rules)
    if op not in rules.workloads:
        for key in ("params", "loads"):
            if getattr(o, key):
                names = ", ".join(sorted(rules.workloads)) or "none"
                raise study.error("operation", o.index, key,
                                  f"'{op}' is a primitive operation; {key} applies to workloads ({names})")
        too_many = [n for n in o.threads or () if n > rules.limits["max_threads"]]
        if too_many:
            raise study.error("operation", o.index, "threads", f"{too_many[0]} threads is above the worker's "
                              f"limit of {num_text(rules.limits['max_threads'])} (max_threads in its hello)")
        return
    if o.threads:
        raise study.error("operation", o.index, "threads", f"'{op}' is a workload: its concurrency is its load "
                          "level (loads = [\"closed:N\"]), not threads")
    takes = sorted(rules.op_params.get(op, ()))
    theirs = rules.workloads[op].set_by_cryptoperf()
    for name, raw in o.params.items():
        if name in theirs:
            raise study.error("operation", o.index, "params", f"{name} is not a study's to set: {theirs[name]}")
        if name == "load":
            raise study.error("operation", o.index, "params", "the load level goes in loads = [...], not params")
        if name == "size_bytes":
            raise study.error("operation", o.index, "params", "bytes per transaction go in sizes = [...], not params")
        if name not in takes:
            raise study.error("operation", o.index, "params",
                              f"'{op}' has no parameter '{name}'{did_you_mean(name, takes)} (it takes: {', '.join(takes)})")
        value = study.substitute(config, o, "params", str(raw))
        if name in rules.workloads[op].file_params:
            problem = file_param_problem(name, value, study.path)
            if problem:
                raise study.error("operation", o.index, "params", problem)
        allowed = rules.param_values.get(name)
        if allowed and value not in allowed:
            via = f" (from '{raw}' in configuration '{config.name}')" if value != str(raw) else ""
            raise study.error("operation", o.index, "params",
                              f"{name} '{value}'{via} is not one of {', '.join(allowed)}{did_you_mean(value, allowed)}")
    _check_levels(study, config, o, rules.workloads[op], rules)
    if "port" in o.params:
        address = study.substitute(config, o, "params", str(o.params.get("address", "127.0.0.1")))
        try:
            port = int(study.substitute(config, o, "params", str(o.params["port"])))
        except ValueError:
            raise study.error("operation", o.index, "params", "port must be a whole number") from None
        problem = hostinfo.port_problem(address, port)
        if problem:
            raise study.error("operation", o.index, "params", problem)


#: How each level kind is written, for messages.
_LEVEL_SYNTAX = {"closed": "closed:N", "open": "open:RATE", "open_bytes": "a byte rate, open:100MB/s",
                 "targets": "targets:N"}
_LEVEL_WHAT = {"targets": "a job level", "open_bytes": "a byte rate"}


def _check_levels(study: Study, config: Configuration, o: Operation, spec: "WorkloadSpec",
                  rules: "WorkerRules") -> None:
    """A workload operation's ``loads`` against its spec and the worker's limits: each level of
    a kind the workload accepts (``spec.levels``), its counts within ``max_concurrency`` and
    ``max_targets``, a byte rate's bytes per transaction a number, file descriptors enough for
    it in the workload's mode; the numbers the worker's sizing reads whole numbers; a job's
    descriptors. Raises StudyError at the key."""
    params = {k: study.substitute(config, o, "params", str(v)) for k, v in o.params.items()}
    for name in spec.sized_params:
        if name in params:
            try:
                spec.number(name, params)
            except ValueError as e:
                raise study.error("operation", o.index, "params", str(e)) from None
    for text in o.loads or ():
        try:
            load = levels.parse_load(text, rules.limits)
        except ValueError as e:
            raise study.error("operation", o.index, "loads", str(e)) from None
        problem = _level_problem(spec, load, rules)
        if problem:
            raise study.error("operation", o.index, "loads", problem)
        if load.bytes_per_s is not None:
            try:
                load.per_s(spec.bytes_per_tx(params))
            except ValueError as e:
                raise study.error("operation", o.index, "params", str(e)) from None
        problem = levels.descriptor_problem(load, spec.mode(params))
        if problem:
            raise study.error("operation", o.index, "loads", problem)
    if spec.connection_params:
        try:
            values = {name: spec.number(name, params) for name in spec.connection_params}
        except ValueError as e:
            raise study.error("operation", o.index, "params", str(e)) from None
        problem = levels.job_descriptor_problem(values)
        if problem:
            raise study.error("operation", o.index, "params" if set(values) & set(o.params) else "loads", problem)


def _check_server(study: Study, o: Operation, op: str, rules: "WorkerRules") -> None:
    """An operation with a server under test (``server = ...``) loads it through a workload that
    announces ``server_under_test``, and does not name the server's address itself. Raises
    StudyError at ``server``."""
    if o.server is None:
        return
    spec = rules.workloads.get(op)
    if spec is None or spec.server_under_test is None:
        takers = sorted(name for name, s in rules.workloads.items() if s.server_under_test)
        raise study.error("operation", o.index, "server", f"a server under test is loaded by "
                          f"{' or '.join(takers) or 'no workload of this worker'}, not {op}")
    connect = spec.server_under_test["connect_param"]
    if connect in o.params:
        raise study.error("operation", o.index, "server",
                          f"the server's address is 127.0.0.1:{{port}}, which cryptoperf passes; drop {connect} from params")


def _level_problem(spec: "WorkloadSpec", load: levels.Load, rules: "WorkerRules") -> str | None:
    """Why workload ``spec`` cannot run at ``load``, or None: a level of a kind its spec does
    not accept, said with the workloads that do accept it."""
    kind = load.level_kind
    if spec.takes_level(kind):
        return None
    op = spec.name
    if spec.job:
        return f"'{op}' is a job: its levels are numbers of targets, targets:N (not '{load.text}')"
    takes = " or ".join(_LEVEL_SYNTAX.get(k, k) for k in spec.levels)
    others = [w for w, s in rules.workloads.items() if s.takes_level(kind)]
    what = _LEVEL_WHAT.get(kind, f"a {kind} level")
    if not others:
        return f"load '{load.text}' is {what}, which no workload of this worker takes ('{op}' takes {takes})"
    names = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} and {others[-1]} take"
    return (f"load '{load.text}' is {what}; only {names}{' takes' if len(others) == 1 else ''} one "
            f"('{op}' takes {takes})")


def _param_hint(name: str, value: str, allowed: Iterable[str]) -> str:
    """"Did you mean" for a worker parameter's value: for a digest only the same hash
    (``opnames.unknown_op_hint``: ``sha257`` suggests nothing, never ``sha256``), for others
    the closest spelling."""
    return opnames.unknown_op_hint(value, allowed) if name == "digest" else did_you_mean(value, allowed)
