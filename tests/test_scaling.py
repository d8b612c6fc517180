"""Throughput against sessions (cryptoperf.scaling): rows of one operation at several thread
counts read together — the per-count geometric mean with its interval, the speed-up, the peak,
and whether the peak is the largest count measured — in the analysis, its JSON and the report."""

import math
from types import SimpleNamespace

import pytest

from cryptoperf import scaling
from cryptoperf.model import Cell

pytestmark = pytest.mark.parallel


def summary(config: str, threads: int | None, ops: list[float], label: str = "sign", backend: str = "pkcs11"):
    """What scaling reads of a CellSummary: its cell and its per-block ops/s."""
    row = f"{label} @ {threads} thread{'s' if threads != 1 else ''}" if threads else label
    params = {"threads": str(threads)} if threads else {}
    cell = Cell(configuration=config, backend=backend, op="rsa2048-sign", label=row, params=params)
    return SimpleNamespace(cell=cell, ops_per_s_by_block=dict(enumerate(ops, 1)))


def test_a_device_that_saturates_peaks_below_the_largest_count():
    rows = [summary("token", 1, [100, 102, 98]), summary("token", 2, [190, 200, 195]),
            summary("token", 4, [180, 185, 190])]
    (s,) = scaling.scaling(rows)
    assert [p.sessions for p in s.points] == [1, 2, 4] and s.operation == "sign"
    assert s.peak.sessions == 2 and not s.beyond_counts
    first = math.exp(sum(map(math.log, [100, 102, 98])) / 3)
    assert s.points[1].speedup == pytest.approx(s.points[1].ops_per_s.value / first)
    assert s.points[0].ops_per_s.low < s.points[0].ops_per_s.value < s.points[0].ops_per_s.high
    assert s.text().startswith("most throughput at 2 sessions") and "4 gave no more" in s.text()
    d = s.as_dict()
    assert d["peak_sessions"] == 2 and d["beyond_counts"] is False and len(d["points"]) == 3


def test_a_peak_at_the_largest_count_is_a_lower_bound_and_single_counts_are_left_out():
    rows = [summary("token", 1, [100, 100]), summary("token", 4, [300, 310]),
            summary("software", 1, [500, 510]),  # one count only: no scaling
            summary("token", None, [50, 50], label="digest")]  # no threads: not a session row
    (s,) = scaling.scaling(rows)
    assert s.configuration == "token" and s.beyond_counts and s.peak.sessions == 4
    assert "more sessions may give more" in s.text()


def test_a_study_at_several_thread_counts_reports_them_from_its_analysis(fake_worker, tmp_path):
    """A study with threads = [1, 2] (fake worker): the stored run's analysis has the scaling,
    its JSON document carries it, and the Markdown report's section shows the same rows."""
    import json

    import cryptoperf
    fake_worker({"noise_cv": 0.01})
    path = tmp_path / "s.toml"
    path.write_text(STUDY)
    run = cryptoperf.run_study(path, store=tmp_path / "s.sqlite", out_dir=tmp_path / "out", reports=True)
    found = run.analysis.scaling
    assert {(s.configuration, tuple(p.sessions for p in s.points)) for s in found} == {("software", (1, 2)), ("other", (1, 2))}
    doc = json.loads(run.json_path.read_text())
    assert [d["text"] for d in doc["analysis"]["scaling"]] == [s.text() for s in found]
    md = run.reports["md"].read_text()
    assert "## Throughput vs sessions" in md and found[0].text() in md


STUDY = """\
[study]
name = "sessions"
baseline = "software"
repetitions = 3
seconds = 0.02
warmup_s = 0

[[configuration]]
name = "software"
backend = "openssl"

[[configuration]]
name = "other"
backend = "aws-lc"

[[operation]]
label = "sign"
op = "rsa2048-sign"
threads = [1, 2]
"""
