"""``cryptoperf publish DIR``: the store as a static, self-contained website.

The site, every address in it relative to DIR, so it opens from ``file://`` and from any path
of any web server, with no server-side code and nothing fetched from the network:

- ``index.html`` — every run (newest first) with its study, start, status, host, CPU masks,
  library versions, cells and verdicts, filtered by study, host and library version in the page; links
  to the pages below;
- ``runs/<id>.html`` — the run's HTML report (``report.html``, the same as ``cryptoperf
  report``), with links back to the index, its study's trend and its comparison with the
  previous run;
- ``compare/<a>-<b>.html`` — for every study, each run ``b`` against the previous run ``a`` of
  the same study (``compare.compare_runs``);
- ``trend/<study>.html`` — per study, each operation's figure of merit across its runs in time
  order, with host changes marked (``report.site.trend_html``);
- ``.cryptoperf-site.json`` — the manifest: every file of the site with what it was made from.

Publishing again into DIR updates it: a page whose inputs did not change (the runs it shows,
its links, the cryptoperf version) and whose file is intact is kept as it is, the others are
rewritten, and the pages of runs no longer in the store are removed. DIR must be new, empty,
or a site cryptoperf published (its manifest lists every file in it): anything else is refused
before a file is written. Only the store's public reading API is used (``Store.runs`` and
``result_counts`` through ``stored.list_runs``, ``stored.load_run``), so any store works.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol
from urllib.parse import urlsplit, urlunsplit

from cryptoperf import __version__
from cryptoperf.store import stored_run as stored
from cryptoperf.compare import compare_runs
from cryptoperf.errors import CryptoperfError, StoreError, UsageError
from cryptoperf.report import html as report_html
from cryptoperf.report import site
from cryptoperf.report import text as fmt
from cryptoperf.report.text import verdict_counts
from cryptoperf.store.db import Store

#: The manifest's file name, in DIR.
MANIFEST = ".cryptoperf-site.json"
#: What the manifest's ``generator`` says; a manifest without it is not ours.
GENERATOR = "cryptoperf publish"
#: While pages are written, the manifest is brought up to date at most this often (seconds), so
#: that a publish stopped half-way is resumed without rendering again what it had written.
MANIFEST_EVERY_S = 10.0
#: The names of the site's pages (relative to DIR): a manifest listing anything else is not ours,
#: and nothing outside these names is ever removed.
_PAGE = re.compile(r"^(index\.html|runs/\d+\.html|compare/\d+-\d+\.html|trend/[A-Za-z0-9_][A-Za-z0-9_.-]*\.html)$")
#: Temporary files of a publish (written aside, then renamed into place): removed when found.
_TMP = re.compile(r"(^|/)\.[^/]+\.publish-\d+\.tmp$")


class Progress(Protocol):
    """What ``publish`` reports its progress to (``report.terminal.StepProgress`` on a
    terminal)."""

    def begin(self, description: str, total: int) -> None:
        """``total`` steps follow."""

    def step(self, what: str) -> None:
        """One step is done; ``what`` names it, e.g. ``run 7``."""

    def end(self) -> None:
        """The last step is done."""


@dataclass
class Site:
    """A published site.

    Attributes:
        directory: DIR; index: DIR/index.html.
        runs, compares, trends: pages of each kind in the site.
        written: pages (re)written by this publish, index included; kept: pages left as they
            were (unchanged inputs, intact file); removed: files of an earlier publish no longer
            in the site (runs gone from the store).
        skipped: runs without a page, each as ``run <id>: <why>`` (a format this cryptoperf
            cannot read, a run that cannot be rebuilt).
    """

    directory: Path
    index: Path
    runs: int = 0
    compares: int = 0
    trends: int = 0
    written: int = 0
    kept: int = 0
    removed: int = 0
    skipped: list[str] = field(default_factory=list)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _file_sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _files_in(directory: Path) -> list[str]:
    """Every file (or symlink, or anything not a directory) under ``directory``, as paths
    relative to it with '/' separators, sorted."""
    out = []
    for root, dirs, files in os.walk(directory):
        rel_root = Path(root).relative_to(directory)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            out.append((rel_root / name).as_posix())
    return sorted(out)


def read_manifest(directory: Path) -> dict[str, dict[str, str]]:
    """The files of the site already in ``directory`` (relative path → ``{"key", "sha256"}``),
    {} for a new or empty directory.

    Raises UsageError when ``directory`` is a file, or holds files that are not those of a site
    cryptoperf published there (no manifest, or files the manifest does not list), naming the
    first; StoreError when it cannot be read.
    """
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} is a file; give a directory for the site (new, empty, or one "
                         "`cryptoperf publish` made)")
    if not directory.exists():
        return {}
    try:
        files = _files_in(directory)
        manifest_text = (directory / MANIFEST).read_text(encoding="utf-8") if MANIFEST in files else None
    except OSError as e:
        raise StoreError(f"cannot read {directory}: {e.strerror or e}") from None
    known: dict[str, dict[str, str]] = {}
    if manifest_text is not None:
        try:
            doc = json.loads(manifest_text)
            ok = (isinstance(doc, dict) and doc.get("generator") == GENERATOR and isinstance(doc.get("files"), dict)
                  and all(_PAGE.match(str(k)) for k in doc["files"]))
        except ValueError:
            ok = False
        if not ok:
            raise UsageError(f"{directory / MANIFEST} is not the manifest of a site `cryptoperf publish` made; "
                             "publish into a new or empty directory")
        known = {str(k): dict(v) if isinstance(v, dict) else {} for k, v in doc["files"].items()}
    foreign = [f for f in files if f != MANIFEST and f not in known and not _TMP.search(f)]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise UsageError(f"{directory} holds files that are not part of a site `cryptoperf publish` made "
                         f"({foreign[0]}{more}); publish into a new or empty directory, or remove them")
    for f in files:
        if _TMP.search(f):  # left by an interrupted publish
            try:
                (directory / f).unlink()
            except OSError:
                pass
    return known


def _write(directory: Path, rel: str, text: str) -> str:
    """Write ``text`` (UTF-8) to ``directory/rel`` whole or not at all (written aside, then
    renamed over any earlier version); returns its sha256. Raises StoreError naming the path."""
    path = directory / rel
    tmp = path.with_name(f".{path.name}.publish-{os.getpid()}.tmp")
    data = text.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StoreError(f"cannot write {path}: {e.strerror or e}; publish into another directory") from None
    return hashlib.sha256(data).hexdigest()


def _write_manifest(directory: Path, files: dict[str, dict[str, str]], store: str) -> None:
    doc = {"generator": GENERATOR, "cryptoperf_version": __version__, "store": store,
           "published_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "files": dict(sorted(files.items()))}
    _write(directory, MANIFEST, json.dumps(doc, indent=1) + "\n")


def store_label(store: Store) -> str:
    """How the site names its store: a file's name (not its directory), or a database URL
    without its user name and password."""
    where = str(store.location)
    if "://" in where:
        parts = urlsplit(where)
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return Path(where).name or where


def _slugs(names: list[str]) -> dict[str, str]:
    """A file name stem per study name, unique, in the order given."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "study"
        slug, n = base, 2
        while slug.lower() in taken:
            slug, n = f"{base}-{n}", n + 1
        taken.add(slug.lower())
        out[name] = slug
    return out


def _run_rel(rid: int) -> str:
    return f"runs/{rid}.html"


def _compare_rel(a: int, b: int) -> str:
    return f"compare/{a}-{b}.html"


#: The series every ``speed`` run belongs to: its trend page and its comparisons with the
#: previous speed run, as a study's runs have theirs.
SPEED_SERIES = "speed runs"


def _study_name(e: dict[str, Any]) -> str | None:
    """The series of a run's trend page: its study's name, ``SPEED_SERIES`` for a speed run."""
    if e["kind"] == "speed":
        return SPEED_SERIES
    return str(e["study"]) if e["kind"] == "study" and e["study"] else None


class _Publisher:
    """One publish of a store into a directory: the manifest kept up to date while pages are
    written (``emit``), the runs' pages, the comparisons, the trends and the index, then the
    pages of runs no longer in the store removed."""

    def __init__(self, store: Store, directory: Path, entries: list[dict[str, Any]], progress: Progress | None):
        self.store, self.directory, self.progress = store, directory, progress
        self.old = read_manifest(directory)
        self.label = store_label(store)
        self.result = Site(directory=directory, index=directory / "index.html")
        self.run_key = {e["id"]: _digest(__version__, e["id"], e["started_at"], e["finished_at"], e["status"],
                                         e["format_version"], e["cells"], e["results"], e["ok"]) for e in entries}
        self.entries = entries
        # in time order, so that a run's page can name the previous run of its study when it is made
        self.readable = sorted((e for e in entries if e["supported"]), key=lambda e: (str(e["started_at"] or ""), e["id"]))
        self.slug = _slugs(list(dict.fromkeys(n for n in map(_study_name, self.readable) if n)))
        self.files: dict[str, dict[str, str]] = dict(self.old)
        self.new_files: dict[str, dict[str, str]] = {}
        self.saved = time.monotonic()
        self.runs: dict[int, stored.StoredRun] = {}
        self.studies: dict[str, list[int]] = {}  # study → the ids of its runs with a page, in time order
        self.previous: dict[int, int] = {}  # run → the previous run of its study with a page
        self.rows: dict[int, site.IndexRow] = {}

    def trend_rel(self, name: str) -> str:
        return f"trend/{self.slug[name]}.html"

    def step(self, what: str) -> None:
        if self.progress is not None:
            self.progress.step(what)

    def plan(self) -> int:
        """Write the provisional manifest: every file already there and every one about to be
        written (with no key, so a publish that stops half-way leaves a directory the next one
        accepts and redoes); returns the steps to come."""
        chains: dict[str, list[int]] = {}
        for e in self.readable:
            if _study_name(e) is not None:
                chains.setdefault(_study_name(e), []).append(e["id"])
        planned = ([_run_rel(e["id"]) for e in self.readable] + [self.trend_rel(n) for n in chains] + ["index.html"]
                   + [_compare_rel(ids[i - 1], ids[i]) for ids in chains.values() for i in range(1, len(ids))])
        for rel in planned:
            self.files.setdefault(rel, {"key": "", "sha256": ""})
        _write_manifest(self.directory, self.files, self.label)
        return len(self.readable) + sum(len(ids) - 1 for ids in chains.values()) + len(chains) + 1

    def emit(self, rel: str, key: str, render: Callable[[], str]) -> None:
        """Keep page ``rel`` when its ``key`` and file are unchanged, else write ``render()``."""
        before = self.old.get(rel) or {}
        if before.get("key") == key and before.get("sha256") and _file_sha(self.directory / rel) == before["sha256"]:
            self.new_files[rel] = before
            self.result.kept += 1
            return
        self.new_files[rel] = self.files[rel] = {"key": key, "sha256": _write(self.directory, rel, render())}
        self.result.written += 1
        if time.monotonic() - self.saved > MANIFEST_EVERY_S:  # a publish stopped later keeps these pages
            _write_manifest(self.directory, self.files, self.label)
            self.saved = time.monotonic()

    def run_pages(self) -> None:
        """Each readable run's report page and its index row (unreadable runs a row saying why)."""
        for e in self.entries:
            if not e["supported"]:
                self.rows[e["id"]] = site.IndexRow(
                    id=e["id"], kind=str(e["kind"]), study=str(e["study"] or ""),
                    started=str(e["started_at"] or ""), status=str(e["status"]), cells=int(e["cells"]),
                    host=site.host_label({"cpu_model": e["cpu_model"]}) if e["cpu_model"] else "",
                    problem=f"format {e['format_version']}: not supported")
        for e in self.readable:
            rid, name = e["id"], _study_name(e)
            row = site.IndexRow(id=rid, kind=str(e["kind"]), study=str(e["study"] or ""),
                                started=str(e["started_at"] or ""), status=str(e["status"]), cells=int(e["cells"]))
            try:
                run = stored.load_run(self.store, rid)
            except CryptoperfError as err:
                self.result.skipped.append(f"run {rid}: {err}")
                self.rows[rid] = dataclasses.replace(row, problem="could not be read")
                self.step(f"run {rid} (skipped)")
                continue
            links = [("../index.html", "All runs")]
            if name is not None:
                links.append(("../" + self.trend_rel(name), f"Trend of {name}"))
                if self.studies.get(name):
                    self.previous[rid] = self.studies[name][-1]
                    links.append(("../" + _compare_rel(self.previous[rid], rid),
                                  f"Compare with the previous run ({self.previous[rid]})"))
                self.studies.setdefault(name, []).append(rid)
            self.emit(_run_rel(rid), _digest("run", self.run_key[rid], links), lambda: report_html.render(run, links))
            # what the other pages need of the run: its summaries, analysis and host, not its outcomes
            self.runs[rid] = dataclasses.replace(run, outcomes=[])
            self.rows[rid] = dataclasses.replace(
                row, host=site.host_label(run.host), cpu_masks=fmt.mask_text(run.analysis.cpu_masks),
                libraries=tuple(site.library_versions(run)),
                cells=len(run.summaries), verdicts=verdict_counts(run.deltas) if run.deltas else "",
                page=_run_rel(rid), compare=_compare_rel(self.previous[rid], rid) if rid in self.previous else "",
                trend=self.trend_rel(name) if name is not None else "")
            self.result.runs += 1
            self.step(f"run {rid}")

    def comparisons_and_trends(self) -> list[site.TrendLink]:
        """Each run against the previous run of its study, then each study's trend page."""
        run_pages = {rid: "../" + _run_rel(rid) for rid in self.runs}
        compare_pages = {b: "../" + _compare_rel(a, b) for b, a in self.previous.items()}
        study_of = {rid: name for name, ids in self.studies.items() for rid in ids}
        for b, a in self.previous.items():
            name = study_of[b]
            links = [("../index.html", "All runs"), (f"../{_run_rel(a)}", f"Run {a}"), (f"../{_run_rel(b)}", f"Run {b}"),
                     ("../" + self.trend_rel(name), f"Trend of {name}")]
            self.emit(_compare_rel(a, b), _digest("compare", self.run_key[a], self.run_key[b], links),
                      lambda: site.compare_html(compare_runs(self.runs[a], self.runs[b]), links, run_pages))
            self.result.compares += 1
            self.step(f"run {b} vs run {a}")
        trends = []
        for name, ids in self.studies.items():
            members = [self.runs[i] for i in ids]
            links = [("../index.html", "All runs")]
            pages = {i: run_pages[i] for i in ids}
            comps = {i: compare_pages[i] for i in ids if i in compare_pages}
            self.emit(self.trend_rel(name), _digest("trend", [self.run_key[i] for i in ids], links),
                      lambda: site.trend_html(name, members, links, pages, comps))
            trends.append(site.TrendLink(name, self.trend_rel(name), len(members), len(site.trend_operations(members))))
            self.result.trends += 1
            self.step(f"trend of {name}")
        return trends

    def remove_stale(self) -> None:
        """Remove the pages the previous publish wrote and this one did not (runs no longer in
        the store), and the directories they leave empty; then write the final manifest."""
        directory = self.directory
        for rel in sorted(set(self.old) - set(self.new_files)):
            try:
                (directory / rel).unlink()
                self.result.removed += 1
            except FileNotFoundError:
                pass
            except OSError as e:
                raise StoreError(f"cannot remove {directory / rel}: {e.strerror or e}") from None
            parent = (directory / rel).parent
            while parent != directory:
                try:
                    parent.rmdir()  # only when empty
                except OSError:
                    break
                parent = parent.parent
        _write_manifest(directory, self.new_files, self.label)


def publish(store: Store, directory: str | Path, progress: Progress | None = None) -> Site:
    """Write (or update) the static website of ``store`` in ``directory`` (see the module's
    description); returns what was published.

    ``progress`` hears one step per run read (and its report rendered when needed), per
    comparison, per trend page and for the index. Raises StoreError when the store holds no
    runs or a file cannot be written, UsageError when ``directory`` is a file or holds files
    that are not a cryptoperf site's.
    """
    directory = Path(directory)
    read_manifest(directory)  # refuses a directory that is not ours before anything else
    entries = stored.list_runs(store)
    if not entries:
        raise StoreError(f"store {store_label(store)} holds no runs; run `cryptoperf study FILE` first "
                         "(or pass --store PATH)")
    pub = _Publisher(store, directory, entries, progress)
    for e in entries:
        if not e["supported"]:
            pub.result.skipped.append(f"run {e['id']}: format version {e['format_version']} is not supported by "
                                      "this cryptoperf")
    total = pub.plan()
    if progress is not None:
        progress.begin(f"publishing {len(entries)} runs into {directory}", total)
    try:
        pub.run_pages()
        trends = pub.comparisons_and_trends()
        index = site.index_html(list(pub.rows.values()), trends, pub.label)
        pub.emit("index.html", _digest("index", index), lambda: index)
        pub.step("index")
    finally:
        if progress is not None:
            progress.end()
    pub.remove_stale()
    return pub.result
