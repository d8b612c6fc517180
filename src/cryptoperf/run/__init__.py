"""Run: talk to workers (``worker.py``) and execute a plan on this machine (``local.py``)."""
