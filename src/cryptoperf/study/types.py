"""The parsed study: ``Study``, its ``Configuration``s, ``Operation``s and ``Contrast``s, and the node
selectors of ``hosts`` (``HostSelector``)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from cryptoperf import builds, cpumask, opnames, workdir
from cryptoperf.errors import StudyError
from cryptoperf.study.options import WORKER_PARAMS

if TYPE_CHECKING:
    from cryptoperf.hello import WorkerRules
    from cryptoperf.study.parse import SourceMap

TEMPLATE_VAR = re.compile(r"\{([^{}]*)\}")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

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
class Contrast:
    """One ``[[contrast]]``: ``configuration`` compared with ``baseline`` (its reference), paired
    block by block in every group both ran, like a comparison with the study's baseline and in
    the same multiplicity family.

    Attributes:
        name: as written, default ``"<configuration> vs <baseline>"``.
        baseline, configuration: configuration names (different; neither pair the study's
            baseline comparisons already make).
        index: 0-based position among the contrasts in the file.
    """

    name: str
    baseline: str
    configuration: str
    index: int


@dataclass(frozen=True)
class Operation:
    """One ``[[operation]]``: ``op`` is a template, ``sizes`` None for unsized operations;
    ``params`` a workload's parameters (values may hold ``{var}``), ``loads`` its load levels
    (``levels.parse_load`` syntax) or None, ``threads`` a primitive's thread counts, each a row
    (None: the study's ``threads``); ``optional`` operations are skipped, with the
    reason, where the worker's check says they cannot run, instead of stopping the study.
    ``server`` (a command template), ``server_files``, ``server_env`` and ``server_ready_s``
    describe a server under test started for each repetition (``run.server``). ``verdict_on``:
    the metric this operation's verdicts are decided on (``stats.METRICS``), None: the study's."""

    label: str
    op: str
    sizes: tuple[int, ...] | None
    index: int
    params: Mapping[str, Any] = field(default_factory=dict)
    loads: tuple[str, ...] | None = None
    threads: tuple[int, ...] | None = None
    p99_bound_ms: float | None = None
    optional: bool = False
    server: str | None = None
    server_files: tuple[str, ...] = ()
    server_env: Mapping[str, str] = field(default_factory=dict)
    server_ready_s: float = 10.0
    verdict_on: str | None = None


@dataclass(frozen=True)
class Study:
    """A parsed and validated study file; options carry their defaults when absent.

    ``backends`` is None and ``rules`` None until ``check_against_worker`` fills in the worker's
    backends (when the file did not name any) and its rules; ``resolve`` needs the rules.
    ``own_rules`` are the rules of the builds checked against their own hello (build → rules: a
    configuration's ``worker`` binary, the Go worker), which ``rules_for`` gives their
    configurations.
    ``text`` is the file's content (stored with every run). ``max_repetitions`` is the most
    blocks a comparison gets (= ``repetitions`` unless ``until`` is ``decided``). ``hosts``
    are the node selectors of ``[study] hosts`` (without ``every-node``, which sets
    ``every_node``); only the Ray executor reads them, and ``slices_on`` (``host`` or
    ``nodes``: a job's slices each on its own Ray node). ``power_note`` says why the design need
    not find a 5 % change at CV 3 % ('' when it gives no reason). ``explain``: explain the decided
    comparisons after the last block (``explain.pair.explain_decided``). ``contrasts`` are the
    ``[[contrast]]`` pairs compared besides every configuration against the baseline.
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
    seed: int | None
    max_steal_pct: float
    max_other_load_pct: float
    noise_threshold_pct: float
    configurations: tuple[Configuration, ...]
    operations: tuple[Operation, ...]
    source: "SourceMap" = field(repr=False, compare=False)
    rules: "WorkerRules | None" = field(default=None, repr=False, compare=False)
    own_rules: "Mapping[str, WorkerRules]" = field(default_factory=dict, repr=False, compare=False)
    work_dir: str | None = None
    hosts: tuple["HostSelector", ...] = ()
    every_node: bool = False
    slices_on: str = "host"
    power_note: str = ""
    explain: bool = False
    contrasts: tuple[Contrast, ...] = ()

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

    def paired_on(self, config: Configuration) -> str | None:
        """The backend whose baseline cells ``config``'s cells are paired with, when ``config``
        runs on a backend the baseline does not: the baseline's one backend, for a
        configuration that runs on one backend itself (``backend`` pinned, or a study of one
        backend) — an implementation compared with another, block by block. None when its cells
        pair with the baseline on their own backend, and for the baseline itself. A configuration
        on several backends the baseline lacks pairs on none (``check_against_worker`` refuses
        it)."""
        if config.name == self.baseline:
            return None
        base, mine = self.backends_of(self.configuration(self.baseline)), self.backends_of(config)
        if all(b in base for b in mine) or len(base) != 1 or len(mine) != 1:
            return None
        return base[0]

    def pairing(self) -> dict[str, str]:
        """Configuration name → ``paired_on`` for every configuration paired on another backend
        than its own ({} when every comparison is on one backend)."""
        return {c.name: b for c in self.configurations if (b := self.paired_on(c)) is not None}

    def rules_for(self, config: Configuration) -> "WorkerRules":
        """The rules ``config``'s cells are checked and resolved against: its build's own
        (``own_rules``), else the default worker's. ValueError before ``check_against_worker``."""
        if self.rules is None:
            raise ValueError("rules_for needs the worker's rules: call check_against_worker first")
        return self.own_rules.get(config.build, self.rules)

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
        rules = self.rules_for(config)
        op = self.op_name(config, operation)
        op = opnames.canonical_op(op, rules.ops) or op
        params: dict[str, str] = {}
        spec = rules.workloads.get(op)
        for name, value in operation.params.items():
            params[name] = self.substitute(config, operation, "params", str(value))
            if spec is not None and name in spec.file_params:  # the worker gets the file the study names, resolved
                try:
                    params[name] = str(workdir.confined_path(params[name], base_dir(self.path), absolute_ok=False))
                except ValueError as e:
                    raise self.error("operation", operation.index, "params", f"{name} {e}") from None
        for name in WORKER_PARAMS:
            if name in config.variables and rules.takes(op, name):
                params[name] = param_value(name, str(config.variables[name]), rules)
        for name, value in config.params.items():
            if rules.takes(op, name):
                params[name] = param_value(name, value, rules)
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
        return TEMPLATE_VAR.sub(subst, template)

    def error(self, section: str, index: int, key: str | None, problem: str) -> StudyError:
        """A StudyError located at ``key`` of the ``index``-th ``section`` table (``SourceMap.error``)."""
        return self.source.error(section, index, key, problem)


def param_value(name: str, value: str, rules: "WorkerRules") -> str:
    """A worker parameter's value as the worker spells it: ``SHA-256`` → ``sha256``, ``PSS`` →
    ``pss`` (``opnames.canonical_op`` against the allowed values); the value itself when it
    matches none (the caller refuses it)."""
    allowed = rules.param_values.get(name, ())
    return value if value in allowed else opnames.canonical_op(value, allowed) or value


def base_dir(path: str) -> str:
    """The directory a study file's relative paths start from: the file's own (the current
    directory for a study given as text, whose ``path`` is only a name)."""
    return os.path.dirname(os.path.abspath(path))
