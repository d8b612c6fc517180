"""Every bad input gives one line 'cryptoperf: error: ...' on stderr, a non-zero exit and no
traceback."""

import pytest

from conftest import TWO_CONFIG_STUDY, assert_one_line_error, run_subprocess
from cryptoperf import builds, engine

STUDY = TWO_CONFIG_STUDY.format(reps=3, timeout=5)


def test_malformed_study_file(cli, write_study, fake_worker):
    fake_worker()
    p = write_study(STUDY.replace('baseline = "A"', 'baseline = A'))
    line = assert_one_line_error(cli("study", p), f"{p}:3: not valid TOML", code=2)
    assert "line 3" in line


def test_unknown_study_key(cli, write_study, fake_worker):
    fake_worker()
    p = write_study(STUDY.replace("seconds = 0.01", "secnds = 0.01"))
    assert_one_line_error(cli("study", p), f"{p}:6: [study], field 'secnds'", "did you mean 'seconds'?", code=2)


def test_study_unknown_operation_lists_known(cli, write_study, fake_worker):
    fake_worker()
    p = write_study(STUDY.replace('hash = "sha512"', 'hash = "sha513"'))
    assert_one_line_error(cli("study", p), "unknown operation 'sha513'", "known: sha1, sha256",
                          "operation 'hash', field 'op'", code=2)


def test_study_unknown_backend_lists_known(cli, write_study, fake_worker):
    fake_worker()
    p = write_study(STUDY.replace('backends = ["openssl"]', 'backends = ["boringssl"]'))
    assert_one_line_error(cli("study", p), f"{p}:4:", "unknown backend 'boringssl'",
                          "known: openssl, aws-lc, ring, rustcrypto", code=2)


@pytest.mark.parametrize("old, new, fragment", [
    # what the file alone can tell ...
    ("sizes = [1024]", "sizes = [0]", "field 'sizes': 0 bytes is out of range; allowed: >= 1 bytes"),
    ("warmup_s = 0", "warmup_s = 0\nthreads = 0", "field 'threads': 0 is out of range; allowed: >= 1"),
    ("repetitions = 3", "repetitions = 2", "field 'repetitions': 2 is out of range; allowed: 3..1000"),
    # ... and the limits the worker announces in its hello
    ("sizes = [1024]", "sizes = [67108865]",
     "67108865 bytes is above the worker's limit of 67108864 bytes (max_size_bytes in its hello)"),
    ("warmup_s = 0", "warmup_s = 0\nthreads = 1025",
     "field 'threads': 1025 is above the worker's limit of 1024 (max_threads in its hello)"),
    ("warmup_s = 0\ntimeout_s = 5", "warmup_s = 601\ntimeout_s = 700",
     "field 'warmup_s': 601 s is above the worker's limit of 600 s (max_warmup_s in its hello)"),
    ("seconds = 0.01\nwarmup_s = 0\ntimeout_s = 5", "seconds = 3601\nwarmup_s = 0\ntimeout_s = 4000",
     "field 'seconds': 3601 s is above the worker's limit of 3600 s (max_seconds in its hello)"),
])
def test_study_out_of_range(cli, write_study, fake_worker, old, new, fragment):
    fake_worker()
    p = write_study(STUDY.replace(old, new))
    assert_one_line_error(cli("study", p), fragment, code=2)


def test_missing_study_file(cli, tmp_path):
    assert_one_line_error(cli("study", tmp_path / "nope.toml"), "nope.toml: no such study file", code=2)


def test_study_without_file(cli):
    assert_one_line_error(cli("study"), "study needs a FILE", code=2)


@pytest.mark.parametrize("args, fragments", [
    (["speed", "--backend", "boringssl"], ["unknown backend 'boringssl'", "known: openssl, aws-lc, ring, rustcrypto"]),
    (["speed", "--op", "sha257"], ["unknown operation 'sha257' (known: sha1"]),  # no guess at another hash
    (["speed", "--op", "sha2566"], ["unknown operation 'sha2566' (known: sha1"]),
    (["speed", "--op", "rsa2048-sgin"], ["unknown operation 'rsa2048-sgin'; did you mean 'rsa2048-sign'?"]),
    (["speed", "--size", "0"], ["Invalid value for '--size'", "0 is not a message size: give at least 1 byte"]),
    (["speed", "--size", "16KB"], ["Invalid value for '--size'", "'16KB' is ambiguous", "16k or 16KiB"]),
    (["speed", "--size", "64MiB", "--size", "65MiB"], ["--size 68157440 is above the worker's limit of 67108864"]),
    (["speed", "--size", "67108865"], ["--size 67108865 is above the worker's limit of 67108864 bytes"]),
    (["speed", "--threads", "0"], ["Invalid value for '--threads'", "x>=1"]),
    (["speed", "--threads", "5000"], ["--threads 5000 is above the worker's limit of 1024"]),
    (["speed", "--seconds", "0"], ["Invalid value for '--seconds'"]),
    (["speed", "--seconds", "3601", "--timeout", "4000"], ["--seconds 3601 is above the worker's limit of 3600"]),
    (["speed", "--warmup", "601", "--timeout", "4000"], ["--warmup 601 is above the worker's limit of 600"]),
    (["speed", "--bogus"], ["No such option", "--bogus"]),
    (["speed", "--timeout", "0.5"], ["--timeout 0.5 s does not exceed --warmup + --seconds = 0.7 s"]),
    (["frobnicate"], ["No such command 'frobnicate'"]),
])
def test_speed_usage_errors(cli, fake_worker, args, fragments):
    fake_worker()
    res = cli(*args)
    assert_one_line_error(res, *fragments, code=2)


def test_missing_worker_binary(cli, write_study, monkeypatch, tmp_path):
    monkeypatch.delenv("CRYPTOPERF_WORKER", raising=False)
    monkeypatch.setattr(builds, "candidates", lambda build="default": [tmp_path / "none"])
    msg = "cryptoperf-worker not found; reinstall with `pip install .` or set CRYPTOPERF_WORKER"
    assert_one_line_error(cli("speed"), msg, code=1)
    assert_one_line_error(cli("study", write_study(STUDY)), msg, code=1)
    assert_one_line_error(cli("backends"), msg, code=1)


def test_worker_env_points_nowhere(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("CRYPTOPERF_WORKER", str(tmp_path / "nope"))
    assert_one_line_error(cli("backends"), "CRYPTOPERF_WORKER=", "is not an executable file", code=1)


def test_protocol_mismatch(cli, fake_worker):
    fake_worker({"protocol": 7})
    assert_one_line_error(cli("backends"), "speaks protocol 7", "reinstall both", code=1)


def test_unwritable_store(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    blocker = tmp_path / "file"
    blocker.write_text("")
    # a study finds it before its first repetition (preflight.check), in one line, exit 2
    res = cli("study", write_study(STUDY), "--store", blocker / "runs.sqlite")
    assert_one_line_error(res, f"store {blocker / 'runs.sqlite'}: its directory {blocker} cannot be made: "
                               f"{blocker} is a file, not a directory", "--store", code=2)
    # speed when it opens the store
    res = cli("speed", "--op", "sha256", "--backend", "openssl", "--seconds", "0.01", "--warmup", "0",
              "--store", blocker / "runs.sqlite")
    line = res.err.strip().splitlines()[-1]
    assert res.code == 1 and line.startswith("cryptoperf: error: cannot create store") and "--store" in line
    assert "Traceback" not in res.err


def test_ctrl_c_is_one_line_with_status_130(cli, fake_worker, monkeypatch):
    """Ctrl-C during speed (study: test_study_fake.py) says what was kept, without a traceback."""
    fake_worker()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "speed", interrupted)
    assert_one_line_error(cli("speed", "-o", "sha256"),
                          "interrupted; repetitions finished so far are in the store", code=130)


def test_errors_in_a_real_process(tmp_path, fake_worker):
    """The same through `python -m cryptoperf`: one line, no traceback."""
    bad = tmp_path / "bad.toml"
    bad.write_text(STUDY.replace("[[operation]]", "[[operation]\n"))
    res = run_subprocess("study", bad, "--store", tmp_path / "s.sqlite")
    assert_one_line_error(res, f"{bad}:", "not valid TOML", code=2)
    res = run_subprocess("speed", "--threads", "0")
    assert_one_line_error(res, "--threads", code=2)
    res = run_subprocess("backends", env={"CRYPTOPERF_WORKER": str(tmp_path / "none")})
    assert_one_line_error(res, "is not an executable file", code=1)


def test_help_texts(cli):
    for args in (["--help"], ["study", "--help"], ["speed", "--help"], ["backends", "--help"]):
        res = cli(*args)
        assert res.code == 0 and "Usage:" in res.out and res.err == ""
    assert "--json" in cli("speed", "--help").out
    opts = cli("study", "--options")
    assert opts.code == 0 and "[[configuration]]" in opts.out and "repetitions" in opts.out
