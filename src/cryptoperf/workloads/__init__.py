"""The workload analysis: the figures of workload levels (a TLS handshake, a transfer, an IKE
phase 1, encrypted storage, a fleet job), computed once from the workers' results and kept in the
run's analysis, so that every report renders the same figures.

``generic.py`` computes what every workload has (per level and per side); a workload with
figures of its own has a module here that names it (``KIND``) — nothing else in the package
names a workload. ``access.py`` is the only place a worker's result is read.
"""
