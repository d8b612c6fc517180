"""The statistical rules checked by simulation, through the project's own functions.

Each module draws repetitions from a known truth (a ratio, a CV, disturbed repetitions, runners
that change), runs them through the very code a study, ``compare`` or the CI gate uses
(``schedule``, ``analysis``, ``across_runs``, ``compare``, ``engine.gate``) and counts how often
the verdict is false, how often an interval covers the truth and how often a real change is
found. docs/methodology.md quotes their tables.

- ``study``: one study's verdicts (``python -m cryptoperf.simulate``).
- ``runs``: run against run, sessions and jobs as units (``python -m cryptoperf.simulate.runs``).
- ``gate``: the paired CI gate (``python -m cryptoperf.simulate.gate``).
"""
