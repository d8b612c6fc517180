"""Fuzzing the study-file parser (hypothesis).

Thousands of study files, mutated from the real ones (studies/*.toml, docs/first-hour/*.toml) and
generated from scratch, go through ``study.parse`` (text), ``study.load`` (bytes, not always
UTF-8), ``study.check_against_worker`` (the real worker's rules, tests/fixtures/worker-hello.json)
and, for a handful, ``cryptoperf study FILE --dry-run``. The property, for every input: a Study,
or a CryptoperfError whose message is one line (no line break or other control character) of at
most 1000 characters — no other exception, within a time bound, and for the enormous inputs
within a memory bound.

How many inputs: the hypothesis profile (tests/conftest.py). The default, ``ci``, keeps this file
to about a minute on 2 cores; ``HYPOTHESIS_PROFILE=long`` or ``CRYPTOPERF_FUZZ_EXAMPLES=N`` runs
longer (docs/reliability.md, "Fuzzing the study-file parser", has the command and a long run's
figures). ``--hypothesis-show-statistics`` prints each test's count of inputs.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import tempfile
import time
import tomllib
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from conftest import ROOT, assert_one_line_error, worker_rules
from cryptoperf import builds, study
from cryptoperf.hello import WorkerRules
from cryptoperf.errors import MAX_MESSAGE, CryptoperfError, StudyError

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

RULES = worker_rules(devices=("pkcs11",))  # the worker's device backend (studies/offload-pkcs11.toml)
SEEDS = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
         for p in sorted([*ROOT.glob("studies/*.toml"), *ROOT.glob("docs/first-hour/*.toml")])}
#: Most CPU seconds of this thread one input may take (parse and check against the worker's
#: rules): a guard against a hang or a quadratic blow-up, which take far longer, not a speed
#: target. CPU time rather than wall time, so that other processes on a shared host (CI's two
#: cores) do not count.
TIME_BOUND_S = 10.0
#: The enormous inputs: peak memory Python allocates for one, at most this many times its size
#: plus a constant: linear (the text, its lines, the TOML document — about 30 times the text for
#: 100,000 tiny tables — and a Study). ``load`` reads at most 1 MiB, so a file costs at most
#: about 56 MiB.
MEMORY_FACTOR, MEMORY_SLACK = 40, 16 << 20
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_WORK = tempfile.TemporaryDirectory(prefix="cryptoperf-fuzz-")  # load()'s files


def _examples(n: int) -> int:
    """``n``, or the profile's max_examples if that is smaller (a quick profile stays quick)."""
    return min(n, settings().max_examples)


def check_error(e: BaseException) -> str:
    """The property of an error: a CryptoperfError with a one-line, bounded message."""
    assert isinstance(e, CryptoperfError), f"{type(e).__name__}: {e!r}"[:2000]
    msg = str(e)
    assert msg, "an empty message"
    assert len(msg) <= MAX_MESSAGE, f"message of {len(msg)} characters: {msg[:200]!r}..."
    assert not _BREAKS.search(msg) and msg.splitlines() == [msg], f"not one line: {msg[:300]!r}"
    return msg


def outcome(fn, bound_s: float | None = None):
    """``fn()``'s Study, or its CryptoperfError after checking the property; any other exception
    fails the test (hypothesis shrinks the input); so does taking longer than ``bound_s`` CPU
    seconds of this thread (TIME_BOUND_S by default; math.inf for no bound)."""
    t0 = time.thread_time()
    try:
        result = fn()
    except CryptoperfError as e:
        check_error(e)
        result = e
    elapsed = time.thread_time() - t0
    limit = TIME_BOUND_S if bound_s is None else bound_s
    assert elapsed < limit, f"took {elapsed:.1f} CPU s"
    return result


#: The Go worker's rules (tests/fixtures/worker-go-hello.json, checked against the worker by
#: tests/test_go_worker.py): what a configuration naming a worker of its own is checked against.
GO_RULES = WorkerRules.from_hello(json.loads((ROOT / "tests" / "fixtures" / "worker-go-hello.json").read_text()))


def check_text(text: str, path: str = "fuzz.toml"):
    """Parse ``text``; a Study goes on through check_against_worker (a configuration with a worker
    of its own against the Go worker's rules). Returns the last outcome."""
    s = outcome(lambda: study.parse(text, path))
    if isinstance(s, study.Study):
        own = {c.build: GO_RULES for c in s.configurations if builds.get(c.build).own_rules}
        return outcome(lambda: study.check_against_worker(s, RULES, own))
    return s


# ------------------------------------------------------------------------- TOML building blocks


def toml_str(s: str) -> str:
    """``s`` as a TOML basic string (every control character escaped)."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(v) -> str:
    """A Python value as an inline TOML value (ints of any size, nan and inf as TOML spells them)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_str(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def dump(doc: dict) -> str:
    """A document of tables and arrays of tables as TOML text (other top-level keys first)."""
    head, body = [], []
    for key, value in doc.items():
        if isinstance(value, dict):
            body.append(f"[{toml_str(key)}]")
            body += [f"{toml_str(str(k))} = {toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and all(isinstance(t, dict) for t in value):
            for t in value:
                body.append(f"[[{toml_str(key)}]]")
                body += [f"{toml_str(str(k))} = {toml_value(v)}" for k, v in t.items()]
        else:
            head.append(f"{toml_str(key)} = {toml_value(value)}")
    return "\n".join(head + body) + "\n"


def _seed_values() -> list:
    """Every scalar value the seed studies hold: plausible values to put in other keys."""
    out: list = []

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif v not in out:
            out.append(v)
    for text in SEEDS.values():
        walk(tomllib.loads(text))
    return out


SEED_VALUES = _seed_values()
KEYS = sorted({o.name for o in study.OPTIONS} | {"digest", "padding", "cipher", "hash", "dir", "ca_file",
                                                 "connect", "port", "address", "mode", "file_bytes", "cap"})
ODD_STRINGS = ["", " ", "\x00", "\n", "\r\n", "\u2028", "\u202e", "\ufeff", "\U0010ffff", "é" * 40,
               "../../etc", "/etc/passwd", "{", "}", "{}", "{x}", "{0}", "{digest}", "{{digest}}",
               "every-node", "label:a=b", "resource:x", "closed:10", "open:1..100000", "open:1e3",
               "open:" + "9" * 400, "closed:" + "9" * 5000, "targets:10", "16KiB", "16KB", "1.5k",
               "9" * 70 + "G", "sha256", "SHA-256", "openssl", "mock", "mock:crash", "decided", "by_load",
               "openssl@3.6", "storage", "tls-handshake", "fleet-job", "x" * 3000, "%s%n", "\\", '"']
ODD_LITERALS = ["nan", "+nan", "-nan", "inf", "-inf", "+inf", "-0.0", "0.0", "1e400", "-1e400", "5e-324",
                str(10**400), str(-(10**400)), str(2**63), str(-(2**63) - 1), str(2**63 - 1), "0x7fffffffffffffff",
                "0xffffffffffffffff", "0o777", "0b101", "1_000", "1" * 5000, "true", "false",
                "1979-05-27T07:32:00Z", "1979-05-27", "07:32:00", "2023-02-30", "[]", "{}", '""', "''",
                '"""\n"""', '[1, "a", 2.0]', "{ a = 1 }", '"\\u0000"', '"\\uD800"', '"\\U0010FFFF"',
                '"\\u2028\\u202e"', '"\\r\\n"', "[[[]]]", "[{}]", "{ a = { b = { c = [] } } }"]

scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**420), max_value=10**420),
    st.sampled_from([0, -1, 1, 2, 3, 1000, 1001, 10000, 2**63 - 1, 2**63, -(2**63), 10**400]),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, 1e308]),
    st.text(max_size=40),
    st.sampled_from(ODD_STRINGS),
    st.sampled_from(SEED_VALUES),
    st.datetimes().map(lambda d: d.replace(microsecond=0)),
)
values = st.recursive(scalars, lambda children: st.lists(children, max_size=6)
                      | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=12), children, max_size=6),
                      max_leaves=24)
nested = st.integers(1, 5000).flatmap(lambda n: st.sampled_from(["[" * n + "]" * n, "{a=" * n + "1" + "}" * n,
                                                                 "[" * n + "1" + "]" * n, "[{a=" * n + "1" + "}]" * n]))
literals = st.one_of(st.sampled_from(ODD_LITERALS), values.map(toml_value), nested,
                     st.integers(0, 20000).map(lambda n: "[" + ", ".join(["1"] * n) + "]"))


# ------------------------------------------------------------------------- mutations


_KEY_LINE = re.compile(r"^(\s*[A-Za-z0-9_\-\"']+\s*=\s*)(.*)$")


@st.composite
def mutated_text(draw) -> str:
    """A seed study with 1-6 line- or character-level mutations: a value replaced by an odd
    literal, a line deleted, duplicated, moved or added, a key renamed, the text truncated,
    characters inserted."""
    text = SEEDS[draw(st.sampled_from(sorted(SEEDS)))]
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["value", "value", "value", "delete", "duplicate", "move", "add",
                                     "rename", "truncate", "insert", "table"]))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if kind == "value":
            keyed = [j for j, l in enumerate(lines) if _KEY_LINE.match(l)]
            if keyed:
                j = draw(st.sampled_from(keyed))
                lines[j] = _KEY_LINE.match(lines[j]).group(1) + draw(literals)
        elif kind == "delete" and lines:
            del lines[i]
        elif kind == "duplicate" and lines:
            lines.insert(i, lines[i])
        elif kind == "move" and lines:
            lines.insert(draw(st.integers(0, len(lines))), lines.pop(i))
        elif kind == "add":
            lines.insert(i, f"{draw(st.sampled_from(KEYS))} = {draw(literals)}")
        elif kind == "rename":
            keyed = [j for j, l in enumerate(lines) if _KEY_LINE.match(l)]
            if keyed:
                j = draw(st.sampled_from(keyed))
                new_key = draw(st.sampled_from(KEYS) | st.text(max_size=8))
                lines[j] = re.sub(r"^\s*[A-Za-z0-9_\-]+", lambda m: new_key, lines[j])  # as written
        elif kind == "truncate":
            joined = "\n".join(lines)
            lines = joined[:draw(st.integers(0, len(joined)))].split("\n")
        elif kind == "insert":
            joined = "\n".join(lines)
            at = draw(st.integers(0, len(joined)))
            lines = (joined[:at] + draw(st.text(max_size=12) | st.sampled_from(ODD_STRINGS)) + joined[at:]).split("\n")
        elif kind == "table":
            lines.insert(i, draw(st.sampled_from(["[study]", "[[configuration]]", "[[operation]]", "[configuration]",
                                                  "[[study]]", "[operation.params]", "[[operation.params]]", "[x]"])))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))


@st.composite
def mutated_document(draw) -> str:
    """A seed study's TOML document with 1-5 structural mutations (a key deleted or set to an
    odd value of any type, a table duplicated, deleted or emptied, a section replaced), written
    back as TOML."""
    doc = tomllib.loads(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 5))):
        section = draw(st.sampled_from(["study", "configuration", "operation", "configuration", "operation"]))
        kind = draw(st.sampled_from(["set", "set", "set", "delete", "dup", "drop", "empty", "replace"]))
        tables = doc.get(section)
        if isinstance(tables, dict):
            tables = [tables]
        if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
            doc[section] = draw(values)
            continue
        i = draw(st.integers(0, len(tables) - 1))
        t = tables[i]
        if kind == "set":
            t[draw(st.sampled_from(sorted(t) + KEYS))] = draw(values)
        elif kind == "delete" and t:
            del t[draw(st.sampled_from(sorted(t)))]
        elif kind == "dup" and section != "study":
            tables.insert(i, dict(t))
        elif kind == "drop" and section != "study":
            del tables[i]
        elif kind == "empty":
            t.clear()
        elif kind == "replace":
            doc[section] = draw(values)
    return dump(doc)


@st.composite
def generated_document(draw) -> str:
    """A study-shaped document made from scratch: the three sections (each maybe missing or
    mistyped), with keys drawn from the option names and random ones, values of every type."""
    doc: dict = {}
    if draw(st.integers(0, 9)):
        doc["study"] = draw(st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), values, max_size=10))
    else:
        doc["study"] = draw(values)
    for section in ("configuration", "operation"):
        if draw(st.integers(0, 9)):
            doc[section] = draw(st.lists(st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), values,
                                                         max_size=8), min_size=0, max_size=4))
        else:
            doc[section] = draw(values)
    if not draw(st.integers(0, 9)):
        doc[draw(st.text(max_size=8))] = draw(values)
    return dump(doc)


# ------------------------------------------------------------------------- the properties


def test_the_seeds_are_valid_studies():
    """The mutations start from real, valid study files (so a mutation tests one change)."""
    assert len(SEEDS) >= 10
    for name, text in SEEDS.items():
        s = check_text(text, name)
        assert isinstance(s, study.Study), (name, s)


@given(mutated_text())
@example("[study]\nname = \"x\"\nbaseline = \"a\"\nseconds = " + "1" * 5000 + "\n")  # tomllib: ValueError
@example("a = " + "[" * 3000 + "]" * 3000)  # tomllib: RecursionError
@example(SEEDS["studies/quick.toml"].replace("seconds = 0.2", "seconds = 1e400"))  # inf: OverflowError
@example(SEEDS["studies/quick.toml"].replace("seconds = 0.2", "seconds = nan"))  # nan passed every check
@example(SEEDS["studies/quick.toml"].replace('name = "aes-sha256"', 'name = "a\\nb"'))  # a message of 2 lines
@example(SEEDS["studies/quick.toml"].replace("repetitions = 12", "threads = " + str(10**400)))  # OverflowError
def test_mutated_study_files(text):
    """Seed studies with line- and character-level mutations."""
    check_text(text)


@given(mutated_document())
def test_mutated_study_documents(text):
    """Seed studies with structural mutations (keys, types, tables)."""
    check_text(text)


@given(generated_document())
def test_generated_study_documents(text):
    """Study-shaped documents made from scratch."""
    check_text(text)


@st.composite
def mutated_bytes(draw) -> bytes:
    """A seed study's bytes with invalid UTF-8 (lone continuation bytes, overlong forms, encoded
    surrogates, a cut multi-byte character), NUL bytes, a BOM or random bytes inserted."""
    data = SEEDS[draw(st.sampled_from(sorted(SEEDS)))].encode()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        junk = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xef\xbb\xbf", b"\x00",
                                     b"\xe2\x82", b"\x80", "é".encode()[:1], b"\r", b"\x1b[31m"]) | st.binary(max_size=16))
        data = data[:at] + junk + data[at:]
    return data


@given(mutated_bytes())
@example(b"\xff\xfe[\x00s\x00t\x00u\x00d\x00y\x00]\x00")  # UTF-16
def test_study_files_of_any_bytes(data):
    """``study.load`` of a file holding any bytes: UTF-8 or not."""
    p = Path(_WORK.name) / "fuzz.toml"
    p.write_bytes(data)
    s = outcome(lambda: study.load(p))
    if isinstance(s, study.Study):
        outcome(lambda: study.check_against_worker(s, RULES))
    else:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            assert "not UTF-8" in str(s), s


ENORMOUS = {
    "a value": lambda n, c: SEEDS["studies/quick.toml"].replace('"quick"', toml_str(c * n), 1),
    "a description": lambda n, c: SEEDS["studies/quick.toml"].replace('description = "AES', 'description = "' + c * n, 1),
    "a key": lambda n, c: SEEDS["studies/quick.toml"].replace("seconds = 0.2", toml_str(c * n) + " = 1", 1),
    "a template variable": lambda n, c: SEEDS["studies/quick.toml"].replace('cipher = "aes-128-gcm"',
                                                                            f'cipher = {toml_str(c * n)}', 1),
    "a comment": lambda n, c: "# " + c * n + "\n" + SEEDS["studies/quick.toml"],
    "a size list": lambda n, c: SEEDS["studies/quick.toml"].replace("sizes = [1024, 16384]",
                                                                    "sizes = [" + ", ".join(map(str, range(1, n // 8))) + "]", 1),
    "a load list": lambda n, c: SEEDS["studies/quick.toml"].replace(
        "sizes = [1024, 16384]", "loads = [" + ", ".join(f'"closed:{i}"' for i in range(1, n // 12)) + "]", 1),
    "many configurations": lambda n, c: SEEDS["studies/quick.toml"] + "".join(
        f'[[configuration]]\nname = "c{i}"\ncipher = "aes-256-gcm"\nhash = "sha256"\n' for i in range(n // 64)),
    "many operations": lambda n, c: SEEDS["studies/quick.toml"] + "".join(
        f'[[operation]]\nlabel = "o{i}"\nop = "{{hash}}"\n' for i in range(n // 40)),
    "one long line": lambda n, c: SEEDS["studies/quick.toml"].replace("\n", " " * (n // 40) + "\n"),
    "a work_dir": lambda n, c: SEEDS["studies/quick.toml"].replace("seconds = 0.2", f"work_dir = {toml_str(c * n)}", 1),
}


@settings(max_examples=_examples(12), deadline=None)
@given(st.sampled_from(sorted(ENORMOUS)), st.integers(1 << 20, 2 << 20),
       st.sampled_from(["x", "é", "\u2028", "\U0001f600", "\x00", "{", "/", "a/", "9", "\u202e"]))
def test_enormous_study_files(where, n, c):
    """Megabytes in one place (a value, a key, a comment, a list, thousands of tables): one
    bounded line, in bounded time and memory."""
    text = ENORMOUS[where](n, c)
    first = check_text(text)  # the time bound, untraced
    tracemalloc.start()  # then the memory, traced (tracemalloc slows allocation several times)
    try:
        again = study.parse(text, "fuzz.toml") if isinstance(first, study.Study) else None
        # the time bound was checked untraced above; tracemalloc slows allocation several times
        if again is not None:
            outcome(lambda: study.check_against_worker(again, RULES), math.inf)
        else:
            outcome(lambda: study.parse(text, "fuzz.toml"), math.inf)
        _, peak = tracemalloc.get_traced_memory()
    except AssertionError:
        raise
    finally:
        tracemalloc.stop()
    assert peak <= MEMORY_FACTOR * len(text.encode()) + MEMORY_SLACK, (where, len(text), peak)


def test_a_file_larger_than_the_limit_is_refused_unread(tmp_path):
    p = tmp_path / "big.toml"
    p.write_bytes(b"# " + b"x" * study.MAX_STUDY_BYTES)
    with pytest.raises(StudyError, match="larger than 1 MiB"):
        study.load(p)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_file_that_never_ends_is_refused():
    """/dev/zero: the read stops at the limit instead of filling memory."""
    with pytest.raises(StudyError, match="larger than"):
        study.load("/dev/zero")


# ------------------------------------------------------------------------- the defects found, one each

QUICK = SEEDS["studies/quick.toml"]
REGRESSIONS = {
    # tomllib raises ValueError (not TOMLDecodeError) for an integer of more than 4300 digits
    "an integer of 5000 digits": (QUICK.replace("repetitions = 12", "repetitions = " + "1" * 5000),
                                  "thousands of digits"),
    # tomllib recurses once per nesting level: RecursionError
    "arrays nested 3000 deep": ("a = " + "[" * 3000 + "]" * 3000, "nested too deeply"),
    "inline tables nested 3000 deep": ("a = " + "{b=" * 3000 + "1" + "}" * 3000, "nested too deeply"),
    # float(10**400): OverflowError after the range check passed (seconds has no maximum)
    "seconds = 10**400": (QUICK.replace("seconds = 0.2", f"seconds = {10**400}"), "64-bit range"),
    # nan fails every comparison, so it passed every range check
    "seconds = nan": (QUICK.replace("seconds = 0.2", "seconds = nan"), "finite"),
    "margin_pct = nan": (QUICK.replace("seconds = 0.2", "seconds = 0.2\nmargin_pct = nan"), "finite"),
    # _num(10**400) in check_against_worker: OverflowError
    "threads = 10**400": (QUICK.replace("seconds = 0.2", f"seconds = 0.2\nthreads = {10**400}"), "64-bit range"),
    # a message of 1032 characters: the variable's 31 digits, then every known operation
    "a variable of 10**30": (QUICK.replace('hash = "sha256"', f"hash = {10**30}"), "64-bit range"),
    "a size string of 5000 digits": (QUICK.replace("sizes = [1024, 16384]", f'sizes = ["{"1" * 5000}"]', 1),
                                     "is not a size"),
    # a newline in a name or key came out as a message of two lines
    "a newline in a configuration name": (QUICK.replace('name = "aes-sha256"', 'name = "a\\nb"')
                                          .replace('baseline = "aes-sha256"', 'baseline = "zz"'), "a\\nb"),
    "a newline in a key": (QUICK.replace("seconds = 0.2", '"sec\\nonds" = 0.2'), "sec\\nonds"),
    # a megabyte name was echoed whole in the message
    "a name of a megabyte": (QUICK.replace('baseline = "aes-sha256"', f'baseline = "{"z" * (1 << 20)}"'),
                             "characters)…"),
}


#: Not defects before, but bounds the parser now keeps: TOML's 64-bit integers, finite numbers.
BOUNDS = {
    "seconds = 1e400": (QUICK.replace("seconds = 0.2", "seconds = 1e400"), "finite"),
    "p99_bound_ms = inf": (SEEDS["studies/tls-handshake.toml"].replace("p99_bound_ms = 20", "p99_bound_ms = inf", 1),
                           "finite"),
    "a size of 2**64 bytes": (QUICK.replace("sizes = [1024, 16384]", f"sizes = [{2**64}]", 1), "64-bit range"),
    "a size string of 2**64 bytes": (QUICK.replace("sizes = [1024, 16384]", 'sizes = ["17179869184G"]', 1),
                                     "more than 2^63-1 bytes"),
    "more configurations than allowed": (QUICK + "".join(f'[[configuration]]\nname = "c{i}"\ncipher = "x"\nhash = "y"\n'
                                                         for i in range(study.MAX_TABLES)), "at most 1000"),
}


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_bounds_the_parser_keeps(name):
    text, fragment = BOUNDS[name]
    result = check_text(text)
    assert isinstance(result, StudyError), result
    assert fragment in str(result), str(result)


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_defects_the_fuzzer_found(name):
    """Each input once crashed the parser or broke the message's one line; now each is one
    line naming the problem."""
    text, fragment = REGRESSIONS[name]
    result = check_text(text)
    assert isinstance(result, StudyError), result
    assert fragment in str(result), str(result)


def test_an_infinite_rate_is_not_a_load_level():
    """open:<400 nines> overflowed to an infinite rate and was accepted as a load level."""
    from cryptoperf import levels
    with pytest.raises(ValueError):
        levels.parse_load("open:" + "9" * 400)
    with pytest.raises(ValueError):
        levels.expand_loads(["open:1.." + "9" * 400])


@pytest.mark.parametrize("address,port", [("127.0.0.1", 70000), ("127.0.0.1", -1), ("a" * 300, 80),
                                          ("\x00", 80), ("xn--" + "a" * 70, 80)])
def test_a_port_or_address_that_cannot_be_bound_is_a_problem_not_an_exception(address, port):
    """A port outside 0..65535 raised OverflowError, an address IDNA cannot encode UnicodeError."""
    from cryptoperf import hostinfo
    problem = hostinfo.port_problem(address, port)
    assert problem and "\n" not in problem


# ------------------------------------------------------------------------- the CLI, a handful


@settings(max_examples=_examples(8), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=mutated_text())
def test_cli_dry_run_on_mutated_study_files(text, cli, fake_worker, tmp_path):
    """``cryptoperf study FILE --dry-run`` on mutated studies: exit 0, or one error line with
    exit 1 or 2 — never a traceback (the fake worker answers hello)."""
    assume("work_dir" not in text)  # a dry run makes the work directory: not anywhere a mutation says
    fake_worker()
    p = tmp_path / "fuzz.toml"
    p.write_text(text, encoding="utf-8")
    res = cli("study", p, "--dry-run")
    assert "Traceback" not in res.err
    if res.code != 0:
        line = assert_one_line_error(res)
        assert "internal error" not in line, line
        assert res.code in (1, 2), res


def test_a_line_separator_inside_a_string_does_not_shift_line_numbers():
    """SourceMap numbered lines with str.splitlines, which also splits at U+2028, U+2029 and
    U+0085 inside strings and comments: the error pointed at the wrong line (14 for 11), and a
    file of megabytes of them made millions of lines."""
    text = QUICK.replace('description = "AES', 'description = "\u2028\x85\u2029AES').replace(
        "seconds = 0.2", "secnods = 0.2")
    line = next(i for i, l in enumerate(text.split("\n"), 1) if l.startswith("secnods"))
    result = check_text(text)
    assert isinstance(result, StudyError) and result.line == line, (str(result), line)
