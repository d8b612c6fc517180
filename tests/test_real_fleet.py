"""Fleet jobs against the real cryptoperf-worker: a job of 1000 targets with cap 20 runs to the
end without the cap ever exceeded (checked from the recorded timeline), every target's phases
recorded in order, peak RSS and descriptors recorded per process; a target that fails (its agent
closes the connection mid-phase, its certificate comes from another CA) is counted as failed with
its reason, not dropped, and the job goes on; a tampered file is a mismatch; mutual TLS on each
stack; the FIPS module refuses SHA-1 signatures and signs with SHA-256.

Skipped when no built worker answers hello, failed instead under CRYPTOPERF_REQUIRE_WORKER=1.
Nothing here asserts on how fast anything is, only on the shape of what was measured.
"""

from __future__ import annotations

import json

import pytest

from conftest import need_real_worker, run_subprocess
from cryptoperf.result import WorkerResult
from cryptoperf.workloads import fleet
from cryptoperf.run.worker import WorkerClient
from real_workers import find

REAL, WHY = find()


@pytest.fixture(autouse=True)
def _need_the_real_worker():
    need_real_worker(REAL, WHY)


def job(params: dict, backend: str = "aws-lc", worker=None) -> WorkerResult:
    """One fleet-job run request to a fresh real worker; returns its result."""
    with WorkerClient(worker or REAL) as w:
        w.hello()
        return w.run({"type": "run", "id": "t", "backend": backend, "op": "fleet-job", "params": params,
                      "seconds": 1.0, "warmup_s": 0.0}, timeout_s=300)


def rows(result: WorkerResult) -> list[list]:
    return result.extras["fleet"]["records"]["rows"]


def test_a_thousand_targets_with_cap_20_run_to_the_end_within_the_cap():
    r = job({"job": "audit", "load": "targets:1000", "cap": 20})
    assert r.status == "ok", r.reason
    f = r.extras["fleet"]
    assert (f["targets"], f["completed"], f["failed"], r.ops) == (1000, 1000, 0, 1000)
    assert len(rows(r)) == 1000 and sorted(row[0] for row in rows(r)) == list(range(1000))
    # the cap, from the recorded timeline: never more than 20 targets in flight in the slice
    spans = [t.span for t in fleet.decode(r).targets_ if t.span is not None]
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    most, now = 0, 0
    for _, step in events:
        now += step
        most = max(most, now)
    assert 1 < most <= 20, most
    assert fleet.decode(r).most_in_flight() == most
    # every target's phases, in order, each ending before the next starts
    assert f["phases"] == ["connect", "checks", "report"]
    for row in rows(r):
        times = row[3:]
        assert None not in times, row
        assert all(a <= b for a, b in zip(times, times[1:])), row
    # resources per process: peak RSS and descriptors, bounded by the cap, not the targets
    procs = {(p["role"], p["index"]): p for p in f["processes"]}
    assert set(procs) == {("coordinator", 0), ("slice", 0), ("agent", 0), ("agent", 1)}
    for p in procs.values():
        assert p["peak_rss_bytes"] and 1 << 20 < p["peak_rss_bytes"] < 1 << 30, p
        assert p["max_fds"] and p["max_fds"] < 20 + 64, p
        assert p["timeline"], p
    assert procs[("slice", 0)]["max_fds"] >= 20  # the cap's connections were open at once
    assert r.cpu_ns_total > 0 and r.server.cpu_ns > 0
    assert r.validation.checks["negotiated"] == "pass" and r.validation.checks["digests"].startswith("pass")
    assert r.negotiated.version == "TLSv1.3" and r.negotiated.group == "p256"


def test_failing_targets_are_counted_with_their_reasons_and_the_job_goes_on():
    r = job({"job": "appconfig", "load": "targets:40", "cap": 5, "slices": 2,
             "inject_close": "3,17", "inject_bad_cert": "8"})
    assert r.status == "ok", r.reason
    f = r.extras["fleet"]
    assert (f["completed"], f["failed"], r.ops) == (37, 3, 37)
    failures = {x["target"]: x for x in f["failures"]}
    assert set(failures) == {3, 8, 17}
    assert failures[8]["phase"] == "connect" and "UnknownIssuer" in failures[8]["reason"], failures[8]
    for t in (3, 17):  # the agent went away at its first request after the handshake: mid-push
        assert failures[t]["phase"] == "push" and failures[t]["reason"], failures[t]
        assert failures[t]["slice"] == t % 2
    by_target = {row[0]: row for row in rows(r)}
    assert len(by_target) == 40
    assert by_target[3][2] == "failed" and by_target[3][5] is not None and by_target[3][7] is None
    assert by_target[8][2] == "failed" and by_target[8][5] is None  # no push after a failed connect
    assert all(by_target[t][2] == "ok" for t in by_target if t not in failures)
    # targets after the failed ones still ran: the job went on
    assert max(row[-1] for row in rows(r) if row[2] == "ok") > max(by_target[3][3:6])


def test_a_tampered_file_is_a_mismatch_of_that_target_only():
    r = job({"job": "audit", "load": "targets:12", "checks": 16, "inject_tamper": "5"})
    assert r.status == "ok", r.reason
    assert r.extras["fleet"]["mismatches"] == [{"target": 5, "checks": 1}]
    assert r.extras["fleet"]["failed"] == 0


@pytest.mark.parametrize("backend", ["aws-lc", "ring", "openssl"])
def test_each_stack_runs_a_mutual_tls_job(backend):
    r = job({"job": "remediate", "load": "targets:8", "cert": "ecdsa-p256", "item_bytes": 65536}, backend=backend)
    assert r.status == "ok", r.reason
    assert r.extras["fleet"]["completed"] == 8 and r.extras["fleet"]["job_phases"][0]["name"] == "stage"
    assert r.negotiated.signature_scheme.startswith("ecdsa_")
    assert r.validation.checks["signatures"].startswith("pass"), r.validation


def test_a_time_level_and_unknown_params_are_refused_in_one_line():
    from cryptoperf.errors import WorkerRequestError
    with pytest.raises(WorkerRequestError, match="targets:N"):
        job({"load": "closed:4"})
    with pytest.raises(WorkerRequestError, match="unknown job 'deploy'"):
        job({"job": "deploy"})


def test_the_fips_module_refuses_sha1_signatures_and_signs_with_sha256():
    fips, why = find("fips")
    need_real_worker(fips, why, require="CRYPTOPERF_REQUIRE_FIPS")
    refused = job({"load": "targets:2", "digest": "sha1"}, worker=fips)
    assert refused.status == "unsupported" and "SHA-1 signature generation" in refused.reason
    ok = job({"load": "targets:4", "digest": "sha1", "sign_digest": "sha256"}, worker=fips)
    assert ok.status == "ok" and ok.fips is True, ok.reason
    assert (ok.extras["fleet"]["digest"], ok.extras["fleet"]["sign_digest"]) == ("sha1", "sha256")


def test_a_small_job_study_runs_end_to_end_with_its_report(tmp_path):
    path = tmp_path / "jobs.toml"
    path.write_text("""\
[study]
name = "jobs-small"
baseline = "rsa2048"
backends = ["aws-lc"]
repetitions = 3
verdict_on = "by_load"

[[configuration]]
name = "rsa2048"
cert = "rsa2048"

[[configuration]]
name = "ecdsa"
cert = "ecdsa-p256"

[[operation]]
label = "audit"
op = "fleet-job"
params = { job = "audit", cert = "{cert}", checks = 16 }
loads = ["targets:30"]
""")
    env = {"CRYPTOPERF_WORKER": str(REAL), "HOME": str(tmp_path)}
    res = run_subprocess("study", str(path), "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"),
                         env=env)
    assert res.code == 0, res.err
    md = next((tmp_path / "out").glob("*.md")).read_text()
    html = next((tmp_path / "out").glob("*.html")).read_text()
    assert "## Fleet jobs: summary" in md and "| audit |" in md
    assert 'class="plot fleet-timeline"' in html and 'class="plot fleet-cpu"' in html
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert [d["verdict"]["metric"] for d in doc["deltas"]] == ["throughput"]
    # no private key of the pool reaches any artefact
    for p in [tmp_path / "s.sqlite", *(tmp_path / "out").rglob("*")]:
        if p.is_file():
            assert b"PRIVATE KEY" not in p.read_bytes()
