"""Planning: cells and the interleaved schedule."""

from pathlib import Path

from cryptoperf import plan, study

ROOT = Path(__file__).resolve().parents[1]


def key_size():
    s = study.load(ROOT / "studies" / "key-size.toml")
    return study.check_against_worker(s, ["openssl", "aws-lc"], ["sha1", "sha256", "rsa2048-sign",
                                                                  "rsa2048-verify", "rsa4096-sign",
                                                                  "rsa4096-verify"])


def test_key_size_has_24_cells_and_120_runs():
    s = key_size()
    cells = plan.expand(s)
    assert len(cells) == 24
    runs = plan.schedule(cells, s.repetitions)
    assert len(runs) == 120
    assert len({c.key for c in cells}) == 24


def test_schedule_interleaves_configurations():
    s = key_size()
    runs = plan.schedule(plan.expand(s), s.repetitions)
    # A B A B ... within each group, and every repetition visits every cell before the next
    configs = [r.cell.configuration for r in runs]
    assert configs[:4] == ["sha1-rsa2048", "sha256-rsa4096"] * 2
    reps = [r.repetition for r in runs]
    assert reps == sorted(reps)
    assert [r.index for r in runs] == list(range(120))
    first_group = [r for r in runs if r.cell.group == runs[0].cell.group]
    assert [(r.repetition, r.cell.configuration) for r in first_group][:4] == [
        (1, "sha1-rsa2048"), (1, "sha256-rsa4096"), (2, "sha1-rsa2048"), (2, "sha256-rsa4096")]


def test_run_request_carries_params():
    s = key_size()
    runs = plan.schedule(plan.expand(s), 2)
    settings = plan.Settings(seconds=0.8, warmup_s=0.2, threads=1, timeout_s=60)
    req = plan.run_request(runs[1], settings)
    assert req == {"type": "run", "id": "openssl/sign/4096/sha256-rsa4096#1", "backend": "openssl",
                   "op": "rsa4096-sign", "params": {"digest": "sha256", "size_bytes": 4096},
                   "threads": 1, "warmup_s": 0.2, "seconds": 0.8, "batch": None,
                   "cpu_mask": "baseline"}
    digest = next(r for r in runs if r.cell.label == "digest")
    assert plan.run_request(digest, settings)["params"] == {"size_bytes": 4096}


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
    s = study.check_against_worker(s, ["openssl"], ["x25519-derive", "ecdh-p256-derive"])
    cells = plan.expand(s)
    assert [(c.op, c.size_bytes) for c in cells] == [("x25519-derive", None), ("ecdh-p256-derive", None)]
    assert cells[0].worker_params() == {}


def test_key_size_budget_under_five_minutes():
    s = key_size()
    runs = plan.schedule(plan.expand(s), s.repetitions)
    settings = plan.Settings(s.seconds, s.warmup_s, s.threads, s.timeout_s)
    assert plan.estimated_seconds(len(runs), settings, per_run_overhead_s=1.0) < 300


def test_pq_migration_plan_and_budget():
    from test_study import KNOWN_BACKENDS, KNOWN_OPS, PQ_OPS
    s = study.check_against_worker(study.load(ROOT / "studies" / "pq-migration.toml"), KNOWN_BACKENDS,
                                   KNOWN_OPS + PQ_OPS)
    cells = plan.expand(s)
    assert len(cells) == 2 * 5 * 4
    runs = plan.schedule(cells, s.repetitions)
    settings = plan.Settings(s.seconds, s.warmup_s, s.threads, s.timeout_s)
    assert plan.estimated_seconds(len(runs), settings, per_run_overhead_s=1.0) < 300
    sign = next(r for r in runs if r.cell.op == "ml-dsa-65-sign")
    assert plan.run_request(sign, settings)["params"] == {"size_bytes": 32}
    share = next(r for r in runs if r.cell.op == "x25519mlkem768-keygen")
    assert plan.run_request(share, settings)["params"] == {}
