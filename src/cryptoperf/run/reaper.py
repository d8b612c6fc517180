"""``python -m cryptoperf.run.reaper DIR``: the guard of one server under test
(``run/server.py``), started as soon as the server's private directory ``DIR`` exists (before
its key is written). The orchestrator writes the server's session id (its pid) on a line of the
guard's standard input once the server runs. The guard waits for that input to close — the
orchestrator closes it after stopping the server itself, and the kernel closes it when the
orchestrator dies, even by ``kill -9`` — then kills every process left in that session, and
the session of any process working in ``DIR`` (a server started but not yet written, when the
orchestrator died between the two), and removes ``DIR`` (keys, config, log). It runs in a session of its own, so a signal to the
orchestrator's process group does not take it down before it has cleaned up."""

from __future__ import annotations

import os
import shutil
import signal
import sys


def main(argv: list[str]) -> int:
    """Wait for EOF on stdin (reading the session ids written to it), then clean up; returns
    the exit status (2 for bad arguments)."""
    if len(argv) != 1 or not os.path.basename(argv[0]).startswith("cryptoperf-server-"):
        print("usage: python -m cryptoperf.run.reaper DIR (a cryptoperf-server-* directory)", file=sys.stderr)
        return 2
    work = argv[0]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the orchestrator, which stops the server
    sessions = []
    try:
        for line in sys.stdin:
            if line.strip().isdigit():
                sessions.append(int(line))
    except OSError:
        pass
    # a server started but not yet written here (the orchestrator killed between the two) is
    # found by its working directory, which is DIR
    for pgid in [*sessions, *started_in(work)]:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    shutil.rmtree(work, ignore_errors=True)
    return 0


def started_in(work: str) -> list[int]:
    """The session ids of the processes whose working directory is ``work`` (from /proc; the
    server is started there in a session of its own)."""
    out = []
    real = os.path.realpath(work)
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if os.path.realpath(os.readlink(f"/proc/{pid}/cwd")) == real:
                out.append(os.getsid(int(pid)))
        except OSError:
            continue
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
