"""Finding the real worker binaries the real-worker tests run (test_real_worker.py,
test_real_fips_worker.py, test_fake_worker.py); a test that needs one calls
``conftest.need_real_worker`` with what ``find`` returned, which skips it when the binary is
missing, or fails it under CRYPTOPERF_REQUIRE_WORKER=1 / CRYPTOPERF_REQUIRE_FIPS=1."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

from cryptoperf import builds
from cryptoperf.errors import WorkerError
from cryptoperf.run.worker import fetch_hello


@functools.lru_cache(maxsize=None)
def find(build: str = builds.DEFAULT) -> tuple[Path | None, str]:
    """``(path, "")`` of build ``build``'s worker under test, or ``(None, why not)``.

    The binary is its variable's ($CRYPTOPERF_WORKER, $CRYPTOPERF_WORKER_FIPS) when set, so
    that a fresh build is tested rather than an older installed one that
    ``builds.candidates`` would find first; else the first candidate that answers hello.
    """
    spec = builds.get(build)
    env = os.environ.get(spec.env_var)
    candidates = [Path(env)] if env else builds.candidates(build)
    problems = []
    for p in candidates:
        if not (p.is_file() and os.access(p, os.X_OK)):
            if env:
                problems.append(f"{spec.env_var}={env} is not an executable file")
            continue
        try:
            fetch_hello(p, timeout_s=30)
        except WorkerError as e:
            problems.append(f"{p} answers no hello: {e}")
            continue
        return p, ""
    if not problems:
        problems.append(f"no built {spec.binary} (looked for {', '.join(map(str, candidates))}; "
                        f"build it with `pip install .`, or set {spec.env_var})")
    return None, f"the real {build} worker is unavailable: " + "; ".join(problems)


#: How each Go worker build is made from worker-go/ (as setup.py makes it at `pip install .`):
#: environment and build tags.
GO_BUILDS = {builds.GO: ({}, ()), builds.GO_FIPS: ({"GOFIPS140": "v1.0.0"}, ("cryptoperf_fips_only",))}


def build_go(build: str, out_dir: Path, tags: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """``(path, "")`` of Go worker build ``build`` (``go``, ``go-fips``) compiled now from this
    checkout's worker-go/ into ``out_dir`` (with extra build ``tags``: a test build), so the
    sources under test are what runs, not an older installed binary; ``(None, why)`` without
    Go or when the build fails. Raises KeyError for another build."""
    env, build_tags = GO_BUILDS[build]
    go = shutil.which("go")
    if go is None:
        return None, "go is not installed"
    binary = out_dir / (builds.get(build).binary + ("-" + "-".join(tags) if tags else ""))
    all_tags = ",".join(build_tags + tags)
    cmd = [go, "build", "-o", str(binary)] + (["-tags", all_tags] if all_tags else []) + ["."]
    res = subprocess.run(cmd, cwd=Path(__file__).resolve().parent.parent / "worker-go",
                         env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        return None, f"`{' '.join(cmd)}` failed: {res.stderr.strip()[-2000:]}"
    return binary, ""


def talk(binary: Path, lines: list[str], timeout_s: float = 600) -> tuple[list[dict], int]:
    """Send worker ``binary`` the request ``lines`` (each without its newline), then ``bye``:
    its answers (one JSON object per line) and its exit status."""
    res = subprocess.run([str(binary)], input="".join(line + "\n" for line in lines) + '{"type":"bye"}\n',
                         capture_output=True, text=True, timeout=timeout_s)
    return [json.loads(line) for line in res.stdout.splitlines()], res.returncode


def ask(binary: Path, *requests: dict, timeout_s: float = 600) -> list[dict]:
    """``hello``, then ``requests``, to worker ``binary``: every answer, the hello's first.
    Asserts the worker exits 0."""
    answers, status = talk(binary, [json.dumps(r) for r in ({"type": "hello", "protocol": 1}, *requests)], timeout_s)
    assert status == 0, answers
    return answers
