"""The ``cryptoperf`` console script and ``python -m cryptoperf``: the command line
(``cli.main``), imported here so that a Ctrl-C while it loads (numpy, scipy, SQLAlchemy take a
moment) ends with one line and status 130, like a Ctrl-C at any later point, not a traceback."""

from __future__ import annotations

import sys


def main() -> int:
    """Import and run the command line; returns its exit status (130 on Ctrl-C while loading)."""
    try:
        from cryptoperf.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("cryptoperf: error: interrupted while starting; nothing was run\n")
        return 130
    return cli_main()
