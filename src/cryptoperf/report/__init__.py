"""Report: every way a run is shown.

- ``terminal.py`` — Rich tables (the answer at a glance);
- ``json.py`` — the complete JSON documents; ``csv.py`` — one row per worker run;
- ``html.py`` — one self-contained HTML file with plots (a forest plot of the verdicts first);
  ``markdown.py`` — the verdict list and tables for a ticket, drawn without matplotlib;
- ``sections.py`` — the registry of report sections (``core_sections.py`` holds the core ones),
  ``plots.py`` (matplotlib → inline SVG), ``view.py`` (groups and series of a stored run),
  ``render.py`` (Jinja2, Markdown tables, writing files);
- ``formats.py`` — the formats of ``cryptoperf report``, chosen in one place.

Reports only format; every number and verdict is computed in ``analysis``/``stats``.
"""
