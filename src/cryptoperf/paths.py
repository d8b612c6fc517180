"""Where cryptoperf keeps its files: one data directory, shared by the store (``runs.sqlite``)
and the worker builds ``cryptoperf setup`` caches (``workers/``), the build logs (``logs/``)
and the work files of file workloads (``work/``)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

#: Environment variable that moves cryptoperf's data directory.
DATA_DIR_ENV = "CRYPTOPERF_DATA_DIR"


def data_dir() -> Path:
    """cryptoperf's data directory: ``$CRYPTOPERF_DATA_DIR`` if set, else
    ``platformdirs.user_data_dir("cryptoperf")`` (e.g. ``~/.local/share/cryptoperf``)."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else Path(platformdirs.user_data_dir("cryptoperf"))
