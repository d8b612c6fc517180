"""The report's workload sections, from a workload study run against the fake worker: throughput
vs load (one line per configuration, every level in the table with its verdict), the latency
objective, latency percentiles per level, CPU over time; and the fake worker's workload results."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import FAKE_WORKER, TWO_CONFIG_STUDY
from stored_runs import DRIFT, run_study
from cryptoperf.report import html as html_report
from cryptoperf.report import markdown as md_report
from cryptoperf.report.sections import workloads as ws
from cryptoperf.workloads import generic
from cryptoperf.store.stored_run import load_run, open_store

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

LOADS = ["closed:1", "closed:4", "open:200", "open:400"]

STUDY = """\
[study]
name = "tls-load"
baseline = "ecdsa"
backends = ["aws-lc"]
repetitions = 3
seconds = 1
warmup_s = 0
timeout_s = 10

[[configuration]]
name = "ecdsa"
cert = "ecdsa-p256"

[[configuration]]
name = "rsa"
cert = "rsa2048"

[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { cert = "{cert}", group = "x25519", session = "full" }
loads = ["closed:1", "closed:4", "open:200", "open:400"]
p99_bound_ms = 3.5
"""

# One handshake alone takes 2 ms (rsa 2.6 ms); each extra closed connection adds a quarter,
# so capacity is 2000/s (rsa ~1540/s). Open latency = alone / (1 − rate/capacity): p99 is
# 1.5 × that, so ecdsa's p99 is 3.33 ms at 200/s and 3.75 ms at 400/s; rsa's is over 3.5 ms
# at both.
SPEC = {"latency_ns": {"tls-handshake": 2_000_000}, "config_factor": {"rsa": 1.3}, "rep_factors": DRIFT}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("workload-report")
    store = d / "runs.sqlite"
    run_study(d / "study", store, STUDY, SPEC)
    return load_run(open_store(store))


@pytest.fixture(scope="module")
def html(run):
    return html_report.render(run)


@pytest.fixture(scope="module")
def md(run):
    return md_report.render(run)


def section(html: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}"[^>]*>(.*?)</section>', html, re.S)
    assert m, f"no section {sid}"
    return m.group(1)


def test_the_run_has_every_level_of_both_configurations(run):
    fams = run.analysis.workloads.families
    assert len(fams) == 1
    f = fams[0]
    assert (f.kind, f.backend, f.label, f.mode, f.own, f.job) == ("tls-handshake", "aws-lc", "full handshake",
                                                                 "socket", False, False)
    assert sorted((p.series, p.load.text) for p in f.points) == sorted(
        (c, l) for c in ("ecdsa", "rsa") for l in LOADS)
    assert f.panels() == ["closed", "open"]
    assert all(len(p.blocks) == 3 for p in f.points)
    assert run.analysis.workloads.generic == [f] and run.analysis.workloads.timed == [f]


def test_throughput_plot_has_one_series_per_configuration_and_panel(html):
    body = section(html, "throughput-load")
    svgs = re.findall(r'<svg class="plot throughput-load" id="([^"]+)"', body)
    assert len(svgs) == 1
    plot_id = svgs[0]
    series = sorted(set(re.findall(rf'id="{re.escape(plot_id)}-series-([^"]+)"', body)))
    assert series == ["ecdsa-closed", "ecdsa-open", "rsa-closed", "rsa-open"]
    # the 95 % band across repetitions, where the repetitions differ (closed levels)
    assert f'id="{plot_id}-band-ecdsa-closed"' in body
    assert "closed loop: client connections" in body and "open loop: offered rate" in body
    assert "geometric mean" in body and "95 % t interval" in body


def test_throughput_table_lists_every_level_with_cpu_late_and_verdict(html, run):
    body = section(html, "throughput-load")
    table = re.search(r'<table class="workload-levels".*?</table>', body, re.S).group(0)
    rows = re.findall(r"<tr class=\"verdict-[a-z]+\">(.*?)</tr>", table, re.S)
    assert len(rows) == 2 * len(LOADS)
    for load in LOADS:
        assert f"({load})" in table
    # ecdsa at c=1: 500 transactions/s (1 / 2 ms), client 40 % and server 60 % of 2 ms of CPU
    first = rows[0]
    assert "ecdsa" in first and "500 [" in first and ">800<" in first and ">1,200<" in first
    assert ">baseline<" in first
    rsa_c1 = rows[1]
    assert "p50 latency 30.0 % higher" in rsa_c1
    open_rows = [r for r in rows if "(open:" in r]
    assert all("0 (0.0 %)" in r for r in open_rows)  # late transactions, open levels only
    assert all("(0.0 %)" not in r for r in rows if "(closed:" in r)
    assert 'client CPU<div class="sub">µs / handshake</div>' in table
    assert 'server CPU<div class="sub">µs / handshake</div>' in table


def test_latency_percentiles_per_level_say_whether_corrected(html):
    body = section(html, "latency-load")
    assert '<svg class="plot latency-load"' in body
    for pct in ("p50", "p90", "p99", "p999"):
        assert f"-pct-ecdsa-{pct}-open" in body and f"-pct-rsa-{pct}-closed" in body
    assert "corrected for coordinated omission" in body and "not corrected for coordinated omission" in body
    assert body.count("from when each transaction was due") == 4  # the open rows
    assert body.count("from each transaction&#39;s actual start") == 4  # the closed rows


def test_cpu_over_time_plots_client_and_server_per_configuration(html):
    body = section(html, "cpu-timeline")
    svgs = re.findall(r'<svg class="plot cpu-timeline" id="([^"]+)"', body)
    assert len(svgs) == len(LOADS)
    for side in ("client", "server"):
        for config in ("ecdsa", "rsa"):
            assert f"-cpu-{config}-{side}" in body
    assert "-steal-ecdsa" in body
    assert "time since the cell started, s" in body


def test_latency_objective_names_the_rates(html, md):
    body = section(html, "latency-objective")
    assert "p99 ≤ 3.5 ms" in body
    assert re.search(r"ecdsa</strong>: 200/s \(p99 3\.\d+ ms\) met it; 400/s \(p99 3\.\d+ ms\) did not", body), body
    assert "rsa</strong>: no measured rate met it: the lowest, 200/s" in body
    assert "- ecdsa: 200/s" in md


def test_latency_objective_when_every_rate_meets_it(run):
    texts = {o.series: ws.objective_text(o) for o in generic.objectives(run.analysis.workloads.families,
                                                                         {"full handshake": 50.0})}
    assert texts["ecdsa"].startswith("every measured rate met it, up to 400/s") and "measure higher rates" in texts["ecdsa"]


def test_markdown_has_the_tables_and_no_plots(md):
    for title in ("## Throughput vs load", "## Latency objective", "## Latency percentiles per load level",
                  "## CPU over time"):
        assert title in md
    tput = md.split("## Throughput vs load")[1].split("\n## ")[0]
    for load in LOADS:
        assert f"({load})" in tput
    assert "p50 latency 30.0 % higher" in tput
    lat = md.split("## Latency percentiles per load level")[1].split("\n## ")[0]
    assert lat.count("| yes |") == 4 and lat.count("| no |") == 4
    assert "<svg" not in md


def test_no_workload_sections_without_workloads(tmp_path):
    store = tmp_path / "runs.sqlite"
    run_study(tmp_path / "s", store, TWO_CONFIG_STUDY.format(reps=3, timeout=5), {})
    r = load_run(open_store(store))
    assert not r.analysis.workloads.families
    md = md_report.render(r)
    assert "Throughput vs load" not in md and "CPU over time" not in md


# ------------------------------------------------------------------------------- fake worker

def fake(requests: list[dict], spec: dict | None = None) -> list[dict]:
    """Send ``requests`` (after a hello) to fake_worker.py; its answers, hello left out."""
    lines = [json.dumps({"type": "hello", "protocol": 1})] + [json.dumps(r) for r in requests]
    p = subprocess.run([sys.executable, str(FAKE_WORKER)], input="\n".join(lines) + "\n", capture_output=True,
                       text=True, timeout=60, env={"FAKE_WORKER_SPEC": json.dumps(spec or {}), "PATH": ""})
    out = [json.loads(l) for l in p.stdout.splitlines()]
    assert out[0]["type"] == "hello"
    return out[1:]


def request(backend: str, op: str, params: dict, rid: str = "b/x @ c=1/-/A#1") -> dict:
    return {"type": "run", "id": rid, "backend": backend, "op": op, "params": params, "threads": 1,
            "seconds": 0.5, "warmup_s": 0}


def test_fake_workload_result_has_the_protocol_fields():
    [r] = fake([request("aws-lc", "tls-handshake", {"load": "open:400", "cert": "rsa2048", "tls_version": "1.2",
                                                     "suite": "aes-256-gcm", "group": "p256"})])
    assert r["status"] == "ok" and r["workload"] == "tls-handshake" and r["mode"] == "socket"
    assert r["timing"] == "individual" and r["batch"] == 1 and r["bytes_per_op"] == 0
    assert r["load"] == {"kind": "open", "threads": 32, "rate_per_s": 400.0, "corrected": True}
    assert r["ops"] == 200 and r["late"] == 0
    assert r["negotiated"] == {"version": "TLSv1.2", "cipher_suite": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                               "group": "secp256r1", "signature_scheme": "rsa_pss_rsae_sha256", "resumed": False}
    assert r["negotiated_counts"][0]["count"] == r["ops"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", r["server"]["address"])
    assert r["server"]["transactions"] == r["ops"] and r["server"]["cpu_ns"] > 0
    assert len(r["client_timeline"]) >= 3 and {"t_ms", "user_pct", "system_pct", "steal_pct"} <= set(r["client_timeline"][0])
    assert r["server"]["timeline"] and r["placement"] and r["validation"]["negotiated"] == "pass"


def test_fake_closed_loop_latency_grows_with_connections_and_memory_mode_splits_cpu():
    one, eight, mem = fake([request("openssl", "tls-handshake", {"load": "closed:1"}),
                            request("openssl", "tls-handshake", {"load": "closed:8"}),
                            request("openssl", "tls-handshake", {"load": "closed:2", "mode": "memory"})],
                           {"latency_ns": {"tls-handshake": 1_000_000}})
    assert eight["sample_ns_stats"]["min"] > one["sample_ns_stats"]["min"]
    assert one["ops"] < eight["ops"] < 8 * one["ops"]  # more throughput, not 8×
    assert mem["mode"] == "memory" and mem["server"]["address"] is None
    assert mem["cpu_ns_total"] == mem["client_side_cpu_ns"] + mem["server"]["cpu_ns"]


def test_fake_ring_has_no_ml_kem_and_workloads_take_no_batch():
    unsupported, refused = fake([request("ring", "tls-handshake", {"group": "x25519mlkem768"}),
                                 {**request("aws-lc", "tls-handshake", {}), "batch": 4}])
    assert unsupported["status"] == "unsupported" and unsupported["reason"] == "ring has no ML-KEM"
    assert refused["type"] == "error" and refused["code"] == "bad_params"


def test_a_level_not_measured_is_one_row_with_its_reason():
    """The level tables of workloads, fleet jobs and storage are one Jinja macro
    (templates/sections/macros.html.j2); a cell that was not measured is one row: level,
    configuration, then the status and reason (escaped) across the table's other columns."""
    from cryptoperf.report.render import environment
    columns = [ws.column("Level", num=False), ws.column("Configuration", num=False), ws.column("x"), ws.column("y"),
               ws.column("Verdict", num=False)]
    rows = [{"measured": False, "level": "closed:4", "configuration": "B", "status": "unsupported",
             "reason": "ring has no <ML-KEM>"},
            {"measured": True, "level": "closed:1", "configuration": "A", "kind": "baseline",
             "cells": [{"text": "1", "num": True}, {"text": "2", "num": True}, {"text": "baseline", "verdict": True}]}]
    html = environment().from_string('{% from "sections/macros.html.j2" import level_table %}'
                                     '{{ level_table("t", "c", columns, rows) }}').render(columns=columns, rows=rows)
    assert ('<tr class="verdict-na"><td>closed:4</td><td>B</td>\n          '
            '<td colspan="3" class="sub">not measured: unsupported: ring has no &lt;ML-KEM&gt;</td></tr>') in html
    assert '<tr class="verdict-baseline"><td>closed:1</td><td>A</td><td class="num">1</td>' in html
    assert '<td class="verdict">baseline</td>' in html
    # every level table is this macro's
    from pathlib import Path
    templates = Path(ws.__file__).parents[1] / "templates" / "sections"
    users = sorted(p.name for p in templates.glob("*.j2") if "level_table(" in p.read_text() and p.name != "macros.html.j2")
    assert users == ["fleet_throughput.html.j2", "storage_levels.html.j2", "throughput_load.html.j2"]
