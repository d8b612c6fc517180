"""The library-version axis: `library = "openssl@3.6"` in studies, the openssl@3.6 worker build,
`cryptoperf setup` (with a fake cargo: nothing is compiled here) and building on first use."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FAKE_WORKER, ROOT, assert_one_line_error, fake_worker_script, worker_rules
from cryptoperf import builds, paths, schedule, study, workerbuild
from cryptoperf.store import db as store
from cryptoperf.errors import StudyError, UsageError

#: The real worker's rules (tests/fixtures/worker-hello.json) with its four backends.
RULES = worker_rules()
V36 = "3.6.3 1 Jul 2026"

STUDY = """\
[study]
name = "lib"
baseline = "system"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0
timeout_s = 20

[[configuration]]
name = "system"

[[configuration]]
name = "new"
library = "openssl@3.6"

[[operation]]
op = "sha256"
sizes = [1024]
"""


def parse(text: str) -> study.Study:
    s = study.parse(text, "s.toml")
    return study.check_against_worker(s, RULES)


def study_error(text: str) -> StudyError:
    with pytest.raises(StudyError) as e:
        parse(text)
    return e.value


def line_of(text: str, fragment: str) -> int:
    return next(i for i, l in enumerate(text.splitlines(), 1) if fragment in l)


# ----------------------------------------------------------------------------- the study key

def test_library_defaults_to_the_system_openssl_and_picks_the_build():
    s = parse(STUDY)
    system, new = s.configurations
    assert (system.library, system.build, system.backend) == ("openssl@system", "default", None)
    assert (new.library, new.build, new.backend) == ("openssl@3.6", "openssl@3.6", "openssl")
    explicit = parse(STUDY.replace('name = "system"', 'name = "system"\nlibrary = "openssl@system"'))
    assert explicit.configurations[0].build == "default"


def test_library_other_than_system_runs_on_openssl_only():
    s = parse(STUDY.replace('backends = ["openssl"]', 'backends = ["openssl", "aws-lc"]'))
    assert s.backends_of(s.configuration("new")) == ("openssl",)
    assert s.backends_of(s.configuration("system")) == ("openssl", "aws-lc")
    # backend = "openssl" may be spelt out
    parse(STUDY.replace('library = "openssl@3.6"', 'library = "openssl@3.6"\nbackend = "openssl"'))


def test_unknown_library_suggests_and_names_the_line():
    text = STUDY.replace('"openssl@3.6"', '"openssl@3.5"')
    e = study_error(text)
    assert e.line == line_of(text, "openssl@3.5")
    assert str(e).startswith(f"s.toml:{e.line}: configuration 'new', field 'library': unknown library \"openssl@3.5\"")
    assert "did you mean 'openssl@3.6'?" in str(e) and "known: openssl@system, openssl@3.6" in str(e)


def test_library_must_be_a_string():
    e = study_error(STUDY.replace('"openssl@3.6"', "3.6"))
    assert "field 'library': must be a string, not 3.6" in str(e)


def test_fips_with_another_library_is_refused():
    text = STUDY.replace('library = "openssl@3.6"', 'fips = true\nlibrary = "openssl@3.6"')
    e = study_error(text)
    assert e.line == line_of(text, 'library = "openssl@3.6"') and e.field == "configuration 'new', field 'library'"
    assert "with fips = true is not supported" in e.problem


def test_another_backend_with_a_library_is_refused():
    text = STUDY.replace('library = "openssl@3.6"', 'library = "openssl@3.6"\nbackend = "aws-lc"')
    e = study_error(text)
    assert e.line == line_of(text, 'backend = "aws-lc"')
    assert "changes only the openssl backend" in e.problem and 'backend = "openssl"' in e.problem


def test_a_library_where_the_baseline_has_no_openssl():
    # a baseline on one other backend: OpenSSL 3.6 is compared with it block by block, as an
    # implementation against another
    s = parse(STUDY.replace('backends = ["openssl"]', 'backends = ["aws-lc"]'))
    assert s.paired_on(s.configuration("new")) == "aws-lc"
    # a baseline on two backends, neither of them openssl: no baseline cell to pair with
    text = STUDY.replace('backends = ["openssl"]', 'backends = ["aws-lc", "ring"]')
    e = study_error(text)
    assert e.line == line_of(text, 'library = "openssl@3.6"')
    assert "runs on openssl (library = \"openssl@3.6\" runs on backend openssl only) where the baseline" in e.problem
    assert "pin the baseline to one backend" in e.problem


def test_library_upgrade_study_is_valid():
    s = study.load(ROOT / "studies" / "library-upgrade.toml")
    s = study.check_against_worker(s, RULES)
    assert s.baseline == "system" and s.backends == ("openssl",)
    assert {c.name: c.build for c in s.configurations} == {"system": "default", "openssl-3.6": "openssl@3.6"}
    assert [o.op for o in s.operations] == [
        "rsa2048-sign", "rsa2048-verify", "rsa3072-sign", "rsa3072-verify", "rsa4096-sign",
        "rsa4096-verify", "ecdsa-p256-sign", "ecdsa-p256-verify", "x25519-derive",
        "aes-128-gcm-seal", "sha256"]
    cells = schedule.expand(s)
    assert len(cells) == len(s.operations) * len(s.configurations)
    settings = schedule.Settings(seconds=s.seconds, warmup_s=s.warmup_s, threads=s.threads, timeout_s=s.timeout_s)
    eta = (schedule.calibration_seconds(len(cells), settings)
           + schedule.estimated_seconds(len(cells) * s.repetitions, settings))
    assert 100 <= eta <= 200  # "about 2-3 minutes", as its comment says


def test_options_help_describes_library():
    text = study.options_help()
    assert "library" in text and "openssl@3.6" in text and "openssl@system" in text


# ----------------------------------------------------------------------------- build resolution

def test_openssl_system_is_the_default_build():
    assert builds.resolve("openssl@system") == "default"
    assert builds.resolve("openssl@3.6") == "openssl@3.6"
    assert builds.resolve("fips") == "fips"
    with pytest.raises(KeyError):
        builds.resolve("openssl@9")
    assert builds.for_configuration(False) == "default"
    assert builds.for_configuration(False, "openssl@3.6") == "openssl@3.6"
    assert builds.for_configuration(True) == "fips"
    assert builds.setup_names() == ["openssl@3.6"]


def test_the_cached_build_lives_under_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CRYPTOPERF_WORKER_OPENSSL_3_6", raising=False)
    cached = tmp_path / "data" / "workers" / "openssl-3.6" / "cryptoperf-worker"
    assert builds.cached_binary("openssl@3.6") == cached
    assert builds.cached_binary("default") is None
    # only the cache is searched: never the default build's binary of the same name
    assert builds.candidates("openssl@3.6") == [cached]
    with pytest.raises(builds.BuildUnavailable) as e:
        builds.find_worker("openssl@3.6")
    assert "not built yet" in str(e.value) and "run `cryptoperf setup openssl@3.6`" in str(e.value)
    assert store.default_path() == tmp_path / "data" / "runs.sqlite"


def test_data_dir_defaults_to_the_user_data_dir(monkeypatch):
    monkeypatch.delenv("CRYPTOPERF_DATA_DIR", raising=False)
    assert paths.data_dir().name == "cryptoperf"


def test_recipe_names_what_setup_can_make():
    assert workerbuild.recipe("openssl@3.6").features == ("vendored-openssl",)
    with pytest.raises(UsageError, match="did you mean 'openssl@3.6'"):
        workerbuild.recipe("openssl@3.5")
    with pytest.raises(UsageError, match="which `pip install .` installs"):
        workerbuild.recipe("openssl@system")


def test_sources_are_the_checkout_worker_when_not_installed():
    src = workerbuild.sources()
    assert (src / "Cargo.toml").is_file() and (src / "Cargo.lock").is_file() and (src / "src" / "main.rs").is_file()


def test_last_error_line():
    assert workerbuild.last_error(["   Compiling a", "error: linking failed", "  note: x", ""]) == "error: linking failed"
    assert workerbuild.last_error(["error[E0425]: cannot find value", "x"]) == "error[E0425]: cannot find value"
    assert workerbuild.last_error(["something", "last words", ""]) == "last words"
    assert workerbuild.last_error([]) == ""


# ----------------------------------------------------------------------------- setup, fake cargo

FAKE_CARGO = '''\
#!{python}
"""A fake cargo: records its arguments, prints cargo-like progress, and "builds" a worker
(a wrapper around tests/fake_worker.py reporting OpenSSL $FAKE_CARGO_VERSION)."""
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
Path(os.environ["FAKE_CARGO_LOG"]).write_text(json.dumps(args))
for crate in ("openssl-src v300.6.1+3.6.3", "openssl-sys v0.9.118", "openssl v0.10.82", "cryptoperf-worker v0.1.0"):
    print(f"   Compiling {{crate}}", file=sys.stderr)
if os.environ.get("FAKE_CARGO_FAIL"):
    print("error: failed to run custom build command for `openssl-sys v0.9.118`", file=sys.stderr)
    print("", file=sys.stderr)
    print("Caused by:", file=sys.stderr)
    print("  process didn't exit successfully (exit status: 101)", file=sys.stderr)
    sys.exit(101)
target = Path(args[args.index("--target-dir") + 1]) / "release"
target.mkdir(parents=True, exist_ok=True)
binary = target / "cryptoperf-worker"
version = os.environ.get("FAKE_CARGO_VERSION", "{v36}")
binary.write_text(f'#!/bin/sh\\nFAKE_WORKER_OPENSSL_VERSION="{{version}}" exec "{python}" "{fake}" "$@"\\n')
binary.chmod(0o755)
print("    Finished `release` profile [optimized] target(s) in 1.00s", file=sys.stderr)
'''


def last_line_error(res, *fragments: str) -> str:
    """A build that started announces itself on stderr first; then exactly one error line,
    the last, with every fragment, and no traceback. Returns the error line."""
    lines = [l for l in res.err.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("cryptoperf: error: ")]
    assert res.code == 1 and "Traceback" not in res.err and errors == lines[-1:], res
    for f in fragments:
        assert f in errors[0], (f, errors[0])
    return errors[0]


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    d = tmp_path / "data"
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(d))
    monkeypatch.delenv("CRYPTOPERF_WORKER_OPENSSL_3_6", raising=False)
    return d


@pytest.fixture
def fake_cargo(tmp_path, monkeypatch, data_dir):
    """A `cargo` first on PATH that makes a fake openssl@3.6 worker; returns the file its
    arguments are recorded in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "cargo", FAKE_CARGO.format(python=sys.executable, fake=FAKE_WORKER, v36=V36))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "cargo-args.json"
    monkeypatch.setenv("FAKE_CARGO_LOG", str(log))
    monkeypatch.delenv("FAKE_CARGO_FAIL", raising=False)
    monkeypatch.delenv("FAKE_CARGO_VERSION", raising=False)
    return log


@pytest.fixture
def no_cargo(tmp_path, monkeypatch, data_dir):
    """PATH without cargo."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_setup_builds_caches_and_checks_the_worker(cli, fake_cargo, data_dir, fake_worker):
    res = cli("setup", "openssl@3.6")
    assert res.code == 0, res
    cached = data_dir / "workers" / "openssl-3.6" / "cryptoperf-worker"
    assert res.out.strip() == f"built openssl@3.6 (openssl {V36}) in 0 s: {cached}" or \
        res.out.startswith("built openssl@3.6 (openssl 3.6.3") and str(cached) in res.out
    assert "building the openssl@3.6 worker: OpenSSL 3.6, built from source" in res.err
    args = json.loads(fake_cargo.read_text())
    src = workerbuild.sources()
    assert args == ["build", "--release", "--locked", "--features", "vendored-openssl",
                    "--manifest-path", str(src / "Cargo.toml"), "--target-dir", str(data_dir / "target")]
    assert os.access(cached, os.X_OK)
    record = json.loads((cached.parent / "build.json").read_text())
    assert record["library_version"] == V36 and record["features"] == ["vendored-openssl"]
    log = (data_dir / "logs" / "openssl-3.6.log").read_text()
    assert log.startswith("$ ") and "Compiling openssl-sys v0.9.118" in log
    # found where it was cached, and not rebuilt
    assert builds.find_worker("openssl@3.6") == cached
    again = cli("setup", "openssl@3.6")
    assert again.code == 0 and "openssl@3.6 is already built (OPENSSL 3.6.3" in again.out
    listing = cli("setup", "--list")
    assert listing.code == 0 and "openssl@3.6" in listing.out and "built" in listing.out
    assert f"{cached} (OPENSSL {V36})" in listing.out.replace("\n", " ") or str(cached) in listing.out


def test_setup_refuses_a_worker_with_the_wrong_library_version(cli, fake_cargo, data_dir, monkeypatch):
    monkeypatch.setenv("FAKE_CARGO_VERSION", "3.0.19 27 Jan 2026")
    res = cli("setup", "openssl@3.6")
    assert res.err.startswith("building the openssl@3.6 worker:")  # the announcement, then one error line
    last_line_error(res, "the freshly built openssl@3.6 worker is not usable",
                    "reports openssl 3.0.19 27 Jan 2026, not 3.6.x", "cargo's full output:")
    assert not (data_dir / "workers" / "openssl-3.6" / "cryptoperf-worker").exists()


def test_setup_without_cargo_is_one_line(cli, no_cargo):
    res = cli("setup", "openssl@3.6")
    assert_one_line_error(res, "needs Rust's cargo, which is not on PATH", "install Rust (https://rustup.rs)",
                          "then run `cryptoperf setup openssl@3.6`", code=1)


def test_failed_build_is_one_line_with_the_log(cli, fake_cargo, data_dir, monkeypatch):
    monkeypatch.setenv("FAKE_CARGO_FAIL", "1")
    res = cli("setup", "openssl@3.6")
    line = last_line_error(res)
    log = data_dir / "logs" / "openssl-3.6.log"
    assert line == ("cryptoperf: error: building the openssl@3.6 worker failed: error: failed to run custom "
                      f"build command for `openssl-sys v0.9.118` (cargo's full output: {log})")
    assert "process didn't exit successfully" in log.read_text()


def test_setup_unknown_name(cli, data_dir):
    assert_one_line_error(cli("setup", "openssl@3"), "unknown worker build 'openssl@3'",
                          "did you mean", code=2)


def test_setup_list_without_builds(cli, data_dir, fake_worker):
    res = cli("setup")
    assert res.code == 0
    assert "default = openssl@system" in res.out and "openssl@3.6" in res.out
    assert "not built yet" in res.out and "cryptoperf setup openssl@3.6" in res.out


# ----------------------------------------------------------------------------- studies and speed

def test_study_with_no_setup_names_the_command(cli, write_study, fake_worker, data_dir):
    fake_worker()
    p = write_study(STUDY)
    assert_one_line_error(cli("study", p, "--no-setup"), f"{p}: configuration 'new' needs the openssl@3.6 "
                          "worker build", "not built yet", "run `cryptoperf setup openssl@3.6`", code=1)


def test_study_without_cargo_names_the_command(cli, write_study, fake_worker, no_cargo):
    fake_worker()
    assert_one_line_error(cli("study", write_study(STUDY)), "needs Rust's cargo",
                          "`cryptoperf setup openssl@3.6`", code=1)


def test_dry_run_builds_nothing(cli, write_study, fake_worker, fake_cargo):
    fake_worker()
    res = cli("study", write_study(STUDY), "--dry-run")
    assert res.code == 0, res
    assert "worker=(not built yet: `cryptoperf setup openssl@3.6`)" in res.out
    assert not fake_cargo.exists()


def test_study_builds_on_first_use_and_records_the_library(cli, write_study, fake_worker, fake_cargo,
                                                          data_dir, tmp_path):
    fake_worker({"config_factor": {"new": 0.5}})
    res = cli("study", write_study(STUDY), "--no-report")
    assert res.code == 0, res
    assert "configuration 'new' needs the openssl@3.6 worker, which is not built yet" in res.err
    assert "a one-time build of about" in res.err and str(data_dir / "workers" / "openssl-3.6") in res.err
    assert fake_cargo.exists()
    doc = json.loads(next((tmp_path / "cryptoperf-results").glob("lib-*.json")).read_text())
    versions = {(r["configuration"], r["result"]["library_version"], r["build"]) for r in doc["repetitions"]}
    assert versions == {("system", "fake-1.0", "default"), ("new", V36, "openssl@3.6")}
    assert doc["host"]["builds"]["openssl@3.6"]["libraries"]["openssl"]["library_version"] == V36
    assert [c["library"] for c in doc["study"]["configurations"]] == ["openssl@system", "openssl@3.6"]
    (delta,) = doc["deltas"]
    assert delta["configuration"] == "new" and delta["latency"]["ratio"] == pytest.approx(0.5, rel=1e-3)
    assert delta["latency"]["ci_low"] is not None and delta["latency"]["ci_high"] is not None
    assert delta["verdict"]["kind"] == "faster" and delta["blocks"] == 3
    # the fake's p50s are exact, so the interval is as wide as the histogram's resolution
    assert delta["verdict"]["text"] == "p50 latency 50.0 % lower [49.9, 50.1]"
    # both library releases are named beside the verdict (the table may wrap the cell)
    assert (delta["baseline_library_version"], delta["library_version"]) == ("OPENSSL fake-1.0", f"OPENSSL {V36}")
    assert "different library releases: OPENSSL fake-1.0 →" in res.out  # a footnote, once
    # the report names both OpenSSL versions
    md = cli("report", "--format", "md", "--output", "-", "--store", tmp_path / "runs.sqlite")
    assert md.code == 0 and f"openssl [openssl@3.6]: OPENSSL {V36}" in md.out and "openssl: OPENSSL fake-1.0" in md.out
    # the second study finds the build and does not rebuild it
    fake_cargo.unlink()
    res = cli("study", write_study(STUDY), "--no-report", "--no-setup")
    assert res.code == 0 and not fake_cargo.exists() and "not built yet" not in res.err


def test_a_stale_cached_build_is_named_with_force(cli, write_study, fake_worker, data_dir):
    fake_worker()
    cached = data_dir / "workers" / "openssl-3.6" / "cryptoperf-worker"
    cached.parent.mkdir(parents=True)
    fake_worker_script(cached, FAKE_WORKER_OPENSSL_VERSION="3.5.0")
    assert_one_line_error(cli("study", write_study(STUDY), "--no-setup"), "reports openssl 3.5.0, not 3.6.x",
                          "`cryptoperf setup openssl@3.6 --force`", code=1)


def test_a_build_from_other_sources_is_out_of_date(cli, write_study, fake_worker, fake_cargo, data_dir):
    """build.json records a digest of the worker sources; after an upgrade (other sources) the
    cached build is refused with --no-setup and rebuilt without it."""
    fake_worker()
    assert cli("setup", "openssl@3.6").code == 0
    record_path = data_dir / "workers" / "openssl-3.6" / "build.json"
    record = json.loads(record_path.read_text())
    assert record["source_digest"] == workerbuild.source_digest(workerbuild.sources())
    record["source_digest"] = "0" * 64
    record_path.write_text(json.dumps(record))
    fake_cargo.unlink()
    p = write_study(STUDY)
    assert_one_line_error(cli("study", p, "--no-setup"), "was built from other worker sources than this cryptoperf's",
                          "`cryptoperf setup openssl@3.6 --force`", code=1)
    res = cli("study", p, "--no-report")
    assert res.code == 0 and "the cached one is unusable" in res.err and fake_cargo.exists()
    assert json.loads(record_path.read_text())["source_digest"] != "0" * 64


def test_speed_with_a_library(cli, fake_worker, fake_cargo):
    fake_worker()
    assert_one_line_error(cli("speed", "--library", "openssl@3.6", "--no-setup", "--op", "sha256"),
                          "--library openssl@3.6 needs the openssl@3.6 worker build", code=1)
    assert_one_line_error(cli("speed", "--library", "openssl@3.6", "--backend", "ring"),
                          "changes only the openssl backend", code=2)
    assert_one_line_error(cli("speed", "--library", "openssl@3.6", "--fips"), "not supported", code=2)
    res = cli("speed", "--library", "openssl@3.6", "--op", "sha256", "--seconds", "0.01", "--json")
    assert res.code == 0, res
    doc = json.loads(res.out)
    assert {(r["backend"], r["library_version"], r["build"]) for r in doc["results"]} == {
        ("openssl", V36, "openssl@3.6")}


def test_build_py_ships_the_worker_sources(tmp_path):
    """setup.py's build_py copies worker/Cargo.toml, Cargo.lock and src/** into the package."""
    out = tmp_path / "lib"
    p = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path),
                        "build_py", "--build-lib", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    shipped = out / "cryptoperf" / "_worker_src"
    for rel in ("Cargo.toml", "Cargo.lock", "src/main.rs", "src/backends/openssl.rs", "src/ops/keys/rsa2048.pk8.der"):
        assert (shipped / rel).is_file(), rel
    assert not (shipped / "target").exists()


def test_setup_off_a_terminal_says_how_far_cargo_has_come(cli, fake_cargo, data_dir, fake_worker, monkeypatch):
    """Off a terminal (CI logs) there is no spinner: a line when the build starts, naming the
    log, then one per QUIET_PROGRESS_S (0 here: one per cargo step) with cargo's step."""
    monkeypatch.setattr(workerbuild, "QUIET_PROGRESS_S", 0.0)
    res = cli("setup", "openssl@3.6")
    assert res.code == 0, res
    log = data_dir / "logs" / "openssl-3.6.log"
    assert f"building the openssl@3.6 worker with cargo (its log: {log})" in res.err.replace("\n", " ")
    assert "cargo at: Compiling openssl-sys v0.9.118 + OpenSSL's own build" in res.err.replace("\n", " ")
