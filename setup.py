"""Build hooks: ship the Rust worker's sources inside the package, and build the Go worker.

Everything else about the build is in pyproject.toml (which builds the Rust workers). `cryptoperf setup openssl@3.6` (and a study
that needs that build) compiles the worker again with another cargo feature, long after the
clone `pip install .` ran from may be gone; so build_py copies what cargo needs —
worker/Cargo.toml, worker/Cargo.lock and worker/src/** — into cryptoperf/_worker_src/ of the
wheel (``cryptoperf.workerbuild.sources`` looks there first).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
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


# The Go worker (worker-go/): two builds of one source, put in <build_lib>/cryptoperf/_bin/, where
# cryptoperf.builds looks for them. go-fips links the frozen Go Cryptographic Module v1.0.0
# (GOFIPS140) and its cryptoperf_fips_only tag enforces FIPS 140-3 mode by default. Optional like
# the FIPS worker: without a Go toolchain (1.24 or later: the first with GOFIPS140; go.mod's own
# version is then fetched from the Go module proxy by the go command) the install goes on, and
# go-worker.skipped says why (`cryptoperf backends` shows it).
GO_WORKER = HERE / "worker-go"
GO_BUILDS = (("cryptoperf-worker-go", {}, ""),
             ("cryptoperf-worker-go-fips", {"GOFIPS140": "v1.0.0"}, "cryptoperf_fips_only"))
GO_MIN = (1, 24)
GO_SKIPPED = "go-worker.skipped"


def _go_version(go: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"go(\d+)\.(\d+)", out.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def build_go_workers(dest: Path) -> str | None:
    """Build the Go worker's binaries into ``dest``; None when built, else why not (one line).
    Nothing to do (None) without worker-go/ here (an sdist made without it)."""
    if not (GO_WORKER / "go.mod").is_file():
        return None
    go = shutil.which("go")
    if go is None:
        return ("building the Go worker needs Go 1.24 or later (https://go.dev/dl/), and this machine "
                "had no `go` when `pip install .` ran; install it and rerun `pip install .`")
    version = _go_version(go)
    if version is None or version < GO_MIN:
        return (f"building the Go worker needs Go {GO_MIN[0]}.{GO_MIN[1]} or later (its FIPS 140-3 module), "
                f"and `go` here is {'.'.join(map(str, version)) if version else 'of unknown version'}; "
                f"upgrade it and rerun `pip install .`")
    dest = dest.resolve()  # absolute: go build runs in worker-go/, and build_lib is relative to here
    dest.mkdir(parents=True, exist_ok=True)
    for binary, env, tags in GO_BUILDS:
        cmd = [go, "build", "-trimpath", "-o", str(dest / binary)] + (["-tags", tags] if tags else []) + ["."]
        res = subprocess.run(cmd, cwd=GO_WORKER, env={**os.environ, **env}, capture_output=True, text=True,
                             timeout=1800)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
            return f"`{' '.join(cmd[:1] + ['build'])}` of {binary} failed in worker-go/: {last}"
    return None


class build_py_with_worker_sources(build_py):
    """build_py, plus the worker sources copied to <build_lib>/cryptoperf/_worker_src/ and the Go
    worker built into <build_lib>/cryptoperf/_bin/."""

    def run(self) -> None:
        super().run()
        bin_dir = Path(self.build_lib) / "cryptoperf" / "_bin"
        if bin_dir.exists():
            shutil.rmtree(bin_dir)
        why = build_go_workers(bin_dir)
        if why is not None:
            bin_dir.mkdir(parents=True, exist_ok=True)
            (bin_dir / GO_SKIPPED).write_text(why + "\n")
            print(f"cryptoperf: the Go worker is not built: {why}")
        dest = Path(self.build_lib) / "cryptoperf" / "_worker_src"
        if dest.exists():
            shutil.rmtree(dest)
        for rel in _worker_files():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(WORKER / rel, target)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        dest = Path(self.build_lib) / "cryptoperf" / "_worker_src"
        bin_dir = Path(self.build_lib) / "cryptoperf" / "_bin"
        built = sorted(str(p) for p in bin_dir.iterdir()) if bin_dir.is_dir() else []
        return super().get_outputs(include_bytecode) + [str(dest / rel) for rel in _worker_files()] + built


setup(cmdclass={"build_py": build_py_with_worker_sources})
