"""Study files: parse, fill defaults, validate.

A study file (TOML, documented in docs/study-files.md) has one ``[study]`` table, one or more
``[[configuration]]`` tables and one or more ``[[operation]]`` tables. Every key a study file
may hold is one row of ``OPTIONS`` (name, type, default, range, help); that one table drives
parsing, defaults, validation, the ``cryptoperf study --options`` text and the "did you mean"
suggestions for misspelt keys, as fio's option table does.

Errors are ``StudyError``s naming the file, the line of the offending key and the field.
Validation happens in two steps, both before anything runs: ``load`` checks everything the
file alone can tell; ``check_against_worker`` checks everything else against the rules the
worker announced in its ``hello`` (``run.worker.WorkerRules``): backend and operation names,
which operation takes a message size, a digest or a padding and their allowed values, and the
worker's limits on warm-up, measuring time, threads and message size. The worker is the one
source of those rules; nothing here repeats them.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from cryptoperf import builds, cpumask, opnames, stats, workload
from cryptoperf.errors import StudyError, one_line

if TYPE_CHECKING:  # the study parser needs only the rules' interface, not the worker client
    from cryptoperf.run.worker import WorkerRules
    from cryptoperf.workload_spec import WorkloadSpec

#: Configuration keys that are also worker parameters (their values are checked against the
#: worker's ``param_values``, and passed to every operation whose ``op_params`` list them).
WORKER_PARAMS = ("digest", "padding")
UNTIL = ("fixed", "decided")
VERDICT_ON = tuple(stats.METRICS) + (stats.BY_LOAD,)  # latency, throughput, cpu_per_op, by_load
_TEMPLATE_VAR = re.compile(r"\{([^{}]*)\}")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Largest study file ``load`` reads (real ones are a few KiB): a larger file, or a device that
#: never ends, is refused before it fills memory.
MAX_STUDY_BYTES = 1 << 20
#: Most ``[[configuration]]`` and ``[[operation]]`` tables, and most pairs of them (every pair
#: is checked, and becomes cells): bounds the time a study file can make the checks take.
MAX_TABLES = 1000
MAX_PAIRS = 10_000
#: Most cells a study may expand to (configurations × backends × operations × sizes × loads);
#: each runs ``repetitions`` + 1 times, so more would not finish anyway.
MAX_CELLS = 50_000
#: TOML integers are 64-bit (toml.io, "Integer"); a larger one is refused, not rounded.
INT64 = (-(2**63), 2**63 - 1)
#: Longest value quoted whole in a message; a longer one is elided in the middle.
SHOWN = 100
#: Most parameters one operation may give (a workload takes about 25).
MAX_PARAMS = 100


# --------------------------------------------------------------------------- the option table


def _num(x: float) -> str:
    """A bound as text: integers without a decimal point or exponent."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"

REQUIRED = object()  # sentinel: the option has no default


@dataclass(frozen=True)
class Option:
    """One key a study file may hold.

    Attributes:
        section: ``study``, ``configuration`` or ``operation`` (the TOML table it lives in).
        name: the key.
        type: ``string``, ``int``, ``float``, ``bool``, ``strings`` (list of strings), ``ints``
            (list of ints), ``sizes`` (list of byte counts: ints or size strings such as
            ``"16KiB"``, read by ``opnames.parse_size``), ``hosts`` (a list of node selectors
            or the string ``every-node``, see ``HostSelector``) or ``table``.
        default: the value when the key is absent; ``REQUIRED`` if it must be given; None if
            absence has a meaning described in ``help``.
        min, max: inclusive bounds for numbers and for every element of ``ints``.
        above: for floats, an exclusive lower bound (``seconds > 0``).
        help: one sentence for ``cryptoperf study --options`` and docs/study-files.md.
        unit: the unit, shown in help (``s``, ``bytes``, ``%``).
    """

    section: str
    name: str
    type: str
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    above: float | None = None
    unit: str = ""

    def range_text(self) -> str:
        """The allowed range as text, e.g. ``1..1024`` or ``> 0``; '' when unbounded."""
        lo = f"> {_num(self.above)}" if self.above is not None else None
        if self.min is not None and self.max is not None:
            return f"{_num(self.min)}..{_num(self.max)}"
        if self.min is not None:
            return f">= {_num(self.min)}"
        if lo:
            return lo + (f", <= {_num(self.max)}" if self.max is not None else "")
        return f"<= {_num(self.max)}" if self.max is not None else ""

    def default_text(self) -> str:
        """The default as text: ``required``, ``(see help)`` or the TOML-ish value."""
        if self.default is REQUIRED:
            return "required"
        if self.default is None:
            return "(see help)"
        if isinstance(self.default, str):
            return f'"{self.default}"'
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)


OPTIONS: tuple[Option, ...] = (
    Option("study", "name", "string", REQUIRED, "Name of the study; names result files and store rows."),
    Option("study", "description", "string", "", "One line saying what the study compares."),
    Option("study", "baseline", "string", REQUIRED,
           "Name of the [[configuration]] every other configuration is compared with."),
    Option("study", "backends", "strings", None,
           "Backends every configuration runs on (deltas are vs the baseline on the same "
           "backend); default: every backend the worker has."),
    Option("study", "repetitions", "int", 10,
           "Blocks: every configuration of every cell runs this many times, once per block, each "
           "in a fresh worker process, in a seeded random order within the block; comparisons "
           "pair the configuration with the baseline block by block. The default calls a true "
           "5 % change at 3 % noise 'slower' 9 times in 10 in a study of one comparison "
           "(docs/methodology.md, 'Statistics').", min=3, max=1000),
    Option("study", "until", "string", "fixed",
           "'fixed': run `repetitions` blocks. 'decided': after them, add blocks to the "
           "inconclusive comparisons only (doubling, up to max_repetitions), with intervals "
           "widened for every look so that the error rates still hold."),
    Option("study", "max_repetitions", "int", None,
           "With until = 'decided': the most blocks any comparison gets; default 4 × repetitions.",
           min=3, max=10000),
    Option("study", "margin_pct", "float", 2.0,
           "Equivalence margin m: a comparison whose interval lies inside ± m % is 'equivalent "
           "within ± m %'; one whose interval straddles 0 and reaches past ± m % is "
           "'inconclusive'. `cryptoperf study --margin` overrides it.", min=0, max=100, unit="%"),
    Option("study", "verdict_on", "string", "latency",
           "The metric every verdict is decided on: 'latency' (the per-repetition p50), "
           "'throughput' (ops/s), 'cpu_per_op' (CPU time per operation, what capacity and "
           "cost depend on) or 'by_load' (workloads: throughput at a closed load level, whose "
           "latency is concurrency ÷ throughput and scheduler-bound past the CPU count; CPU time "
           "per operation at a byte-rate level such as open:100MB/s, whose throughput is fixed and "
           "whose cost is the question; p50 latency at any other open level, whose throughput is "
           "the offered rate; primitives: p50 latency). The others are still reported with their "
           "intervals."),
    Option("study", "multiplicity", "bool", True,
           "Adjust the intervals of all the study's comparisons together (Bonferroni), so that "
           "all hold at 95 % at once; false only for a study with one planned comparison "
           "(`--no-multiplicity` does the same)."),
    Option("study", "seconds", "float", 1.0, "Measuring time budget per repetition, per thread "
           "(at most the worker's max_seconds).", above=0, unit="s"),
    Option("study", "warmup_s", "float", 0.2, "Untimed warm-up before measuring, per repetition "
           "(at most the worker's max_warmup_s).", min=0, unit="s"),
    Option("study", "threads", "int", 1, "Threads running the operation at once (at most the "
           "worker's max_threads).", min=1),
    Option("study", "timeout_s", "float", 60.0,
           "Per repetition: a worker still busy after this long is killed and its repetition "
           "marked failed; must exceed warmup_s + seconds.", above=0, max=86400, unit="s"),
    Option("study", "work_dir", "string", None,
           "Where a file workload writes its files: each repetition gets a private "
           "directory there, removed when it ends, also when its worker was killed; default: "
           "a 'work' directory beside the default store. Absolute, or relative to the study "
           "file's directory and inside it; no symbolic link on the way. Checked up front: "
           "writable, with the free space the files need."),
    Option("study", "seed", "int", 1, "Seed of the random order within blocks (stored with the "
           "run, so the schedule reproduces).", min=0, max=2**63 - 1),
    Option("study", "max_steal_pct", "float", 10.0,
           "A repetition during which the hypervisor stole more than this share of the CPUs is "
           "re-run once and, if still disturbed, kept and flagged.", min=0, max=100, unit="%"),
    Option("study", "max_other_load_pct", "float", 25.0,
           "A repetition during which other work kept more than this share of all CPUs busy "
           "(busy time beyond the worker's own threads) is re-run once and, if still disturbed, "
           "kept and flagged.", min=0, max=100, unit="%"),
    Option("study", "noise_threshold_pct", "float", 10.0,
           "Coefficient of variation across repetitions above which the noise table and the "
           "report warn; verdicts do not use it (noise widens their intervals instead).",
           above=0, max=1000, unit="%"),
    Option("study", "hosts", "hosts", None,
           "With --executor ray: the Ray nodes the study's blocks run on. A list of node "
           "selectors a node must all match, each 'label:KEY=VALUE' (a node label, `ray start "
           "--labels`) or 'resource:NAME' (a custom resource, `ray start --resources`); with "
           "\"every-node\" (alone or in the list) every matching node runs every cell, for a "
           "fleet comparison. Default: any node. The local executor ignores it."),
    Option("study", "bootstrap_resamples", "int", None,
           "No longer used: intervals are t intervals, not bootstrap ones. Accepted and ignored, "
           "so that older study files still parse.", min=1),
    Option("configuration", "name", "string", REQUIRED, "Unique name of the configuration."),
    Option("configuration", "description", "string", "", "One line describing the configuration."),
    Option("configuration", "backend", "string", None,
           "Pins the configuration to this one backend instead of [study] backends."),
    Option("configuration", "params", "table", None,
           "Extra worker parameters (digest, padding) for every operation that takes them."),
    Option("configuration", "cpu", "string", cpumask.BASELINE,
           "CPU capability mask its workers run under: " + ", ".join(cpumask.NAMES) +
           " (OPENSSL_ia32cap, verified by the worker; ring and RustCrypto cannot be masked, so "
           "their cells say unsupported); see docs/methodology.md."),
    Option("configuration", "fips", "bool", False,
           "Run in FIPS mode: its cells use the FIPS worker build (cryptoperf-worker-fips: AWS-LC's "
           "FIPS module; OpenSSL with the host's FIPS provider, where one is installed), and every "
           "result records the FIPS mode the worker reported."),
    Option("configuration", "library", "string", builds.SYSTEM_LIBRARY,
           "The OpenSSL its openssl backend links: " + ", ".join(builds.LIBRARIES) +
           f" ({builds.OPENSSL_NEXT} is built from source once, by `cryptoperf setup "
           f"{builds.OPENSSL_NEXT}` or on first use, and cached). Only the openssl backend "
           "changes, so a configuration with another library runs on backend openssl only; "
           "not with fips = true. Every result records the library version measured."),
    Option("configuration", "hosts", "hosts", None,
           "With --executor ray: node selectors ('label:KEY=VALUE', 'resource:NAME') this "
           "configuration needs on top of [study] hosts; a block runs every configuration of a "
           "cell on one node, so its node must match the selectors of all of them."),
    Option("operation", "label", "string", None,
           "Row label in the delta table; default: the op template."),
    Option("operation", "op", "string", REQUIRED,
           "Worker operation name; {var} is replaced by the configuration's variable var."),
    Option("operation", "sizes", "sizes", None,
           "Message sizes: integers (bytes) or strings with a binary suffix, \"16KiB\", \"16k\", "
           "\"1MiB\", \"1M\" (k = 1024); at most the worker's max_size_bytes. Omit for operations "
           "without a message (key agreement, KEM) and to let the worker use its default size.",
           min=1, unit="bytes"),
    Option("operation", "params", "table", None,
           "A workload's parameters, each one its worker announces in its hello (listed below, "
           "per workload, with their defaults and values, when a worker is found; "
           "docs/worker-protocol.md, \"Workloads\"); values are strings or integers and may use "
           "{var}."),
    Option("operation", "loads", "strings", None,
           "A workload's load levels, each its own row: " + workload.SYNTAX + ", or a rate sweep "
           "open:LOW..HIGH (LOW, 2·LOW, 4·LOW, … HIGH). closed = N "
           "connections back to back; open = transactions due at RATE whatever happened before, "
           "latency from when each was due (corrected for coordinated omission); targets:N = a job "
           "over N targets (a job workload). Which kinds a workload takes, and the limits, are its "
           "worker's (hello). Default: the worker's (closed:1; a job's targets:1)."),
    Option("operation", "optional", "bool", False,
           "Skip this operation, with one line saying why, where the host or a library cannot run "
           "it (the worker's check before the first repetition, e.g. a storage layer = "
           "\"dm-crypt\" without device-mapper), instead of stopping the study."),
    Option("operation", "p99_bound_ms", "float", None,
           "A latency objective for a workload's open loads: the report names, per configuration, "
           "the highest measured rate whose p99 stays under it (and the first that does not).",
           above=0, unit="ms"),
)

SECTIONS = ("study", "configuration", "operation")

#: ``hosts = "every-node"``: every eligible Ray node runs every cell.
EVERY_NODE = "every-node"
_LABEL_KEY = re.compile(r"^([A-Za-z0-9.\-]+/)?[A-Za-z0-9]([A-Za-z0-9_.\-]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.\-]*[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class HostSelector:
    """One element of ``hosts``: what a Ray node must have to run a block.

    Attributes:
        kind: ``label`` (the node has label ``name`` = ``value``: ``ray start --labels``) or
            ``resource`` (the node offers custom resource ``name``: ``ray start --resources``;
            ``value`` is '').
        name, value: as written.
    """

    kind: str
    name: str
    value: str = ""

    @property
    def text(self) -> str:
        """As a study file writes it: ``label:cpu=icelake``, ``resource:qat``."""
        return f"label:{self.name}={self.value}" if self.kind == "label" else f"resource:{self.name}"

    def matches(self, labels: Mapping[str, str], resources: Mapping[str, float]) -> bool:
        """True if a node with these labels and resources (as ``ray.nodes()`` gives them)
        satisfies this selector (a resource must be offered in a positive amount)."""
        if self.kind == "label":
            return labels.get(self.name) == self.value
        return float(resources.get(self.name) or 0) > 0

    @classmethod
    def parse(cls, text: str) -> "HostSelector":
        """``label:KEY=VALUE`` or ``resource:NAME``. Raises ValueError saying what is accepted
        (label keys and values as Ray, like Kubernetes, spells them: letters, digits, ``-``,
        ``_``, ``.``, a key with an optional ``prefix/``)."""
        kind, sep, rest = text.partition(":")
        accepted = ('write "label:KEY=VALUE" (a node label), "resource:NAME" (a custom resource) '
                    f'or "{EVERY_NODE}"')
        if not sep or kind not in ("label", "resource"):
            raise ValueError(f"not a node selector; {accepted}")
        if kind == "resource":
            if not rest or not re.fullmatch(r"[A-Za-z0-9_.:\-]+", rest):
                raise ValueError(f"resource needs a name of letters, digits, '_', '-', '.'; {accepted}")
            return cls("resource", rest)
        key, eq, value = rest.partition("=")
        if not eq or not key:
            raise ValueError(f"a label selector is KEY=VALUE; {accepted}")
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise ValueError("a label key and value are letters, digits, '-', '_' and '.', beginning "
                             "and ending with a letter or digit (a key may have a 'prefix/')")
        return cls("label", key, value)
_ARRAY_SECTIONS = ("configuration", "operation")


def options_for(section: str) -> dict[str, Option]:
    """The rows of ``OPTIONS`` for one section, by key name."""
    return {o.name: o for o in OPTIONS if o.section == section}


def options_help(rules: "WorkerRules | None" = None) -> str:
    """Plain-text help for every study option, generated from ``OPTIONS`` (for ``--options``);
    with a worker's ``rules``, each workload's parameters as its hello announces them (their
    defaults and allowed values) after the ``[[operation]]`` keys."""
    out = []
    for section in SECTIONS:
        header = f"[{section}]" if section == "study" else f"[[{section}]]"
        out.append(header)
        for o in options_for(section).values():
            rng = o.range_text()
            meta = f"{o.type}, default {o.default_text()}" + (f", range {rng}" if rng else "")
            meta += f", unit {o.unit}" if o.unit else ""
            out.append(f"  {o.name:<20} {o.help} ({meta})")
        if section == "configuration":
            out.append(f"  {'<any other key>':<20} A template variable: {{key}} in an operation's op is "
                       "replaced by its value; a variable named digest or padding is also passed "
                       "as that worker parameter.")
        if section == "operation" and rules is not None:
            out += workload_params_help(rules)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def workload_params_help(rules: "WorkerRules") -> list[str]:
    """Lines listing each workload's ``params`` as the worker announced them: name, default
    and allowed values (``name=default`` or ``name=default (a|b|c)``), and its level kinds."""
    out = ["  params of each workload (from the worker's hello):"]
    for op, spec in rules.workloads.items():
        items = []
        for name in spec.params:
            if name in workload.ORCHESTRATOR_PARAMS or name == "load":
                continue
            default = spec.defaults.get(name)
            item = name if default is None else f"{name}={default}"
            allowed = rules.param_values.get(name)
            items.append(item + (f" ({'|'.join(allowed)})" if allowed else ""))
        levels = ", ".join(spec.levels)
        out.append(f"    {op} (levels {levels}): {', '.join(items)}")
    return out


# --------------------------------------------------------------------------- the parsed study


@dataclass(frozen=True)
class Configuration:
    """One ``[[configuration]]``.

    Attributes:
        name, description: as written.
        backend: the backend this configuration is pinned to, or None (runs on every study
            backend).
        variables: template variables (every key other than the reserved ones), values are
            str, int or float.
        params: worker parameters from the ``params`` table (``digest``, ``padding``).
        index: 0-based position among the configurations in the file.
        cpu: the CPU capability mask its cells run under (``cpumask.NAMES``; ``baseline`` = none).
        fips: whether it runs in FIPS mode (``fips = true``).
        build: the worker build its cells run in (``builds.BUILDS``), from ``fips`` and
            ``library``.
        library: the OpenSSL its ``openssl`` backend links (``builds.LIBRARIES``:
            ``openssl@system``, ``openssl@3.6``); a configuration with another library than
            the system one is pinned to backend ``openssl``.
        hosts: node selectors its blocks need with the Ray executor (``HostSelector``), on
            top of the study's.
    """

    name: str
    description: str
    backend: str | None
    variables: Mapping[str, Any]
    params: Mapping[str, str]
    index: int
    cpu: str = cpumask.BASELINE
    fips: bool = False
    build: str = builds.DEFAULT
    library: str = builds.SYSTEM_LIBRARY
    hosts: tuple["HostSelector", ...] = ()


@dataclass(frozen=True)
class Operation:
    """One ``[[operation]]``: ``op`` is a template, ``sizes`` None for unsized operations;
    ``params`` a workload's parameters (values may hold ``{var}``), ``loads`` its load levels
    (``workload.parse_load`` syntax) or None; ``optional`` operations are skipped, with the
    reason, where the worker's check says they cannot run, instead of stopping the study."""

    label: str
    op: str
    sizes: tuple[int, ...] | None
    index: int
    params: Mapping[str, Any] = field(default_factory=dict)
    loads: tuple[str, ...] | None = None
    p99_bound_ms: float | None = None
    optional: bool = False


@dataclass(frozen=True)
class Study:
    """A parsed and validated study file; options carry their defaults when absent.

    ``backends`` is None and ``rules`` None until ``check_against_worker`` fills in the worker's
    backends (when the file did not name any) and its rules; ``resolve`` needs the rules.
    ``text`` is the file's content (stored with every run). ``max_repetitions`` is the most
    blocks a comparison gets (= ``repetitions`` unless ``until`` is ``decided``). ``hosts``
    are the node selectors of ``[study] hosts`` (without ``every-node``, which sets
    ``every_node``); only the Ray executor reads them.
    """

    path: str
    text: str
    name: str
    description: str
    baseline: str
    backends: tuple[str, ...] | None
    repetitions: int
    until: str
    max_repetitions: int
    margin_pct: float
    verdict_on: str
    multiplicity: bool
    seconds: float
    warmup_s: float
    threads: int
    timeout_s: float
    seed: int
    max_steal_pct: float
    max_other_load_pct: float
    noise_threshold_pct: float
    configurations: tuple[Configuration, ...]
    operations: tuple[Operation, ...]
    source: "SourceMap" = field(repr=False, compare=False)
    rules: "WorkerRules | None" = field(default=None, repr=False, compare=False)
    work_dir: str | None = None
    hosts: tuple["HostSelector", ...] = ()
    every_node: bool = False

    def configuration(self, name: str) -> Configuration:
        """The configuration called ``name``; KeyError if none."""
        for c in self.configurations:
            if c.name == name:
                return c
        raise KeyError(name)

    def backends_of(self, config: Configuration) -> tuple[str, ...]:
        """The backends ``config`` runs on: its pinned backend, or the study's backends."""
        if config.backend:
            return (config.backend,)
        return tuple(self.backends or ())

    def resolve(self, config: Configuration, operation: Operation) -> tuple[str, dict[str, str]]:
        """The worker op name and parameters (without ``size_bytes``) for one configuration and
        operation: ``{var}`` substituted and the name as the worker spells it
        (``opnames.canonical_op``: ``SHA-256`` → ``sha256``); ``digest``/``padding`` variables
        and ``params`` applied where the op takes them (``params`` wins over a variable of the
        same name), their values spelt as the worker does too.

        Raises StudyError (at the operation's ``op`` line) for a variable the configuration
        does not define; ValueError before ``check_against_worker`` gave the study its rules.
        """
        if self.rules is None:
            raise ValueError("resolve needs the worker's rules: call check_against_worker first")
        op = self.op_name(config, operation)
        op = opnames.canonical_op(op, self.rules.ops) or op
        params: dict[str, str] = {}
        for name, value in operation.params.items():
            params[name] = self.substitute(config, operation, "params", str(value))
            if name in workload.FILE_PARAMS:  # the worker gets the file the study names, resolved
                try:
                    params[name] = str(workload.confined_path(params[name], _base_dir(self.path), absolute_ok=False))
                except ValueError as e:
                    raise self.error("operation", operation.index, "params", f"{name} {e}") from None
        for name in WORKER_PARAMS:
            if name in config.variables and self.rules.takes(op, name):
                params[name] = _param_value(name, str(config.variables[name]), self.rules)
        for name, value in config.params.items():
            if self.rules.takes(op, name):
                params[name] = _param_value(name, value, self.rules)
        return op, params

    def is_workload(self, op: str) -> bool:
        """True if the worker op ``op`` is a workload (its hello says so); False before
        ``check_against_worker`` gave the study its rules."""
        return self.rules is not None and op in self.rules.workloads

    def op_name(self, config: Configuration, operation: Operation) -> str:
        """The worker op name for one configuration and operation (``{var}`` substituted).
        Raises StudyError at the operation's ``op`` line for an undefined variable."""
        return self.substitute(config, operation, "op", operation.op)

    def substitute(self, config: Configuration, operation: Operation, key: str, template: str) -> str:
        """``template`` (the operation's ``key``) with every ``{var}`` replaced by the
        configuration's variable. Raises StudyError at that key for an undefined variable."""
        def subst(m: re.Match) -> str:
            var = m.group(1)
            if var not in config.variables:
                known = ", ".join(sorted(config.variables)) or "none"
                raise self.error("operation", operation.index, key,
                                 f"'{{{var}}}' is not defined in configuration '{config.name}' "
                                 f"(its variables: {known}); add {var} = ... to that configuration")
            return str(config.variables[var])
        return _TEMPLATE_VAR.sub(subst, template)

    def error(self, section: str, index: int, key: str | None, problem: str) -> StudyError:
        """A StudyError located at ``key`` of the ``index``-th ``section`` table (see SourceMap)."""
        return StudyError(self.path, self.source.line(section, index, key),
                          self.source.describe(section, index, key), problem)


class SourceMap:
    """Where each table and key sits in a study file's text, for error messages.

    A light scan of the lines (table headers and ``key =`` lines); TOML syntax itself is
    checked by tomllib, whose errors carry their own line and column.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"']+)\s*\]\]?")
    _KEY = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_\-]+))\s*[.=]""")

    def __init__(self, text: str, names: Mapping[tuple[str, int], str] | None = None):
        self.names: dict[tuple[str, int], str] = dict(names or {})
        self._lines: dict[tuple[str, int, str | None], int] = {}
        counts: dict[str, int] = {}
        current: tuple[str, int] | None = ("", 0)  # keys before any header: top level
        in_multiline = False
        # TOML's lines end at LF (or CRLF) only: str.splitlines would also split at \u2028, \x0c,
        # \x1c... inside strings and comments, and number the lines wrong (and make millions)
        for no, raw in enumerate(text.split("\n"), start=1):
            if raw.count('"""') % 2 == 1 or raw.count("'''") % 2 == 1:
                in_multiline = not in_multiline
                if not in_multiline:
                    continue
            elif in_multiline:
                continue
            m = self._HEADER.match(raw)
            if m:
                name = m.group(2).strip("\"'")
                if m.group(1) == "[[":
                    idx = counts.get(name, 0)
                    counts[name] = idx + 1
                else:
                    idx = 0
                current = (name, idx)
                self._lines.setdefault((name, idx, None), no)
                continue
            m = self._KEY.match(raw)
            if m and current is not None:
                key = m.group(1) or m.group(2) or m.group(3)
                self._lines.setdefault((current[0], current[1], key), no)

    def line(self, section: str, index: int = 0, key: str | None = None) -> int | None:
        """1-based line of ``key`` in the ``index``-th ``section`` table (the table's header line
        if the key is absent or None); None if neither is found."""
        if key is not None and (section, index, key) in self._lines:
            return self._lines[(section, index, key)]
        return self._lines.get((section, index, None))

    def describe(self, section: str, index: int, key: str | None) -> str:
        """``[study] field 'seconds'`` / ``configuration 'x' (#2), field 'rsa_bits'``."""
        if section == "study":
            where = "[study]"
        elif section == "":
            where = "top level"
        else:
            name = self.names.get((section, index))
            where = f"{section} '{one_line(name, SHOWN)}'" if name else f"{section} #{index + 1}"
        return f"{where}, field '{one_line(key, SHOWN)}'" if key else where


def _suggest(word: str, candidates: Iterable[str]) -> str:
    """`` did you mean 'x'?`` for the closest candidate, or ''."""
    if len(word) > 64:  # no misspelling is that long; and difflib's time grows with it
        return ""
    close = difflib.get_close_matches(word, [c for c in candidates if len(c) <= 64], n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _type_ok(opt: Option, value: Any) -> bool:
    if opt.type == "string":
        return isinstance(value, str)
    if opt.type == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if opt.type == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if opt.type == "strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if opt.type == "ints":
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if opt.type == "sizes":  # each element is checked by _Parser.sizes
        return isinstance(value, list)
    if opt.type == "hosts":  # each element is checked by _Parser.hosts
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    if opt.type == "table":
        return isinstance(value, dict)
    if opt.type == "bool":
        return isinstance(value, bool)
    raise AssertionError(opt.type)


_TYPE_WORDS = {"string": "a string", "int": "an integer", "float": "a number",
               "strings": "a list of strings", "ints": "a list of integers",
               "sizes": 'a list of sizes (bytes, or strings such as "16KiB")', "table": "a table",
               "hosts": 'a list of node selectors ("label:KEY=VALUE", "resource:NAME") or "every-node"',
               "bool": "true or false"}


def _in_range(opt: Option, v: float) -> bool:
    return not ((opt.min is not None and v < opt.min) or (opt.max is not None and v > opt.max)
                or (opt.above is not None and v <= opt.above))


class _Parser:
    """Turns the TOML document into a ``Study``, raising StudyError at the first problem."""

    def __init__(self, path: str, text: str, doc: dict, stored: bool = False):
        self.path, self.text, self.doc, self.stored = path, text, doc, stored
        names = {}
        for section in _ARRAY_SECTIONS:
            tables = doc.get(section)
            if isinstance(tables, list):
                for i, t in enumerate(tables):
                    if isinstance(t, dict):
                        n = t.get("name") if section == "configuration" else (t.get("label") or t.get("op"))
                        if isinstance(n, str):
                            names[(section, i)] = n
        self.source = SourceMap(text, names)

    def error(self, section: str, index: int, key: str | None, problem: str) -> StudyError:
        """A StudyError located at ``key`` of the ``index``-th ``section`` table."""
        return StudyError(self.path, self.source.line(section, index, key),
                          self.source.describe(section, index, key), problem)

    def options(self, section: str, index: int, table: dict, allow_extra: bool) -> dict[str, Any]:
        """Type-check, range-check and default the keys of one table (extra keys kept if allowed)."""
        known = options_for(section)
        values: dict[str, Any] = {}
        for key, value in table.items():
            opt = known.get(key)
            if opt is None:
                if allow_extra:
                    continue
                raise self.error(section, index, key, f"unknown key{_suggest(key, known)}"
                                 f" (known: {', '.join(known)})")
            if not _type_ok(opt, value):
                raise self.error(section, index, key,
                                 f"must be {_TYPE_WORDS[opt.type]}, not {_toml_repr(value)}")
            for v in value if isinstance(value, list) else [value]:
                problem = _int64_problem(v)
                if problem:
                    raise self.error(section, index, key, problem)
                if isinstance(v, float) and not math.isfinite(v):
                    raise self.error(section, index, key, f"must be a finite number, not {v}")
            if opt.type == "sizes":
                value = self.sizes(section, index, key, value)
            numbers = value if opt.type in ("ints", "sizes") else [value] if opt.type in ("int", "float") else []
            for v in ([] if self.stored else numbers):
                if not _in_range(opt, v):
                    unit = f" {opt.unit}" if opt.unit else ""
                    raise self.error(section, index, key,
                                     f"{v}{unit} is out of range; allowed: {opt.range_text()}{unit} "
                                     f"({opt.help.rstrip('.')})")
            if opt.type == "hosts":
                value = self.hosts(section, index, key, value)
            if opt.type in ("strings", "ints", "sizes", "hosts") and not value:
                raise self.error(section, index, key, "must not be empty (omit the key for the default)")
            values[key] = float(value) + 0.0 if opt.type == "float" else value  # + 0.0: -0.0 is 0.0
        for opt in known.values():
            if opt.name not in values:
                if opt.default is REQUIRED:
                    raise self.error(section, index, None, f"missing required key '{opt.name}' ({opt.help})")
                values[opt.name] = opt.default
        return values

    def sizes(self, section: str, index: int, key: str, value: list) -> list[int]:
        """A ``sizes`` list as bytes: each element an int or a size string (``opnames.parse_size``:
        ``"16KiB"``, ``"16k"``, ``"1MiB"``; k = 1024). Raises StudyError naming the element (its
        1-based position and value) that is neither, and what is accepted."""
        out = []
        for i, v in enumerate(value, start=1):
            if isinstance(v, int) and not isinstance(v, bool):
                out.append(v)
                continue
            try:
                if not isinstance(v, str):
                    raise ValueError("write bytes as an integer (4096) or a string with a binary suffix "
                                     "(\"16KiB\", \"16k\", \"1MiB\"; k = 1024)")
                out.append(opnames.parse_size(v))
            except ValueError as e:
                raise self.error(section, index, key,
                                 f"element {i} ({_toml_repr(v)}) is not a size: {e}") from None
            if out[-1] > INT64[1]:
                raise self.error(section, index, key, f"element {i} ({_toml_repr(v)}) is more than 2^63-1 bytes")
        return out

    def hosts(self, section: str, index: int, key: str, value: str | list[str]) -> list[str]:
        """A ``hosts`` value as a list of its elements (a lone string is one element), each
        checked: ``every-node`` (in [study] only) or a ``HostSelector``. Raises StudyError
        naming the element and what is accepted."""
        items = [value] if isinstance(value, str) else list(value)
        for i, item in enumerate(items, start=1):
            if item == EVERY_NODE:
                if section != "study":
                    raise self.error(section, index, key,
                                     f'"{EVERY_NODE}" applies to the whole study; write hosts = '
                                     f'"{EVERY_NODE}" in [study] (a configuration takes node selectors)')
                continue
            try:
                HostSelector.parse(item)
            except ValueError as e:
                raise self.error(section, index, key, f"element {i} ({_toml_repr(item)}): {e}") from None
        if len(set(items)) != len(items):
            raise self.error(section, index, key, "lists a selector twice")
        return items

    def tables(self, section: str) -> list[dict]:
        """The ``[[section]]`` array of tables; StudyError if absent or not an array of tables."""
        tables = self.doc.get(section)
        header = f"[[{section}]]"
        if tables is None:
            raise StudyError(self.path, None, None, f"no {header} table; a study needs at least one")
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise StudyError(self.path, self.source.line(section, 0), section,
                             f"must be an array of tables, written {header}")
        return tables

    def parse(self) -> Study:
        """The whole document as a Study; StudyError at the first problem."""
        doc = self.doc
        for key, value in doc.items():
            if key not in SECTIONS:
                raise StudyError(self.path, self.source.line(key, 0) or self.source.line("", 0, key), key,
                                 f"unknown table or key{_suggest(key, SECTIONS)} "
                                 "(a study has [study], [[configuration]] and [[operation]])")
        study_table = doc.get("study")
        if not isinstance(study_table, dict):
            raise StudyError(self.path, self.source.line("study"), None,
                             "missing [study] table (with at least name and baseline)")
        s = self.options("study", 0, study_table, allow_extra=False)

        work_dir = s["work_dir"]
        if work_dir is not None and not self.stored:
            try:  # relative to the study file's directory; see workload.confined_path
                work_dir = str(workload.confined_path(work_dir, _base_dir(self.path), absolute_ok=True))
            except ValueError as e:
                raise self.error("study", 0, "work_dir", f"{_toml_repr(s['work_dir'])} {e}") from None
        config_tables, op_tables = self.tables("configuration"), self.tables("operation")
        for section, tables in (("configuration", config_tables), ("operation", op_tables)):
            if len(tables) > MAX_TABLES:
                raise self.error(section, MAX_TABLES, None, f"the study has {len(tables)} [[{section}]] "
                                 f"tables; at most {MAX_TABLES}")
        if len(config_tables) * len(op_tables) > MAX_PAIRS:
            raise StudyError(self.path, None, None,
                             f"{len(config_tables)} configurations × {len(op_tables)} operations = "
                             f"{len(config_tables) * len(op_tables)} pairs; at most {MAX_PAIRS} (split the study)")
        configs = [self.configuration(i, t) for i, t in enumerate(config_tables)]
        operations = [self.operation(i, t) for i, t in enumerate(op_tables)]

        seen: dict[str, int] = {}
        for c in configs:
            if c.name in seen:
                raise self.error("configuration", c.index, "name",
                                 f"duplicate configuration name '{c.name}' (also #{seen[c.name] + 1}); names must be unique")
            seen[c.name] = c.index
        labels: dict[str, int] = {}
        for o in operations:
            if o.label in labels:
                raise self.error("operation", o.index, "label",
                                 f"duplicate operation label '{o.label}' (also #{labels[o.label] + 1}); "
                                 "give each [[operation]] its own label")
            labels[o.label] = o.index
        if s["baseline"] not in seen:
            raise self.error("study", 0, "baseline",
                             f"no configuration named '{s['baseline']}'{_suggest(s['baseline'], seen)} "
                             f"(configurations: {', '.join(seen)})")
        if s["timeout_s"] <= s["warmup_s"] + s["seconds"]:
            raise self.error("study", 0, "timeout_s",
                             f"{s['timeout_s']:g} s does not exceed warmup_s + seconds = "
                             f"{s['warmup_s'] + s['seconds']:g} s; raise timeout_s")
        backends = tuple(s["backends"]) if s["backends"] else None
        if backends and len(set(backends)) != len(backends):
            raise self.error("study", 0, "backends", "lists a backend twice")
        if s["verdict_on"] not in VERDICT_ON:
            raise self.error("study", 0, "verdict_on",
                             f"must be one of {', '.join(repr(v) for v in VERDICT_ON)}, not "
                             f"{_toml_repr(s['verdict_on'])}{_suggest(s['verdict_on'], VERDICT_ON)}")
        if s["until"] not in UNTIL:
            raise self.error("study", 0, "until", f"must be one of {', '.join(repr(u) for u in UNTIL)}, "
                             f"not {_toml_repr(s['until'])}{_suggest(s['until'], UNTIL)}")
        max_reps = s["repetitions"]
        if s["until"] == "decided":
            max_reps = s["max_repetitions"] if s["max_repetitions"] is not None else 4 * s["repetitions"]
            if max_reps < s["repetitions"]:
                raise self.error("study", 0, "max_repetitions",
                                 f"{max_reps} is fewer than repetitions = {s['repetitions']}; raise it")
        elif s["max_repetitions"] is not None:
            raise self.error("study", 0, "max_repetitions",
                             'applies only with until = "decided"; add that or remove max_repetitions')

        study = Study(
            path=self.path, text=self.text, name=s["name"], description=s["description"],
            baseline=s["baseline"], backends=backends, repetitions=s["repetitions"],
            until=s["until"], max_repetitions=max_reps, margin_pct=s["margin_pct"],
            verdict_on=s["verdict_on"],
            multiplicity=s["multiplicity"], seconds=s["seconds"], warmup_s=s["warmup_s"],
            threads=s["threads"], timeout_s=s["timeout_s"], seed=s["seed"],
            max_steal_pct=s["max_steal_pct"], max_other_load_pct=s["max_other_load_pct"],
            noise_threshold_pct=s["noise_threshold_pct"], configurations=tuple(configs),
            operations=tuple(operations), source=self.source, work_dir=work_dir,
            hosts=tuple(HostSelector.parse(h) for h in s["hosts"] or () if h != EVERY_NODE),
            every_node=EVERY_NODE in (s["hosts"] or ()))
        _check_templates(study)
        return study

    def configuration(self, index: int, table: dict) -> Configuration:
        """One ``[[configuration]]``: options, template variables and worker params, checked."""
        v = self.options("configuration", index, table, allow_extra=True)
        reserved = options_for("configuration")
        variables = {}
        for key, value in table.items():
            if key in reserved:
                continue
            if not _IDENT.match(key):
                raise self.error("configuration", index, key,
                                 "a template variable name must be a letter or _ followed by letters, digits or _")
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise self.error("configuration", index, key,
                                 f"a template variable must be a string or a number, not {_toml_repr(value)}")
            problem = _int64_problem(value)
            if problem:
                raise self.error("configuration", index, key, problem)
            variables[key] = value
        params = {}
        for key, value in (v["params"] or {}).items():
            if key not in WORKER_PARAMS:
                hint = ("; message sizes go in [[operation]] sizes" if key == "size_bytes"
                        else _suggest(key, WORKER_PARAMS))
                raise self.error("configuration", index, "params",
                                 f"unknown worker parameter '{key}'{hint} (known: {', '.join(WORKER_PARAMS)})")
            if not isinstance(value, str):
                raise self.error("configuration", index, "params",
                                 f"{key} must be a string, not {_toml_repr(value)}")
            params[key] = value
        if v["cpu"] not in cpumask.MASKS:
            raise self.error("configuration", index, "cpu",
                             f"unknown CPU mask {_toml_repr(v['cpu'])}{_suggest(v['cpu'], cpumask.NAMES)} "
                             f"(known: {', '.join(cpumask.NAMES)})")
        backend = self.check_library(index, v)
        return Configuration(name=v["name"], description=v["description"], backend=backend,
                             variables=variables, params=params, index=index, cpu=v["cpu"],
                             fips=v["fips"], build=builds.for_configuration(v["fips"], v["library"]),
                             library=v["library"],
                             hosts=tuple(HostSelector.parse(h) for h in v["hosts"] or ()))

    def check_library(self, index: int, v: Mapping[str, Any]) -> str | None:
        """Check a configuration's ``library`` against ``fips`` and ``backend``; return its
        backend (``openssl`` for a library other than the system one, which changes only the
        openssl backend). Raises StudyError at the offending key."""
        library = v["library"]
        if library not in builds.LIBRARIES:
            raise self.error("configuration", index, "library",
                             f"unknown library {_toml_repr(library)}{_suggest(library, builds.LIBRARIES)} "
                             f"(known: {', '.join(builds.LIBRARIES)})")
        if library == builds.SYSTEM_LIBRARY:
            return v["backend"]
        if v["fips"]:
            raise self.error("configuration", index, "library",
                             f"library {_toml_repr(library)} with fips = true is not supported: the "
                             f"FIPS build uses the system OpenSSL; compare FIPS and {library} in "
                             "separate configurations")
        if v["backend"] not in (None, builds.LIBRARY_BACKEND):
            raise self.error("configuration", index, "backend",
                             f"library {_toml_repr(library)} changes only the {builds.LIBRARY_BACKEND} "
                             f"backend, so this configuration runs on {builds.LIBRARY_BACKEND}; "
                             f"write backend = \"{builds.LIBRARY_BACKEND}\" or remove it")
        return builds.LIBRARY_BACKEND

    def operation(self, index: int, table: dict) -> Operation:
        """One ``[[operation]]``, checked (template syntax, no duplicate sizes)."""
        v = self.options("operation", index, table, allow_extra=False)
        for m in _TEMPLATE_VAR.finditer(v["op"]):
            if not _IDENT.match(m.group(1)):
                raise self.error("operation", index, "op",
                                 f"'{m.group(0)}' is not a template variable; write {{name}} with a variable name")
        if v["sizes"] is not None and len(set(v["sizes"])) != len(v["sizes"]):
            raise self.error("operation", index, "sizes", "lists a size twice")
        params = v["params"] or {}
        if len(params) > MAX_PARAMS:
            raise self.error("operation", index, "params", f"has {len(params)} parameters; no workload "
                             f"takes more than a few dozen (at most {MAX_PARAMS})")
        for key, value in params.items():
            if not _IDENT.match(key):
                raise self.error("operation", index, "params", f"'{one_line(key, SHOWN)}' is not a parameter name")
            if key in workload.ORCHESTRATOR_PARAMS:
                raise self.error("operation", index, "params",
                                 f"{key} is not a study's to set: {workload.ORCHESTRATOR_PARAMS[key]}")
            problem = _int64_problem(value)
            if problem:
                raise self.error("operation", index, "params", f"{key}: {problem}")
            if isinstance(value, bool):
                # as the worker spells a switch (storage's direct = true)
                value = params[key] = "true" if value else "false"
            if not isinstance(value, (str, int)):
                raise self.error("operation", index, "params",
                                 f"{key} must be a string, an integer or a boolean, not {_toml_repr(value)}")
            if key.endswith("_bytes") and isinstance(value, str) and not _TEMPLATE_VAR.search(value):
                try:  # file_bytes = "64MiB": bytes, as sizes = [...] reads them
                    params[key] = opnames.parse_size(value)
                except ValueError as e:
                    raise self.error("operation", index, "params", f"{key}: {e}") from None
            for m in _TEMPLATE_VAR.finditer(str(value)):
                if not _IDENT.match(m.group(1)):
                    raise self.error("operation", index, "params",
                                     f"'{m.group(0)}' in {key} is not a template variable; write {{name}}")
            if key in workload.FILE_PARAMS and not self.stored and not _TEMPLATE_VAR.search(str(value)):
                problem = _file_param_problem(key, str(value), self.path)
                if problem:
                    raise self.error("operation", index, "params", problem)
        loads = v["loads"]
        if loads is not None:
            try:
                loads = workload.expand_loads(loads)
            except ValueError as e:
                raise self.error("operation", index, "loads", str(e)) from None
            for text in loads:
                try:
                    workload.parse_load(text)
                except ValueError as e:
                    raise self.error("operation", index, "loads", str(e)) from None
            if len({workload.parse_load(t).label for t in loads}) != len(loads):
                raise self.error("operation", index, "loads", "lists a load level twice")
        return Operation(label=v["label"] or v["op"], op=v["op"],
                         sizes=tuple(v["sizes"]) if v["sizes"] is not None else None, index=index,
                         params=dict(params), loads=tuple(loads) if loads is not None else None,
                         p99_bound_ms=v["p99_bound_ms"], optional=v["optional"])


def _check_templates(study: Study) -> None:
    """Every {var} resolves in every configuration; every variable is used somewhere. Raises
    StudyError."""
    used: set[str] = set()
    for o in study.operations:
        used.update(m.group(1) for m in _TEMPLATE_VAR.finditer(o.op))
        for value in o.params.values():
            used.update(m.group(1) for m in _TEMPLATE_VAR.finditer(str(value)))
    for c in study.configurations:
        for var in c.variables:
            if var not in used and var not in WORKER_PARAMS:
                candidates = sorted(used | set(options_for("configuration")))
                raise study.error("configuration", c.index, var,
                                  f"unknown key: not a configuration option and not used by any "
                                  f"operation's op{_suggest(var, candidates)}")
        for o in study.operations:
            study.op_name(c, o)
            for value in o.params.values():
                study.substitute(c, o, "params", str(value))


def _check_workload(study: Study, config: Configuration, o: Operation, op: str, rules: "WorkerRules") -> None:
    """A workload operation's ``params`` (each one the workload takes, enumerated values among
    the allowed ones, after ``{var}``) and ``loads`` (file descriptors enough for each level; a
    named port free); ``params`` and ``loads`` on a primitive operation are errors. Raises
    StudyError at the key."""
    if op not in rules.workloads:
        for key in ("params", "loads"):
            if getattr(o, key):
                names = ", ".join(sorted(rules.workloads)) or "none"
                raise study.error("operation", o.index, key,
                                  f"'{op}' is a primitive operation; {key} applies to workloads ({names})")
        return
    takes = sorted(rules.op_params.get(op, ()))
    for name, raw in o.params.items():
        if name == "load":
            raise study.error("operation", o.index, "params", "the load level goes in loads = [...], not params")
        if name == "size_bytes":
            raise study.error("operation", o.index, "params", "bytes per transaction go in sizes = [...], not params")
        if name not in takes:
            raise study.error("operation", o.index, "params",
                              f"'{op}' has no parameter '{name}'{_suggest(name, takes)} (it takes: {', '.join(takes)})")
        value = study.substitute(config, o, "params", str(raw))
        if name in workload.FILE_PARAMS:
            problem = _file_param_problem(name, value, study.path)
            if problem:
                raise study.error("operation", o.index, "params", problem)
        allowed = rules.param_values.get(name)
        if allowed and value not in allowed:
            via = f" (from '{raw}' in configuration '{config.name}')" if value != str(raw) else ""
            raise study.error("operation", o.index, "params",
                              f"{name} '{value}'{via} is not one of {', '.join(allowed)}{_suggest(value, allowed)}")
    _check_levels(study, config, o, rules.workloads[op], rules)
    if "port" in o.params:
        address = study.substitute(config, o, "params", str(o.params.get("address", "127.0.0.1")))
        try:
            port = int(study.substitute(config, o, "params", str(o.params["port"])))
        except ValueError:
            raise study.error("operation", o.index, "params", "port must be a whole number") from None
        problem = workload.port_problem(address, port)
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
            load = workload.parse_load(text, rules.limits)
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
        problem = workload.descriptor_problem(load, spec.mode(params))
        if problem:
            raise study.error("operation", o.index, "loads", problem)
    if spec.job:
        try:
            cap, slices = workload.job_concurrency(params, spec.defaults)
        except ValueError as e:
            raise study.error("operation", o.index, "params", str(e)) from None
        problem = workload.job_descriptor_problem(cap, slices)
        if problem:
            raise study.error("operation", o.index, "params" if "cap" in o.params or "slices" in o.params
                              else "loads", problem)


def _level_problem(spec: "WorkloadSpec", load: workload.Load, rules: "WorkerRules") -> str | None:
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


def _param_value(name: str, value: str, rules: "WorkerRules") -> str:
    """A worker parameter's value as the worker spells it: ``SHA-256`` → ``sha256``, ``PSS`` →
    ``pss`` (``opnames.canonical_op`` against the allowed values); the value itself when it
    matches none (the caller refuses it)."""
    allowed = rules.param_values.get(name, ())
    return value if value in allowed else opnames.canonical_op(value, allowed) or value


def _param_hint(name: str, value: str, allowed: Iterable[str]) -> str:
    """"Did you mean" for a worker parameter's value: for a digest only the same hash
    (``opnames.unknown_op_hint``: ``sha257`` suggests nothing, never ``sha256``), for others
    the closest spelling."""
    return opnames.unknown_op_hint(value, allowed) if name == "digest" else _suggest(value, allowed)


def _toml_repr(value: Any) -> str:
    """A value as a message quotes it: TOML-ish, one line, long strings and numbers elided."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{one_line(value, SHOWN)}"'
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int):
        return _int_text(value)
    return one_line(str(value), SHOWN)


def _int_text(n: int) -> str:
    """An integer as text, elided past ``SHOWN`` digits (and without ``str``'s 4300-digit limit
    biting: such a number is described by its size)."""
    if abs(n) < 10**SHOWN:
        return str(n)
    digits = int(abs(n).bit_length() * 0.30103) + 1
    return f"{'-' if n < 0 else ''}a number of about {digits} digits"


def _base_dir(path: str) -> str:
    """The directory a study file's relative paths start from: the file's own (the current
    directory for a study given as text, whose ``path`` is only a name)."""
    return os.path.dirname(os.path.abspath(path))


def _file_param_problem(key: str, value: str, path: str) -> str | None:
    """Why ``value`` cannot be the file parameter ``key`` of a study at ``path``, or None
    (``workload.confined_path``: relative to the study file's directory, inside it, no
    symbolic link)."""
    try:
        workload.confined_path(value, _base_dir(path), absolute_ok=False)
    except ValueError as e:
        return f"{key} {_toml_repr(value)} {e}"
    return None


def _int64_problem(value: Any) -> str | None:
    """Why ``value`` (from the TOML document) is not a 64-bit integer TOML allows, or None."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        return f"{_int_text(value)} is outside the 64-bit range of TOML integers (-2^63..2^63-1)"
    return None


def parse(text: str, path: str = "<study>", stored: bool = False) -> Study:
    """Parse and validate study-file text; ``path`` is only used in messages.

    ``stored``: the text of a study a stored run was made with, by this or an older cryptoperf:
    its numbers are not range-checked (older versions allowed other ranges, e.g. 2
    repetitions), so that every stored run still loads.

    Returns a Study with defaults filled in. Raises StudyError naming the file, line and field.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise StudyError(path, int(m.group(1)) if m else None, None,
                         f"not valid TOML: {e}") from None
    except ValueError:
        # tomllib converts a decimal integer with int(), whose limit is 4300 digits
        # (sys.get_int_max_str_digits); TOML integers are 64-bit anyway
        raise StudyError(path, _long_number_line(text), None,
                         "not valid TOML: an integer of thousands of digits; TOML integers are "
                         "64-bit (-2^63..2^63-1)") from None
    except RecursionError:
        raise StudyError(path, None, None,
                         "not valid TOML for a study: arrays or inline tables nested too deeply "
                         "for the parser (a study file nests at most a few levels)") from None
    return _Parser(path, text, doc, stored).parse()


def _long_number_line(text: str) -> int | None:
    """The line of the first run of more than 4000 digits in ``text`` (tomllib's error for it
    carries none), or None."""
    m = re.search(r"[0-9_]{4000}", text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def load(path: str | Path) -> Study:
    """Read and parse a study file. Raises StudyError if it cannot be read or is invalid."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_STUDY_BYTES + 1)
    except FileNotFoundError:
        raise StudyError(str(path), None, None, "no such study file") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise StudyError(str(path), None, None, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    if len(data) > MAX_STUDY_BYTES:
        raise StudyError(str(path), None, None, f"is larger than {MAX_STUDY_BYTES >> 20} MiB; a study file "
                         "is a few KiB of TOML (is this the right file?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise StudyError(str(path), line, None, f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                         f"{e.start}); TOML files are UTF-8") from None
    return parse(text, str(path))


def check_against_worker(study: Study, rules: "WorkerRules") -> Study:
    """Check the study against the rules the worker announced in its ``hello``: backend and
    (substituted) operation names, the worker parameters each configuration sets (known names,
    allowed values), message sizes only on operations that take one and within the worker's
    limit, and warm-up, measuring time and threads within the worker's limits.

    Returns the study with ``rules`` set and ``backends`` filled in (the worker's, when the
    file named none). Raises StudyError at the offending line, listing the known names. The
    ``mock`` backends (``mock``, ``mock:SCALE``, ``mock:crash``, ``mock:hang``) are accepted
    for tests.
    """
    backends = rules.backends

    def known_backend(b: str) -> bool:
        return b in backends or b == "mock" or b.startswith("mock:")

    for b in study.backends or ():
        if not known_backend(b):
            raise study.error("study", 0, "backends",
                              f"unknown backend '{b}'{_suggest(b, backends)} (known: {', '.join(backends)})")
    for c in study.configurations:
        if c.backend is not None and not known_backend(c.backend):
            raise study.error("configuration", c.index, "backend",
                              f"unknown backend '{c.backend}'{_suggest(c.backend, backends)} "
                              f"(known: {', '.join(backends)})")
    for key, limit_name in (("seconds", "max_seconds"), ("warmup_s", "max_warmup_s"), ("threads", "max_threads")):
        value, limit = getattr(study, key), rules.limits[limit_name]
        if value > limit:
            unit = "" if key == "threads" else " s"
            raise study.error("study", 0, key, f"{_num(value)}{unit} is above the worker's limit of "
                              f"{_num(limit)}{unit} ({limit_name} in its hello)")
    for c in study.configurations:
        for name in WORKER_PARAMS:
            for key, value in ((name, c.variables.get(name)), ("params", c.params.get(name))):
                allowed = rules.param_values.get(name, ())
                if value is not None and _param_value(name, str(value), rules) not in allowed:
                    raise study.error("configuration", c.index, key,
                                      f"{name} {_toml_repr(value)} is not one of {', '.join(allowed)}"
                                      f"{_param_hint(name, str(value), allowed)}")
    study = dataclasses.replace(study, rules=rules, backends=study.backends or tuple(backends))
    per_backend = sum(max(1, len(o.sizes or ())) * max(1, len(o.loads or ())) for o in study.operations)
    cells = per_backend * sum(len(study.backends_of(c)) for c in study.configurations)
    if cells > MAX_CELLS:
        raise study.error("study", 0, None, f"the study expands to {cells} cells (configurations × backends × "
                          f"operations × sizes × loads); at most {MAX_CELLS}: split it")
    for c in study.configurations:
        for o in study.operations:
            written = study.op_name(c, o)
            op = opnames.canonical_op(written, rules.ops)
            if op is None:
                via = f" (from '{o.op}' in configuration '{c.name}')" if written != o.op else ""
                raise study.error("operation", o.index, "op",
                                  f"unknown operation '{written}'{via}{opnames.unknown_op_hint(written, rules.ops)}; "
                                  f"known: {', '.join(rules.ops)}")
            _check_workload(study, c, o, op, rules)
            if o.sizes is not None:
                if not rules.takes(op, "size_bytes"):
                    raise study.error("operation", o.index, "sizes",
                                      f"'{op}' has no message, so no size; remove sizes from this operation")
                big = [n for n in o.sizes if n > rules.limits["max_size_bytes"]]
                if big:
                    raise study.error("operation", o.index, "sizes",
                                      f"{big[0]} bytes is above the worker's limit of "
                                      f"{_num(rules.limits['max_size_bytes'])} bytes (max_size_bytes in its hello)")
    base = study.configuration(study.baseline)
    base_backends = set(study.backends_of(base))
    for c in study.configurations:
        missing = [b for b in study.backends_of(c) if b not in base_backends]
        if missing:
            why = (f" (library = \"{c.library}\" runs on backend {builds.LIBRARY_BACKEND} only)"
                   if c.library != builds.SYSTEM_LIBRARY else "")
            raise study.error("configuration", c.index, "library" if why else "backend",
                              f"runs on {', '.join(missing)}{why} where the baseline '{base.name}' does not; "
                              "deltas are against the baseline on the same backend")
    return study
