"""docs/ci-gate.md runs: every ``cryptoperf`` command of its ```sh blocks (and its ``cp``), in
order, against the fake worker, in a temporary directory, each step in a CI job of its own
(GitLab's ``CI_JOB_ID``, which the runs record as their job).

What the test sets, and nothing else: the fake worker's latencies per step — the baseline's
runs differ by a whole-run shift of −1.5 … +2 % (as real runs do), and step 2 is run three
times from the same baseline: with the candidate unchanged (the gate passes), 1.3× slower on
RSA (it fails), and 5 % slower on RSA (the gate cannot tell: it passes, naming the undecided
comparison and what it leaves possible, and fails with --fail-on undecided). Step 4's publish
writes the speed runs' trend page. Then the baseline grows by main-branch jobs on runners of
their own hostname, and the page's gate, run again, takes them as its history (naming the
hostnames it accepted), measures the spread between jobs, and sets aside a candidate's
repetition 3× slower than its run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import ROOT
from cryptoperf import hostinfo

PAGE = ROOT / "docs" / "ci-gate.md"
#: whole-run factors of the baseline's three runs (step 1), then the run of the new main (step 4)
BASELINE_SHIFTS = [1.0, 1.02, 0.985]
BASE_NS = {"rsa2048-sign": 250_000, "aes-128-gcm-seal": 3_500}


def sections(text: str) -> list[list[list[str]]]:
    """Per ``## `` section of the page, the commands of its ```sh blocks (cryptoperf and cp), each
    split as a shell would."""
    out = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        cmds = []
        for body in re.findall(r"^```sh\n(.*?)^```", part, re.S | re.M):
            cmds += [shlex.split(line) for line in body.splitlines() if line.split()[:1] in (["cryptoperf"], ["cp"])]
        out.append(cmds)
    return out


def spec(factor: float, rsa: float = 1.0, **more) -> dict:
    return {"latency_ns": {"rsa2048-sign": round(BASE_NS["rsa2048-sign"] * factor * rsa),
                           "aes-128-gcm-seal": round(BASE_NS["aes-128-gcm-seal"] * factor)},
            "noise_cv": 0.002, **more}


def set_hostname(store: str, hostname: str) -> None:
    """The newest run of ``store`` ran on a runner called ``hostname`` (hosted CI: one per job)."""
    db = sqlite3.connect(store)
    rid, text = db.execute("SELECT id, host_json FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    host = json.loads(text)
    host["hostname"] = hostname
    db.execute("UPDATE runs SET host_json = ? WHERE id = ?", (json.dumps(host), rid))
    db.commit()
    db.close()


def run(cli, cmd: list[str]):
    if cmd[0] == "cp":
        shutil.copy(cmd[1], cmd[2])
        return None
    return cli(*cmd[1:])


def test_the_ci_walk_through_runs(cli, fake_worker, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _, names in hostinfo.CI_JOB_VARIABLES:
        for n in names:
            monkeypatch.delenv(n, raising=False)
    job = iter(range(1, 100))
    monkeypatch.setenv("CI_JOB_ID", str(next(job)))
    steps = sections(PAGE.read_text())
    _, store_baseline, gate, cannot_tell, keep_current = steps
    assert [c[:2] for c in store_baseline] == [["cryptoperf", "speed"]]
    assert "--runs" in store_baseline[0]
    # 1. the baseline: three runs, each with its own whole-run shift (one command per run here,
    # so the fake worker can shift each; the page's --runs 3 makes the same three runs)
    for i, f in enumerate(BASELINE_SHIFTS):
        fake_worker(spec(f))
        cmd = store_baseline[0][:store_baseline[0].index("--runs")] + store_baseline[0][store_baseline[0].index("--runs") + 2:]
        res = run(cli, cmd)
        assert res.code == 0, res.err
        assert f"stored as run {i + 1} in baseline.sqlite" in res.out
    # the page's own command, once, in a scratch store: --runs 3 stores three runs and says so
    fake_worker(spec(1.0))
    res = run(cli, [*store_baseline[0][:-1], "scratch.sqlite"])
    assert res.code == 0 and "stored as runs 1,2,3 in scratch.sqlite" in res.out, res.out

    # 2. the gate, three times from the same baseline, each in a job of its own
    def gate_with(candidate: dict, hostname: str | None = None) -> object:
        monkeypatch.setenv("CI_JOB_ID", str(next(job)))
        fake_worker(candidate)
        Path("gate.sqlite").unlink(missing_ok=True)
        results = [run(cli, cmd) for cmd in gate[:2]]
        if hostname:
            set_hostname("gate.sqlite", hostname)
        results.append(run(cli, gate[2]))
        assert all(r is None or r.code in (0, 1) for r in results), [r.err for r in results if r]
        assert results[1].code == 0, results[1].err
        return results[2]

    ok = gate_with(spec(1.01))
    assert ok.code == 0, ok.out
    # one job a side: the spread between jobs is assumed, and said
    assert "between-job variation is unknown (one job per side)" in ok.out, ok.out
    assert "1 job (run 4) against 1 job (runs 3, 2, 1)" in ok.out
    assert "regression gate (--fail-on slower): passed" in ok.out and "FAILED" not in ok.out
    assert "detectable change: a slowdown of" in ok.out
    bad = gate_with(spec(1.0, rsa=1.3))
    assert bad.code == 1 and "FAILED by 1 cell(s): openssl rsa2048-sign" in bad.out, bad.out
    unsure = gate_with(spec(1.0, rsa=1.05))
    assert unsure.code == 0, unsure.out
    line = next(l for l in unsure.out.splitlines() if l.startswith("regression gate"))
    # one baseline job against the candidate's, the between-job sd assumed, cannot tell a 5 %
    # change (nor rule out more) at 95 %
    assert re.search(r"passed, but \d comparisons? undecided: .*openssl rsa2048-sign — p50 latency \d+\.\d % higher "
                     r"is not ruled out", line), line

    # 3. failing on what it cannot tell
    (strict,) = cannot_tell
    res = run(cli, strict)
    assert res.code == 1 and re.search(r"FAILED by \d cell\(s\): .*openssl rsa2048-sign", res.out), res.out

    # 4. the new main's run, in a job of its own, and the published trend
    monkeypatch.setenv("CI_JOB_ID", str(next(job)))
    fake_worker(spec(1.005))
    results = [run(cli, cmd) for cmd in keep_current]
    assert all(r.code == 0 for r in results), [r.err for r in results]
    assert "stored as run 4 in baseline.sqlite" in results[0].out
    trend = (tmp_path / "site" / "trend" / "speed-runs.html").read_text()
    assert "rsa2048-sign" in trend and (tmp_path / "site" / "index.html").exists()

    # hosted CI: two more main-branch jobs, each on a runner with a hostname of its own
    for i, f in enumerate([0.99, 1.012]):
        monkeypatch.setenv("CI_JOB_ID", str(next(job)))
        fake_worker(spec(f))
        assert run(cli, keep_current[0]).code == 0
        set_hostname("baseline.sqlite", f"runner-{i}")
    # the page's gate again: an unchanged candidate, on yet another runner, one of whose
    # repetitions (block 2, every operation) ran 3× slower
    res = gate_with(spec(1.0, rep_factors=[1.0, 3.0, 1.0]), hostname="runner-pr")
    assert res.code == 0, res.out
    history = next(l for l in res.out.splitlines() if l.startswith("history:"))
    assert "history: 5 runs (5, 4, 3, 2, 1) from 3 jobs; accepted differences: hostname (3 values)" in history
    assert "jobs as the unit" in res.out and "1 job (run 7) against 4 jobs (run 6; run 5; run 4; runs 3, 2, 1)" in res.out
    assert "(in 2 comparisons)" in res.out  # the method sentence counts the comparisons screened
    doc = json.loads(cli("compare", "previous", "latest", "--history", "5", "--store", "gate.sqlite", "--json").out)
    assert [(s["run"], s["block"], round(s["factor"])) for s in doc["set_aside"]] == [("run 7", 2, 3)] * 2
    assert all("run 7: block 2 set aside as disturbed (p50 latency ×" in d["note"] for d in doc["deltas"])
    # the hostname, and any host check whose reading changed state on this machine meanwhile
    assert doc["history"]["accepted_differences"][0] == {"field": "hostname", "values": 3}
    assert all(d["field"] == "hostname" or d["field"].startswith("check ") for d in doc["history"]["accepted_differences"])
    assert re.search(r"between-job sd: [\d.]+ % measured", res.out) and "detectable change: a slowdown of" in res.out
    # and with jobs measured, a true 30 % slowdown still fails it
    res = gate_with(spec(1.0, rsa=1.3, rep_factors=[1.0, 3.0, 1.0]), hostname="runner-pr")
    assert res.code == 1 and "FAILED by 1 cell(s): openssl rsa2048-sign" in res.out, res.out


def test_the_paired_gate_of_the_page_runs(cli, fake_worker, tmp_path, monkeypatch):
    """Section 1: `cryptoperf gate` and the same gate as a study file, with two builds of the
    worker in main/ and pr/ (fake ones, each its script baked in): an unchanged candidate passes,
    one 10 % slower on RSA fails naming it."""
    from test_gate import build
    monkeypatch.chdir(tmp_path)
    text = PAGE.read_text()
    paired = re.split(r"^## ", text, flags=re.M)[1]
    assert paired.startswith("1. Both builds in one job")
    gate, study = sections(text)[0]
    assert gate[:2] == ["cryptoperf", "gate"] and study[:2] == ["cryptoperf", "study"]
    (toml,) = re.findall(r"^```toml\n(.*?)^```", paired, re.S | re.M)
    Path(study[2]).write_text(toml)
    ops = [gate[i + 1] for i, a in enumerate(gate) if a == "--op"]
    assert len(ops) == 12
    base = {"noise_cv": 0.004, "latency_ns": {"rsa2048-sign": 19_000}}
    fake_worker(base)
    for folder in ("main", "pr"):
        (tmp_path / folder).mkdir()
    build(tmp_path / "main", "cryptoperf-worker", base)

    def runs_with(candidate: dict) -> tuple:
        build(tmp_path / "pr", "cryptoperf-worker", candidate)
        for f in ("gate.sqlite",):
            Path(f).unlink(missing_ok=True)
        return run(cli, gate), run(cli, study)

    same_gate, same_study = runs_with(base)
    assert same_gate.code == 0, same_gate.out + same_gate.err
    assert "regression gate (--fail-on slower): passed" in same_gate.out
    assert "in any one of its 12 comparisons" in same_gate.out and "wall time" in same_gate.out
    assert same_study.code == 0 and "regression gate (--fail-on slower): passed" in same_study.out, same_study.out
    slow_gate, slow_study = runs_with({**base, "latency_ns": {"rsa2048-sign": 20_900}})
    assert slow_gate.code == 1 and "FAILED by 1 cell(s): openssl rsa2048-sign candidate" in slow_gate.out, slow_gate.out
    assert slow_study.code == 1 and "FAILED by 1 cell(s): openssl rsa2048-sign pr" in slow_study.out, slow_study.out
