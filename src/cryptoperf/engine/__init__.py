"""The engine: the study and speed pipelines as a Python API (``cli/`` only parses and prints).

    import cryptoperf
    run = cryptoperf.run_study("studies/quick.toml", store="runs.sqlite")
    for d in run.deltas:
        print(d.label, d.configuration, d.verdict.text if d.verdict else d.reason)

A study goes: parse the file → ask the worker(s) for their ``hello`` (operation rules, limits,
unmasked capability vectors) and check the study against them → expand it into cells → one
calibration repetition per cell (support, and each group's batch size) → randomised complete
blocks → with ``until = "decided"``, more blocks for the inconclusive comparisons only, at the
planned looks → analysis, once → the JSON document and the HTML/Markdown reports, all rendered
from that one ``StoredRun``. Every repetition is committed to the store as it finishes.

Repetitions run through an executor: this machine, one at a time (``run/local.py``, the
default), or a Ray cluster, each randomised block a task on one node (``run/ray.py``,
``executor="ray"``; Ray is imported only then).

The package's modules, in the order a study uses them: ``workers`` (the worker builds a study
needs, the executor), ``prepare`` (the study checked and expanded: ``PreparedStudy``), ``preflight``
(what it needs in disk, memory and threads, checked before the first repetition), ``resume``
(an interrupted run continued), ``studyrun`` (``run_study``), ``speed`` (``cryptoperf speed``)
and ``gate`` (``cryptoperf gate``: two worker builds as one study, a regression gate).
"""

from cryptoperf.engine.prepare import (PreparedStudy, check_work_dir, check_workloads, comparable, no_comparison_reason,
                                    prepare_study)
from cryptoperf.engine.resume import prior_run, refuse_settings_on_resume, study_sha256
from cryptoperf.engine.speed import DEFAULT_SPEED_OPS, MAX_SPEED_REPETITIONS, SpeedRun, speed
from cryptoperf.engine.studyrun import DEFAULT_OUT_DIR, StudyRun, check_before_running, run_study
from cryptoperf.engine.workers import default_rules, default_worker, make_executor, worker_builds

__all__ = ["DEFAULT_OUT_DIR", "DEFAULT_SPEED_OPS", "MAX_SPEED_REPETITIONS", "SpeedRun", "PreparedStudy", "StudyRun",
           "check_before_running", "check_work_dir", "check_workloads", "comparable", "default_rules",
           "default_worker", "make_executor", "no_comparison_reason", "prepare_study", "prior_run",
           "refuse_settings_on_resume", "run_study", "speed", "study_sha256", "worker_builds"]
