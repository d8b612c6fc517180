"""`cryptoperf report` and the reports `cryptoperf study` writes, on stored runs made with the
fake worker: what each format holds, that the HTML is one self-contained file, and that
mistakes give one-line errors."""

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
from cryptoperf.cli import main

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


def _run_study(tmp: Path, spec: dict, reps: int = REPS) -> Made:
    wrapper = fake_worker_script(tmp / "fake-cryptoperf-worker")
    study = tmp / "t.toml"
    study.write_text(STUDY.format(reps=reps, timeout=5))
    store = tmp / "runs.sqlite"
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
        mp.setenv("CRYPTOPERF_WORKER", str(wrapper))
        mp.setenv("FAKE_WORKER_SPEC", json.dumps(spec))
        mp.chdir(tmp)
        code = main(["study", str(study), "--store", str(store), "--out", str(tmp / "out")])
    assert code == 0, buf.getvalue()
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


def test_study_writes_html_and_markdown_beside_its_json_and_says_where(made):
    assert made.html.is_file() and made.md.is_file()
    assert f"report: {made.html}  summary: {made.md}\n" in made.out  # one line, never wrapped


def test_html_has_the_summary_table_with_deltas_cis_and_verdicts(html):
    table = html[html.index('<table class="summary"'):]
    table = table[:table.index("</table>")]
    assert "Performance impact of each configuration" in html
    assert table.count('class="verdict"') == OPERATIONS * CONFIGS
    assert table.count(">baseline<") == OPERATIONS
    assert table.count("100.0 % slower") == OPERATIONS
    assert re.search(r"\+100\.0 %<div class=\"ci\">\[\+\d+\.\d, \+\d+\.\d\]</div>", table)


def test_html_has_one_latency_cdf_and_one_throughput_cpu_plot_per_operation(html):
    assert html.count('<svg class="plot latency-cdf"') == OPERATIONS
    assert html.count('data-plot="latency-cdf"') == OPERATIONS
    assert html.count('<svg class="plot throughput-cpu"') == OPERATIONS
    assert html.count('data-plot="throughput-cpu"') == OPERATIONS
    # the percentiles are marked and the configurations named in each latency plot
    cdf = html[html.index('<svg class="plot latency-cdf"'):]
    cdf = cdf[:cdf.index("</svg>")]
    for text in ("p50", "p90", "p99", "p99.9", ">A<", ">B<", "log scale"):
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
    assert "| Operation | Backend | Configuration | p50 | Δ latency (95 % CI) |" in md
    assert md.count("100.0 % slower") == OPERATIONS
    assert "| ops/s |" in md and "| CPU/op |" in md
    assert "cryptoperf study t.toml" in md
    assert "<svg" not in md


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
    for col in ("p50_ns", "p99_ns", "p999_ns", "ops_per_s", "bytes_per_s", "cpu_ns_per_op",
                "steal_pct", "wall_ns", "configuration", "op", "size_bytes", "repetition"):
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
    assert len(doc["runs"]) == OPERATIONS * CONFIGS * REPS
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
    m = _run_study(tmp_path, {"rep_factors": [1.0, 1.6, 0.6]})
    html, md = m.html.read_text(), m.md.read_text()
    assert '<section id="noise-warning" class="warning">' in html
    assert html.index('id="noise-warning"') < html.index('id="summary"')
    assert re.search(r'<td class="verdict">too noisy to tell \(CV \d+ %\)</td>', html)
    assert "> **Noise warning:**" in md


def test_failed_configuration_is_reported_not_fatal(tmp_path):
    m = _run_study(tmp_path, {"crash": ["B"]}, reps=2)
    html = m.html.read_text()
    assert "n/a" in html and "this configuration: failed" in html
    assert "not measured: failed" in html
    assert html.count('<svg class="plot latency-cdf"') == OPERATIONS


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
    from cryptoperf import stored
    from cryptoperf.report import html as report_html, markdown, sections
    from cryptoperf.store import Store
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


# ------------------------------------------------------------------------------------- errors

def test_report_of_a_missing_run_is_a_one_line_error(cli, made):
    res = cli("report", "99", "--store", made.store)
    assert_one_line_error(res, "no run 99", str(made.store), code=2)
    res = cli("report", "abc", "--store", made.store)
    assert_one_line_error(res, "run id must be a number or 'latest'", code=2)


def test_report_of_an_empty_or_missing_store_is_a_one_line_error(cli, tmp_path):
    from cryptoperf.store import Store
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
    assert_one_line_error(res, "cannot write the report", code=1)


def test_study_no_report_writes_only_json(cli, fake_worker, write_study, tmp_path):
    fake_worker()
    res = cli("study", write_study(TWO_CONFIG_STUDY.format(reps=2, timeout=5)), "--out",
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


def test_html_renders_offline_in_headless_chromium(made):
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed (pip install playwright, then "
               "python -m playwright install --with-deps chromium)")
    attempted: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = _chromium(p)
        try:
            context = browser.new_context(offline=True, java_script_enabled=False)
            context.route(re.compile(r"^(https?|wss?|ftp)://"),
                          lambda route: (attempted.append(route.request.url), route.abort()))
            page = context.new_page()
            page.on("request", lambda r: None if r.url.startswith("file:") else attempted.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(made.html.resolve().as_uri(), wait_until="load")
            plots = page.locator("svg.plot")
            assert plots.count() == 2 * OPERATIONS
            for kind in ("latency-cdf", "throughput-cpu"):
                assert page.locator(f"figure[data-plot={kind}] > svg.plot.{kind}").count() == OPERATIONS
            for i in range(plots.count()):
                box = plots.nth(i).bounding_box()
                assert box and box["width"] > 100 and box["height"] > 50, (i, box)
            # the plots draw: each has visible curves/bars, not an empty frame
            assert page.locator("svg.latency-cdf path").count() > 10
            summary = page.locator("#summary-table").bounding_box()
            assert summary and summary["width"] > 0 and summary["height"] > 0
        finally:
            browser.close()
    assert attempted == [], f"the report tried to load from the network: {attempted}"
    assert errors == []
