"""``cryptoperf explain``: the attribution of a CPU difference to functions.

- the attribution's arithmetic (parts add up to the repetition's measured CPU, the change's
  interval) and its interval's coverage, by simulation through ``attribution.attribute``;
- ``perf report`` output read into samples per function;
- a fake worker that spends real CPU in a known function of a test library for one
  configuration: explain names that function first (needs perf and a C compiler);
- without perf, or with perf refused: one line saying how to allow it, and nothing else fails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_one_line_error
from cryptoperf.explain import attribution, perf, stacks
from cryptoperf.explain.attribution import Profile

pytestmark = pytest.mark.parallel

# perf script's text: samples with call chains (leaf first), and one without (its frame on the
# header line, as perf prints it when no call chain was recorded)
SCRIPT = """\
cryptoperf-work   739   829.471847:     200040 cpu-clock: \n\
\t    55d1a2b3c4d5 aws_lc_0_47_0_bn_sqrx8x_internal+0x19 (/usr/bin/cryptoperf-worker)
\t    55d1a2b3c4e0 aws_lc_0_47_0_BN_mod_exp_mont_consttime+0x2bb (/usr/bin/cryptoperf-worker)

cryptoperf-work   739   829.471900:     200040 cpu-clock: \n\
\t    7f1967e9c33c [unknown] (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
\t    7f1967e9c000 [unknown] (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
\t    7f1967df61e5 BN_mod_exp_mont_consttime_x2+0x15 (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
\t    55d1a2b3c4e0 main+0x2bb (/usr/bin/cryptoperf-worker)

cryptoperf-work   739   829.472000:     200040 cpu-clock: \n\
\t    7f1967e9c33c [unknown] (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
\t    55d1a2b3c4e0 main+0x2bb (/usr/bin/cryptoperf-worker)

         openssl   905   843.604068:    1001001 cpu-clock:  ffffffff821c5444 exc_page_fault+0xc4 ([kernel.kallsyms])
         openssl   905   843.605071:    1001001 cpu-clock:      7f1967df61e5 BN_CTX_get+0x15 (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
"""


def test_perf_script_samples_become_samples_per_function():
    """A known leaf is its function; a stripped library's internal code is its library under the
    nearest caller in it with a symbol (else the library alone); the kernel is the kernel."""
    got = perf.parse_script(SCRIPT)
    assert got == Counter({"aws_lc_0_47_0_bn_sqrx8x_internal (cryptoperf-worker)": 1,
                           "libcrypto.so.3 (unresolved, under BN_mod_exp_mont_consttime_x2)": 1,
                           "libcrypto.so.3 (unresolved)": 1, "BN_CTX_get (libcrypto.so.3)": 1,
                           "exc_page_fault (kernel)": 1})


def _profile(costs: dict[str, float], ops: int = 1000) -> Profile:
    """A profile whose functions cost ``costs`` ns per operation, sampled without error."""
    total = sum(costs.values())
    return Profile(Counter({f: round(1e6 * c / total) for f, c in costs.items()}), ops, total * ops)


def test_the_parts_add_up_to_each_repetitions_measured_cpu_and_the_change():
    pairs = [(_profile({"common": 500, "bn_mulx": 300}), _profile({"common": 500, "rsaz_avx2": 260 + d}))
             for d in (-5.0, 0.0, 5.0)]
    att = attribution.attribute(pairs)
    assert att.total.value == pytest.approx(-40.0, abs=0.5)
    rows = {r.function: r for r in att.rows}
    assert rows["bn_mulx"].change.value == pytest.approx(-300, abs=0.5)
    assert rows["rsaz_avx2"].change.value == pytest.approx(260, abs=0.5)
    assert sum(r.change.value for r in att.rows) == pytest.approx(att.total.value, abs=1e-6)
    # a code path replaced by another: each side exceeds the total; together they make it
    assert [r.function for r in att.top()] == ["bn_mulx", "rsaz_avx2"]
    assert att.top_share() == pytest.approx(1.0, abs=0.02)
    # by library: what moved between two functions of one library is one row
    lib = attribution.attribute([(_profile({"f (liba)": 500, "g (liba)": 300}), _profile({"h (liba)": 700,
                                                                                          "libb (unresolved)": 40}))])
    assert [(r.function, round(r.change.value)) for r in lib.libraries] == [("liba", -100), ("libb", 40)]


def test_on_the_studys_scale_the_parts_add_up_to_the_studys_change():
    """Profiled repetitions run ~10 % above the study (the sampler's cost); scaled per side to
    the study's CPU per operation, the functions add up to the study's change exactly, and
    each keeps its share."""
    pairs = [(_profile({"common": 550, "old": 330}), _profile({"common": 550, "new": 440})) for _ in range(3)]
    scale = attribution.study_scale(pairs, 800.0, 900.0)  # what the study measured: A 800, B 900
    assert scale == pytest.approx((800 / 880, 900 / 990))
    att = attribution.attribute(pairs, scale=scale)
    assert (att.a_ns, att.b_ns) == pytest.approx((800.0, 900.0))
    assert att.total.value == pytest.approx(100.0) and sum(r.change.value for r in att.rows) == pytest.approx(100.0)
    rows = {r.function: r for r in att.rows}
    assert rows["old"].a_ns == pytest.approx(300.0, rel=1e-5) and rows["new"].b_ns == pytest.approx(400.0, rel=1e-5)


def coverage(blocks: int, sd_ns: float, trials: int = 3000, seed: int = 11) -> tuple[float, float]:
    """How often the 95 % intervals of the total change and of the changed function's change
    cover their true values (+150 ns and +150 ns) when every repetition's CPU per operation
    has normal noise of ``sd_ns`` in a common function, through ``attribution.attribute``."""
    rng = np.random.default_rng(seed)
    hit_total = hit_fn = 0
    for _ in range(trials):
        pairs = [(_profile({"common": 800 + rng.normal(0, sd_ns), "hot": 100}),
                  _profile({"common": 800 + rng.normal(0, sd_ns), "hot": 250})) for _ in range(blocks)]
        att = attribution.attribute(pairs)
        hit_total += att.total.low <= 150 <= att.total.high
        hot = next(r for r in att.rows if r.function == "hot")
        hit_fn += hot.change.low <= 150 <= hot.change.high
    return hit_total / trials, hit_fn / trials


@pytest.mark.parametrize("blocks, sd", [(3, 20.0), (5, 40.0), (10, 80.0)])
def test_the_change_intervals_cover_as_often_as_they_say(blocks, sd):
    total, fn = coverage(blocks, sd)
    assert 0.93 <= total <= 0.97, total
    assert fn >= 0.93, fn  # sampling rounding only, the hot function's own cost has no noise


def interaction_trials(true_ratio: float, blocks: int, cv: float, trials: int = 2000, seed: int = 11):
    """Extension studies simulated through ``extensions.interaction``: two masks slowing the
    operation 2× and 1.3× alone, together 2.6 × ``true_ratio``; per block a drift every
    configuration shares (5 %) and each repetition's own lognormal noise ``cv``. Returns the
    interval's coverage of ``true_ratio`` and how often each verdict came out."""
    from types import SimpleNamespace

    from cryptoperf.explain import extensions
    rng = np.random.default_rng(seed)
    factors = {"all": 1.0, "m1": 2.0, "m2": 1.3, extensions.TOGETHER: 2.6 * true_ratio}
    covered, kinds = 0, Counter()
    for _ in range(trials):
        drift = rng.normal(0, 0.05, blocks)
        summaries = {name: SimpleNamespace(cell=SimpleNamespace(configuration=name), p50_by_block_ns={
            b + 1: 1000 * f * float(np.exp(drift[b] + rng.normal(0, cv))) for b in range(blocks)})
            for name, f in factors.items()}
        r = extensions.interaction(summaries, ["m1", "m2"], 0.95, 2.0)
        covered += r.low <= true_ratio <= r.high
        kinds[r.kind] += 1
    return covered / trials, {k: v / trials for k, v in kinds.items()}


@pytest.mark.parametrize("blocks, cv", [(5, 0.01), (8, 0.02), (16, 0.03)])
def test_the_interaction_interval_covers_and_rarely_calls_additive_groups_interacting(blocks, cv):
    """Figures in docs/methodology.md ("Do extension groups add up?")."""
    coverage, kinds = interaction_trials(1.0, blocks, cv)
    assert 0.93 <= coverage <= 0.97, coverage
    # a false "they do not add up" at most the interval's 5 % (2.5 % each way)
    assert kinds.get("more together", 0) + kinds.get("less together", 0) <= 0.06, kinds


def test_a_real_interaction_is_found():
    coverage, kinds = interaction_trials(1.15, 8, 0.01)
    assert 0.93 <= coverage <= 0.97 and kinds.get("more together", 0) >= 0.95, (coverage, kinds)


def test_without_perf_explain_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no perf on it
    assert perf.unavailable() .startswith("perf is not installed (Debian: apt-get install linux-perf")
    fake = tmp_path / "perf"
    fake.write_text("#!/bin/sh\necho 'Error: No permission to enable cpu-clock event.' >&2\nexit 1\n")
    fake.chmod(0o755)
    why = perf.unavailable(str(fake))
    assert why.startswith("perf is refused here (Error: No permission to enable cpu-clock event.)"), why
    assert "\n" not in why


def _study(tmp_path: Path, burn: dict) -> Path:
    p = tmp_path / "hot.toml"
    p.write_text('[study]\nname = "hot"\nbaseline = "a"\nbackends = ["openssl"]\nrepetitions = 3\nseconds = 0.01\n'
                 'warmup_s = 0\n\n[[configuration]]\nname = "a"\n\n[[configuration]]\nname = "b"\n\n'
                 '[[operation]]\nop = "sha256"\nsizes = [1024]\n')
    return p


HOT_C = r"""
#include <time.h>
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
                             return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
volatile unsigned long sink;
void cryptoperf_test_hot(double ms) { double end = now_ms() + ms; unsigned long x = 1;
    while (now_ms() < end) for (int i = 0; i < 1000; i++) x = x * 6364136223846793005UL + 1; sink = x; }
void cryptoperf_test_cold(double ms) { double end = now_ms() + ms; unsigned long x = 3;
    while (now_ms() < end) for (int i = 0; i < 1000; i++) x = x * 2862933555777941757UL + 7; sink = x; }
"""


def test_a_known_hot_function_is_attributed_to_it(cli, fake_worker, tmp_path):
    lib = _hot_library(tmp_path)
    # b spends 150 ms more CPU per repetition, in cryptoperf_test_hot; both spend 150 ms in the cold one
    fake_worker({"noise_cv": 0.01, "config_factor": {"b": 2.0}, "burn_lib": str(lib),
                 "burn": {"a": {"cryptoperf_test_cold": 150}, "b": {"cryptoperf_test_cold": 150,
                                                                    "cryptoperf_test_hot": 150}}})
    store = tmp_path / "s.sqlite"
    res = cli("study", _study(tmp_path, {}), "--no-report", "--out", tmp_path / "out", "--store", store)
    assert res.code == 0, res.err
    res = cli("explain", "--config", "b", "--store", store, "--blocks", "3", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    rows = doc["attribution"]["rows"]
    assert rows[0]["function"] == "cryptoperf_test_hot (libhot.so)", rows[:3]
    assert rows[0]["change_ns_per_op"]["ci_low"] > 0 and rows[0]["a_ns_per_op"] == 0
    # the injected function makes most of the change (the fake's scripted CPU per operation is
    # not what it burned, so the split with the common function is not exact)
    assert doc["attribution"]["top"][0] == "cryptoperf_test_hot (libhot.so)" and rows[0]["share"] >= 0.5, rows[:3]
    # what sampling cost is said; the profiled repetitions are not the study's
    assert doc["sampling_cost"] is not None
    res = cli("list", "--store", store, "--json")
    assert len(json.loads(res.out)["runs"]) == 1
    # the explanation is kept with the run: every report of it shows the same one
    _reports_show_the_explanation(cli, store, tmp_path, doc)


def _hot_library(tmp_path: Path) -> Path:
    """libhot.so of HOT_C (skips without perf or a C compiler)."""
    why = perf.unavailable()
    if why is not None:
        pytest.skip(why)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the test library")
    (tmp_path / "hot.c").write_text(HOT_C)
    lib = tmp_path / "libhot.so"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "hot.c")], check=True)
    return lib


def _flamegraph_expected() -> bool:
    """Whether the flame graph must be drawn here: inferno is installed, or CI says it is."""
    required = os.environ.get("CRYPTOPERF_REQUIRE_INFERNO") == "1"
    if required:
        assert stacks.missing() is None, stacks.missing()
    return stacks.missing() is None


def _reports_show_the_explanation(cli, store: Path, tmp_path: Path, doc: dict) -> None:
    """The Markdown, JSON and HTML reports of the latest run show its kept explanation of b."""
    hot = "cryptoperf_test_hot (libhot.so)"
    out = {}
    for fmt in ("md", "json", "html"):
        path = tmp_path / f"why.{fmt}"
        path.unlink(missing_ok=True)
        res = cli("report", "latest", "--format", fmt, "--store", store, "--output", path)
        assert res.code == 0, res.err
        out[fmt] = path.read_text()
    why = out["md"][out["md"].index("## Why"):]
    assert "explained below" in why and f"| {hot} |" in why, why[:1500]
    document = json.loads(out["json"])
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parent / "fixtures" / "document.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)
    kept = document["explanations"]
    assert len(kept) == 1 and kept[0]["attribution"]["top"][0] == hot and kept[0]["configuration"] == "b"
    if doc is not None:  # the same analysis in every output
        assert kept[0]["attribution"] == doc["attribution"]
    pandas = pytest.importorskip("pandas")
    import cryptoperf
    frame = cryptoperf.load("latest", store=store, kind="explanations")
    assert isinstance(frame, pandas.DataFrame)
    top = frame[(frame.level == "function")].iloc[0]
    assert top["name"] == hot and top["change_ns_per_op"] == kept[0]["attribution"]["rows"][0]["change_ns_per_op"]["value"]
    assert set(frame.level) == {"function", "library"} and (frame.configuration == "b").all()
    html = out["html"]
    assert 'href="#why-openssl-sha256-1024-b"' in html and 'id="why-openssl-sha256-1024-b"' in html
    assert hot in html
    if _flamegraph_expected():
        uri = html.split('<figure class="flamegraph"><img src="data:image/svg+xml;base64,', 1)[1].split('"', 1)[0]
        svg = base64.b64decode(uri).decode()
        assert svg.lstrip().startswith("<") and "cryptoperf_test_hot" in svg
        assert kept[0]["flamegraph"] is True
    else:
        assert kept[0]["flamegraph"] is False and "cargo install inferno" in kept[0]["flamegraph_missing"]


def test_a_study_with_explain_keeps_its_explanations_and_never_times_the_profiled_repetitions(cli, fake_worker,
                                                                                                tmp_path):
    lib = _hot_library(tmp_path)
    fake_worker({"noise_cv": 0.01, "config_factor": {"b": 2.0}, "burn_lib": str(lib),
                 "burn": {"a": {"cryptoperf_test_cold": 150}, "b": {"cryptoperf_test_cold": 150,
                                                                    "cryptoperf_test_hot": 150}}})
    study = _study(tmp_path, {})
    study.write_text(study.read_text().replace("warmup_s = 0\n", "warmup_s = 0\nexplain = true\n"))
    store = tmp_path / "s.sqlite"
    res = cli("study", study, "--out", tmp_path / "out", "--store", store)
    assert res.code == 0, res.err
    assert "explaining 1/1: sha256 on openssl, b against a (3 profiled blocks)" in res.err
    md = next((tmp_path / "out").glob("*.md")).read_text()
    assert "| cryptoperf_test_hot (libhot.so) |" in md[md.index("## Why"):]
    _reports_show_the_explanation(cli, store, tmp_path, None)
    # the profiled repetitions are not the study's: 2 cells × (calibration + 3 blocks) stored
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert len(doc["repetitions"]) == 8 and len(doc["explanations"]) == 1
    import sqlite3
    assert sqlite3.connect(store).execute("SELECT count(*) FROM results").fetchone() == (8,)


def test_a_study_with_explain_on_a_host_without_perf_says_so_once_and_is_unchanged(cli, fake_worker, tmp_path,
                                                                                   monkeypatch):
    fake_worker({"noise_cv": 0.005, "config_factor": {"b": 1.3}})
    study = _study(tmp_path, {})
    study.write_text(study.read_text().replace("warmup_s = 0\n", "warmup_s = 0\nexplain = true\n"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    store = tmp_path / "s.sqlite"
    res = cli("study", study, "--no-report", "--out", tmp_path / "out", "--store", store)
    assert res.code == 0, res.err
    lines = [ln for ln in res.err.splitlines() if "explain = true:" in ln]
    assert len(lines) == 1 and "nothing explained: perf is not installed" in lines[0], res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert doc["explanations"] == [] and doc["deltas"][0]["verdict"]["kind"] == "slower"


def test_folded_stacks_scale_to_the_windows_cpu_per_operation():
    folded = stacks.parse_folded("worker;main;hot 30\nworker;main;cold 10\nbad line\n")
    assert folded == Counter({"worker;main;hot": 30, "worker;main;cold": 10})
    per_op = stacks.ns_per_op(folded, 400.0)
    assert per_op == {"worker;main;hot": 300.0, "worker;main;cold": 100.0}
    assert stacks.mean([per_op, {"worker;main;hot": 100.0}]) == {"worker;main;hot": 200.0, "worker;main;cold": 50.0}


def test_the_differential_flame_graph_is_drawn_from_both_sides(tmp_path):
    if not _flamegraph_expected():
        pytest.skip(stacks.missing())
    svg = stacks.draw({"w;main;old": 200.0, "w;main;both": 100.0}, {"w;main;new": 300.0, "w;main;both": 100.0},
                      "title", "subtitle", tmp_path)
    assert svg is not None and svg.lstrip().startswith("<")
    assert "new (300,000 ps per operation" in svg and "both (100,000 ps per operation" in svg
    assert ">old<" not in svg  # a function B no longer runs has no width in B's graph


def test_explain_names_what_is_missing_in_one_line(cli, fake_worker, tmp_path):
    fake_worker({})
    store = tmp_path / "s.sqlite"
    study = _study(tmp_path, {})
    study.write_text(study.read_text().replace("sizes = [1024]", "sizes = [1024, 4096]"))
    assert cli("study", study, "--no-report", "--out", tmp_path / "out", "--store", store).code == 0
    res = cli("explain", "--config", "c", "--store", store)
    assert_one_line_error(res, "has no configuration 'c'", "(it has: a, b)")
    res = cli("explain", "--config", "b", "--store", store)
    assert_one_line_error(res, "operation 'sha256' runs at 2 message sizes; name one with --size (1024, 4096)")
    res = cli("explain", "--config", "b", "--size", "512", "--store", store)
    assert_one_line_error(res, "no operation 'sha256' of configuration 'b' with a reference in 'a' at 512 B")


def test_on_a_host_without_perf_explain_is_one_line_and_the_study_still_runs(cli, fake_worker, tmp_path, monkeypatch):
    fake_worker({})
    store = tmp_path / "s.sqlite"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cli("study", _study(tmp_path, {}), "--no-report", "--out", tmp_path / "out", "--store", store).code == 0
    res = cli("explain", "--config", "b", "--store", store)
    assert_one_line_error(res, "perf is not installed", "apt-get install linux-perf")


def test_extension_attribution_names_the_group_an_operation_depends_on(cli, fake_worker, tmp_path, monkeypatch):
    from cryptoperf import hostinfo
    # a CPU with everything but AVX-512 (the fake's numbers do not depend on the host's)
    monkeypatch.setattr(hostinfo, "cpu_flags", lambda names: {n: not n.startswith("avx512") for n in names})
    # masked together, AES-NI and the big-number group cost more than each alone says (3 × 1.02)
    fake_worker({"noise_cv": 0.01, "mask_factor": {"no-aesni": 3.0, "no-bignum": 1.02,
                                                   "no-aesni+no-shani+no-avx2+no-bignum": 4.5}})
    store = tmp_path / "e.sqlite"
    res = cli("explain", "--extensions", "--op", "aes-128-gcm-seal", "--size", "1024", "--backend", "openssl",
              "--blocks", "4", "--store", store, "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["left_out"] == ["no-avx512"]  # it clears nothing this CPU has
    groups = {g["name"]: g for g in doc["groups"]}
    assert set(groups) == {"no-aesni", "no-shani", "no-avx2", "no-bignum"}
    assert groups["no-aesni"]["ratio"] == pytest.approx(3.0, rel=0.05) and groups["no-aesni"]["kind"] == "slower"
    assert groups["no-aesni"]["clears"] == ["aes", "pclmulqdq", "vaes", "vpclmulqdq"]
    assert doc["depends_on"][0] == "no-aesni" and groups["no-aesni"]["share"] > 0.9
    assert groups["no-shani"]["kind"] in ("equivalent", "inconclusive") and groups["no-shani"]["share"] is None
    assert doc["shared_flags"] == []  # AES-NI and the big-number group clear nothing in common
    inter = doc["interaction"]
    assert inter["masks"] == ["no-aesni", "no-shani", "no-avx2", "no-bignum"]  # no-avx512 is inside no-avx2
    assert inter["kind"] == "more together" and inter["ratio"] == pytest.approx(4.5 / 3.06, rel=0.05), inter
    assert "do not add up" in inter["text"]
    # the study is stored like any other
    assert len(json.loads(cli("list", "--store", store, "--json").out)["runs"]) == 1
    res = cli("explain", "--extensions", "--op", "aes-128-gcm-seal", "--store", store)
    assert_one_line_error(res, "--extensions needs the operation", "--backend")


def test_extension_groups_whose_costs_add_up_are_said_to(cli, fake_worker, tmp_path, monkeypatch):
    from cryptoperf import hostinfo
    monkeypatch.setattr(hostinfo, "cpu_flags", lambda names: {n: True for n in names})
    fake_worker({"noise_cv": 0.002, "mask_factor": {"no-aesni": 2.0, "no-bignum": 1.5}})  # together: 3.0
    res = cli("explain", "--extensions", "--op", "aes-128-gcm-seal", "--size", "1024", "--backend", "openssl",
              "--blocks", "8", "--store", tmp_path / "e.sqlite", "--json")
    assert res.code == 0, res.err
    inter = json.loads(res.out)["interaction"]
    assert inter["kind"] == "add up" and inter["together"] == pytest.approx(3.0, rel=0.02), inter
    res = cli("explain", "--extensions", "--op", "aes-128-gcm-seal", "--size", "1024", "--backend", "openssl",
              "--blocks", "8", "--store", tmp_path / "e.sqlite")
    assert "the groups' costs add up (within ±2 %)" in " ".join(res.out.split())


def test_overlapping_groups_name_the_flag_they_share():
    from cryptoperf.explain.extensions import MaskRow, shared_flags

    def row(name, clears, kind):
        return MaskRow(name, tuple(clears), 2.0, 1.9, 2.1, kind, "", None)

    rows = [row("no-avx512", ["avx512f", "avx512ifma"], "slower"), row("no-bignum", ["bmi2", "adx", "avx512ifma"], "slower"),
            row("no-aesni", ["aes"], "equivalent")]
    assert shared_flags(rows) == ["avx512ifma"]
    assert shared_flags(rows[1:]) == []  # one group alone overlaps nothing


def test_joined_masks_clear_every_bit_either_clears():
    from cryptoperf import cpumask
    both = cpumask.value("no-aesni+no-bignum")
    assert both == "~0x0200000200000000:~0x0000060000280100:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000"
    assert len(both) == len(cpumask.MASKS["baseline"])
    for bad in ("no-aesni+", "baseline+no-aesni", "no-aesni+no-aesni", "no-aesni+nope"):
        assert not cpumask.is_known(bad)
        with pytest.raises(KeyError):
            cpumask.value(bad)


def test_a_decided_verdict_links_to_how_to_explain_it(cli, fake_worker, tmp_path):
    fake_worker({"noise_cv": 0.005, "config_factor": {"b": 1.3}})
    store = tmp_path / "s.sqlite"
    assert cli("study", _study(tmp_path, {}), "--no-report", "--out", tmp_path / "out", "--store", store).code == 0
    assert cli("report", "latest", "--format", "md", "--store", store, "--output", tmp_path / "r.md").code == 0
    md = (tmp_path / "r.md").read_text()
    assert "## Why: explaining a verdict" in md
    why = md[md.index("## Why"):]
    assert "`cryptoperf explain 1 --config b --reference a --op " in why and "--backend openssl --size 1024`" in why, why[:800]
    assert cli("report", "latest", "--format", "html", "--store", store, "--output", tmp_path / "r.html").code == 0
    html = (tmp_path / "r.html").read_text()
    link = html.split('class="why" href="#', 1)[1].split('"', 1)[0]
    assert f'id="{link}"' in html  # the verdict's "why?" reaches its row
