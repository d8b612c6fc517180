"""CPU capability masks on the orchestrator side: the study key ``cpu``, cells and run requests,
the worker's environment, and whole studies against the fake worker (which reads the mask from
its own environment, as the libraries do). Real libraries: test_real_worker.py."""

import json

import pytest

from conftest import TWO_CONFIG_STUDY, assert_one_line_error
from cryptoperf import cpumask, plan, study
from cryptoperf.errors import StudyError, WorkerError

MASKED = """\
[study]
name = "accel"
baseline = "base"
backends = ["openssl"]
repetitions = 2

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
        assert "(known: baseline, no-aesni, no-shani, no-avx2, no-avx512)" in msg


def test_cpu_error_through_the_cli(cli, write_study, fake_worker):
    fake_worker()
    res = cli("study", write_study(MASKED.replace('"no-aesni"', '"no-sha"')))
    assert_one_line_error(res, "field 'cpu'", 'unknown CPU mask "no-sha"', "did you mean 'no-shani'?", code=2)


def test_options_help_lists_cpu():
    text = study.options_help()
    assert "cpu" in text and "no-aesni" in text and "baseline" in text


def test_cells_carry_the_mask_in_key_and_request():
    s = study.check_against_worker(study.parse(MASKED, "s.toml"), ["openssl"], ["aes-128-gcm-seal"])
    base, masked = plan.expand(s)
    assert (base.cpu, masked.cpu) == ("baseline", "no-aesni")
    assert base.key == "openssl/aes-128-gcm-seal/16384/base"  # unchanged for unmasked cells
    assert masked.key == "openssl/aes-128-gcm-seal/16384/aes-off/cpu=no-aesni"
    assert base.group == masked.group  # still compared with each other
    assert plan.attrs_from_key(masked.key)["cpu"] == "no-aesni" and plan.attrs_from_key(base.key)["cpu"] == "baseline"
    settings = plan.Settings(seconds=0.1, warmup_s=0, threads=1, timeout_s=5)
    runs = plan.schedule([base, masked], 1)
    assert [plan.run_request(r, settings)["cpu_mask"] for r in runs] == ["baseline", "no-aesni"]


def test_worker_env_sets_or_removes_the_variable():
    inherited = {"PATH": "/bin", "OPENSSL_ia32cap": "~0x0"}  # e.g. left in the user's shell
    assert cpumask.worker_env("baseline", inherited) == {"PATH": "/bin"}
    assert cpumask.worker_env("no-aesni", inherited) == {
        "PATH": "/bin", "OPENSSL_ia32cap": "~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0"}
    assert cpumask.worker_env("no-shani", {})["OPENSSL_ia32cap"] == "~0x0:~0x20000000:~0x0:~0x0:~0x0"
    # every mask spells all five words: OpenSSL 3.0 zeroes the second one otherwise, OpenSSL 3.6
    # the third to fifth, which no mask clears anything of
    assert all(v is None or (v.count(":") == 4 and v.endswith(":~0x0:~0x0:~0x0"))
               for v in cpumask.MASKS.values())


def test_check_hello_refuses_a_worker_that_disagrees():
    good = [{"name": n, "openssl_ia32cap": v} for n, v in cpumask.MASKS.items()]
    cpumask.check_hello(good, ["baseline", "no-aesni"])
    for wanted in (["baseline"], ["no-aesni"]):  # every run request carries cpu_mask
        with pytest.raises(WorkerError, match="cannot verify CPU capability masks"):
            cpumask.check_hello(None, wanted)
    bad = [dict(m, openssl_ia32cap="~0x200000000000000") if m["name"] == "no-aesni" else m for m in good]
    with pytest.raises(WorkerError, match="CPU mask 'no-aesni' is OPENSSL_ia32cap=~0x200000200000000"):
        cpumask.check_hello(bad, ["no-aesni"])


def run_json(cli, write_study, tmp_path, text):
    res = cli("study", write_study(text), "--out", tmp_path / "out")
    docs = sorted((tmp_path / "out").glob("*.json"))
    return res, json.loads(docs[-1].read_text()) if docs else None


def test_masked_configuration_runs_in_a_masked_worker(cli, write_study, fake_worker, tmp_path, monkeypatch):
    """The fake worker is 3x slower only when it was started with no-aesni's OPENSSL_ia32cap, so
    a delta of exactly 3 shows the orchestrator set the variable for the masked cells and for
    them only — even with a stray value inherited from the shell."""
    monkeypatch.setenv("OPENSSL_ia32cap", "~0x0:~0x0")
    fake_worker({"mask_factor": {"no-aesni": 3.0}})
    res, doc = run_json(cli, write_study, tmp_path, MASKED)
    assert res.code == 0, res.err
    envs = {(r["configuration"], r["result"]["capabilities"]["env"]) for r in doc["runs"]}
    assert envs == {("base", None), ("aes-off", "~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0")}
    assert all(r["status"] == "ok" for r in doc["runs"])
    assert [r["result"]["cpu_mask"] for r in doc["runs"]] == ["baseline", "no-aesni"] * 2
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
    masked = {r["backend"]: r for r in doc["runs"] if r["configuration"] == "aes-off"}
    assert masked["openssl"]["status"] == "ok"
    assert masked["ring"]["status"] == "unsupported"
    assert masked["ring"]["reason"] == "RING has no runtime CPU capability mask"
    assert masked["rustcrypto"]["status"] == "unsupported"
    assert masked["aws-lc"]["status"] == "invalid"
    assert masked["aws-lc"]["reason"].startswith("capability mask not applied: ")
    assert all(masked[b]["latency"] is None for b in ("ring", "rustcrypto", "aws-lc"))
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
    assert "OPENSSL_ia32cap" not in lines[0]
    assert lines[1].endswith("OPENSSL_ia32cap=~0x200000200000000:~0x60000000000:~0x0:~0x0:~0x0")


def test_speed_cpu_option(cli, fake_worker, tmp_path):
    fake_worker({"mask_factor": {"no-shani": 2.0}})
    res = cli("speed", "-b", "openssl", "-b", "ring", "-o", "sha256", "--cpu", "no-shani", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["settings"]["cpu"] == "no-shani" and doc["settings"]["openssl_ia32cap"] == "~0x0:~0x20000000:~0x0:~0x0:~0x0"
    by = {r["backend"]: r for r in doc["results"]}
    assert by["openssl"]["status"] == "ok" and by["openssl"]["cpu_mask"] == "no-shani"
    assert by["openssl"]["capabilities"]["env"] == "~0x0:~0x20000000:~0x0:~0x0:~0x0"
    assert by["ring"]["status"] == "unsupported"
    table = cli("speed", "-b", "openssl", "-o", "sha256", "--cpu", "no-shani")
    assert table.code == 0 and "CPU mask no-shani" in table.out
    bad = cli("speed", "--cpu", "no-sha")
    assert_one_line_error(bad, "--cpu", "no-sha", code=2)


def test_a_worker_too_old_for_masks_is_refused_up_front(cli, write_study, fake_worker):
    fake_worker({"cpu_masks": []})
    res = cli("study", write_study(TWO_CONFIG_STUDY.format(reps=2, timeout=5)))
    assert_one_line_error(res, "cannot verify CPU capability masks", "pip install .", code=1)


def test_existing_studies_are_unchanged_by_the_mask_axis(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    res = cli("study", write_study(TWO_CONFIG_STUDY.format(reps=2, timeout=5)), "--dry-run")
    assert res.code == 0 and "cpu=" not in res.out and "OPENSSL_ia32cap" not in res.out
