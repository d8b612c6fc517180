"""The FIPS axis on the orchestrator side: the study key ``fips``, cells in the FIPS worker
build, results that must report FIPS mode, and a missing or wrong FIPS build — against the fake
worker, whose FIPS build is the same script saying build "fips". The real FIPS worker:
test_real_fips_worker.py."""

import json

import pytest

from conftest import assert_one_line_error, worker_rules
from cryptoperf import builds, schedule, study
from cryptoperf.store import stored_run as stored
from cryptoperf.errors import StudyError
from cryptoperf.store.db import Store

FIPS_STUDY = """\
[study]
name = "fips"
baseline = "off"
backends = ["aws-lc", "ring"]
repetitions = 3
seconds = 0.01
warmup_s = 0

[[configuration]]
name = "off"

[[configuration]]
name = "on"
fips = true

[[operation]]
op = "sha256"
sizes = [1024]
"""


def test_fips_key_picks_the_fips_build():
    s = study.parse(FIPS_STUDY, "s.toml")
    assert [(c.fips, c.build) for c in s.configurations] == [(False, "default"), (True, "fips")]
    cells = schedule.expand(study.check_against_worker(s, worker_rules(["aws-lc", "ring"], ["sha256"])))
    on = [c for c in cells if c.configuration == "on"]
    off = [c for c in cells if c.configuration == "off"]
    assert {c.build for c in on} == {"fips"} and all(c.key.endswith("/build=fips") for c in on)
    assert all(c.fips and c.as_dict()["build"] == "fips" and c.as_dict()["fips"] is True for c in on)
    assert {c.build for c in off} == {"default"} and not any(c.fips for c in off)
    assert "aws-lc/sha256/1024/off" in [c.key for c in off]


def test_fips_must_be_a_boolean():
    text = FIPS_STUDY.replace("fips = true", 'fips = "yes"')
    with pytest.raises(StudyError) as e:
        study.parse(text, "s.toml")
    line = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("fips ="))
    assert str(e.value).startswith(f"s.toml:{line}: configuration 'on', field 'fips': ")
    assert "true or false" in str(e.value)


def test_study_runs_fips_cells_in_the_fips_worker(cli, write_study, fake_worker, tmp_path):
    fake_worker({"fips_factor": 1.08})
    fake_worker.fips()
    res = cli("study", write_study(FIPS_STUDY), "--no-report", "--out", tmp_path / "out")
    assert res.code == 0, res.err
    assert "on [fips]" in res.out  # the tables say which configuration ran in the FIPS build
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    by = {}
    for r in doc["repetitions"]:
        by.setdefault((r["configuration"], r["backend"]), []).append(r)
    on = by[("on", "aws-lc")]
    assert [r["block"] for r in on] == [0, 1, 2, 3]  # calibration, then 3 blocks
    for r in on:
        assert r["status"] == "ok" and r["fips"] is True and r["build"] == "fips" and r["fips_reported"] is True
    for r in by[("off", "aws-lc")]:
        assert r["fips"] is False and r["build"] == "default" and r["fips_reported"] is False
    (ring,) = by[("on", "ring")]  # unsupported at calibration: no blocks
    assert ring["block"] == 0 and ring["status"] == "unsupported" and "no FIPS mode" in ring["reason"]
    assert doc["host"]["builds"]["fips"]["libraries"]["aws-lc"]["fips"] is True
    d = next(d for d in doc["deltas"] if d["backend"] == "aws-lc")
    assert d["status"] == "ok" and d["latency"]["ratio"] == pytest.approx(1.08, rel=0.01)
    # the stored run rebuilds the same cells (build from the key)
    with Store(tmp_path / "runs.sqlite") as st:
        run = stored.load_run(st, "latest")
    assert {o.cell.build for o in run.outcomes if o.cell.configuration == "on"} == {"fips"}
    assert {o.cell.build for o in run.outcomes if o.cell.configuration == "off"} == {"default"}


def test_a_fips_result_without_fips_mode_is_not_counted(cli, write_study, fake_worker, tmp_path):
    fake_worker({"fips_result": False})
    fake_worker.fips()
    res = cli("study", write_study(FIPS_STUDY), "--no-report", "--out", tmp_path / "out")
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    on = [r for r in doc["repetitions"] if r["configuration"] == "on" and r["backend"] == "aws-lc"]
    assert on and all(r["status"] == "failed" and "without reporting FIPS mode" in r["reason"] for r in on), on
    assert all(r["throughput"] is None and r["fips_reported"] is False for r in on)
    d = next(d for d in doc["deltas"] if d["backend"] == "aws-lc")
    assert d["status"] == "n/a" and d["verdict"] is None
    # nothing was compared, so the study does not end as a success
    assert res.code == 1 and "compared nothing" in res.err and "without reporting FIPS mode" in res.err


def test_missing_fips_build_is_one_line_naming_the_configuration(cli, write_study, fake_worker,
                                                                 monkeypatch, tmp_path):
    fake_worker()
    monkeypatch.delenv("CRYPTOPERF_WORKER_FIPS", raising=False)
    real = builds.candidates
    monkeypatch.setattr(builds, "candidates",
                        lambda build="default": [tmp_path / "none"] if build == "fips" else real(build))
    monkeypatch.setattr(builds.shutil, "which", lambda tool: None if tool == "go" else f"/usr/bin/{tool}")
    path = write_study(FIPS_STUDY)
    msg = assert_one_line_error(cli("study", path), code=1)
    assert f"{path}: configuration 'on' needs the fips worker build" in msg
    assert "this machine lacks go" in msg and "rerun `pip install .`" in msg
    # speed says so once, under its table, and --fips stops with the same reason
    res = cli("speed", "-b", "aws-lc", "-o", "sha256", "--seconds", "0.01", "--warmup", "0")
    assert res.code == 0, res.err
    assert res.out.count("worker build 'fips' is unavailable") == 1
    assert "lacks go" in res.out
    assert_one_line_error(cli("speed", "--fips", "-o", "sha256"), "--fips needs the fips worker build", code=1)


def test_a_default_build_posing_as_fips_is_refused(cli, write_study, fake_worker, monkeypatch):
    monkeypatch.setenv("CRYPTOPERF_WORKER_FIPS", str(fake_worker()))
    assert_one_line_error(cli("study", write_study(FIPS_STUDY)),
                          "is the 'default' worker build, not 'fips'", code=1)


def test_speed_fips(cli, fake_worker):
    fake_worker()
    fake_worker.fips()
    res = cli("speed", "--fips", "-b", "aws-lc", "-b", "ring", "-o", "sha256", "--seconds", "0.01",
              "--warmup", "0", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    by = {r["backend"]: r for r in doc["results"]}
    assert by["aws-lc"]["fips"] is True and by["aws-lc"]["build"] == "fips"
    assert by["ring"]["status"] == "unsupported"
    assert doc["settings"]["build"] == "fips" and doc["settings"]["builds"]["fips"]["available"] is True


def test_backends_lists_the_builds(cli, fake_worker):
    fake_worker()
    fake_worker.fips()
    res = cli("backends", "--no-detail")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert any(l.startswith("worker builds (cache: ") for l in lines)
    i = next(i for i, l in enumerate(lines) if l.strip().startswith("fips "))
    assert lines[i].split()[1] == "built", lines[i]
    assert lines[i + 1].strip().endswith("fake-cryptoperf-worker-fips"), lines[i + 1]


UNAPPROVED_STUDY = FIPS_STUDY.replace('backends = ["aws-lc", "ring"]', 'backends = ["aws-lc"]').replace(
    'name = "on"\nfips = true', 'name = "on"\nfips = true\ndigest = "sha1"').replace(
    'name = "off"', 'name = "off"\ndigest = "sha1"').replace(
    'op = "sha256"\nsizes = [1024]', 'op = "sha256"\nsizes = [1024]\n\n[[operation]]\nop = "x25519-derive"\n\n'
    '[[operation]]\nlabel = "sign"\nop = "rsa2048-sign"\nsizes = [32]')


def test_the_workers_fips_table_is_read_from_hello():
    rules = worker_rules(["aws-lc"])
    assert rules.fips_unapproved("sha256", {}) is None
    assert "RFC 7748" in rules.fips_unapproved("x25519-derive", {})
    assert rules.fips_unapproved("rsa2048-sign", {"digest": "sha256"}) is None
    assert "SHA-1" in rules.fips_unapproved("rsa2048-sign", {"digest": "sha1"})


def test_a_fips_configuration_timing_an_unapproved_primitive_is_flagged_before_it_runs(cli, write_study,
                                                                                        fake_worker):
    fake_worker()
    fake_worker.fips()
    res = cli("study", write_study(UNAPPROVED_STUDY), "--dry-run")
    assert res.code == 0, res.err
    notes = [line for line in res.err.splitlines() if "not a FIPS-approved service" in line]
    # x25519 and SHA-1 signing in the FIPS configuration 'on'; the same operations in 'off' and
    # SHA-256 in 'on' are not flagged
    assert len(notes) == 2, res.err
    assert any("configuration 'on'" in n and "x25519-derive" in n for n in notes)
    assert any("configuration 'on'" in n and "'sign'" in n and "SHA-1" in n for n in notes)
    assert not any("'off'" in n or "sha256" in n for n in notes)


def test_a_report_names_the_cells_that_timed_an_unapproved_primitive_in_fips_mode(cli, write_study, fake_worker,
                                                                                  tmp_path):
    """The results say it too (``fips_approved``/``fips_reason``): the analysis keeps the cells
    of a FIPS configuration whose operation the module does not approve as timed, and the
    report lists them with the worker's reason; the same operations outside FIPS mode are not
    listed."""
    fake_worker()
    fake_worker.fips()
    res = cli("study", write_study(UNAPPROVED_STUDY),
              "--out", str(tmp_path / "out"))
    assert res.code == 0, res.err
    with Store(tmp_path / "runs.sqlite") as st:
        run = stored.load_run(st, "latest")
    flagged = run.analysis.fips_unapproved
    assert {run.summaries[k].cell.op for k in flagged} == {"x25519-derive", "rsa2048-sign"}
    assert all(run.summaries[k].cell.configuration == "on" for k in flagged)
    assert "RFC 7748" in next(why for k, why in flagged.items() if run.summaries[k].cell.op == "x25519-derive")
    md = next((tmp_path / "out").glob("*.md")).read_text()
    section = md[md.index("## Not FIPS-approved as timed"):]
    section = section[:section.index("\n## ")]
    assert section.count("\n> - ") == 2 and "SHA-1" in section and "RFC 7748" in section, section
    assert "sha256" not in section
