"""Study files: parse, fill defaults, validate.

A study file (TOML, documented in docs/study-files.md) has one ``[study]`` table, one or more
``[[configuration]]`` tables, one or more ``[[operation]]`` tables and any number of
``[[contrast]]`` tables (pairs of configurations compared besides each one with the baseline).
Every key a study file may hold is one row of ``OPTIONS`` (name, type, default, range, help);
that one table drives parsing, defaults, validation, the ``cryptoperf study --options`` text
and the "did you mean" suggestions for misspelt keys, as fio's option table does.

Errors are ``StudyError``s naming the file, the line of the offending key and the field.
Validation happens in two steps, both before anything runs: ``load`` checks everything the
file alone can tell; ``check_against_worker`` checks everything else against the rules the
worker announced in its ``hello`` (``hello.WorkerRules``): backend and operation names,
which operation takes a message size, a digest or a padding and their allowed values, and the
worker's limits on warm-up, measuring time, threads and message size. The worker is the one
source of those rules; nothing here repeats them.

The package's parts: ``options`` (the option table), ``types`` (the parsed study and host
selectors), ``parse`` (the parser and the line scanner behind its errors), ``check`` (the checks
against the worker's hello). Every name is importable from ``cryptoperf.study`` itself.
"""

from cryptoperf.errors import StudyError
from cryptoperf.study.check import MAX_CELLS, check_against_worker
from cryptoperf.study.options import (OPTIONS, REQUIRED, SECTIONS, UNTIL, VERDICT_ON, WORKER_PARAMS, Option,
                                      options_for, options_help, workload_params_help)
from cryptoperf.study.parse import (INT64, MAX_LOADS, MAX_PAIRS, MAX_PARAMS, MAX_STUDY_BYTES, MAX_TABLES, SHOWN,
                                    SourceMap, load, parse)
from cryptoperf.study.types import EVERY_NODE, Configuration, Contrast, HostSelector, Operation, Study

__all__ = ["EVERY_NODE", "INT64", "MAX_CELLS", "MAX_LOADS", "MAX_PAIRS", "MAX_PARAMS", "MAX_STUDY_BYTES",
           "MAX_TABLES", "OPTIONS", "REQUIRED", "SECTIONS", "SHOWN", "UNTIL", "VERDICT_ON", "WORKER_PARAMS", "Configuration",
           "Contrast", "HostSelector", "Operation", "Option", "SourceMap", "Study", "StudyError", "check_against_worker",
           "load", "options_for", "options_help", "parse", "workload_params_help"]
