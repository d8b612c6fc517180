"""Find a worker binary: ``cryptoperf-worker`` or another build's (see ``cryptoperf.builds``)."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

from cryptoperf import builds
from cryptoperf.errors import WorkerNotFound

WORKER_NAME = builds.BUILDS[builds.DEFAULT].binary
ENV_VAR = builds.BUILDS[builds.DEFAULT].env_var


def candidates(build: str = builds.DEFAULT) -> list[Path]:
    """Where build ``build``'s binary is looked for, in order (its env variable is handled by
    ``find_worker``): the scripts directory of this Python (where ``pip install .`` puts it),
    PATH, then ``worker/target/release`` and ``worker/target/debug`` of the source checkout
    this package is imported from (when run from ``src/``), the more recently built first.
    A build made by ``cryptoperf setup`` (``builds.Build.setup``) is looked for only where
    setup caches it (``builds.cached_binary``)."""
    cached = builds.cached_binary(build)
    if cached is not None:
        return [cached]
    name = builds.get(build).binary
    out = [Path(sysconfig.get_path("scripts")) / name]
    on_path = shutil.which(name)
    if on_path:
        out.append(Path(on_path))
    checkout = Path(__file__).resolve().parents[2]
    made = [checkout / "worker" / "target" / kind / name for kind in ("release", "debug")]
    made.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)
    return out + made


def _runnable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_worker(build: str = builds.DEFAULT) -> Path:
    """The binary of worker build ``build``: its env variable (``$CRYPTOPERF_WORKER``,
    ``$CRYPTOPERF_WORKER_FIPS``) if set, else the first runnable ``candidates(build)``.

    Raises WorkerNotFound with the fix (reinstall, or set the variable); for a build other than
    the default, BuildUnavailable saying why it is missing (``builds.missing_reason``).
    """
    spec = builds.get(build)
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
    if build == builds.DEFAULT:
        raise WorkerNotFound(builds.missing_reason(build))
    raise builds.BuildUnavailable(builds.missing_reason(build))
