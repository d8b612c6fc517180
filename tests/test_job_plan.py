"""The fleet-job planner (``plan --targets N --deadline D``) on measured figures: Little's law per
slice, the CPU bound, the prediction interval, the extrapolations it names, and its inputs'
errors. The check against a measured run at another number of slices is in test_real_fleet.py.
"""

from __future__ import annotations

import math

import pytest

from cryptoperf import stats
from cryptoperf.economics import jobs
from cryptoperf.economics.cost import EconomicsError
from cryptoperf.report import job_plan

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests


def measured(target_s=(47.0, 46.0, 48.0), cpu_ms=(20.0, 21.0, 19.0), targets=1000, slices=1, cap=20, cores=2,
             in_flight=20) -> jobs.Measured:
    """A level as a study would have measured it: per block, the mean time a target was in
    flight (s) and the management CPU per target (ns)."""
    return jobs.Measured("fips", f"audit @ {targets} targets", targets, slices, cap, in_flight, cores,
                         {b: t for b, t in enumerate(target_s, 1)}, {b: c * 1e6 for b, c in enumerate(cpu_ms, 1)})


def test_littles_law_sets_the_slices_for_a_deadline():
    """500 servers in 10 minutes at 47 s a target and cap 20: one slice does 20/47 targets a
    second, 1175 s for the job; two do it in 587 s — the estimate meets 600 s, and the slices
    whose whole prediction interval meets it are the fewest whose upper end is ≤ 600 s. With 20 ms
    of CPU per target the CPU is almost idle: both limits stay within 1 % of Little's law alone."""
    m = measured()
    p = jobs.plan_job(m, 500, deadline_s=600)
    t = [47.0, 46.0, 48.0]
    geo = math.exp(sum(map(math.log, t)) / 3)
    assert p.slices_point == 2
    for k in range(1, 5):
        e = jobs.between(*(jobs.predict(v) for v in jobs.job_times(m, 500, k).values()))
        if e.high <= 600:
            assert p.slices == k
            break
    assert p.on_slices == p.slices
    assert p.job_s.value == pytest.approx(500 * geo / (p.slices * 20), rel=0.01)
    lo, hi = p.by_limit["random"], p.by_limit["lockstep"]
    assert lo.value <= p.job_s.value <= hi.value and p.job_s.low == lo.low and p.job_s.high == hi.high
    assert p.bound == "latency" and p.cpu_busy < 0.05
    # the cores the CPU needs: 500 targets × 20 ms in 600 s
    assert p.cores_needed.value == pytest.approx(500 * 0.02 / 600, rel=0.02)
    assert p.extrapolated == [f"{p.slices * 20} targets in flight at once, more than the 20 measured (1 slice(s) × "
                              "cap 20): how T grows with them is the model's (between its two limits), and the CPU "
                              "per target is assumed not to grow"]


def test_the_model_gives_back_what_was_measured_at_the_measured_point():
    """Calibrated on the measured jobs, either limit predicts each measured job's own time at the
    measured number of slices: the unexplained delay absorbs what the waits and CPU do not."""
    m = measured(target_s=(0.52, 0.50, 0.55), cpu_ms=(30.0, 28.0, 33.0), targets=100, cap=10, in_flight=10)
    m = jobs.Measured(**{**m.__dict__, "wait_s": {1: 0.4, 2: 0.4, 3: 0.4},
                         "agent_cpu_ns": {1: 20e6, 2: 21e6, 3: 19e6}})
    for limit, j in jobs.job_times(m, 100, 1).items():
        assert j == pytest.approx([100 * t / 10 for t in (0.52, 0.50, 0.55)], rel=1e-6), limit
    # twice the slices: more CPU contention, so each limit's T grows, lockstep's the most
    two = jobs.job_times(m, 100, 2)
    half = [100 * t / 20 for t in (0.52, 0.50, 0.55)]
    assert all(a > b for a, b in zip(two["random"], half))
    assert all(a > b for a, b in zip(two["lockstep"], two["random"]))


def test_the_interval_is_a_prediction_for_one_more_job():
    values = [10.0, 11.0, 10.5, 9.8]
    e = jobs.predict(values)
    logs = [math.log(v) for v in values]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = stats.t_quantile(0.95, 3) * sd * math.sqrt(1 + 1 / 4)
    assert (e.low, e.value, e.high) == pytest.approx((math.exp(mean - half), math.exp(mean), math.exp(mean + half)))
    assert jobs.predict([5.0]).low is None


def test_the_management_cpu_bounds_the_job_whatever_the_slices():
    """2 s of CPU per target on 2 cores: at most one target a second (20 in flight took 20 s
    each), 500 s for 500 targets — no number of slices finishes in 5 minutes, and the answer says
    the CPU bounds it."""
    m = measured(target_s=(20.5, 20.4, 20.6), cpu_ms=(2000.0, 2000.0, 2010.0))
    p = jobs.plan_job(m, 500, deadline_s=300)
    assert p.slices is None and p.slices_point is None and p.bound == "cpu" and p.cpu_busy > 0.85
    assert p.by_limit["random"].value == pytest.approx(500 * 20.5 / 20, rel=0.01)  # one slice, as measured
    assert p.job_s.value >= 500 * 2.0 / 2
    assert p.cores_needed.value == pytest.approx(500 * 2.0033 / 300, rel=0.01)
    text = job_plan.render(p, 7, "text")
    assert "no number of slices meets it: the management CPU bounds the job" in text
    # with more cores it fits
    assert jobs.plan_job(m, 500, deadline_s=300, cores=8).slices_point is not None


def test_a_rate_is_a_deadline_for_the_targets_and_slices_alone_give_the_time():
    m = measured()
    by_rate = jobs.plan_job(m, 500, rate_per_min=50)
    by_deadline = jobs.plan_job(m, 500, deadline_s=600)
    assert (by_rate.slices, by_rate.job_s) == (by_deadline.slices, by_deadline.job_s)
    fixed = jobs.plan_job(m, 500, slices=3)
    assert fixed.on_slices == 3 and fixed.slices is None
    assert fixed.job_s.value == pytest.approx(jobs.predict([500 * t / 60 for t in (47.0, 46.0, 48.0)]).value,
                                              rel=0.01)
    assert "on 3 slice(s)" in job_plan.render(fixed, 7, "text")
    # few targets: every one in flight at once, the job is one target's time
    few = jobs.plan_job(m, 10, slices=1)
    assert few.bound == "one target"
    assert few.job_s.value == pytest.approx(jobs.predict([47.0, 46.0, 48.0]).value, rel=0.01)


def test_every_extrapolation_is_named_and_none_within_the_measured_range():
    m = measured(slices=2, in_flight=20, targets=1000)
    inside = jobs.plan_job(m, 800, slices=2)
    assert inside.extrapolated == []
    assert "within what was measured" in job_plan.render(inside, 1, "text")
    outside = jobs.plan_job(m, 5000, slices=4, cores=16)
    assert len(outside.extrapolated) == 3
    assert "80 targets in flight at once, more than the 40 measured" in outside.extrapolated[0]
    assert "5000 targets, more than the 1000" in outside.extrapolated[1]
    assert "16 management cores with the targets on machines of their own, where the run had 2" in outside.extrapolated[2]
    assert outside.targets_apart and "a management server of 16 core(s), targets apart" in job_plan.render(outside, 1, "text")
    doc = outside.as_dict()
    assert doc["kind"] == "job-plan" and doc["on_slices"] == 4 and len(doc["extrapolated"]) == 3
    assert doc["measured"]["target_s"] == [47.0, 46.0, 48.0]


@pytest.mark.parametrize("text, seconds", [("10m", 600), ("90s", 90), ("1.5h", 5400), ("600", 600), ("2 min", 120)])
def test_durations(text, seconds):
    assert jobs.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, per_min", [("50/min", 50), ("50", 50), ("1.2k/min", 1200), ("2/s", 120), ("3000/h", 50)])
def test_rates_of_targets(text, per_min):
    assert jobs.parse_targets_rate(text) == pytest.approx(per_min)


@pytest.mark.parametrize("call, message", [
    (lambda: jobs.parse_duration("soon"), "--deadline 'soon' is not a duration"),
    (lambda: jobs.parse_duration("0s"), "is not a duration"),
    (lambda: jobs.parse_targets_rate("fast"), "--rate 'fast' is not a rate of targets"),
    (lambda: jobs.plan_job(measured(), 0, deadline_s=60), "--targets must be at least 1"),
    (lambda: jobs.plan_job(measured(), 10), "give --deadline"),
    (lambda: jobs.plan_job(measured(), 10, deadline_s=60, rate_per_min=5), "not both"),
    (lambda: jobs.plan_job(measured(), 10, slices=0), "--slices must be at least 1"),
])
def test_bad_inputs_are_one_line(call, message):
    with pytest.raises(EconomicsError) as e:
        call()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_saturation_says_where_the_cpu_takes_over():
    """0.4 s of waiting and 5 ms of host CPU per target on 2 CPUs: alone a target takes about
    0.405 s, and the CPU sets the pace from about 2 × 0.405 / 0.005 = 162 targets in flight; 20
    in flight keep it about 5 % busy. With 60 ms per target the knee falls to about 20
    (2 × one target alone / 0.06): 20 in flight are CPU-bound (0.7 s a target, the CPU 86 % busy)."""
    light = measured(target_s=(0.405, 0.406, 0.404), cpu_ms=(2.5, 2.5, 2.5), targets=100)
    light = jobs.Measured(**{**light.__dict__, "wait_s": {1: 0.4, 2: 0.4, 3: 0.4},
                             "agent_cpu_ns": {1: 2.5e6, 2: 2.5e6, 3: 2.5e6}})
    s = jobs.saturation(light)
    assert s.in_flight == 20 and not s.cpu_bound
    assert s.alone_s == pytest.approx(0.405, rel=0.01)
    assert s.knee_in_flight == pytest.approx(2 * 0.405 / 0.005, rel=0.02)
    assert s.cpu_busy == pytest.approx(20 / 0.405 * 0.005 / 2, rel=0.02)
    heavy = jobs.Measured(**{**light.__dict__, "target_s": {1: 0.69, 2: 0.71, 3: 0.7},
                             "cpu_ns": {1: 30e6, 2: 30e6, 3: 30e6}, "agent_cpu_ns": {1: 30e6, 2: 30e6, 3: 30e6}})
    h = jobs.saturation(heavy)
    assert h.cpu_bound and h.knee_in_flight < 25 and h.cpu_busy == pytest.approx(20 / 0.7 * 0.06 / 2, rel=0.02)


def test_saturation_names_the_busier_side_when_the_sides_were_pinned_apart():
    """One slice on one CPU, the agents on the other: 1 ms of management CPU and 9 ms of the
    targets' per target at 40 targets a second keep the targets' CPU 36 % busy and the
    management's 4 % — the busier side is the one given, and its knee the smaller."""
    m = measured(target_s=(0.5, 0.5, 0.5), cpu_ms=(1.0, 1.0, 1.0), targets=100)
    m = jobs.Measured(**{**m.__dict__, "wait_s": {1: 0.45, 2: 0.45, 3: 0.45},
                         "agent_cpu_ns": {1: 9e6, 2: 9e6, 3: 9e6}, "apart": (1, 1)})
    s = jobs.saturation(m)
    assert s.busiest == "targets" and s.cpu_busy == pytest.approx(40 * 0.009, rel=1e-6)
    assert s.knee_in_flight == pytest.approx(s.alone_s / 0.009, rel=1e-6)
    shared = jobs.saturation(jobs.Measured(**{**m.__dict__, "apart": None}))
    assert shared.busiest == "host" and shared.cpu_busy == pytest.approx(40 * 0.010 / 2, rel=1e-6)


def test_another_cap_is_planned_and_a_larger_one_named():
    """Slices of cap 10 where 20 were measured: half the targets in flight per slice, so about
    twice the job's time on as many slices (latency-bound), inside the measured range; cap 40 is
    named as more in flight than measured."""
    m = measured()
    same = jobs.plan_job(m, 1000, slices=1)
    half = jobs.plan_job(m, 1000, slices=1, cap=10)
    assert half.cap == 10 and half.job_s.value == pytest.approx(2 * same.job_s.value, rel=0.01)
    assert half.extrapolated == [] and "cap 10 per slice" in job_plan.render(half, 1, "text")
    assert "40 targets in flight at once" in jobs.plan_job(m, 1000, slices=1, cap=40).extrapolated[0]
    with pytest.raises(EconomicsError, match="--cap must be at least 1"):
        jobs.plan_job(m, 1000, slices=1, cap=0)
