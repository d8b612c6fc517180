"""A study's time estimate (``PreparedStudy.estimated_seconds``) against its wall clock, on the fake
worker: a fleet job's latency model makes most of its time waiting, which the estimate takes
from the worker's plan (``check``'s ``planned_wait_s``, beside ``planned_work_s``); and what a first run builds before it
measures (OpenSSL's FIPS provider, a setup worker build) is named and counted. The shipped
studies' estimates against real runs: docs/methodology.md, "Time estimates"."""

from __future__ import annotations

import time

import pytest

from cryptoperf import builds, engine, providerbuild
from cryptoperf.schedule import JobTime

#: Waits dominate: 20 targets on 4 lanes, each waiting 3 round trips of 100 ms (connect 2,
#: report 1): 5 rounds of 0.3 s = 1.5 s a repetition; the calibration's 10 targets, 0.9 s.
WAITING = """\
[study]
name = "waiting"
baseline = "base"
backends = ["aws-lc"]
repetitions = 3
verdict_on = "by_load"
seed = 1

[[configuration]]
name = "base"
cert = "rsa2048"

[[configuration]]
name = "big-key"
cert = "rsa4096"

[[operation]]
label = "audit"
op = "fleet-job"
params = { job = "audit", cert = "{cert}", phases = "connect,report", cap = 4, rtt_ms = 100 }
loads = ["targets:20"]
"""


def test_a_waiting_jobs_estimate_is_within_30_percent_of_its_wall_clock(fake_worker, write_study, tmp_path):
    fake_worker({"fleet_sleeps": True})
    plan = engine.prepare_study(str(write_study(WAITING)))
    # the worker's plan, per cell: calibration, each repetition (its 0.3 s setup, its waits)
    assert set(plan.job_times.values()) == {(JobTime(0.3, 0.9), JobTime(0.3, 1.5))}, plan.job_times
    estimate = plan.estimated_seconds()
    started = time.monotonic()
    run = engine.run_study(plan, store=tmp_path / "runs.sqlite", out_dir=tmp_path / "out", reports=False,
                           check_host=False)
    took = time.monotonic() - started
    assert all(o.status == "ok" for o in run.outcomes), [o.reason for o in run.outcomes]
    # 2 cells × (0.9 + 3 × 1.5 s) of waiting alone: 10.8 s; without the waits it would be 8.8 s
    assert took > 10.8
    print(f"estimate {estimate:.1f} s, took {took:.1f} s")
    assert abs(estimate / took - 1) <= 0.30, (estimate, took)


def test_a_job_without_a_latency_model_plans_no_wait(fake_worker, write_study):
    fake_worker()
    plan = engine.prepare_study(str(write_study(WAITING.replace(", rtt_ms = 100", ""))))
    assert set(plan.job_times.values()) == {(JobTime(0.3, 0.0), JobTime(0.3, 0.0))}
    assert plan.first_builds == {}


FIPS_SERVER = """\
[study]
name = "fips-server"
baseline = "default"
backends = ["openssl"]
repetitions = 3

[[configuration]]
name = "default"
openssl_conf = ""

[[configuration]]
name = "fips"
openssl_conf = "{openssl_fips_conf}"

[[operation]]
op = "tls-handshake"
server = "openssl s_server -accept {port} -cert {cert_file} -key {key_file} -www"
server_env = { OPENSSL_CONF = "{openssl_conf}" }
"""


def test_a_first_build_is_named_and_counted_once(fake_worker, write_study, monkeypatch):
    fake_worker()
    monkeypatch.setattr(providerbuild, "ready", lambda: False)
    plan = engine.prepare_study(str(write_study(FIPS_SERVER)), dry_run=True)
    assert plan.first_builds == {providerbuild.WHAT: providerbuild.BUILD_SECONDS}
    monkeypatch.setattr(providerbuild, "ready", lambda: True)
    built = engine.prepare_study(str(write_study(FIPS_SERVER)), dry_run=True)
    assert built.first_builds == {}
    assert plan.estimated_seconds() - built.estimated_seconds() == pytest.approx(providerbuild.BUILD_SECONDS)


def test_a_missing_setup_build_is_counted_in_a_dry_run(fake_worker, write_study, monkeypatch, tmp_path):
    fake_worker()
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(tmp_path / "data"))  # nothing built there
    monkeypatch.delenv(builds.get(builds.OPENSSL_NEXT).env_var, raising=False)
    text = WAITING.replace('cert = "rsa4096"', 'cert = "rsa4096"\nlibrary = "openssl@3.6"').replace(
        '["aws-lc"]', '["openssl"]')
    plan = engine.prepare_study(str(write_study(text)), dry_run=True)
    setup = builds.get(builds.OPENSSL_NEXT).setup
    assert plan.first_builds == {f"the {builds.OPENSSL_NEXT} worker build": setup.seconds}
