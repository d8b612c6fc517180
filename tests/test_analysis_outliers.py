"""An outlier block in a study's paired comparison: set aside from every interval of the
comparison, named in its note and in the method every report prints (``analysis``)."""

import json
import math

import numpy as np

from cryptoperf import analysis, stats
from cryptoperf.model import Cell
from cryptoperf.simulate.study import cell_summary


def _deltas(conf_factor_at: dict[int, float], settings=analysis.Settings(multiplicity=False), blocks=10, seed=3):
    rng = np.random.default_rng(seed)
    base = {b: 1000.0 * math.exp(rng.normal(0, 0.015)) for b in range(1, blocks + 1)}
    conf = {b: 1050.0 * math.exp(rng.normal(0, 0.015)) * conf_factor_at.get(b, 1.0) for b in range(1, blocks + 1)}
    summaries = {c.key: cell_summary(c, v) for c, v in ((Cell("base", "sim", "op", "sim-op"), base),
                                                    (Cell("new", "sim", "op", "sim-op"), conf))}
    deltas, m, level = analysis.deltas(summaries, "base", settings)
    return deltas[0], analysis.Analysis(summaries, deltas, settings, m, level)


def test_an_outlier_block_is_set_aside_from_every_interval_and_named():
    d, a = _deltas({7: 3.0})
    assert d.set_aside == (7,)
    assert d.note.startswith("block 7 set aside as an outlier (p50 latency ratio ×3.")
    for ci in (d.latency, d.throughput, d.cpu_per_op):
        assert ci.n == 9 and ci.df == 8 and len(ci.set_aside) == 1
    assert d.blocks == 10  # the paired blocks; the intervals say how many they kept
    assert d.verdict.kind == stats.SLOWER and d.latency.low > 1.0
    assert "outlier blocks set aside" in a.method and "(in 1 comparison)" in a.method
    doc = json.loads(json.dumps(d.as_dict()))
    assert doc["set_aside"] == [7] and doc["latency"]["set_aside"] == 1 and "block 7" in doc["note"]


def test_without_the_screen_the_same_data_lose_the_change():
    d, a = _deltas({7: 3.0}, analysis.Settings(multiplicity=False, outlier_screen=False))
    assert d.set_aside == () and d.note == "" and d.verdict.kind != stats.SLOWER
    assert "outlier" not in a.method


def test_clean_data_set_nothing_aside_and_the_method_still_says_how_it_would():
    d, a = _deltas({})
    assert d.set_aside == () and d.latency.n == 10 and d.note == ""
    assert analysis.SCREEN_TEXT in a.method and "(in " not in a.method


def test_fewer_blocks_than_the_screen_needs_are_never_screened():
    d, _ = _deltas({2: 3.0}, blocks=4)
    assert d.set_aside == () and d.latency.n == 4
