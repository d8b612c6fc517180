"""`cryptoperf report` and the reports `cryptoperf study` writes, on stored runs made with the
fake worker: what each format holds (the forest plot of verdicts first in the HTML, the verdict
list in the Markdown, intervals at the adjusted level, batch-mean labels), that the HTML is one
self-contained file, that the Markdown draws no plot, and that mistakes give one-line errors."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import TWO_CONFIG_STUDY, assert_one_line_error, fake_worker_script
from cryptoperf import stats
from cryptoperf.cli import main

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

STUDY = TWO_CONFIG_STUDY.replace('sizes = [1024]\n', 'sizes = [1024]\n\n[[operation]]\nlabel = "kem"\n'
                                 'op = "ml-kem-768-encaps"\n')
REPS = 3
OPERATIONS = 2  # hash 1 KiB and kem, on one backend
CONFIGS = 2


@dataclass
class Made:
    """A study run with the fake worker: its directory, store, stdout and written files."""

    dir: Path
    store: Path
    out: str
    json: Path
    html: Path
    md: Path


def _run_study(tmp: Path, spec: dict, reps: int = REPS, args: tuple[str, ...] = (),
               env: dict[str, str] | None = None, code: int = 0) -> Made:
    """Run STUDY with the fake worker scripted by ``spec`` (extra command-line ``args``, extra
    environment ``env``) in ``tmp``; its reports are written to tmp/out. ``code``: the exit
    status expected (1 for a study that compares nothing, whose reports are still written)."""
    wrapper = fake_worker_script(tmp / "fake-cryptoperf-worker")
    study = tmp / "t.toml"
    study.write_text(STUDY.format(reps=reps, timeout=5))
    store = tmp / "runs.sqlite"
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
        mp.setenv("CRYPTOPERF_WORKER", str(wrapper))
        mp.setenv("FAKE_WORKER_SPEC", json.dumps(spec))
        for k, v in (env or {}).items():
            mp.setenv(k, v)
        mp.chdir(tmp)
        got = main(["study", str(study), "--store", str(store), "--out", str(tmp / "out"), *args])
    assert got == code, buf.getvalue()
    (doc,) = (tmp / "out").glob("t-*.json")
    return Made(tmp, store, buf.getvalue(), doc, doc.with_suffix(".html"), doc.with_suffix(".md"))


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Made:
    """A quiet study: B is 2x slower than A, repetitions drift by a few %."""
    return _run_study(tmp_path_factory.mktemp("study"),
                      {"config_factor": {"B": 2.0}, "rep_factors": [1.0, 1.02, 0.99]})


@pytest.fixture(scope="module")
def html(made) -> str:
    return made.html.read_text()


@pytest.fixture(scope="module")
def run(made):
    """The made study's StoredRun, loaded from its store."""
    from cryptoperf.store import stored_run as stored
    from cryptoperf.store.db import Store
    with Store(made.store) as st:
        return stored.load_run(st)


def _section(page: str, section_id: str) -> str:
    """The HTML of ``<section id=...>`` up to its end."""
    part = page[page.index(f'<section id="{section_id}"'):]
    return part[:part.index("</section>")]


def _md_section(md: str, title: str) -> str:
    """A Markdown section's body, from its ``## title`` to the next ``## ``."""
    part = md[md.index(f"## {title}\n"):]
    end = part.find("\n## ", 3)
    return part if end < 0 else part[:end]


def test_study_writes_html_and_markdown_beside_its_json_and_says_where(made):
    assert made.html.is_file() and made.md.is_file()
    assert f"report: {made.html}  summary: {made.md}\n" in made.out  # one line, never wrapped


def test_html_has_the_summary_table_with_deltas_intervals_blocks_and_verdicts(html, run):
    from cryptoperf.report.terminal import interval_header
    table = html[html.index('<table class="summary"'):]
    table = table[:table.index("</table>")]
    assert "Performance impact of each configuration" in html
    assert table.count('class="verdict"') == OPERATIONS * CONFIGS
    assert table.count(">baseline<") == OPERATIONS
    assert table.count("p50 latency 2.0× higher") == OPERATIONS  # a 2× increase reads as a factor
    assert re.search(r"2\.0×<div class=\"ci\">\[\d+\.\d, \d+\.\d\]×</div>", table)
    # the change the verdict is decided on (p50 latency here) is marked
    assert table.count('<td class="num change decided">2.0×') == OPERATIONS
    assert "Δ CPU per operation" not in table  # no verdict is decided on CPU time
    # the header states the per-interval level after the adjustment (2 comparisons: 97.5 %)
    assert run.analysis.comparisons == OPERATIONS * (CONFIGS - 1)
    assert run.analysis.level == pytest.approx(0.975)
    assert table.count(f'<div class="sub">{interval_header(run.analysis.level)}</div>') == 2
    assert interval_header(run.analysis.level) == "97.5 % CI"
    assert ">Blocks</th>" in table and table.count(f'<td class="num blocks">{REPS}</td>') == OPERATIONS
    # the method is described as it is: per-block paired ratios, geometric mean, t interval
    summary = _section(html, "summary")
    for text in ("randomised complete blocks", "geometric mean over blocks", "paired Student t interval",
                 "Bonferroni over 2 comparisons", "±2 % equivalence margin"):
        assert text in summary, text
    assert "bootstrap" not in summary and "ratio of medians" not in summary


def test_html_opens_with_the_forest_plot_of_every_comparison(html, run):
    sections = re.findall(r'<section id="([^"]+)"', html)
    assert sections[:2] == ["answer", "verdicts"]  # the answer's tables, then the forest plot
    answer = _section(html, "answer")
    assert '<svg' not in answer and answer.count('<table class="answer" id="answer-latency">') == 1
    # per operation the baseline's p50, then B's with its change and interval and the verdict
    assert answer.count('<tr class="verdict-baseline group-start">') == OPERATIONS
    assert answer.count('<td class="verdict" title="p50 latency 2.0× higher [') == OPERATIONS
    assert len(re.findall(r'<td class="num">2\.0× \[\d\.\d+, \d\.\d+\]</td>', answer)) == OPERATIONS
    assert ">Verdicts at a glance</h2>" in html
    assert html.count('<svg class="plot forest"') == 1  # one metric decided on: one plot
    assert html.index('<svg class="plot forest"') < html.index('<table class="summary"')
    forest = html[html.index('<svg class="plot forest"'):]
    forest = forest[:forest.index("</svg>")]
    # one dot (and one interval bar) per delta with an interval, coloured by its verdict
    with_interval = [d for d in run.deltas if d.latency is not None]
    assert len(with_interval) == OPERATIONS
    dots = re.findall(r'id="verdict-forest-latency-dot-(\w+)-(\d+)"', forest)
    assert dots == [("slower", "0"), ("slower", "1")]
    assert len(re.findall(r'id="verdict-forest-latency-interval-\d+"', forest)) == OPERATIONS
    # the equivalence band and the line at 0 are drawn; the axis is labelled in % change
    assert 'id="verdict-forest-latency-equivalence-band"' in forest and 'id="verdict-forest-latency-zero-line"' in forest
    assert ">0<" in forest and "+100 %" in forest and "log scale" in forest
    assert "±2 % equivalence band" in forest
    # rows grouped by operation, labelled "backend configuration", the verdict on the right
    assert "right: higher p50 latency (worse)" in forest  # which side is worse, named on the axis
    for text in (">hash 1 KiB<", ">kem<", ">openssl B<", ">p50 latency 2.0× higher ["):
        assert text in forest, text
    # the caption states the method: the level after adjustment and the multiplicity method
    caption = _section(html, "verdicts")
    assert f'<p class="method">{run.analysis.method}.</p>' in caption
    assert "each interval at 97.5 %" in run.analysis.method


def test_forest_plot_keeps_the_band_and_zero_line_over_a_huge_range():
    """A +1100 % row next to ±1 % rows: the axis spans the small ones (the 12× row is an
    arrowhead at its edge, said in the x label, so it does not squeeze them), the ±2 % band and
    the 0 line are drawn, and the ticks read as % changes without crowding."""
    from cryptoperf.report import plots
    rows = [plots.ForestRow("aws-lc masked [cpu no-aesni]", 12.0, 11.4, 12.7, "slower",
                            "1100.0 % slower [1040.0, 1170.0]"),
            plots.ForestRow("aws-lc B", 1.004, 0.995, 1.013, "equivalent", "equivalent within ±2 % [-0.5, +1.3]"),
            plots.ForestRow("openssl B", 0.97, 0.955, 0.985, "faster", "3.0 % faster [1.5, 4.5]"),
            plots.ForestRow("openssl C", 1.01, 0.96, 1.07, "inconclusive", "inconclusive [-4.0, +7.0] %")]
    svg = plots.forest_svg([plots.ForestGroup("sign 4 KiB", rows[:2]), plots.ForestGroup("hash 1 KiB", rows[2:])],
                           2.0, "f", "latency change vs baseline A", "ratio (log scale)")
    assert svg.startswith('<svg class="plot forest" id="f"')
    assert 'id="f-equivalence-band"' in svg and 'id="f-zero-line"' in svg
    assert re.findall(r'id="f-dot-(\w+)-\d+"', svg) == ["slower", "equivalent", "faster", "inconclusive"]
    assert "+1000 %" not in svg and ">0<" in svg and "beyond ×4 / ÷4, off the axis" in svg
    assert "1100.0 % slower [1040.0, 1170.0]" in svg
    # without small rows beside it, a large ratio keeps its log axis
    alone = plots.forest_svg([plots.ForestGroup("sign 4 KiB", rows[:1])], 2.0, "g", "t", "ratio (log scale)")
    assert "+1000 %" in alone and "off the axis" not in alone
    ticks = plots.ratio_ticks(0.9, 13.0, 2.0, 0.1)
    assert 1.0 in ticks and ticks == sorted(ticks)
    assert [plots.pct_label(r) for r in (1.0, 0.9, 2.0, 11.0, 1.005)] == ["0", "\u221210 %", "+100 %",
                                                                         "+1000 %", "+0.5 %"]


def test_batch_means_are_labelled_when_batch_is_over_one(made, html):
    # the fake worker calibrates to ceil(10 µs / latency) rounded up to a power of two:
    # hash 1 KiB (2024 ns) to 8, kem (1000 ns) to 16
    key = _section(html, "key-figures")
    assert ">batch</th>" in key
    assert "percentiles of 8- and 16-operation batch means" in key
    latency = _section(html, "latency")
    assert "8-operation batch means" in latency and "16-operation batch means" in latency
    assert ">A (8-op batch means)<" in latency and ">B (16-op batch means)<" in latency
    assert "8-op batch means" in _section(html, "summary")
    md = made.md.read_text()
    assert "p50 and p99 of those rows are percentiles of 8- and 16-operation batch means" in md


def test_no_batch_mean_labels_when_each_sample_is_one_operation(tmp_path):
    slow = {"sha256": 40_000, "sha512": 40_000, "ml-kem-768-encaps": 40_000}
    m = _run_study(tmp_path, {"latency_ns": slow, "config_factor": {"B": 1.5}})
    doc = json.loads(m.json.read_text())
    assert {c["batch"] for c in doc["cells"]} == {1}
    html, md = m.html.read_text(), m.md.read_text()
    assert "batch means" not in html and "batch means" not in md


def test_host_section_shows_the_clocksource_and_its_warning(made, run):
    import dataclasses
    from cryptoperf.report import html as report_html, markdown
    host = dict(run.host)
    host["checks"] = [c for c in host.get("checks") or [] if c.get("name") != "clocksource"] + [
        {"name": "clocksource", "state": "warning", "value": "hpet",
         "advice": "clock reads are slower than with tsc"}]
    other = dataclasses.replace(run, meta={**run.meta, "host": host})
    page = report_html.render(other)
    section = _section(page, "host")
    assert "<dt>clocksource</dt><dd>hpet (warning: clock reads are slower than with tsc)</dd>" in section
    assert '<tr class="state-warning"><td>clocksource</td><td>warning</td><td>hpet</td>' in section
    assert "- clocksource: hpet (warning: clock reads are slower than with tsc)" in markdown.render(other)
    # the real host's check is in the made run, whatever its state
    assert any(c.get("name") == "clocksource" for c in run.host["checks"])
    assert "<dt>clocksource</dt>" in _section(made.html.read_text(), "host")


def test_reproduce_names_the_margin_and_multiplicity_the_run_was_analysed_with(tmp_path, made):
    assert "--margin" not in _section(made.html.read_text(), "study")
    m = _run_study(tmp_path, {"config_factor": {"B": 2.0}}, args=("--margin", "5", "--no-multiplicity"))
    html, md = m.html.read_text(), m.md.read_text()
    section = _section(html, "study")
    assert "cryptoperf study t.toml --margin 5 --no-multiplicity" in section
    assert "equivalence margin ±5 % (the study file says ±2 %)" in section
    assert "no multiplicity adjustment (the study file asks for one)" in section
    assert "`cryptoperf study t.toml --margin 5 --no-multiplicity`" in md
    assert "equivalence margin ±5 %" in _md_section(md, "Verdicts at a glance")


def test_reports_use_the_current_verdict_words_only(made, html):
    md = made.md.read_text()
    for gone in ("no significant difference", "too noisy to tell", "bootstrap"):
        assert gone not in html.lower() and gone not in md.lower(), gone
    root = Path(__file__).resolve().parents[1] / "src" / "cryptoperf" / "report"
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".j2"):
            text = path.read_text().lower()
            for gone in ("no significant difference", "too noisy to tell", "design.md", "reference study"):
                assert gone not in text, (path.name, gone)


def test_html_has_one_latency_cdf_and_one_throughput_cpu_plot_per_operation(html):
    assert html.count('<svg class="plot latency-cdf"') == OPERATIONS
    assert html.count('data-plot="latency-cdf"') == OPERATIONS
    assert html.count('<svg class="plot throughput-cpu"') == OPERATIONS
    assert html.count('data-plot="throughput-cpu"') == OPERATIONS
    # the percentiles are marked and the configurations named in each latency plot
    cdf = html[html.index('<svg class="plot latency-cdf"'):]
    cdf = cdf[:cdf.index("</svg>")]
    for text in ("p50", "p90", "p99", "p99.9", ">A (", ">B (", "log scale"):
        assert text in cdf, text


def test_html_has_the_host_the_noise_table_and_the_study_file(html, made):
    host = html[html.index('<section id="host"'):]
    host = host[:host.index("</section>")]
    for text in ("CPU", "crypto flags", "kernel", "hypervisor", "fake-1.0", "Host checks",
                 "Noise across repetitions", "steal"):
        assert text in host, text
    assert "cryptoperf study t.toml" in html
    assert "[[configuration]]" in html and 'hash = &#34;sha512&#34;' in html
    assert "noise-warning" not in html  # a quiet run has no noise warning


def test_html_is_self_contained_with_unique_ids(html):
    lower = html.lower()
    assert "<script" not in lower and "<link" not in lower and "@import" not in lower
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", lower)
    assert not re.search(r"url\(\s*['\"]?https?:", lower)
    ids = Counter(re.findall(r'\sid="([^"]+)"', html))
    assert not [i for i, n in ids.items() if n > 1], "duplicate ids break inline SVG clip paths"


def test_markdown_has_the_summary_table_and_key_figures(made):
    md = made.md.read_text()
    assert md.startswith("# cryptoperf study report: t")
    assert "## Performance impact of each configuration" in md and "## Key figures" in md
    assert ("| Operation | Backend | Configuration | p50 | Δ latency (97.5 % CI) | "
            "Δ throughput (97.5 % CI) | Blocks | Verdict | Note |") in md
    # the verdict list, the table and the "Why" section's row
    assert md.count("p50 latency 2.0× higher") == 3 * OPERATIONS
    assert md.count("| **2.0× [") == OPERATIONS  # the change decided on, in bold
    assert "| ops/s |" in md and "| process CPU/op |" in md and "| batch |" in md
    assert "cryptoperf study t.toml" in md
    assert "<svg" not in md


def test_markdown_opens_with_the_verdict_list_and_the_method(made, run):
    md = made.md.read_text()
    titles = re.findall(r"^## (.+)$", md, flags=re.M)
    assert titles[:2] == ["Answer", "Verdicts at a glance"]
    answer = _md_section(md, "Answer")
    assert "**Latency**" in answer and answer.count("| **slower** |") == OPERATIONS
    verdicts = _md_section(md, "Verdicts at a glance")
    items = re.findall(r"^- (.+)$", verdicts, flags=re.M)
    assert len(items) == OPERATIONS, items
    for item, op in zip(items, ("hash 1 KiB", "kem")):
        assert re.fullmatch(rf"{op} on openssl, B: p50 latency 2\.0× higher \[\d+\.\d, \d+\.\d\]", item), item
    assert "1 slower" not in verdicts and "2 slower" in verdicts
    assert f"Method: {run.analysis.method}." in verdicts
    assert "Bonferroni over 2 comparisons" in run.analysis.method


def test_markdown_is_rendered_without_drawing_a_plot(made, run, monkeypatch):
    from cryptoperf.report import markdown, plots

    def no_plot(*args, **kwargs):
        raise AssertionError("the Markdown report drew a plot")

    for name in ("_figure", "forest_svg", "latency_cdf_svg", "throughput_cpu_svg"):
        monkeypatch.setattr(plots, name, no_plot)
    assert markdown.render(run) == made.md.read_text()


def _report(made: Made, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.chdir(made.dir)
        code = main(["report", *args, "--store", str(made.store)])
    return code, out.getvalue(), err.getvalue()


def test_csv_has_one_row_per_configuration_operation_and_repetition(made, tmp_path):
    code, out, err = _report(made, "latest", "--format", "csv", "-o", str(tmp_path / "r.csv"))
    assert code == 0, err
    assert out.strip() == str(tmp_path / "r.csv")
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(rows) == OPERATIONS * CONFIGS * REPS
    for col in ("p50_ns", "p99_ns", "p999_ns", "ops_per_s", "bytes_per_s", "process_cpu_ns_per_op",
                "steal_pct", "wall_ns", "configuration", "op", "size_bytes", "block", "position",
                "superseded", "disturbed"):
        assert col in rows[0], col
    assert {r["status"] for r in rows} == {"ok"}
    assert Counter((r["configuration"], r["label"]) for r in rows) == {
        (c, l): REPS for c in ("A", "B") for l in ("hash", "kem")}
    a = next(r for r in rows if r["configuration"] == "A" and r["label"] == "hash")
    assert float(a["ops_per_s"]) == pytest.approx(1e9 / float(a["p50_ns"]), rel=0.01)


def test_json_is_the_study_document_rebuilt_from_the_store(made):
    code, out, err = _report(made, "1", "--format", "json", "-o", "-")
    assert code == 0, err
    doc = json.loads(out)
    original = json.loads(made.json.read_text())
    assert doc["kind"] == "study" and doc["format_version"] == original["format_version"]
    assert len([r for r in doc["repetitions"] if r["block"] > 0]) == OPERATIONS * CONFIGS * REPS
    assert doc["analysis"] == original["analysis"]
    assert [d["latency"] for d in doc["deltas"]] == [d["latency"] for d in original["deltas"]]
    assert doc["store"]["run_id"] == 1


def test_report_writes_html_by_default_under_the_results_directory(made):
    code, out, err = _report(made)
    assert code == 0, err
    path = Path(out.strip())
    assert path.suffix == ".html" and path.parent.name == "cryptoperf-results"
    assert (made.dir / path if not path.is_absolute() else path).read_text() == made.html.read_text()


def test_markdown_report_to_stdout(made):
    code, out, _ = _report(made, "--format", "md", "-o", "-")
    assert code == 0 and out == made.md.read_text()


def test_noisy_study_shows_a_noise_warning(tmp_path):
    # every block drifts by its own factor: each cell's CV is far over 10 %, yet the drift is
    # shared by both configurations of a block, so the paired comparison still decides
    m = _run_study(tmp_path, {"rep_factors": [1.0, 1.6, 0.6]})
    html, md = m.html.read_text(), m.md.read_text()
    assert '<section id="noise-warning" class="warning">' in html
    # counted in one line under the answer, listed at the end behind a <details> element
    assert html.index('id="noise-line"') < html.index('id="verdicts"') < html.index('id="summary"')
    assert html.index('id="study"') < html.index('id="noise-warning"')
    assert re.search(r'To weigh: \d+ cells over the CV threshold — <a href="#noise-warning">', html)
    assert '<details class="noise">' in _section(html, "noise-warning")
    assert re.search(r"^To weigh: \d+ cells over the CV threshold \(details in the last section\)\.$", md, re.M)
    assert re.findall(r"^## (.+)$", md, flags=re.M)[-1] == "Noise warning"
    warning = _section(html, "noise-warning")
    assert "Variation above the CV threshold of 10 %" in warning
    assert re.search(r"hash 1 KiB on openssl, A: CV of p50 \d+\.\d %, CV of ops/s \d+\.\d % "
                     r"\(threshold 10 %\)", warning)
    assert re.search(r'<td class="note">noisy: CV \d+ %</td>', html)
    assert "> **Noise warning:**" in md
    assert "equivalent within ±2 %" in _md_section(md, "Verdicts at a glance")


def test_inconclusive_verdicts_say_how_many_blocks_would_decide_them(tmp_path):
    m = _run_study(tmp_path, {"config_factor": {"B": 1.01}, "noise_cv": 0.05})
    html, md = m.html.read_text(), m.md.read_text()
    doc = json.loads(m.json.read_text())
    kinds = [d["verdict"]["kind"] for d in doc["deltas"]]
    assert kinds == ["inconclusive"] * OPERATIONS, kinds
    # an inconclusive verdict is not a noise problem: a notice, not a warning
    assert '<section id="noise-warning" class="notice">' in html
    notice = _section(html, "noise-warning")
    assert "Undecided comparisons" in notice and "not an error" in notice
    found = re.findall(r"about (\d+) blocks would decide it \(predictive probability 80 %\)|more than 10000 blocks would be needed",
                       notice)
    assert len(found) == OPERATIONS
    for d in doc["deltas"]:
        needed = d["verdict"]["blocks_needed"]
        if needed is not None:
            assert stats.hint_text(needed) in notice
    assert "## Undecided comparisons" in md and "would decide it (predictive probability" in md
    # and the forest plot colours them as inconclusive
    assert len(re.findall(r'id="verdict-forest-latency-dot-inconclusive-\d+"', html)) == OPERATIONS


def test_disturbed_repetitions_and_their_re_runs_are_listed(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    # B's block 2 reports 30 % steal twice: the first attempt is superseded by a re-run, which
    # is disturbed too and is analysed, flagged
    m = _run_study(tmp_path, {"config_factor": {"B": 2.0}, "steal_pct": {"B#2": 30}, "steal_times": 2},
                   env={"FAKE_WORKER_STATE": str(state)})
    html, md = m.html.read_text(), m.md.read_text()
    warning = _section(html, "noise-warning")
    assert "Repetitions run again" in warning and "Disturbed repetitions, analysed" in warning
    for op in ("hash 1 KiB", "kem"):
        assert f"{op} on openssl, B, block 2: steal 30.0 % &gt; 10 %; run again" in warning
        assert f"{op} on openssl, B, block 2: steal 30.0 % &gt; 10 %</li>" in warning
    assert "> **Noise warning:**" in md
    assert "1 disturbed repetition" in _section(html, "summary")


def test_failed_configuration_is_reported_not_fatal(tmp_path):
    m = _run_study(tmp_path, {"crash": ["B"]}, code=1)  # reports written, but nothing compared
    html, md = m.html.read_text(), m.md.read_text()
    assert "n/a" in html and "this configuration: failed" in html
    assert "not measured: failed" in html
    assert html.count('<svg class="plot latency-cdf"') == OPERATIONS
    # no comparison has an interval: no forest plot, the comparisons listed with their reason
    verdicts = _section(html, "verdicts")
    assert '<svg class="plot forest"' not in verdicts and "Not plotted (no interval)" in verdicts
    assert verdicts.count("<li>") == OPERATIONS
    assert re.search(r"<li>hash 1 KiB on openssl, B: n/a: this configuration: failed", verdicts)
    assert re.search(r"^- kem on openssl, B: n/a: this configuration: failed", md, flags=re.M)


def test_report_of_a_speed_run(cli, fake_worker, tmp_path):
    fake_worker()
    res = cli("speed", "--backend", "openssl", "--backend", "ring", "--op", "sha256", "--op",
              "x25519-derive", "--seconds", "0.01", "--warmup", "0")
    assert res.code == 0, res.err
    res = cli("report", "--store", tmp_path / "runs.sqlite", "-o", tmp_path / "s.html")
    assert res.code == 0, res.err
    html = (tmp_path / "s.html").read_text()
    assert html.count('<svg class="plot latency-cdf"') == 2  # one per operation, backends overlaid
    assert 'id="summary"' not in html and "cryptoperf speed" in html
    res = cli("report", "--store", tmp_path / "runs.sqlite", "--format", "csv", "-o", "-")
    assert len(res.out.strip().splitlines()) == 1 + 4


def test_sections_come_from_the_registry(made, monkeypatch):
    from cryptoperf.store import stored_run as stored
    from cryptoperf.report import html as report_html, markdown, sections
    from cryptoperf.store.db import Store
    monkeypatch.setattr(sections, "_REGISTRY", [r for r in sections.builders()])

    @sections.register(order=35)
    def extra(run):
        return [sections.Section("extra", "Extra <workload>", "<p>phase timeline</p>", "extra md")]

    with Store(made.store) as st:
        run = stored.load_run(st)
    page = report_html.render(run)
    assert page.index('id="latency"') < page.index('id="extra"') < page.index('id="throughput-cpu"')
    assert "Extra &lt;workload&gt;" in page and "<p>phase timeline</p>" in page
    assert "## Extra <workload>\n\nextra md" in markdown.render(run)


def test_a_section_body_given_as_a_function_is_rendered_only_for_html(made, monkeypatch):
    from cryptoperf.store import stored_run as stored
    from cryptoperf.report import html as report_html, markdown, sections
    from cryptoperf.store.db import Store
    monkeypatch.setattr(sections, "_REGISTRY", [r for r in sections.builders()])
    calls = []

    @sections.register(order=35)
    def lazy(run):
        return [sections.Section("lazy", "Lazy", lambda: calls.append(1) or "<p>drawn</p>", "lazy md")]

    with Store(made.store) as st:
        run = stored.load_run(st)
    assert "lazy md" in markdown.render(run) and calls == []
    assert "<p>drawn</p>" in report_html.render(run) and calls == [1]


# ------------------------------------------------------------------------------------- errors

def test_report_of_a_missing_run_is_a_one_line_error(cli, made):
    res = cli("report", "99", "--store", made.store)
    assert_one_line_error(res, "no run 99", str(made.store), code=2)
    res = cli("report", "abc", "--store", made.store)
    assert_one_line_error(res, "run id must be a number, 'latest'", code=2)


def test_report_of_an_empty_or_missing_store_is_a_one_line_error(cli, tmp_path):
    from cryptoperf.store.db import Store
    with Store(tmp_path / "empty.sqlite"):
        pass
    res = cli("report", "--store", tmp_path / "empty.sqlite")
    assert_one_line_error(res, "holds no runs", code=1)
    res = cli("report", "--store", tmp_path / "none.sqlite")
    assert_one_line_error(res, "no store at", code=1)
    assert not (tmp_path / "none.sqlite").exists()


def test_report_of_a_future_format_version_is_refused(cli, made, tmp_path):
    copy = tmp_path / "future.sqlite"
    copy.write_bytes(made.store.read_bytes())
    db = sqlite3.connect(copy)
    db.execute("UPDATE runs SET format_version = 99")
    db.commit()
    db.close()
    res = cli("report", "--store", copy)
    assert_one_line_error(res, "format version 99", "not supported", code=1)


def test_report_to_an_unwritable_path_is_a_one_line_error(cli, made, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = cli("report", "--store", made.store, "-o", blocker / "r.html")
    assert_one_line_error(res, "cannot write", str(blocker), code=1)


def test_study_no_report_writes_only_json(cli, fake_worker, write_study, tmp_path):
    fake_worker()
    res = cli("study", write_study(TWO_CONFIG_STUDY.format(reps=3, timeout=5)), "--out",
              tmp_path / "o", "--no-report")
    assert res.code == 0, res.err
    assert [p.suffix for p in (tmp_path / "o").iterdir()] == [".json"]
    assert "report:" not in res.out


# ------------------------------------------------------------------------- in a real browser

def _chromium(p):
    """Playwright's own Chromium, else a system one (Debian's `chromium` package works);
    skips the test, saying why, when there is none."""
    import os
    import shutil
    try:
        return p.chromium.launch()
    except Exception as e:  # playwright raises its own Error when the browser is not installed
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    for exe in (os.environ.get("CRYPTOPERF_TEST_CHROMIUM"), shutil.which("chromium"),
                shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if exe:
            try:
                return p.chromium.launch(executable_path=exe)
            except Exception:
                continue
    pytest.skip(f"no Chromium for playwright ({first}); install it with "
                "`python -m playwright install --with-deps chromium`")


@contextlib.contextmanager
def offline_page(path: Path, javascript: bool = False):
    """A page of headless Chromium with JavaScript off (on with ``javascript``, for a page whose
    inline script is under test) and the network refused, opened on the file ``path``; yields
    (page, attempted, errors): the network addresses the page (or any page it navigates to)
    tried to reach and its console errors, both to be asserted empty after the ``with``. Skips,
    saying why, without playwright or a Chromium."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed (pip install playwright, then "
               "python -m playwright install --with-deps chromium)")
    attempted: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = _chromium(p)
        try:
            context = browser.new_context(offline=True, java_script_enabled=javascript)
            context.route(re.compile(r"^(https?|wss?|ftp)://"),
                          lambda route: (attempted.append(route.request.url), route.abort()))
            page = context.new_page()
            page.on("request", lambda r: None if r.url.startswith("file:") else attempted.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(Path(path).resolve().as_uri(), wait_until="load")
            yield page, attempted, errors
        finally:
            browser.close()


def test_html_renders_offline_in_headless_chromium(made):
    with offline_page(made.html) as (page, attempted, errors):
        plots = page.locator("svg.plot")
        assert plots.count() == 2 * OPERATIONS + 1
        assert page.locator("figure[data-plot=forest] > svg.plot.forest").count() == 1
        for kind in ("latency-cdf", "throughput-cpu"):
            assert page.locator(f"figure[data-plot={kind}] > svg.plot.{kind}").count() == OPERATIONS
        for i in range(plots.count()):
            box = plots.nth(i).bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50, (i, box)
        # the plots draw: each has visible curves/bars, not an empty frame
        assert page.locator("svg.latency-cdf path").count() > 10
        # the forest plot comes before the summary table on the page
        forest = page.locator("svg.plot.forest").bounding_box()
        assert forest and forest["y"] < page.locator("#summary-table").bounding_box()["y"]
        summary = page.locator("#summary-table").bounding_box()
        assert summary and summary["width"] > 0 and summary["height"] > 0
    assert attempted == [], f"the report tried to load from the network: {attempted}"
    assert errors == []


def test_markdown_carries_the_study_file(made, run):
    """A summary pasted into a ticket must be enough to rerun the study: the file is in it."""
    assert "```toml\n" + run.study.text.rstrip() + "\n```" in made.md.read_text()
