"""Parse a study file into a ``Study``: the TOML document, each table's keys against the
option table (``options.OPTIONS``), the templates, and where each key sits in the text for the
one-line errors (``SourceMap``). Everything the file alone can tell is checked here; the rest
against the worker (``check``)."""

from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping

from cryptoperf import builds, cpumask, levels, opnames, workdir
from cryptoperf.errors import StudyError, did_you_mean, one_line
from cryptoperf.study.options import (REQUIRED, SECTIONS, SLICES_ON, UNTIL, VERDICT_ON, WORKER_PARAMS, Option,
                                      options_for)
from cryptoperf.study.types import (EVERY_NODE, IDENT, TEMPLATE_VAR, Configuration, Contrast, HostSelector,
                                    Operation, Study, base_dir)

#: Largest study file ``load`` reads (real ones are a few KiB): a larger file, or a device that
#: never ends, is refused before it fills memory.
MAX_STUDY_BYTES = 1 << 20
#: Most ``[[configuration]]`` and ``[[operation]]`` tables, and most pairs of them (every pair
#: is checked, and becomes cells): bounds the time a study file can make the checks take.
MAX_TABLES = 1000
MAX_PAIRS = 10_000
#: TOML integers are 64-bit (toml.io, "Integer"); a larger one is refused, not rounded.
INT64 = (-(2**63), 2**63 - 1)
#: Longest value quoted whole in a message; a longer one is elided in the middle.
SHOWN = 100
#: Most parameters one operation may give (a workload takes about 25).
MAX_PARAMS = 100
#: Most load levels one operation may list (each is a row, run in every block: a study of
#: thousands would not finish; the file alone is refused before its levels are parsed).
MAX_LOADS = 1000
_ARRAY_SECTIONS = ("configuration", "operation", "contrast")


class SourceMap:
    """Where each table and key sits in a study file's text (at ``path``), for error messages:
    ``error`` builds every StudyError located at a key.

    A light scan of the lines (table headers and ``key =`` lines); TOML syntax itself is
    checked by tomllib, whose errors carry their own line and column.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"']+)\s*\]\]?")
    _KEY = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_\-]+))\s*[.=]""")

    def __init__(self, text: str, names: Mapping[tuple[str, int], str] | None = None, path: str = "<study>"):
        self.path = path
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

    def error(self, section: str, index: int, key: str | None, problem: str) -> StudyError:
        """A StudyError located at ``key`` of the ``index``-th ``section`` table: the file, the
        key's line (``line``) and the field (``describe``)."""
        return StudyError(self.path, self.line(section, index, key), self.describe(section, index, key), problem)


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
                        n = (t.get("label") or t.get("op")) if section == "operation" else t.get("name")
                        if section == "contrast" and n is None and isinstance(t.get("configuration"), str) \
                                and isinstance(t.get("baseline"), str):
                            n = f"{t['configuration']} vs {t['baseline']}"
                        if isinstance(n, str):
                            names[(section, i)] = n
        self.source = SourceMap(text, names, path)
        self.error = self.source.error

    def options(self, section: str, index: int, table: dict, allow_extra: bool) -> dict[str, Any]:
        """Type-check, range-check and default the keys of one table (extra keys kept if allowed)."""
        known = options_for(section)
        values: dict[str, Any] = {}
        for key, value in table.items():
            opt = known.get(key)
            if opt is None:
                if allow_extra:
                    continue
                raise self.error(section, index, key, f"unknown key{did_you_mean(key, known)}"
                                 f" (known: {', '.join(known)})")
            if not _type_ok(opt, value):
                raise self.error(section, index, key,
                                 f"must be {_TYPE_WORDS[opt.type]}, not {toml_repr(value)}")
            for v in value if isinstance(value, list) else [value]:
                problem = int64_problem(v)
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
                                 f"element {i} ({toml_repr(v)}) is not a size: {e}") from None
            if out[-1] > INT64[1]:
                raise self.error(section, index, key, f"element {i} ({toml_repr(v)}) is more than 2^63-1 bytes")
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
                raise self.error(section, index, key, f"element {i} ({toml_repr(item)}): {e}") from None
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
                                 f"unknown table or key{did_you_mean(key, SECTIONS)} "
                                 "(a study has [study], [[configuration]], [[operation]] and [[contrast]])")
        study_table = doc.get("study")
        if not isinstance(study_table, dict):
            raise StudyError(self.path, self.source.line("study"), None,
                             "missing [study] table (with at least name and baseline)")
        s = self.options("study", 0, study_table, allow_extra=False)

        work_dir = s["work_dir"]
        if work_dir is not None and not self.stored:
            try:  # relative to the study file's directory; see workdir.confined_path
                work_dir = str(workdir.confined_path(work_dir, base_dir(self.path), absolute_ok=True))
            except ValueError as e:
                raise self.error("study", 0, "work_dir", f"{toml_repr(s['work_dir'])} {e}") from None
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
                             f"no configuration named '{s['baseline']}'{did_you_mean(s['baseline'], seen)} "
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
                             f"{toml_repr(s['verdict_on'])}{did_you_mean(s['verdict_on'], VERDICT_ON)}")
        if s["until"] not in UNTIL:
            raise self.error("study", 0, "until", f"must be one of {', '.join(repr(u) for u in UNTIL)}, "
                             f"not {toml_repr(s['until'])}{did_you_mean(s['until'], UNTIL)}")
        max_reps = s["repetitions"]
        if s["slices_on"] not in SLICES_ON:
            raise self.error("study", 0, "slices_on", f"must be one of {', '.join(repr(u) for u in SLICES_ON)}, "
                             f"not {toml_repr(s['slices_on'])}{did_you_mean(s['slices_on'], SLICES_ON)}")
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
            every_node=EVERY_NODE in (s["hosts"] or ()), slices_on=s["slices_on"], power_note=" ".join(s["power_note"].split()),
            explain=s["explain"], contrasts=self.contrasts(s["baseline"], configs, backends))
        _check_templates(study, self.stored)
        return study

    def contrasts(self, baseline: str, configs: list[Configuration],
                  backends: tuple[str, ...] | None) -> tuple[Contrast, ...]:
        """The ``[[contrast]]`` tables (none when absent), each checked: both sides name a
        configuration, and differ, and are not pinned to different backends unless the baseline
        runs on one backend (``[study] backends``: ``backends``), whose blocks then hold every
        implementation (otherwise they would share no group); no pair twice, in either direction,
        nor one the comparisons with ``baseline`` already make; no name twice. Raises StudyError at
        the offending key."""
        if "contrast" not in self.doc:
            return ()
        names = [c.name for c in configs]
        pinned = {c.name: c.backend for c in configs}
        base_backend = pinned.get(baseline) or (backends[0] if backends and len(backends) == 1 else None)
        tables = self.tables("contrast")
        if len(tables) > MAX_TABLES:
            raise self.error("contrast", MAX_TABLES, None, f"the study has {len(tables)} [[contrast]] "
                             f"tables; at most {MAX_TABLES}")
        out: list[Contrast] = []
        pairs: dict[frozenset, int] = {}
        for i, t in enumerate(tables):
            v = self.options("contrast", i, t, allow_extra=False)
            for key in ("baseline", "configuration"):
                if v[key] not in names:
                    raise self.error("contrast", i, key, f"no configuration named {toml_repr(v[key])}"
                                     f"{did_you_mean(v[key], names)} (configurations: {', '.join(names)})")
            if v["baseline"] == v["configuration"]:
                raise self.error("contrast", i, "configuration", f"'{v['configuration']}' is also the "
                                 "contrast's baseline; a contrast compares two different configurations")
            a, b = pinned[v["baseline"]], pinned[v["configuration"]]
            if a and b and a != b and base_backend is None:
                raise self.error("contrast", i, "configuration", f"'{v['configuration']}' runs on backend {b} "
                                 f"only and '{v['baseline']}' on {a} only: they never run side by side (unless "
                                 f"the baseline '{baseline}' is pinned to one backend, whose blocks then hold both)")
            pair = frozenset((v["baseline"], v["configuration"]))
            if baseline in pair:
                raise self.error("contrast", i, "baseline", f"duplicates a comparison the study makes already: "
                                 f"every configuration is compared with the baseline '{baseline}'")
            if pair in pairs:
                raise self.error("contrast", i, "configuration", f"duplicate contrast: contrast "
                                 f"#{pairs[pair] + 1} compares the same two configurations")
            pairs[pair] = i
            name = v["name"] if v["name"] is not None else f"{v['configuration']} vs {v['baseline']}"
            if any(c.name == name for c in out):
                raise self.error("contrast", i, "name", f"duplicate contrast name '{name}'; names must be unique")
            out.append(Contrast(name, v["baseline"], v["configuration"], i))
        return tuple(out)

    def configuration(self, index: int, table: dict) -> Configuration:
        """One ``[[configuration]]``: options, template variables and worker params, checked."""
        v = self.options("configuration", index, table, allow_extra=True)
        reserved = options_for("configuration")
        variables = {}
        for key, value in table.items():
            if key in reserved:
                continue
            if not IDENT.match(key):
                raise self.error("configuration", index, key,
                                 "a template variable name must be a letter or _ followed by letters, digits or _")
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise self.error("configuration", index, key,
                                 f"a template variable must be a string or a number, not {toml_repr(value)}")
            problem = int64_problem(value)
            if problem:
                raise self.error("configuration", index, key, problem)
            variables[key] = value
        params = {}
        for key, value in (v["params"] or {}).items():
            if key not in WORKER_PARAMS:
                hint = ("; message sizes go in [[operation]] sizes" if key == "size_bytes"
                        else did_you_mean(key, WORKER_PARAMS))
                raise self.error("configuration", index, "params",
                                 f"unknown worker parameter '{key}'{hint} (known: {', '.join(WORKER_PARAMS)})")
            if not isinstance(value, str):
                raise self.error("configuration", index, "params",
                                 f"{key} must be a string, not {toml_repr(value)}")
            params[key] = value
        if not cpumask.is_known(v["cpu"]):
            raise self.error("configuration", index, "cpu",
                             f"unknown CPU mask {toml_repr(v['cpu'])}{did_you_mean(v['cpu'], cpumask.NAMES)} "
                             f"(known: {', '.join(cpumask.NAMES)}; or several but baseline joined by "
                             f"'{cpumask.JOIN}', e.g. \"no-aesni{cpumask.JOIN}no-bignum\")")
        backend = self.check_library(index, v)
        return Configuration(name=v["name"], description=v["description"], backend=backend,
                             variables=variables, params=params, index=index, cpu=v["cpu"],
                             fips=v["fips"], build=self.build(index, v), library=v["library"],
                             hosts=tuple(HostSelector.parse(h) for h in v["hosts"] or ()))

    def build(self, index: int, v: Mapping[str, Any]) -> str:
        """The worker build of a configuration: its ``worker`` binary (a path build,
        ``builds.path_build``, relative to the study file's directory), else the one its
        ``backend`` (``go``: the Go worker), ``fips`` and ``library`` choose. Raises StudyError for ``worker`` beside either, or an empty path."""
        worker = v["worker"]
        if worker is None:
            return builds.for_configuration(v["fips"], v["library"], v["backend"])
        if not worker.strip():
            raise self.error("configuration", index, "worker", "is empty; give the path of a worker binary")
        for key, default in (("fips", False), ("library", builds.SYSTEM_LIBRARY)):
            if v[key] != default:
                raise self.error("configuration", index, "worker",
                                 f"names its own worker binary, so {key} (which chooses a built-in build) "
                                 f"cannot apply; remove {key}, or worker")
        return builds.path_build(os.path.join(base_dir(self.path), os.path.expanduser(worker)))

    def check_library(self, index: int, v: Mapping[str, Any]) -> str | None:
        """Check a configuration's ``library`` against ``fips`` and ``backend``; return its
        backend (``openssl`` for a library other than the system one, which changes only the
        openssl backend). Raises StudyError at the offending key."""
        library = v["library"]
        if library not in builds.LIBRARIES:
            raise self.error("configuration", index, "library",
                             f"unknown library {toml_repr(library)}{did_you_mean(library, builds.LIBRARIES)} "
                             f"(known: {', '.join(builds.LIBRARIES)})")
        if library == builds.SYSTEM_LIBRARY:
            return v["backend"]
        if v["fips"]:
            raise self.error("configuration", index, "library",
                             f"library {toml_repr(library)} with fips = true is not supported: the "
                             f"FIPS build uses the system OpenSSL, which loads OpenSSL's FIPS provider, "
                             f"and {library} is linked without a module loader (no-module), so it "
                             f"cannot; compare FIPS and {library} in separate configurations")
        if v["backend"] not in (None, builds.LIBRARY_BACKEND):
            raise self.error("configuration", index, "backend",
                             f"library {toml_repr(library)} changes only the {builds.LIBRARY_BACKEND} "
                             f"backend, so this configuration runs on {builds.LIBRARY_BACKEND}; "
                             f"write backend = \"{builds.LIBRARY_BACKEND}\" or remove it")
        return builds.LIBRARY_BACKEND

    def operation(self, index: int, table: dict) -> Operation:
        """One ``[[operation]]``, checked (template syntax, no duplicate sizes)."""
        v = self.options("operation", index, table, allow_extra=False)
        for m in TEMPLATE_VAR.finditer(v["op"]):
            if not IDENT.match(m.group(1)):
                raise self.error("operation", index, "op",
                                 f"'{m.group(0)}' is not a template variable; write {{name}} with a variable name")
        if v["sizes"] is not None and len(set(v["sizes"])) != len(v["sizes"]):
            raise self.error("operation", index, "sizes", "lists a size twice")
        params = v["params"] or {}
        if len(params) > MAX_PARAMS:
            raise self.error("operation", index, "params", f"has {len(params)} parameters; no workload "
                             f"takes more than a few dozen (at most {MAX_PARAMS})")
        for key, value in params.items():
            if not IDENT.match(key):
                raise self.error("operation", index, "params", f"'{one_line(key, SHOWN)}' is not a parameter name")
            problem = int64_problem(value)
            if problem:
                raise self.error("operation", index, "params", f"{key}: {problem}")
            if isinstance(value, bool):
                # as the worker spells a switch (storage's direct = true)
                value = params[key] = "true" if value else "false"
            if not isinstance(value, (str, int)):
                raise self.error("operation", index, "params",
                                 f"{key} must be a string, an integer or a boolean, not {toml_repr(value)}")
            if key.endswith("_bytes") and isinstance(value, str) and not TEMPLATE_VAR.search(value):
                try:  # file_bytes = "64MiB": bytes, as sizes = [...] reads them
                    params[key] = opnames.parse_size(value)
                except ValueError as e:
                    raise self.error("operation", index, "params", f"{key}: {e}") from None
            for m in TEMPLATE_VAR.finditer(str(value)):
                if not IDENT.match(m.group(1)):
                    raise self.error("operation", index, "params",
                                     f"'{m.group(0)}' in {key} is not a template variable; write {{name}}")
        loads = v["loads"]
        if loads is not None:
            try:
                loads = levels.expand_loads(loads)
            except ValueError as e:
                raise self.error("operation", index, "loads", str(e)) from None
            if len(loads) > MAX_LOADS:
                raise self.error("operation", index, "loads", f"lists {len(loads)} load levels; at most {MAX_LOADS} "
                                 "(each is a row of its own: split the operation, or sweep a range, open:LOW..HIGH)")
            labels = set()
            for text in loads:
                try:
                    labels.add(levels.parse_load(text).label)
                except ValueError as e:
                    raise self.error("operation", index, "loads", str(e)) from None
            if len(labels) != len(loads):
                raise self.error("operation", index, "loads", "lists a load level twice")
        self.check_server(index, v)
        if v["verdict_on"] is not None and v["verdict_on"] not in VERDICT_ON:
            raise self.error("operation", index, "verdict_on",
                             f"must be one of {', '.join(repr(m) for m in VERDICT_ON)}, not "
                             f"{toml_repr(v['verdict_on'])}{did_you_mean(v['verdict_on'], VERDICT_ON)}")
        return Operation(verdict_on=v["verdict_on"], label=v["label"] or v["op"], op=v["op"],
                         sizes=tuple(v["sizes"]) if v["sizes"] is not None else None, index=index,
                         params=dict(params), loads=tuple(loads) if loads is not None else None,
                         threads=self.thread_counts(index, v),
                         p99_bound_ms=v["p99_bound_ms"], optional=v["optional"], server=v["server"],
                         server_files=tuple(v["server_files"] or ()),
                         server_env={k: str(x) for k, x in (v["server_env"] or {}).items()},
                         server_ready_s=v["server_ready_s"])

    def thread_counts(self, index: int, v: dict) -> tuple[int, ...] | None:
        """Operation ``index``'s ``threads`` list: not with ``loads`` (a workload's concurrency
        is its level), no count twice; StudyError at the key otherwise. (The worker's limit is
        checked against its hello: ``study.check``.)"""
        counts = v["threads"]
        if counts is None:
            return None
        if v["loads"] is not None:
            raise self.error("operation", index, "threads", "a workload's concurrency is its load level "
                             "(loads = [\"closed:N\"]); threads is for primitive operations")
        if len(set(counts)) != len(counts):
            raise self.error("operation", index, "threads", "lists a thread count twice")
        return tuple(counts)

    def check_server(self, index: int, v: dict) -> None:
        """The server-under-test keys of operation ``index``: ``server_files``/``server_env``
        only with ``server``, files inside the study's directory, environment values that are
        strings; StudyError at the key otherwise. (Whether the operation can load a server is
        the worker's to say: ``study.check``.)"""
        if v["server"] is None:
            for key in ("server_files", "server_env"):
                if v[key]:
                    raise self.error("operation", index, key, "goes with server: the command that starts the server")
            return
        for f in ([] if self.stored else v["server_files"] or ()):
            try:
                workdir.confined_path(f, base_dir(self.path), absolute_ok=False)
            except ValueError as e:
                raise self.error("operation", index, "server_files", f"{f} {e}") from None
        for key, value in (v["server_env"] or {}).items():
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise self.error("operation", index, "server_env", f"{key} must be a string, not {toml_repr(value)}")


def _check_templates(study: Study, stored: bool = False) -> None:
    """Every {var} resolves in every configuration; every variable is used somewhere (in a
    stored study, whose server files are not at hand, a variable is taken as used by them).
    Raises StudyError."""
    used: set[str] = set()
    for o in study.operations:
        used.update(m.group(1) for m in TEMPLATE_VAR.finditer(o.op))
        for value in o.params.values():
            used.update(m.group(1) for m in TEMPLATE_VAR.finditer(str(value)))
        if stored and o.server_files:
            used.update(c for conf in study.configurations for c in conf.variables)
        else:
            used.update(_server_variables(study, o))
    for c in study.configurations:
        for var in c.variables:
            if var not in used and var not in WORKER_PARAMS:
                candidates = sorted(used | set(options_for("configuration")))
                raise study.error("configuration", c.index, var,
                                  f"unknown key: not a configuration option and not used by any "
                                  f"operation's op{did_you_mean(var, candidates)}")
        for o in study.operations:
            study.op_name(c, o)
            for value in o.params.values():
                study.substitute(c, o, "params", str(value))


def _server_variables(study: Study, o: Operation) -> set[str]:
    """The ``{name}`` placeholders of an operation's server under test: its command, its
    environment and its template files (``{{`` is a literal brace there, not a placeholder)."""
    if o.server is None:
        return set()
    texts = [o.server, *o.server_env.values()]
    for f in o.server_files:
        try:
            texts.append((Path(base_dir(study.path)) / f).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise study.error("operation", o.index, "server_files",
                              f"cannot read {f}: {getattr(e, 'strerror', None) or e}") from None
    names = set()
    for text in texts:
        names.update(m.group(1) for m in TEMPLATE_VAR.finditer(text.replace("{{", "").replace("}}", "")))
    return names


def toml_repr(value: Any) -> str:
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
        return int_text(value)
    return one_line(str(value), SHOWN)


def int_text(n: int) -> str:
    """An integer as text, elided past ``SHOWN`` digits (and without ``str``'s 4300-digit limit
    biting: such a number is described by its size)."""
    if abs(n) < 10**SHOWN:
        return str(n)
    digits = int(abs(n).bit_length() * 0.30103) + 1
    return f"{'-' if n < 0 else ''}a number of about {digits} digits"


def file_param_problem(key: str, value: str, path: str) -> str | None:
    """Why ``value`` cannot be the file parameter ``key`` of a study at ``path``, or None
    (``workdir.confined_path``: relative to the study file's directory, inside it, no
    symbolic link)."""
    try:
        workdir.confined_path(value, base_dir(path), absolute_ok=False)
    except ValueError as e:
        return f"{key} {toml_repr(value)} {e}"
    return None


def int64_problem(value: Any) -> str | None:
    """Why ``value`` (from the TOML document) is not a 64-bit integer TOML allows, or None."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        return f"{int_text(value)} is outside the 64-bit range of TOML integers (-2^63..2^63-1)"
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
