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
    columns = f["records"]["columns"]
    edges = [columns.index(f"{p}_{e}_us") for p in f["phases"] for e in ("start", "end")]
    for row in rows(r):
        times = [row[i] for i in edges]
        assert None not in times, row
        assert all(a <= b for a, b in zip(times, times[1:])), row
    # without the latency model nothing waits, and each phase's slice CPU is recorded
    assert f["latency"] is None
    assert all(row[columns.index(f"{p}_wait_us")] == 0 for row in rows(r) for p in f["phases"])
    assert all(row[columns.index("connect_cpu_us")] > 0 for row in rows(r))
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
    col = {name: i for i, name in enumerate(f["records"]["columns"])}
    assert len(by_target) == 40
    three, eight = by_target[3], by_target[8]
    assert three[2] == "failed" and three[col["push_start_us"]] is not None and three[col["report_start_us"]] is None
    assert eight[2] == "failed" and eight[col["push_start_us"]] is None  # no push after a failed connect
    assert all(by_target[t][2] == "ok" for t in by_target if t not in failures)
    # targets after the failed ones still ran: the job went on
    assert (max(row[col["report_end_us"]] for row in rows(r) if row[2] == "ok")
            > max(three[col["connect_start_us"]], three[col["connect_end_us"]], three[col["push_start_us"]]))


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


# ---- the latency model: time per target that is not cryptography ---------------------------------

def test_a_fixed_latency_sets_the_rate_to_the_cap_over_the_latency():
    """rtt 50 ms, an audit's 4 round trips (connect 2, checks 1, report 1): L = 200 ms of waits
    per target; with cap c = 10 on one slice, targets per minute is 60·c/T by Little's law, T
    the targets' own mean time from first phase to last — the waits plus the cryptography, which
    depends on the host's speed and load, so it is read from the result rather than assumed —
    within 10 % (the job's first and last rounds run below the cap), and never above the waits'
    bound 60·c/L = 3000. Each phase's wait is recorded apart from its CPU."""
    r = job({"job": "audit", "checks": 4, "load": "targets:60", "cap": 10, "rtt_ms": 50})
    assert r.status == "ok", r.reason
    f = r.extras["fleet"]
    assert f["completed"] == 60
    per_min = r.ops / (r.wall_ns / 1e9) * 60
    spans_s = [(t.span[1] - t.span[0]) / 1e6 for t in fleet.decode(r).targets_]
    mean_s = sum(spans_s) / len(spans_s)
    assert min(spans_s) >= 0.2  # at least the four round trips
    assert per_min == pytest.approx(60 * 10 / mean_s, rel=0.10), (per_min, mean_s)
    assert per_min <= 60 * 10 / 0.2 * 1.02, per_min
    assert f["latency"]["rtt"] == {"dist": "fixed", "ms": 50.0, "mean_ms": 50.0}
    assert f["latency"]["applied"].startswith("management-side wait")
    parts = fleet.decode(r).phase_parts()
    waits = {p: sorted(v["wait"]) for p, v in parts.items()}
    assert waits["connect"][0] == waits["connect"][-1] == 100e6 and waits["report"][0] == 50e6
    for p, v in parts.items():
        assert all(0 < c < 50e6 for c in v["crypto_cpu"]), (p, v["crypto_cpu"][:5])
    # each phase took at least its wait
    assert all(t.phases[k][1] - t.phases[k][0] >= t.waits[k] for t in fleet.decode(r).targets_ for k in range(3))


def test_the_same_target_waits_the_same_in_every_run_and_manager_cpu_is_burnt():
    params = {"job": "audit", "checks": 2, "load": "targets:12", "cap": 4, "rtt_ms": "lognormal:p50=2,p99=20",
              "target_work_ms": "uniform:0.1-0.5", "manager_cpu_ms": 5}
    a, b = job(params), job(params)
    assert a.status == b.status == "ok", (a.reason, b.reason)

    def waits(r):
        return {t.target: t.waits for t in fleet.decode(r).targets_}
    assert waits(a) == waits(b)
    assert len({w for w in waits(a).values()}) == 12  # every target its own draws
    other = [t.other_cpu for t in fleet.decode(a).targets_]
    assert all(4_500 <= o <= 20_000 for o in other), other  # µs: 5 ms of busy loop each
    report = fleet.decode(a).phase_parts()["report"]
    assert all(o >= 4.5e6 for o in report["other_cpu"]) and all(c >= 0 for c in report["crypto_cpu"])
    # the slice's CPU over the job holds the 12 × 5 ms
    slice_cpu = next(p["cpu_ns"] for p in a.extras["fleet"]["processes"] if p["role"] == "slice")
    assert slice_cpu >= 12 * 5e6


def test_the_planner_answers_from_a_measured_job_study(tmp_path):
    """A study of the audit job with a fixed 100 ms round trip (400 ms a target) on 1 and 2
    slices, cap 5, 20 targets: the planner, from the 1-slice jobs alone, gives the 2-slice job's
    time (latency-bound, about 20 × 0.4 s ÷ 10) and names the doubled concurrency as an
    extrapolation, and every measured 2-slice job falls inside its prediction interval; a deadline
    gets slices. The report splits each phase's time into the model's waiting and the management
    CPU."""
    path = tmp_path / "scale.toml"
    path.write_text("""\
[study]
name = "plan-check"
baseline = "1-slice"
backends = ["aws-lc"]
repetitions = 3
verdict_on = "by_load"

[[configuration]]
name = "1-slice"
slices = "1"

[[configuration]]
name = "2-slices"
slices = "2"

[[operation]]
label = "audit"
op = "fleet-job"
params = { job = "audit", checks = 2, cap = 5, slices = "{slices}", rtt_ms = 100 }
loads = ["targets:20"]
""")
    env = {"CRYPTOPERF_WORKER": str(REAL), "HOME": str(tmp_path)}
    store = str(tmp_path / "s.sqlite")
    res = run_subprocess("study", str(path), "--store", store, "--out", str(tmp_path / "out"), env=env)
    assert res.code == 0, res.err
    plan = run_subprocess("plan", "latest", "--targets", "20", "--slices", "2", "--configuration", "1-slice",
                          "--json", "--store", store, env=env)
    assert plan.code == 0, plan.err
    doc = json.loads(plan.out)
    assert doc["bound"] == "latency" and doc["on_slices"] == 2 and doc["measured"]["slices"] == 1
    run = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    two = [r["result"]["wall_ns"] / 1e9 for r in run["repetitions"]
           if r["configuration"] == "2-slices" and r["block"] > 0 and r["status"] == "ok" and not r["superseded"]]
    assert len(two) == 3 and all(0.8 <= j for j in two)  # at least the two waves of 0.4 s
    assert doc["job_s"]["low"] < doc["job_s"]["value"] < doc["job_s"]["high"]
    assert doc["job_s"]["value"] == pytest.approx(0.8, rel=0.1)  # 20 targets × 0.4 s / (2 × 5)
    # the prediction from one slice holds for the jobs measured on two
    assert all(doc["job_s"]["low"] <= j <= doc["job_s"]["high"] for j in two), (two, doc["job_s"])
    assert any("10 targets in flight at once, more than the 5 measured" in x for x in doc["extrapolated"])
    md = next((tmp_path / "out").glob("*.md")).read_text()
    assert "Where each phase's time went at 20 targets" in md and "Latency model: round trips 100 ms (fixed)" in md
    text = run_subprocess("plan", "latest", "--targets", "500", "--deadline", "10m", "--configuration", "1-slice",
                          "--store", store, env=env)
    assert text.code == 0, text.err
    assert "500 targets by a deadline of 10 min 00 s" in text.out and "slices needed: " in text.out
