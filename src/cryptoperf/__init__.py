"""cryptoperf: what does this cryptographic configuration cost us, and what will a change cost?

The package is the orchestrator; the measuring happens in the Rust worker
``cryptoperf-worker``. The pipeline, one module each:

    study (study.py) → plan (plan.py) → run (run/) → stats (stats.py, analysis.py)
    → store (store.py) → report (report/)

On stored runs: ``compare.py`` (run against run), ``economics.py`` (cores, cost of a change,
accelerator break-even) and ``cryptoperf.load()`` (``frame.py``: a pandas DataFrame; needs the
``data`` extra).
"""

__version__ = "0.1.0"

#: Version of the worker protocol this orchestrator speaks (docs/worker-protocol.md).
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__", "load"]


def __getattr__(name: str):
    """``cryptoperf.load`` is imported on first use, so ``import cryptoperf`` stays light."""
    if name == "load":
        from cryptoperf.frame import load
        return load
    raise AttributeError(f"module 'cryptoperf' has no attribute {name!r}")
