"""CPU capability masks on the orchestrator side: the study key ``cpu``, cells and run requests,
the worker's environment, and whole studies against the fake worker (which reads the mask from
its own environment, as the libraries do). Real libraries: test_real_worker.py."""

import json
import re

import pytest

from conftest import TWO_CONFIG_STUDY, WORKER_HELLO, assert_one_line_error, worker_rules
from cryptoperf import cpumask, schedule, study
from cryptoperf.errors import StudyError, WorkerError
from cryptoperf.model import Cell, speed_cell_attrs

#: One word that clears nothing, as every mask spells it (``~0x`` and 16 hex digits).
ZERO = "~0x" + "0" * 16
BASELINE_VALUE = ":".join([ZERO] * 5)
NO_AESNI_VALUE = "~0x0200000200000000:~0x0000060000000000:" + ":".join([ZERO] * 3)
NO_SHANI_VALUE = f"{ZERO}:~0x0000000020000000:" + ":".join([ZERO] * 3)
#: A capability vector as a library reports it (what hello's unmasked process saw).
VECTOR = "0xfffa3203078bffff:0x405fc6f1bf07ab"

MASKED = """\
[study]
name = "accel"
baseline = "base"
backends = ["openssl"]
repetitions = 3

[[configuration]]
name = "base"

[[configuration]]
name = "aes-off"
description = "AES-NI off"
cpu = "no-aesni"

[[operation]]
op = "aes-128-gcm-seal"
sizes = [16384]
"""


def test_cpu_key_parses_and_defaults_to_baseline():
    s = study.parse(MASKED, "s.toml")
    assert [c.cpu for c in s.configurations] == ["baseline", "no-aesni"]
    assert s.configuration("aes-off").variables == {}  # reserved key, not a template variable
    for name in cpumask.NAMES:
        s = study.parse(MASKED.replace('"no-aesni"', f'"{name}"'), "s.toml")
        assert s.configuration("aes-off").cpu == name


@pytest.mark.parametrize("value, fragment", [
    ('"no-aes"', 'unknown CPU mask "no-aes"; did you mean \'no-aesni\'?'),
    ('"aesni"', 'unknown CPU mask "aesni"'),
    ("3", "must be a string, not 3"),
])
def test_unknown_cpu_mask_is_one_line_naming_file_line_and_field(value, fragment):
    text = MASKED.replace('cpu = "no-aesni"', f"cpu = {value}")
    with pytest.raises(StudyError) as e:
        study.parse(text, "s.toml")
    msg = str(e.value)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("cpu ="))
    assert msg.startswith(f"s.toml:{line}: configuration 'aes-off', field 'cpu': "), msg
    assert fragment in msg and "\n" not in msg
    if "unknown" in fragment:
        assert ("(known: baseline, no-aesni, no-shani, no-avx2, no-avx512, no-bignum; or several but baseline "
                "joined by '+', e.g. \"no-aesni+no-bignum\")") in msg


def test_cpu_error_through_the_cli(cli, write_study, fake_worker):
    fake_worker()
    res = cli("study", write_study(MASKED.replace('"no-aesni"', '"no-sha"')))
    assert_one_line_error(res, "field 'cpu'", 'unknown CPU mask "no-sha"', "did you mean 'no-shani'?", code=2)


def test_options_help_lists_cpu():
    text = study.options_help()
    assert "cpu" in text and "no-aesni" in text and "baseline" in text


def test_cells_carry_the_mask_in_key_and_request():
    s = study.check_against_worker(study.parse(MASKED, "s.toml"), worker_rules(["openssl"]))
    base, masked = schedule.expand(s)
    assert (base.cpu, masked.cpu) == ("baseline", "no-aesni")
    assert base.key == "openssl/aes-128-gcm-seal/16384/base"  # unchanged for unmasked cells
    assert masked.key == "openssl/aes-128-gcm-seal/16384/aes-off/cpu=no-aesni"
    assert base.group == masked.group  # still compared with each other
    # the store keeps the mask in a column of its own (Cell.as_dict), never parsed from the key
    assert (base.as_dict()["cpu"], masked.as_dict()["cpu"]) == ("baseline", "no-aesni")
    # ... except for format-1 stores' speed cells, whose keys have no configuration name
    speed_cell = Cell("", "openssl", "sha256", "sha256", {}, None, "no-shani")
    assert speed_cell.key == "openssl/sha256/-//cpu=no-shani"
    assert speed_cell_attrs(speed_cell.key) == {"cpu": "no-shani", "build": "default"}
    assert speed_cell_attrs("openssl/sha256/-/") == {"cpu": "baseline", "build": "default"}
    settings = schedule.Settings(seconds=0.1, warmup_s=0, threads=1, timeout_s=5)
    reps = schedule.blocks([base, masked], 1, 1, seed=1)
    assert sorted(r.position for r in reps) == [0, 1] and {r.block for r in reps} == {1}
    requests = {r.cell.configuration: schedule.run_request(r, settings, VECTOR) for r in reps}
    assert {c: q["cpu_mask"] for c, q in requests.items()} == {"base": "baseline", "aes-off": "no-aesni"}
    # the unmasked vector the worker checks its library's against (baseline: equal to it;
    # a mask: it less the mask's bits), and no such field without one
    assert {q["cpu_vector_unmasked"] for q in requests.values()} == {VECTOR}
    assert "cpu_vector_unmasked" not in schedule.run_request(reps[0], settings)


def test_worker_env_always_sets_the_variable():
    inherited = {"PATH": "/bin", "OPENSSL_ia32cap": "~0x0"}  # e.g. left in the user's shell
    # baseline replaces a stray value with its clear-nothing value (it does not remove it: an
    # unset variable would give baseline's worker a smaller environment than a masked one's)
    assert cpumask.worker_env("baseline", inherited) == {"PATH": "/bin", "OPENSSL_ia32cap": BASELINE_VALUE}
    assert cpumask.worker_env("baseline", {}) == {"OPENSSL_ia32cap": BASELINE_VALUE}
    assert cpumask.worker_env("no-aesni", inherited) == {"PATH": "/bin", "OPENSSL_ia32cap": NO_AESNI_VALUE}
    assert cpumask.worker_env("no-shani", {})["OPENSSL_ia32cap"] == NO_SHANI_VALUE
    assert cpumask.worker_env("no-avx2", {})["OPENSSL_ia32cap"] == f"{ZERO}:~0x00000000c0230020:" + ":".join([ZERO] * 3)
    assert cpumask.worker_env("no-avx512", {})["OPENSSL_ia32cap"] == f"{ZERO}:~0x00000000c0230000:" + ":".join([ZERO] * 3)
    # BMI2 (#64+8), ADX (#64+19), AVX512IFMA (#64+21)
    assert cpumask.worker_env("no-bignum", {})["OPENSSL_ia32cap"] == f"{ZERO}:~0x0000000000280100:" + ":".join([ZERO] * 3)
    with pytest.raises(KeyError):
        cpumask.worker_env("no-sha", {})


def test_worker_env_defaults_to_this_process_environment(monkeypatch):
    monkeypatch.setenv("OPENSSL_ia32cap", "~0x0:~0x0")
    monkeypatch.setenv("CRYPTOPERF_TEST_MARKER", "kept")
    env = cpumask.worker_env("baseline")
    assert env["OPENSSL_ia32cap"] == BASELINE_VALUE and env["CRYPTOPERF_TEST_MARKER"] == "kept"


def test_every_mask_value_has_one_fixed_width():
    """Every mask, baseline's included, spells all five words (OpenSSL 3.0 zeroes the second
    when it is missing, OpenSSL 3.6 the third to fifth, which no mask clears anything of), each
    as ``~0x`` and 16 hex digits: one length for every value, so every configuration's worker
    starts with an environment of the same size. Never empty (that clears every capability)."""
    word = r"~0x[0-9a-f]{16}"
    for name, value in cpumask.MASKS.items():
        assert re.fullmatch(":".join([word] * 5), value), (name, value)
        assert value.endswith(":" + ":".join([ZERO] * 3)), (name, value)
    assert {len(v) for v in cpumask.MASKS.values()} == {99}
    assert cpumask.MASKS["baseline"] == BASELINE_VALUE
    assert cpumask.NAMES == ("baseline", "no-aesni", "no-shani", "no-avx2", "no-avx512", "no-bignum")


def test_check_hello_refuses_a_worker_that_disagrees():
    good = [{"name": n, "openssl_ia32cap": v} for n, v in cpumask.MASKS.items()]
    cpumask.check_hello(good, ["baseline", "no-aesni"])
    for wanted in (["baseline"], ["no-aesni"]):  # every run request carries cpu_mask
        with pytest.raises(WorkerError, match="cannot verify CPU capability masks"):
            cpumask.check_hello(None, wanted)
    bad = [dict(m, openssl_ia32cap="~0x200000000000000") if m["name"] == "no-aesni" else m for m in good]
    with pytest.raises(WorkerError, match=re.escape(f"CPU mask 'no-aesni' is OPENSSL_ia32cap={NO_AESNI_VALUE} "
                                                    "here but ~0x200000000000000 in the worker")):
        cpumask.check_hello(bad, ["no-aesni"])
    # the old, short spelling of a value is a different value: refused, not read as equal
    short = [dict(m, openssl_ia32cap="~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0")
             if m["name"] == "no-aesni" else m for m in good]
    with pytest.raises(WorkerError, match="CPU mask 'no-aesni' is OPENSSL_ia32cap="):
        cpumask.check_hello(short, ["no-aesni"])
    with pytest.raises(WorkerError, match="does not know CPU mask 'no-avx512'"):
        cpumask.check_hello([m for m in good if m["name"] != "no-avx512"], ["no-avx512"])
    # baseline's value is checked too: the worker requires exactly the value it announces
    older = [dict(m, openssl_ia32cap="") if m["name"] == "baseline" else m for m in good]
    with pytest.raises(WorkerError, match=re.escape(f"CPU mask 'baseline' is OPENSSL_ia32cap={BASELINE_VALUE} here")):
        cpumask.check_hello(older, ["baseline"])


def test_a_worker_with_another_baseline_value_is_refused_up_front(cli, write_study, fake_worker):
    """Rather than every baseline repetition coming back invalid."""
    masks = [dict(m, openssl_ia32cap="~0x0") if m["name"] == "baseline" else m
             for m in json.loads(json.dumps(WORKER_HELLO["cpu_masks"]))]
    fake_worker({"cpu_masks": masks})
    res = cli("study", write_study(TWO_CONFIG_STUDY.format(reps=3, timeout=5)))
    assert_one_line_error(res, "CPU mask 'baseline' is OPENSSL_ia32cap=", "but ~0x0 in the worker", code=1)
    assert_one_line_error(cli("speed", "-o", "sha256"), "CPU mask 'baseline'", code=1)


def run_json(cli, write_study, tmp_path, text):
    res = cli("study", write_study(text), "--out", tmp_path / "out")
    docs = sorted((tmp_path / "out").glob("*.json"))
    return res, json.loads(docs[-1].read_text()) if docs else None


def test_masked_configuration_runs_in_a_masked_worker(cli, write_study, fake_worker, tmp_path, monkeypatch):
    """The fake worker is 3x slower only when it was started with no-aesni's OPENSSL_ia32cap, so
    a delta of exactly 3 shows the orchestrator set the variable for the masked cells and for
    them only — even with a stray value inherited from the shell, which baseline's workers see
    replaced by baseline's own value. Every request carries the unmasked vector from hello,
    which the fake checks baseline's against (it would answer invalid otherwise)."""
    monkeypatch.setenv("OPENSSL_ia32cap", "~0x0:~0x0")
    fake_worker({"mask_factor": {"no-aesni": 3.0}})
    res, doc = run_json(cli, write_study, tmp_path, MASKED)
    assert res.code == 0, res.err
    envs = {(r["configuration"], r["result"]["capabilities"]["env"]) for r in doc["repetitions"]}
    assert envs == {("base", BASELINE_VALUE), ("aes-off", NO_AESNI_VALUE)}
    assert all(r["status"] == "ok" for r in doc["repetitions"]), [r["reason"] for r in doc["repetitions"]]
    assert all(r["result"]["cpu_mask"] == r["cpu"] for r in doc["repetitions"])
    # one calibration repetition per cell (block 0, in cell order), then 3 blocks of both
    assert [(r["block"], r["configuration"]) for r in doc["repetitions"][:2]] == [(0, "base"), (0, "aes-off")]
    blocks = {}
    for r in doc["repetitions"][2:]:
        blocks.setdefault(r["block"], []).append(r)
    assert sorted(blocks) == [1, 2, 3]
    for b, rs in blocks.items():
        assert sorted(r["configuration"] for r in rs) == ["aes-off", "base"]
        assert [r["position"] for r in rs] == [0, 1]  # stored in the order they ran
    (d,) = doc["deltas"]
    assert d["latency"]["ratio"] == pytest.approx(3.0, rel=1e-3) and d["cpu"] == "no-aesni"
    assert {c["name"]: c["cpu"] for c in doc["study"]["configurations"]} == {"base": "baseline", "aes-off": "no-aesni"}
    assert {c["configuration"]: c["cpu"] for c in doc["cells"]} == {"base": "baseline", "aes-off": "no-aesni"}
    assert "aes-off [cpu no-aesni]" in res.out
    assert "took nothing away" not in res.out


def test_unmaskable_and_ignored_masks_are_reported_not_measured(cli, write_study, fake_worker, tmp_path):
    fake_worker({"mask_ignored": ["aws-lc"]})
    text = MASKED.replace('backends = ["openssl"]', 'backends = ["openssl", "aws-lc", "ring", "rustcrypto"]')
    res, doc = run_json(cli, write_study, tmp_path, text)
    assert res.code == 0, res.err
    masked = {r["backend"]: r for r in doc["repetitions"] if r["configuration"] == "aes-off"}
    assert masked["openssl"]["status"] == "ok"
    assert masked["ring"]["status"] == "unsupported"
    assert masked["ring"]["reason"] == "RING has no runtime CPU capability mask"
    assert masked["rustcrypto"]["status"] == "unsupported"
    assert masked["aws-lc"]["status"] == "invalid"
    assert masked["aws-lc"]["reason"].startswith("capability mask not applied: ")
    assert all(masked[b]["latency"] is None for b in ("ring", "rustcrypto", "aws-lc"))
    # an unsupported or invalid answer at calibration is final: no blocks are run for that cell
    blocks = {}
    for r in doc["repetitions"]:
        if r["configuration"] == "aes-off":
            blocks.setdefault(r["backend"], set()).add(r["block"])
    assert blocks == {"openssl": {0, 1, 2, 3}, "aws-lc": {0}, "ring": {0}, "rustcrypto": {0}}
    deltas = {d["backend"]: d for d in doc["deltas"]}
    assert deltas["openssl"]["status"] == "ok"
    assert deltas["ring"]["status"] == "n/a" and "no runtime CPU capability mask" in deltas["ring"]["reason"]
    assert deltas["aws-lc"]["reason"].startswith("this configuration: invalid: capability mask not applied")


def test_a_mask_that_removes_nothing_is_noted(cli, write_study, fake_worker, tmp_path):
    fake_worker()  # the fake reports cpu_mask_cleared = [] for every mask but no-aesni
    res, _ = run_json(cli, write_study, tmp_path, MASKED.replace('"no-aesni"', '"no-avx512"'))
    assert res.code == 0, res.err
    assert "note: CPU mask no-avx512 took nothing away on this machine" in res.out


def test_dry_run_shows_the_variable(cli, write_study, fake_worker):
    fake_worker()
    res = cli("study", write_study(MASKED), "--dry-run")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert len(lines) == 6  # 3 blocks of both configurations, in each block's random order
    base = [l for l in lines if "/aes-off" not in l]
    masked = [l for l in lines if "/aes-off/cpu=no-aesni" in l]
    assert len(base) == len(masked) == 3
    assert all("OPENSSL_ia32cap" not in l for l in base)
    assert all(l.endswith(f"OPENSSL_ia32cap={NO_AESNI_VALUE}") for l in masked)


def test_speed_cpu_option(cli, fake_worker, tmp_path):
    fake_worker({"mask_factor": {"no-shani": 2.0}})
    res = cli("speed", "-b", "openssl", "-b", "ring", "-o", "sha256", "--cpu", "no-shani", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["settings"]["cpu"] == "no-shani" and doc["settings"]["openssl_ia32cap"] == NO_SHANI_VALUE
    by = {r["backend"]: r for r in doc["results"]}
    assert by["openssl"]["status"] == "ok" and by["openssl"]["cpu_mask"] == "no-shani"
    assert by["openssl"]["capabilities"]["env"] == NO_SHANI_VALUE
    assert by["ring"]["status"] == "unsupported"
    table = cli("speed", "-b", "openssl", "-o", "sha256", "--cpu", "no-shani")
    assert table.code == 0 and "CPU mask no-shani" in table.out
    bad = cli("speed", "--cpu", "no-sha")
    assert_one_line_error(bad, "--cpu", "no-sha", code=2)


def test_a_worker_too_old_for_masks_is_refused_up_front(cli, write_study, fake_worker):
    fake_worker({"cpu_masks": []})
    res = cli("study", write_study(TWO_CONFIG_STUDY.format(reps=3, timeout=5)))
    assert_one_line_error(res, "cannot verify CPU capability masks", "pip install .", code=1)


def test_existing_studies_are_unchanged_by_the_mask_axis(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    res = cli("study", write_study(TWO_CONFIG_STUDY.format(reps=3, timeout=5)), "--dry-run")
    assert res.code == 0 and "cpu=" not in res.out and "OPENSSL_ia32cap" not in res.out


def test_a_mask_is_named_wherever_runs_are_compared_or_listed(cli, fake_worker, tmp_path):
    """A run measured under a CPU mask and one without: compare names the mask first among the
    host differences (never "host differences: none"), the run's HTML and Markdown reports say
    it in their header and host facts, and the published index lists it."""
    fake_worker({"mask_factor": {"no-shani": 2.0}})
    store = tmp_path / "runs.sqlite"
    for extra in ((), ("--cpu", "no-shani")):
        res = cli("speed", "-b", "openssl", "-o", "sha256", "--store", store, *extra)
        assert res.code == 0, res.err
    res = cli("compare", "1", "2", "--store", store)
    assert res.code == 0, res.err
    assert "host differences: none" not in res.out
    table = res.out[res.out.index("host differences"):]
    assert "CPU mask" in table and "none (unmasked)" in table and "no-shani" in table
    doc = json.loads(cli("compare", "1", "2", "--store", store, "--json").out)
    assert doc["host_differences"][0] == {"field": "CPU mask", "a": "none (unmasked)", "b": "no-shani"}
    # the same run against itself: no difference
    assert "host differences: none" in cli("compare", "2", "2", "--store", store).out
    html = cli("report", "2", "--store", store, "--format", "html", "-o", "-").out
    assert "CPU mask no-shani" in html and "<dt>CPU mask</dt><dd>no-shani" in html
    md = cli("report", "2", "--store", store, "--format", "md", "-o", "-").out
    assert "under CPU mask no-shani" in md and "\n- CPU mask: no-shani" in md
    assert "- CPU mask: none (every cell ran unmasked)" in cli("report", "1", "--store", store, "--format", "md",
                                                              "-o", "-").out
    res = cli("publish", tmp_path / "site", "--store", store)
    assert res.code == 0, res.err
    index = (tmp_path / "site" / "index.html").read_text()
    row = index[index.index('<tr id="run-2"'):]
    assert '<td class="cpu-mask">no-shani' in row[:row.index("</tr>")]
    row = index[index.index('<tr id="run-1"'):]
    assert '<td class="cpu-mask">none (every cell ran unmasked)</td>' in row[:row.index("</tr>")]


def test_mask_differences_name_the_cells_they_concern():
    from cryptoperf import compare
    from cryptoperf.model import Cell

    def summary(cpu: str, label: str):
        from cryptoperf.model import CellSummary
        return CellSummary(Cell("", "openssl", label, label, cpu=cpu), 0, 0, "ok", "", None, None, None, None, None,
                           (), {}, {}, {}, 0.0, 0.0, None, 0, None, None, None)
    pairs = [(summary("baseline", "a"), summary("no-aesni", "a")), (summary("baseline", "b"), summary("baseline", "b"))]
    (d,) = compare.mask_differences(pairs)
    assert (d.field, d.a, d.b) == ("CPU mask (1 of 2 cells)", "none (unmasked)", "no-aesni")
    assert compare.mask_differences(pairs[1:]) == []
