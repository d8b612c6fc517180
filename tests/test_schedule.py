"""Scheduling: cells, randomised complete blocks, calibration, sequential looks, run requests."""

from collections import Counter
from pathlib import Path

import pytest

from conftest import worker_rules
from cryptoperf import schedule, study

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

ROOT = Path(__file__).resolve().parents[1]


def key_size():
    return study.check_against_worker(study.load(ROOT / "studies" / "key-size.toml"),
                                      worker_rules(("openssl", "aws-lc")))


def test_key_size_has_24_cells():
    cells = schedule.expand(key_size())
    assert len(cells) == 24 and len({c.key for c in cells}) == 24
    assert len(schedule.groups(cells)) == 12


def test_a_block_runs_every_configuration_of_its_group_once_in_a_seeded_order():
    s = key_size()
    cells = schedule.expand(s)
    seed = 1
    reps = schedule.blocks(cells, 1, 10, seed=seed)
    assert len(reps) == 24 * 10 and [r.index for r in reps] == list(range(240))
    by_block_group = Counter((r.block, r.cell.group) for r in reps)
    assert set(by_block_group.values()) == {2}
    for (b, g), _ in by_block_group.items():
        members = [r for r in reps if r.block == b and r.cell.group == g]
        # a block's repetitions are consecutive, and positions 0..n-1 name their order
        assert [r.index for r in members] == list(range(members[0].index, members[0].index + 2))
        assert sorted(r.position for r in members) == [0, 1]
        assert {r.cell.configuration for r in members} == {"sha1-rsa2048", "sha256-rsa4096"}
    # the same seed gives the same schedule; another seed another one
    again = schedule.blocks(cells, 1, 10, seed=seed)
    assert [(r.block, r.cell.key) for r in again] == [(r.block, r.cell.key) for r in reps]
    other = schedule.blocks(cells, 1, 10, seed=seed + 1)
    assert [(r.block, r.cell.key) for r in other] != [(r.block, r.cell.key) for r in reps]


def test_no_configuration_always_goes_first():
    cells = schedule.expand(key_size())
    reps = schedule.blocks(cells, 1, 200, seed=7)
    first = Counter(r.cell.configuration for r in reps if r.position == 0)
    # 12 groups × 200 blocks: each configuration first about half the time
    assert abs(first["sha1-rsa2048"] / sum(first.values()) - 0.5) < 0.05
    group_first = Counter(next(r.cell.group for r in reps if r.block == b) for b in range(1, 201))
    assert len(group_first) > 6  # the groups' order changes from block to block too


def test_more_blocks_for_some_comparisons_only():
    s = key_size()
    cells = schedule.expand(s)
    only = [c for c in cells if c.label == "sign" and c.size_bytes == 4096]
    reps = schedule.blocks(only, 11, 20, seed=1, batches={only[0].group: 8})
    assert {r.block for r in reps} == set(range(11, 21))
    assert {r.cell.key for r in reps} == {c.key for c in only}
    assert {r.batch for r in reps if r.cell.group == only[0].group} == {8}


def test_calibration_and_group_batch():
    cells = schedule.expand(key_size())
    cal = schedule.calibration(cells)
    assert [r.block for r in cal] == [0] * 24 and all(r.calibration for r in cal)
    assert schedule.group_batch([1, 64, None, 16]) == 64 and schedule.group_batch([None]) is None


def test_looks_double_up_to_the_maximum():
    assert schedule.looks(10, None) == (10,)
    assert schedule.looks(10, 10) == (10,)
    assert schedule.looks(10, 40) == (10, 20, 40)
    assert schedule.looks(10, 60) == (10, 20, 40, 60)
    assert schedule.looks(5, 12) == (5, 10, 12)


def test_run_request_carries_params_batch_and_mask():
    s = key_size()
    cells = schedule.expand(s)
    sign = next(c for c in cells if c.configuration == "sha256-rsa4096" and c.label == "sign")
    rep = schedule.blocks([sign], 1, 1, seed=1, batches={sign.group: 4})[0]
    settings = schedule.Settings(seconds=0.8, warmup_s=0.2, threads=1, timeout_s=60)
    req = schedule.run_request(rep, settings, "0xff:0x1")
    assert req == {"type": "run", "id": "openssl/sign/4096/sha256-rsa4096#1", "backend": "openssl",
                   "op": "rsa4096-sign", "params": {"digest": "sha256", "size_bytes": 4096},
                   "threads": 1, "warmup_s": 0.2, "seconds": 0.8, "batch": 4,
                   "cpu_mask": "baseline", "cpu_vector_unmasked": "0xff:0x1"}
    cal = schedule.run_request(schedule.calibration([sign])[0], settings)
    assert cal["warmup_s"] == 0.0 and cal["seconds"] == schedule.CALIBRATION_SECONDS
    assert cal["batch"] is None and "cpu_vector_unmasked" not in cal


def test_unsized_operation_has_one_cell_without_size():
    s = study.parse("""
[study]
name = "kx"
baseline = "x"
backends = ["openssl"]
[[configuration]]
name = "x"
kx = "x25519"
[[configuration]]
name = "p"
kx = "ecdh-p256"
[[operation]]
op = "{kx}-derive"
""", "kx.toml")
    s = study.check_against_worker(s, worker_rules(("openssl",)))
    cells = schedule.expand(s)
    assert [(c.op, c.size_bytes) for c in cells] == [("x25519-derive", None), ("ecdh-p256-derive", None)]
    assert cells[0].worker_params() == {}


def test_key_size_budget_under_five_minutes():
    s = key_size()
    cells = schedule.expand(s)
    settings = schedule.Settings(s.seconds, s.warmup_s, s.threads, s.timeout_s)
    total = (schedule.calibration_seconds(len(cells), settings, 0.3)
             + schedule.estimated_seconds(len(cells) * s.repetitions, settings, 0.3))
    assert total < 300


def test_pq_migration_cells():
    s = study.check_against_worker(study.load(ROOT / "studies" / "pq-migration.toml"), worker_rules())
    cells = schedule.expand(s)
    assert len(cells) == 2 * 5 * 4
    settings = schedule.Settings(s.seconds, s.warmup_s, s.threads, s.timeout_s)
    reps = schedule.blocks(cells, 1, 1, seed=1)
    sign = next(r for r in reps if r.cell.op == "ml-dsa-65-sign")
    assert schedule.run_request(sign, settings)["params"] == {"size_bytes": 32}
    share = next(r for r in reps if r.cell.op == "x25519mlkem768-keygen")
    assert schedule.run_request(share, settings)["params"] == {}


def test_a_run_draws_a_fresh_seed_unless_the_study_pins_one():
    """An order effect must not fall on the same comparisons in every run of a file: unset, a
    run's seed is drawn anew (and differs between runs); a pinned one is used as given."""
    drawn = {schedule.new_run_seed(None) for _ in range(20)}
    assert len(drawn) >= 19 and all(0 <= x < schedule.FRESH_SEED_MAX for x in drawn)
    assert schedule.new_run_seed(7) == 7 and schedule.new_run_seed(0) == 0
