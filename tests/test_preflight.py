"""Checked before the first repetition (``preflight.check``): an output directory or a store
that cannot be written, too little disk or memory for what the study needs, are refused in one
line naming the figure (exit 2), in a dry run too, before anything is measured or stored; threads
above the logical CPUs are a warning. Read-only directories are read-only tmpfs mounts (the tests
run as root, where a chmod stops nothing); where mounting is not permitted those tests skip and
say so (docs/reliability.md, "Checked before the first repetition")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import TWO_CONFIG_STUDY, assert_one_line_error
from cryptoperf import engine
from cryptoperf.engine import preflight
from cryptoperf.errors import PreflightError
from pg_server import pg_database, pg_server, pg_url  # noqa: F401 (fixtures)

STUDY = TWO_CONFIG_STUDY.format(reps=3, timeout=5)

JOBS = """\
[study]
name = "jobs"
baseline = "a"
backends = ["aws-lc"]
repetitions = {reps}

[[configuration]]
name = "a"
cert = "rsa2048"

[[configuration]]
name = "b"
cert = "ecdsa-p256"

[[operation]]
label = "audit"
op = "fleet-job"
params = {{ job = "audit", cert = "{{cert}}", cap = {cap} }}
loads = ["targets:{targets}"]
"""


def nothing_ran(tmp_path: Path) -> bool:
    """Nothing was stored: the store (the cli fixture's tmp_path/runs.sqlite) was never made, which
    the first repetition would have done."""
    return not (tmp_path / "runs.sqlite").exists()


# ------------------------------------------------------------------ the output directory


def test_a_read_only_out_dir_is_refused_before_the_first_repetition(cli, write_study, fake_worker, tmpfs, tmp_path):
    fake_worker()
    ro = tmpfs("ro", "ro")
    for dry in ((), ("--dry-run",)):
        res = cli("study", write_study(STUDY), "--out", ro / "results", *dry)
        assert_one_line_error(res, f"--out {ro / 'results'} is not writable: Read-only file system",
                              "pass --out DIR", code=2)
    assert nothing_ran(tmp_path)


def test_an_out_dir_under_a_file_is_refused_and_nothing_is_left_behind(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    (tmp_path / "file").write_text("x")
    res = cli("study", write_study(STUDY), "--out", tmp_path / "file" / "out")
    assert_one_line_error(res, f"--out {tmp_path / 'file' / 'out'} cannot be made: {tmp_path / 'file'} is a file",
                          code=2)
    assert nothing_ran(tmp_path)
    # a dry run with a missing --out probes its parent and leaves nothing: no directory, no probe
    before = sorted(os.listdir(tmp_path))
    res = cli("study", write_study(STUDY), "--out", tmp_path / "new" / "out", "--dry-run")
    assert res.code == 0, res.err
    assert sorted(os.listdir(tmp_path)) == before and not (tmp_path / "new").exists()


def test_an_out_dir_without_hard_links_is_refused(tmp_path, monkeypatch):
    """The reports are written aside and linked into place (``render.write_text``): a
    filesystem without hard links (vfat, some FUSE mounts; simulated here, as os.link fails
    there) is named, and the probe is removed."""
    import errno

    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")
    monkeypatch.setattr(os, "link", no_links)
    problem = preflight.directory_problem(tmp_path, "--out", link=True)
    assert problem == (f"--out {tmp_path} cannot take hard links (Operation not permitted), which cryptoperf "
                       "writes its files with (written aside, then linked into place)")
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ the store


def test_a_store_on_a_read_only_filesystem_is_refused(cli, write_study, fake_worker, tmpfs, tmp_path):
    fake_worker()
    disk = tmpfs("store")
    res = cli("study", write_study(STUDY), "--out", tmp_path / "out", "--store", disk / "runs.sqlite")
    assert res.code == 0, res.err  # a first study makes the store there
    r = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for dry in ((), ("--dry-run",)):
        res = cli("study", write_study(STUDY), "--out", tmp_path / "out", "--store", disk / "runs.sqlite", *dry)
        assert_one_line_error(res, f"store {disk / 'runs.sqlite'} is not writable: Read-only file system",
                              "pass --store PATH", code=2)
    # a new store in a read-only directory: its directory is named
    res = cli("study", write_study(STUDY), "--out", tmp_path / "out", "--store", disk / "new.sqlite")
    assert_one_line_error(res, f"store {disk / 'new.sqlite'}: its directory {disk} is not writable", code=2)
    assert len(list((tmp_path / "out").glob("*.json"))) == 1  # only the first study's


def test_a_store_that_is_a_directory_is_refused(fake_worker, tmp_path, monkeypatch):
    """(--store DIR is refused by the option itself; $CRYPTOPERF_STORE and the API reach here.)"""
    fake_worker()
    (tmp_path / "dir.sqlite").mkdir()
    monkeypatch.setenv("CRYPTOPERF_STORE", str(tmp_path / "dir.sqlite"))
    with pytest.raises(PreflightError, match=f"^store {tmp_path / 'dir.sqlite'} is a directory; give a SQLite file"):
        engine.run_study(str(_write(tmp_path, STUDY)), out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_read_only_postgresql_store_is_refused_without_its_password(cli, write_study, fake_worker, pg_url,  # noqa: F811
                                                                       tmp_path):
    import psycopg
    from psycopg import sql
    from sqlalchemy.engine import make_url
    fake_worker()
    url = make_url(pg_url)
    with psycopg.connect(host=url.host, port=url.port, user=url.username, password=url.password,
                         dbname=url.database, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(
            sql.Identifier(url.database)))
    res = cli("study", write_study(STUDY), "--out", tmp_path / "out", "--store", pg_url, "--dry-run")
    line = assert_one_line_error(res, "is read-only (a standby server, or default_transaction_read_only = on)",
                                 code=2)
    assert url.password not in line and "***" in line


# ------------------------------------------------------------------ disk and memory


def test_too_little_disk_for_the_results_is_refused_with_the_figures(cli, write_study, fake_worker, tmpfs, tmp_path):
    fake_worker()
    small = tmpfs("small", size="1m")
    path = write_study(STUDY)
    plan = engine.prepare_study(path)
    needs = preflight.estimate(plan)
    assert needs.repetitions == 2 * (1 + 2 * 3)  # 2 cells: calibration + 3 blocks, each possibly re-run
    res = cli("study", path, "--out", small / "out")
    line = assert_one_line_error(res, f"the study needs about {preflight._mib(needs.report_bytes)} of disk for "
                                      f"14 repetitions and their reports (reports", "but that filesystem has 1.0 MiB free",
                                 code=2)
    assert "pass --out/--store on another filesystem" in line
    assert nothing_ran(tmp_path)


def test_store_reports_and_work_files_on_one_filesystem_are_added_up(tmp_path):
    needs = preflight.Needs(repetitions=10, store_bytes=3 << 20, report_bytes=2 << 20, work_bytes=0, memory_bytes=0)
    free = __import__("shutil").disk_usage(tmp_path).free
    assert preflight.disk_problem(needs, [("store", tmp_path, 2 * needs.store_bytes),
                                          ("reports", tmp_path / "out", needs.report_bytes)]) is None
    huge = preflight.Needs(repetitions=10, store_bytes=free // 2, report_bytes=free // 2, work_bytes=0, memory_bytes=0)
    problem = preflight.disk_problem(huge, [("store", tmp_path, huge.store_bytes),
                                            ("reports", tmp_path / "out", huge.report_bytes + (1 << 20))])
    assert problem and f"store {preflight._mib(huge.store_bytes)} ({tmp_path})" in problem
    assert f"reports {preflight._mib(huge.report_bytes + (1 << 20))} ({tmp_path / 'out'})" in problem


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_too_little_memory_for_the_heaviest_cell_is_refused_with_the_figures(fake_worker, tmp_path):
    fake_worker()
    plan = engine.prepare_study(str(_write(tmp_path, JOBS.format(reps=3, cap=200, targets=5000))))
    needs = preflight.estimate(plan)
    job = preflight.cell_memory(plan.cells[0], 1, plan.study.rules.limits)[0]
    assert needs.memory_bytes > job > 200 * preflight.THREAD_BYTES  # a slice of 200 threads at least
    meminfo = tmp_path / "meminfo"
    available = (needs.memory_bytes // 1024 - 1024) * 1024
    meminfo.write_text(f"MemTotal:  4000000 kB\nMemAvailable: {available // 1024} kB\n")
    with pytest.raises(PreflightError) as e:
        preflight.check(plan, tmp_path / "out", tmp_path / "s.sqlite", meminfo=meminfo)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"the study needs about {preflight._mib(needs.memory_bytes)} of memory at its peak")
    assert "a job of 5000 targets (agents 2, cap 200, slices 1)" in msg
    assert f"but {preflight._mib(available)} is available (MemAvailable)" in msg
    meminfo.write_text(f"MemAvailable: {needs.memory_bytes // 1024 + 1024} kB\n")
    assert preflight.check(plan, tmp_path / "out", tmp_path / "s.sqlite", meminfo=meminfo) == []
    # where the kernel says nothing, nothing is refused
    assert preflight.mem_available(tmp_path / "no-such-file") is None


def test_the_estimates_grow_with_what_the_study_asks_for(fake_worker, tmp_path):
    fake_worker()
    small = preflight.estimate(engine.prepare_study(str(_write(tmp_path, JOBS.format(reps=3, cap=5, targets=10)))))
    more = preflight.estimate(engine.prepare_study(str(_write(tmp_path, JOBS.format(reps=6, cap=5, targets=10)))))
    big = preflight.estimate(engine.prepare_study(str(_write(tmp_path, JOBS.format(reps=3, cap=50, targets=2000)))))
    assert more.repetitions == 2 * (1 + 2 * 6) and more.store_bytes > small.store_bytes
    assert big.store_bytes > small.store_bytes and big.memory_bytes > small.memory_bytes


# ------------------------------------------------------------------ threads


THREADS = STUDY.replace("seconds = 0.01", "seconds = 0.01\nthreads = 4")
CLOSED = """\
[study]
name = "tls"
baseline = "ec"
backends = ["aws-lc"]
repetitions = 3
seconds = 0.01
warmup_s = 0

[[configuration]]
name = "ec"
cert = "ecdsa-p256"

[[configuration]]
name = "rsa"
cert = "rsa2048"

[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { cert = "{cert}" }
loads = ["closed:1", "closed:8", "open:500"]
"""


def test_threads_above_the_logical_cpus_are_a_warning_not_an_error(cli, write_study, fake_worker, tmp_path):
    fake_worker()  # its hello: 2 logical CPUs
    res = cli("study", write_study(THREADS), "--dry-run")
    assert res.code == 0, res.err
    warnings = [l for l in res.err.splitlines() if l.startswith("warning:") and "logical CPUs" in l]
    assert warnings == ["warning: threads = 4 exceed the 2 logical CPUs (hash): latency then includes time "
                        "spent descheduled"]
    res = cli("study", write_study(CLOSED), "--dry-run")
    assert res.code == 0, res.err
    warnings = [l for l in res.err.splitlines() if l.startswith("warning:") and "logical CPUs" in l]
    # closed:8 only: closed:1 fits, and an open level's threads wait for their due times
    assert warnings == ["warning: load closed:8 (8 client threads) exceeds the 2 logical CPUs (full handshake "
                        "@ c=8): latency then includes time spent descheduled"]
    res = cli("study", write_study(STUDY), "--dry-run")
    assert not [l for l in res.err.splitlines() if l.startswith("warning:") and "logical CPUs" in l]


def test_the_api_checks_too_and_warns_through_python_warnings(fake_worker, tmp_path):
    fake_worker()
    with pytest.raises(PreflightError, match="is a file"):
        (tmp_path / "f").write_text("")
        engine.run_study(str(_write(tmp_path, STUDY)), store=tmp_path / "s.sqlite", out_dir=tmp_path / "f" / "o")
    assert not (tmp_path / "s.sqlite").exists()
    with pytest.warns(preflight.PreflightWarning, match="threads = 4 exceed the 2 logical CPUs"):
        run = engine.run_study(str(_write(tmp_path, THREADS)), store=tmp_path / "s.sqlite", out_dir=tmp_path / "o")
    assert run.json_path is not None and json.loads(Path(run.json_path).read_text())["kind"] == "study"
