"""One analysed document: every figure the Markdown report of a run shows is in its JSON document
(the same value at the precision printed, the same interval), and the document validates against
its JSON Schema (tests/fixtures/document.schema.json) — for a TLS handshake study with a server
side, an encrypted-storage study and a fleet-job study, each run against the fake worker.

The check reads every number of every Markdown table row and list item, with its unit, and looks
for it among the numbers of the document's analysis, cell summaries and deltas: a figure made at
render time, or a figure the document leaves out, fails it. An interval ``[a, b]`` must match
both bounds of one interval or band of the document."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import ROOT
from stored_runs import run_study
from cryptoperf.report import json as report_json
from cryptoperf.report import markdown as md_report
from cryptoperf.store.stored_run import load_run, open_store

import test_fleet
import test_storage
import test_workload_report

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "document.schema.json").read_text())

#: A printed number: sign, digits with thousands commas, decimals; an SI suffix; a unit.
NUMBER = re.compile(r"(?<![\w.\-])([+\-−]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!-?[A-Za-z])"
                    r"(?:\s?([kMG])(?![a-zA-Z]))?(?:\s?(ns|µs|us|ms|s|%|MB/s|KiB|MiB|GiB|B)(?![a-zA-Z]))?")
INTERVAL = re.compile(r"\[([^\[\],]+),\s*([^\[\],]+)\]")
SI = {"k": 1e3, "M": 1e6, "G": 1e9}
TIME = {"ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
SIZE = {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}


def numbers(doc: Any, key: str = "") -> Iterator[tuple[str, float]]:
    """(key, value) for every number in ``doc``, depth first; booleans left out."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from numbers(v, str(k))
    elif isinstance(doc, list):
        for v in doc:
            yield from numbers(v, key)
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool) and math.isfinite(doc):
        yield key, float(doc)


def readings(key: str, v: float) -> set[float]:
    """What a document number may be printed as: itself, a time in ns from a key in s, a
    fraction as per cent, a ratio as a change in per cent (either way round: "17 % fewer"),
    a rate per s as per min, a number of bytes per s as MB/s."""
    out = {v, v * 100.0, (v - 1.0) * 100.0, (1.0 - v) * 100.0, v * 60.0, v / 1e6}
    if key.endswith("_s") or key == "alone_s":
        out.add(v * 1e9)
    return out


def document_values(doc: dict) -> list[float]:
    """Every reading of every number of the analysis, the cells and the deltas (and the
    study's options), sorted."""
    parts = [doc.get("analysis", {}), doc.get("cells", []), doc.get("deltas", []), doc.get("study", {})]
    return sorted({r for part in parts for k, v in numbers(part) for r in readings(k, v)})


def intervals(doc: dict) -> list[tuple[float, float]]:
    """Every (low, high) pair of the document, as printed: an estimate's bounds (and /1e6, as
    MB/s; ×60 as per min), an interval's ratio bounds and its per cent bounds."""
    out = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            lo, hi = x.get("ci_low"), x.get("ci_high")
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
                for f in (1.0, 1e-6, 60.0, 100.0):
                    out.append((lo * f, hi * f))
                out.append(((lo - 1) * 100, (hi - 1) * 100))
                # a change the other way round: "43.2 % lower [43.0, 43.3]"
                out.append(((1 - hi) * 100, (1 - lo) * 100))
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk([doc.get("analysis"), doc.get("cells"), doc.get("deltas")])
    return out


def printed(m: re.Match) -> tuple[float, float, str] | None:
    """(value in base units, half its last digit in base units, unit) of a printed number."""
    sign, digits, decimals, si, unit = m.groups()
    decimals = decimals or ""
    value = float(digits.replace(",", "") + decimals)
    step = 10.0 ** -(len(decimals) - 1) if decimals else 1.0
    scale = SI.get(si or "", 1.0) * TIME.get(unit or "", 1.0) * SIZE.get(unit or "", 1)
    value, step = value * scale, step * scale
    if sign in ("-", "−"):
        value = -value
    return value, step / 2.0, unit or ""


def found(value: float, half: float, values: list[float]) -> bool:
    import bisect
    tol = half * 1.0001 + abs(value) * 1e-9
    i = bisect.bisect_left(values, value - tol)
    return i < len(values) and values[i] <= value + tol


#: Sections that describe the host and the command, not measured figures.
NOT_FIGURES = ("Host", "How to reproduce")
#: A unit a column's header gives its numbers (``p50 ms``, ``CPU (µs / handshake)``, ``CPU % of
#: host``): not a confidence level's ``95 %``, not ``per s``.
HEADER_UNIT = re.compile(r"(?<![\w/])(?<!\d )(?<!per )(ns|µs|ms|s|%)(?![\w/])")


def figure_lines(md: str) -> list[tuple[str, list[str]]]:
    """The Markdown's table body rows (not headers or separators) and list items, outside
    ``NOT_FIGURES``, each with its table's column units (the unit a column's header names, ''
    for none; [] for a list item)."""
    lines = md.splitlines()
    out: list[tuple[str, list[str]]] = []
    section, units = "", []
    for i, line in enumerate(lines):
        if line.startswith("## "):
            section = line[3:].strip()
        if section in NOT_FIGURES:
            continue
        if line.startswith("|"):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if re.match(r"^\|\s*:?-", nxt):  # a header
                units = [(m.group(1) if (m := HEADER_UNIT.search(h)) else "") for h in line.strip("|").split("|")]
                continue
            if re.match(r"^\|\s*:?-", line):
                continue
            out.append((line, units))
        elif line.startswith("- "):
            out.append((line, []))
    return out


def missing_figures(md: str, doc: dict) -> list[str]:
    """Every printed figure of ``md`` that ``doc`` does not hold, as ``<figure> in <line>``."""
    values, pairs = document_values(doc), intervals(doc)
    missing = []
    for line, units in figure_lines(md):
        cells = line.strip().strip("|").split("|") if units else [line]
        for cell, unit in zip(cells, units or [""]):
            missing += _missing_in(cell.strip(), unit, line, values, pairs)
    return missing


def _missing_in(cell: str, unit: str, line: str, values: list[float], pairs: list[tuple[float, float]]) -> list[str]:
    """The figures of one table cell (or list item) not in the document; ``unit``: its column's
    unit, for numbers printed without one."""
    missing = []
    if unit:
        cell = NUMBER.sub(lambda m: m.group(0) if m.group(5) else f"{m.group(0)} {unit}", cell)
    for iv in INTERVAL.finditer(cell):
        ends = [NUMBER.fullmatch(t.strip().rstrip("%").strip()) for t in iv.groups()]
        if not all(ends):
            continue
        (lo, lo_half, _), (hi, hi_half, _) = (printed(e) for e in ends)  # type: ignore[misc]
        if not any(abs(a - lo) <= lo_half * 1.0001 + 1e-9 and abs(b - hi) <= hi_half * 1.0001 + 1e-9
                   for a, b in pairs):
            missing.append(f"interval {iv.group(0)} in: {line}")
    for m in NUMBER.finditer(INTERVAL.sub(" ", cell)):
        p = printed(m)
        if p is None:
            continue
        value, half, unit = p
        if not found(value, half, values) and not found(abs(value), half, values):
            missing.append(f"{m.group(0).strip()} in: {line}")
    return missing


def check(run, store: Path) -> tuple[dict, str]:
    doc = json.loads(json.dumps(report_json.run_document(run, store)))  # exactly what the file holds
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    md = md_report.render(run)
    missing = missing_figures(md, doc)
    assert not missing, "figures of the Markdown not in the JSON document:\n" + "\n".join(missing[:40])
    return doc, md


# ------------------------------------------------------------------------------ the three studies

@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("doc-tls")
    run_study(d / "study", d / "runs.sqlite", test_workload_report.STUDY, test_workload_report.SPEC)
    return load_run(open_store(d / "runs.sqlite")), d / "runs.sqlite"


def test_every_figure_of_a_tls_study_with_a_server_is_in_its_json(tls):
    doc, md = check(*tls)
    points = [p for f in doc["analysis"]["workloads"]["families"] for p in f["points"]]
    assert points and all("server_cpu_ns_per_tx" in p and p["server_cpu_ns_per_tx"]["ci_low"] is not None
                          for p in points)
    # the fake's handshake costs the server 0.6 × its latency of CPU (1.2 ms at 2 ms; rsa × 1.3)
    by = {(p["configuration"], p["level"]["text"]): p for p in points}
    assert by[("ecdsa", "closed:1")]["server_cpu_ns_per_tx"]["value"] == pytest.approx(1.2e6, rel=1e-3)
    assert by[("rsa", "closed:1")]["server_cpu_ns_per_tx"]["value"] == pytest.approx(1.56e6, rel=1e-3)


def test_the_levels_frame_has_each_sides_cpu_per_transaction_from_the_same_analysis(tls):
    pytest.importorskip("pandas")
    import cryptoperf
    run, store = tls
    df = cryptoperf.load(run.id, store=store, kind="levels")
    doc = report_json.run_document(run, store)
    points = {(p["configuration"], p["level"]["text"]): p
              for f in doc["analysis"]["workloads"]["families"] for p in f["points"]}
    assert len(df) == len(points) == 8
    for r in df.itertuples():
        p = points[(r.configuration, r.level)]
        assert r.server_cpu_ns_per_tx == p["server_cpu_ns_per_tx"]["value"]
        assert r.server_cpu_ns_per_tx_low == p["server_cpu_ns_per_tx"]["ci_low"]
        assert r.client_cpu_ns_per_tx == p["client_cpu_ns_per_tx"]["value"]
        assert r.level_x == p["level"]["x"]
        assert (r.vs if isinstance(r.vs, str) else None) == (None if p["baseline"] else "ecdsa")
    with pytest.raises(ValueError, match="unknown kind"):
        cryptoperf.load(run.id, store=store, kind="level")


def test_a_storage_study_document_has_mb_per_s_and_cpu_beside_ios(tmp_path, fake_worker, cli):
    fake_worker()
    work = tmp_path / "work"
    work.mkdir()
    study = tmp_path / "storage.toml"
    study.write_text(test_storage.small(work))
    res = cli("study", study, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out")
    assert res.code == 0, res.err
    run = load_run(open_store(tmp_path / "s.sqlite"))
    doc, md = check(run, tmp_path / "s.sqlite")
    cells = [c for f in doc["analysis"]["workloads"]["own"]["storage"]["families"] for c in f["cells"]]
    assert cells and all(c["mb_per_s"]["value"] > 0 and c["cpu_pct"] is not None for c in cells)


def test_a_fleet_study_document_has_targets_per_minute_phases_and_saturation(tmp_path, fake_worker, cli):
    fake_worker({"fleet_phase_factor": {"slow-connect": {"connect": 1.6}}, "noise_cv": 0.01})
    study = tmp_path / "jobs.toml"
    study.write_text(test_fleet.STUDY)
    res = cli("study", study, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out")
    assert res.code == 0, res.err
    run = load_run(open_store(tmp_path / "s.sqlite"))
    doc, md = check(run, tmp_path / "s.sqlite")
    fleet = doc["analysis"]["workloads"]["own"]["fleet-job"]
    points = [p for f in fleet["families"] for p in f["points"]]
    assert points and all(p["targets_per_min"]["value"] > 0 for p in points)
    assert any(p["saturation"] is not None for p in points)


# ------------------------------------------------------------------------------ the check itself

def test_the_check_finds_a_figure_the_document_lacks(tls):
    """The check can fail: a figure taken out of the document, or an interval moved, is
    reported."""
    run, store = tls
    doc = json.loads(json.dumps(report_json.run_document(run, store)))
    md = md_report.render(run)
    for f in doc["analysis"]["workloads"]["families"]:
        for p in f["points"]:
            p.pop("server_cpu_ns_per_tx")
            p.pop("both_cpu_ns_per_tx")
    for summary in doc["cells"]:  # the same figure, per cell
        summary.pop("server_cpu_ns_per_op")
        summary.pop("server_cpu_ns_per_op_samples")
    assert any("1,560" in m or "1.56 ms" in m for m in missing_figures(md, doc))
    doc = json.loads(json.dumps(report_json.run_document(run, store)))
    for d in doc["deltas"]:
        if d["latency"]:
            d["latency"]["ci_low"] *= 0.99
            d["latency"]["ci_high"] *= 1.01
    assert any(m.startswith("interval") for m in missing_figures(md, doc))
