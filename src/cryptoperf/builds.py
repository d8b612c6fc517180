"""Worker builds: which binary a cell runs in.

A worker owns one build of its libraries (DESIGN.md): libraries that cannot share a process —
AWS-LC and the AWS-LC FIPS module, two OpenSSL versions — live in different binaries, and a
configuration chooses its binary by naming a build. The builds:

- ``default``: ``cryptoperf-worker``, installed by ``pip install .``: the system OpenSSL,
  AWS-LC (aws-lc-rs), ring and RustCrypto.
- ``fips``: ``cryptoperf-worker-fips``, installed by the same ``pip install .`` when it can be
  made (it needs cmake, Go and Perl): AWS-LC's FIPS module in FIPS mode, and the host's
  OpenSSL with its FIPS provider loaded when one is installed. A study asks for it with
  ``fips = true`` on a configuration; every result records the FIPS mode the worker reported.

``locate`` finds a build's binary or raises ``BuildUnavailable`` with one line saying why and
what makes it; ``status`` says the same without raising, for listings.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from cryptoperf.errors import WorkerNotFound

DEFAULT = "default"
FIPS = "fips"

#: What the FIPS build needs on the build machine (aws-lc-fips-sys builds the module with them).
FIPS_BUILD_TOOLS = ("cmake", "go", "perl")


class BuildUnavailable(WorkerNotFound):
    """A worker build a configuration needs is not installed; the message says why and which
    command makes it."""


@dataclass(frozen=True)
class Build:
    """One worker build.

    Attributes:
        name: the build's name in study files, results and cell keys (``default``, ``fips``).
        binary: the executable's file name.
        env_var: environment variable that overrides where the binary is looked for.
        description: one line for listings.
        make: the command that builds and installs it.
    """

    name: str
    binary: str
    env_var: str
    description: str
    make: str


BUILDS: dict[str, Build] = {
    DEFAULT: Build(DEFAULT, "cryptoperf-worker", "CRYPTOPERF_WORKER",
                   "system OpenSSL, AWS-LC, ring, RustCrypto", "pip install ."),
    FIPS: Build(FIPS, "cryptoperf-worker-fips", "CRYPTOPERF_WORKER_FIPS",
                "AWS-LC FIPS module in FIPS mode; OpenSSL with its FIPS provider where installed",
                "pip install . (with cmake, Go and Perl on the machine)"),
}


def get(name: str) -> Build:
    """The build called ``name``; raises KeyError for an unknown name."""
    return BUILDS[name]


def for_configuration(fips: bool) -> str:
    """The build a configuration's cells run in: ``fips`` when it asks for FIPS mode."""
    return FIPS if fips else DEFAULT


def missing_reason(name: str) -> str:
    """Why build ``name`` is not installed, as far as this machine shows it: for the FIPS
    build, the build tools it lacks; otherwise that the install did not make it."""
    build = BUILDS[name]
    if name == FIPS:
        lacking = [t for t in FIPS_BUILD_TOOLS if shutil.which(t) is None]
        if lacking:
            return (f"{build.binary} is not installed: building the AWS-LC FIPS module needs "
                    f"{', '.join(FIPS_BUILD_TOOLS)}, and this machine lacks {', '.join(lacking)}; "
                    f"install {'it' if len(lacking) == 1 else 'them'} and rerun `pip install .`")
        return (f"{build.binary} is not installed (its build failed or was skipped during "
                f"`pip install .`; rerun `pip install -v .` to see why)")
    return f"{build.binary} not found; reinstall with `{build.make}` or set {build.env_var}"


def locate(name: str):
    """The binary of build ``name`` (a ``pathlib.Path``); see ``worker_path.find_worker``.

    Raises BuildUnavailable (a WorkerNotFound) naming the build, why it is missing and the
    command that makes it; KeyError for an unknown build name.
    """
    from cryptoperf import worker_path
    return worker_path.find_worker(name)


def check_hello(name: str, path, hello: dict) -> None:
    """Check that the worker at ``path``, whose ``hello`` message is given, is build ``name``
    (its hello's ``build``; a worker older than the field counts as ``default``). Raises
    BuildUnavailable naming the binary and what it is instead."""
    theirs = hello.get("build") or DEFAULT
    if theirs != name:
        raise BuildUnavailable(f"{path} is the '{theirs}' worker build, not '{name}'; "
                               f"reinstall with `{BUILDS[name].make}` or fix {BUILDS[name].env_var}")


def status(name: str) -> tuple[bool, str]:
    """(available, path or the reason it is not) for build ``name``, without raising."""
    try:
        return True, str(locate(name))
    except WorkerNotFound as e:
        return False, str(e)
