"""`cryptoperf publish DIR`: the store as a static website, on runs made with the fake worker —
three runs of one study (the third on another host, with its sha256 slower), one of another
study and a `speed` run. The site opens offline in headless Chromium and a reader can follow
index → run → compare → trend; every link resolves inside the site; the index filters by
study, host and library version; publishing again updates the site and nothing else."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import sqlite3
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markupsafe import escape

from conftest import TWO_CONFIG_STUDY, assert_one_line_error, fake_worker_script
from cryptoperf.cli import main
from stored_runs import DRIFT, run_study

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

STUDY = TWO_CONFIG_STUDY.format(reps=3, timeout=5)
OTHER = STUDY.replace('name = "t"', 'name = "other"')
#: the third run of study t ran on this host (edited into the store)
NEW_HOST = {"hostname": "other-box", "cpu_model": "Other CPU 9000"}
#: run → p50 of sha256 (configuration A) scripted; sha512 (B) keeps the fake worker's 2024 ns
SHA256_NS = {1: 2024, 2: 2200, 3: 3036}
SITE_FILES = {"index.html", "runs/1.html", "runs/2.html", "runs/3.html", "runs/4.html", "runs/5.html",
              "compare/1-2.html", "compare/2-3.html", "trend/t.html", "trend/other.html",
              "trend/speed-runs.html", ".cryptoperf-site.json"}


@dataclass
class Published:
    """A store, the site published from it, and what `cryptoperf publish` printed."""

    store: Path
    site: Path
    out: str
    err: str


def _set_host(store: Path, run_id: int, **fields: str) -> None:
    """Edit fields of a stored run's host fingerprint (``library_version`` sets OpenSSL's)."""
    db = sqlite3.connect(store)
    host = json.loads(db.execute("SELECT host_json FROM runs WHERE id = ?", (run_id,)).fetchone()[0])
    version = fields.pop("library_version", None)
    host.update(fields)
    if version is not None:
        host["libraries"]["openssl"]["library_version"] = version
    db.execute("UPDATE runs SET host_json = ? WHERE id = ?", (json.dumps(host), run_id))
    db.commit()
    db.close()


def _publish(site: Path, store: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["publish", str(site), "--store", str(store), *args])
    return code, out.getvalue(), err.getvalue()


def _make_store(directory: Path) -> Path:
    store = directory / "runs.sqlite"
    for rid, ns in SHA256_NS.items():
        run_study(directory / f"t{rid}", store, STUDY, {"rep_factors": DRIFT, "latency_ns": {"sha256": ns}})
    run_study(directory / "other", store, OTHER, {"rep_factors": DRIFT})
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        mp.setenv("CRYPTOPERF_WORKER", str(fake_worker_script(directory / "fake-cryptoperf-worker")))
        mp.setenv("FAKE_WORKER_SPEC", "{}")
        code = main(["speed", "--backend", "openssl", "--op", "sha256", "--seconds", "0.01", "--warmup", "0",
                     "--store", str(store)])
    assert code == 0
    _set_host(store, 3, library_version="fake-2.0", **NEW_HOST)
    return store


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Published:
    directory = tmp_path_factory.mktemp("publish")
    store = _make_store(directory)
    site = directory / "site"
    code, out, err = _publish(site, store)
    assert code == 0, err
    return Published(store, site, out, err)


@pytest.fixture
def copy(published, tmp_path) -> Published:
    """A copy of the published store and site that a test may change."""
    store, site = tmp_path / "runs.sqlite", tmp_path / "site"
    shutil.copy(published.store, store)
    shutil.copytree(published.site, site)
    return Published(store, site, "", "")


def _files(site: Path) -> set[str]:
    return {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}


# --------------------------------------------------------------------------------- the files

def test_publish_writes_the_index_every_run_compare_and_trend_page_and_prints_the_index(published):
    assert _files(published.site) == SITE_FILES
    assert published.out == f"{published.site / 'index.html'}\n"
    assert "published 5 run reports, 2 comparisons and 3 trend pages (11 pages written" in published.err
    assert "[11/11] index" in published.err  # progress, one line per tenth of the steps off a terminal


class _Links(HTMLParser):
    """Every ``href`` and ``src`` of a page, and its element ids (``ids``; ``repeated`` those
    given twice: they would break the inline SVGs' clip paths)."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.ids: set[str] = set()
        self.repeated: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if "src" in a or (tag == "link" and "href" in a):
            self.srcs.append(a.get("src") or a["href"])
        if "id" in a:
            (self.repeated if a["id"] in self.ids else self.ids).add(a["id"])


def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _check_links(site: Path) -> int:
    """Assert that every page of ``site`` loads nothing, has unique element ids, and that each
    of its links is relative and leads to a file of the site (and to an element of it, for a
    link with a #fragment); returns the number of links checked."""
    checked = 0
    for page in sorted(site.rglob("*.html")):
        parsed = _parse(page)
        assert parsed.srcs == [], f"{page} loads {parsed.srcs}"
        assert not parsed.repeated, f"{page}: ids given twice: {sorted(parsed.repeated)[:5]}"
        for href in parsed.hrefs:
            parts = urlsplit(href)
            assert not parts.scheme and not parts.netloc and not href.startswith("/"), (page, href)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file(), f"{page.relative_to(site)}: {href} leads nowhere"
            assert site.resolve() in target.parents, (page, href)
            if parts.fragment:
                assert parts.fragment in _parse(target).ids, f"{page}: no #{parts.fragment} in {target}"
            checked += 1
    return checked


def test_every_link_of_the_site_is_relative_and_resolves_to_a_page_and_anchor_of_the_site(published):
    assert len(list(published.site.rglob("*.html"))) == len(SITE_FILES) - 1
    assert _check_links(published.site) > 50


def test_the_index_lists_every_run_with_its_host_libraries_verdicts_and_pages(published):
    page = (published.site / "index.html").read_text()
    rows = re.findall(r'<tr id="run-(\d+)"', page)
    assert rows == ["5", "4", "3", "2", "1"]  # newest first
    row3 = page[page.index('<tr id="run-3"'):]
    row3 = row3[:row3.index("</tr>")]
    for text in ("other-box (Other CPU 9000)", "openssl: OPENSSL fake-2.0", "1 faster",
                 'href="runs/3.html"', 'href="compare/2-3.html"', 'href="trend/t.html"'):
        assert text in row3, text
    row5 = page[page.index('<tr id="run-5"'):]
    row5 = row5[:row5.index("</tr>")]
    # a speed run has the trend of every speed run (the only one here: no comparison yet)
    assert "<td>speed</td>" in row5 and 'href="runs/5.html"' in row5 and 'href="trend/speed-runs.html"' in row5
    assert 'href="trend/other.html"' in page


def test_run_pages_are_the_run_reports_with_links_into_the_site(published):
    from cryptoperf.store import stored_run as stored
    from cryptoperf.report import html as report_html
    from cryptoperf.store.db import Store
    page = (published.site / "runs" / "2.html").read_text()
    links = [("../index.html", "All runs"), ("../trend/t.html", "Trend of t"),
             ("../compare/1-2.html", "Compare with the previous run (1)")]
    with Store(published.store) as st:
        run = stored.load_run(st, 2)
    assert page == report_html.render(run, links)
    assert 'id="site-links"' not in report_html.render(run)  # a stand-alone report has no site links


def test_compare_page_is_the_comparison_of_the_run_with_the_previous_run_of_its_study(published):
    from cryptoperf import compare
    from cryptoperf.store import stored_run as stored
    from cryptoperf.store.db import Store
    page = (published.site / "compare" / "2-3.html").read_text()
    with Store(published.store) as st:
        c = compare.compare_runs(stored.load_run(st, 2), stored.load_run(st, 3))
    assert [(d.configuration, d.verdict.kind) for d in c.deltas][0] == ("A", "slower")  # 2200 → 3036 ns
    for d in c.deltas:
        assert d.verdict.text in page
    assert re.search(r"<td>hostname</td><td>[^<]+</td><td>other-box</td>", page)
    assert page.count('<svg class="plot forest"') == 1 and str(escape(c.method)) in page


def test_trend_page_plots_each_operation_across_the_runs_with_its_interval_and_the_host_change(published):
    page = (published.site / "trend" / "t.html").read_text()
    assert page.count('<svg class="plot trend"') == 2  # hash 1 KiB on openssl, A and B
    # A's figure in each run: the geometric mean over its 3 blocks, whose drift is symmetric on
    # the log scale, is exactly the scripted latency
    a = page[page.index('id="op-openssl-hash-1024-A'):]
    a = a[:a.index("</table>")]
    for rid, text in ((1, "2.02 µs"), (2, "2.2 µs"), (3, "3.04 µs")):
        assert re.search(rf'>run {rid}</a></td>\s*<td>[^<]*</td><td class="num">{re.escape(text)}</td>', a), rid
    # one marker, between run 2 and run 3, naming the host change; the change listed in full
    assert re.findall(r'id="trend-op-openssl-hash-1024-A[^"]*-change-(\w+)-(\d+)"', page) == [("host", "1")]
    assert "new host: CPU model, hostname" in page
    changes = page[page.index('<ul class="changes"'):]
    changes = changes[:changes.index("</ul>")]
    assert "hostname" in changes and "other-box" in changes and "library openssl" in changes
    assert "fake-2.0" in changes


def test_host_changes_name_another_machine_apart_from_new_software():
    from cryptoperf.report.site import host_changes

    class Run:
        def __init__(self, rid, **host):
            self.id, self.host = rid, {"hostname": "a", "cpu_model": "X", "kernel": "Linux 6.1 #1",
                                       "libraries": {"openssl": {"library_version": "3.0"}},
                                       "checks": [{"name": "other load", "state": "ok", "value": "0 %"}], **host}

    runs = [Run(1), Run(2, kernel="Linux 6.8 #1"), Run(3, kernel="Linux 6.8 #1"),
            Run(4, kernel="Linux 6.8 #1", hostname="b",
                checks=[{"name": "other load", "state": "warning", "value": "60 %"}])]
    got = host_changes(runs)
    assert [(c.before, c.after, c.index, c.kind) for c in got] == [(1, 2, 1, "software"), (3, 4, 3, "host")]
    assert [d.field for d in got[0].differences] == ["kernel"]
    assert [d.field for d in got[1].differences] == ["hostname"]  # a check's reading is no change
    lib = host_changes([Run(1), Run(2, libraries={"openssl": {"library_version": "3.1"}})])
    assert lib[0].fields_for("openssl") == ["library openssl"] and lib[0].fields_for("aws-lc") == []


# ------------------------------------------------------------------------------ in a browser

def test_site_opens_offline_and_a_reader_follows_index_run_compare_trend(published):
    from test_report import offline_page
    with offline_page(published.site / "index.html") as (page, attempted, errors):
        assert page.locator("#runs tbody tr").count() == 5
        assert page.locator("#filters").is_hidden()  # no JavaScript: no filter, every run shown

        page.locator("#run-3 a.report").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/runs/3.html")
        assert page.locator("h1").inner_text() == "cryptoperf study report: t"
        _plots_drawn(page, minimum=3)

        page.get_by_role("link", name="Compare with the previous run (2)").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/compare/2-3.html")
        assert page.locator("h1").inner_text() == "Run 3 vs run 2: t"
        assert page.locator("#compare-table tbody tr").count() == 2
        assert "other-box" in page.locator("#host-differences").inner_text()
        _plots_drawn(page, minimum=1)

        page.get_by_role("link", name="Trend of t").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/trend/t.html")
        assert page.locator("figure[data-plot=trend] > svg.plot.trend").count() == 2
        assert page.locator("svg.plot.trend [id$='-change-host-1']").count() == 2
        _plots_drawn(page, minimum=2)

        page.get_by_role("link", name="All runs").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/index.html")
    assert attempted == [], f"the site tried to load from the network: {attempted}"
    assert errors == []


def _plots_drawn(page, minimum: int) -> None:
    """The page has at least ``minimum`` SVG plots, each laid out at a readable size."""
    plots = page.locator("svg.plot")
    assert plots.count() >= minimum
    for i in range(plots.count()):
        box = plots.nth(i).bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50, (page.url, i, box)


def test_index_filters_runs_by_study_host_and_library_version(published):
    from test_report import offline_page

    def shown(page) -> list[str]:
        rows = page.locator("#runs tbody tr")
        return [rows.nth(i).get_attribute("id") for i in range(rows.count()) if rows.nth(i).is_visible()]

    with offline_page(published.site / "index.html", javascript=True) as (page, attempted, errors):
        assert page.locator("#filters").is_visible()
        assert shown(page) == ["run-5", "run-4", "run-3", "run-2", "run-1"]
        assert page.locator("#filter-count").inner_text() == "5 of 5 runs shown"
        page.select_option("#filter-study", "t")
        assert shown(page) == ["run-3", "run-2", "run-1"]
        page.select_option("#filter-host", "other-box (Other CPU 9000)")
        assert shown(page) == ["run-3"]
        page.select_option("#filter-host", "")
        page.select_option("#filter-library", "openssl: OPENSSL fake-2.0")
        assert shown(page) == ["run-3"]
        page.select_option("#filter-study", "speed")
        assert shown(page) == [] and page.locator("#filter-count").inner_text() == "0 of 5 runs shown"
        page.select_option("#filter-library", "")
        assert shown(page) == ["run-5"]
    assert attempted == [] and errors == []


# ---------------------------------------------------------------------------- publishing again

def test_publishing_again_keeps_unchanged_pages_and_rewrites_a_tampered_one(copy):
    from cryptoperf import publish
    from cryptoperf.store import stored_run as stored
    before = {f: (copy.site / f).read_bytes() for f in _files(copy.site)}
    (copy.site / "runs" / "1.html").write_text("edited")
    with stored.open_store(copy.store) as st:
        site = publish.publish(st, copy.site)
    assert (site.written, site.kept, site.removed) == (1, 10, 0)
    assert {f: (copy.site / f).read_bytes() for f in _files(copy.site) if f != ".cryptoperf-site.json"} == \
        {f: b for f, b in before.items() if f != ".cryptoperf-site.json"}


def test_publishing_again_adds_a_new_run_and_removes_a_run_gone_from_the_store(copy, tmp_path):
    from cryptoperf import publish
    from cryptoperf.store import stored_run as stored
    run_study(tmp_path / "t4", copy.store, STUDY, {"rep_factors": DRIFT})  # run 6, study t
    db = sqlite3.connect(copy.store)
    db.execute("DELETE FROM results WHERE run_id = 4")
    db.execute("DELETE FROM runs WHERE id = 4")  # study other, its only run
    db.commit()
    db.close()
    with stored.open_store(copy.store) as st:
        site = publish.publish(st, copy.site)
    assert _files(copy.site) == SITE_FILES - {"runs/4.html", "trend/other.html"} | {"runs/6.html",
                                                                                   "compare/3-6.html"}
    # written: run 6, compare 3-6, the trend, the index; the other runs' pages and comparisons kept
    assert (site.written, site.kept, site.removed) == (4, 7, 2)
    assert '<a href="../compare/3-6.html">Compare with the previous run (3)</a>' in \
        (copy.site / "runs" / "6.html").read_text()
    assert (copy.site / "trend" / "t.html").read_text().count('<svg class="plot trend"') == 2
    manifest = json.loads((copy.site / ".cryptoperf-site.json").read_text())
    assert set(manifest["files"]) == _files(copy.site) - {".cryptoperf-site.json"}


def test_a_publish_that_stops_half_way_leaves_a_site_the_next_publish_completes(copy, monkeypatch):
    from cryptoperf import publish
    from cryptoperf.store import stored_run as stored
    from cryptoperf.report import site as site_pages
    shutil.rmtree(copy.site)

    def broken(*args, **kwargs):
        raise RuntimeError("stopped")

    with monkeypatch.context() as mp:
        mp.setattr(site_pages, "trend_html", broken)
        with stored.open_store(copy.store) as st, pytest.raises(RuntimeError):
            publish.publish(st, copy.site)
    assert "runs/1.html" in _files(copy.site) and "trend/t.html" not in _files(copy.site)
    with stored.open_store(copy.store) as st:
        site = publish.publish(st, copy.site)
    assert _files(copy.site) == SITE_FILES and site.kept + site.written == 11
    with stored.open_store(copy.store) as st:
        assert publish.publish(st, copy.site).written == 0


def test_runs_that_cannot_be_read_are_listed_without_a_page_and_left_out_of_comparisons(cli, copy):
    db = sqlite3.connect(copy.store)
    db.execute("UPDATE runs SET study_toml = '[study' WHERE id = 2")  # cannot be parsed any more
    db.execute("UPDATE runs SET format_version = 99 WHERE id = 5")  # from a newer cryptoperf
    db.commit()
    db.close()
    shutil.rmtree(copy.site)
    res = cli("publish", copy.site, "--store", copy.store)
    assert res.code == 0, res.err
    assert _files(copy.site) == SITE_FILES - {"runs/2.html", "runs/5.html", "compare/1-2.html",
                                              "compare/2-3.html", "trend/speed-runs.html"} | {"compare/1-3.html"}
    notes = [line for line in res.err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and notes[0].startswith("note: no page for run 5: format version 99")
    assert notes[1].startswith("note: no page for run 2: ")
    index = (copy.site / "index.html").read_text()
    assert "could not be read" in index and "format 99: not supported" in index
    assert "Compare with the previous run (1)" in (copy.site / "runs" / "3.html").read_text()
    assert _check_links(copy.site) > 20


# ------------------------------------------------------------------------------------ errors

def test_a_directory_with_other_files_is_refused_in_one_line_and_left_alone(cli, published, tmp_path):
    target = tmp_path / "docs"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    res = cli("publish", target, "--store", published.store)
    assert_one_line_error(res, str(target), "notes.txt", "not part of a site", code=2)
    assert _files(target) == {"notes.txt"}


def test_a_site_with_a_foreign_file_added_is_refused_in_one_line(cli, copy):
    (copy.site / "trend" / "extra.html").write_text("mine")
    res = cli("publish", copy.site, "--store", copy.store)
    assert_one_line_error(res, "trend/extra.html", code=2)
    (copy.site / "trend" / "extra.html").unlink()
    manifest = copy.site / ".cryptoperf-site.json"
    doc = json.loads(manifest.read_text())
    for text in ("{not json", json.dumps(dict(doc, files={**doc["files"], "../outside.html": {}}))):
        manifest.write_text(text)  # garbled, or naming a file outside the site: not ours
        res = cli("publish", copy.site, "--store", copy.store)
        assert_one_line_error(res, ".cryptoperf-site.json", "not the manifest", code=2)


def test_publish_errors_are_one_line(cli, published, tmp_path):
    a_file = tmp_path / "file.html"
    a_file.write_text("x")
    assert_one_line_error(cli("publish", a_file, "--store", published.store), "file.html", code=2)
    assert_one_line_error(cli("publish", tmp_path / "s", "--store", tmp_path / "none.sqlite"),
                          "no store at", code=1)
    from cryptoperf.store.db import Store
    Store(tmp_path / "empty.sqlite").close()
    assert_one_line_error(cli("publish", tmp_path / "s", "--store", tmp_path / "empty.sqlite"),
                          "holds no runs", code=1)
    assert not (tmp_path / "s").exists() or _files(tmp_path / "s") == set()
    res = cli("publish", "--help")
    assert res.code == 0 and "python -m http.server" in res.out
