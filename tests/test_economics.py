"""Economics: every figure checked against a hand computation written beside it.

The worked example of docs/methodology.md ("Economics"): 9.6 RSA-2048 CRT operations per second
at 13 ms of CPU each cost 12.5 % (≈ 13 %) of a core; after a library upgrade to 3 ms, 2.9 %
(≈ 3 %). Intervals are t intervals (the study's method), never the range of the repetitions.
Composite requests (--per-request) on a TLS 1.3 server's run: 1 ms + 30 µs + 40 µs = 1.07 ms per
full handshake with an RSA-2048 certificate, 95 µs with ECDSA P-256 (tests/stored_runs.py).
"""

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sp

from conftest import assert_one_line_error
from cryptoperf import economics as econ
from cryptoperf.errors import EconomicsError, UsageError
from cryptoperf.result import decode
from cryptoperf.store.db import Store
from cryptoperf.store.stored_run import load_run
from stored_runs import DRIFT, econ_run, tls_run

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

MS = 1_000_000  # ns


def blocks(*values):
    """block → value, blocks numbered from 1."""
    return {i + 1: v for i, v in enumerate(values)}


# ----------------------------------------------------------------------------- (a) cores

def test_reference_figure_13_ms():
    # 9.6 /s × 13 ms = 9.6 × 0.013 s = 0.1248 core-seconds per second = 0.1248 cores = 12.5 % ≈ 13 %
    assert econ.cores_needed(9.6, 13 * MS) == pytest.approx(0.1248)
    assert round(econ.cores_needed(9.6, 13 * MS) * 100, 1) == 12.5


def test_reference_figure_3_ms():
    # 9.6 /s × 3 ms = 0.0288 cores = 2.88 % ≈ 2.9 % ≈ 3 %
    assert econ.cores_needed(9.6, 3 * MS) == pytest.approx(0.0288)
    assert round(econ.cores_needed(9.6, 3 * MS) * 100, 1) == 2.9


def test_single_core_capacity():
    # 1 s / 13 ms = 76.923 ops/s; 1 s / 3 ms = 333.33 ops/s; 1 s / 800 ns = 1,250,000 ops/s
    assert econ.ops_per_s_per_core(13 * MS) == pytest.approx(76.923, rel=1e-4)
    assert econ.ops_per_s_per_core(3 * MS) == pytest.approx(333.333, rel=1e-5)
    assert econ.ops_per_s_per_core(800) == pytest.approx(1.25e6)


def test_cpu_cost_geometric_mean_spread_and_interval():
    # samples 12, 13, 14 ms: geometric mean (12·13·14)^(1/3) = 12.974 ms, range 12–14 ms;
    # the interval is the t interval of the mean log (hand: scipy's t quantile, df 2)
    c = econ.cpu_cost(blocks(14 * MS, 12 * MS, 13 * MS))
    logs = np.log([14 * MS, 12 * MS, 13 * MS])
    half = sp.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert c.estimate_ns == pytest.approx((12 * 13 * 14) ** (1 / 3) * MS)
    assert (c.low_ns, c.high_ns) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert c.min_ns == 12 * MS and c.max_ns == 14 * MS and c.repetitions == 3
    # three repetitions: the interval is wider than the range, not equal to it
    assert c.low_ns < c.min_ns and c.high_ns > c.max_ns


def test_cpu_cost_coverage_is_not_the_ranges():
    """At 3 repetitions a median's bootstrap interval is the range, which covers the true
    value 75 % of the time; the t interval covers it 95 % of the time."""
    rng = np.random.default_rng(1)
    hits = ranges = 0
    n = 3000
    for _ in range(n):
        x = rng.lognormal(math.log(13 * MS), 0.05, 3)
        c = econ.cpu_cost(blocks(*x))
        hits += c.low_ns <= 13 * MS <= c.high_ns
        ranges += c.min_ns <= 13 * MS <= c.max_ns
    assert abs(hits / n - 0.95) < 0.015 and abs(ranges / n - 0.75) < 0.03


def test_cpu_cost_needs_three_repetitions_for_an_interval():
    c = econ.cpu_cost(blocks(5 * MS, 6 * MS))
    assert c.low_ns is None and c.high_ns is None and c.estimate_ns == pytest.approx(math.sqrt(30) * MS)
    assert econ.cpu_cost(blocks(5 * MS)).low_ns is None


def test_cores_at_rate_carries_interval_and_spread():
    # 9.6/s: 13 ms → 0.1248; fastest 12 ms → 0.1152; slowest 14 ms → 0.1344 cores
    r = econ.cores_at_rate(9.6, econ.cpu_cost(blocks(12 * MS, 13 * MS, 14 * MS)))
    assert r.cores == pytest.approx(9.6 * (12 * 13 * 14) ** (1 / 3) * MS / 1e9)
    assert r.cores_min == pytest.approx(0.1152) and r.cores_max == pytest.approx(0.1344)
    assert r.cores_low <= r.cores <= r.cores_high
    assert r.ops_per_s_per_core == pytest.approx(1e9 / r.cpu.estimate_ns)


# ----------------------------------------------------------------------------- (b) a change

def test_change_13_ms_to_3_ms():
    # before 13 ms, after 3 ms in every block (paired): difference −0.096 cores at 9.6/s;
    # relative 0.0288 / 0.1248 − 1 = −0.76923 → −76.9 %
    before = econ.cpu_cost(blocks(12.5 * MS, 13 * MS, 13.5 * MS))
    after = econ.cpu_cost(blocks(2.9 * MS, 3 * MS, 3.1 * MS))
    ch = econ.change(9.6, before, after)
    assert ch.blocks == 3
    assert ch.before.cores == pytest.approx(9.6 * before.estimate_ns / 1e9)
    assert ch.delta_pct == pytest.approx((after.estimate_ns / before.estimate_ns - 1) * 100)
    # the interval: the t interval of the paired per-block differences × rate
    d = np.array([2.9 - 12.5, 3.0 - 13.0, 3.1 - 13.5]) * MS
    half = sp.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert (ch.delta_low, ch.delta_high) == pytest.approx(((d.mean() - half) * 9.6e-9, (d.mean() + half) * 9.6e-9))
    assert ch.ratio.high < 1 and ch.ratio.method == "paired t on log ratios"


def test_change_without_common_blocks_has_no_interval():
    ch = econ.change(9.6, econ.cpu_cost({1: 13 * MS, 2: 13 * MS}), econ.cpu_cost({3: 3 * MS, 4: 3 * MS}))
    assert ch.blocks == 0 and ch.delta_low is None and ch.ratio is None


# ----------------------------------------------------------------------------- (c) break-even

ACC = econ.Accelerator(ops_per_s_per_unit=460, price_per_year=500, host_cpu_ns_per_op=0.1 * MS)


def test_break_even_reference_13_ms():
    # s = (13 ms − 0.1 ms) × 1000 per core-year = 0.0129 core per op/s × 1000 = 12.9 per op/s-year
    # one unit: 460 ops/s × 12.9 = 5934 > 500, so it pays from 500 / 12.9 = 38.76 ops/s on
    be = econ.break_even(13 * MS, ACC, 1000)
    assert be.saving_per_op_per_s == pytest.approx(12.9)
    assert be.rate_per_s == pytest.approx(38.7597, rel=1e-5) and be.first_rate_per_s == be.rate_per_s
    assert be.saving_per_full_unit == pytest.approx(5434)


def test_break_even_moves_up_with_the_faster_library():
    # 3 ms: s = 2.9 per op/s-year → break-even 500 / 2.9 = 172.41 ops/s (4.4× the 13 ms one)
    assert econ.break_even(3 * MS, ACC, 1000).rate_per_s == pytest.approx(172.4138, rel=1e-5)


def test_offload_at_the_reference_rate():
    # 9.6/s at 13 ms: software 0.1248 cores = 124.80 per year; host keeps 9.6 × 0.1 ms =
    # 0.00096 cores = 0.96 per year; saved 0.12384 cores; 1 unit = 500 per year;
    # net = 124.80 − (500 + 0.96) = −376.16 per year: does not pay at 9.6/s
    o = econ.offload(9.6, 13 * MS, ACC, 1000)
    assert o.units == 1
    assert o.cores_software == pytest.approx(0.1248) and o.cores_host == pytest.approx(0.00096)
    assert o.cores_saved == pytest.approx(0.12384)
    assert o.cost_software_per_year == pytest.approx(124.8)
    assert o.cost_offload_per_year == pytest.approx(500.96)
    assert o.saving_per_year == pytest.approx(-376.16) and not o.pays
    # at 100/s: 100 × 12.9 − 500 = 790 per year saved
    assert econ.offload(100, 13 * MS, ACC, 1000).saving_per_year == pytest.approx(790)


def test_min_units_for_redundancy_doubles_break_even():
    # two units whatever the load: 2 × 500 / 12.9 = 77.52 ops/s
    acc = econ.Accelerator(460, 500, 0.1 * MS, min_units=2)
    assert econ.break_even(13 * MS, acc, 1000).rate_per_s == pytest.approx(77.5194, rel=1e-5)
    assert econ.units_needed(9.6, acc) == 2 and econ.units_needed(1000, acc) == 3  # ⌈1000/460⌉ = 3


def test_break_even_with_unit_steps():
    # A = 100 ops/s, P = 100, s = 1.5 (1.5 ms of CPU at 1000 per core-year): a full unit frees
    # 150, net 50. Net saving R × 1.5 − units × 100: first positive above 100 / 1.5 = 66.67; at
    # 101/s a second unit is needed: 151.5 − 200 < 0; positive again above 200 / 1.5 = 133.33;
    # the third unit (R > 200) keeps it positive: 300.0…1 − 300 > 0. u* = ⌈100 / 50⌉ = 2.
    acc = econ.Accelerator(ops_per_s_per_unit=100, price_per_year=100)
    be = econ.break_even(1.5 * MS, acc, 1000)
    assert be.first_rate_per_s == pytest.approx(66.6667, rel=1e-5)
    assert be.rate_per_s == pytest.approx(133.3333, rel=1e-5)
    assert econ.offload(101, 1.5 * MS, acc, 1000).saving_per_year == pytest.approx(-48.5)
    assert econ.offload(134, 1.5 * MS, acc, 1000).saving_per_year == pytest.approx(1)
    for rate in np.arange(be.rate_per_s + 0.01, 2000, 0.37):  # positive at every rate above
        assert econ.offload(rate, 1.5 * MS, acc, 1000).saving_per_year > 0, rate


@pytest.mark.parametrize("cpu_ms, a, p, m", [(13, 460, 500, 1), (1.5, 100, 100, 1), (2, 50, 70, 2),
                                            (0.5, 1000, 100, 3), (7, 10, 69, 1)])
def test_break_even_matches_brute_force(cpu_ms, a, p, m):
    acc = econ.Accelerator(a, p, min_units=m)
    be = econ.break_even(cpu_ms * MS, acc, 1000)
    rates = np.linspace(0.001, be.rate_per_s * 4 + 5 * a, 40001)
    paying = np.array([econ.offload(r, cpu_ms * MS, acc, 1000).saving_per_year > 0 for r in rates])
    last_loss = rates[~paying].max()
    first_gain = rates[paying].min()
    step = rates[1] - rates[0]
    assert last_loss <= be.rate_per_s + step and be.rate_per_s - step <= last_loss
    assert be.first_rate_per_s - step <= first_gain <= be.first_rate_per_s + step


def test_accelerator_that_never_pays():
    # one unit at 460 ops/s frees 460 × 12.9 = 5934 per year < 10,000: never pays at any rate
    acc = econ.Accelerator(460, 10_000, 0.1 * MS)
    with pytest.raises(EconomicsError, match="break-even impossible: a fully loaded unit"):
        econ.break_even(13 * MS, acc, 1000)


def test_accelerator_costing_more_host_cpu_than_software():
    with pytest.raises(EconomicsError, match="offloading saves no CPU"):
        econ.break_even(0.05 * MS, ACC, 1000)  # host 100 µs ≥ software 50 µs


def test_free_cpu_never_pays():
    with pytest.raises(EconomicsError, match="core price of 0"):
        econ.break_even(13 * MS, ACC, 0)


@pytest.mark.parametrize("call", [
    lambda: econ.cores_needed(-1, 13 * MS),
    lambda: econ.cores_needed(9.6, -13 * MS),
    lambda: econ.cores_needed(9.6, 0),
    lambda: econ.cores_needed(math.nan, 1),
    lambda: econ.Accelerator(0, 500),
    lambda: econ.Accelerator(460, -1),
    lambda: econ.Accelerator(460, 500, host_cpu_ns_per_op=-1),
    lambda: econ.Accelerator(460, 500, min_units=0),
    lambda: econ.break_even(13 * MS, ACC, -1000),
    lambda: econ.cpu_cost({}),
    lambda: econ.cpu_cost(blocks(1, -1)),
])
def test_negative_or_missing_numbers_are_refused(call):
    with pytest.raises(EconomicsError):
        call()
    assert issubclass(EconomicsError, UsageError)  # exit status 2 from the CLI


# ----------------------------------------------------------------------------- plan() on a stored run

@pytest.fixture(scope="module")
def econ_store(tmp_path_factory):
    return econ_run(tmp_path_factory.mktemp("econ"))


@pytest.fixture(scope="module")
def econ_stored(econ_store):
    with Store(econ_store) as st:
        return load_run(st, "latest")


def test_plan_uses_the_cpu_of_the_run(econ_stored):
    # the fake worker's CPU per op is the scripted latency × drift: 13 ms × (1, 1.05, 1/1.05),
    # whose geometric mean is 13 ms exactly
    res = econ.plan(econ_stored, "rsa2048-sign", 9.6, configuration="old")
    (c,) = res.cores
    assert sorted(c.cpu.samples_ns.values()) == pytest.approx(sorted((13 * MS, 13.65 * MS, 13 / 1.05 * MS)))
    assert c.cpu.estimate_ns == pytest.approx(13 * MS) and c.cores == pytest.approx(0.1248)
    assert res.cells[0]["configuration"] == "old" and res.change is None and res.offload == ()


def test_plan_change_and_offload(econ_stored):
    res = econ.plan(econ_stored, "rsa", 9.6, from_config="old", to_config="new",
                    accelerator=ACC, core_price_per_year=1000)
    assert [c["configuration"] for c in res.cells] == ["old", "new"]
    assert res.change.before.cores == pytest.approx(0.1248)
    assert res.change.after.cores == pytest.approx(0.0288)
    assert res.change.delta_cores == pytest.approx(-0.096)
    assert [o.break_even.rate_per_s for o in res.offload] == pytest.approx([38.7597, 172.4138], rel=1e-5)
    d = res.as_dict()
    assert d["cores"][0]["cost_per_year"] == pytest.approx(124.8)
    assert d["change"]["delta_cost_per_year"] == pytest.approx(-96)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(op="rsa4096-sign"), "has no operation 'rsa4096-sign' (it has: rsa, rsa2048-sign)"),
    (dict(op="rsa"), "matches 2 cells"),
    (dict(op="rsa", configuration="nope"), "no 'rsa' cell with configuration nope (it has: new, old)"),
    (dict(op="rsa", backend="ring"), "with backend ring"),
    (dict(op="rsa", from_config="old"), "--from and --to go together"),
    (dict(op="rsa", from_config="old", to_config="newer"), "no configuration 'newer'"),
    (dict(op="rsa", from_config="old", to_config="new", configuration="old"), "either --configuration"),
    (dict(op="rsa", configuration="old", accelerator=ACC), "needs --core-price-per-year"),
])
def test_plan_refuses_what_the_run_lacks(econ_stored, kwargs, fragment):
    op = kwargs.pop("op")
    with pytest.raises(EconomicsError) as e:
        econ.plan(econ_stored, op, 9.6, **kwargs)
    assert fragment in str(e.value)


# ----------------------------------------------------------------------------- cryptoperf plan

def test_cli_plan_reference_example(cli, econ_store):
    res = cli("plan", "--op", "rsa", "--from", "old", "--to", "new", "--rate", "9.6",
              "--store", econ_store)
    assert res.code == 0, res.err
    assert "0.125 cores (12.5 % of a core)" in res.out
    assert "0.0288 cores (2.88 % of a core)" in res.out
    assert "one core sustains  76.9 ops/s" in res.out and "333 ops/s" in res.out
    assert "change old → new at 9.6 ops/s, worker CPU: 0.125 → 0.0288 cores, -0.096 cores (-76.9 %" in res.out


def test_cli_plan_accelerator(cli, econ_store):
    res = cli("plan", "1", "--op", "rsa2048-sign", "--configuration", "old", "--rate", "9.6",
              "--core-price-per-year", "1000", "--accel-ops-per-s", "460", "--accel-price-per-year", "500",
              "--accel-host-cpu-us-per-op", "100", "--accel-latency-us", "5000", "--store", econ_store)
    assert res.code == 0, res.err
    assert "break-even 38.76 ops/s" in res.out
    assert "net -376.16 per year — does not pay at this rate" in res.out
    assert "latency: accelerator 5 ms vs software p50 13 ms" in res.out


def test_cli_plan_json(cli, econ_store):
    import json
    res = cli("plan", "latest", "--op", "rsa2048-sign", "--configuration", "new", "--rate", "9.6",
              "--json", "--store", econ_store)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["kind"] == "plan" and doc["rate_per_s"] == 9.6
    assert doc["cores"][0]["cores"] == pytest.approx(0.0288)
    assert doc["cores"][0]["cpu"]["estimate_ns"] == pytest.approx(3 * MS)


@pytest.mark.parametrize("args, fragments", [
    (["--op", "rsa2048-sign", "--configuration", "old"], ["plan needs --rate N"]),
    (["--rate", "9.6"], ["plan needs --op OP"]),
    (["--op", "rsa2048-sign", "--configuration", "old", "--rate", "-9.6"], ["--rate must be a positive number, got -9.6"]),
    (["--op", "rsa4096-sign", "--rate", "9.6"], ["run 1 has no operation 'rsa4096-sign'"]),
    (["--op", "rsa", "--rate", "9.6"], ["--op rsa matches 2 cells of run 1"]),
    (["--op", "rsa", "--configuration", "old", "--rate", "1", "--accel-ops-per-s", "460"],
     ["both --accel-ops-per-s and --accel-price-per-year"]),
    (["--op", "rsa", "--configuration", "old", "--rate", "1", "--accel-min-units", "2"],
     ["both --accel-ops-per-s and --accel-price-per-year"]),
    (["--op", "rsa", "--configuration", "old", "--rate", "1", "--accel-ops-per-s", "460",
      "--accel-price-per-year", "-5", "--core-price-per-year", "1000"], ["accelerator price per year must be a number >= 0"]),
    (["--op", "rsa", "--configuration", "old", "--rate", "1", "--accel-ops-per-s", "460",
      "--accel-price-per-year", "10000", "--core-price-per-year", "1000", "--accel-host-cpu-us-per-op", "100"],
     ["break-even impossible", "never pays at any rate"]),
    (["--op", "rsa", "--configuration", "old", "--rate", "1", "--accel-host-cpu-us-per-op", "-1"],
     ["--accel-host-cpu-us-per-op must be a number >= 0"]),
    (["--op", "rsa", "--configuration", "old", "--rate", "abc"], ["--rate 'abc' is not a rate"]),
    (["7", "--op", "rsa", "--configuration", "old", "--rate", "1"], ["no run 7 in store"]),
    (["seven", "--op", "rsa", "--configuration", "old", "--rate", "1"], ["run id must be a number, 'latest'"]),
])
def test_cli_plan_errors_are_one_line(cli, econ_store, args, fragments):
    assert_one_line_error(cli("plan", *args, "--store", econ_store), *fragments)


# ----------------------------------------------------------------------------- --rate 2k

@pytest.mark.parametrize("text, rate", [
    ("9.6", 9.6), ("2000", 2000), ("2k", 2000), ("2K", 2000), ("2.5k", 2500), (".5k", 500),
    ("1M", 1e6), ("1m", 1e6), ("5000/s", 5000), ("2k/s", 2000), ("2.5K/S", 2500), (" 2 k / s ", 2000),
    ("1e3", 1000), ("1.5e3/s", 1500), (9.6, 9.6), (2000, 2000),
])
def test_parse_rate_accepts_suffixes(text, rate):
    assert econ.parse_rate(text) == pytest.approx(rate)


@pytest.mark.parametrize("text, fragment", [
    ("2x", "--rate '2x' is not a rate"), ("k", "--rate 'k' is not a rate"), ("", "--rate '' is not a rate"),
    ("2kk", "'2kk' is not a rate"), ("2k/ms", "'2k/ms' is not a rate"), ("2 kHz", "'2 kHz' is not a rate"),
    ("1,000", "'1,000' is not a rate"), ("inf", "'inf' is not a rate"), ("nan", "'nan' is not a rate"),
    ("2k ops/s", "'2k ops/s' is not a rate"), ("/s", "'/s' is not a rate"), ("2G", "'2G' is not a rate"),
    ("0", "--rate must be a positive number, got 0"), ("-2k", "--rate must be a positive number, got -2000"),
])
def test_parse_rate_refuses_anything_else(text, fragment):
    with pytest.raises(EconomicsError) as e:
        econ.parse_rate(text)
    assert fragment in str(e.value) and "\n" not in str(e.value)


# ----------------------------------------------------------------------------- composite requests: pure

@pytest.mark.parametrize("text, terms", [
    ("ecdsa-p256-sign + x25519-keygen + x25519-derive",
     [("ecdsa-p256-sign", 1), ("x25519-keygen", 1), ("x25519-derive", 1)]),
    ("ecdsa-p256-sign+2*x25519-derive", [("ecdsa-p256-sign", 1), ("x25519-derive", 2)]),
    ("x25519-derive*2", [("x25519-derive", 2)]),
    ("2 * x25519-derive + x25519-derive", [("x25519-derive", 3)]),  # a name given twice: counts added
    ("0.3*rsa2048-sign", [("rsa2048-sign", 0.3)]),
])
def test_parse_request(text, terms):
    assert econ.parse_request(text) == terms


@pytest.mark.parametrize("text, fragment", [
    ("", "--per-request is empty"), ("  ", "--per-request is empty"),
    ("a +", "term '' is not OP, N*OP or OP*N"), ("2*3", "term '2*3'"), ("a*b", "term 'a*b'"),
    ("2*a*3", "term '2*a*3'"), ("0*a", "the count of '0*a' must be a positive number"),
    ("a b", "term 'a b'"),
])
def test_parse_request_refuses(text, fragment):
    with pytest.raises(EconomicsError) as e:
        econ.parse_request(text)
    assert fragment in str(e.value)


def _t(values, level=0.95):
    """t interval of the mean log of ``values`` (by hand: scipy's quantile)."""
    logs = np.log(values)
    half = sp.t.ppf(0.5 + level / 2, len(values) - 1) * logs.std(ddof=1) / math.sqrt(len(values))
    return math.exp(logs.mean()), math.exp(logs.mean() - half), math.exp(logs.mean() + half)


def test_request_cpu_uses_the_per_block_totals():
    # x at 10, 12, 11 µs and 2 × y at 5, 4, 6 µs in blocks 1-3: totals 20, 20, 23 µs per block;
    # the request's CPU is their geometric mean (20·20·23)^(1/3) = 20.95 µs with the t interval of
    # their logs, not the sum of the terms' means or intervals
    us = 1000
    r = econ.request_cpu([("x", 1, {}, blocks(10 * us, 12 * us, 11 * us)), ("y", 2, {}, blocks(5 * us, 4 * us, 6 * us))])
    assert r.method == econ.PER_BLOCK_TOTALS
    assert dict(r.cpu.samples_ns) == {1: 20 * us, 2: 20 * us, 3: 23 * us}
    est, low, high = _t([20 * us, 20 * us, 23 * us])
    assert r.cpu.estimate_ns == pytest.approx(est) == pytest.approx((20 * 20 * 23) ** (1 / 3) * us)
    assert (r.cpu.low_ns, r.cpu.high_ns) == pytest.approx((low, high))
    assert (r.cpu.min_ns, r.cpu.max_ns) == (20 * us, 23 * us)
    # the terms keep their own figures; the per-block total is narrower than the summed intervals
    x, y = r.terms
    assert x.cpu.estimate_ns == pytest.approx((10 * 12 * 11) ** (1 / 3) * us) and y.count == 2
    assert high - low < (x.cpu.high_ns - x.cpu.low_ns) + 2 * (y.cpu.high_ns - y.cpu.low_ns)
    assert "per-block totals" in r.method_text


def test_request_cpu_sums_bonferroni_intervals_when_blocks_differ():
    # y lacks block 3 and has block 4: no per-block total for every block. Each term's t interval
    # is taken at 1 − 0.05/2 = 97.5 % and the bounds summed × count; the estimate is
    # Σ count × geometric mean: (10·12·11)^(1/3) + 2·(5·4·6)^(1/3) = 10.9696 + 2·4.9324 = 20.8345 µs
    us = 1000
    x, y = blocks(10 * us, 12 * us, 11 * us), {1: 5 * us, 2: 4 * us, 4: 6 * us}
    r = econ.request_cpu([("x", 1, {}, x), ("y", 2, {}, y)])
    assert r.method == econ.SUMMED_INTERVALS and r.term_level == pytest.approx(0.975)
    ex, lx, hx = _t(list(x.values()), 0.975)
    ey, ly, hy = _t(list(y.values()), 0.975)
    assert r.cpu.estimate_ns == pytest.approx(ex + 2 * ey) == pytest.approx(20.8345 * us, rel=1e-5)
    assert (r.cpu.low_ns, r.cpu.high_ns) == pytest.approx((lx + 2 * ly, hx + 2 * hy))
    assert (r.cpu.min_ns, r.cpu.max_ns) == (10 * us + 2 * 4 * us, 12 * us + 2 * 6 * us)
    assert r.cpu.samples_ns == {} and r.cpu.repetitions == 3
    assert "Bonferroni over 2 terms" in r.method_text and "conservative" in r.method_text
    # the terms' own intervals stay at 95 %
    assert (r.terms[0].cpu.low_ns, r.terms[0].cpu.high_ns) == pytest.approx(_t(list(x.values()))[1:])


def test_request_cpu_without_enough_repetitions_has_no_interval():
    r = econ.request_cpu([("x", 1, {}, {1: 10.0, 2: 11.0}), ("y", 1, {}, {1: 1.0, 3: 2.0, 4: 3.0})])
    assert r.method == econ.SUMMED_INTERVALS and r.cpu.low_ns is None and r.cpu.high_ns is None


def test_request_change_pairs_the_per_block_totals():
    # before: totals 20, 20, 23 µs; after: 10, 11, 12 µs; at 1000 requests/s the change in cores
    # is the t interval of the per-block differences −10, −9, −11 µs × 1000 / 1e9
    us = 1000
    before = econ.request_cpu([("x", 1, {}, blocks(10 * us, 12 * us, 11 * us)), ("y", 2, {}, blocks(5 * us, 4 * us, 6 * us))])
    after = econ.request_cpu([("x", 1, {}, blocks(6 * us, 7 * us, 8 * us)), ("y", 2, {}, blocks(2 * us, 2 * us, 2 * us))])
    ch = econ.request_change(1000, before, after)
    d = np.array([-10, -9, -11]) * us
    half = sp.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert (ch.delta_low, ch.delta_high) == pytest.approx(((d.mean() - half) * 1e-6, (d.mean() + half) * 1e-6))
    assert ch.blocks == 3 and ch.method == econ.PAIRED_DIFFERENCES and ch.ratio is not None


def test_request_change_sums_term_intervals_when_blocks_differ():
    # y's blocks are 1, 2, 4: each term's paired differences get a 97.5 % t interval, summed × count
    us = 1000
    before = econ.request_cpu([("x", 1, {}, blocks(10 * us, 12 * us, 11 * us)), ("y", 2, {}, {1: 5 * us, 2: 4 * us, 4: 6 * us})])
    after = econ.request_cpu([("x", 1, {}, blocks(6 * us, 7 * us, 8 * us)), ("y", 2, {}, {1: 2 * us, 2: 3 * us, 4: 3 * us})])
    ch = econ.request_change(1000, before, after)
    dx, dy = np.array([-4, -5, -3]) * us, np.array([-3, -1, -3]) * us

    def bounds(d):
        half = sp.t.ppf(1 - 0.025 / 2, 2) * d.std(ddof=1) / math.sqrt(3)
        return d.mean() - half, d.mean() + half
    (lx, hx), (ly, hy) = bounds(dx), bounds(dy)
    assert (ch.delta_low, ch.delta_high) == pytest.approx(((lx + 2 * ly) * 1e-6, (hx + 2 * hy) * 1e-6))
    assert ch.method == econ.SUMMED_INTERVALS and ch.ratio is None and ch.blocks == 3
    assert ch.delta_cores == pytest.approx(after.cpu.estimate_ns * 1e-6 - before.cpu.estimate_ns * 1e-6)


# ----------------------------------------------------------------------------- composite requests: a stored run

REQUEST = "sign + x25519-keygen + x25519-derive"


@pytest.fixture(scope="module")
def tls_store(tmp_path_factory):
    return tls_run(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_stored(tls_store):
    with Store(tls_store) as st:
        return load_run(st, "latest")


def _drift_interval(value):
    """value × the t interval of the blocks' drift (×1, ×1.05, ×1/1.05): geometric mean 1."""
    return tuple(value * x for x in _t(DRIFT)[1:])


def test_plan_request_sums_the_terms(tls_stored):
    # a full TLS 1.3 handshake on the server with an RSA-2048 certificate: 1 ms (sign) + 30 µs
    # (x25519-keygen) + 40 µs (x25519-derive) = 1.07 ms of CPU; 2,000 handshakes/s × 1.07 ms =
    # 2.14 cores; one core sustains 1 / 1.07 ms = 934.6 handshakes/s
    res = econ.plan(tls_stored, None, "2k", request=REQUEST, configuration="rsa")
    assert res.request == REQUEST and res.op is None and res.unit == "requests/s" and res.rate_per_s == 2000
    (req,) = res.requests
    assert [(t.name, t.count, t.cell["op"]) for t in req.terms] == [
        ("sign", 1, "rsa2048-sign"), ("x25519-keygen", 1, "x25519-keygen"), ("x25519-derive", 1, "x25519-derive")]
    # (the store keeps whole ns per repetition: 28,571 ns for 30 µs / 1.05, hence rel=1e-5)
    assert [t.cpu.estimate_ns for t in req.terms] == pytest.approx([1_000_000, 30_000, 40_000], rel=1e-5)
    assert req.method == econ.PER_BLOCK_TOTALS
    # the per-block totals: 1.07 ms × the block's drift
    assert list(req.cpu.samples_ns.values()) == pytest.approx([1_070_000 * f for f in DRIFT], rel=1e-5)
    (c,) = res.cores
    assert c.cpu.estimate_ns == pytest.approx(1_070_000, rel=1e-5) and c.cores == pytest.approx(2.14, rel=1e-5)
    assert c.ops_per_s_per_core == pytest.approx(934.579, rel=1e-5)
    assert (c.cpu.low_ns, c.cpu.high_ns) == pytest.approx(_drift_interval(1_070_000), rel=1e-5)
    assert (c.cores_low, c.cores_high) == pytest.approx(_drift_interval(2.14), rel=1e-5)
    assert res.change is None and res.offload == () and len(res.cells) == 3


@pytest.mark.parametrize("request_text", ["ecdsa-p256-sign + x25519-keygen + 2*x25519-derive",
                                          "sign + x25519-keygen + x25519-derive*2",
                                          "x25519-derive + sign + x25519-keygen + x25519-derive"])
def test_plan_request_counts(tls_stored, request_text):
    # with an ECDSA P-256 certificate and two derivations: 25 + 30 + 2 × 40 = 135 µs per request;
    # at 2,000/s: 0.27 cores
    res = econ.plan(tls_stored, None, 2000, request=request_text, configuration="ecdsa")
    assert res.cores[0].cpu.estimate_ns == pytest.approx(135_000, rel=1e-5)
    assert res.cores[0].cores == pytest.approx(0.27, rel=1e-5)
    assert sum(t.count for t in res.requests[0].terms) == 4


def test_plan_request_terms_of_one_cell_fix_the_configuration(tls_stored):
    # ecdsa-p256-sign is measured in configuration ecdsa only, so its request's x25519-keygen and
    # x25519-derive are ecdsa's (both configurations have them): 25 + 30 + 40 = 95 µs
    res = econ.plan(tls_stored, None, 2000, request="ecdsa-p256-sign + x25519-keygen + x25519-derive")
    assert {t.cell["configuration"] for t in res.requests[0].terms} == {"ecdsa"}
    assert res.cores[0].cpu.estimate_ns == pytest.approx(95_000, rel=1e-5)
    assert res.cores[0].cores == pytest.approx(0.19, rel=1e-5)


def test_plan_request_label_and_op_are_one_cell(tls_stored):
    # 'sign' (the label) and 'rsa2048-sign' (its op in configuration rsa) are the same cell: 2 ms
    res = econ.plan(tls_stored, None, 1000, request="sign + rsa2048-sign", configuration="rsa")
    (t,) = res.requests[0].terms
    assert t.count == 2 and res.cores[0].cpu.estimate_ns == pytest.approx(2_000_000)


def test_plan_request_change(tls_stored):
    # moving the certificate from RSA-2048 to ECDSA P-256: 1.07 ms → 95 µs per handshake; at
    # 2,000/s 2.14 → 0.19 cores, −1.95 cores; the interval is the paired t interval of the
    # per-block differences of the totals, (95 µs − 1.07 ms) × drift × 2000 / 1e9
    res = econ.plan(tls_stored, None, "2k/s", request=REQUEST, from_config="rsa", to_config="ecdsa",
                    core_price_per_year=1000)
    before, after = res.requests
    assert [t.cell["op"] for t in after.terms] == ["ecdsa-p256-sign", "x25519-keygen", "x25519-derive"]
    ch = res.change
    assert ch.before.cores == pytest.approx(2.14) and ch.after.cores == pytest.approx(0.19)
    assert ch.delta_cores == pytest.approx(-1.95) and ch.blocks == 3 and ch.method == econ.PAIRED_DIFFERENCES
    d = np.array([-975_000 * f * 2000 / 1e9 for f in DRIFT])
    half = sp.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert (ch.delta_low, ch.delta_high) == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-5)
    assert ch.ratio.ratio == pytest.approx(95 / 1070, rel=1e-6)
    doc = res.as_dict()
    assert doc["change"]["delta_cost_per_year"] == pytest.approx(-1950)
    assert doc["requests"][1]["terms"][0]["cell"]["op"] == "ecdsa-p256-sign"


def test_plan_request_with_different_blocks_says_so(tls_stored, tls_store, cli):
    # x25519-derive's block 3 measured as block 4 instead: the terms' blocks differ, so the
    # terms' intervals are summed (each at 1 − 0.05/3)
    with Store(tls_store) as st:
        run = load_run(st, "latest")
    key = next(k for k, s in run.summaries.items() if s.cell.op == "x25519-derive" and s.cell.configuration == "rsa")
    s = run.summaries[key]
    b = s.process_cpu_ns_per_op_by_block
    run.summaries[key] = dataclasses.replace(s, process_cpu_ns_per_op_by_block={1: b[1], 2: b[2], 4: b[3]})
    res = econ.plan(run, None, 2000, request=REQUEST, configuration="rsa")
    (req,) = res.requests
    assert req.method == econ.SUMMED_INTERVALS
    assert req.cpu.low_ns is not None and req.cpu.low_ns < req.cpu.estimate_ns < req.cpu.high_ns
    from cryptoperf.report.economics import text_lines
    text = "\n".join(text_lines(res, run.meta))
    assert "sum of the terms' 98.33 % intervals" in text
    # with only 2 repetitions of a term left, there is no cost to plan with: refused
    run.summaries[key] = dataclasses.replace(s, process_cpu_ns_per_op_by_block={1: b[1], 2: b[2]})
    with pytest.raises(EconomicsError, match="2 measured repetitions of .*needs 3"):
        econ.plan(run, None, 2000, request=REQUEST, configuration="rsa")


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(request="x25519-keygen"), "'x25519-keygen' in --per-request matches 2 cells of run 1"),
    (dict(request="sign + rsa4096-sign", configuration="rsa"),
     "run 1 has no operation 'rsa4096-sign' (it has: ecdsa-p256-sign, rsa2048-sign, sign, x25519-derive, "
     "x25519-keygen); use those names in --per-request"),
    (dict(request="ecdsa-p256-sign", configuration="rsa"), "no 'ecdsa-p256-sign' cell with configuration rsa"),
    (dict(request=REQUEST, configuration="rsa", backend="ring"), "no 'sign' cell with backend ring"),
    (dict(request=REQUEST, from_config="rsa"), "--from and --to go together"),
    (dict(request=REQUEST, configuration="rsa", accelerator=ACC, core_price_per_year=1000),
     "an accelerator's capacity and break-even are per operation of one kind"),
    (dict(request=REQUEST, op="sign", configuration="rsa"), "not both"),
    (dict(request="sign + 2*", configuration="rsa"), "term '2*' is not OP, N*OP or OP*N"),
])
def test_plan_request_refuses_what_the_run_lacks(tls_stored, kwargs, fragment):
    op = kwargs.pop("op", None)
    with pytest.raises(EconomicsError) as e:
        econ.plan(tls_stored, op, 2000, **kwargs)
    assert fragment in str(e.value)


# ----------------------------------------------------------------------------- cryptoperf plan --per-request

def test_cli_plan_per_request(cli, tls_store):
    res = cli("plan", "--per-request", REQUEST, "--configuration", "rsa", "--rate", "2k", "--store", tls_store)
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].startswith("run 1 (tls-server, ") and lines[0].endswith(f"at 2,000 requests/s of {REQUEST}:")
    assert "request on openssl, configuration rsa:" in res.out
    assert re.search(r"sign \(rsa2048-sign\)\s+1 ms per op \(95 % CI", res.out)
    assert "CPU per request    1.07 ms (geometric mean of the per-block totals over 3 blocks" in res.out
    assert "t interval of the per-block totals (every term was measured in the same 3 blocks)" in res.out
    assert "one core sustains  935 requests/s" in res.out
    assert "cores needed       2.14 cores (214 % of a core); 95 % CI 1.9 – 2.42" in res.out
    assert lines[-1] == f"caveat: {econ.CAVEAT}"


def test_cli_plan_per_request_change(cli, tls_store):
    res = cli("plan", "--per-request", REQUEST, "--from", "rsa", "--to", "ecdsa", "--rate", "2000/s",
              "--store", tls_store)
    assert res.code == 0, res.err
    assert "change rsa → ecdsa at 2,000 requests/s, worker CPU: 2.14 → 0.19 cores, -1.95 cores (-91.1 %; 95 % CI" in res.out
    assert "3 paired blocks" in res.out


@pytest.mark.parametrize("rate", ["2k", "2K/s", "2000/s", "2.0k", "2e3"])
def test_cli_rate_suffixes_mean_the_same(cli, tls_store, rate):
    res = cli("plan", "--per-request", REQUEST, "--configuration", "ecdsa", "--rate", rate, "--json",
              "--store", tls_store)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["rate_per_s"] == 2000 and doc["cores"][0]["cores"] == pytest.approx(0.19)


@pytest.mark.parametrize("args, fragments", [
    (["--op", "sign", "--per-request", REQUEST, "--rate", "2k"], ["give either --op OP", "not both"]),
    (["--per-request", REQUEST, "--rate", "2k"], ["'sign' in --per-request matches 2 cells"]),
    (["--per-request", "sign + rsa4096-sign", "--configuration", "rsa", "--rate", "2k"],
     ["run 1 has no operation 'rsa4096-sign'"]),
    (["--per-request", "", "--rate", "2k"], ["--per-request is empty"]),
    (["--per-request", REQUEST, "--configuration", "rsa", "--rate", "2x"], ["--rate '2x' is not a rate"]),
    (["--per-request", REQUEST, "--configuration", "rsa", "--rate", "2k/h"], ["--rate '2k/h' is not a rate"]),
    (["--per-request", REQUEST, "--configuration", "rsa", "--rate", "0k"], ["--rate must be a positive number"]),
    (["--per-request", REQUEST, "--configuration", "rsa", "--rate", "2k", "--core-price-per-year", "1000",
      "--accel-ops-per-s", "460", "--accel-price-per-year", "500"], ["per operation of one kind", "--op OP"]),
    (["--per-request", REQUEST, "--configuration", "rsa", "--rate", "2k", "--json", "--format", "md"],
     ["--json is --format json; it cannot go with --format md"]),
    (["--per-request", REQUEST, "--configuration", "rsa", "--rate", "2k", "--format", "pdf"], ["pdf"]),
])
def test_cli_plan_request_errors_are_one_line(cli, tls_store, args, fragments):
    assert_one_line_error(cli("plan", *args, "--store", tls_store), *fragments, code=2)


# ----------------------------------------------------------------------------- formats and the caveat

def _md_caveat(text):
    return f"**Not covered.** {econ.CAVEAT}" in text


@pytest.mark.parametrize("args", [
    ["--op", "rsa", "--from", "old", "--to", "new", "--rate", "9.6"],
    ["--op", "rsa2048-sign", "--configuration", "old", "--rate", "9.6", "--core-price-per-year", "1000",
     "--accel-ops-per-s", "460", "--accel-price-per-year", "500"],
])
@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_every_format_ends_with_the_caveat(cli, econ_store, args, fmt):
    res = cli("plan", *args, "--format", fmt, "-o", "-", "--store", econ_store)
    assert res.code == 0, res.err
    out = res.out.rstrip()
    if fmt == "text":
        assert out.splitlines()[-1] == f"caveat: {econ.CAVEAT}"
    elif fmt == "json":
        doc = json.loads(out)
        assert list(doc)[-1] == "caveat" and doc["caveat"] == econ.CAVEAT
    elif fmt == "md":
        assert out.endswith(f"**Not covered.** {econ.CAVEAT}")
    else:
        caveat = out.index('<section id="caveat"')
        assert econ.CAVEAT in out[caveat:] and "<section" not in out[caveat + 1:]


def test_caveat_says_what_the_interval_does_not_cover():
    for part in ("repetitions on the measured host only", "other hosts or CPU generations",
                 "full and resumed handshakes", "network, TLS record layer, application",
                 "queueing at high utilisation"):
        assert part in econ.CAVEAT


def test_cli_plan_markdown(cli, tls_store, tmp_path):
    res = cli("plan", "--per-request", REQUEST, "--from", "rsa", "--to", "ecdsa", "--rate", "2k",
              "--core-price-per-year", "1000", "--format", "md", "--store", tls_store)
    assert res.code == 0, res.err
    md = res.out
    assert md.startswith(f"# CPU for 2,000 requests/s of {REQUEST}, the change from rsa to ecdsa\n")
    assert f"`cryptoperf plan 1 --per-request '{REQUEST}' --rate 2000 --from rsa --to ecdsa " \
           "--core-price-per-year 1000`" in md
    assert "Measured in run 1 (tls-server, " in md and "on fake" not in md and " × " in md  # the host line
    assert "| rsa | 1.07 ms | 948 µs – 1.21 ms | 935 | 2.14 | 1.9 – 2.42 | 2,140.00 |" in md
    assert "| ecdsa | 95 µs |" in md
    assert "| sign (ecdsa-p256-sign) | openssl | ecdsa | 25 µs |" in md
    assert "Interval: t interval of the per-block totals" in md
    assert "**Change** rsa → ecdsa at 2,000 requests/s, worker CPU: 2.14 → 0.19 cores, -1.95 cores" in md
    assert _md_caveat(md)
    # written with -o: a file, its path printed; a file the user named is never replaced (one-line
    # error, as `cryptoperf report -o`), nor one cryptoperf named (a numeric suffix)
    target = tmp_path / "answer.md"
    first = cli("plan", "--per-request", REQUEST, "--from", "rsa", "--to", "ecdsa", "--rate", "2k",
                "--core-price-per-year", "1000", "--format", "md", "-o", target, "--store", tls_store)
    assert first.code == 0 and first.out.strip() == str(target) and target.read_text() == md
    second = cli("plan", "--per-request", REQUEST, "--configuration", "rsa", "--rate", "1k", "--format", "md",
                 "-o", target, "--store", tls_store)
    assert_one_line_error(second, f"{target} exists and cryptoperf never overwrites a file",
                          "pass another -o PATH, or -o - for stdout")
    assert target.read_text() == md and sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".md") == ["answer.md"]


def test_cli_plan_html_is_a_self_contained_file_never_overwritten(cli, tls_store, tmp_path):
    def args(rate="2k"):
        return ["plan", "--per-request", REQUEST, "--configuration", "ecdsa", "--rate", rate, "--format", "html",
                "--store", tls_store]
    res = cli(*args())  # the cli fixture runs in tmp_path
    assert res.code == 0, res.err
    first = tmp_path / "cryptoperf-results" / "plan-run1.html"
    assert res.out.strip() == str(Path("cryptoperf-results") / "plan-run1.html") and first.exists()
    page = first.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page.lower() and "http://" not in page and "https://" not in page
    assert "<link" not in page and "@import" not in page
    from cryptoperf.report.economics import report_css
    assert report_css() and report_css() in page  # the report's own CSS, inline
    assert f"CPU for 2,000 requests/s of {REQUEST} (configuration ecdsa)" in page
    assert "sign (ecdsa-p256-sign)" in page and "95 µs" in page and "0.19" in page
    assert econ.CAVEAT in page
    again = cli(*args("4k"))
    assert again.code == 0, again.err
    assert again.out.strip() == str(Path("cryptoperf-results") / "plan-run1-2.html")
    assert first.read_text() == page and "4,000 requests/s" in (tmp_path / "cryptoperf-results" / "plan-run1-2.html").read_text()
    # '-' is stdout
    out = cli(*args(), "-o", "-")
    assert out.code == 0 and out.out.startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in (tmp_path / "cryptoperf-results").iterdir()) == ["plan-run1-2.html", "plan-run1.html"]


def test_cli_plan_json_alias_and_format_json_agree(cli, econ_store):
    args = ["plan", "--op", "rsa2048-sign", "--configuration", "new", "--rate", "9.6", "--store", econ_store]
    a, b = cli(*args, "--json"), cli(*args, "--format", "json")
    assert a.code == b.code == 0 and json.loads(a.out) == json.loads(b.out)
    doc = json.loads(a.out)
    assert doc["request"] is None and doc["unit"] == "ops/s" and doc["study_name"] == "rsa-upgrade"
    assert doc["command"] == "cryptoperf plan 1 --op rsa2048-sign --rate 9.6 --configuration new"


def test_plan_html_renders_offline_in_headless_chromium(cli, tls_store, tmp_path):
    from test_report import offline_page
    page_path = tmp_path / "plan.html"
    res = cli("plan", "--per-request", REQUEST, "--from", "rsa", "--to", "ecdsa", "--rate", "2k",
              "--format", "html", "-o", page_path, "--store", tls_store)
    assert res.code == 0, res.err
    with offline_page(page_path) as (page, attempted, errors):
        assert page.locator("table.plan tbody tr").count() == 2
        assert page.locator("table.terms").count() == 2
        for sel in ("table.plan", "#change", "#caveat"):
            box = page.locator(sel).bounding_box()
            assert box and box["width"] > 100 and box["height"] > 10, (sel, box)
        assert econ.CAVEAT in page.locator("#caveat").inner_text()
        # the report's CSS applies: numbers right-aligned
        assert page.locator("table.plan td.num").first.evaluate("e => getComputedStyle(e).textAlign") == "right"
    assert attempted == [] and errors == []


SIZED_STUDY = """\
[study]
name = "sized"
baseline = "a"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0
timeout_s = 5

[[configuration]]
name = "a"

[[configuration]]
name = "b"

[[operation]]
op = "sha256"
sizes = [64, 1024]

[[operation]]
op = "x25519-keygen"
"""


def test_plan_request_size_narrows_only_the_terms_with_a_message(cli, tmp_path):
    # the fake worker's default CPU per op is 1000 + size ns: sha256 of 1 KiB 2,024 ns,
    # x25519-keygen (no message) 1,000 ns; 4 hashes and a key: 1,000 + 4 × 2,024 = 9,096 ns
    from stored_runs import run_study
    store = tmp_path / "sized.sqlite"
    run_study(tmp_path / "sized", store, SIZED_STUDY, {"rep_factors": DRIFT})
    with Store(store) as st:
        run = load_run(st, "latest")
    res = econ.plan(run, None, 1000, request="x25519-keygen + 4*sha256", size_bytes=1024, configuration="a")
    assert [t.cell["size_bytes"] for t in res.requests[0].terms] == [None, 1024]
    assert res.cores[0].cpu.estimate_ns == pytest.approx(9096, rel=1e-4)  # whole ns per repetition
    with pytest.raises(EconomicsError, match="matches 2 cells"):  # which sha256?
        econ.plan(run, None, 1000, request="x25519-keygen + 4*sha256", configuration="a")
    with pytest.raises(EconomicsError, match="no 'x25519-keygen' cell with size 1024"):  # --op stays strict
        econ.plan(run, "x25519-keygen", 1000, size_bytes=1024, configuration="a")
    out = cli("plan", "--per-request", "x25519-keygen + 4*sha256", "--size", "1024", "--configuration", "a",
              "--rate", "1k", "--store", store)
    assert out.code == 0, out.err
    assert "4 × sha256 1 KiB" in out.out and "CPU per request    9.1 µs" in out.out


def test_cli_plan_markdown_of_one_operation(cli, econ_store):
    # the worked example of docs/methodology.md as a note to share: 13 ms → 3 ms at 9.6 ops/s
    res = cli("plan", "--op", "rsa", "--from", "old", "--to", "new", "--rate", "9.6", "--core-price-per-year",
              "1000", "--accel-ops-per-s", "460", "--accel-price-per-year", "500", "--accel-host-cpu-us-per-op",
              "100", "--format", "md", "--store", econ_store)
    assert res.code == 0, res.err
    md = res.out
    assert md.startswith("# CPU for 9.6 ops/s of rsa, the change from old to new and when an accelerator "
                         "pays for itself\n")
    assert "| old (rsa2048-sign, openssl) | 13 ms | 11.5 ms – 14.7 ms | 76.9 | 0.125 | 0.111 – 0.141 | 124.80 |" in md
    assert "| new (rsa2048-sign, openssl) | 3 ms |" in md
    assert "**Change** old → new at 9.6 ops/s, worker CPU: 0.125 → 0.0288 cores, -0.096 cores (-76.9 %" in md
    assert "| old (rsa2048-sign, openssl) | 38.76 ops/s | 1 | -376.16 | does not pay |" in md
    assert _md_caveat(md)


def test_plan_takes_other_spellings_and_size_suffixes(cli, tls_store, tmp_path):
    # operation names as `cryptoperf speed` and study files take them (opnames): any case and
    # punctuation; --size with a binary suffix (k = 1024)
    res = cli("plan", "--per-request", "ECDSA-P256-sign + X25519_keygen + x25519-derive", "--rate", "2k",
              "--json", "--store", tls_store)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert [t["cell"]["op"] for t in doc["requests"][0]["terms"]] == ["ecdsa-p256-sign", "x25519-keygen",
                                                                      "x25519-derive"]
    assert doc["cores"][0]["cores"] == pytest.approx(0.19, rel=1e-5)
    assert_one_line_error(cli("plan", "--op", "sign", "--configuration", "rsa", "--size", "16KB", "--rate", "1",
                              "--store", tls_store), "--size: '16KB' is ambiguous", code=2)
    assert_one_line_error(cli("plan", "--op", "sign", "--configuration", "rsa", "--size", "1k", "--rate", "1",
                              "--store", tls_store), "no 'sign' cell with size 1024", code=2)


def test_plan_refuses_a_run_without_enough_repetitions_and_says_which_run(cli, fake_worker, tmp_path):
    """After a study, a throw-away `speed` call must not be what `plan` prices: latest is the
    newest study run, named on stderr; and a one-repetition speed run asked for by id is
    refused in one line (a cost to plan with needs an interval)."""
    from stored_runs import ECON_STUDY
    fake_worker({"latency_ns": {"rsa2048-sign": 13_000_000}})
    study = tmp_path / "econ.toml"
    study.write_text(ECON_STUDY)
    assert cli("study", study, "--no-report").code == 0
    assert cli("speed", "--op", "rsa2048-sign", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0").code == 0
    store = tmp_path / "runs.sqlite"
    res = cli("plan", "--op", "rsa2048-sign", "--configuration", "old", "--rate", "9.6", "--store", store)
    assert res.code == 0 and "using run 1 (study rsa-upgrade" in res.err, res.err
    assert_one_line_error(cli("plan", "2", "--op", "rsa2048-sign", "--rate", "9.6", "--store", store),
                          "run 2 has 1 measured repetition", "needs 3", code=2)


# ----------------------------------------------------------------------------- whose CPU: --side (a workload)

def _handshake_study():
    """tls_run's study (configurations rsa and ecdsa) with a TLS handshake workload on aws-lc
    at closed:2 in place of its primitives."""
    from stored_runs import TLS_STUDY
    head = TLS_STUDY.split("[[operation]]")[0]
    return head.replace('name = "tls-server"', 'name = "handshakes"').replace('"openssl"', '"aws-lc"') + \
        """[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { cert = "{cert}", group = "x25519", session = "full" }
loads = ["closed:2"]
"""


#: CPU ns per full handshake of each side (before the blocks' DRIFT), as measured on a TLS 1.3
#: server: ECDSA P-256 halves the server's CPU while the client's rises (verifying ECDSA costs
#: a client more than verifying RSA)
SERVER_NS = {"rsa": 658_000, "ecdsa": 339_000}
CLIENT_NS = {"rsa": 120_000, "ecdsa": 160_000}
#: server.transactions ÷ ops in a stored result whose server counters ran from before the
#: warm-up (as in every result before the window fix): the server figure must not use ops
SERVER_TX_FACTOR = 1.3


def _edit_results(store, run_id, edit):
    """Apply ``edit(result, configuration, block)`` to every stored result of run ``run_id``."""
    import sqlite3
    db = sqlite3.connect(store)
    for rid, conf, block, text in db.execute(
            "SELECT id, configuration, block, result_json FROM results WHERE run_id = ?", (run_id,)).fetchall():
        r = json.loads(text)
        edit(r, conf, block)
        db.execute("UPDATE results SET result_json = ? WHERE id = ?", (json.dumps(r), rid))
    db.commit()
    db.close()


def _sides(r, conf, block):
    """Script each side's CPU per handshake into a fake-worker result."""
    f = DRIFT[(block - 1) % 3] if block else 1.0
    ops = r["ops"]
    r["cpu_ns_total"] = int(ops * CLIENT_NS[conf] * f)
    tx = int(round(ops * SERVER_TX_FACTOR))
    r["server"]["cpu_ns"], r["server"]["transactions"] = int(tx * SERVER_NS[conf] * f), tx


@pytest.fixture(scope="module")
def handshake_store(tmp_path_factory):
    """A store with run 1 = tls_run's primitives (rsa, ecdsa) and run 2 = _handshake_study(), a
    TLS handshake workload on the same host with SERVER_NS / CLIENT_NS per handshake."""
    from stored_runs import TLS_CPU_NS, TLS_STUDY, run_study
    d = tmp_path_factory.mktemp("handshakes")
    store = d / "runs.sqlite"
    run_study(d / "primitives", store, TLS_STUDY, {"rep_factors": DRIFT, "latency_ns": TLS_CPU_NS})
    run_study(d / "workload", store, _handshake_study(), {"rep_factors": DRIFT})
    _edit_results(store, 2, _sides)
    return store


@pytest.fixture(scope="module")
def handshake_runs(handshake_store):
    with Store(handshake_store) as st:
        return load_run(st, 1), load_run(st, 2)


HS = "full handshake @ c=2"


def test_plan_prices_a_workload_with_its_servers_cpu(handshake_runs):
    # finding: plan priced a TLS workload with the client's CPU, so ECDSA "needed +33 % cores"
    # while the server's CPU per handshake halved. At 3,000 handshakes/s the server needs
    # 3000 × 658 µs = 1.974 cores with RSA-2048, 3000 × 339 µs = 1.017 with ECDSA: fewer
    _, run = handshake_runs
    res = econ.plan(run, HS, "3k", from_config="rsa", to_config="ecdsa")
    assert res.side == "server" and res.unit == "transactions/s" and res.per == "transaction"
    assert res.cores[0].cpu.estimate_ns == pytest.approx(658_000, rel=1e-5)  # cpu_ns ÷ server.transactions
    assert res.change.before.cores == pytest.approx(1.974, rel=1e-5)
    assert res.change.after.cores == pytest.approx(1.017, rel=1e-5)
    assert res.change.delta_cores < 0 and res.change.delta_high < 0
    # the client's side, asked for, is what plan used to print silently: +33 %
    client = econ.plan(run, HS, "3k", from_config="rsa", to_config="ecdsa", side="client")
    assert client.side == "client" and client.change.delta_pct == pytest.approx(100 / 3, rel=1e-4)
    both = econ.plan(run, HS, "3k", from_config="rsa", to_config="ecdsa", side="both")
    assert both.cores[0].cpu.estimate_ns == pytest.approx(778_000, rel=1e-5)
    assert both.cores[1].cpu.estimate_ns == pytest.approx(499_000, rel=1e-5)


def test_side_cpu_is_one_side_over_its_own_transactions(handshake_runs):
    _, run = handshake_runs
    o = next(o for o in run.outcomes if o.ok and o.repetition.block == 1 and o.cell.configuration == "rsa")
    assert econ.side_cpu_ns_per_tx(o.result, "server") == pytest.approx(658_000, rel=1e-5)
    assert econ.side_cpu_ns_per_tx(o.result, "client") == pytest.approx(120_000, rel=1e-5)
    assert econ.side_cpu_ns_per_tx(o.result, "both") == pytest.approx(778_000, rel=1e-5)
    assert o.result.server.transactions / o.result.ops == pytest.approx(SERVER_TX_FACTOR, rel=1e-2)  # ÷ ops: ×1.3
    # memory mode: each side's share of the one thread's CPU
    mem = decode({"status": "ok", "ops": 10, "cpu_ns_total": 90_000, "client_side_cpu_ns": 20_000,
                  "server": {"cpu_ns": 70_000, "transactions": 10}})
    assert (econ.side_cpu_ns_per_tx(mem, "client"), econ.side_cpu_ns_per_tx(mem, "server")) == (2000, 7000)
    # a primitive has the worker's CPU only; an external server has no server figure
    prim = decode({"status": "ok", "ops": 10, "cpu_ns_total": 90_000})
    assert econ.side_cpu_ns_per_tx(prim, "server") is None and econ.side_cpu_ns_per_tx(prim, "client") is None
    assert econ.side_cpu_ns_per_tx(prim, "process") == 9000
    ext = decode({"status": "ok", "ops": 10, "cpu_ns_total": 90_000, "server": {"cpu_ns": None, "transactions": None}})
    assert econ.side_cpu_ns_per_tx(ext, "server") is None and econ.side_cpu_ns_per_tx(ext, "client") == 9000
    with pytest.raises(ValueError, match="unknown side"):
        econ.side_cpu_ns_per_tx(o.result, "kernel")


def test_plan_and_report_read_one_analysis(handshake_runs):
    """The per-side figures plan pairs by block are the run's analysis's, the same the report's
    server and client columns show (their medians)."""
    _, run = handshake_runs
    for s in run.summaries.values():
        point = run.analysis.workloads.point_of(s.cell.key)
        if point is None or not point.measured:
            continue
        server = econ.side_samples(run, s, "server")
        assert server == dict(point.cpu_ns_per_tx_by_block["server"]) and server
        assert point.server_cpu_ns_per_tx == pytest.approx(float(np.median(list(server.values()))))
        client = econ.side_samples(run, s, "client")
        assert point.client_cpu_ns_per_tx == pytest.approx(float(np.median(list(client.values()))))


@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_every_format_names_the_side(cli, handshake_store, fmt):
    res = cli("plan", "2", "--op", HS, "--from", "rsa", "--to", "ecdsa", "--rate", "3k", "--format", fmt, "-o", "-",
              "--store", handshake_store)
    assert res.code == 0, res.err
    import html
    out = html.unescape(res.out)
    if fmt == "json":
        doc = json.loads(out)
        assert doc["side"] == "server" and doc["side_text"] == "server CPU" and doc["unit"] == "transactions/s"
        assert doc["change"]["delta_cores"] == pytest.approx(-0.957, rel=1e-4)
        assert "--side server" in doc["command"]
        return
    assert "server CPU per transaction (the server process's CPU ÷ the server's own transactions)" in out
    assert "rsa → ecdsa at 3,000 transactions/s, server CPU: 1.97 → 1.02 cores, -0.957 cores (-48.5 %" in out
    if fmt == "text":
        assert "CPU per tx         658 µs (server CPU; geometric mean of 3 repetitions" in out
    if fmt == "md":
        assert out.startswith(f"# Server CPU for 3,000 transactions/s of {HS}, the change from rsa to ecdsa\n")
        assert "| rsa (tls-handshake, aws-lc) | 658 µs |" in out and "| server CPU per transaction |" in out


def test_cli_plan_side_client_and_errors(cli, handshake_store):
    res = cli("plan", "2", "--op", HS, "--from", "rsa", "--to", "ecdsa", "--rate", "3k", "--side", "client",
              "--store", handshake_store)
    assert res.code == 0, res.err
    assert "rsa → ecdsa at 3,000 transactions/s, client CPU: 0.36 → 0.48 cores, +0.12 cores (+33.3 %" in res.out
    assert_one_line_error(cli("plan", "1", "--op", "x25519-keygen", "--configuration", "rsa", "--rate", "1k",
                              "--side", "server", "--store", handshake_store),
                          "has no server side (its only CPU figure is the worker's)", code=2)
    assert_one_line_error(cli("plan", "2", "--op", HS, "--configuration", "rsa", "--rate", "1k", "--side", "kernel",
                              "--store", handshake_store), "kernel", code=2)


def test_plan_says_when_an_external_server_was_not_measured(handshake_store, tmp_path):
    import shutil
    store = tmp_path / "external.sqlite"
    shutil.copy(handshake_store, store)
    _edit_results(store, 2, lambda r, c, b: r["server"].update(cpu_ns=None, transactions=None))
    with Store(store) as st:
        run = load_run(st, 2)
    with pytest.raises(EconomicsError, match="did not measure its server's CPU .*give --side client"):
        econ.plan(run, HS, 1000, configuration="rsa")
    assert econ.plan(run, HS, 1000, configuration="rsa", side="client").cores[0].cpu.estimate_ns == \
        pytest.approx(120_000, rel=1e-5)


# ----------------------------------------------------------------------------- the non-crypto remainder

ECDSA_REQUEST = "ecdsa-p256-sign + x25519-keygen + x25519-derive"


def _ecdsa_key(run):
    return next(s.cell.key for s in run.summaries.values() if s.cell.configuration == "ecdsa")


def test_remainder_is_the_workload_minus_its_primitives(handshake_runs):
    # ECDSA P-256: the server spends 339 µs per handshake; its primitives 25 + 30 + 40 = 95 µs;
    # the remainder 244 µs, so the request with it costs the measured 339 µs again
    prims, hs = handshake_runs
    res = econ.plan(prims, None, 3000, request=ECDSA_REQUEST, remainder_run=hs, remainder_op=_ecdsa_key(hs))
    rem = res.remainder
    assert rem.side == "server" and rem.run_id == 2
    assert rem.estimate_ns == pytest.approx(244_000, rel=1e-5)
    assert rem.low_ns < rem.estimate_ns < rem.high_ns
    assert res.cores[0].cpu.estimate_ns == pytest.approx(339_000, rel=1e-5)
    assert res.cores[0].cores == pytest.approx(1.017, rel=1e-5)
    assert res.requests[0].cpu.estimate_ns == pytest.approx(95_000, rel=1e-5)
    # without it, the primitives alone under-count the server ~3.6×, and the answer says so
    bare = econ.plan(prims, None, 3000, request=ECDSA_REQUEST)
    assert bare.remainder is None and bare.remainder_note == econ.REMAINDER_LEFT_OUT
    assert res.cores[0].cores / bare.cores[0].cores == pytest.approx(339 / 95, rel=1e-4)


def test_remainder_label_picks_the_requests_configuration(handshake_runs):
    prims, hs = handshake_runs
    by_label = econ.plan(prims, None, 3000, request=ECDSA_REQUEST, remainder_run=hs, remainder_op=HS)
    assert by_label.remainder.cell["configuration"] == "ecdsa"
    assert by_label.remainder.estimate_ns == pytest.approx(244_000, rel=1e-5)
    # nothing to pick one by: the cell keys, in one line
    from cryptoperf.economics.planning import _remainder_cell
    with pytest.raises(EconomicsError, match=r"matches 2 cells of run 2; give one of their keys: "
                                             r"'aws-lc/full handshake @ c=2/-/rsa', 'aws-lc/full handshake @ c=2/-/ecdsa'"):
        _remainder_cell(hs, HS, [])


def test_remainder_stays_when_only_the_primitives_change(handshake_runs):
    # ecdsa → rsa with the remainder measured on ecdsa's handshake: 339 µs → 339 + (1070 − 95) µs
    prims, hs = handshake_runs
    res = econ.plan(prims, None, 1000, request="sign + x25519-keygen + x25519-derive", from_config="ecdsa",
                    to_config="rsa", remainder_run=hs, remainder_op=_ecdsa_key(hs))
    before, after = res.cores
    assert before.cpu.estimate_ns == pytest.approx(339_000, rel=1e-5)
    assert after.cpu.estimate_ns == pytest.approx(1_314_000, rel=1e-5)
    assert after.cpu.low_ns < after.cpu.estimate_ns < after.cpu.high_ns
    assert res.change.delta_cores == pytest.approx(0.975, rel=1e-5) and res.change.ratio is None
    assert res.change.delta_pct == pytest.approx((1314 / 339 - 1) * 100, rel=1e-4)


def test_cli_remainder_and_left_out_in_every_format(cli, handshake_store, handshake_runs):
    _, hs = handshake_runs
    args = ["plan", "1", "--per-request", ECDSA_REQUEST, "--rate", "3k", "--store", handshake_store]
    with_rem = args + ["--remainder-from", "2", "--remainder-op", _ecdsa_key(hs)]
    for fmt in ("text", "md", "html", "json"):
        bare = cli(*args, "--format", fmt, "-o", "-")
        full = cli(*with_rem, "--format", fmt, "-o", "-")
        assert bare.code == 0 and full.code == 0, (bare.err, full.err)
        if fmt == "json":
            assert json.loads(bare.out)["remainder"] is None
            assert json.loads(bare.out)["remainder_note"] == econ.REMAINDER_LEFT_OUT
            doc = json.loads(full.out)
            assert doc["remainder"]["estimate_ns"] == pytest.approx(244_000, rel=1e-5)
            assert doc["remainder"]["side"] == "server" and doc["remainder_note"] is None
            assert doc["cores"][0]["cores"] == pytest.approx(1.017, rel=1e-5)
            continue
        assert "The non-crypto remainder is left out" in bare.out
        assert "left out" not in full.out
        assert "Non-crypto remainder 244 µs per request" in full.out
        assert "the server CPU per transaction of" in full.out
    text = cli(*with_rem).out
    assert "CPU per request    339 µs (primitives + remainder;" in text
    assert "cores needed       1.02 cores" in text


def test_remainder_refusals_are_one_line(cli, handshake_store, handshake_runs, tmp_path):
    import shutil
    import sqlite3
    _, hs = handshake_runs
    base = ["plan", "1", "--per-request", ECDSA_REQUEST, "--rate", "3k"]
    cases = [
        (["--remainder-from", "2"], ["--remainder-from needs --remainder-op"]),
        (["--remainder-op", "openssl/x25519-keygen/-/ecdsa"], ["is a primitive operation"]),
        (["--remainder-from", "9", "--remainder-op", "x"], ["--remainder-from: no run 9"]),
        (["--side", "client"], ["--side chooses a workload's side"]),
    ]
    for extra, fragments in cases:
        assert_one_line_error(cli(*base, *extra, "--store", handshake_store), *fragments, code=2)
    # the rsa handshake (658 µs) costs less than the rsa primitives (1.07 ms): it is not made of them
    rsa = next(s.cell.key for s in hs.summaries.values() if s.cell.configuration == "rsa")
    assert_one_line_error(cli("plan", "1", "--per-request", REQUEST, "--configuration", "rsa", "--rate", "3k",
                              "--remainder-from", "2", "--remainder-op", rsa, "--store", handshake_store),
                          "(658 µs) is not more than the request's primitives (1070 µs)", code=2)
    # a workload from another host (here: another kernel)
    store = tmp_path / "other-host.sqlite"
    shutil.copy(handshake_store, store)
    db = sqlite3.connect(store)
    host = json.loads(db.execute("SELECT host_json FROM runs WHERE id = 2").fetchone()[0])
    host["kernel"] = "Linux 9.9.9-test #1 SMP"
    db.execute("UPDATE runs SET host_json = ? WHERE id = 2", (json.dumps(host),))
    db.commit()
    db.close()
    assert_one_line_error(cli(*base, "--remainder-from", "2", "--remainder-op", _ecdsa_key(hs), "--store", store),
                          "--remainder-from run 2 ran on another host than run 1 (kernel:", code=2)


# ----------------------------------------------------------------------------- an accelerator the run measured

def test_an_accelerator_measured_in_the_run_takes_its_figures_from_the_analysis(econ_stored):
    """--accel-from CONFIG: the capacity, host CPU and latency are that configuration's medians
    in the run (here 'new', scripted at 3 ms per operation), not typed figures."""
    acc = econ.measured_accelerator(econ_stored, "rsa2048-sign", "new", 500)
    (s,) = [s for s in econ_stored.summaries.values() if s.cell.configuration == "new"]
    assert acc.ops_per_s_per_unit == s.ops_per_s == pytest.approx(1e9 / (3 * MS))
    assert acc.host_cpu_ns_per_op == s.process_cpu_ns_per_op == pytest.approx(3 * MS)
    assert acc.latency_ns == s.p50_ns and acc.measured_from == "new" and acc.price_per_year == 500
    assert "run 1, configuration 'new'" in acc.measured_note and "lower bound" in acc.measured_note
    with pytest.raises(EconomicsError, match="configurations: new, old"):
        econ.measured_accelerator(econ_stored, "rsa2048-sign", "token", 500)


def test_an_accelerator_measured_on_a_workload_takes_the_server_side(handshake_runs):
    """On a handshake's rows the device saves the server's CPU (where the key signs): --accel-from
    takes the server CPU per transaction the report shows (here 339 µs for 'ecdsa'), not the
    client worker's, and the client's when asked for."""
    _, run = handshake_runs
    acc = econ.measured_accelerator(run, HS, "ecdsa", 500)
    (s,) = [s for s in run.summaries.values() if s.cell.configuration == "ecdsa"]
    point = run.analysis.workloads.point_of(s.cell.key)
    assert acc.host_cpu_ns_per_op == point.server_cpu_ns_per_tx == pytest.approx(339_000, rel=1e-5)
    assert "server CPU" in acc.measured_note and "one session count" in acc.measured_note
    client = econ.measured_accelerator(run, HS, "ecdsa", 500, side="client")
    assert client.host_cpu_ns_per_op == point.client_cpu_ns_per_tx
    with pytest.raises(EconomicsError, match="not kernel|unknown side|measured"):
        econ.measured_accelerator(run, HS, "ecdsa", 500, side="kernel")


def test_cli_plan_with_an_accelerator_measured_in_the_run(cli, econ_store):
    res = cli("plan", "1", "--op", "rsa2048-sign", "--configuration", "old", "--rate", "9.6",
              "--core-price-per-year", "1000", "--accel-from", "new", "--accel-price-per-year", "500",
              "--json", "--store", econ_store)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    (o,) = doc["offload"]
    assert o["accelerator"]["measured_from"] == "new"
    assert o["accelerator"]["ops_per_s_per_unit"] == pytest.approx(1e9 / (3 * MS))
    assert "--accel-from new" in doc["command"] and "--accel-ops-per-s" not in doc["command"]
    text = cli("plan", "1", "--op", "rsa2048-sign", "--configuration", "old", "--rate", "9.6",
               "--core-price-per-year", "1000", "--accel-from", "new", "--accel-price-per-year", "500",
               "--store", econ_store).out
    assert "measured in run 1, configuration 'new'" in text


@pytest.mark.parametrize("args, words", [
    (["--accel-from", "new", "--accel-ops-per-s", "460", "--accel-price-per-year", "500"], "leave out --accel-ops-per-s"),
    (["--accel-from", "new"], "needs --accel-price-per-year"),
])
def test_cli_accel_from_refuses_typed_figures_and_needs_a_price(cli, econ_store, args, words):
    res = cli("plan", "1", "--op", "rsa2048-sign", "--configuration", "old", "--rate", "9.6",
              "--core-price-per-year", "1000", *args, "--store", econ_store)
    assert_one_line_error(res, words)
