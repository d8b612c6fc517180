"""Fleet jobs in study files and reports, on the fake worker: the targets:N level, the checks
made before anything runs (a job level on another workload, a time level on a job, more
descriptors than ulimit -n allows), throughput verdicts, the report's summary, throughput,
scalability, timeline, per-phase, CPU and process sections, and failed targets reported with
their reasons. The real worker's side: tests/test_real_fleet.py."""

from __future__ import annotations

import json
import re
import resource

import pytest

from conftest import ROOT, assert_one_line_error, worker_rules
from cryptoperf import levels, schedule, stats, study
from cryptoperf.errors import StudyError
from cryptoperf.model import Repetition
from cryptoperf.result import decode
from cryptoperf.workloads import fleet

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

RULES = worker_rules()

STUDY = """\
[study]
name = "jobs"
baseline = "base"
backends = ["aws-lc"]
repetitions = 3
verdict_on = "by_load"
seed = 1

[[configuration]]
name = "base"
cert = "rsa2048"

[[configuration]]
name = "slow-connect"
cert = "rsa4096"

[[operation]]
label = "audit"
op = "fleet-job"
params = { job = "audit", cert = "{cert}" }
loads = ["targets:1", "targets:100", "targets:1000"]
"""


def checked(text: str) -> study.Study:
    return study.check_against_worker(study.parse(text, "s.toml"), RULES)


def error(text: str) -> str:
    with pytest.raises(StudyError) as e:
        checked(text)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_a_job_level_is_a_number_of_targets():
    load = levels.parse_load("targets:1000")
    assert (load.kind, load.targets, load.label, load.level, load.connections) == ("targets", 1000, "1000 targets",
                                                                                   1000.0, 1)
    assert levels.parse_load("targets:1").label == "1 target"
    for bad in ("targets:0", "targets:x"):
        with pytest.raises(ValueError, match="targets:N"):
            levels.parse_load(bad)
    # the most targets is the worker's (max_targets in its hello), checked with its limits
    assert levels.parse_load("targets:10001").targets == 10001
    with pytest.raises(ValueError, match=r"10001 targets, above the worker's limit of 10000 \(max_targets"):
        levels.parse_load("targets:10001", RULES.limits)
    assert stats.metric_for("by_load", "targets:100") == "throughput"
    assert stats.metric_for("latency", "targets:100") == "latency"


def test_the_hello_announces_the_job_kinds_and_defaults():
    assert "fleet-job" in RULES.workloads
    assert RULES.op_defaults["fleet-job"]["load"] == "targets:1"
    assert (RULES.op_defaults["fleet-job"]["cap"], RULES.op_defaults["fleet-job"]["slices"]) == (20, 1)
    assert RULES.param_values["job"] == ("audit", "appconfig", "remediate")
    assert {"cap", "slices", "agents", "sign_digest", "inject_close"} <= RULES.op_params["fleet-job"]


def test_each_level_is_its_own_row_and_calibration_runs_a_small_job():
    cells = schedule.expand(checked(STUDY))
    assert sorted({c.label for c in cells}) == ["audit @ 1 target", "audit @ 100 targets", "audit @ 1000 targets"]
    big = next(c for c in cells if c.load == "targets:1000")
    settings = schedule.Settings(seconds=1, warmup_s=0.2, threads=1, timeout_s=60)
    cal = schedule.run_request(Repetition(big, 0), settings)
    assert cal["params"]["load"] == RULES.workloads["fleet-job"].calibration_load == "targets:10"
    assert cal["threads"] == 1
    small = next(c for c in cells if c.load == "targets:1")  # below the calibration level: its own
    assert schedule.run_request(Repetition(small, 0), settings)["params"]["load"] == "targets:1"
    assert schedule.run_request(Repetition(big, 1), settings)["params"]["load"] == "targets:1000"
    # without loads, the worker's default level (hello): one target
    cells = schedule.expand(checked(STUDY.replace('loads = ["targets:1", "targets:100", "targets:1000"]\n', "")))
    assert {c.load for c in cells} == {"targets:1"}


@pytest.mark.parametrize("change, fragment", [
    (('loads = ["targets:1", "targets:100", "targets:1000"]', 'loads = ["closed:4"]'),
     "'fleet-job' is a job: its levels are numbers of targets, targets:N (not 'closed:4')"),
    (('job = "audit"', 'job = "deploy"'), "job 'deploy' is not one of audit, appconfig, remediate"),
    (('targets:1000"]', 'targets:100000"]'), "asks for 100000 targets, above the worker's limit of 10000"),
])
def test_bad_job_levels_and_params_are_one_line(change, fragment):
    assert fragment in error(STUDY.replace(*change))


def test_a_job_level_on_another_workload_is_refused():
    text = STUDY.replace('op = "fleet-job"', 'op = "tls-handshake"').replace('job = "audit", ', "")
    assert "load 'targets:1' is a job level; only fleet-job takes one" in error(text)


def test_a_job_needing_more_descriptors_than_ulimit_is_refused_with_the_figure(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda _what: (256, 4096))
    checked(STUDY)  # cap 20, 1 slice: 84 descriptors
    msg = error(STUDY.replace('job = "audit",', 'job = "audit", cap = 100, slices = 2,'))
    assert "needs about 264 file descriptors in an agent process (200 connections + 64), but the limit is 256" in msg
    assert "ulimit -n" in msg


def test_shipped_job_studies_expand():
    s = study.check_against_worker(study.load(ROOT / "studies" / "fips-impact-jobs.toml"), RULES)
    cells = schedule.expand(s)
    assert len(cells) == 27
    assert {c.params["rtt_ms"] for c in cells} == {"lognormal:p50=5,p99=20"}
    assert {c.build for c in cells if c.configuration == "sha1-rsa2048-fips"} == {"fips"}
    fips = next(c for c in cells if c.configuration == "sha1-rsa2048-fips")
    assert (fips.params["digest"], fips.params["sign_digest"]) == ("sha1", "sha256")
    s = study.check_against_worker(study.load(ROOT / "studies" / "audit-scaling.toml"), RULES)
    assert {(c.configuration, c.params["slices"], c.load) for c in schedule.expand(s)} == {
        ("1-slice", "1", "targets:1000"), ("2-slices", "2", "targets:1000"), ("4-slices", "4", "targets:1000"),
        ("2-slices-fips", "2", "targets:1000"), ("1-slice-cap40", "1", "targets:1000")}
    assert {c.configuration: c.params["cap"] for c in schedule.expand(s)}["1-slice-cap40"] == "40"
    assert [(c.configuration, c.baseline) for c in s.contrasts] == [("2-slices-fips", "2-slices")]
    assert {c.params["rtt_ms"] for c in schedule.expand(s)} == {"lognormal:p50=20,p99=80"}


def run_study(cli, write_study, tmp_path, text: str) -> tuple[dict, str, str]:
    out = tmp_path / "out"
    res = cli("study", write_study(text), "--out", out, "--store", tmp_path / "s.sqlite")
    assert res.code == 0, res.err
    doc = json.loads(next(out.glob("*.json")).read_text())
    return doc, next(out.glob("*.md")).read_text(), next(out.glob("*.html")).read_text()


def test_a_job_study_reports_summary_phases_timeline_cpu_and_failures(fake_worker, write_study, cli, tmp_path):
    fake_worker({"fleet_phase_factor": {"slow-connect": {"connect": 1.6}}, "noise_cv": 0.01})
    text = STUDY.replace('job = "audit",', 'job = "audit", inject_close = "3", inject_bad_cert = "7",')
    doc, md, html = run_study(cli, write_study, tmp_path, text)
    metrics = {d["label"]: d["verdict"]["metric"] for d in doc["deltas"] if d.get("verdict")}
    assert set(metrics.values()) == {"throughput"} and len(metrics) == 3
    top = next(d for d in doc["deltas"] if d["label"] == "audit @ 1000 targets")
    assert top["verdict"]["kind"] == "slower", top["verdict"]
    # the summary: use case, the delta in targets per minute with its interval, the verdict
    # naming what changed, and the phases' changes as descriptive figures, largest first (the
    # connect phase the fake slows), never as a verdict word
    summary = md[md.index("## Fleet jobs: summary"):md.index("## Fleet jobs: throughput")]
    row = next(line for line in summary.splitlines() if line.startswith("| audit |"))
    assert "1000 targets" in row and re.search(r"-\d+\.\d % \[-\d+\.\d, -\d+\.\d\]", row), row
    assert re.search(r"\| \d+\.\d % fewer targets/min \[", row), row
    assert re.search(r"phase times \(descriptive\): connect \+\d+\.\d %, ", row), row
    assert "slowed" not in md and "Phase times are descriptive" in summary
    assert "other levels: 1 target:" in row
    # throughput vs targets, per-phase table, processes with RSS and descriptors, failures
    for heading in ("## Fleet jobs: throughput vs targets", "## Fleet jobs: time per phase",
                    "## Fleet jobs: processes and failed targets", "## Fleet jobs: timeline by phase",
                    "## Fleet jobs: CPU over the job's lifetime", "## Fleet jobs: where the CPU sets the pace"):
        assert heading in md, heading
    phases = md[md.index("## Fleet jobs: time per phase"):md.index("## Fleet jobs: CPU")]
    assert "descriptive: not adjusted for multiplicity and no verdict" in phases
    connect = phases.split("| connect |")[1].split("\n")[0]
    assert "**" not in phases.split("|", 1)[1] and re.search(r"· \+\d+\.\d % \[\+\d+\.\d, \+\d+\.\d\]", connect), connect
    section = html[html.index('<section id="fleet-phases"'):]
    assert "<strong>" not in section[:section.index("</section>")] and "carry no verdict" in section
    failures = md[md.index("## Fleet jobs: processes and failed targets"):]
    assert "targets failed" in failures and "UnknownIssuer" in failures and "close_notify" in failures
    failed = [f for r in doc["repetitions"] if r.get("result") and r["block"] > 0
              for f in (r["result"].get("fleet") or {}).get("failures", [])]
    assert {f["target"] for f in failed} == {3, 7} and all(f["reason"] for f in failed)
    # the plots: throughput, a Gantt chart by phase with the cap, CPU per process
    assert 'class="plot fleet-throughput"' in html and 'class="plot fleet-timeline"' in html
    assert 'class="plot fleet-cpu"' in html
    assert "inflight-base-0" in html and "cpu-base-agent-1" in html and "cpu-slow-connect-slice-0" in html
    timeline = html[html.index('class="plot fleet-timeline"'):]
    assert "<image" in timeline[:timeline.index("</svg>")]  # 1000 targets' bars: rasterised
    # jobs are left out of the generic workload sections
    assert "## Throughput vs load" not in md


def test_the_scalability_factor_is_the_throughput_ratio_and_the_host_bounds_it(fake_worker, write_study, cli, tmp_path):
    fake_worker()
    fake_worker.fips()  # the study's 2-slices-fips configuration: never the FIPS worker installed here
    text = (ROOT / "studies" / "audit-scaling.toml").read_text()
    assert "repetitions = 8" in text
    doc, md, _ = run_study(cli, write_study, tmp_path, text.replace("repetitions = 8", "repetitions = 3"))
    pairs = {(d["configuration"], d["baseline"]): d for d in doc["deltas"]}
    assert set(pairs) == {("2-slices", "1-slice"), ("4-slices", "1-slice"), ("2-slices-fips", "1-slice"),
                          ("1-slice-cap40", "1-slice"), ("2-slices-fips", "2-slices")}
    # FIPS at equal workers: the contrast pairs the 2-slice jobs, FIPS on against off
    assert pairs[("2-slices-fips", "2-slices")]["verdict"] is not None
    deltas = {c: d for (c, b), d in pairs.items() if b == "1-slice"}
    ratio = deltas["2-slices"]["throughput"]["ratio"]
    assert 1.7 < ratio < 2.0  # the fake's second slice costs 5 %: 2 / 1.05
    assert deltas["4-slices"]["throughput"]["ratio"] > ratio
    section = md[md.index("## Fleet jobs: scalability"):]
    row = next(line for line in section.splitlines() if line.startswith("| audit |"))
    assert f"{ratio:.2f} [" in row and "1 → 2" in row
    assert "bounded by the host's 2 CPUs" in row


def test_the_cap_is_never_exceeded_in_the_fakes_timeline_either(fake_worker, write_study, cli, tmp_path):
    fake_worker()
    doc, _, _ = run_study(cli, write_study, tmp_path, STUDY.replace('job = "audit",', 'job = "audit", cap = 7,'))
    for r in doc["repetitions"]:
        job = fleet.decode(decode(r["result"])) if r.get("result") else None
        if job is None:
            continue
        assert job.most_in_flight() <= 7
        assert len(job.targets_) == job.targets


def test_a_fips_configuration_signing_with_sha1_stops_the_study_with_one_line(fake_worker, write_study, cli):
    fake_worker()
    fake_worker.fips()
    text = STUDY.replace('cert = "rsa4096"', 'cert = "rsa2048"\nfips = true\ndigest = "sha1"')
    res = cli("study", write_study(text), "--dry-run")
    assert_one_line_error(res, "configuration 'slow-connect' on aws-lc: SHA-1 signature generation is not an "
                               "approved service in FIPS mode", code=2)


def test_speed_runs_a_job_at_its_default_level_or_the_one_given(fake_worker, cli):
    fake_worker()
    res = cli("speed", "--op", "fleet-job", "--backend", "aws-lc", "--json", "--no-store")
    assert res.code == 0, res.err
    (row,) = json.loads(res.out)["results"]
    assert row["status"] == "ok" and row["params"]["load"] == "targets:1"
    res = cli("speed", "--op", "fleet-job", "--backend", "aws-lc", "--param", "load=targets:50", "--json", "--no-store")
    assert res.code == 0, res.err
    assert json.loads(res.out)["results"][0]["params"]["load"] == "targets:50"


def test_the_summary_says_a_use_case_description_once():
    from cryptoperf.report.sections.fleet import _first_of_each
    rows = [{"use_case": u, "description": f"long text of {u}", "configuration": c}
            for u, c in [("audit", "a"), ("audit", "b"), ("remediate", "a"), ("audit", "c")]]
    assert [r["description"] for r in _first_of_each(rows)] == ["long text of audit", "", "long text of remediate", ""]
    assert [r["use_case"] for r in _first_of_each(rows)] == ["audit", "audit", "remediate", "audit"]


def test_plan_targets_picks_the_job_kind_with_op(fake_worker, write_study, cli, tmp_path):
    """A run with two job kinds: `plan --targets` asks which (one line naming them), plans the one
    given with --op, and refuses one the run does not have."""
    fake_worker()
    text = STUDY + """
[[operation]]
label = "push"
op = "fleet-job"
params = { job = "appconfig", cert = "{cert}" }
loads = ["targets:100"]
"""
    run_study(cli, write_study, tmp_path, text)
    store = tmp_path / "s.sqlite"
    res = cli("plan", "latest", "--targets", "500", "--deadline", "10m", "--store", store)
    assert res.code != 0 and "the run's fleet jobs are audit, push: say which with --op" in res.err
    assert_one_line_error(res)
    res = cli("plan", "latest", "--targets", "500", "--deadline", "10m", "--op", "push", "--json", "--store", store)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["level"] == "100 targets" and doc["measured"]["targets"] == 100
    res = cli("plan", "latest", "--targets", "500", "--deadline", "10m", "--op", "nope", "--store", store)
    assert res.code != 0 and "--op nope: the run's fleet jobs are audit, push" in res.err
