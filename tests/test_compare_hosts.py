"""`cryptoperf compare --by host RUN`: the machines of one run side by side. The store of
stored_runs.two_host_run holds a run whose repetitions carry two machines' fingerprints
(node-a ran blocks 1-3, node-b blocks 4-6, where sha256 — configuration A — is scripted 1.5×
slower), so each machine's verdict against the other is known; the comparison is compare's
(Welch's interval on each machine's repetitions), which the tests check by comparing the
same repetitions stored as two runs."""

import dataclasses
import json

import pytest

from conftest import assert_one_line_error
from cryptoperf import compare as cmp
from cryptoperf.errors import NoComparison, UsageError
from cryptoperf.store.db import Store
from cryptoperf.store.stored_run import StoredRun, load_run
from stored_runs import NODE_A, NODE_B, two_host_run


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return two_host_run(tmp_path_factory.mktemp("two-hosts"))


@pytest.fixture(scope="module")
def runs(store):
    with Store(store) as st:
        return {i: load_run(st, i) for i in (1, 2, 3)}


def test_the_run_keeps_which_machine_ran_each_repetition(runs):
    hosts = {(o.repetition.block, o.host["hostname"]) for o in runs[3].outcomes}
    assert {b for b, h in hosts if h == "node-a"} == {0, 1, 2, 3}
    assert {b for b, h in hosts if h == "node-b"} == {4, 5, 6}
    assert [o.host for o in runs[1].outcomes] == [None] * 8  # a run on one machine: its own host


def test_each_host_against_the_first_is_compare_on_their_repetitions(runs):
    hc = cmp.compare_hosts(runs[3])
    assert [h.name for h in hc.hosts] == ["node-a", "node-b"] and hc.baseline.name == "node-a"
    assert [(h.repetitions, h.measured) for h in hc.hosts] == [(6, 6), (6, 6)]
    (c,) = hc.comparisons
    by_conf = {d.configuration: d for d in c.deltas}
    a, b = by_conf["A"], by_conf["B"]
    assert a.status == "ok" and a.latency.ratio == pytest.approx(1.5, rel=1e-3)
    assert a.verdict.kind == "slower" and a.verdict.text.startswith("p50 latency 50.0 % higher [")
    assert b.latency.contains(1.0) and b.verdict.kind == "inconclusive"
    # the same repetitions stored as two runs give the same deltas through compare_runs
    assert c.deltas == cmp.compare_runs(runs[1], runs[2], run_sd_pct=None).deltas
    assert c.comparisons == 2 and "Welch" in c.method
    diffs = {d.field: (d.a, d.b) for d in c.host}
    assert diffs["hostname"] == ("node-a", "node-b") and diffs["CPU model"] == ("Fake CPU A", "Fake CPU B")
    assert diffs["kernel"][1] == NODE_B["kernel"]


def test_a_named_baseline_host_turns_the_comparison_around(runs):
    hc = cmp.compare_hosts(runs[3], baseline_host="node-b")
    assert [h.name for h in hc.hosts] == ["node-b", "node-a"]
    a = next(d for d in hc.comparisons[0].deltas if d.configuration == "A")
    assert a.latency.ratio == pytest.approx(1 / 1.5, rel=1e-3) and a.verdict.kind == "faster"


def test_a_run_on_one_host_has_nothing_to_compare(runs):
    with pytest.raises(NoComparison, match="run 1 ran on one host only"):
        cmp.compare_hosts(runs[1])


def test_an_unknown_baseline_host_names_the_hosts(runs):
    with pytest.raises(UsageError, match="--baseline-host node-c: run 3 ran on node-a, node-b; name one"):
        cmp.compare_hosts(runs[3], baseline_host="node-c")


def test_two_machines_of_one_hostname_are_told_apart_by_cpu_model(runs):
    run = runs[3]
    same = [dataclasses.replace(o, host=dict(o.host, hostname="same")) for o in run.outcomes]
    shares = cmp.host_shares(StoredRun(run.meta, run.study, same, run.analysis))
    assert [h.name for h in shares] == ["same (Fake CPU A)", "same (Fake CPU B)"]


def test_cli_compare_by_host(cli, store, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # the table's verdicts on one line each
    res = cli("compare", "--by", "host", "3", "--store", store)
    assert res.code == 0, res.err
    assert "using run 3 (study t" in res.err
    out = res.out
    assert "2 hosts, baseline node-a" in out
    assert "host node-a (6 of 6 repetitions measured): Fake CPU A" in out
    assert "host node-b (6 of 6 repetitions measured): Fake CPU B" in out
    assert "host differences (node-a → node-b)" in out and "node-b vs node-a (baseline)" in out
    assert "p50 node-a" in out and "p50 node-b" in out
    assert "p50 latency 50.0 % higher [" in out and "verdicts: 1 slower, 1 inconclusive" in out


def test_cli_compare_by_host_json_and_gate(cli, store):
    res = cli("compare", "--by", "host", "3", "--store", store, "--json", "--fail-on", "slower")
    assert res.code == 1  # A is slower on node-b: the gate fails
    doc = json.loads(res.out)
    assert doc["kind"] == "compare_hosts" and doc["run"]["id"] == 3 and doc["baseline_host"] == "node-a"
    assert [h["name"] for h in doc["hosts"]] == ["node-a", "node-b"]
    assert doc["hosts"][1] == {"name": "node-b", "hostname": "node-b", "cpu_model": NODE_B["cpu_model"],
                               "repetitions": 6, "measured": 6}
    (c,) = doc["comparisons"]
    assert c["host"] == "node-b" and c["baseline_host"] == "node-a" and c["unmatched"] == []
    a = next(d for d in c["deltas"] if d["configuration"] == "A")
    assert a["verdict"]["kind"] == "slower"
    assert doc["failing"] == ["node-b: openssl/hash/1024/A"]
    text = cli("compare", "--by", "host", "3", "--store", store, "--baseline-host", NODE_A["hostname"],
               "--fail-on", "slower")
    assert text.code == 1 and "regression gate (--fail-on slower): FAILED by 1 cell(s): node-b: openssl hash A" in text.out


def test_cli_compare_by_host_of_a_one_host_run_is_one_line(cli, store):
    assert_one_line_error(cli("compare", "--by", "host", "1", "--store", store),
                          "run 1 ran on one host only", code=1)
    assert_one_line_error(cli("compare", "--by", "host", "3", "--baseline-host", "x", "--store", store),
                          "--baseline-host x: run 3 ran on node-a, node-b", code=2)
