"""The option table of study files: every key a study file may hold is one row of ``OPTIONS``
(name, type, default, range, help); that one table drives parsing, defaults, validation, the
``cryptoperf study --options`` text and the "did you mean" suggestions for misspelt keys, as
fio's option table does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptoperf import builds, cpumask, levels, stats

if TYPE_CHECKING:  # the help needs only the rules' interface, not the worker client
    from cryptoperf.hello import WorkerRules

#: Configuration keys that are also worker parameters (their values are checked against the
#: worker's ``param_values``, and passed to every operation whose ``op_params`` list them).
WORKER_PARAMS = ("digest", "padding")
UNTIL = ("fixed", "decided")
SLICES_ON = ("host", "nodes")
VERDICT_ON = tuple(stats.METRICS) + (stats.BY_LOAD,)  # latency, throughput, cpu_per_op, server_cpu_per_op, by_load


def num_text(x: float) -> str:
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
        lo = f"> {num_text(self.above)}" if self.above is not None else None
        if self.min is not None and self.max is not None:
            return f"{num_text(self.min)}..{num_text(self.max)}"
        if self.min is not None:
            return f">= {num_text(self.min)}"
        if lo:
            return lo + (f", <= {num_text(self.max)}" if self.max is not None else "")
        return f"<= {num_text(self.max)}" if self.max is not None else ""

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
           "Name of the [[configuration]] every other configuration is compared with (other "
           "pairs: [[contrast]])."),
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
    Option("study", "power_note", "string", "",
           "Why the design need not find a 5 % change at 3 % noise by its last look (its questions "
           "are about larger changes, or a block takes minutes): the dry run and the start of the "
           "study print it after the power figure when the design misses 5 %, and warn when it "
           "misses it without one."),
    Option("study", "explain", "bool", False,
           "After the last block, explain every decided (slower or faster) comparison the worker's "
           "own process measured: 3 profiled blocks of its two cells under `perf record` (separate "
           "repetitions; none of their figures enters the study), attributed to functions, kept "
           "with the run, and shown in its reports with a differential flame graph "
           "(`cryptoperf explain` does one comparison on demand). Needs perf; without it, one line "
           "says so and the study is unchanged."),
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
    Option("study", "seed", "int", None, "Seed of the random order within blocks. Unset, each run "
           "draws a fresh one, so that an effect of a repetition's place in its block (the first "
           "after a pause, a neighbour's cache) falls on other comparisons in every run instead of "
           "biasing the same ones each time; the seed a run used is stored with it and printed in "
           "its report. Set it to repeat a run's order exactly.", min=0, max=2**63 - 1),
    Option("study", "max_steal_pct", "float", 10.0,
           "A repetition during which the hypervisor stole more than this share of the CPUs is "
           "re-run once and, if still disturbed, kept and flagged.", min=0, max=100, unit="%"),
    Option("study", "max_other_load_pct", "float", 25.0,
           "A repetition during which other work kept this share of all CPUs busier than the "
           "host's steady level (busy time beyond the worker's own threads; the level measured "
           "before the study and over the last repetitions, 0 on a quiet host) is re-run once "
           "and, if still disturbed, kept and flagged. A constant load is not a disturbance: "
           "every configuration of a block shares it.", min=0, max=100, unit="%"),
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
    Option("study", "slices_on", "string", "host",
           "Where a job's slices run (a workload whose hello announces a spread, e.g. fleet-job): "
           "\"host\", every slice on the one machine running its block; \"nodes\" (with --executor "
           "ray), each slice on its own Ray node, one sub-job each started at one instant and merged "
           "into the job's result (docs/ray.md, \"Slices on several nodes\")."),
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
    Option("configuration", "worker", "string", None,
           "A worker binary of your own (a path, relative to the study file), checked by its hello "
           "like the built-in builds, and the configuration against the backends and operations that "
           "hello announces: e.g. the candidate build of a pipeline beside the baseline's, both in one "
           "study so that every block runs both, or another worker (worker-go/: backend go). Not with "
           "fips or library, which choose a built-in build."),
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
    Option("operation", "threads", "ints", None,
           "A primitive operation's threads (sessions of a device backend), each its own row: "
           "threads = [1, 2, 4] measures it with 1, 2 and 4 threads at once, each thread on its own "
           "prepared primitive (a PKCS#11 token: its own session), where a device's throughput grows "
           "with concurrent sessions until its engines are busy. Default: [study] threads. Not for "
           "a workload, whose concurrency is its load level (loads).", min=1),
    Option("operation", "params", "table", None,
           "A workload's parameters, each one its worker announces in its hello (listed below, "
           "per workload, with their defaults and values, when a worker is found; "
           "docs/worker-protocol.md, \"Workloads\"); values are strings or integers and may use "
           "{var}."),
    Option("operation", "loads", "strings", None,
           "A workload's load levels, each its own row: " + levels.SYNTAX + ", or a rate sweep "
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
    Option("operation", "verdict_on", "string", None,
           "This operation's verdicts decided on another metric than the study's verdict_on: one "
           "of its values, or 'server_cpu_per_op' (a workload with a server side: the server "
           "process's CPU time per transaction over the window, e.g. what a TLS handshake costs "
           "the server). Default: the study's."),
    Option("operation", "server", "string", None,
           "The server under test, started fresh for each repetition: its command line (split as a "
           "shell would, no shell runs it), e.g. \"nginx -p {dir} -c {dir}/nginx.conf -e stderr\". "
           "{dir} is the repetition's private directory, {port} a free loopback port, {cert_file}, "
           "{key_file}, {chain_file} and {ca_file} a fresh certificate of the operation's cert kind "
           "for localhost; any configuration variable may be used too. The operation must be "
           "tls-handshake; the client connects to 127.0.0.1:{port} and the server's process tree's "
           "CPU is read over the window."),
    Option("operation", "server_files", "strings", None,
           "Template files in the study file's directory (and inside it) rendered into {dir} under "
           "their own names, with the same placeholders as server (write {{ and }} for braces)."),
    Option("operation", "server_env", "table", None,
           "Environment variables for the server (values may use the same placeholders), e.g. "
           "{ OPENSSL_CONF = \"{openssl_conf}\" } with openssl_conf a configuration variable."),
    Option("operation", "server_ready_s", "float", 10.0,
           "How long the server may take to answer a verified TLS handshake on {port}; a server "
           "that exits or is not ready by then fails its repetition, with its last output.",
           above=0, max=300, unit="s"),
    Option("contrast", "baseline", "string", REQUIRED,
           "The [[configuration]] this contrast's configuration is compared with (its reference), "
           "block by block, as every configuration is with [study] baseline."),
    Option("contrast", "configuration", "string", REQUIRED,
           "The [[configuration]] compared with the contrast's baseline: the ratio is this one ÷ "
           "that one. Contrasts join the study's comparisons in its multiplicity family."),
    Option("contrast", "name", "string", None,
           "A name for the contrast; default \"<configuration> vs <baseline>\"."),
)

SECTIONS = ("study", "configuration", "operation", "contrast")


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
            if name in spec.set_by_cryptoperf() or name == "load":
                continue
            default = spec.defaults.get(name)
            item = name if default is None else f"{name}={default}"
            allowed = rules.param_values.get(name)
            items.append(item + (f" ({'|'.join(allowed)})" if allowed else ""))
        levels = ", ".join(spec.levels)
        out.append(f"    {op} (levels {levels}): {', '.join(items)}")
    return out
