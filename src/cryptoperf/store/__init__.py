"""The store: where measured runs are kept and how they come back out.

- ``db``: the database (SQLite or PostgreSQL): every repetition written as it finishes, the run
  list, the format version and its changelog, upgrades of older stores.
- ``stored_run``: a run read back from the database and analysed again (``StoredRun``): what
  ``report``, ``compare``, ``plan`` and ``cryptoperf.load`` start from.
- ``rows``: outcomes and analysed levels as flat rows, the one flattener behind the CSV report,
  ``cryptoperf.load()`` and the JSON documents.
- ``frame``: ``cryptoperf.load()``, those rows as a pandas DataFrame.
"""
