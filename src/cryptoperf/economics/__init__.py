"""Economics: what a load costs in CPU, what a change of configuration costs at that load, and
from which load an accelerator pays for itself.

Everything starts from the measured **on-CPU time per operation** (``cpu_ns_per_op``: the
worker's thread CPU time over the window ÷ operations, per repetition; for a workload, one
side's CPU per transaction: ``sides``), not from latency: an operation that waits costs time but
no CPU. The arithmetic is in pure functions on numbers (``cost``, ``accelerator``,
``request``); ``plan()`` (``planning``) picks the cells of a stored run and feeds them in, and
returns a typed ``PlanResult`` that ``report/economics.py`` renders. The method and a worked
example are in docs/methodology.md, section "Economics".

Units are in the names:

- ``rate_per_s``: operations (transactions, requests) per second the service must sustain;
- ``cpu_ns_per_op``: nanoseconds of CPU per operation;
- ``cores``: CPU cores kept fully busy (1.0 = one core; 0.125 = 12.5 % of a core);
- ``*_per_year``: money per year, in whatever currency the caller uses — the same one for
  cores and accelerators;
- ``ops_per_s_per_unit``: operations per second one accelerator unit sustains.

A **composite request** (``cryptoperf plan --per-request "ecdsa-p256-sign + x25519-keygen +
x25519-derive"``) is several operations done once per request, e.g. what a TLS 1.3 server signs
and computes per full handshake; its CPU per request is the sum of its terms' CPU per operation ×
count (``request_cpu``), plus, when asked, the **non-crypto remainder** a workload measured on
the same host adds per transaction (``remainder``).

Errors: ``EconomicsError`` (a UsageError: exit 2 from the CLI) for a negative or missing figure,
an operation or side the run does not have, or an accelerator that can never pay for itself.
"""

from cryptoperf.economics.accelerator import (Accelerator, BreakEven, Offload, break_even, offload,
                                              saving_per_op_per_s, units_needed)
from cryptoperf.economics.cost import (NS_PER_S, PAIRED_DIFFERENCES, Change, CoresAtRate, CpuCost, change,
                                       check_number, cores_at_rate, cores_needed, cpu_cost, ops_per_s_per_core,
                                       parse_rate)
from cryptoperf.economics.planning import (CAVEAT, REMAINDER_LEFT_OUT, PlanResult, find_cells, measured_accelerator,
                                           plan)
from cryptoperf.economics.request import (PER_BLOCK_TOTALS, SUMMED_INTERVALS, Remainder, RequestCpu, Term,
                                          parse_request, remainder, request_change, request_cpu, request_text,
                                          with_remainder)
from cryptoperf.economics.sides import SIDE_TEXT, SIDES, WORKLOAD_SIDES, side_cpu_ns_per_tx, side_samples

__all__ = ["Accelerator", "BreakEven", "CAVEAT", "Change", "CoresAtRate", "CpuCost", "NS_PER_S",
           "Offload", "PAIRED_DIFFERENCES", "PER_BLOCK_TOTALS", "PlanResult", "REMAINDER_LEFT_OUT", "Remainder",
           "RequestCpu", "SIDES", "SIDE_TEXT", "SUMMED_INTERVALS", "Term", "WORKLOAD_SIDES", "break_even",
           "change", "check_number", "cores_at_rate", "cores_needed", "cpu_cost", "find_cells", "measured_accelerator",
           "offload",
           "ops_per_s_per_core", "parse_rate", "parse_request", "plan", "remainder", "request_change",
           "request_cpu", "request_text", "saving_per_op_per_s", "side_cpu_ns_per_tx", "side_samples",
           "units_needed", "with_remainder"]
