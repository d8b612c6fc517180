"""Integrity of a cell: a worker whose library changed between the measured repetitions of one
cell (its result's library, library_version, FIPS state or capability vector differ) is
detected and the cell rejected with the reason — its comparisons say why instead of giving a
verdict — in the terminal, the JSON document and the reports (docs/reliability.md,
"Integrity of a cell")."""

import json

import pytest

from conftest import TWO_CONFIG_STUDY
from cryptoperf import analysis
from cryptoperf.model import OK, REJECTED, Cell, Outcome, Repetition
from cryptoperf.result import decode

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

STUDY = TWO_CONFIG_STUDY.format(reps=4, timeout=5)


def run(cli, write_study, tmp_path, spec, fake_worker):
    fake_worker(spec)
    res = cli("study", write_study(STUDY), "--out", tmp_path / "out")
    doc = json.loads(next((tmp_path / "out").glob("t-*.json")).read_text())
    md = next((tmp_path / "out").glob("t-*.md")).read_text()
    html = next((tmp_path / "out").glob("t-*.html")).read_text()
    return res, doc, md, html


@pytest.mark.parametrize("field, value, shown", [
    ("library_version", "fake-1.1", "block 3 library_version 'fake-1.1'"),
    ("fips", True, "block 3 fips True"),
    ("capabilities", {"maskable": True, "env": None, "openssl_ia32cap": "0x1:0x0"}, "block 3 capability vector 0x1:0x0"),
])
def test_a_library_changed_under_a_cell_rejects_it_with_the_reason(cli, write_study, fake_worker, tmp_path,
                                                                   field, value, shown):
    res, doc, md, html = run(cli, write_study, tmp_path, {"result_fields": {"B#3": {field: value}}}, fake_worker)
    # the study compared nothing it could trust: it ends as NoComparison, its results stored
    assert res.code == 1 and "compared nothing" in res.err, res.err
    b = next(c for c in doc["cells"] if c["configuration"] == "B")
    a = next(c for c in doc["cells"] if c["configuration"] == "A")
    assert (a["status"], b["status"]) == (OK, REJECTED)
    assert b["reason"].startswith("library changed between repetitions: block 1 ran ") and shown in b["reason"]
    assert b["ok"] == 4  # every repetition was measured and is kept; the cell is not trusted
    (d,) = doc["deltas"]
    assert d["status"] == "n/a" and d["verdict"] is None
    assert d["reason"] == f"this configuration: rejected: {b['reason']}"
    for text in (res.out, md, html):  # every report says why
        assert "library changed between repetitions" in " ".join(text.split()), text[:300]


def test_a_baseline_whose_library_changed_rejects_every_comparison_with_it(cli, write_study, fake_worker, tmp_path):
    res, doc, md, _ = run(cli, write_study, tmp_path, {"result_fields": {"A#2": {"library_version": "fake-0.9"}}},
                          fake_worker)
    (d,) = doc["deltas"]
    assert d["status"] == "n/a" and d["reason"].startswith("baseline: rejected: library changed between repetitions")
    assert "'fake-0.9'" in d["reason"]


def test_the_same_library_throughout_is_not_rejected(cli, write_study, fake_worker, tmp_path):
    # a change in a calibration repetition (block 0, not analysed) is no change of the measured ones
    res, doc, _, _ = run(cli, write_study, tmp_path, {"result_fields": {"B#0": {"library_version": "fake-1.1"}},
                                                      "config_factor": {"B": 2.0}}, fake_worker)
    assert res.code == 0, res.err
    assert {c["status"] for c in doc["cells"]} == {OK}
    assert doc["deltas"][0]["verdict"]["kind"] == "slower"


def _outcome(block, host=None, **result):
    cell = Cell("B", "openssl", "hash", "sha512")
    base = {"status": "ok", "library": "OPENSSL", "library_version": "3.0", "fips": False,
            "capabilities": {"openssl_ia32cap": "0xff:0x0"}}
    return Outcome(Repetition(cell, block, block), OK, result=decode({**base, **result}), host=host)


def test_capability_vectors_are_compared_per_machine_and_libraries_across_machines():
    node = lambda n: {"hostname": f"h{n}", "ray_node": {"node_id": f"n{n}"}}  # noqa: E731
    other_cpu = {"capabilities": {"openssl_ia32cap": "0x0f:0x0"}}
    # two Ray nodes with different CPUs, each consistent with itself: one library, not rejected
    assert analysis.library_change([_outcome(1, node(1)), _outcome(2, node(2), **other_cpu),
                                    _outcome(3, node(1)), _outcome(4, node(2), **other_cpu)]) is None
    # the same node's vector changing is
    why = analysis.library_change([_outcome(1, node(1)), _outcome(2, node(1), **other_cpu)])
    assert why and "block 1 ran capability vector 0xff:0x0, block 2 capability vector 0x0f:0x0" in why
    # another library version on another node is a change too: the cell mixes two libraries
    why = analysis.library_change([_outcome(1, node(1)), _outcome(2, node(2), library_version="3.1")])
    assert why and "library_version '3.0', block 2 library_version '3.1'" in why
    # failed repetitions (no measurement) do not count
    failed = Outcome(Repetition(Cell("B", "openssl", "hash", "sha512"), 5, 5), "failed",
                     result=decode({"status": "ok", "library_version": "9"}))
    assert analysis.library_change([_outcome(1), failed, _outcome(2)]) is None
