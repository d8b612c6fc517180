"""Worker builds a study or speed needs, and the executor its repetitions run through."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from rich.console import Console

from cryptoperf import builds, providerbuild, workerbuild
from cryptoperf.errors import UsageError, WorkerError
from cryptoperf.run import local
from cryptoperf.hello import Hello, WorkerRules
from cryptoperf.run.worker import fetch_hello
from cryptoperf.builds import find_worker


Workers = dict[str, tuple[Path, Hello]]


def default_worker() -> tuple[Path, Hello]:
    """The default worker build's path and ``hello``. Raises WorkerError subclasses."""
    path = find_worker()
    return path, fetch_hello(path)


def default_rules() -> WorkerRules | None:
    """The default worker build's rules (``WorkerRules``), or None when no worker answers: for
    help texts that list what the worker announces (each workload's params)."""
    try:
        return default_worker()[1].rules
    except WorkerError:
        return None


def worker_builds(needed: Mapping[str, str], setup: bool = False, missing_ok: bool = False,
                  default: tuple[Path, Hello] | None = None, console: Any = None,
                  openssl_fips: str | None = None, known: Workers | None = None) -> Workers:
    """Path and hello of every worker build in ``needed`` (build name → who needs it, e.g.
    "configuration 'fips-on'"), the default build always included (``default`` if given), and
    builds whose path and hello the caller has already (``known``) not asked again.

    A build that ``cryptoperf setup`` makes (``openssl@3.6``) and that is missing or out of
    date is built first when ``setup`` (``workerbuild.ensure``, its progress on ``console``), and
    so is OpenSSL's FIPS provider when ``openssl_fips`` names who runs the ``openssl`` backend
    in the FIPS build (``providerbuild.ensure``; a FIPS study on AWS-LC alone does not need it).
    With ``missing_ok`` such a build, when missing, is left out (dry runs). Otherwise raises
    BuildUnavailable naming who needs a missing build, why it is missing and how to make it;
    SetupError when building it fails."""
    out = {builds.DEFAULT: default or default_worker(), **(known or {})}
    for name, who in needed.items():
        if name in out:
            continue
        if name == builds.FIPS and openssl_fips and setup and not missing_ok:
            try:  # a missing FIPS worker is said before minutes spent building the provider it loads
                builds.find_worker(name)
            except builds.BuildUnavailable as e:
                raise builds.BuildUnavailable(f"{who} needs the {name} worker build: {e}") from None
            providerbuild.ensure(openssl_fips, console or Console(stderr=True, highlight=False))
        try:
            out[name] = workerbuild.ensure(name, who, auto=setup and not missing_ok, console=console)
        except builds.BuildUnavailable:
            if missing_ok and builds.get(name).setup is not None:
                continue
            raise
    return out


def unmasked_vectors(workers: Workers) -> dict[tuple[str, str], str]:
    """(build, backend) → the capability vector the backend's library reported in that build's
    unmasked ``hello`` process."""
    return {(name, backend): vector for name, (_, h) in workers.items()
            for backend, vector in h.unmasked_vectors().items()}


def make_executor(executor: str | Any, address: str | None = None) -> Any:
    """The executor ``run_study`` uses: ``"local"`` → ``run.local.LocalExecutor``; ``"ray"`` →
    ``run.ray.RayExecutor(address)`` (the only place that module is imported); an object is
    used as it is. Raises UsageError for another name, or for ``address`` without Ray."""
    if not isinstance(executor, str):
        return executor
    if executor == "ray":
        from cryptoperf.run.ray import RayExecutor
        return RayExecutor(address)
    if executor != "local":
        raise UsageError(f"--executor {executor!r} is not one of local, ray")
    if address is not None:
        raise UsageError("--address is the Ray cluster's address: give it with --executor ray")
    return local.LocalExecutor()
