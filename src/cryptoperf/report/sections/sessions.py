"""Report section of operations measured at several thread counts (a study's ``threads = [1, 2,
4]``: each thread its own session on a device): their throughput at each count, the speed-up
over the fewest sessions and where the throughput stopped growing (``cryptoperf.scaling``).

22  sessions: throughput vs sessions — per operation, one row per configuration × count: ops/s
                                        with its 95 % interval, the speed-up, and the finding

Every figure is the run's analysis's (``Analysis.scaling``).
"""

from __future__ import annotations

from cryptoperf import scaling
from cryptoperf.report import text as fmt
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.store.stored_run import StoredRun

LEAD = ("Throughput at each number of concurrent sessions (threads, each with its own session): the geometric "
        "mean of the measured repetitions' ops/s with its 95 % interval, and the speed-up over the fewest. A "
        "device's throughput grows with sessions until its engines are busy; the peak is where it stopped "
        "growing among the counts measured (descriptive: counts whose intervals overlap may differ by noise).")


def rows(items: list[scaling.Scaling]) -> list[dict[str, str | bool]]:
    """The table rows of one operation's scalings: configuration, backend, sessions, ops/s with
    its interval, speed-up, and (on each configuration's first row) the finding."""
    out = []
    for s in items:
        for i, p in enumerate(s.points):
            out.append({"configuration": s.configuration, "backend": s.backend, "sessions": str(p.sessions),
                        "ops": fmt.fmt_estimate(p.ops_per_s), "speedup": f"{p.speedup:.2f}×",
                        "peak": p.sessions == s.peak.sessions, "finding": s.text() if i == 0 else "",
                        "first": i == 0})
    return out


@register(order=22)
def sessions(run: StoredRun) -> list[Section]:
    """"Throughput vs sessions": one table per operation with thread counts. Nothing without."""
    found = run.analysis.scaling
    if not found:
        return []
    tables = [{"operation": op, "rows": rows(items)} for op, items in scaling.by_operation(found).items()]
    html = fragment("sections/sessions.html.j2", lead=LEAD, tables=tables)
    md = LEAD + "\n\n" + "\n".join(
        f"**{t['operation']}**\n\n" + md_table(
            ["Configuration", "Backend", "Sessions", "ops/s (95 % CI)", "Speed-up", "Finding"],
            [[r["configuration"] if r["first"] else "", r["backend"] if r["first"] else "", r["sessions"],
              f"**{r['ops']}**" if r["peak"] else r["ops"], r["speedup"], r["finding"]] for r in t["rows"]],
            align="llrrrl") for t in tables)
    return [Section("sessions", "Throughput vs sessions", html, md)]
