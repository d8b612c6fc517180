"""Economics: every figure checked against a hand computation written beside it.

The worked example of docs/methodology.md ("Economics"): 9.6 RSA-2048 CRT operations per second
at 13 ms of CPU each cost 12.5 % (≈ 13 %) of a core; after a library upgrade to 3 ms, 2.9 %
(≈ 3 %). Intervals are t intervals (the study's method), never the range of the repetitions.
"""

import math

import numpy as np
import pytest
from scipy import stats as sp

from conftest import assert_one_line_error
from cryptoperf import economics as econ
from cryptoperf.errors import EconomicsError, UsageError
from cryptoperf.store import Store
from cryptoperf.stored import load_run
from stored_runs import econ_run

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
    assert econ.saving_per_year(101, 1.5 * MS, acc, 1000) == pytest.approx(-48.5)
    assert econ.saving_per_year(134, 1.5 * MS, acc, 1000) == pytest.approx(1)
    for rate in np.arange(be.rate_per_s + 0.01, 2000, 0.37):  # positive at every rate above
        assert econ.saving_per_year(rate, 1.5 * MS, acc, 1000) > 0, rate


@pytest.mark.parametrize("cpu_ms, a, p, m", [(13, 460, 500, 1), (1.5, 100, 100, 1), (2, 50, 70, 2),
                                            (0.5, 1000, 100, 3), (7, 10, 69, 1)])
def test_break_even_matches_brute_force(cpu_ms, a, p, m):
    acc = econ.Accelerator(a, p, min_units=m)
    be = econ.break_even(cpu_ms * MS, acc, 1000)
    rates = np.linspace(0.001, be.rate_per_s * 4 + 5 * a, 40001)
    paying = np.array([econ.saving_per_year(r, cpu_ms * MS, acc, 1000) > 0 for r in rates])
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
    assert res.cells[0]["configuration"] == "old" and res.change is None and res.offload == []


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
    assert "change old → new at 9.6 ops/s: 0.125 → 0.0288 cores, -0.096 cores (-76.9 %" in res.out


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
    (["--op", "rsa", "--configuration", "old", "--rate", "abc"], ["'abc' is not a valid float"]),
    (["7", "--op", "rsa", "--configuration", "old", "--rate", "1"], ["no run 7 in store"]),
    (["seven", "--op", "rsa", "--configuration", "old", "--rate", "1"], ["run id must be a number or 'latest'"]),
])
def test_cli_plan_errors_are_one_line(cli, econ_store, args, fragments):
    assert_one_line_error(cli("plan", *args, "--store", econ_store), *fragments)
