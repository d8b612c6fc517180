"""Build hook: ship the worker's sources inside the package.

Everything else about the build is in pyproject.toml. `cryptoperf setup openssl@3.6` (and a study
that needs that build) compiles the worker again with another cargo feature, long after the
clone `pip install .` ran from may be gone; so build_py copies what cargo needs —
worker/Cargo.toml, worker/Cargo.lock and worker/src/** — into cryptoperf/_worker_src/ of the
wheel (``cryptoperf.workerbuild.sources`` looks there first).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker"
FILES = ("Cargo.toml", "Cargo.lock")
DIRS = ("src",)


def _worker_files() -> list[Path]:
    """The worker files to ship, relative to worker/ (empty when there is no worker/ here, e.g.
    building from an sdist made without it); the same list as
    ``cryptoperf.workerbuild.source_files``, which digests them."""
    if not (WORKER / "Cargo.toml").is_file():
        return []
    out = [Path(f) for f in FILES if (WORKER / f).is_file()]
    for d in DIRS:
        out += sorted(p.relative_to(WORKER) for p in (WORKER / d).rglob("*") if p.is_file())
    return out


class build_py_with_worker_sources(build_py):
    """build_py, plus the worker sources copied to <build_lib>/cryptoperf/_worker_src/."""

    def run(self) -> None:
        super().run()
        dest = Path(self.build_lib) / "cryptoperf" / "_worker_src"
        if dest.exists():
            shutil.rmtree(dest)
        for rel in _worker_files():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(WORKER / rel, target)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        dest = Path(self.build_lib) / "cryptoperf" / "_worker_src"
        return super().get_outputs(include_bytecode) + [str(dest / rel) for rel in _worker_files()]


setup(cmdclass={"build_py": build_py_with_worker_sources})
