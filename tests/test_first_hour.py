"""docs/first-hour.md runs: every command of its ```sh blocks and its ```python block, in order,
against the fake worker.

What the test takes from the page: every line of a ```sh (or ```console) block that starts with
``cryptoperf`` (a leading ``$ `` is dropped; lines ending in ``\\`` are joined), split as a shell
would (shlex), and the ```python block(s), run with ``exec``. Other lines (``pip install .``) are
skipped.

What it rewrites, and nothing else:

- the study files: docs/first-hour/*.toml are copied to <tmp>/docs/first-hour/ (the commands'
  relative paths are kept: the test runs in <tmp>) with ``repetitions = 3``, ``seconds = 0.01``
  and ``warmup_s = 0`` in their ``[study]`` tables, so each study takes a second or two; 3 is
  the fewest blocks an interval (and so `plan` and a verdict) needs;
- where results go: CRYPTOPERF_DATA_DIR is <tmp>/data, so the default store the page relies on
  (``plan``, ``report`` and ``cryptoperf.load()`` without a run id or store) is a fresh
  <tmp>/data/runs.sqlite, and ``cryptoperf-results/`` is created in <tmp>;
- the worker: the fake worker (tests/fake_worker.py) and its FIPS build (``fake_worker.fips()``),
  scripted with CPU times of the order the page quotes, so the answers have the same shape.

It asserts that each command exits 0 and that its key output is there: the studies' verdict
lines, ``plan``'s cores and change, the Markdown report's verdicts, the HTML report's path, and
the pandas groupby of the Python block (one MB/s row per size and configuration).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, CliResult
from cryptoperf.cli import main

PAGE = ROOT / "docs" / "first-hour.md"
STUDIES = ROOT / "docs" / "first-hour"

#: Rewritten in every copied study file's [study] table.
FAST = {"repetitions": "3", "seconds": "0.01", "warmup_s": "0"}

#: The fake worker's CPU time per operation (ns) and a small repetition noise, so that the
#: answers look like the page's: RSA-3072 sign ~1.4 ms, ECDSA P-256 sign ~15 µs, X25519 ~25 µs.
SPEC = {
    "latency_ns": {"rsa3072-sign": 1_400_000, "ecdsa-p256-sign": 15_000, "x25519-keygen": 25_000,
                   "x25519-derive": 24_000},
    "config_factor": {"fips-on": 1.05, "sha512": 1.7},
    "rep_factors": [1.0, 1.02, 0.99],
    "noise_cv": 0.005,
}


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown text, in order: (language, body)."""
    return [(m.group(1).strip().lower(), m.group(2))
            for m in re.finditer(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", text, re.S | re.M)]


def steps(text: str) -> list[tuple[str, str]]:
    """What the page asks a reader to run, in order: ("cli", command line) for each line of a
    sh/console block that starts with ``cryptoperf``, ("python", code) for each python block."""
    out = []
    for lang, body in blocks(text):
        if lang in ("sh", "console", "shell", "bash"):
            joined = re.sub(r"\\\n\s*", " ", body)
            for line in joined.splitlines():
                line = line.strip().removeprefix("$ ").strip()
                if line.startswith("cryptoperf "):
                    out.append(("cli", line))
        elif lang == "python":
            out.append(("python", body))
    return out


def fast_copy(src: Path, dst: Path) -> None:
    """Copy a study file with FAST's values in place of its own (each key must be there once)."""
    text = src.read_text()
    for key, value in FAST.items():
        text, n = re.subn(rf"^{key}\s*=\s*[^\n#]+", f"{key} = {value}", text, flags=re.M)
        assert n == 1, f"{src.name}: expected one '{key} = ...' line, found {n}"
    dst.write_text(text)


def test_steps_are_found():
    """The page has the commands the tutorial is about (so an edit cannot silently drop them)."""
    found = steps(PAGE.read_text())
    cli_lines = [s for kind, s in found if kind == "cli"]
    assert sum(kind == "python" for kind, _ in found) == 1
    for needle in ("study docs/first-hour/tls-certs.toml", "plan --per-request",
                   "study docs/first-hour/fips-aes.toml", "study docs/first-hour/sha2.toml",
                   "report --format md -o -", "report --format html"):
        assert any(needle in line for line in cli_lines), needle
    for study in re.findall(r"docs/first-hour/([\w.-]+\.toml)", " ".join(cli_lines)):
        assert (STUDIES / study).is_file(), study


def test_first_hour_runs(fake_worker, tmp_path, monkeypatch, capsys):
    fake_worker(SPEC)
    fake_worker.fips()
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "200")  # the delta table's verdicts on one line each
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs" / "first-hour").mkdir(parents=True)
    for src in sorted(STUDIES.glob("*.toml")):
        fast_copy(src, tmp_path / "docs" / "first-hour" / src.name)

    results: list[tuple[str, CliResult]] = []
    for kind, step in steps(PAGE.read_text()):
        capsys.readouterr()
        if kind == "cli":
            code = main(shlex.split(step)[1:])
        else:
            code = 0
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                exec(compile(step, f"{PAGE.name} python block", "exec"), {"__name__": "first_hour"})
        captured = capsys.readouterr()
        out = captured.out + (stdout.getvalue() if kind == "python" else "")
        res = CliResult(code, out, captured.err)
        assert res.code == 0, f"`{step}` exited {res.code}:\n{res.out}\n{res.err}"
        results.append((step, res))

    def output(fragment: str) -> CliResult:
        matching = [r for s, r in results if fragment in s]
        assert matching, f"no step with {fragment!r}"
        return matching[0]

    tls = output("study docs/first-hour/tls-certs.toml")
    assert re.search(r"p50 latency \d+(\.\d+)?× higher \[", tls.out), tls.out  # RSA-3072 sign against ECDSA P-256
    assert "equivalent within ±2 %" in tls.out  # the X25519 rows, the same operation in both

    plan = output("plan --per-request")
    assert "sign (ecdsa-p256-sign)" in plan.out and "sign (rsa3072-sign)" in plan.out
    assert re.search(r"cores needed +[\d.]+ cores", plan.out), plan.out
    assert re.search(r"change ecdsa → rsa at 2,000 requests/s, worker CPU: [\d.]+ → [\d.]+ cores, \+[\d.]+ cores", plan.out)
    assert "The non-crypto remainder is left out" in plan.out
    assert "using run 1 (study tls-certs" in plan.err

    fips = output("study docs/first-hour/fips-aes.toml")
    assert re.search(r"fips-on \[fips\].*% higher \[", fips.out), fips.out

    sha = output("study docs/first-hour/sha2.toml")
    assert sha.out.count("% higher [") >= 2, sha.out

    md = output("report --format md -o -")
    assert "- hash 64 B on openssl, sha512:" in md.out and "- hash 16 KiB on openssl, sha512:" in md.out
    assert "using run 3 (study sha2" in md.err

    html = output("report --format html")
    path = tmp_path / html.out.strip().splitlines()[-1]
    assert path.suffix == ".html" and path.is_file() and path.parent.name == "cryptoperf-results"

    (_, py), = [(s, r) for s, r in results if not s.startswith("cryptoperf ")]
    assert "size_bytes  configuration" in py.out and "Name: bytes_per_s" in py.out
    rows = re.findall(r"^\s*(?:(\d+)\s+)?(sha256|sha512)\s+([\d.]+)$", py.out, re.M)
    assert [(cfg) for _, cfg, _ in rows] == ["sha256", "sha512", "sha256", "sha512"], py.out
    assert "cryptoperf.load: using run 3 (study sha2" in py.err
