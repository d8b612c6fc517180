"""Shared fixtures: the fake worker, study files, and running the CLI."""

from __future__ import annotations

import atexit
import json
import marshal
import os
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
FAKE_WORKER = Path(__file__).with_name("fake_worker.py")
sys.path.insert(0, str(SRC))  # test the source tree, installed or not

from cryptoperf.cli import main  # noqa: E402
from cryptoperf.hello import WorkerRules  # noqa: E402


def _private_ray_token() -> None:
    """Every Ray head, node and driver the tests start (in this process or as children) shares
    one authentication token made for this session, with token authentication on explicitly
    (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH). Without it, whether a head runs with a token
    depends on whether ~/.ray/auth_token exists, which an earlier run (or an earlier test's
    ``ray.init()``, which writes it) may or may not have left; and a node joining a head decides
    on its own, so the two can disagree. Ray reads the mode when it is first imported, hence
    here, before any test module imports it."""
    folder = Path(tempfile.mkdtemp(prefix="cryptoperf-tests-ray-"))
    token = folder / "auth_token"
    token.write_text(secrets.token_hex(32))  # as `ray get-auth-token --generate` makes one
    token.chmod(0o600)
    os.environ.pop("RAY_AUTH_TOKEN", None)  # read before the path by Ray
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


_private_ray_token()


def _private_data_dir() -> None:
    """cryptoperf's data directory (its default store, the builds ``cryptoperf setup`` caches,
    OpenSSL's FIPS provider) is a new one for every test session: no test reads what an earlier
    run left in ~/.local/share/cryptoperf, nor leaves anything there. Tests that need their own
    set CRYPTOPERF_DATA_DIR themselves."""
    folder = tempfile.mkdtemp(prefix="cryptoperf-tests-data-")
    os.environ["CRYPTOPERF_DATA_DIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


_private_data_dir()

#: The parallel phase's longest files, longest first (what .ci/run's --durations showed): .ci/run
#: hands whole files to its two test processes (--dist loadfile) in collection order
#: (--no-loadscope-reorder), so these start first — the OpenSSL FIPS provider's build (about
#: 2 minutes) beside the simulations — and the short files fill in at the end, instead of a long
#: file with few tests starting last and running alone.
LONGEST_FIRST = ("test_openssl_fips_provider.py", "test_simulation.py", "test_doors_closed.py", "test_fuzz_study.py",
                 "test_explain.py", "test_pkcs11.py", "test_report_browser.py", "test_simulation_runs.py",
                 "test_economics.py", "test_publish.py", "test_report.py", "test_store_postgres.py", "test_api.py",
                 "test_go_worker.py", "test_fleet.py", "test_document.py")


def pytest_collection_modifyitems(config, items):
    """In an xdist test process (every one collects the same order), LONGEST_FIRST's files first."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))

try:  # the hypothesis profiles of the fuzz tests (tests/test_fuzz_study.py)
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is in the test extra; without it those tests do not import
    settings = None
if settings is not None:
    # ci (the default): about a minute for the fuzz tests on 2 cores; long: a run of hours, of at
    # least 100,000 parser inputs (docs/reliability.md). CRYPTOPERF_FUZZ_EXAMPLES=N sets the inputs
    # per fuzz test in either.
    _common = dict(deadline=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("ci", max_examples=int(os.environ.get("CRYPTOPERF_FUZZ_EXAMPLES", 300)), **_common)
    settings.register_profile("long", max_examples=int(os.environ.get("CRYPTOPERF_FUZZ_EXAMPLES", 30000)), **_common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: The real worker's rules as its hello announces them (fixtures/refresh_worker_hello.py).
WORKER_HELLO = json.loads((Path(__file__).with_name("fixtures") / "worker-hello.json").read_text())
BACKENDS = ("openssl", "aws-lc", "ring", "rustcrypto")


def worker_rules(backends=BACKENDS, ops=None, devices=()) -> WorkerRules:
    """The real worker's rules (tests/fixtures/worker-hello.json) with these backends (and these
    device backends, announced as the worker announces ``pkcs11``) and, if given, only these
    operations."""
    hello = dict(WORKER_HELLO, backends=[{"backend": b} for b in backends]
                 + [{"backend": d, "device": d} for d in devices])
    if ops is not None:
        hello["ops"] = list(ops)
    return WorkerRules.from_hello(hello)


def as_a_terminal_starts_it() -> None:
    """``preexec_fn`` for a process a test will Ctrl-C (SIGINT to its group): SIGINT at its
    default, as a shell gives a foreground job. A test run started in the background by a
    non-interactive shell (``pytest &``) inherits SIGINT ignored, and so would every child —
    which would then run to the end through the test's Ctrl-C."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _fake_worker_exec() -> str:
    """The shell command (``exec …``, the wrapper's arguments passed on) that runs fake_worker.py
    as its script would run, but without the interpreter's per-start costs the suite pays once
    per repetition: the script compiled once per test session (a script run as ``python FILE``
    is compiled at every start), no ``site`` (``-S``: this process's module path is given
    instead, so the same hdrh is found), and a prompt exit once it returns (nothing of the fake
    runs after its main loop; an exception or a ``sys.exit`` still ends it as before)."""
    folder = Path(tempfile.mkdtemp(prefix="cryptoperf-tests-fake-worker-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    code = folder / "fake_worker.marshal"
    code.write_bytes(marshal.dumps(compile(FAKE_WORKER.read_text(), str(FAKE_WORKER), "exec")))
    path = [str(FAKE_WORKER.parent)] + [p for p in sys.path if p and os.path.isdir(p)]
    stub = (f"import marshal, os, sys\nsys.path[:0] = {path!r}\n"
            f"with open({str(code)!r}, 'rb') as f:\n    code = marshal.load(f)\n"
            f"exec(code, {{'__name__': '__main__', '__file__': {str(FAKE_WORKER)!r}, '__builtins__': __builtins__}})\n"
            "sys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n")
    return f'exec {shlex.quote(sys.executable)} -S -c {shlex.quote(stub)} "$@"'


#: ``exec`` fake_worker.py with the wrapper's arguments (``_fake_worker_exec``): the last line of
#: every wrapper script that stands for a worker binary.
FAKE_WORKER_EXEC = _fake_worker_exec()


def fake_worker_script(path: Path, **env: str) -> Path:
    """Write at ``path`` an executable shell script that runs fake_worker.py with the
    environment variables ``env`` set (e.g. ``FAKE_WORKER_BUILD="fips"``); returns ``path``."""
    prefix = "".join(f'{k}="{v}" ' for k, v in env.items())
    path.write_text(f'#!/bin/sh\n{prefix}{FAKE_WORKER_EXEC}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture(autouse=True)
def no_team_store(monkeypatch):
    """A developer's CRYPTOPERF_STORE (say, the team's PostgreSQL store) is not the tests':
    without --store they use the default store under CRYPTOPERF_DATA_DIR, as everywhere else."""
    monkeypatch.delenv("CRYPTOPERF_STORE", raising=False)


@pytest.fixture
def fake_worker(tmp_path, monkeypatch):
    """Install the fake worker as CRYPTOPERF_WORKER; call it with a spec dict (see
    fake_worker.py) to set the script. Returns the wrapper's path."""
    wrapper = fake_worker_script(tmp_path / "fake-cryptoperf-worker")
    monkeypatch.setenv("CRYPTOPERF_WORKER", str(wrapper))
    monkeypatch.setenv("FAKE_WORKER_SPEC", "{}")
    state = tmp_path / "fake-worker-state"
    state.mkdir(exist_ok=True)
    monkeypatch.setenv("FAKE_WORKER_STATE", str(state))

    def use(spec: dict | None = None) -> Path:
        monkeypatch.setenv("FAKE_WORKER_SPEC", json.dumps(spec or {}))
        return wrapper

    use.path = wrapper

    def fips() -> Path:
        """Also install a fake FIPS build (CRYPTOPERF_WORKER_FIPS): the same script, saying
        build "fips"; only the spec's ``fips_backends`` (default aws-lc) run there."""
        w = fake_worker_script(tmp_path / "fake-cryptoperf-worker-fips", FAKE_WORKER_BUILD="fips")
        monkeypatch.setenv("CRYPTOPERF_WORKER_FIPS", str(w))
        return w

    use.fips = fips

    def go() -> tuple[Path, Path]:
        """Also install fake Go worker builds (CRYPTOPERF_WORKER_GO, CRYPTOPERF_WORKER_GO_FIPS):
        the same script, saying build "go" or "go-fips", with the Go worker's hello snapshot
        (fixtures/worker-go-hello.json) and its one backend, go."""
        out = []
        for build, var in (("go", "CRYPTOPERF_WORKER_GO"), ("go-fips", "CRYPTOPERF_WORKER_GO_FIPS")):
            w = fake_worker_script(tmp_path / f"fake-cryptoperf-worker-{build}", FAKE_WORKER_BUILD=build)
            monkeypatch.setenv(var, str(w))
            out.append(w)
        return out[0], out[1]

    use.go = go
    return use


@pytest.fixture
def write_study(tmp_path):
    """Write study text to tmp_path/<name> and return the path."""
    def write(text: str, name: str = "study.toml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p
    return write


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    """Run ``cryptoperf ARGS`` in-process; returns CliResult(code, out, err). The store and the
    JSON output go to tmp_path unless given."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> CliResult:
        argv = [str(a) for a in args]
        if argv and argv[0] in ("study", "speed") and "--store" not in argv:
            argv += ["--store", str(tmp_path / "runs.sqlite")]
        capsys.readouterr()
        code = main(argv)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)
    return run


def run_subprocess(*args: str, env: dict | None = None, cwd: Path | None = None,
                   timeout: float = 120) -> CliResult:
    """Run ``python -m cryptoperf ARGS`` in a child process with src/ on PYTHONPATH."""
    e = dict(os.environ)
    e.update(env or {})
    e["PYTHONPATH"] = str(SRC) + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "cryptoperf", *map(str, args)], capture_output=True,
                       text=True, env=e, cwd=cwd, timeout=timeout)
    return CliResult(p.returncode, p.stdout, p.stderr)


def assert_one_line_error(res: CliResult, *fragments: str, code: int | None = None) -> str:
    """The run failed with exactly one stderr line 'cryptoperf: error: ...' holding every
    fragment, and no traceback; returns that line."""
    assert res.code != 0, res
    if code is not None:
        assert res.code == code, res
    lines = [l for l in res.err.splitlines() if l.strip()]
    assert "Traceback" not in res.err
    assert len(lines) == 1, f"expected one stderr line, got: {res.err!r}"
    assert lines[0].startswith("cryptoperf: error: "), lines[0]
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


TWO_CONFIG_STUDY = """\
[study]
name = "t"
baseline = "A"
backends = ["openssl"]
repetitions = {reps}
seconds = 0.01
warmup_s = 0
timeout_s = {timeout}

[[configuration]]
name = "A"
hash = "sha256"

[[configuration]]
name = "B"
hash = "sha512"

[[operation]]
label = "hash"
op = "{{hash}}"
sizes = [1024]
"""


def need_real_worker(path: Path | None, why: str, require: str = "CRYPTOPERF_REQUIRE_WORKER") -> Path:
    """``path``, a real worker binary the caller found; when it is None, skip the test saying
    ``why`` (why it is missing) — or, when the environment variable ``require`` is 1, fail it,
    so a run that must exercise the real worker cannot pass by skipping. .ci/run sets
    CRYPTOPERF_REQUIRE_WORKER=1 (the default build) and CRYPTOPERF_REQUIRE_FIPS=1 (pass that as
    ``require`` for the FIPS build)."""
    if path is not None:
        return path
    if os.environ.get(require) == "1":
        pytest.fail(f"{require}=1 but {why}", pytrace=False)
    pytest.skip(why)


def mount_tmpfs(where: Path, *options: str, size: str = "4m") -> None:
    """Mount a small tmpfs of ``size`` at ``where`` (made if missing) with mount ``options``
    (``ro``: a read-only filesystem, where even root cannot write — unlike a chmod), or skip
    the test saying why (mounting needs root)."""
    where.mkdir(parents=True, exist_ok=True)
    opts = ",".join((f"size={size}",) + options)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here to simulate it ({r.stderr.strip() or r.returncode}; "
                    "needs root)")


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(name, *options, size="4m")``: a tmpfs at tmp_path/name (``mount_tmpfs``),
    unmounted after the test; returns its path."""
    mounted = []

    def mount(name: str, *options: str, size: str = "4m") -> Path:
        where = tmp_path / name
        mount_tmpfs(where, *options, size=size)
        mounted.append(where)
        return where
    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture(scope="session")
def go_workers(tmp_path_factory) -> dict[str, Path]:
    """The Go worker's builds (``go``, ``go-fips``) compiled from this checkout's worker-go/ once
    per test session (``real_workers.build_go``): build name → binary. Skips without Go, fails
    instead under CRYPTOPERF_REQUIRE_GO=1 (.ci/run sets it)."""
    from real_workers import GO_BUILDS, build_go
    out, where = {}, tmp_path_factory.mktemp("go-workers")
    for build in GO_BUILDS:
        path, why = build_go(build, where)
        out[build] = need_real_worker(path, why, require="CRYPTOPERF_REQUIRE_GO")
    return out
