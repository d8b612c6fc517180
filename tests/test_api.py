"""The Python API: the README's example runs exactly as written (against the fake worker), and
``run_study`` returns the stored run it wrote, analysed once."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

ROOT = Path(__file__).resolve().parents[1]


def readme_python_api_block() -> str:
    """The first ```python block under the README's '## Python API' heading."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "README's Python API section has no ```python block"
    return m.group(1)


def test_the_readme_example_runs_as_written(fake_worker, tmp_path, monkeypatch, capsys):
    pytest.importorskip("pandas")
    fake_worker({"config_factor": {"chacha-sha512": 1.25}, "noise_cv": 0.01})
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "quick.toml").write_text((ROOT / "studies" / "quick.toml").read_text())
    monkeypatch.chdir(tmp_path)
    code = readme_python_api_block()
    namespace: dict = {}
    exec(compile(code, "README.md (Python API)", "exec"), namespace)
    run, df = namespace["run"], namespace["df"]
    out = capsys.readouterr().out
    assert run.study.name == "quick" and run.meta["status"] == "complete"
    assert len(run.deltas) == 4 and all(d.verdict is not None for d in run.deltas)
    assert "p50 latency 25" in out and "% higher [" in out
    assert (tmp_path / "runs.sqlite").exists() and run.json_path.exists() and run.reports["html"].exists()
    assert set(df["configuration"]) == {"aes-sha256", "chacha-sha512"} and (df["block"] > 0).all()


def test_run_study_analyses_once_and_matches_the_store(fake_worker, tmp_path, monkeypatch):
    """What run_study returns is what loading the stored run gives: the same deltas."""
    import cryptoperf
    from cryptoperf import analysis
    from cryptoperf.store import stored_run as stored
    from cryptoperf.store.db import Store
    fake_worker({"config_factor": {"chacha-sha512": 1.25}, "noise_cv": 0.02})
    calls = []
    real = analysis.analyse
    monkeypatch.setattr(analysis, "analyse", lambda *a, **k: calls.append(1) or real(*a, **k))
    run = cryptoperf.run_study(ROOT / "studies" / "quick.toml", store=tmp_path / "s.sqlite",
                               out_dir=tmp_path / "out", reports=True)
    assert len(calls) == 1  # fixed study: analysed once, reports rendered from that object
    with Store(tmp_path / "s.sqlite") as st:
        again = stored.load_run(st, run.id)
    assert again.deltas == run.deltas and again.summaries.keys() == run.summaries.keys()


def test_speed_api(fake_worker, tmp_path):
    import cryptoperf
    fake_worker()
    r = cryptoperf.speed(backends=["openssl"], ops=["sha256"], seconds=0.01, warmup_s=0, store=tmp_path / "s.sqlite")
    (o,) = r.outcomes
    assert o.ok and o.cell.op == "sha256" and r.run_id == 1
