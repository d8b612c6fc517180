"""Workload figures are one side over one span: the server's CPU per transaction is the server's
CPU over the transactions the server served in the same span (never over the client's count of
the window), checked on constructed results and against the CPU-over-time samples of a real TLS
handshake repetition."""

from __future__ import annotations

import re

import pytest

from conftest import need_real_worker
from cryptoperf.result import decode
from cryptoperf.run.worker import WorkerClient
from cryptoperf.workloads import access, generic
from real_workers import find


def result(ops: int, server_tx: int, server_cpu_ns: int, window: bool | None = None, **extra):
    server = {"cpu_ns": server_cpu_ns, "transactions": server_tx, "timeline": []}
    if window is not None:
        server["window"] = window
    return decode({"status": "ok", "ops": ops, "wall_ns": 1_000_000_000, "cpu_ns_total": 200_000 * ops,
                   "server": server, **extra})


def server_cpu(r):
    return generic.side_cpu_ns_per_tx(r, "server")


def test_server_cpu_per_transaction_divides_by_the_servers_own_transactions():
    # An older worker read the server's counters from before a 0.5 s warm-up to the end of a
    # 1 s window: 1500 handshakes served, 1000 of them in the window the client counted; the
    # server spent 300 µs on each. Dividing by the client's window count gave 450 µs.
    old = result(ops=1000, server_tx=1500, server_cpu_ns=1500 * 300_000)
    assert server_cpu(old) == pytest.approx(300_000.0)
    # A worker that reads the server's counters over exactly the window says so (window: true).
    new = result(ops=1000, server_tx=1002, server_cpu_ns=1002 * 310_000, window=True)
    assert access.server(new).window is True and access.server(old).window is False
    assert server_cpu(new) == pytest.approx(310_000.0)
    # the client's side is the client's CPU over the client's transactions; both is their sum
    assert generic.side_cpu_ns_per_tx(old, "client") == pytest.approx(200_000.0)
    assert generic.side_cpu_ns_per_tx(old, "both") == pytest.approx(500_000.0)
    # memory mode: the client side's share of the one thread's CPU
    mem = result(ops=100, server_tx=100, server_cpu_ns=100 * 50_000, client_side_cpu_ns=100 * 70_000)
    assert generic.side_cpu_ns_per_tx(mem, "client") == pytest.approx(70_000.0)


def test_no_server_figure_without_server_counters():
    bare = decode({"status": "ok", "ops": 10, "wall_ns": 1, "cpu_ns_total": 90})
    assert server_cpu(bare) is None and generic.side_cpu_ns_per_tx(bare, "client") is None
    assert generic.side_cpu_ns_per_tx(bare, "process") == pytest.approx(9.0)
    assert server_cpu(result(ops=10, server_tx=0, server_cpu_ns=5)) is None
    with pytest.raises(ValueError, match="unknown side"):
        generic.side_cpu_ns_per_tx(bare, "kernel")


REAL, WHY = find()


def test_server_cpu_per_handshake_agrees_with_the_servers_cpu_over_time():
    """One real TLS handshake repetition (0.5 s warm-up, 1.5 s window): the server's CPU per
    handshake equals the server's CPU-over-time samples averaged over the span its counters
    cover (the window; from the warm-up's start for an older worker, ``server.window`` false)
    × that span's length ÷ the handshakes the server served in it, within 5 %."""
    need_real_worker(REAL, WHY)
    warmup_s = 0.5
    with WorkerClient(REAL) as w:
        w.hello()
        r = w.run({"type": "run", "id": "t", "backend": "aws-lc", "op": "tls-handshake",
                   "params": {"cert": "ecdsa-p256", "group": "x25519", "load": "closed:2"},
                   "seconds": 1.5, "warmup_s": warmup_s}, timeout_s=120)
    assert r.status == "ok", r.reason
    figure = server_cpu(r)
    server = access.server(r)
    span_s = access.wall_ns(r) / 1e9 + (0.0 if server.window else warmup_s)
    tl = access.timeline(access.server_timeline(r))
    # The server is stopped as the window ends: its last sample covers the window's end and the
    # stop, so the span is the span_s before the one before it; the load is steady over the span
    # (a closed loop), so its CPU is the samples' mean CPU % times its length.
    times, cpu = tl.t_s[:-1], tl.cpu_pct[:-1]
    inside = [c for t, c in zip(times, cpu) if t > times[-1] - span_s + 0.1]
    assert len(inside) >= 10, tl
    over_time = sum(inside) / len(inside) / 100.0 * span_s * 1e9 / server.transactions
    assert figure == pytest.approx(over_time, rel=0.05), (figure, over_time, server)
    # the client's count of the window is not the server's: dividing by it is another span
    if not server.window:
        assert server.transactions > 1.2 * access.ops(r)


# ------------------------------------------------------------------------------ verdict texts

BY_LOAD_STUDY = """\
[study]
name = "tls-by-load"
baseline = "rsa"
backends = ["aws-lc"]
repetitions = 3
seconds = 0.01
warmup_s = 0
timeout_s = 10
verdict_on = "by_load"

[[configuration]]
name = "rsa"
cert = "rsa2048"

[[configuration]]
name = "ec"
cert = "ecdsa-p256"

[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { cert = "{cert}", group = "x25519", session = "full" }
loads = ["closed:1", "closed:4", "open:100"]
"""


@pytest.fixture(scope="module")
def by_load(tmp_path_factory):
    """A by_load TLS study on the fake worker (ec 1.3× slower per handshake), its stored host
    saying what the worker calls a transaction, as a worker's hello does."""
    import json
    import sqlite3
    from stored_runs import DRIFT, run_study
    from cryptoperf.store.stored_run import load_run, open_store
    d = tmp_path_factory.mktemp("by-load")
    store = d / "runs.sqlite"
    run_study(d / "study", store, BY_LOAD_STUDY, {"latency_ns": {"tls-handshake": 2_000_000},
                                                  "config_factor": {"ec": 1.3}, "rep_factors": DRIFT})
    db = sqlite3.connect(store)
    host = json.loads(db.execute("SELECT host_json FROM runs WHERE id = 1").fetchone()[0])
    host["workloads"] = {"tls-handshake": {"transaction": {"one": "handshake", "many": "handshakes"}}}
    db.execute("UPDATE runs SET host_json = ? WHERE id = 1", (json.dumps(host),))
    db.commit()
    db.close()
    return load_run(open_store(store))


def test_verdicts_name_what_changed_with_the_workers_own_words(by_load):
    texts = {d.label: d.verdict.text for d in by_load.deltas}
    assert {d.label: d.verdict.metric for d in by_load.deltas}["full handshake @ c=4"] == "throughput"
    # a closed level is decided on throughput: fewer handshakes per second, never "slower"
    assert re.fullmatch(r"\d+\.\d % fewer handshakes/s \[\d+\.\d, \d+\.\d\]", texts["full handshake @ c=1"]), texts
    # the open level on p50 latency
    assert texts["full handshake @ 100/s"].startswith("p50 latency "), texts
    assert " higher [" in texts["full handshake @ 100/s"]


def test_one_forest_plot_per_metric_each_naming_its_worse_side(by_load):
    from cryptoperf.report import html as html_report
    html = html_report.render(by_load)
    verdicts = html[html.index('<section id="verdicts"'):html.index("</section>", html.index('<section id="verdicts"'))]
    assert re.findall(r'data-plot="forest" data-metric="(\w+)"', verdicts) == ["latency", "throughput"]
    assert "left: lower throughput (worse)" in verdicts and "right: higher p50 latency (worse)" in verdicts
    assert "per-block throughput ratio" in verdicts and "per-block p50 latency ratio" in verdicts
    # the throughput plot holds the closed levels only, the latency plot the open level
    thr = verdicts[verdicts.index('id="verdict-forest-throughput"'):]
    assert len(re.findall(r'id="verdict-forest-throughput-dot-\w+-\d+"', thr)) == 2
    assert len(re.findall(r'id="verdict-forest-latency-dot-\w+-\d+"', verdicts)) == 1
    # the lead and the summary say what the study decided on, not the configured "by_load" text
    assert "decided on throughput (2 comparisons), p50 latency (1)" in verdicts
    summary = html[html.index('<section id="summary"'):]
    assert "The verdict is decided on throughput (2 comparisons), p50 latency (1)" in summary
    assert "decided on latency" not in html


def test_the_terminal_labels_every_change_beside_a_throughput_verdict(by_load):
    from rich.console import Console
    from cryptoperf.report import terminal
    console = Console(width=250, record=True)
    console.print(terminal.delta_table(by_load.deltas, "rsa", terminal.Notes(), by_load.analysis.level))
    out = console.export_text()
    head = out.splitlines()[2]
    assert "p50 latency Δ" in head and "throughput Δ" in head and "verdict (on throughput / p50 latency)" in head
    assert "latency Δ" not in head.replace("p50 latency Δ", "")  # never an unlabelled "latency Δ"
    assert "fewer handshakes/s" in out


def test_the_worker_names_its_transactions_in_the_host_fingerprint():
    from cryptoperf import analysis, hostinfo, stats
    hello = {"worker_version": "x", "backends": [], "op_params": {
        "storage": {"workload": True, "transaction": {"one": "I/O", "many": "I/Os"}},
        "tls-handshake": {"workload": True}, "sha256": {"params": []}}}
    fp = hostinfo.fingerprint(hello)
    assert fp["workloads"] == {"storage": {"transaction": {"one": "I/O", "many": "I/Os"}}}
    ctx = analysis.context_of(fp)
    assert ctx.transaction("storage", "open:100MB/s") == stats.Transaction("I/O", "I/Os per s")
    assert ctx.transaction("tls-handshake", "closed:4").rate == "transactions/s"  # unnamed: a transaction
    assert ctx.transaction("fleet-job", "targets:100").rate == "transactions/min"
    assert ctx.transaction("sha256", None) == stats.OPERATION
    ci = stats.paired_log_ratio([1.31, 1.30, 1.32], [1.0, 1.0, 1.0])
    v = stats.decide(ci, metric="CPU time per operation", transaction=ctx.transaction("storage", "open:100MB/s"))
    assert v.text.startswith("needs 31.0 % more CPU per I/O ["), v.text
