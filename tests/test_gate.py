"""The paired route of a regression gate: two worker builds as two configurations of one study
(``worker = "path"``), ``cryptoperf gate`` that writes that study, and implementations compared
as configurations pinned to their backends, paired block by block whatever runs them.

Everything runs on the fake worker (tests/fake_worker.py): each "build" is a wrapper script
with its own script baked in, so the two builds are two binaries as a pipeline's would be."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from conftest import FAKE_WORKER_EXEC, assert_one_line_error
from cryptoperf import study as study_mod
from cryptoperf.engine import gate as gate_mod
from cryptoperf.errors import StudyError


def build(tmp_path: Path, name: str, spec: dict) -> Path:
    """A fake worker binary ``name`` whose script is ``spec`` (baked in, as a build's behaviour
    is in its binary)."""
    state = tmp_path / f"{name}-state"
    state.mkdir(exist_ok=True)
    p = tmp_path / name
    p.write_text(f"#!/bin/sh\nFAKE_WORKER_SPEC={shlex.quote(json.dumps(spec))} "
                 f"FAKE_WORKER_STATE={shlex.quote(str(state))} "
                 f"{FAKE_WORKER_EXEC}\n")
    p.chmod(0o755)
    return p


NOISE = {"noise_cv": 0.005}

TWO_BUILDS = """\
[study]
name = "two-builds"
baseline = "main"
backends = ["openssl"]
repetitions = 6
seconds = 0.01
warmup_s = 0

[[configuration]]
name = "main"
worker = "main-worker"

[[configuration]]
name = "change"
worker = "{candidate}"

[[operation]]
op = "rsa2048-sign"

[[operation]]
op = "sha256"
sizes = [1024]
"""


def _verdicts(out_dir: Path, name: str) -> list[dict]:
    """The deltas of the study document written under ``out_dir`` for study ``name``."""
    return json.loads(next(out_dir.glob(f"{name}-*.json")).read_text())["deltas"]


def test_two_worker_builds_in_one_study_are_paired_block_by_block(cli, write_study, fake_worker, tmp_path):
    fake_worker(NOISE)
    build(tmp_path, "main-worker", NOISE)
    build(tmp_path, "same-worker", NOISE)
    build(tmp_path, "slow-worker", {**NOISE, "config_factor": {"change": 1.10}})
    res = cli("study", write_study(TWO_BUILDS.format(candidate="same-worker")), "--no-report", "--out", tmp_path / "same")
    assert res.code == 0, res.err
    deltas = _verdicts(tmp_path / "same", "two-builds")
    assert [d["verdict"]["kind"] for d in deltas] == ["equivalent", "equivalent"], deltas
    assert {d["build"] for d in deltas} == {str(tmp_path / "same-worker")}  # the build each row ran is named
    assert "same-worker]" in res.out
    res = cli("study", write_study(TWO_BUILDS.format(candidate="slow-worker"), "slow.toml"), "--no-report",
              "--out", tmp_path / "slow")
    assert res.code == 0, res.err
    deltas = _verdicts(tmp_path / "slow", "two-builds")
    assert [d["verdict"]["kind"] for d in deltas] == ["slower", "slower"], deltas
    assert all(abs(d["latency"]["ratio"] - 1.10) < 0.01 for d in deltas), deltas
    # the same study as a regression gate: exit 1, naming what failed and what it could catch
    res = cli("study", tmp_path / "slow.toml", "--no-report", "--out", tmp_path / "slow", "--fail-on", "slower")
    assert res.code == 1, res.err
    assert "regression gate (--fail-on slower): FAILED by 2 cell(s): openssl rsa2048-sign change" in res.out
    assert "detectable change: at the noise measured, a slowdown of" in res.out
    res = cli("study", tmp_path / "study.toml", "--no-report", "--out", tmp_path / "same", "--fail-on", "slower")
    assert res.code == 0 and "regression gate (--fail-on slower): passed" in res.out, res.out


def test_a_worker_path_is_checked_before_anything_runs(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    build(tmp_path, "main-worker", {})
    res = cli("study", write_study(TWO_BUILDS.format(candidate="no-such-worker")), "--no-report")
    assert_one_line_error(res, "configuration 'change'", str(tmp_path / "no-such-worker"),
                          "not an executable file (nothing is there)")
    with pytest.raises(StudyError, match="names its own worker binary, so fips .* cannot apply"):
        study_mod.parse(TWO_BUILDS.format(candidate="x").replace('worker = "x"', 'worker = "x"\nfips = true'), "s.toml")


def _gate(cli, tmp_path: Path, candidate: Path, *more: str):
    return cli("gate", "--baseline-worker", tmp_path / "main-worker", "--candidate-worker", candidate,
               "--op", "rsa2048-sign", "--op", "sha256", "--op", "aes-128-gcm-seal", "--size", "16k",
               "--seconds", "0.01", "--warmup", "0", "--store", tmp_path / "gate.sqlite", *more)


def test_gate_passes_an_unchanged_build_and_states_what_it_would_catch(cli, fake_worker, tmp_path):
    fake_worker(NOISE)
    build(tmp_path, "main-worker", NOISE)
    res = _gate(cli, tmp_path, build(tmp_path, "same-worker", NOISE))
    assert res.code == 0, res.err
    assert "regression gate (--fail-on slower): passed" in res.out
    line = next(l for l in res.out.splitlines() if l.startswith("detectable change:"))
    worst = float(line.split("a slowdown of ", 1)[1].split(" %", 1)[0])
    assert 0 < worst < 10, line  # CV 1 %, 6 blocks, 3 comparisons
    assert "any one of its 3 comparisons" in line
    assert "gate: " in res.out and "wall time" in res.out
    res = _gate(cli, tmp_path, tmp_path / "same-worker", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["passed"] is True and doc["failing"] == []
    assert [d["verdict"]["kind"] for d in doc["deltas"]] == ["equivalent"] * 3, doc["deltas"]


def test_gate_fails_a_slower_candidate_naming_the_operation(cli, fake_worker, tmp_path):
    fake_worker(NOISE)
    build(tmp_path, "main-worker", NOISE)
    slow = build(tmp_path, "slow-worker", {**NOISE, "config_factor": {"candidate": 1.08}})
    res = _gate(cli, tmp_path, slow, "--json")
    assert res.code == 1, res.err
    doc = json.loads(res.out)
    assert doc["kind"] == "gate" and doc["passed"] is False
    assert sorted(doc["failing"]) == sorted(["openssl/aes-128-gcm-seal/16384/candidate",
                                             "openssl/rsa2048-sign/16384/candidate", "openssl/sha256/16384/candidate"])
    assert all(d["verdict"]["kind"] == "slower" for d in doc["deltas"])
    assert doc["detectable_change_pct"]["worst"] is not None and doc["wall_s"] > 0


def test_gate_errors_are_one_line(cli, fake_worker, tmp_path):
    fake_worker()
    main = build(tmp_path, "main-worker", {})
    res = cli("gate", "--baseline-worker", main, "--candidate-worker", tmp_path / "missing", "--op", "sha256")
    assert_one_line_error(res, "--candidate-worker", "not an executable file (nothing is there)", code=2)
    res = cli("gate", "--baseline-worker", main, "--candidate-worker", main, "--op", "sha257")
    assert_one_line_error(res, "unknown operation 'sha257'", code=2)
    res = cli("gate", "--baseline-worker", main, "--candidate-worker", main, "--op", "sha256", "--blocks", "5",
              "--max-blocks", "4")
    assert res.code == 0 or "max-blocks" not in res.err  # --max-blocks below --blocks means no more looks


def test_the_gate_study_is_an_ordinary_study_file():
    d = gate_mod.GateDesign("/a/w", "/b/w", ops=("rsa2048-sign", "sha256"), sizes=(16384,), blocks=6, max_blocks=18)
    text = gate_mod.gate_study_text(d, {"rsa2048-sign": False, "sha256": True})
    s = study_mod.parse(text, "/tmp/gate.toml")
    assert [c.build for c in s.configurations] == ["/a/w", "/b/w"]
    assert s.until == "decided" and s.repetitions == 6 and s.max_repetitions == 18
    assert [o.sizes for o in s.operations] == [None, (16384,)]


IMPLEMENTATIONS = """\
[study]
name = "implementations"
baseline = "openssl"
repetitions = 6
seconds = 0.01
warmup_s = 0

[[configuration]]
name = "openssl"
backend = "openssl"

[[configuration]]
name = "aws-lc"
backend = "aws-lc"

[[configuration]]
name = "ring"
backend = "ring"
{extra}
[[operation]]
op = "rsa2048-sign"

[[operation]]
op = "aes-256-gcm-seal"
sizes = [16384]
"""


def test_implementations_pinned_to_their_backends_are_compared_block_by_block(cli, write_study, fake_worker,
                                                                                tmp_path):
    fake_worker({**NOISE, "config_factor": {"aws-lc": 0.80, "ring": 1.25}})
    contrast = '\n[[contrast]]\nbaseline = "aws-lc"\nconfiguration = "ring"\n'
    res = cli("study", write_study(IMPLEMENTATIONS.format(extra=contrast)), "--no-report", "--out", tmp_path / "out")
    assert res.code == 0, res.err
    assert "aws-lc vs openssl" in res.out and "ring vs aws-lc" in res.out  # which implementations a row compares
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    got = {(d["backend"], d["baseline_backend"], d["label"]): (d["blocks"], d["verdict"]["kind"], d["latency"]["ratio"])
           for d in doc["deltas"]}
    truth = {("aws-lc", "openssl"): 0.80, ("ring", "openssl"): 1.25, ("ring", "aws-lc"): 1.25 / 0.80}
    assert {(b, a) for b, a, _ in got} == set(truth)
    for (b, a, label), (blocks, kind, ratio) in got.items():
        assert blocks == 6 and kind == ("slower" if truth[(b, a)] > 1 else "faster"), (b, a, label)
        assert abs(ratio / truth[(b, a)] - 1) < 0.02, (b, a, label, ratio)
    # every block ran the three implementations of an operation together
    reps = [r for r in doc["repetitions"] if r["block"] > 0]
    by_block: dict = {}
    for r in reps:
        by_block.setdefault((r["block"], r["cell"].split("/")[1]), set()).add(r["cell"].split("/")[0])
    assert all(v == {"openssl", "aws-lc", "ring"} for v in by_block.values()), by_block
    # the stored run, read back, pairs them the same way
    from cryptoperf.store import stored_run as stored
    with stored.open_store(tmp_path / "runs.sqlite") as st:
        again = stored.load_run(st, "latest")
    assert [(d.backends, d.label, d.blocks, d.latency.ratio) for d in again.deltas] == [
        (d["backend"] + " vs " + d["baseline_backend"], d["label"], d["blocks"], d["latency"]["ratio"])
        for d in doc["deltas"]]


def test_a_configuration_on_another_backend_needs_a_baseline_on_one():
    text = IMPLEMENTATIONS.format(extra="").replace('name = "openssl"\nbackend = "openssl"', 'name = "openssl"').replace(
        'warmup_s = 0', 'warmup_s = 0\nbackends = ["openssl", "aws-lc"]')
    s = study_mod.parse(text, "s.toml")
    from conftest import worker_rules
    with pytest.raises(StudyError, match="'ring', field 'backend': runs on ring where the baseline 'openssl' does "
                                         "not, so it has no baseline cell to be paired with; pin the baseline"):
        study_mod.check_against_worker(s, worker_rules())
