"""Find the ``cryptoperf-worker`` binary."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

from cryptoperf.errors import WorkerNotFound

WORKER_NAME = "cryptoperf-worker"
ENV_VAR = "CRYPTOPERF_WORKER"


def candidates() -> list[Path]:
    """Where the worker is looked for, in order (the env variable is handled by ``find_worker``):
    the scripts directory of this Python (where ``pip install .`` puts it), PATH, then
    ``worker/target/release`` and ``worker/target/debug`` of the source checkout this package
    is imported from (when run from ``src/``), the more recently built of the two first."""
    out = [Path(sysconfig.get_path("scripts")) / WORKER_NAME]
    on_path = shutil.which(WORKER_NAME)
    if on_path:
        out.append(Path(on_path))
    checkout = Path(__file__).resolve().parents[2]
    builds = [checkout / "worker" / "target" / kind / WORKER_NAME for kind in ("release", "debug")]
    builds.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)
    return out + builds


def _runnable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_worker() -> Path:
    """The worker binary: ``$CRYPTOPERF_WORKER`` if set, else the first runnable ``candidates()``.

    Raises WorkerNotFound with the fix (reinstall, or set CRYPTOPERF_WORKER).
    """
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        if not _runnable(p):
            raise WorkerNotFound(f"{ENV_VAR}={env} is not an executable file; "
                                 f"point it at a {WORKER_NAME} binary or unset it")
        return p
    for p in candidates():
        if _runnable(p):
            return p
    raise WorkerNotFound(f"{WORKER_NAME} not found; reinstall with `pip install .` "
                         f"or set {ENV_VAR} to the binary's path")
