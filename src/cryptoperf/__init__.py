"""cryptoperf: what does this cryptographic configuration cost us, and what will a change cost?

The package is the orchestrator; the measuring happens in the Rust worker
``cryptoperf-worker``. The pipeline, one module each:

    study (study/) → schedule (schedule.py) → run (run/) → stats (stats/, analysis.py)
    → store (store/) → report (report/)

``model.py`` holds the types every stage shares; the ``engine`` package drives the pipeline and is the
Python API:

    import cryptoperf
    run = cryptoperf.run_study("studies/quick.toml")     # a stored run, analysed
    for d in run.deltas:
        print(d.label, d.configuration, d.verdict.text if d.verdict else d.reason)
    cryptoperf.speed(ops=["sha256"], backends=["openssl"])

On stored runs: ``compare.py`` (run against run), ``economics/`` (cores, cost of a change,
accelerator break-even, fleet jobs) and ``cryptoperf.load()`` (``store/frame.py``: a pandas DataFrame; needs the
``data`` extra).
"""

__version__ = "0.2.0"

#: Version of the worker protocol this orchestrator speaks (docs/worker-protocol.md).
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__", "load", "run_study", "speed"]


def __getattr__(name: str):
    """``load``, ``run_study`` and ``speed`` are imported on first use, so ``import cryptoperf``
    stays light."""
    if name == "load":
        from cryptoperf.store.frame import load
        return load
    if name in ("run_study", "speed"):
        from cryptoperf import engine
        return getattr(engine, name)
    raise AttributeError(f"module 'cryptoperf' has no attribute {name!r}")
