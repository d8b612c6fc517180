"""End to end against the real FIPS worker, cryptoperf-worker-fips (the AWS-LC FIPS module).

Skipped, with the reason, where the FIPS build is not installed — except when
CRYPTOPERF_REQUIRE_FIPS=1 (set by .ci/run, which installs it), where its absence fails.
Sub-second budgets; nothing here asserts on how fast anything is.
"""

import json
import os
from pathlib import Path

import pytest

from conftest import run_subprocess
from cryptoperf import builds, worker_path
from cryptoperf.errors import WorkerError, WorkerNotFound
from cryptoperf.run.worker import fetch_hello


def _worker(build: str) -> tuple[Path | None, str]:
    try:
        path = worker_path.find_worker(build)
        fetch_hello(path, timeout_s=30)
        return path, ""
    except (WorkerNotFound, WorkerError) as e:
        return None, str(e)


FIPS, WHY = _worker(builds.FIPS)
DEFAULT, _ = _worker(builds.DEFAULT)


@pytest.fixture(autouse=True)
def _need_the_fips_worker():
    if FIPS is None:
        if os.environ.get("CRYPTOPERF_REQUIRE_FIPS") == "1":
            pytest.fail(f"CRYPTOPERF_REQUIRE_FIPS=1 but the FIPS worker is unavailable: {WHY}")
        pytest.skip(f"the FIPS worker is unavailable: {WHY}")


@pytest.fixture
def env(tmp_path):
    e = {"CRYPTOPERF_WORKER_FIPS": str(FIPS), "HOME": str(tmp_path)}
    if DEFAULT is not None:
        e["CRYPTOPERF_WORKER"] = str(DEFAULT)
    return e


def test_the_fips_worker_reports_fips_mode_on():
    hello = fetch_hello(FIPS, detail=True)
    assert hello.raw["build"] == "fips"
    by = {b["backend"]: b for b in hello.backends}
    assert by["aws-lc"]["fips"] is True
    assert "aws-lc-fips-sys" in by["aws-lc"]["library_version"]
    for backend in ("ring", "rustcrypto"):
        assert by[backend]["fips"] is False
        assert all(o["status"] == "unsupported" and "no FIPS mode" in o["reason"] for o in by[backend]["ops"])
    # OpenSSL: FIPS mode with the host's provider, or every operation refused with one reason.
    if not by["openssl"]["fips"]:
        reasons = {o["reason"] for o in by["openssl"]["ops"]}
        assert len(reasons) == 1 and "FIPS provider" in reasons.pop()


def test_the_default_worker_reports_fips_mode_off():
    if DEFAULT is None:
        pytest.skip("no default worker")
    hello = fetch_hello(DEFAULT)
    assert hello.raw["build"] == "default"
    assert all(b["fips"] is False for b in hello.backends)


def test_speed_fips_measures_the_fips_module_after_its_known_answer_tests(tmp_path, env):
    ops = ("sha256", "aes-128-gcm-seal", "rsa2048-sign", "ecdsa-p256-verify", "ml-kem-768-encaps")
    args = [a for op in ops for a in ("--op", op)]
    res = run_subprocess("speed", "--fips", "--json", "-b", "aws-lc", "-b", "ring", *args,
                         "--seconds", "0.05", "--warmup", "0.01", "--store", tmp_path / "s.sqlite", env=env)
    assert res.code == 0, res.err
    results = json.loads(res.out)["results"]
    for r in results:
        if r["backend"] == "aws-lc":
            assert r["status"] == "ok", (r["op"], r["reason"])
            assert r["fips"] is True and r["build"] == "fips"
            assert r["validation"]["kat"] == "pass", r["validation"]
        else:
            assert r["status"] == "unsupported" and "no FIPS mode" in r["reason"]


def test_a_fips_study_compares_the_two_builds(tmp_path, env, write_study):
    if DEFAULT is None:
        pytest.skip("no default worker")
    path = write_study("""\
[study]
name = "fips-small"
baseline = "off"
backends = ["aws-lc"]
repetitions = 2
seconds = 0.05
warmup_s = 0.01

[[configuration]]
name = "off"

[[configuration]]
name = "on"
fips = true

[[operation]]
op = "sha256"
sizes = [1024]
""")
    res = run_subprocess("study", path, "--no-report", "--out", tmp_path / "out",
                         "--store", tmp_path / "s.sqlite", env=env)
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    fips = {r["configuration"]: r["result"]["fips"] for r in doc["runs"] if r["status"] == "ok"}
    assert fips == {"off": False, "on": True}
    assert "aws-lc-fips-sys" in doc["host"]["builds"]["fips"]["libraries"]["aws-lc"]["library_version"]
    (delta,) = doc["deltas"]
    assert delta["status"] == "ok" and delta["latency"]["ci_low"] <= delta["latency"]["ratio"]
