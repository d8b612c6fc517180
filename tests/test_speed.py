"""`cryptoperf speed`: operation spellings, sizes with suffixes, --repetitions with intervals,
--param, --baseline, sizes and MB/s only where there is a message — against the fake worker."""

import json
import math
import re

import pytest

from conftest import assert_one_line_error
from cryptoperf import engine, schedule, stats
from cryptoperf.store.db import Store

FAST = ("--seconds", "0.01", "--warmup", "0")


def speed_json(cli, *args):
    res = cli("speed", "--json", *FAST, *args)
    assert res.code == 0, res.err
    return json.loads(res.out)


def table_row(out: str, *words: str) -> list[str]:
    """The cells of the first table line holding every word."""
    line = next(l for l in out.splitlines() if l.startswith("│") and all(w in l for w in words))
    return [c.strip() for c in line.strip("│").split("│")]


# --------------------------------------------------------------------------- names and sizes


def test_operation_spellings_run_the_canonical_operation(cli, fake_worker):
    fake_worker()
    doc = speed_json(cli, "-b", "OpenSSL", "--op", "SHA-256", "--op", "sha256", "--op", "SHA2-256",
                     "--op", "ecdsa-secp256r1-sign", "--op", "ML-KEM-768-encaps", "--op", "X25519MLKEM768-encaps")
    assert [(r["backend"], r["op"]) for r in doc["results"]] == [
        ("openssl", "sha256"), ("openssl", "ecdsa-p256-sign"), ("openssl", "ml-kem-768-encaps"),
        ("openssl", "x25519mlkem768-encaps")]
    assert all(r["status"] == "ok" for r in doc["results"])


def test_sha_dash_256_never_suggests_sha3_256(cli, fake_worker):
    """A worker without sha256: 'sha-256' is unknown, and SHA3-256 (another hash) is not offered."""
    from conftest import WORKER_HELLO
    fake_worker({"ops": [o for o in WORKER_HELLO["ops"] if o != "sha256"]})
    line = assert_one_line_error(cli("speed", "--op", "sha-256"), "unknown operation 'sha-256' (known: sha1, sha384",
                                 code=2)
    assert "did you mean" not in line


def test_an_ambiguous_name_lists_its_operations(cli, fake_worker):
    fake_worker()
    assert_one_line_error(cli("speed", "--op", "aes-128-gcm"),
                          "unknown operation 'aes-128-gcm'; it names several operations: 'aes-128-gcm-seal', "
                          "'aes-128-gcm-open' (give one) (known: sha1", code=2)


def test_sizes_take_suffixes(cli, fake_worker):
    fake_worker()
    doc = speed_json(cli, "-b", "openssl", "-o", "sha256", "-s", "4096", "-s", "16k", "-s", "1MiB", "-s", "4 KiB")
    assert [r["size_bytes"] for r in doc["results"]] == [4096, 16384, 1 << 20]  # 4 KiB = 4096, once
    assert all(r["bytes_per_s"] == pytest.approx(r["ops_per_s"] * r["size_bytes"]) for r in doc["results"])


def test_size_on_operations_without_a_message_is_refused(cli, fake_worker):
    fake_worker()
    assert_one_line_error(cli("speed", "-o", "x25519-derive", "-o", "ml-kem-768-encaps", "--size", "16k"),
                          "--size: x25519-derive, ml-kem-768-encaps have no message, so no size; remove --size",
                          code=2)


def test_size_applies_to_the_operations_with_a_message_and_says_so(cli, fake_worker):
    fake_worker()
    res = cli("speed", *FAST, "-b", "openssl", "-o", "sha256", "-o", "x25519-derive", "-s", "16k")
    assert res.code == 0, res.err
    assert "note: --size applies to sha256; x25519-derive has no message, so no size" in res.out
    # MB/s is blank (not 0, not a dash) for the operation without a message
    cells = table_row(res.out, "x25519-derive")
    assert cells[3] == "" and cells[5] == "" and cells[4] != ""
    sha = table_row(res.out, "sha256")
    assert sha[3] == "16 KiB" and sha[5] not in ("", "0", "—")
    doc = speed_json(cli, "-b", "openssl", "-o", "sha256", "-o", "x25519-derive", "-s", "16k")
    kx = next(r for r in doc["results"] if r["op"] == "x25519-derive")
    assert kx["size_bytes"] is None and kx["bytes_per_s"] is None
    assert doc["settings"]["notes"] == ["--size applies to sha256; x25519-derive has no message, so no size"]


# --------------------------------------------------------------------------- repetitions


def test_repetitions_give_every_figure_an_interval(cli, fake_worker, tmp_path):
    fake_worker({"noise_cv": 0.05})
    doc = speed_json(cli, "-b", "openssl", "-b", "aws-lc", "-o", "sha256", "-o", "x25519-derive", "-r", "4")
    assert doc["settings"]["repetitions"] == 4
    for r in doc["results"]:
        assert r["repetitions"] == 4 and r["repetitions_ok"] == 4
        reps = r["per_repetition"]
        assert sorted(x["block"] for x in reps) == [1, 2, 3, 4]
        ops = [x["ops_per_s"] for x in reps]
        assert len(set(ops)) == 4  # the fake's noise differs by block: each is its own repetition
        expected = stats.log_mean(ops)
        iv = r["intervals"]["ops_per_s"]
        assert iv["n"] == 4 and iv["level"] == 0.95
        assert iv["value"] == pytest.approx(expected.value) and r["ops_per_s"] == pytest.approx(expected.value)
        assert iv["ci_low"] == pytest.approx(expected.low) and iv["ci_high"] == pytest.approx(expected.high)
        assert iv["ci_low"] < r["ops_per_s"] < iv["ci_high"]
        for name in ("p50_ns", "process_cpu_ns_per_op"):
            e = stats.log_mean([x[name] for x in reps])
            assert r["intervals"][name]["ci_low"] == pytest.approx(e.low)
            assert r[name] == pytest.approx(e.value)
        if r["op"] == "x25519-derive":
            assert r["intervals"]["bytes_per_s"] is None
        assert r["histogram"].startswith("HISTF")
    # stored: every repetition, with its block and its place in the block's random order
    with Store(tmp_path / "runs.sqlite") as st:
        stored = list(st.results(1))
    assert len(stored) == 16
    assert sorted({(r["block"], r["position"]) for r in stored}) == [(b, p) for b in (1, 2, 3, 4) for p in range(4)]


def test_blocks_run_every_row_once_in_a_seeded_random_order(fake_worker, tmp_path):
    fake_worker()
    run = engine.speed(["openssl", "aws-lc", "ring"], ["sha256", "x25519-derive"], seconds=0.01, warmup_s=0,
                       repetitions=3, seed=5, store=tmp_path / "s.sqlite")
    assert len(run.outcomes) == 18 and run.repetitions == 3 and run.seed == 5
    blocks = {}
    for i, o in enumerate(run.outcomes):
        assert o.repetition.index == i
        blocks.setdefault(o.repetition.block, []).append(o)
    assert sorted(blocks) == [1, 2, 3]
    orders = []
    for b, members in blocks.items():
        assert sorted(o.cell.key for o in members) == sorted(c.key for c in run.cells)  # every row once
        assert [o.repetition.position for o in members] == list(range(6))
        orders.append([o.cell.key for o in members])
    assert len({tuple(o) for o in orders}) > 1  # not one fixed order
    # blocks after the first time the batch size the first measured, for every row
    first = {o.cell.key: o.result.batch for o in blocks[1]}
    assert all(o.repetition.batch is None for o in blocks[1])
    assert all(o.repetition.batch == first[o.cell.key] for b in (2, 3) for o in blocks[b])
    again = engine.speed(["openssl", "aws-lc", "ring"], ["sha256", "x25519-derive"], seconds=0.01, warmup_s=0,
                         repetitions=3, seed=5, store=tmp_path / "s.sqlite")
    assert [o.cell.key for o in again.outcomes] == [o.cell.key for o in run.outcomes]  # seeded
    # without a seed, each run draws its own and stores it
    fresh = [engine.speed(["openssl"], ["sha256"], seconds=0.01, warmup_s=0, repetitions=1,
                          store=tmp_path / "s.sqlite").seed for _ in range(2)]
    assert fresh[0] != fresh[1] and all(0 <= x < schedule.FRESH_SEED_MAX for x in fresh)
    # the rows come back in table order: backend, then operation
    assert [(r.cell.backend, r.cell.op) for r in run.rows()] == [
        (b, op) for b in ("openssl", "aws-lc", "ring") for op in ("sha256", "x25519-derive")]


def test_unsupported_rows_are_not_repeated(cli, fake_worker):
    fake_worker({"unsupported": {"ring/sha256": "ring has no sha256 (fake)"}})
    doc = speed_json(cli, "-b", "openssl", "-b", "ring", "-o", "sha256", "-r", "3")
    ring = next(r for r in doc["results"] if r["backend"] == "ring")
    assert ring["status"] == "unsupported" and ring["repetitions"] == 1 and ring["ops_per_s"] is None
    assert next(r for r in doc["results"] if r["backend"] == "openssl")["repetitions_ok"] == 3


def test_the_table_shows_intervals_from_three_repetitions(cli, fake_worker):
    fake_worker({"noise_cv": 0.03})
    res = cli("speed", *FAST, "-b", "openssl", "-o", "sha256", "-r", "3")
    assert res.code == 0, res.err
    cells = table_row(res.out, "sha256")
    ops, p50, cpu = cells[4], cells[6], cells[9]
    for figure in (ops, p50, cpu):
        assert "±" in figure and figure.endswith("%"), cells
    assert cells[11] == "3/3"
    assert "3 repetitions per row" in res.out and "95 % t interval" in res.out


@pytest.mark.parametrize("reps, words", [
    ("1", "1 repetition per row: no intervals; --repetitions 3 or more gives a 95 % interval"),
    ("2", "2 repetitions per row (geometric means): no intervals"),
])
def test_fewer_than_three_repetitions_say_there_is_no_interval(cli, fake_worker, reps, words):
    fake_worker({"noise_cv": 0.03})
    res = cli("speed", *FAST, "-b", "openssl", "-o", "sha256", "-r", reps)
    assert res.code == 0, res.err
    assert words in res.out and "±" not in res.out
    doc = speed_json(cli, "-b", "openssl", "-o", "sha256", "-r", reps)
    (r,) = doc["results"]
    assert r["intervals"]["ops_per_s"]["ci_low"] is None and r["intervals"]["ops_per_s"]["n"] == int(reps)


def test_one_repetition_keeps_the_figures_of_the_run(cli, fake_worker):
    fake_worker({"latency_ns": {"sha256": 2000}})
    doc = speed_json(cli, "-b", "openssl", "-o", "sha256")
    (r,) = doc["results"]
    (rep,) = r["per_repetition"]
    for name in ("ops_per_s", "p50_ns", "p99_ns", "process_cpu_ns_per_op", "bytes_per_s", "histogram"):
        assert r[name] == rep[name], name
    assert r["p50_ns"] == 2000


def test_repetitions_out_of_range(cli, fake_worker):
    fake_worker()
    assert_one_line_error(cli("speed", "-r", "0"), "Invalid value for '--repetitions'", code=2)


def test_speed_runs_with_repetitions_compare_with_intervals(cli, fake_worker, tmp_path):
    """Stored speed runs of 3 repetitions are what `compare` needs for an interval."""
    fake_worker({"noise_cv": 0.02})
    for _ in range(2):
        assert cli("speed", *FAST, "-b", "openssl", "-o", "sha256", "-r", "3").code == 0
    res = cli("compare", "1", "2", "--store", tmp_path / "runs.sqlite")
    assert res.code == 0, res.err
    row = next(l for l in res.out.splitlines() if l.startswith("│ openssl"))
    assert "n/a" not in row


# --------------------------------------------------------------------------- --param


def test_param_applies_to_the_operations_that_take_it(cli, fake_worker):
    fake_worker()
    res = cli("speed", *FAST, "-b", "openssl", "-o", "rsa2048-sign", "-o", "sha256", "-o", "ecdsa-p256-verify",
              "--param", "padding=PSS", "--param", "digest=SHA-384")
    assert res.code == 0, res.err
    assert "note: --param padding=pss applies to rsa2048-sign; sha256, ecdsa-p256-verify take no padding" in res.out
    assert "note: --param digest=sha384 applies to rsa2048-sign, ecdsa-p256-verify; sha256 takes no digest" in res.out
    assert "rsa2048-sign digest=sha384" in res.out
    doc = speed_json(cli, "-b", "openssl", "-o", "rsa2048-sign", "-o", "sha256", "-p", "padding=pss",
                     "-p", "digest=sha384")
    by = {r["op"]: r for r in doc["results"]}
    assert by["rsa2048-sign"]["params"] == {"digest": "sha384", "padding": "pss", "size_bytes": 32}
    assert by["sha256"]["params"] == {"size_bytes": 1024}
    assert doc["settings"]["params"] == {"padding": "pss", "digest": "sha384"}


@pytest.mark.parametrize("args, fragments", [
    (["-o", "sha256", "--param", "digest=sha384"],
     ["--param digest=sha384: no operation measured takes a digest (sha256); digest applies to rsa2048-sign"]),
    (["-o", "rsa2048-sign", "--param", "digest=sha385"], ["--param digest=sha385: not one of sha1, sha256"]),
    (["-o", "rsa2048-sign", "--param", "padding=psss"], ["not one of pkcs1, pss; did you mean 'pss'?"]),
    (["-o", "rsa2048-sign", "--param", "digst=sha384"], ["--param digst: unknown worker parameter; did you mean 'digest'?"]),
    (["-o", "rsa2048-sign", "--param", "size_bytes=64"], ["--param size_bytes: give message sizes with --size"]),
    (["-o", "rsa2048-sign", "--param", "digest"], ["--param 'digest' is not NAME=VALUE"]),
    (["-o", "rsa2048-sign", "-p", "digest=sha256", "-p", "digest=sha384"], ["--param digest is given twice"]),
])
def test_param_errors(cli, fake_worker, args, fragments):
    fake_worker()
    line = assert_one_line_error(cli("speed", *args), *fragments, code=2)
    if "sha385" in line:
        assert "did you mean" not in line  # never another hash


# --------------------------------------------------------------------------- --baseline


def test_baseline_summary_with_intervals_paired_by_block(cli, fake_worker):
    """mock:2 takes twice as long per byte as mock:1: half the ops/s, 2× slower."""
    fake_worker({"noise_cv": 0.01})
    args = ("-b", "mock:1", "-b", "mock:2", "-o", "sha256", "-s", "4k", "-r", "3", "--baseline", "mock:1")
    res = cli("speed", *FAST, *args)
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("against mock:1"))
    assert "paired by block over 3 repetitions" in lines[head]
    assert lines[head + 1].strip() == "sha256 4 KiB:"
    assert re.fullmatch(r"mock:2: (1\.9\d|2\.0\d)× slower \[\d\.\d\d, \d\.\d\d\] than mock:1", lines[head + 2].strip())
    doc = speed_json(cli, *args)
    (c,) = doc["baseline"]["comparisons"]
    assert doc["baseline"]["backend"] == "mock:1" and c["backend"] == "mock:2" and c["op"] == "sha256"
    assert c["ratio"] == pytest.approx(0.5, rel=0.03)
    iv = c["interval"]
    assert iv["method"] == stats.PAIRED_T and iv["n"] == 3 and iv["ci_low"] < c["ratio"] < iv["ci_high"]
    # the ratio is the paired geometric mean of the per-block ratios
    base = {x["block"]: x["ops_per_s"] for r in doc["results"] if r["backend"] == "mock:1" for x in r["per_repetition"]}
    mine = {x["block"]: x["ops_per_s"] for r in doc["results"] if r["backend"] == "mock:2" for x in r["per_repetition"]}
    expected = stats.paired_log_ratio([mine[b] for b in (1, 2, 3)], [base[b] for b in (1, 2, 3)])
    assert c["ratio"] == pytest.approx(expected.ratio) and iv["ci_high"] == pytest.approx(expected.high)
    assert c["text"] == lines[head + 2].strip()


def test_baseline_with_one_repetition_gives_the_point_ratio_and_says_so(cli, fake_worker):
    fake_worker()
    res = cli("speed", *FAST, "-b", "mock:1", "-b", "mock:4", "-o", "sha256", "-s", "1k", "--baseline", "mock:4")
    assert res.code == 0, res.err
    assert "against mock:4 — ratio of ops/s, point estimates only (1 repetition per row; --repetitions 3" in res.out
    assert "mock:1: 4.00× faster than mock:4" in res.out
    doc = speed_json(cli, "-b", "mock:1", "-b", "mock:4", "-o", "sha256", "-s", "1k", "--baseline", "mock:4")
    (c,) = doc["baseline"]["comparisons"]
    assert c["interval"] is None and c["ratio"] == pytest.approx(4.0) and "no interval" in c["reason"]


def test_baseline_says_when_a_side_did_not_measure(cli, fake_worker):
    fake_worker({"unsupported": {"ring/sha256": "no sha256 (fake)"}})
    res = cli("speed", *FAST, "-b", "openssl", "-b", "ring", "-o", "sha256", "--baseline", "openssl")
    assert res.code == 0, res.err
    assert "ring: no comparison (unsupported: no sha256 (fake))" in res.out


@pytest.mark.parametrize("args, fragment", [
    (["--baseline", "boringssl"], "--baseline boringssl is not among the backends measured (openssl, aws-lc"),
    (["-b", "aws-lc", "-b", "ring", "--baseline", "openssl"],
     "--baseline openssl is not among the backends measured (aws-lc, ring); name one of them, or add --backend openssl"),
    (["-b", "openssl", "--baseline", "openssl"], "--baseline openssl needs another backend to compare with"),
])
def test_baseline_errors(cli, fake_worker, args, fragment):
    fake_worker()
    assert_one_line_error(cli("speed", "-o", "sha256", *args), fragment, code=2)


def test_baseline_is_matched_ignoring_case(cli, fake_worker):
    fake_worker()
    doc = speed_json(cli, "-b", "openssl", "-b", "aws-lc", "-o", "sha256", "--baseline", "AWS_LC")
    assert doc["baseline"]["backend"] == "aws-lc"
    assert [c["backend"] for c in doc["baseline"]["comparisons"]] == ["openssl"]


# --------------------------------------------------------------------------- help


def test_help_says_what_k_means_and_names_the_new_options(cli):
    text = " ".join(cli("speed", "--help").out.split())
    for words in ("k means 1024", "--repetitions", "--baseline", "--param", "NAME=VALUE",
                  "stored as a run", "--no-store", "SHA-256"):
        assert words in text, words


def test_api_accepts_size_strings_and_params(fake_worker, tmp_path):
    fake_worker()
    run = engine.speed(["openssl"], ["RSA-2048-sign"], ["1k"], params={"digest": "sha512"}, seconds=0.01,
                       warmup_s=0, store=tmp_path / "s.sqlite")
    (o,) = run.outcomes
    assert o.ok and o.cell.op == "rsa2048-sign" and o.cell.size_bytes == 1024 and o.cell.params == {"digest": "sha512"}
    assert o.result.params["digest"] == "sha512"
    assert math.isclose(run.rows()[0].ops_per_s.value, o.throughput.ops_per_s)


def test_no_store_measures_and_stores_nothing(cli, fake_worker, tmp_path):
    fake_worker()
    res = cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0", "--no-store")
    assert res.code == 0 and "sha256" in res.out
    assert not (tmp_path / "runs.sqlite").exists()
    assert cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0").code == 0
    assert (tmp_path / "runs.sqlite").exists()


def test_the_speed_json_of_a_workload_carries_what_it_measured(cli, fake_worker):
    """``speed --json`` of a workload holds its server side, negotiation and own part, as the
    study document's ``result`` does (it used to copy a fixed list of primitive fields)."""
    fake_worker()
    res = cli("speed", "--op", "tls-handshake", "--op", "storage", "-b", "openssl", "--json", "--no-store",
              "--seconds", "0.01", "--warmup", "0")
    assert res.code == 0, res.err
    tls, storage = json.loads(res.out)["results"]
    assert tls["op"] == "tls-handshake" and tls["status"] == "ok", tls["reason"]
    assert {"cpu_ns", "transactions", "address", "timeline"} <= set(tls["server"])
    assert tls["server"]["transactions"] == tls["ops"]
    assert tls["negotiated"]["version"] == "TLSv1.3" and tls["load"]["kind"] == "closed"
    assert {"negotiated_counts", "client_timeline", "placement", "mode", "late"} <= set(tls)
    assert all("server" in r for r in tls["per_repetition"])
    assert storage["status"] == "ok", storage["reason"]
    assert {"bytes_read", "bytes_written", "process_user_ns", "process_system_ns"} <= set(storage["storage"])


def test_speed_returns_its_stored_run_analysed_once(fake_worker, tmp_path, monkeypatch):
    """``speed`` gives back the stored run it made (a ``StoredRun`` whose analysis holds its rows
    and baseline comparisons), analysed once: the JSON document and the table read that
    analysis, and the run read back from the store gives the same document."""
    from cryptoperf import speedstats
    from cryptoperf.store import stored_run as stored
    from cryptoperf.report import json as report_json, terminal
    fake_worker({"noise_cv": 0.02})
    calls = []
    real = speedstats.rows
    monkeypatch.setattr(speedstats, "rows", lambda *a, **k: calls.append(1) or real(*a, **k))
    run = engine.speed(["openssl", "aws-lc"], ["sha256"], seconds=0.01, warmup_s=0, repetitions=3,
                       baseline="openssl", store=tmp_path / "s.sqlite")
    assert isinstance(run, stored.StoredRun) and run.meta["kind"] == "speed" and run.run_id == 1
    assert calls == [1] and run.analysis.speed.baseline == "openssl" and len(run.rows()) == 2
    doc = report_json.speed_document(run, run.settings)
    terminal.speed_table(run.rows(), terminal.Notes())
    assert calls == [1]
    (ratio,) = doc["baseline"]["comparisons"]
    assert ratio["backend"] == "aws-lc" and ratio["interval"] is not None
    with Store(tmp_path / "s.sqlite") as st:
        again = report_json.run_document(stored.load_run(st, run.run_id), st.location)
    assert again["settings"] == {} and doc["settings"]["repetitions"] == 3
    by = lambda d: sorted(d["results"], key=lambda r: r["backend"])  # noqa: E731 (first-seen order when stored)
    assert by(again) == by(doc) and again["baseline"] == doc["baseline"]
