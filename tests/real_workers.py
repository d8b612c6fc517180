"""Finding the real worker binaries the real-worker tests run (test_real_worker.py,
test_real_fips_worker.py, test_fake_worker.py); a test that needs one calls
``conftest.need_real_worker`` with what ``find`` returned, which skips it when the binary is
missing, or fails it under CRYPTOPERF_REQUIRE_WORKER=1 / CRYPTOPERF_REQUIRE_FIPS=1."""

from __future__ import annotations

import functools
import os
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
