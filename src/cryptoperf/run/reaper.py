"""``python -m cryptoperf.run.reaper PGID DIR``: the guard of one server under test
(``run/server.py``). It waits for its standard input to close — the orchestrator closes it
after stopping the server itself, and the kernel closes it when the orchestrator dies, even by
``kill -9`` — then kills every process left in session ``PGID`` and removes ``DIR`` (the
server's private directory: keys, config, log). Runs in a session of its own, so a signal to
the orchestrator's process group does not take it down before it has cleaned up."""

from __future__ import annotations

import os
import shutil
import signal
import sys


def main(argv: list[str]) -> int:
    """Wait for EOF on stdin, then clean up; returns the exit status (2 for bad arguments)."""
    if len(argv) != 2 or not argv[0].isdigit():
        print("usage: python -m cryptoperf.run.reaper PGID DIR", file=sys.stderr)
        return 2
    pgid, work = int(argv[0]), argv[1]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the orchestrator, which stops the server
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if os.path.basename(work).startswith("cryptoperf-server-"):
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
