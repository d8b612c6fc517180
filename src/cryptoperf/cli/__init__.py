"""The command line: ``cryptoperf speed``, ``study``, ``report``, ``backends``, ``setup`` (the
worker builds ``pip install .`` does not make, e.g. ``openssl@3.6``), and on stored runs
``list``, ``compare``, ``plan`` (the economics of an operation: cores for a rate, the cost
of a change, accelerator break-even) and ``publish`` (the store as a static website).

The commands parse and print; the engine, the store and the reports do the work. One module
per family of commands, each registering its commands on the one click group:

    app.py      the group ``cli`` (``cryptoperf --help``), the consoles, ``main()``: the only
                place errors become exit codes (one line on stderr, never a traceback)
    measure.py  speed, study: run the worker and measure
    gate.py     gate: two worker builds in one study, a regression gate for pipelines
    runs.py     report, list, compare, publish: stored runs
    plan.py     plan: economics of a stored run's operations
    workers.py  backends, setup: the worker's backends and its builds
"""

from cryptoperf.cli.app import cli, main
from cryptoperf.cli import explain, gate, measure, plan, runs, workers  # importing them registers their commands on cli

__all__ = ["cli", "gate", "main", "measure", "plan", "runs", "workers"]
