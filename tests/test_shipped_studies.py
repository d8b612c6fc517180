"""The study files the project ships — studies/*.toml and every study file under docs/ — state
their power in their dry run, and find a 5 % change at CV 3 % 80 % of the time by their last
look, or say why not in ``power_note`` (issue 24: "power you can see").

The figure is the plan's own (``PreparedStudy.smallest_effect``: ``stats.smallest_effect`` over the
study's comparisons and looks), planned against the fake worker, which announces every
operation and workload the shipped studies use; the dry run's text is checked to carry it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from cryptoperf import engine
from cryptoperf.engine.prepare import DESIGN_CHANGE
from cryptoperf.report.text import detectable_text
from cryptoperf.report.study_text import duration_text

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests


def shipped() -> list[Path]:
    """studies/*.toml and every *.toml under docs/ with a [study] table."""
    docs = [p for p in sorted((ROOT / "docs").rglob("*.toml")) if "[study]" in p.read_text()]
    return sorted((ROOT / "studies").glob("*.toml")) + docs


SHIPPED = shipped()


def test_the_shipped_studies_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in SHIPPED}
    assert len(SHIPPED) >= 15, names
    assert {"studies/quick.toml", "studies/ike-phase1.toml", "docs/economics/tls-routes.toml",
            "docs/first-hour/tls-certs.toml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_shipped_study_states_its_power_and_finds_five_percent_or_says_why(path, cli, fake_worker, monkeypatch):
    fake_worker({"devices": ["pkcs11"]})
    fake_worker.fips()
    fake_worker.go()
    # the fake's token: a module named, so that no SoftHSM2 token is made for a dry run's plan
    monkeypatch.setenv("CRYPTOPERF_PKCS11_MODULE", "/fake/libpkcs11.so")
    res = cli("study", path, "--dry-run", "--no-setup")
    assert res.code == 0, res.err
    plan = engine.prepare_study(path, setup=False, dry_run=True)
    first, last = plan.smallest_effect()
    (power,) = [line for line in res.err.splitlines() if line.startswith("power: ")]
    assert f"finds {detectable_text(first)} at CV 3 % per repetition ({plan.looks[0]} blocks" in power, power
    (planned,) = [line for line in res.err.splitlines() if line.startswith(f"study {plan.study.name}: ")]
    if len(plan.looks) > 1:
        assert f"{detectable_text(last)} by its last look ({plan.looks[-1]} blocks)" in power, power
        assert f"at most about {duration_text(plan.worst_case_seconds())};" in planned, planned
    assert last <= DESIGN_CHANGE or plan.study.power_note, (
        f"{path.name}: by its last look it finds {last:.2%} at CV 3 %, not 5 %, and has no power_note")
    if last > DESIGN_CHANGE:
        assert power.endswith(f"; not 5 %, because {plan.study.power_note}"), power
    else:
        assert "because" not in power, power
    assert "warning: 80 %" not in res.err, res.err
