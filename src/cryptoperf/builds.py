"""Worker builds: which binary a cell runs in.

A worker owns one build of its libraries: libraries that cannot share a process —
AWS-LC and the AWS-LC FIPS module, two OpenSSL versions — live in different binaries, and a
configuration chooses its binary by naming a build. The builds:

- ``default``: ``cryptoperf-worker``, installed by ``pip install .``: the system OpenSSL,
  AWS-LC (aws-lc-rs), ring and RustCrypto.
- ``fips``: ``cryptoperf-worker-fips``, installed by the same ``pip install .`` when it can be
  made (it needs cmake, Go and Perl): AWS-LC's FIPS module in FIPS mode, and the host's
  OpenSSL with its FIPS provider loaded when one is installed. A study asks for it with
  ``fips = true`` on a configuration; every result records the FIPS mode the worker reported.
- ``openssl@3.6``: the worker built with its ``vendored-openssl`` feature, whose ``openssl``
  backend links OpenSSL 3.6 built from source (``openssl-src`` 300.6.x) instead of the system
  library. Building OpenSSL takes minutes, so ``pip install .`` does not: ``cryptoperf setup
  openssl@3.6`` (or the first study that needs it, see ``workerbuild``) builds it once and
  caches it under ``data_dir()/workers/openssl-3.6``. A study asks for it with ``library =
  "openssl@3.6"``; ``openssl@system`` names the default build (``LIBRARIES``).

- ``go``: ``cryptoperf-worker-go``, the second worker (``worker-go/``, in Go): Go's standard
  library crypto and crypto/tls as backend ``go``. ``pip install .`` builds it when a Go
  toolchain is on the machine (``setup.py``; it says why not otherwise). A configuration runs in
  it by naming ``backend = "go"``: the backend chooses the worker (``for_configuration``).
- ``go-fips``: ``cryptoperf-worker-go-fips``, the same sources built with ``GOFIPS140=v1.0.0``
  (the frozen Go Cryptographic Module v1.0.0) and the ``cryptoperf_fips_only`` tag, whose
  ``//go:debug fips140=only`` makes FIPS 140-3 mode enforced by default: what the module does
  not approve is refused. ``backend = "go"`` with ``fips = true``.

- a **path build**: a worker binary of the user's own, named by its absolute path (a study
  configuration's ``worker``, ``cryptoperf gate --baseline-worker/--candidate-worker``), e.g. the
  candidate build of a pipeline beside the baseline's; its name is the path (``path_build``).

``find_worker(name)`` finds a build's binary (``candidates`` says where it looks) or raises
``BuildUnavailable`` with one line saying why and what makes it; ``status`` says the same
without raising, for listings.
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from cryptoperf.errors import WorkerNotFound
from cryptoperf.paths import data_dir

DEFAULT = "default"
FIPS = "fips"
#: The build whose ``openssl`` backend links a newer OpenSSL (3.6, vendored; see ``Setup``).
OPENSSL_NEXT = "openssl@3.6"
#: The ``library`` a study names for the system OpenSSL: the default build.
SYSTEM_LIBRARY = "openssl@system"
#: The backend a ``library`` other than the system one changes; the others are the same code.
LIBRARY_BACKEND = "openssl"

#: What the FIPS build needs on the build machine (aws-lc-fips-sys builds the module with them).
FIPS_BUILD_TOOLS = ("cmake", "go", "perl")

#: The Go worker's builds (``worker-go/``): Go's crypto with FIPS 140-3 mode off, and the frozen
#: Go Cryptographic Module v1.0.0 with it enforced.
GO = "go"
GO_FIPS = "go-fips"
#: Where ``pip install .`` puts the Go worker's binaries, inside the package (``setup.py``), and
#: the file beside them saying why they were not built.
GO_BIN_DIR = Path(__file__).resolve().parent / "_bin"
GO_SKIPPED = "go-worker.skipped"


class BuildUnavailable(WorkerNotFound):
    """A worker build a configuration needs is not installed; the message says why and which
    command makes it."""


@dataclass(frozen=True)
class Setup:
    """How ``cryptoperf setup`` makes a build that ``pip install .`` does not (see
    ``workerbuild``): a cargo build of the worker sources with ``features``, cached under
    ``data_dir()/workers/<cache_name>/``.

    Attributes:
        features: cargo features of the worker crate, e.g. ``("vendored-openssl",)``.
        cache_name: directory name under ``workers/`` (no ``@``: ``openssl-3.6``).
        library: what it adds, for messages (``OpenSSL 3.6, built from source``).
        backend: the backend whose ``library_version`` the built worker must report ...
        version_prefix: ... starting with this (``3.6.``), checked before it is used.
        minutes: rough duration of a first build on 2 cores, for messages (``"5-10"``).
        seconds: the same for time estimates, s.
    """

    features: tuple[str, ...]
    cache_name: str
    library: str
    backend: str
    version_prefix: str
    minutes: str
    seconds: float


@dataclass(frozen=True)
class Build:
    """One worker build.

    Attributes:
        name: the build's name in study files, results and cell keys (``default``, ``fips``,
            ``openssl@3.6``).
        binary: the executable's file name.
        env_var: environment variable that overrides where the binary is looked for.
        description: one line for listings.
        make: the command that builds and installs it.
        setup: for a build made by ``cryptoperf setup`` (cached, not installed), how; None for
            the builds ``pip install .`` installs.
        backends: the backends this build is *the* worker for (``("go",)``): a configuration
            naming one runs in it (``for_configuration``), and a study is checked against its own
            hello. Empty for the Rust worker's builds, which serve every other backend.
        fips: a FIPS build: its results must report FIPS mode (``model``), a configuration asks
            for it with ``fips = true``.
    """

    name: str
    binary: str
    env_var: str
    description: str
    make: str
    setup: Setup | None = None
    backends: tuple[str, ...] = ()
    fips: bool = False

    @property
    def own_rules(self) -> bool:
        """True when a study is checked against this build's own hello, not the default's."""
        return bool(self.backends) or is_path_build(self.name)


BUILDS: dict[str, Build] = {
    DEFAULT: Build(DEFAULT, "cryptoperf-worker", "CRYPTOPERF_WORKER",
                   "system OpenSSL, AWS-LC, ring, RustCrypto", "pip install ."),
    FIPS: Build(FIPS, "cryptoperf-worker-fips", "CRYPTOPERF_WORKER_FIPS",
                "AWS-LC FIPS module in FIPS mode; OpenSSL with its FIPS provider where installed",
                "pip install . (with cmake, Go and Perl on the machine)", fips=True),
    GO: Build(GO, "cryptoperf-worker-go", "CRYPTOPERF_WORKER_GO",
              "Go's standard library crypto and crypto/tls, FIPS 140-3 mode off",
              "pip install . (with Go 1.24 or later on the machine)", backends=("go",)),
    GO_FIPS: Build(GO_FIPS, "cryptoperf-worker-go-fips", "CRYPTOPERF_WORKER_GO_FIPS",
                   "the Go Cryptographic Module v1.0.0, FIPS 140-3 mode enforced (fips140=only)",
                   "pip install . (with Go 1.24 or later on the machine)", backends=("go",), fips=True),
    OPENSSL_NEXT: Build(OPENSSL_NEXT, "cryptoperf-worker", "CRYPTOPERF_WORKER_OPENSSL_3_6",
                        "OpenSSL 3.6 built from source (openssl-src 300.6.x), linked statically "
                        "into the openssl backend", f"cryptoperf setup {OPENSSL_NEXT}",
                        Setup(features=("vendored-openssl",), cache_name="openssl-3.6",
                              library="OpenSSL 3.6, built from source", backend=LIBRARY_BACKEND,
                              version_prefix="3.6.", minutes="5-10",
                              # 2 min 28 s with the crates already downloaded (2-vCPU EPYC, 2026-11-24)
                              seconds=300.0)),
}

#: Study ``library`` values → build name: the OpenSSL an ``openssl`` backend links.
LIBRARIES: dict[str, str] = {SYSTEM_LIBRARY: DEFAULT, OPENSSL_NEXT: OPENSSL_NEXT}


def cached_binary(name: str) -> Path | None:
    """Where ``cryptoperf setup`` puts build ``name``'s binary
    (``data_dir()/workers/<cache_name>/<binary>``); None for a build ``pip install .`` makes.
    KeyError for an unknown name."""
    build = get(name)
    if build.setup is None:
        return None
    return data_dir() / "workers" / build.setup.cache_name / build.binary


def resolve(name: str) -> str:
    """The build a user-given name means: a build name, or a ``library`` value
    (``openssl@system`` → ``default``). KeyError for an unknown name."""
    name = LIBRARIES.get(name, name)
    get(name)
    return name


def setup_names() -> list[str]:
    """The builds ``cryptoperf setup`` can make, in ``BUILDS`` order."""
    return [n for n, b in BUILDS.items() if b.setup is not None]


def path_build(path: str | os.PathLike) -> str:
    """The build name of the worker binary at ``path``: its absolute, normalised path (no
    symbolic links resolved: the name says what the user gave)."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(str(path))))


def is_path_build(name: str) -> bool:
    """True when build ``name`` is a worker binary named by its path (``path_build``)."""
    return os.path.isabs(name)


def get(name: str) -> Build:
    """The build called ``name`` (a path build made up on the spot); raises KeyError for an
    unknown name."""
    if is_path_build(name):
        return Build(name, os.path.basename(name), "", f"the worker binary at {name}",
                     f"build that worker, or correct the path {name}")
    return BUILDS[name]


def for_configuration(fips: bool, library: str = SYSTEM_LIBRARY, backend: str | None = None) -> str:
    """The build a configuration's cells run in: the build that is the worker for its
    ``backend`` (``Build.backends``: ``go`` → ``go``, or ``go-fips`` with ``fips``); else
    ``fips`` when it asks for FIPS mode, else the build of its ``library`` (``LIBRARIES``; the
    study checks the combination: a FIPS configuration keeps the system OpenSSL). KeyError for
    an unknown library."""
    for b in BUILDS.values():
        if backend is not None and backend in b.backends and b.fips == fips:
            return b.name
    if fips:
        return FIPS
    return LIBRARIES[library]


def is_fips(name: str) -> bool:
    """True for a FIPS build (``fips``, ``go-fips``): its results must report FIPS mode."""
    return not is_path_build(name) and name in BUILDS and BUILDS[name].fips


def worker_of(backend: str) -> Build | None:
    """The build that is the worker for ``backend`` (``Build.backends``, its non-FIPS one), or
    None when the default worker serves it."""
    return next((b for b in BUILDS.values() if backend in b.backends and not b.fips), None)


def missing_reason(name: str) -> str:
    """Why build ``name`` is not installed, as far as this machine shows it: for the FIPS
    build, the build tools it lacks; otherwise that the install did not make it."""
    if is_path_build(name):
        return f"{name} is not an executable file" + ("" if os.path.exists(name) else " (nothing is there)")
    build = BUILDS[name]
    if build.backends:
        skipped = GO_BIN_DIR / GO_SKIPPED
        if skipped.is_file():
            return f"{build.binary} is not installed: {skipped.read_text().strip()}"
        if shutil.which("go") is None:
            return (f"{build.binary} is not installed: building the Go worker needs Go 1.24 or later "
                    f"(https://go.dev/dl/), and this machine has no `go`; install it and rerun `pip install .`")
        return (f"{build.binary} is not installed; rerun `pip install .` (Go is on this machine), or "
                f"`cd worker-go && go build -o {build.binary} .` in a checkout, or set {build.env_var}")
    if name == FIPS:
        lacking = [t for t in FIPS_BUILD_TOOLS if shutil.which(t) is None]
        if lacking:
            return (f"{build.binary} is not installed: building the AWS-LC FIPS module needs "
                    f"{', '.join(FIPS_BUILD_TOOLS)}, and this machine lacks {', '.join(lacking)}; "
                    f"install {'it' if len(lacking) == 1 else 'them'} and rerun `pip install .`")
        return (f"{build.binary} is not installed (its build failed or was skipped during "
                f"`pip install .`; rerun `pip install -v .` to see why)")
    if build.setup is not None:
        return (f"the {name} worker is not built yet ({build.setup.library}, a one-time build of "
                f"about {build.setup.minutes} minutes, cached in {cached_binary(name).parent}); "
                f"run `{build.make}`")
    return f"{build.binary} not found; reinstall with `{build.make}` or set {build.env_var}"


def check_hello(name: str, path, hello: dict) -> None:
    """Check that the worker at ``path``, whose ``hello`` message is given, is build ``name``
    (its hello's ``build``; a worker older than the field counts as ``default``). Raises
    BuildUnavailable naming the binary and what it is instead."""
    theirs = hello.get("build") or DEFAULT
    if theirs != name and not is_path_build(name):  # a binary of one's own is whatever build it is
        raise BuildUnavailable(f"{path} is the '{theirs}' worker build, not '{name}'; "
                               f"reinstall with `{BUILDS[name].make}` or fix {BUILDS[name].env_var}")


def status(name: str) -> tuple[bool, str]:
    """(available, path or the reason it is not) for build ``name``, without raising; the path
    is ``find_worker(name)``'s."""
    try:
        return True, str(find_worker(name))
    except WorkerNotFound as e:
        return False, str(e)


# --------------------------------------------------------------------------- finding a binary


def candidates(build: str = DEFAULT) -> list[Path]:
    """Where build ``build``'s binary is looked for, in order (its env variable is handled by
    ``find_worker``): the scripts directory of this Python (where ``pip install .`` puts it),
    PATH, then ``worker/target/release`` and ``worker/target/debug`` of the source checkout
    this package is imported from (when run from ``src/``), the more recently built first. The
    Go worker's builds: the package's ``_bin/`` (where ``pip install .`` puts them), PATH, then
    ``worker-go/`` of the checkout (``go build`` there).
    A build made by ``cryptoperf setup`` (``Build.setup``) is looked for only where setup
    caches it (``cached_binary``)."""
    if is_path_build(build):
        return [Path(build)]
    cached = cached_binary(build)
    if cached is not None:
        return [cached]
    spec = get(build)
    name = spec.binary
    out = [GO_BIN_DIR / name] if spec.backends else [Path(sysconfig.get_path("scripts")) / name]
    on_path = shutil.which(name)
    if on_path:
        out.append(Path(on_path))
    checkout = Path(__file__).resolve().parents[2]
    if spec.backends:
        return out + [checkout / "worker-go" / name]
    made = [checkout / "worker" / "target" / kind / name for kind in ("release", "debug")]
    made.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)
    return out + made


def _runnable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_worker(build: str = DEFAULT) -> Path:
    """The binary of worker build ``build``: its env variable (``$CRYPTOPERF_WORKER``,
    ``$CRYPTOPERF_WORKER_FIPS``) if set, else the first runnable ``candidates(build)``.

    Raises WorkerNotFound with the fix (reinstall, or set the variable); for a build other than
    the default, BuildUnavailable saying why it is missing (``missing_reason``).
    """
    spec = get(build)
    env = os.environ.get(spec.env_var)
    if env:
        p = Path(env)
        if not _runnable(p):
            raise WorkerNotFound(f"{spec.env_var}={env} is not an executable file; "
                                 f"point it at a {spec.binary} binary or unset it")
        return p
    for p in candidates(build):
        if _runnable(p):
            return p
    if build == DEFAULT:
        raise WorkerNotFound(missing_reason(build))
    raise BuildUnavailable(missing_reason(build))
