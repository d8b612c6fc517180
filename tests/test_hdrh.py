"""The pinned hdrhistogram: ``stats.latency_of`` calls its private
``HdrHistogram._hdr_median_equiv_value`` (to compute the mean and standard deviation over the
recorded buckets only, bit for bit as hdrh's own ``get_mean_value``/``get_stddev`` do), so
pyproject.toml pins hdrhistogram to the versions tested; these tests say so plainly if a release
drops or changes that function."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from cryptoperf import stats

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def test_the_private_function_stats_uses_is_there():
    fn = getattr(HdrHistogram, "_hdr_median_equiv_value", None)
    assert callable(fn), ("hdrhistogram no longer has HdrHistogram._hdr_median_equiv_value, which "
                          "stats.latency_of calls: compute the bucket midpoints another way before "
                          "widening the hdrhistogram pin in pyproject.toml")
    h = HdrHistogram(1, 3_600_000_000_000, 3)
    # the middle of the value's bucket
    assert fn(h, 1000) == 1000
    low, high = h.get_lowest_equivalent_value(123_456), h.get_highest_equivalent_value(123_456)
    assert low < fn(h, 123_456) < high and fn(h, 123_456) - low in ((high - low) // 2, (high - low + 1) // 2)


def test_latency_of_agrees_with_hdrh_itself():
    h = HdrHistogram(1, 3_600_000_000_000, 3)
    for value, count in ((800, 50), (1_234, 900), (98_765, 40), (7_000_000, 3)):
        h.record_value(value, count)
    lat = stats.latency_of(h)
    assert lat.mean_ns == h.get_mean_value() and lat.stddev_ns == h.get_stddev()


def test_the_installed_hdrhistogram_is_inside_the_pin():
    (spec,) = [d for d in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
               if d.startswith("hdrhistogram")]
    low, high = re.fullmatch(r"hdrhistogram>=([\d.]+),<([\d.]+)", spec).groups()
    installed = metadata.version("hdrhistogram")
    assert _version(low) <= _version(installed) < _version(high), (
        f"hdrhistogram {installed} is outside the tested pin {spec} (stats/figures.py uses its private API)")
