"""One row flattener (``cryptoperf.store.rows``) behind the CSV report, ``cryptoperf.load()`` and the
JSON documents: the three agree column by column on a stored run, and the study document lists
every field of the study (test_speed.py: the ``speed`` JSON carries every field a workload's
result has)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cryptoperf import study
from cryptoperf.store import frame
from cryptoperf.store import rows
from cryptoperf.store import db as store
from cryptoperf.store import stored_run as stored
from cryptoperf.report import csv as report_csv
from cryptoperf.report import json as report_json

FIXTURES = Path(__file__).with_name("fixtures")


@pytest.fixture(scope="module")
def v2_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("rows") / "runs.sqlite"
    shutil.copy(FIXTURES / "store-v2.sqlite", path)
    with store.Store(path) as st:
        yield stored.load_run(st, 1), stored.load_run(st, 2)


def test_csv_load_and_the_speed_json_say_the_same_of_each_repetition(v2_run):
    run, speed = v2_run
    cpus = int(run.host.get("logical_cpus") or 1)
    analysed = [o for o in run.outcomes if not o.repetition.calibration]
    csv_rows = report_csv.rows(run)
    assert len(csv_rows) == len(analysed) == 6
    by_key = {(r["configuration"], r["block"]): r for r in csv_rows}
    for o in analysed:
        row = rows.repetition_row(o, cpus)
        assert list(row) == list(rows.ROW_COLUMNS)
        assert row["ops_per_s"] == o.throughput.ops_per_s and row["p50_ns"] == o.latency.p50_ns
        assert row["library_version"] == o.result.library_version and row["other_load_pct"] is not None
        got_csv = by_key[(o.cell.configuration, o.repetition.block)]
        got_frame = frame.row(run.id, "v2-fixture", o, cpus)
        got_speed = rows.speed_entry(o, cpus)
        for column in rows.ROW_COLUMNS:
            want = row[column]
            if column == "params":
                assert json.loads(got_csv[column]) == want and got_speed[column] == want
                continue
            if column in ("fips", "superseded"):
                assert got_csv[column] == int(want)
            else:
                assert got_csv[column] == want, column
            assert got_frame[column] == want and got_speed[column] == want, column
    # the speed run's document: its row, and every field of the worker's result beside it
    (entry,) = report_json.run_document(speed, "s")["results"]
    o = speed.outcomes[0]
    assert entry["size_bytes"] == 64 and entry["validation"] == o.result.raw["validation"]
    assert entry["histogram"] == o.result.histogram and entry["sample_ns_stats"] == o.result.raw["sample_ns_stats"]
    assert entry["fips"] is False and entry["fips_reported"] is False and entry["cpu_mask"] == "baseline"


def test_a_not_measured_repetition_keeps_its_row_with_empty_figures(v2_run):
    run, _ = v2_run
    o = run.outcomes[1]
    from cryptoperf.model import Outcome
    failed = Outcome(o.repetition, "failed", "worker crashed: boom")
    row = rows.repetition_row(failed)
    assert (row["status"], row["reason"], row["library"], row["ops"], row["p50_ns"]) == (
        "failed", "worker crashed: boom", None, None, None)
    assert row["params"] == o.cell.worker_params() and row["size_bytes"] == o.cell.size_bytes
    assert rows.speed_entry(failed)["fips_reported"] is None


def test_the_study_document_lists_every_field_of_the_study():
    text = """\
[study]
name = "tls"
baseline = "rsa"
backends = ["aws-lc"]
repetitions = 3

[[configuration]]
name = "rsa"
cert = "rsa2048"
hosts = ["label:cpu=icelake"]

[[configuration]]
name = "ec"
cert = "ecdsa-p256"

[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { cert = "{cert}", group = "x25519" }
loads = ["closed:1", "open:200"]
optional = true
"""
    d = rows.study_dict(study.parse(text, "s.toml"))
    (op,) = d["operations"]
    assert op["params"] == {"cert": "{cert}", "group": "x25519"} and op["loads"] == ["closed:1", "open:200"]
    assert op["optional"] is True and op["p99_bound_ms"] is None
    rsa = d["configurations"][0]
    assert rsa["hosts"] == [{"kind": "label", "name": "cpu", "value": "icelake"}] and rsa["variables"] == {"cert": "rsa2048"}
    assert d["toml"] == text and "text" not in d and "source" not in d and "rules" not in d
    assert d["backends"] == ["aws-lc"] and d["hosts"] == [] and d["every_node"] is False
    json.dumps(d)  # all of it JSON
