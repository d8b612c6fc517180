"""The HTML report at a glance, in headless Chromium: a report of every workload kind the fake
worker produces (primitives with a 24x outlier and disturbed repetitions, TLS handshakes at load
with five configurations decided by load level, storage at load levels, a fleet job), loaded at
1024 and 1440 px wide. Asserted at each width: the page never scrolls sideways (wide tables
scroll in their own box, but the answer's tables fit, their verdicts in view), no text of a plot lies outside its SVG, every configuration is named
in each legend of configurations, no legend covers a plot area, and the answer (the "Answer" section) comes before every plot.
Screenshots go to CRYPTOPERF_SCREENSHOTS (default: the test's temporary directory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stored_runs import DRIFT, run_study
from test_report import offline_page

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

WIDTHS = (1024, 1440)

PRIMITIVES = """\
[study]
name = "primitives"
baseline = "A"
backends = ["openssl"]
repetitions = 4
seconds = 0.01
warmup_s = 0
timeout_s = 5

[[configuration]]
name = "A"
hash = "sha256"

[[configuration]]
name = "B"
hash = "sha512"

[[configuration]]
name = "C-outlier"
hash = "sha384"

[[operation]]
label = "hash"
op = "{hash}"
sizes = [64, 1024]
"""

TLS = """\
[study]
name = "tls-handshake"
description = "TLS 1.3 handshakes at load: RSA-2048 (baseline) vs ECDSA P-256 vs RSA-4096 certificates, X25519 vs X25519MLKEM768"
baseline = "rsa2048-x25519"
backends = ["aws-lc"]
repetitions = 3
seconds = 0.05
warmup_s = 0
timeout_s = 10
verdict_on = "by_load"

[[configuration]]
name = "rsa2048-x25519"
description = "RSA-2048 certificate, X25519 key exchange (baseline)"
cert = "rsa2048"
group = "x25519"

[[configuration]]
name = "ecdsa-p256-x25519"
cert = "ecdsa-p256"
group = "x25519"

[[configuration]]
name = "rsa4096-x25519"
cert = "rsa4096"
group = "x25519"

[[configuration]]
name = "rsa2048-x25519mlkem768"
cert = "rsa2048"
group = "x25519mlkem768"

[[configuration]]
name = "ecdsa-p256-x25519mlkem768"
cert = "ecdsa-p256"
group = "x25519mlkem768"

[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { tls_version = "1.3", cert = "{cert}", group = "{group}", session = "full" }
loads = ["closed:1", "closed:4", "closed:16", "open:150"]
p99_bound_ms = 20
"""

STORAGE = """\
[study]
name = "storage"
baseline = "clear"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0
verdict_on = "by_load"
work_dir = "{work}"

[[configuration]]
name = "clear"
scheme = "clear"

[[configuration]]
name = "aes-256-xts"
scheme = "aes-256-xts"

[[operation]]
label = "random read, direct"
op = "storage"
params = {{ scheme = "{{scheme}}", pattern = "random", block_bytes = "64KiB", file_bytes = "8MiB", direct = true }}
loads = ["closed:1", "closed:4", "closed:16", "open:100MB/s/8"]
"""

FLEET = """\
[study]
name = "jobs"
baseline = "base"
backends = ["aws-lc"]
repetitions = 3
verdict_on = "by_load"
seed = 1

[[configuration]]
name = "base"
description = "the nightly configuration audit of every host of the fleet, over TLS with an RSA-2048 client certificate, as run today"
cert = "rsa2048"

[[configuration]]
name = "slow-connect"
description = "the same audit with an RSA-4096 client certificate, whose connection phase the fake slows"
cert = "rsa4096"

[[operation]]
label = "audit"
op = "fleet-job"
params = { job = "audit", cert = "{cert}" }
loads = ["targets:1", "targets:100", "targets:1000"]
"""

#: kind -> (study text, fake worker script, configurations)
KINDS = {
    "primitives": (PRIMITIVES, {"config_factor": {"B": 1.3, "C-outlier": 24.0}, "rep_factors": DRIFT,
                                "steal_pct": {"B#2": 30.0, "A#3": 40.0}, "steal_times": 1},
                   ["A", "B", "C-outlier"]),
    "tls-by-load": (TLS, {"latency_ns": {"tls-handshake": 2_000_000}, "rep_factors": DRIFT,
                          "config_factor": {"rsa4096-x25519": 3.0, "rsa2048-x25519mlkem768": 1.1,
                                            "ecdsa-p256-x25519": 0.7, "ecdsa-p256-x25519mlkem768": 0.8},
                          "steal_pct": {"rsa4096-x25519#2": 30.0, "ecdsa-p256-x25519#3": 25.0}},
                    ["rsa2048-x25519", "ecdsa-p256-x25519", "rsa4096-x25519", "rsa2048-x25519mlkem768",
                     "ecdsa-p256-x25519mlkem768"]),
    "storage": (STORAGE, {"noise_cv": 0.01}, ["clear", "aes-256-xts"]),
    "fleet-job": (FLEET, {"fleet_phase_factor": {"slow-connect": {"connect": 1.6}}, "noise_cv": 0.01},
                  ["base", "slow-connect"]),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def report(request, tmp_path_factory) -> tuple[str, Path, list[str]]:
    """(kind, the HTML report's path, the study's configurations) of a study run with the fake
    worker."""
    kind = request.param
    text, spec, configurations = KINDS[kind]
    d = tmp_path_factory.mktemp(kind)
    state = d / "state"
    state.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_WORKER_STATE", str(state))
        run_study(d / "study", d / "runs.sqlite", text.format(work=d / "work") if "{work}" in text else text, spec)
    (html,) = (d / "study" / "out").glob("*.html")
    return kind, html, configurations


#: Plots whose legend names something else than configurations: verdict kinds (forest), a job's
#: phases (fleet-timeline) and processes (fleet-cpu).
OTHER_LEGENDS = ("forest", "fleet-timeline", "fleet-cpu")

#: In the page: every problem a reader at this width would see, as text (empty: none).
_CHECK = """([configurations, OTHER_LEGENDS]) => {
  const out = [];
  const doc = document.scrollingElement;
  if (doc.scrollWidth > window.innerWidth)
    out.push(`page scrolls sideways: ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
  for (const svg of document.querySelectorAll('svg.plot')) {
    const box = svg.getBoundingClientRect();
    const right = Math.min(box.right, doc.clientWidth);
    if (box.right > doc.clientWidth + 0.5)
      out.push(`${svg.id}: the plot is wider than the page (${box.right} > ${doc.clientWidth})`);
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (!t.textContent.trim() || r.width === 0) continue;
      if (r.left < box.left - 0.5 || r.right > right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        out.push(`${svg.id}: text "${t.textContent.trim()}" at [${r.left.toFixed(0)}, ${r.right.toFixed(0)}] x `
                 + `[${r.top.toFixed(0)}, ${r.bottom.toFixed(0)}] outside the plot's [${box.left.toFixed(0)}, `
                 + `${right.toFixed(0)}] x [${box.top.toFixed(0)}, ${box.bottom.toFixed(0)}]`);
    }
    const areas = Array.from(svg.querySelectorAll('g[id*="-axes_"] > g[id*="-patch_"]:first-child'),
                             g => g.getBoundingClientRect());
    for (const legend of svg.querySelectorAll('g[id$="legend_1"]')) {
      const l = legend.getBoundingClientRect();
      for (const a of areas)
        if (Math.min(l.right, a.right) - Math.max(l.left, a.left) > 2 && Math.min(l.bottom, a.bottom) - Math.max(l.top, a.top) > 2)
          out.push(`${svg.id}: the legend covers the plot area`);
      if (OTHER_LEGENDS.some(k => svg.classList.contains(k))) continue;
      const words = Array.from(legend.querySelectorAll('text'), t => t.textContent.trim());
      for (const c of configurations)
        if (!words.some(w => w === c || w.startsWith(c + ' ')))
          out.push(`${svg.id}: the legend [${words.join(' | ')}] does not name ${c}`);
    }
  }
  const answer = document.querySelector('#answer');
  const first = document.querySelector('svg.plot');
  if (!answer) out.push('no answer section');
  else if (first && first.getBoundingClientRect().top < answer.getBoundingClientRect().top)
    out.push('a plot comes before the answer');
  return out;
}"""


#: The answer tables whose box scrolls sideways: their change and verdict columns would be out
#: of view.
_ANSWER_CUT = """() => [...document.querySelectorAll('.table-wrap')]
  .filter(w => w.querySelector('table.answer') && w.scrollWidth > w.clientWidth + 1)
  .map(w => w.querySelector('table.answer').id)"""


@pytest.mark.parametrize("width", WIDTHS)
def test_the_report_fits_the_window_and_names_every_configuration(report, width, tmp_path):
    kind, path, configurations = report
    shots = Path(os.environ.get("CRYPTOPERF_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with offline_page(path) as (page, attempted, errors):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(shots / f"{kind}-{width}.png"), full_page=True)
        problems = page.evaluate(_CHECK, [configurations, list(OTHER_LEGENDS)])
        legends = page.locator('svg.plot:not(.forest) g[id$="legend_1"]').count()
        cut = page.evaluate(_ANSWER_CUT)
    assert cut == [], f"{kind} at {width} px: the answer's columns scroll out of view in {cut}"
    assert problems == [], f"{kind} at {width} px:\n" + "\n".join(problems)
    assert legends > 0, f"{kind}: no plot has a legend of configurations"
    assert attempted == [] and errors == []
