"""The storage workload on the orchestrator's side, against the fake worker: byte-rate levels,
the shipped study end to end (throughput beside CPU %, ratios to clear with intervals, the CPU
needed at a fixed rate, the optional dm-crypt operation skipped with one line), the work
directory (private per repetition, removed, checked up front: a full tmpfs and a read-only one
are refused with one line each).

The real worker's side — ciphertext on disk that another library decrypts, files gone after
Ctrl-C and kill -9 — is in test_real_storage.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, WORKER_HELLO, assert_one_line_error, worker_rules
from cryptoperf import levels, stats, workdir
from cryptoperf.model import Cell

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

STUDY = ROOT / "studies" / "encrypted-storage.toml"

SMALL = """\
[study]
name = "storage"
baseline = "clear"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0
verdict_on = "by_load"
work_dir = "{work}"

[[configuration]]
name = "clear"
scheme = "clear"

[[configuration]]
name = "aes-256-xts"
scheme = "aes-256-xts"

[[operation]]
label = "random read, direct"
op = "storage"
params = {{ scheme = "{{scheme}}", pattern = "random", block_bytes = "64KiB", file_bytes = "{file}", direct = true }}
loads = ["closed:1", "closed:4", "open:100MB/s/8"]
"""


def small(work: Path, file: str = "8MiB") -> str:
    return SMALL.format(work=work, file=file)


# ----------------------------------------------------------------------------- byte rates


def test_a_byte_rate_is_sent_as_ios_per_second_and_labelled_in_mb_s():
    load = levels.parse_load("open:100MB/s/16")
    assert (load.kind, load.connections, load.rate_per_s, load.bytes_per_s) == ("open", 16, None, 100e6)
    assert load.label == "100 MB/s"
    assert levels.worker_load("open:100MB/s/16", 65536) == "open:1525.88/16"
    assert levels.worker_load("open:1GiB/s", 1 << 20) == "open:1024"  # the worker's open_threads
    assert levels.worker_load("closed:10", 65536) == "closed:10"
    with pytest.raises(ValueError, match="needs the bytes per transaction"):
        levels.worker_load("open:100MB/s", None)
    spec = worker_rules().workloads["storage"]
    cell = Cell("clear", "openssl", "r @ 100 MB/s", "storage",
                {"scheme": "clear", "block_bytes": 4096, "load": "open:100MB/s/4"}, None, spec=spec)
    assert cell.worker_params()["load"] == "open:24414.1/4"
    assert cell.load == "open:100MB/s/4"  # the cell keeps the study's level (its label, its verdict metric)
    # without a block size, the worker's default (its spec's bytes_per_tx_param's default)
    cell = Cell("clear", "openssl", "r @ 100 MB/s", "storage", {"load": "open:100MB/s/4"}, None, spec=spec)
    assert cell.worker_params()["load"] == f"open:{100e6 / spec.defaults[spec.bytes_per_tx_param]:.6g}/4"
    # a cell rebuilt from the store has no spec: its level as the study wrote it
    assert Cell("clear", "openssl", "r", "storage", {"load": "open:100MB/s"}).worker_params()["load"] == "open:100MB/s"


def test_by_load_decides_a_byte_rate_level_on_cpu_per_operation():
    assert stats.metric_for("by_load", "open:100MB/s/16") == "cpu_per_op"
    assert stats.metric_for("by_load", "open:1525/16") == "latency"
    assert stats.metric_for("by_load", "closed:10") == "throughput"
    assert stats.metric_for("throughput", "open:100MB/s") == "throughput"


def test_the_storage_byte_rate_and_file_sizes_are_the_workers():
    entry = WORKER_HELLO["op_params"]["storage"]
    spec = worker_rules().workloads["storage"]
    assert spec.takes_level("open_bytes") and spec.needs_dir
    assert spec.bytes_per_tx({}) == int(entry["defaults"][entry["bytes_per_tx_param"]])
    assert spec.file_bytes({}) == int(entry["defaults"][entry["file_bytes_param"]])
    assert spec.file_bytes({"file_bytes": 4096}) == 4096


# ---------------------------------------------------------------------- the study end to end


def test_the_shipped_study_plans_every_scheme_at_every_level_and_skips_dm_crypt_here(fake_worker, cli, tmp_path,
                                                                                      monkeypatch):
    fake_worker()
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(tmp_path / "data"))
    res = cli("study", STUDY, "--dry-run")
    assert res.code == 0, res.err
    assert ("skipped: operation 'dm-crypt random read, direct' (optional): configuration 'clear' on openssl: "
            "dm-crypt layer unavailable") in res.err
    lines = [l for l in res.out.splitlines() if " op=storage " in l]
    schemes = {json.loads(l.split("params=", 1)[1].split("}", 1)[0] + "}")["scheme"] for l in lines}
    assert schemes == {"clear", "aes-128-xts", "aes-256-xts", "aes-256-gcm"}
    assert not any("dm-crypt" in l for l in lines)
    # the byte-rate level reaches the worker as I/Os per second of 64 KiB
    assert any('"load": "open:1525.88/16"' in l for l in lines)
    assert any('"direct": "true"' in l and '"file_bytes": "33554432"' in l for l in lines)


def test_a_storage_study_reports_throughput_beside_cpu_and_ratios_to_clear(fake_worker, cli, tmp_path):
    fake_worker({"noise_cv": 0.01})
    work = tmp_path / "work"
    (tmp_path / "s.toml").write_text(small(work))
    res = cli("study", tmp_path / "s.toml", "--out", tmp_path / "out")
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    verdicts = {d["label"]: d["verdict"] for d in doc["deltas"]}
    # Direct I/O: the fake's device is the limit, so the throughput is the same...
    assert verdicts["random read, direct @ c=1"]["metric"] == "throughput"
    assert verdicts["random read, direct @ c=1"]["kind"] == "equivalent"
    # ... and at the fixed rate the CPU is what differs: AES-256-XTS needs more per I/O.
    assert verdicts["random read, direct @ 100 MB/s"]["metric"] == "CPU time per operation"
    assert verdicts["random read, direct @ 100 MB/s"]["kind"] == "slower"
    # and says so: more CPU per I/O, not "slower" (its latency and throughput barely moved)
    assert verdicts["random read, direct @ 100 MB/s"]["text"].startswith("needs "), verdicts
    assert " CPU per I/O [" in verdicts["random read, direct @ 100 MB/s"]["text"]
    md = next((tmp_path / "out").glob("*.md")).read_text()
    section = md[md.index("## Storage: throughput and CPU %"):]
    assert "files of 8 MiB, 64 KiB per I/O, direct I/O, random read" in section
    assert "Verdicts on throughput (2 comparisons), CPU time per operation (1)." in section
    row = next(l for l in section.splitlines() if l.startswith("| 4 threads | aes-256-xts"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    mb_s, cpu, ratio, cpu_ratio = cells[2], float(cells[6]), cells[9], cells[10]
    assert float(mb_s.split()[0]) == pytest.approx(400, rel=0.01)  # the fake device's 400 MB/s
    # the fake's AES-256-XTS costs 0.18 ns/B of user time + 5 µs of system per 64 KiB I/O, at
    # 6104 I/Os per s on 2 CPUs: (0.18 × 65536 + 5000) ns × 6104 /s ÷ 2 CPUs = 5.13 % of the host
    assert cpu == pytest.approx(5.13, rel=0.03)
    assert ratio.startswith("1× [") and cpu_ratio.startswith("2.")
    rate = md[md.index("## Storage: CPU to sustain a throughput"):]
    assert "| random read, direct on openssl | 100 MB/s | aes-256-xts |" in rate
    # the generic workload table leaves storage to its own sections
    assert "## Throughput vs load" not in md
    # every repetition's directory is gone; the work directory itself stays
    assert work.is_dir() and list(work.iterdir()) == []


def test_the_html_report_draws_bars_and_cpu_lines_per_scheme(fake_worker, cli, tmp_path):
    fake_worker()
    (tmp_path / "s.toml").write_text(small(tmp_path / "work"))
    res = cli("study", tmp_path / "s.toml", "--out", tmp_path / "out")
    assert res.code == 0, res.err
    html = next((tmp_path / "out").glob("*.html")).read_text()
    assert 'data-plot="storage-throughput-cpu"' in html
    for scheme in ("clear", "aes-256-xts"):
        assert f'-bars-{scheme}-4"' in html and f'-cpu-{scheme}"' in html
    assert 'id="storage-rate"' in html


# --------------------------------------------------------------------------- work directory


def test_a_full_work_directory_is_refused_up_front_in_one_line(fake_worker, tmpfs, tmp_path):
    fake_worker()
    disk = tmpfs("full")  # 4 MiB in all, for files of 8 MiB
    (tmp_path / "s.toml").write_text(small(disk))
    from conftest import run_subprocess
    res = run_subprocess("study", tmp_path / "s.toml", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o",
                         env={"CRYPTOPERF_WORKER": os.environ["CRYPTOPERF_WORKER"]})
    line = assert_one_line_error(res, f"work directory {disk} has 4 MiB free, the study's files need 16 MiB",
                                 "s.toml", "work_dir")
    assert "free space or choose a smaller file_bytes" in line


def test_a_read_only_work_directory_is_refused_up_front_in_one_line(fake_worker, tmpfs, tmp_path):
    fake_worker()
    ro = tmpfs("ro", "ro")
    (tmp_path / "s.toml").write_text(small(ro))
    from conftest import run_subprocess
    res = run_subprocess("study", tmp_path / "s.toml", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o",
                         env={"CRYPTOPERF_WORKER": os.environ["CRYPTOPERF_WORKER"]})
    assert_one_line_error(res, f"work directory {ro} is not writable", "Read-only file system", "work_dir")


def test_sweep_removes_only_dead_orchestrators_directories(tmp_path):
    """A directory named for a pid that no longer runs goes; one of a live process, one with
    another name, and a symbolic link (even named like one) stay, with what they point to."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"cryptoperf-io-{dead.pid}-abc"
    live = tmp_path / f"cryptoperf-io-{os.getpid()}-def"
    other = tmp_path / "cryptoperf-io-notapid-x"
    mine = tmp_path / "keep-me"
    for d in (stale, live, other, mine):
        d.mkdir()
        (d / "data").write_bytes(b"x")
    link = tmp_path / f"cryptoperf-io-{dead.pid}-link"
    link.symlink_to(mine)
    assert workdir.sweep_stale(str(tmp_path)) == [str(stale)]
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(
        [live.name, other.name, mine.name, link.name])
    assert (mine / "data").exists()


def test_file_workload_threads_beyond_the_cpus_are_one_note_not_a_warning_per_level(cli, fake_worker, tmp_path):
    """closed:4 on the fake worker's 2 CPUs: a storage level's threads mostly wait on the device
    (a queue depth), so the dry run says so once, as a note, not as a warning."""
    fake_worker()
    path = tmp_path / "s.toml"
    path.write_text(small(tmp_path))
    res = cli("study", path, "--dry-run")
    assert res.code == 0, res.err
    assert not [l for l in res.err.splitlines() if l.startswith("warning:") and "logical CPUs" in l]
    notes = [l for l in res.err.splitlines() if "file workload levels" in l]
    assert len(notes) == 1 and "closed:4" in notes[0] and "queue depth" in notes[0], res.err
