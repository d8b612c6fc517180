"""Workload figures are one side over one span: the server's CPU per transaction is the server's
CPU over the transactions the server served in the same span (never over the client's count of
the window), checked on constructed results and against the CPU-over-time samples of a real TLS
handshake repetition."""

from __future__ import annotations

import pytest

from conftest import need_real_worker
from cryptoperf.run.worker import WorkerClient
from cryptoperf.workloads import access, generic
from real_workers import find


def result(ops: int, server_tx: int, server_cpu_ns: float, window: bool | None = None, **extra) -> dict:
    server = {"cpu_ns": server_cpu_ns, "transactions": server_tx, "timeline": []}
    if window is not None:
        server["window"] = window
    return {"ops": ops, "wall_ns": 1_000_000_000, "cpu_ns_total": 200_000 * ops, "server": server, **extra}


def test_server_cpu_per_transaction_divides_by_the_servers_own_transactions():
    # An older worker read the server's counters from before a 0.5 s warm-up to the end of a
    # 1 s window: 1500 handshakes served, 1000 of them in the window the client counted; the
    # server spent 300 µs on each. Dividing by the client's window count gave 450 µs.
    old = result(ops=1000, server_tx=1500, server_cpu_ns=1500 * 300_000.0)
    assert generic.server_cpu_ns_per_tx([old]) == pytest.approx(300_000.0)
    # A worker that reads the server's counters over exactly the window says so (window: true).
    new = result(ops=1000, server_tx=1002, server_cpu_ns=1002 * 310_000.0, window=True)
    assert access.server(new).window is True and access.server(old).window is False
    assert generic.server_cpu_ns_per_tx([old, new]) == pytest.approx(305_000.0)  # the median of the two
    # the client's side is the client's CPU over the client's transactions
    assert generic.client_cpu_ns_per_tx([old]) == pytest.approx(200_000.0)
    # memory mode: the client side's share of the one thread's CPU
    mem = result(ops=100, server_tx=100, server_cpu_ns=100 * 50_000.0, client_side_cpu_ns=100 * 70_000.0)
    assert generic.client_cpu_ns_per_tx([mem]) == pytest.approx(70_000.0)


def test_no_server_figure_without_server_counters():
    assert generic.server_cpu_ns_per_tx([{"ops": 10, "wall_ns": 1}]) is None
    assert generic.server_cpu_ns_per_tx([result(ops=10, server_tx=0, server_cpu_ns=5.0)]) is None


REAL, WHY = find()


def test_server_cpu_per_handshake_agrees_with_the_servers_cpu_over_time():
    """One real TLS handshake repetition (0.5 s warm-up, 1.5 s window): the server's CPU per
    handshake equals the server's CPU-over-time samples averaged over the window × the window's
    length ÷ the handshakes the server served in it, within 5 %."""
    need_real_worker(REAL, WHY)
    with WorkerClient(REAL) as w:
        w.hello()
        r = w.run({"type": "run", "id": "t", "backend": "aws-lc", "op": "tls-handshake",
                   "params": {"cert": "ecdsa-p256", "group": "x25519", "load": "closed:2"},
                   "seconds": 1.5, "warmup_s": 0.5}, timeout_s=120)
    assert r["status"] == "ok", r.get("reason")
    figure = generic.server_cpu_ns_per_tx([r])
    wall_s = access.wall_ns(r) / 1e9
    tl = access.timeline(access.server_timeline(r))
    # The server is stopped as the window ends: the window is the last wall_s of its samples
    # (each sample is the CPU over the 100 ms before its time).
    end = tl.t_s[-1]
    inside = [c for t, c in zip(tl.t_s, tl.cpu_pct) if t > end - wall_s + 0.05]
    assert len(inside) >= 10, tl
    server = access.server(r)
    in_window = server.transactions if server.window else access.ops(r)
    over_time = sum(inside) / len(inside) / 100.0 * wall_s * 1e9 / in_window
    assert figure == pytest.approx(over_time, rel=0.05), (figure, over_time, server)
