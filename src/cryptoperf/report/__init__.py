"""Report: the terminal tables (``terminal.py``) and the JSON documents (``json.py``).

Reports only format; every number and verdict is computed in ``analysis``/``stats``.
"""
