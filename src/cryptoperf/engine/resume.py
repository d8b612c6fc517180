"""Resuming an interrupted study run: the file, the machine and the run's state checked first."""

from __future__ import annotations

from typing import TYPE_CHECKING

import hashlib
import json
import os
from typing import Any, Mapping

from cryptoperf import builds, hostinfo, study as study_mod
from cryptoperf.errors import StudyError, UsageError
from cryptoperf.store.stored_run import StoredRun, load_run, open_store
from cryptoperf.study import Study

if TYPE_CHECKING:
    from cryptoperf.engine.prepare import PreparedStudy


def refuse_settings_on_resume(margin_pct: float | None, multiplicity: bool | None) -> None:
    """Raise UsageError when a resumed run is given ``--margin`` or ``--no-multiplicity``
    (not None): it keeps the analysis settings it was started with."""
    if margin_pct is not None or multiplicity is not None:
        raise UsageError("a resumed run keeps the analysis settings it was started with; leave out "
                         "--margin and --no-multiplicity with --resume")


def study_sha256(text: str) -> str:
    """The SHA-256 of a study file's text (UTF-8), in hex: what ``--resume`` compares."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: Host fingerprint keys that must be equal for a run to resume on this machine: a run's
#: blocks are compared with each other, so they must all come from one machine and one set of
#: libraries.
RESUME_HOST_KEYS = ("cpu_model", "crypto_flags", "logical_cpus", "kernel", "machine", "worker_version",
                    "libraries", "builds")


def prior_run(source: str | os.PathLike | Study, run_id: int | str, store: str | os.PathLike | None) -> StoredRun:
    """The stored run that ``cryptoperf study FILE --resume RUN_ID`` continues, checked.

    ``source`` is the study file (or its parsed Study): its text must be the one stored with
    the run, byte for byte (SHA-256 compared). Raises NoSuchRun / StoreError (no store, no such
    run), UsageError when the run is not a study's, is complete, or is still running (its
    process alive on this machine, or on another machine this one cannot check), StudyError
    when the file changed since the run started — each one line."""
    s = source if isinstance(source, Study) else study_mod.load(source)
    with open_store(store) as st:
        prior = load_run(st, run_id)
    meta = prior.meta
    rid = prior.id
    if meta.get("kind") != "study" or not meta.get("study_toml"):
        raise UsageError(f"run {rid} is a {meta.get('kind')} run, not a study's: only a study resumes")
    status = str(meta.get("status"))
    if status == "complete":
        raise UsageError(f"run {rid} (study {meta.get('study_name')}) is complete: nothing to resume; "
                         f"`cryptoperf report {rid}` shows it")
    if status == "running":
        proc = meta.get("process") or {}
        where = (f"process {proc.get('pid')} on {proc.get('hostname')}" if proc else "another process")
        alive = hostinfo.process_alive(proc)
        raise UsageError(f"run {rid} is still marked running by {where}"
                         + (", which is alive; wait for it or stop it first" if alive else
                            ", which this machine cannot check; resume it there, or after it stopped"))
    old, new = study_sha256(meta["study_toml"]), study_sha256(s.text)
    if old != new:
        raise StudyError(s.path, None, None,
                         f"the file changed since run {rid} started (SHA-256 {new[:12]}… now, {old[:12]}… "
                         "then); resume with the file as it was, or run it as a new study without --resume")
    return prior


def host_fingerprint(prepared: PreparedStudy) -> dict[str, Any]:
    """This machine's fingerprint (``hostinfo.fingerprint``) with the prepared study's worker builds'
    libraries, as a run stores it (before the host checks are added)."""
    _, hello = prepared.workers[builds.DEFAULT]
    return hostinfo.fingerprint(hello.raw, {n: h.raw for n, (_, h) in prepared.workers.items() if n != builds.DEFAULT})


def check_resume_host(prior: StoredRun, host: Mapping[str, Any]) -> None:
    """Raise UsageError (one line) when run ``prior`` was started on a machine or with
    libraries other than ``host`` (this machine's ``host_fingerprint``): the keys of
    ``RESUME_HOST_KEYS`` must be equal."""
    for key in RESUME_HOST_KEYS:
        if prior.host.get(key) != host.get(key):
            raise UsageError(f"run {prior.id} cannot resume on this machine: its {key.replace('_', ' ')} was "
                             f"{_short(prior.host.get(key))}, here it is {_short(host.get(key))}; its blocks "
                             "must all come from one machine and one set of libraries (run the study anew here)")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."
