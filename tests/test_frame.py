"""cryptoperf.load(): one DataFrame row per configuration × operation × block (calibration left out)."""

import sys

import pytest

import cryptoperf
from cryptoperf.errors import MissingDependency, StoreError
from cryptoperf.store.frame import COLUMNS
from stored_runs import DRIFT, two_runs

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return two_runs(tmp_path_factory.mktemp("frame"))


def test_latest_run_rows_and_columns(store):
    df = cryptoperf.load(store=store)
    # run 2: 2 configurations × 2 sizes × 3 repetitions = 12 rows
    assert list(df.columns) == list(COLUMNS) and len(df) == 12
    assert set(df["run_id"]) == {2} and set(df["status"]) == {"ok"}
    assert str(df["size_bytes"].dtype) == "Int64" and df["p50_ns"].dtype == "float64"
    a = df[(df.configuration == "A") & (df.size_bytes == 1024)].sort_values("block")
    # sha256 scripted at 3036 ns × drift (1, 1.05, 0.97) → 3036, 3188, 2945 ns (rounded)
    assert list(a["block"]) == [1, 2, 3] and set(a["superseded"]) == {False} and list(a["op"]) == ["sha256"] * 3
    assert list(a["process_cpu_ns_per_op"]) == [round(3036 * f) for f in DRIFT]
    assert a["ops_per_s"].iloc[0] == pytest.approx(1e9 / 3036)
    assert a["bytes_per_s"].iloc[0] == pytest.approx(1024 * 1e9 / 3036)
    assert a["p50_ns"].iloc[0] == pytest.approx(3036, rel=1e-3)  # HdrHistogram: 3 significant digits
    assert a["steal_pct"].iloc[0] == pytest.approx(0.5)  # 1 of 200 ticks
    assert a["library_version"].iloc[0] == "fake-1.0" and a["study"].iloc[0] == "t"


def test_several_runs_by_id(store):
    df = cryptoperf.load([1, "2"], store=store)
    assert len(df) == 6 + 12 and list(df["run_id"].unique()) == [1, 2]
    assert len(cryptoperf.load(1, store=str(store))) == 6


def test_importable_from_the_package():
    from cryptoperf import load
    from cryptoperf.store.frame import load as frame_load
    assert load is frame_load and "load" in cryptoperf.__all__


def test_unknown_run_and_missing_store(store, tmp_path):
    with pytest.raises(StoreError, match="no run 7 in store"):
        cryptoperf.load(7, store=store)
    with pytest.raises(StoreError, match="run id must be a number, 'latest'"):
        cryptoperf.load("seven", store=store)
    with pytest.raises(StoreError, match="no store at"):
        cryptoperf.load(store=tmp_path / "nope.sqlite")


def test_clear_error_without_pandas(store, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # makes `import pandas` raise ImportError
    with pytest.raises(ImportError) as e:
        cryptoperf.load(store=store)
    assert isinstance(e.value, MissingDependency)
    assert "pip install '.[data]' in the cryptoperf checkout" in str(e.value)


def test_load_says_which_run_latest_was(tmp_path, capsys):
    pytest.importorskip("pandas")
    import cryptoperf
    from stored_runs import two_runs
    store = two_runs(tmp_path)
    capsys.readouterr()
    cryptoperf.load(store=store)
    assert "cryptoperf.load: using run 2 (study t, started" in capsys.readouterr().err
    cryptoperf.load(1, store=store)
    assert capsys.readouterr().err == ""
