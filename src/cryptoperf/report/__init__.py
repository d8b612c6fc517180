"""Report: every way a run is shown.

- ``terminal.py`` — Rich tables (the answer at a glance);
- ``json.py`` — the complete JSON documents; ``csv.py`` — one row per worker run;
- ``html.py`` — one self-contained HTML file with plots (a forest plot of the verdicts first);
  ``markdown.py`` — the verdict list and tables for a ticket, drawn without matplotlib;
- ``sections/`` — the registry of report sections (``sections/core.py`` holds the core ones,
  ``sections/workloads.py`` every workload's, ``sections/<kind>.py`` a workload's own), each
  reading only the run's analysis, their HTML in ``templates/sections/``; ``plots.py``
  (matplotlib → inline SVG), ``view.py`` (groups and series of a stored run), ``render.py``
  (Jinja2, Markdown tables, writing files), ``text.py`` (every number, change, interval and
  host text; no Rich);
- ``formats.py`` — the formats of ``cryptoperf report``, chosen in one place;
- ``study_text.py`` — what ``cryptoperf study`` says around a run (the plan, the footer);
  ``site.py`` — the pages ``cryptoperf publish`` writes; ``economics.py`` and ``job_plan.py`` —
  ``cryptoperf plan``'s answers (the plan types they are given, rendered).

Reports only format; every number and verdict is computed in ``analysis``/``stats`` and, for
workloads, ``cryptoperf.workloads``.
"""
