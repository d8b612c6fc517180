"""Make the worker builds ``pip install .`` does not: ``cryptoperf setup openssl@3.6``.

A build with a ``builds.Setup`` recipe is the worker crate compiled with extra cargo features
(for ``openssl@3.6``: ``vendored-openssl``, which builds OpenSSL 3.6 from source and links it
statically). That takes minutes, so it happens once, on first use, and is cached:

    <data dir>/target/                                 cargo's target directory (kept: rebuilds
                                                       after an upgrade only redo what changed)
    <data dir>/workers/<cache_name>/cryptoperf-worker  the binary, copied out of target/release
    <data dir>/workers/<cache_name>/build.json         what was built, from what, what it reported
    <data dir>/logs/<cache_name>.log                   cargo's full output of the last build

``<data dir>`` is ``paths.data_dir()`` (``$CRYPTOPERF_DATA_DIR`` or the user data directory).

Sources: the worker's ``Cargo.toml``, ``Cargo.lock`` and ``src/`` ship inside the package
(``cryptoperf/_worker_src``, copied there by ``setup.py``'s ``build_py``), so an installed
cryptoperf builds without the clone it came from; run from a checkout, ``worker/`` is used.
Cargo runs with ``--locked``: the lock file pins ``openssl-src``, hence the exact OpenSSL release.

A build is declared made only after the cached binary answers ``hello`` and its
``Setup.backend`` reports a ``library_version`` starting with ``Setup.version_prefix``; the
same check runs every time a study uses the build (``ensure``), together with a digest of the
worker sources (``build.json``'s ``source_digest``): a build made from other sources — an
older cryptoperf, say — is out of date and is rebuilt (or refused, naming ``--force``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cryptoperf import __version__, builds, paths, pkcs11, providerbuild
from cryptoperf.errors import SetupError, UsageError, WorkerError, did_you_mean
from cryptoperf.hello import Hello
from cryptoperf.run.worker import fetch_hello
from cryptoperf.builds import find_worker

#: Where ``build_py`` puts the worker sources inside the installed package.
PACKAGED_SOURCES = Path(__file__).with_name("_worker_src")
#: The files and directory of ``worker/`` a build needs (``src/`` includes ``../../Cargo.lock``).
SOURCE_FILES = ("Cargo.toml", "Cargo.lock")
SOURCE_DIRS = ("src",)

_CARGO_STEP = re.compile(r"^\s*(Compiling|Downloading|Downloaded|Updating|Locking|Finished|Building)\s+(.+)$")
_ERROR_LINE = re.compile(r"^\s*error(\[E\d+\])?:", re.IGNORECASE)


@dataclass(frozen=True)
class Made:
    """A build ``build`` made: ``path`` of the cached binary, its verified ``hello``, the
    ``library_version`` it reported, and the build's duration in ``seconds``."""

    name: str
    path: Path
    hello: Hello
    library_version: str
    seconds: float


def sources() -> Path:
    """The directory with the worker's ``Cargo.toml``, ``Cargo.lock`` and ``src/``: the copy
    inside the installed package, else ``worker/`` of the checkout this module runs from.
    Raises SetupError when neither exists."""
    checkout = Path(__file__).resolve().parents[2] / "worker"
    for d in (PACKAGED_SOURCES, checkout):
        if (d / "Cargo.toml").is_file() and (d / "src").is_dir():
            return d
    raise SetupError(f"the worker sources are not in this installation (looked in {PACKAGED_SOURCES} "
                     f"and {checkout}); reinstall cryptoperf with `pip install .` from its clone")


def source_files(src: Path) -> list[Path]:
    """The files of the worker sources at ``src`` a build reads (``SOURCE_FILES`` and every file
    under ``SOURCE_DIRS``), relative to ``src``, sorted."""
    out = [Path(f) for f in SOURCE_FILES if (src / f).is_file()]
    for d in SOURCE_DIRS:
        out += sorted(p.relative_to(src) for p in (src / d).rglob("*") if p.is_file())
    return out


def source_digest(src: Path) -> str:
    """SHA-256 (hex) over the worker sources at ``src``: each file's relative path and bytes,
    in ``source_files`` order. Identical for the packaged copy and the checkout it came from."""
    h = hashlib.sha256()
    for rel in source_files(src):
        h.update(rel.as_posix().encode() + b"\0")
        h.update((src / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def recipe(name: str) -> builds.Setup:
    """The ``builds.Setup`` of build ``name`` (a build name or library, e.g. ``openssl@3.6``).
    Raises UsageError for an unknown name or a build ``pip install .`` makes."""
    try:
        resolved = builds.resolve(name)
    except KeyError:
        known = builds.setup_names() + [providerbuild.NAME, pkcs11.SETUP_NAME]
        hint = did_you_mean(name, known + list(builds.LIBRARIES))
        raise UsageError(f"unknown worker build '{name}'{hint} (setup makes: {', '.join(known)})") from None
    spec = builds.get(resolved)
    if spec.setup is None:
        raise UsageError(f"'{name}' is the {resolved} worker build, which `{spec.make}` installs, "
                         f"not `cryptoperf setup` (setup makes: {', '.join(builds.setup_names())})")
    return spec.setup


def log_path(name: str) -> Path:
    """Where cargo's full output of build ``name``'s last build goes."""
    return paths.data_dir() / "logs" / f"{recipe(name).cache_name}.log"


def announce(name: str) -> str:
    """One line saying what building ``name`` does, how long it takes and where it goes."""
    r = recipe(name)
    name = builds.resolve(name)
    return (f"building the {name} worker: {r.library}, a one-time build of about {r.minutes} "
            f"minutes on 2 cores; cached in {builds.cached_binary(name).parent} "
            f"(cargo's output: {log_path(name)})")


def verified_hello(name: str, path: Path, fix: str | None = None) -> Hello:
    """The ``hello`` of the binary ``path``, checked to be build ``name``: its recipe's backend
    reports a library version starting with the recipe's prefix. Raises BuildUnavailable,
    naming the path, what it reported and ``fix`` (default: ``cryptoperf setup NAME --force``,
    or the build's environment variable when that chose the binary)."""
    spec = builds.get(name)
    r = spec.setup
    if fix is None and os.environ.get(spec.env_var):
        fix = f"point {spec.env_var} at a {name} worker or unset it"
    elif fix is None:
        fix = f"rebuild it with `cryptoperf setup {name} --force`"
    try:
        hello = fetch_hello(path)
    except WorkerError as e:
        raise builds.BuildUnavailable(f"the {name} worker at {path} does not answer as it should "
                                      f"({e}); {fix}") from None
    if r is None:
        return hello
    libs = {b["backend"]: b for b in hello.backends}
    got = libs.get(r.backend, {}).get("library_version")
    if not isinstance(got, str) or not got.startswith(r.version_prefix):
        what = f"{r.backend} {got}" if got else f"no {r.backend} backend"
        raise builds.BuildUnavailable(f"the {name} worker at {path} reports {what}, not "
                                      f"{r.version_prefix}x; {fix}")
    if not os.environ.get(spec.env_var) and not _same_sources(path):
        raise builds.BuildUnavailable(f"the {name} worker at {path} was built from other worker "
                                      f"sources than this cryptoperf's (an older version?); {fix}")
    return hello


def _same_sources(path: Path) -> bool:
    """False only when ``build.json`` beside ``path`` records a source digest and the current
    worker sources have another one (no record, or no sources here: nothing to compare)."""
    try:
        recorded = json.loads((path.parent / "build.json").read_text(encoding="utf-8")).get("source_digest")
        current = source_digest(sources())
    except (OSError, ValueError, AttributeError, SetupError):
        return True
    return not recorded or recorded == current


def last_error(lines: list[str]) -> str:
    """The last ``error: ...`` line of cargo's output (``lines``), else its last non-empty
    line, else '' — the one line a failed build is summed up by."""
    for line in reversed(lines):
        if _ERROR_LINE.match(line):
            return line.strip()
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return ""


def preflight(name: str) -> tuple[str, Path]:
    """(cargo's path, the worker sources) for building ``name``, checked before anything is
    announced. Raises SetupError — one line naming what to install and the command to rerun —
    when cargo is not on PATH or the sources are missing."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise SetupError(f"building the {name} worker needs Rust's cargo, which is not on PATH; "
                         f"install Rust (https://rustup.rs), then run `cryptoperf setup {name}`")
    return cargo, sources()


#: Off a terminal, how often (s) a build says how far cargo has come (its log has every line).
QUIET_PROGRESS_S = 30.0


def build(name: str, console: Console | None = None, show_progress: bool | None = None) -> Made:
    """Build worker build ``name`` with cargo and install it in the cache (see the module doc).

    Shows a spinner with cargo's current step ("Compiling openssl-sys v0.9.118") and the
    elapsed time on ``console`` (stderr by default) when ``show_progress`` (default: when it is
    a terminal); otherwise a line when it starts (naming the log) and one every
    ``QUIET_PROGRESS_S`` with the elapsed time and cargo's step. The log is written line by line
    as cargo prints. Returns a Made. Raises UsageError (not a setup build), SetupError (no cargo,
    unwritable cache, build failed — naming cargo's last error line and the log —, or the built
    worker reports the wrong library). Ctrl-C stops cargo and propagates KeyboardInterrupt.
    """
    r = recipe(name)
    name = builds.resolve(name)
    spec = builds.get(name)
    cargo, src = preflight(name)
    root = paths.data_dir()
    dest = builds.cached_binary(name)
    log = log_path(name)
    target = root / "target"
    try:
        for d in (dest.parent, log.parent, target):
            d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SetupError(f"cannot create the worker cache in {root}: {e}; set "
                         f"{paths.DATA_DIR_ENV} to a writable directory") from None
    cmd = [cargo, "build", "--release", "--locked", "--features", ",".join(r.features),
           "--manifest-path", str(src / "Cargo.toml"), "--target-dir", str(target)]
    env = dict(os.environ, CARGO_TERM_COLOR="never", CARGO_TERM_PROGRESS_WHEN="never")
    console = console or Console(stderr=True, highlight=False)
    show = console.is_terminal if show_progress is None else show_progress
    started = time.monotonic()
    tail: list[str] = []
    if not show:  # off a terminal: a line now, and one per QUIET_PROGRESS_S while cargo runs
        console.print(f"building the {name} worker with cargo (its log: {log})", markup=False, soft_wrap=True)
    said = time.monotonic()
    with open(log, "w", encoding="utf-8", buffering=1) as out:  # line-buffered: the log follows cargo
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        progress = Progress(SpinnerColumn(), TimeElapsedColumn(), TextColumn("{task.description}", markup=False),
                            console=console, transient=True, disable=not show)
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                    cwd=root, text=True, encoding="utf-8", errors="replace")
        except OSError as e:
            raise SetupError(f"cannot run {cargo}: {e}; check the Rust install (https://rustup.rs), "
                             f"then run `cryptoperf setup {name}`") from None
        try:
            with progress:
                task = progress.add_task("starting cargo", total=None)
                vendored_openssl = False
                for line in proc.stdout:
                    out.write(line)
                    tail.append(line.rstrip("\n"))
                    del tail[:-200]
                    m = _CARGO_STEP.match(line)
                    if not m:
                        continue
                    step = f"{m.group(1)} {m.group(2).strip()}"
                    if m.group(2).startswith("openssl-sys "):
                        vendored_openssl = "vendored-openssl" in r.features
                    elif m.group(2).startswith("openssl v"):
                        vendored_openssl = False
                    hint = " + OpenSSL's own build (the long step)" if vendored_openssl else ""
                    progress.update(task, description=f"{step}{hint}")
                    if not show and time.monotonic() - said >= QUIET_PROGRESS_S:
                        said = time.monotonic()
                        console.print(f"building the {name} worker: {said - started:.0f} s, cargo at: {step}{hint}",
                                      markup=False, soft_wrap=True)
                rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    seconds = time.monotonic() - started
    if rc != 0:
        line = last_error(tail) or f"cargo exited with status {rc}"
        raise SetupError(f"building the {name} worker failed: {line} (cargo's full output: {log})")
    built = target / "release" / spec.binary
    if not built.is_file():
        raise SetupError(f"cargo reported success but made no {built} (cargo's full output: {log})")
    (dest.parent / "build.json").unlink(missing_ok=True)  # the old build's record
    _install(built, dest)
    try:
        hello = verified_hello(name, dest, fix=f"cargo's full output: {log}")
    except builds.BuildUnavailable as e:
        dest.unlink(missing_ok=True)
        raise SetupError(f"the freshly built {name} worker is not usable: {e}") from None
    version = {b["backend"]: b for b in hello.backends}[r.backend]["library_version"]
    record = {"build": name, "library_version": version, "backend": r.backend,
              "features": list(r.features), "sources": str(src),
              "source_digest": source_digest(src), "command": cmd,
              "seconds": round(seconds, 1), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cryptoperf_version": __version__, "worker_version": hello.worker_version}
    (dest.parent / "build.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return Made(name, dest, hello, version, seconds)


def _install(built: Path, dest: Path) -> None:
    """Copy ``built`` to ``dest`` atomically (a running study never sees half a binary)."""
    fd, tmp = tempfile.mkstemp(prefix=".cryptoperf-worker-", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copy2(built, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise SetupError(f"cannot install the worker at {dest}: {e}") from None


def ensure(name: str, who: str, auto: bool, console: Console | None = None,
           show_progress: bool | None = None) -> tuple[Path, Hello]:
    """Path and verified hello of build ``name``, which ``who`` (e.g. "studies/x.toml:
    configuration 'y'") needs; for a build ``cryptoperf setup`` makes that is missing or out of
    date, build it first when ``auto`` (announcing it on ``console``), else raise.

    Raises BuildUnavailable naming ``who``, why and the command that makes the build (for a
    setup build: ``cryptoperf setup NAME``); SetupError as ``build`` does.
    """
    spec = builds.get(name)
    overridden = bool(os.environ.get(spec.env_var))
    try:
        path = find_worker(name)
        if spec.setup is None:
            hello = fetch_hello(path)
            builds.check_hello(name, path, hello.raw)
            return path, hello
        return path, verified_hello(name, path)
    except builds.BuildUnavailable as e:
        if spec.setup is None or overridden or not auto:
            advice = "" if spec.setup is None or overridden else " (without --no-setup it is built automatically)"
            raise builds.BuildUnavailable(f"{who} needs the {name} worker build: {e}{advice}") from None
        reason = str(e)
    preflight(name)
    console = console or Console(stderr=True, highlight=False)
    if builds.cached_binary(name).exists():
        console.print(f"{who} needs the {name} worker; the cached one is unusable ({reason}): rebuilding it",
                      markup=False, soft_wrap=True)
    else:
        console.print(f"{who} needs the {name} worker, which is not built yet", markup=False, soft_wrap=True)
    console.print(announce(name), markup=False, soft_wrap=True)
    made = build(name, console, show_progress)
    console.print(done_line(made), markup=False, soft_wrap=True)
    return made.path, made.hello


def library_text(name: str, hello: Hello) -> str:
    """``OpenSSL 3.6.3 ...``: the library and version the recipe's backend of build ``name``
    reports in ``hello`` ('' for a build without a recipe or a hello without that backend)."""
    spec = builds.get(name)
    if spec.setup is None:
        return ""
    lib = {b["backend"]: b for b in hello.backends}.get(spec.setup.backend)
    return f"{lib['library']} {lib['library_version']}" if lib else ""


def setup(name: str, force: bool, console: Console) -> str:
    """``cryptoperf setup NAME``: build ``name`` (a build name or library) unless a usable build
    is cached (or ``force``), announcing the build and its progress on ``console``. Returns the
    line to print: where the build is, with its library, and whether it was built now.

    Raises UsageError for a name setup does not make, SetupError and BuildUnavailable as
    ``build`` does.
    """
    recipe(name)
    name = builds.resolve(name)
    cached = builds.cached_binary(name)
    stale = ""
    if not force and cached is not None and cached.exists():
        try:
            hello = verified_hello(name, cached)
        except builds.BuildUnavailable as e:
            stale = f"{e}: rebuilding"
        else:
            return f"{name} is already built ({library_text(name, hello)}): {cached} (--force rebuilds it)"
    preflight(name)
    if stale:
        console.print(stale, markup=False, soft_wrap=True)
    console.print(announce(name), markup=False, soft_wrap=True)
    return done_line(build(name, console))


@dataclass(frozen=True)
class BuildState:
    """One worker build as ``cryptoperf setup --list`` shows it.

    Attributes:
        name: the build (``default``, ``fips``, ``openssl@3.6``); alias: the library name that
            selects it in a study when it differs ('' otherwise).
        built: whether a usable binary is there; where: its path (with the library it reports,
            for a setup build) or why it is missing; description: what the build is.
    """

    name: str
    alias: str
    built: bool
    where: str
    description: str


def states() -> list[BuildState]:
    """Every worker build, built or not: a setup build counts as built only when its binary
    answers as that build (``verified_hello``)."""
    out = []
    for name, spec in builds.BUILDS.items():
        available, where = builds.status(name)
        if available and spec.setup is not None:
            try:
                where += f" ({library_text(name, verified_hello(name, Path(where)))})"
            except builds.BuildUnavailable as e:
                available, where = False, str(e)
        alias = next((k for k, v in builds.LIBRARIES.items() if v == name and k != name), "")
        out.append(BuildState(name, alias, available, where, spec.description))
    return out


def done_line(made: Made) -> str:
    """``built openssl@3.6 (OpenSSL 3.6.3 ...) in 9 min 12 s: <path>``."""
    m, s = divmod(int(round(made.seconds)), 60)
    took = f"{m} min {s} s" if m else f"{s} s"
    backend = builds.get(made.name).setup.backend
    return f"built {made.name} ({backend} {made.library_version}) in {took}: {made.path}"
