"""``cryptoperf explain``: why a configuration costs more CPU than another — profiled
repetitions under the kernel's sampling profiler (``perf``), and the attribution of the change
of CPU per operation to the functions (or libraries) that take it, with intervals across
blocks.

- ``perf.py``: whether perf can sample here, the worker wrapped under ``perf record``, the
  samples per function read back;
- ``profile.py``: profiled blocks of two cells, separate from the study's repetitions;
- ``attribution.py``: per function, CPU per operation in each configuration, the change with a
  paired interval, and its share of the total;
- ``extensions.py``: which CPU extension groups an operation depends on, by a study of masks.
"""
