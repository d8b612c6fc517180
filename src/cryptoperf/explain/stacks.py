"""Call stacks of the profiled repetitions and the differential flame graph drawn from them.

perf records a call chain with every sample (``perf.wrapper``: ``--call-graph``); here they are
folded into one line per distinct stack (``process;caller;…;function count``) by inferno's
``inferno-collapse-perf``, scaled like the flat attribution (a stack's share of the samples ×
the window's CPU per operation), averaged over the profiled blocks on each side, and drawn by
``inferno-diff-folded`` + ``inferno-flamegraph`` (inferno: a Rust port of Brendan Gregg's
FlameGraph tools, https://github.com/jonhoo/inferno): frame widths are B's CPU per operation,
colours the change from A (red: more CPU in B, blue: less). A function that B no longer runs
has no width in B and so does not show; the table beside the graph has it.

inferno is optional: without it (``missing``) an explanation has its tables and no flame
graph, and says how to install it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

#: inferno's tools (``cargo install inferno``).
COLLAPSE, DIFF, DRAW = "inferno-collapse-perf", "inferno-diff-folded", "inferno-flamegraph"
INSTALL = "cargo install inferno"
#: Stack values are written to inferno in picoseconds per operation (it takes whole counts).
PS_PER_NS = 1000
#: Seconds any one inferno or ``perf script`` call may take.
TIMEOUT_S = 300


def missing() -> str | None:
    """Why no flame graph can be drawn here (inferno's tools not on PATH, with how to install
    them), or None."""
    absent = [t for t in (COLLAPSE, DIFF, DRAW) if shutil.which(t) is None]
    if absent:
        return f"no flame graph: {', '.join(absent)} not found (install inferno: `{INSTALL}`)"
    return None


def fold(script: str) -> Counter:
    """Samples per call stack (``"process;outer;…;leaf"`` → samples) of ``perf script``'s text
    ``script``, folded by ``inferno-collapse-perf``. Empty when inferno is missing or fails (the
    flame graph is then left out; the attribution does not depend on it)."""
    if missing() is not None or not script:
        return Counter()
    try:
        res = subprocess.run([COLLAPSE], input=script.encode(), capture_output=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return Counter()
    return parse_folded(res.stdout.decode(errors="replace")) if res.returncode == 0 else Counter()


def parse_folded(text: str) -> Counter:
    """Folded lines (``stack count``) → ``Counter`` of stack → count (lines without a count
    are skipped)."""
    out: Counter = Counter()
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            out[stack] += int(count)
    return out


def ns_per_op(stacks: Counter, window_ns_per_op: float) -> dict[str, float]:
    """Each stack's share of the samples × the window's CPU per operation, ns (they add up to
    ``window_ns_per_op``)."""
    total = sum(stacks.values())
    return {s: n / total * window_ns_per_op for s, n in stacks.items()} if total else {}


def mean(sides: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean over blocks of per-stack ns per operation (a stack absent in a block counts 0)."""
    out: dict[str, float] = {}
    for side in sides:
        for s, v in side.items():
            out[s] = out.get(s, 0.0) + v / len(sides)
    return out


def _write(path: Path, stacks: Mapping[str, float]) -> None:
    path.write_text("".join(f"{s} {round(v * PS_PER_NS)}\n" for s, v in sorted(stacks.items())
                            if round(v * PS_PER_NS) > 0))


def draw(a: Mapping[str, float], b: Mapping[str, float], title: str, subtitle: str, directory: Path) -> str | None:
    """The differential flame graph (SVG text) of B's stacks ``b`` against A's ``a`` (stack →
    ns per operation): widths B's, colours the change; None when inferno is missing, fails or
    there is nothing to draw."""
    if missing() is not None or not b:
        return None
    fa, fb = directory / "a.folded", directory / "b.folded"
    _write(fa, a)
    _write(fb, b)
    try:
        diff = subprocess.run([DIFF, str(fa), str(fb)], capture_output=True, timeout=TIMEOUT_S)
        if diff.returncode != 0 or not diff.stdout.strip():
            return None
        svg = subprocess.run([DRAW, "--title", title, "--subtitle", subtitle, "--countname", "ps per operation",
                              "--minwidth", "0.2", "--deterministic"],
                             input=diff.stdout, capture_output=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return svg.stdout.decode() if svg.returncode == 0 and svg.stdout.lstrip().startswith(b"<") else None
