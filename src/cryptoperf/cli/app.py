"""The ``cryptoperf`` command group, the consoles every command prints on, and ``main()``: the
only place in cryptoperf that turns errors into exit codes.

Every failure the user can cause ends as one line ``cryptoperf: error: <what, where, fix>`` on
stderr — exit 2 for usage and study-file errors, 1 for others, 130 on Ctrl-C — never a
traceback (set CRYPTOPERF_DEBUG=1 to see one for an unexpected internal error).

The commands register themselves on ``cli`` from their own modules (``measure``, ``runs``,
``plan``, ``workers``), which import ``cli`` from here; the package's ``__init__`` imports them.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Sequence

import click
from rich.console import Console

from cryptoperf import PROTOCOL_VERSION, __version__
from cryptoperf.store import stored_run as stored
from cryptoperf.errors import CryptoperfError, StudyInterrupted
from cryptoperf.report import terminal
from cryptoperf.store.db import mask, shown_default


def err_console() -> Console:
    """A Console on stderr: progress, notes, the run a command uses."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def out_console() -> Console:
    """A Console on stdout, for a command's answer (``terminal.console_for_stdout``)."""
    return terminal.console_for_stdout()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cryptoperf",
                      message=f"%(prog)s %(version)s (worker protocol {PROTOCOL_VERSION})")
def cli() -> None:
    """What does this cryptographic configuration cost, and what will a change cost?

    Measurements run in the Rust worker `cryptoperf-worker`, one fresh process per repetition;
    this program schedules randomised blocks, compares (paired t intervals, verdicts against an
    equivalence margin, adjusted for multiplicity), stores (SQLite, or PostgreSQL shared by a
    team) and reports.

    \b
    cryptoperf backends                  which backends and operations the worker has
    cryptoperf speed --op rsa2048-sign   ops/s, MB/s, latency percentiles, CPU/op per backend
    cryptoperf study studies/quick.toml  compare configurations against a baseline
    cryptoperf report [RUN_ID]           HTML (or md, json, csv) report of a stored run
    cryptoperf setup openssl@3.6         build the worker with OpenSSL 3.6 (once, cached)
    cryptoperf list                      the stored runs
    cryptoperf compare 3 4               run 4 against run 3: host differences, deltas
    cryptoperf compare 3 4 --fail-on slower   the same as a regression gate (exit 1)
    cryptoperf compare --by host 5       one run's machines side by side, with verdicts
    cryptoperf plan --op rsa2048-sign --rate 9.6   cores, cost of a change, accelerator break-even
    cryptoperf plan --per-request "ecdsa-p256-sign + x25519-keygen + x25519-derive" --rate 2k
    cryptoperf publish site/             a static website: every run, comparisons, trends

    Runs are stored in runs.sqlite in cryptoperf's data directory, beside the worker builds
    `cryptoperf setup` caches: ~/.local/share/cryptoperf (platformdirs' user data directory), or
    $CRYPTOPERF_DATA_DIR when set; $CRYPTOPERF_STORE names another (a path, or a
    postgresql:// URL a team shares: docs/shared-store.md), and --store PATH|URL another for
    one command. A worked first hour: docs/first-hour.md.
    """


def say_using(run: stored.StoredRun) -> None:
    """Say on stderr which stored run a command works on."""
    err_console().print(f"using {stored.describe(run)}", markup=False)


# --store's help for the commands that read stored runs
STORE_HELP = f"Store to read: a SQLite file or a postgresql:// URL [default: {shown_default()}]."


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cryptoperf`` console script; returns the exit status.

    0 success; 1 a worker, store or internal error; 2 a usage or study-file error; 130 Ctrl-C
    (or SIGTERM, which stops a study the same way: its finished repetitions stored, the run
    marked interrupted and resumable).
    """
    try:
        signal.signal(signal.SIGTERM, _terminated)
    except ValueError:
        pass  # not the main thread (an embedding program): SIGTERM keeps its handler
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="cryptoperf",
                      standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        return e.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        # click turns Ctrl-C into Abort; a study's own interruption (its run id) is the cause
        cause = e if isinstance(e, StudyInterrupted) else e.__cause__ or e.__context__
        if isinstance(cause, StudyInterrupted):
            return _fail(str(cause), 130)
        return _fail("interrupted; repetitions finished so far are in the store", 130)
    except click.exceptions.UsageError as e:
        hint = ""
        if e.ctx is not None:
            hint = f" (see `{e.ctx.command_path} --help`)"
        return _fail(e.format_message() + hint, 2)
    except click.exceptions.ClickException as e:
        return _fail(e.format_message(), 1)
    except CryptoperfError as e:
        return _fail(str(e), e.exit_code)
    except BrokenPipeError:
        return 1
    except Exception as e:  # never a traceback for the user
        if os.environ.get("CRYPTOPERF_DEBUG"):
            raise
        return _fail(f"internal error: {type(e).__name__}: {e} (rerun with CRYPTOPERF_DEBUG=1 "
                     "for the traceback, and please report it)", 1)


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM: stop as Ctrl-C does (KeyboardInterrupt), so the run is closed as interrupted."""
    raise KeyboardInterrupt


def _fail(message: str, code: int) -> int:
    """Write ``message`` as the one ``cryptoperf: error:`` line on stderr; returns ``code``."""
    one_line = mask(" ".join(str(message).split()))  # a store URL's password never shows
    try:
        sys.stderr.write(f"cryptoperf: error: {one_line}\n")
        sys.stderr.flush()
    except OSError:
        pass
    return code
