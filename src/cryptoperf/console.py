"""The ``cryptoperf`` console script and ``python -m cryptoperf``: the command line
(``cli.main``), imported here so that a Ctrl-C while it loads (numpy, scipy, SQLAlchemy take a
moment) ends with one line and status 130, like a Ctrl-C at any later point, not a traceback.
Once the command has returned, Ctrl-C is ignored while the interpreter shuts down: there is
nothing left to stop, and a SIGINT landing then would otherwise end the process by the signal
(status −2 to a parent) after the command had finished."""

from __future__ import annotations

import signal
import sys


def main() -> int:
    """Import and run the command line; returns its exit status (130 on Ctrl-C while loading,
    or on one that lands between the command's own handling and here)."""
    try:
        from cryptoperf.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("cryptoperf: error: interrupted while starting; nothing was run\n")
        return 130
    try:
        code = cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("cryptoperf: error: interrupted; repetitions finished so far are in the store\n")
        code = 130
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, KeyboardInterrupt):
        pass  # not the main thread, or the Ctrl-C landed just now: the status stands
    return code
