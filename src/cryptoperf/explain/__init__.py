"""``cryptoperf explain``: why a configuration costs more CPU than another — profiled
repetitions under the kernel's sampling profiler (``perf``), and the attribution of the change
of CPU per operation to the functions (or libraries) that take it, with intervals across
blocks.

- ``perf.py``: whether perf can sample here, the worker wrapped under ``perf record``, each
  sample's function read back from ``perf script``;
- ``profile.py``: profiled blocks of two cells, separate from the study's repetitions;
- ``attribution.py``: per function and per library, CPU per operation in each configuration,
  the change with a paired interval, and its share of the total;
- ``stacks.py``: the call stacks folded and drawn as a differential flame graph (inferno);
- ``pair.py``: one comparison of a stored run explained — the document every output shows and
  the store keeps —, and a study's ``explain = true``;
- ``extensions.py``: which CPU extension groups an operation depends on, by a study of masks
  alone and together.
"""
