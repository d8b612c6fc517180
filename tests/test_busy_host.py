"""A busy host: a constant other load is shared by every configuration of a block and re-runs
nothing; a spike above it, or steal above the limit, re-runs that repetition
(``run.disturbance``); a study started on a busy host says so once."""

import json
import pickle
from types import SimpleNamespace

import pytest

from conftest import TWO_CONFIG_STUDY
from cryptoperf import hostinfo
from cryptoperf.model import Cell, OK, Outcome, Repetition
from cryptoperf.run.disturbance import Limits, constant_load

WALL_NS = 10_000_000


def result(other_pct, cpus=2, steal_pct=0.0):
    """A worker result of one single-threaded repetition on ``cpus`` CPUs during which other work
    kept ``other_pct`` % of all CPUs busy and the hypervisor stole ``steal_pct`` %."""
    total = 100 * cpus
    own_ticks = total / cpus  # one thread busy all the window
    return SimpleNamespace(total_ticks=total, steal_ticks=round(steal_pct * total / 100),
                           busy_ticks=round(own_ticks + other_pct * total / 100), wall_ns=WALL_NS,
                           cpu_ns_total=WALL_NS, server=None, device_process_cpu_ns=None, peer_process_cpu_ns=None)


def judge_all(rule, loads, cpus=2):
    return [rule.judge(result(x, cpus)) for x in loads]


def test_a_token_daemons_cpu_is_the_measurements_own_not_other_load():
    """A token behind a daemon keeps a second CPU busy for the worker: counted as its own work
    (device_process_cpu_ns), not as other load on the host."""
    r = result(other_pct=40, cpus=2)
    assert hostinfo.other_load_pct(r, 2) == pytest.approx(40, abs=1)
    daemon = SimpleNamespace(**{**vars(r), "device_process_cpu_ns": int(0.8 * WALL_NS)})  # 80 % of one CPU: 40 % of two
    assert hostinfo.other_load_pct(daemon, 2) == pytest.approx(0, abs=1)
    # so is a workload's own client-side process (ike-sa's initiator daemon)
    peer = SimpleNamespace(**{**vars(r), "peer_process_cpu_ns": int(0.8 * WALL_NS)})
    assert hostinfo.other_load_pct(peer, 2) == pytest.approx(0, abs=1)


def test_constant_load_measured_before_the_study_disturbs_nothing():
    rule = Limits(10.0, 25.0, level_pct=50.0).rule(2)  # one of two CPUs busy before the study
    assert judge_all(rule, [50, 48, 53, 50, 51, 49, 50, 52]) == [""] * 8
    assert rule.steady_level() == pytest.approx(50, abs=3)


def test_within_the_band_of_the_level_is_not_disturbed_a_spike_above_it_is():
    rule = Limits(10.0, 25.0, level_pct=25.0).rule(4)  # one of four CPUs
    assert judge_all(rule, [25, 26, 45], cpus=4) == ["", "", ""]  # 45: 20 points above, within 25
    why = rule.judge(result(75, cpus=4))  # two more CPUs taken: a spike
    assert "other load 75 % of the CPUs" in why and "above its steady 25 %" in why
    # the spike does not become the level: the next repetition at the level is kept
    assert rule.judge(result(25, cpus=4)) == "" and rule.steady_level() == pytest.approx(25, abs=1)


def test_steal_above_the_limit_is_disturbed_under_a_constant_load_too():
    rule = Limits(10.0, 25.0, level_pct=50.0).rule(2)
    assert rule.judge(result(50)) == ""
    assert rule.judge(result(50, steal_pct=15)) == "steal 15.0 % > 10 %"


def test_a_quiet_host_keeps_the_plain_limit():
    rule = Limits(10.0, 25.0, level_pct=0.0).rule(2)
    assert rule.judge(result(20)) == ""
    assert rule.judge(result(30)) == "other load 30 % of the CPUs > 25 %"
    assert Limits(10.0, 25.0).rule(2).judge(result(30)) == "other load 30 % of the CPUs > 25 %"  # no level


def test_a_load_that_starts_mid_study_becomes_the_level_after_a_few_repetitions():
    rule = Limits(10.0, 25.0, level_pct=0.0).rule(2)
    got = judge_all(rule, [0, 0, 50, 50, 50, 50, 50])
    # a majority of the recent window must be at the new load before it is the level
    assert [bool(w) for w in got] == [False, False, True, True, True, False, False]
    assert rule.steady_level() == 50


def test_a_load_that_drops_is_not_a_disturbance():
    rule = Limits(10.0, 25.0, level_pct=50.0).rule(2)
    assert judge_all(rule, [50, 50, 0, 0, 0, 0, 0]) == [""] * 7


def test_limits_travel_to_a_ray_node_and_each_rule_starts_afresh():
    limits = pickle.loads(pickle.dumps(Limits.of(SimpleNamespace(max_steal_pct=10.0, max_other_load_pct=25.0))))
    a, b = limits.rule(2), limits.rule(2)
    a.judge(result(50)), a.judge(result(50))
    assert a.steady_level() == 50 and b.steady_level() is None


def test_busy_means_the_level_before_is_above_the_limit():
    assert Limits(10.0, 25.0, 50.0).busy() and not Limits(10.0, 25.0, 20.0).busy() and not Limits(10.0, 25.0).busy()


def _outcome(other, block=1, disturbed="", superseded=False):
    cell = Cell(configuration="A", backend="openssl", label="hash", op="sha256", params={}, size_bytes=1024)
    o = Outcome(Repetition(cell, block), OK, result=result(other))
    o.disturbed, o.superseded = disturbed, superseded
    return o


def test_constant_load_counts_the_kept_repetitions_above_the_limit():
    host = {"logical_cpus": 2}
    outcomes = [_outcome(50, 0), _outcome(52), _outcome(48), _outcome(90, disturbed="x", superseded=True),
                _outcome(10), _outcome(95, disturbed="spike")]
    c = constant_load(outcomes, 25.0, host)
    assert (c.repetitions, c.level_pct, c.cpus) == (2, pytest.approx(50, abs=1), pytest.approx(1.0, abs=0.02))
    assert constant_load([_outcome(10)], 25.0, host) is None


# --------------------------------------------------------------------------- whole studies


def busy_before(monkeypatch, pct):
    """The host checks (and the level before the study) read ``pct`` % busy, no steal."""
    monkeypatch.setattr(hostinfo._StatWindow, "sample", classmethod(lambda cls: (0.0, pct)))


def run_study(cli, write_study, tmp_path, reps=3, limit=10):
    text = TWO_CONFIG_STUDY.format(reps=reps, timeout=5).replace(
        "[[configuration]]", f"max_other_load_pct = {limit}\n\n[[configuration]]", 1)
    res = cli("study", write_study(text), "--out", tmp_path / "out", "--no-report")
    doc = json.loads(sorted((tmp_path / "out").glob("t-*.json"))[-1].read_text())
    return res, doc


def measured(doc):
    return [r for r in doc["repetitions"] if r["block"] > 0 and not r["superseded"]]


BUSY_LINE = ("host busy: 0.4 of 2 CPUs used by other processes (measured over 0.25 s before the study); "
             "comparisons stay paired, a repetition is re-run only when the load departs from this level")


def test_a_study_on_a_constantly_busy_host_re_runs_nothing_and_says_so_once(cli, write_study, fake_worker,
                                                                           tmp_path, monkeypatch):
    busy_before(monkeypatch, 20.0)
    fake_worker({"other_load_pct": 20.0})  # every repetition beside 20 % of the CPUs, limit 10 %
    res, doc = run_study(cli, write_study, tmp_path)
    assert res.code == 0, res.err
    assert [r for r in doc["repetitions"] if r["superseded"] or r["disturbed"]] == []
    assert len(measured(doc)) == 6
    assert res.err.count("host busy:") == 1 and BUSY_LINE in res.err
    assert "host: other load" not in res.err  # the busy line replaces the check's warning
    assert "6 repetition(s) ran beside a steady other load of 20 % of the CPUs (~0.4 CPUs)" in res.out
    assert "were disturbed" not in res.out


def test_a_single_spike_on_a_busy_host_re_runs_exactly_that_repetition(cli, write_study, fake_worker,
                                                                     tmp_path, monkeypatch):
    busy_before(monkeypatch, 20.0)
    fake_worker({"other_load_pct": 20.0, "other_load_spike": {"B#2": 50.0}})
    res, doc = run_study(cli, write_study, tmp_path)
    (again,) = [r for r in doc["repetitions"] if r["superseded"]]
    assert (again["configuration"], again["block"]) == ("B", 2)
    assert "other load 50 % of the CPUs, 30 points above its steady 20 %" in again["disturbed"]
    assert [r for r in measured(doc) if r["disturbed"]] == []  # its re-run shared the level again
    assert "1 repetition(s) were disturbed" in res.out


def test_a_quiet_host_prints_no_busy_line_and_learns_a_load_that_starts(cli, write_study, fake_worker,
                                                                        tmp_path, monkeypatch):
    busy_before(monkeypatch, 0.0)
    fake_worker({"other_load_pct": 20.0})  # quiet before the study, busy from its first repetition
    res, doc = run_study(cli, write_study, tmp_path)
    assert "host busy" not in res.err
    superseded = [r for r in doc["repetitions"] if r["superseded"]]
    flagged = [r for r in measured(doc) if r["disturbed"]]
    # transient until shown steady: the first judged repetition is re-run and its re-run flagged;
    # from then on the load is the level and nothing more is re-run
    assert len(superseded) == 1 and len(flagged) == 1 and flagged[0]["attempt"] == 2
    assert (superseded[0]["configuration"], superseded[0]["block"]) == (flagged[0]["configuration"], 1)
    assert "1 repetition(s) were disturbed" in res.out


def test_a_neighbour_whose_share_depends_on_the_group_is_steady_in_each_group():
    """A nice'd busy loop beside a 2-CPU study: it gets a whole CPU (50 %) beside one-connection
    cells and almost nothing (1 %) beside four-connection ones, the groups interleaved as blocks
    run them. Judged per group as well, nothing is a spike; a real spike in either group is."""
    rule = Limits(10.0, 25.0, level_pct=50.0).rule(2)
    c1, c4 = ("aws-lc", "phase 1 @ c=1", None), ("aws-lc", "phase 1 @ c=4", None)
    seq = [(c4, 1), (c4, 2), (c1, 50), (c4, 1), (c1, 49), (c1, 51), (c4, 2), (c4, 1), (c1, 50), (c1, 50)]
    assert [rule.judge(result(x), g) for g, x in seq] == [""] * len(seq)
    assert rule.steady_level(c1) == pytest.approx(50, abs=1) and rule.steady_level(c4) == pytest.approx(1, abs=1)
    assert rule.judge(result(95), c1).startswith("other load 95 % of the CPUs, 45 points above its steady 50 %")
    assert rule.judge(result(60), c4).startswith("other load 60 % of the CPUs")
    # with one study-wide level only (no group), the one-connection cells are called spikes
    flat = Limits(10.0, 25.0, level_pct=50.0).rule(2)
    assert sum(bool(flat.judge(result(x))) for _, x in seq) >= 3
