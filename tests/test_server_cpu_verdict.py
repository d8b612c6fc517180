"""Verdicts decided on a workload's server CPU time per transaction (``server_cpu_per_op``): the
server process's CPU over the window ÷ the transactions it completed in it, one value per
repetition, compared block by block with the same paired rule as every other metric — what a
TLS-terminating service pays per handshake. Checked by simulation through the project's own
analysis (false verdicts, coverage, power) and on summaries where the server's figure moves and
the client's does not; an operation asks for it with ``[[operation]] verdict_on``.
"""

from __future__ import annotations

import dataclasses

import pytest

from cryptoperf import analysis, stats
from cryptoperf.model import OK, Cell
from cryptoperf.simulate import study as simulate
from cryptoperf.simulate.study import Scenario, binomial_tolerance

pytestmark = pytest.mark.parallel

METRIC = "server_cpu_per_op"


def test_aa_false_verdicts_and_coverage_on_server_cpu():
    n = 4000
    f = simulate.run(Scenario("A/A server CPU", 10, multiplicity=False, verdict_on=METRIC), n, seed=21)
    assert f.false_verdict <= 0.05 + binomial_tolerance(0.05, n), f
    assert 0.93 <= f.coverage <= 0.97, f


def test_a_true_five_percent_on_server_cpu_is_found():
    n = 3000
    f = simulate.run(Scenario("+5 % server CPU", 10, true_ratio=1.05, multiplicity=False, verdict_on=METRIC), n, seed=22)
    assert f.slower >= 0.80 and f.faster == 0, f
    assert 0.93 <= f.coverage <= 0.97, f


def summary(configuration: str, label: str, client_ns: float, server_ns: float, phase: int, blocks: int = 8):
    """A cell whose client figures are ``client_ns`` and whose server's CPU per transaction is
    ``server_ns``, each block off by up to ±0.4 % (``phase`` shifts the pattern, so that two
    cells' ratios vary and intervals have a width)."""
    wobble = [1.0 + 0.002 * ((b * 7 + phase) % 5 - 2) for b in range(1, blocks + 1)]
    base = simulate.cell_summary(Cell(configuration, "go", label, "tls-handshake"),
                                 {b: client_ns * w for b, w in zip(range(1, blocks + 1), wobble)})
    server = {b: server_ns * w for b, w in zip(range(1, blocks + 1), reversed(wobble))}
    return dataclasses.replace(base, server_cpu_ns_per_op=server_ns, server_cpu_ns_per_op_by_block=server)


def test_the_verdict_follows_the_server_when_the_operation_asks_for_it():
    """Client unchanged, server +20 %: decided on the server's CPU (the operation's verdict_on,
    by its label, load rows included) it is slower; decided on latency, equivalent."""
    label = "TLS 1.3 handshake @ c=1"
    summaries = {s.cell.key: s for s in (summary("go", label, 1e6, 4e5, 0), summary("go-fips", label, 1e6, 4.8e5, 1))}
    own = analysis.Settings(verdict_on="latency", verdict_on_ops={"TLS 1.3 handshake": METRIC})
    (d,), _, _ = analysis.deltas(summaries, "go", own)
    assert d.status == OK and d.verdict.kind == stats.SLOWER, d
    assert d.verdict.metric == "server CPU time per transaction"
    assert d.decisive is d.server_cpu_per_op and d.server_cpu_per_op.contains(1.2)
    assert 0.995 < d.latency.ratio < 1.005 and d.latency.high - d.latency.low > 0
    (d,), _, _ = analysis.deltas(summaries, "go", analysis.Settings(verdict_on="latency"))
    assert d.verdict.kind == stats.EQUIVALENT and d.verdict.metric == "p50 latency", d
    assert own.verdict_on_of("TLS 1.3 handshake") == METRIC and own.verdict_on_of("TLS 1.3 handshakes") == "latency"


def test_without_a_server_side_the_comparison_is_not_decided():
    """A primitive has no server: decided on server CPU it is n/a, saying so, and no verdict."""
    summaries = {}
    for name, ns in (("a", 1000.0), ("b", 1100.0)):
        s = simulate.cell_summary(Cell(name, "go", "sha256", "sha256"), {b: ns for b in range(1, 9)})
        summaries[s.cell.key] = dataclasses.replace(s, server_cpu_ns_per_op=None, server_cpu_ns_per_op_by_block={})
    (d,), _, _ = analysis.deltas(summaries, "a", analysis.Settings(verdict_on=METRIC))
    assert d.status == "n/a" and d.verdict is None and "server CPU time per transaction" in d.reason, d


def test_the_answer_table_of_a_server_verdict_shows_the_servers_figure():
    """In the report's answer section, the table of comparisons decided on the server's CPU shows
    each cell's server CPU per transaction (the median the interval compares), once."""
    from cryptoperf.report.sections import answer
    s = summary("go", "TLS 1.3 handshake @ c=1", 1e6, 4e5, 0)
    assert answer._figure(METRIC, s, None) == "400 µs"
    assert answer._figure("cpu_per_op", s, None) != answer._figure(METRIC, s, None)
