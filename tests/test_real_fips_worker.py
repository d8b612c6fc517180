"""End to end against the real FIPS worker, cryptoperf-worker-fips (the AWS-LC FIPS module).

Skipped, with the reason, where the FIPS build is not installed — except when
CRYPTOPERF_REQUIRE_FIPS=1 (set by .ci/run, which installs it), where its absence fails; the
tests that also need the default worker likewise under CRYPTOPERF_REQUIRE_WORKER=1
(conftest.need_real_worker). Sub-second budgets; nothing here asserts on how fast anything is.
"""

import json

import pytest

from conftest import need_real_worker, run_subprocess
from cryptoperf import builds, cpumask
from cryptoperf.run.worker import fetch_hello
from real_workers import find

FIPS, WHY = find(builds.FIPS)
DEFAULT, WHY_DEFAULT = find(builds.DEFAULT)


@pytest.fixture(autouse=True)
def _need_the_fips_worker():
    need_real_worker(FIPS, WHY, require="CRYPTOPERF_REQUIRE_FIPS")


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
    need_real_worker(DEFAULT, WHY_DEFAULT)
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
    need_real_worker(DEFAULT, WHY_DEFAULT)
    path = write_study("""\
[study]
name = "fips-small"
baseline = "off"
backends = ["aws-lc"]
repetitions = 3
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
    assert all(r["status"] == "ok" for r in doc["repetitions"]), [r["reason"] for r in doc["repetitions"]]
    fips = {(r["configuration"], r["result"]["fips"], r["build"]) for r in doc["repetitions"]}
    assert fips == {("off", False, "default"), ("on", True, "fips")}
    for name in ("off", "on"):  # calibration, then 3 blocks (besides re-runs of disturbed ones)
        assert sorted(r["block"] for r in doc["repetitions"] if r["configuration"] == name and not r["superseded"]) == [0, 1, 2, 3]
    # both builds' workers run under baseline's fixed-width value, and each build's library
    # reports the vector its own unmasked hello did (the worker checks cpu_vector_unmasked)
    vectors = {"default": fetch_hello(DEFAULT).unmasked_vectors(), "fips": fetch_hello(FIPS).unmasked_vectors()}
    for r in doc["repetitions"]:
        caps = r["result"]["capabilities"]
        assert caps["env"] == cpumask.MASKS["baseline"], caps
        assert caps["maskable"] is True and caps["openssl_ia32cap"] == vectors[r["build"]]["aws-lc"], caps
    assert "aws-lc-fips-sys" in doc["host"]["builds"]["fips"]["libraries"]["aws-lc"]["library_version"]
    (delta,) = doc["deltas"]
    assert delta["status"] == "ok" and delta["build"] == "fips" and delta["blocks"] == 3
    assert delta["latency"]["ci_low"] <= delta["latency"]["ratio"] <= delta["latency"]["ci_high"]
    assert delta["verdict"]["kind"] in ("slower", "faster", "equivalent", "inconclusive")
