"""cryptoperf: what does this cryptographic configuration cost us, and what will a change cost?

The package is the orchestrator; the measuring happens in the Rust worker
``cryptoperf-worker``. The pipeline, one module each:

    study (study.py) → plan (plan.py) → run (run/) → stats (stats.py, analysis.py)
    → store (store.py) → report (report/)
"""

__version__ = "0.1.0"

#: Version of the worker protocol this orchestrator speaks (docs/worker-protocol.md).
PROTOCOL_VERSION = 1
