"""Make OpenSSL's FIPS provider from validated source: ``cryptoperf setup openssl-fips``.

Debian's OpenSSL ships no FIPS provider (``fips.so``), so ``fips = true`` on the ``openssl``
backend has nothing to load. This builds one, once, from the source of OpenSSL 3.1.2 — the
release of the FIPS-validated OpenSSL 3.1.2 provider (see docs/openssl-fips.md) — taken from
the crates.io package ``openssl-src`` 300.1.3+3.1.2 (its ``openssl/`` directory is the OpenSSL
source tree), checked against the sha256 (``cksum``) crates.io's index records for it:

    <data dir>/downloads/openssl-src-300.1.3+3.1.2.crate   the source, kept once verified
    <data dir>/target/openssl-fips-3.1.2/                  the build tree (removed after success)
    <data dir>/providers/openssl-fips-3.1.2/fips.so        the provider
    <data dir>/providers/openssl-fips-3.1.2/fipsmodule.cnf `openssl fipsinstall`'s output: the
                                                           module's MAC and self-test status
    <data dir>/providers/openssl-fips-3.1.2/openssl-fips.cnf  a config that includes it and
                                                           activates ``fips`` and ``base``
    <data dir>/providers/openssl-fips-3.1.2/build.json     what was built, from what, the
                                                           fipsinstall outcome, the host
    <data dir>/logs/openssl-fips-3.1.2.log                 every command's full output

The provider is built as its security policy asks: OpenSSL configured with ``enable-fips``,
then ``openssl fipsinstall`` run by the freshly built 3.1.2 ``openssl`` binary, whose
self-tests must pass (``INSTALL PASSED``) before the provider is declared made.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from cryptoperf import __version__, builds, hostinfo, paths
from cryptoperf.errors import SetupError, WorkerNotFound

#: The name ``cryptoperf setup`` knows the provider by.
NAME = "openssl-fips"
#: What a study's time estimate calls its first build.
WHAT = "OpenSSL's FIPS provider (built once)"
#: A first build's rough duration on 2 cores, s, for time estimates: the download, configure,
#: build and ``fipsinstall`` took 83-84 s on a quiet 2-vCPU AMD EPYC host (2026-11-26), 157 s
#: beside a cargo build and 197 s beside a parallel test suite (2026-11-28/29).
BUILD_SECONDS = 120.0


@dataclass(frozen=True)
class Source:
    """Where the provider's source comes from.

    Attributes:
        crate: the crates.io package (``openssl-src``) and version (``300.1.3+3.1.2``) whose
            ``openssl/`` directory is the OpenSSL source tree; openssl_version: the OpenSSL
            release in it (``3.1.2``).
        url: the ``.crate`` file (a gzipped tar); index_url: crates.io's sparse index entry
            (one JSON line per version) whose ``cksum`` is the file's sha256.
    """

    crate: str
    version: str
    openssl_version: str

    @property
    def url(self) -> str:
        return f"https://static.crates.io/crates/{self.crate}/{self.crate}-{self.version}.crate"

    @property
    def index_url(self) -> str:
        return f"https://index.crates.io/{self.crate[:2]}/{self.crate[2:4]}/{self.crate}"

    @property
    def file_name(self) -> str:
        return f"{self.crate}-{self.version}.crate"


SOURCE = Source("openssl-src", "300.1.3+3.1.2", "3.1.2")
#: Configure options: the FIPS provider, shared libraries, no test programs (3.1 has no
#: ``no-docs``; only the targets below are built, never the manual pages). The private prefix
#: is added by ``build``; nothing is installed there.
CONFIGURE = ("enable-fips", "no-tests", "shared")
#: The make targets: the generated headers first, then only the provider and the app that
#: installs it (``openssl fipsinstall``).
MAKE_STEPS = (("build_generated",), ("providers/fips.so", "apps/openssl"))
#: What the build needs on PATH, and for what.
TOOLS = {"cc": "a C compiler", "perl": "Perl (OpenSSL's Configure)", "make": "make"}
#: Download timeout per request (s).
TIMEOUT_S = 60.0


def provider_dir() -> Path:
    """Where the provider is installed: ``data_dir()/providers/openssl-fips-<version>``."""
    return paths.data_dir() / "providers" / f"openssl-fips-{SOURCE.openssl_version}"


def log_path() -> Path:
    """The log of the last build (every command's output)."""
    return paths.data_dir() / "logs" / f"openssl-fips-{SOURCE.openssl_version}.log"


def config_path(directory: Path | None = None) -> Path:
    """The OpenSSL config that loads the provider in ``directory`` (default ``provider_dir()``)."""
    return (directory or provider_dir()) / "openssl-fips.cnf"


def config_text(directory: Path) -> str:
    """An OpenSSL config that includes ``directory``'s ``fipsmodule.cnf`` (its ``fips_sect``:
    the module MAC and ``activate = 1``), activates the ``base`` provider (encoders, decoders)
    and makes ``fips=yes`` the default property query. ``OPENSSL_MODULES=directory`` (or
    ``OSSL_PROVIDER_set_default_search_path``) tells libcrypto where ``fips.so`` is."""
    return (f"# Written by cryptoperf setup {NAME}: load the OpenSSL {SOURCE.openssl_version} FIPS provider\n"
            f"# in {directory} (with OPENSSL_MODULES={directory}).\n"
            "config_diagnostics = 1\nopenssl_conf = openssl_init\n\n"
            f".include {directory / 'fipsmodule.cnf'}\n\n"
            "[openssl_init]\nproviders = provider_sect\nalg_section = algorithm_sect\n\n"
            "[provider_sect]\nfips = fips_sect\nbase = base_sect\n\n"
            "[base_sect]\nactivate = 1\n\n"
            "[algorithm_sect]\ndefault_properties = fips=yes\n")


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of the file at ``path``."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def installed() -> dict | None:
    """``build.json`` of the installed provider when ``fips.so``, ``fipsmodule.cnf`` and the
    config are all there and ``fips.so``'s sha256 is the one recorded; else None."""
    d = provider_dir()
    try:
        record = json.loads((d / "build.json").read_text(encoding="utf-8"))
        ok = (d / "fipsmodule.cnf").is_file() and config_path(d).is_file()
        return record if ok and record.get("module_sha256") == sha256_file(d / "fips.so") else None
    except (OSError, ValueError, AttributeError):
        return None


def _fetch(url: str) -> bytes:
    """The body at ``url``. Raises SetupError (one line) when it cannot be downloaded."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
            return r.read()
    except (urllib.error.URLError, OSError, ValueError) as e:
        why = getattr(e, "reason", None) or e
        raise SetupError(f"cannot download {url} ({why}): building the FIPS provider needs network "
                         f"access to crates.io; connect, then run `cryptoperf setup {NAME}`") from None


def index_checksum(source: Source = SOURCE) -> str:
    """The sha256 crates.io's index records for ``source``'s version (its ``cksum``). Raises
    SetupError when the index cannot be fetched or has no such version."""
    for line in _fetch(source.index_url).decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("vers") == source.version and isinstance(entry.get("cksum"), str):
            return entry["cksum"]
    raise SetupError(f"crates.io's index ({source.index_url}) lists no {source.crate} {source.version}; "
                     f"cannot verify the FIPS provider's source")


def download(source: Source = SOURCE) -> tuple[Path, str]:
    """(path, sha256) of ``source``'s crate in ``data_dir()/downloads``, downloaded unless a
    copy is there, and verified against the index's checksum either way. Raises SetupError on
    no network or a checksum mismatch (the bad file is removed)."""
    want = index_checksum(source)
    dest = paths.data_dir() / "downloads" / source.file_name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.is_file() or sha256_file(dest) != want:
        tmp = dest.with_suffix(".part")
        tmp.write_bytes(_fetch(source.url))
        os.replace(tmp, dest)
    got = sha256_file(dest)
    if got != want:
        dest.unlink(missing_ok=True)
        raise SetupError(f"checksum mismatch: {source.url} has sha256 {got}, but crates.io's index says "
                         f"{want}; the file was removed, nothing was built (rerun `cryptoperf setup {NAME}`)")
    return dest, got


def preflight() -> dict[str, str]:
    """Tool → path for ``TOOLS`` (``$CC`` counts as the compiler). Raises SetupError naming
    every missing one."""
    found = {t: shutil.which(os.environ.get("CC", "cc") if t == "cc" else t) for t in TOOLS}
    lacking = [TOOLS[t] for t, p in found.items() if p is None]
    if lacking:
        raise SetupError(f"building OpenSSL's FIPS provider needs {', '.join(TOOLS.values())}; this machine "
                         f"lacks {', '.join(lacking)}: install {'it' if len(lacking) == 1 else 'them'}, "
                         f"then run `cryptoperf setup {NAME}`")
    return found


def _run(cmd: list[str], log, what: str, cwd: Path, env: dict | None = None) -> str:
    """Run ``cmd`` in ``cwd``, its output appended to ``log``; returns the output. Raises
    SetupError naming ``what`` failed, its last output line and the log."""
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, encoding="utf-8", errors="replace")
    except OSError as e:
        raise SetupError(f"cannot run {cmd[0]} ({e}) for {what}") from None
    log.write(p.stdout)
    log.flush()
    if p.returncode != 0:
        last = next((l.strip() for l in reversed(p.stdout.splitlines()) if l.strip()), f"exit status {p.returncode}")
        raise SetupError(f"{what} failed: {last} (full output: {log.name})")
    return p.stdout


def fipsinstall(openssl: Path, module: Path, out: Path, log, libdir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """Run ``openssl fipsinstall -module MODULE -out OUT`` (the provider's self-tests) with the
    OpenSSL binary ``openssl`` (its shared libraries in ``libdir``), its output appended to
    ``log``; ``extra`` adds options (``-corrupt_desc SHA2 -corrupt_type KAT_Digest`` makes a
    self-test fail). Returns the outcome lines: each self-test (``SHA2 : (KAT_Digest) : Pass``),
    the provider's name/version, and ``INSTALL PASSED``. Raises SetupError — naming the failed
    self-test — unless it exits 0 saying ``INSTALL PASSED``; ``out`` is removed then."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENSSL_")}
    env.update(LD_LIBRARY_PATH=str(libdir), OPENSSL_CONF=os.devnull)
    cmd = [str(openssl), "fipsinstall", "-module", str(module), "-out", str(out), *extra]
    log.write("$ " + " ".join(cmd) + "\n")
    try:
        p = subprocess.run(cmd, cwd=libdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, encoding="utf-8", errors="replace")
    except OSError as e:
        raise SetupError(f"cannot run {openssl} fipsinstall ({e})") from None
    log.write(p.stdout)
    log.flush()
    lines = [l.strip() for l in p.stdout.splitlines()
             if " : (" in l or "INSTALL" in l or l.strip().startswith(("name:", "version:", "build:"))]
    if p.returncode != 0 or "INSTALL PASSED" not in lines:
        out.unlink(missing_ok=True)
        failed = [l for l in lines if l.endswith("Fail") or "INSTALL FAILED" in l] or [f"exit status {p.returncode}"]
        raise SetupError(f"the FIPS provider failed its self-tests in `openssl fipsinstall` ({'; '.join(failed)}); "
                         f"it was not installed (full output: {log.name})")
    return [" ".join(l.split()) for l in lines]


def _extract(crate: Path, into: Path) -> Path:
    """Unpack ``crate`` into ``into`` (emptied first); returns its OpenSSL source tree."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    try:
        with tarfile.open(crate, "r:gz") as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise SetupError(f"cannot unpack {crate} ({e}); remove it and rerun `cryptoperf setup {NAME}`") from None
    tree = into / f"{SOURCE.crate}-{SOURCE.version}" / "openssl"
    if not (tree / "Configure").is_file():
        raise SetupError(f"{crate} holds no OpenSSL source tree (no {tree.relative_to(into)}/Configure)")
    return tree


def build(console: Console) -> dict:
    """Download, verify, configure, compile and install the provider (see the module doc),
    saying each step on ``console``; returns the ``build.json`` record written. Raises
    SetupError (one line) for missing tools, no network, a checksum mismatch, a failed build
    or failed self-tests; nothing is installed then."""
    tools = preflight()
    say = lambda s: console.print(s, markup=False, soft_wrap=True)  # noqa: E731
    dest, work, log_file = provider_dir(), paths.data_dir() / "target" / f"openssl-fips-{SOURCE.openssl_version}", log_path()
    try:
        for d in (dest, log_file.parent):
            d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SetupError(f"cannot create {e.filename}: {e.strerror}; set {paths.DATA_DIR_ENV} to a writable directory") from None
    (dest / "build.json").unlink(missing_ok=True)
    say(f"downloading {SOURCE.url} (verified against {SOURCE.index_url})")
    crate, digest = download()
    started = time.monotonic()
    with open(log_file, "w", encoding="utf-8") as log:
        tree = _extract(crate, work / "src")
        objdir = work / "build"
        objdir.mkdir()
        configure = [*CONFIGURE, f"--prefix={work / 'prefix'}", f"--openssldir={work / 'prefix' / 'ssl'}", "--libdir=lib"]
        say(f"configuring OpenSSL {SOURCE.openssl_version}: {' '.join(CONFIGURE)} (log: {log_file})")
        _run([tools["perl"], str(tree / "Configure"), *configure], log, "OpenSSL's Configure", objdir)
        say("compiling libcrypto, the FIPS provider and the openssl app (a few minutes on 2 cores)")
        for targets in MAKE_STEPS:
            _run([tools["make"], "-j2", *targets], log, f"make {' '.join(targets)}", objdir)
        shutil.copy2(objdir / "providers" / "fips.so", dest / "fips.so")
        say("running `openssl fipsinstall` (the provider's self-tests)")
        outcome = fipsinstall(objdir / "apps" / "openssl", dest / "fips.so", dest / "fipsmodule.cnf", log, objdir)
        config_path(dest).write_text(config_text(dest), encoding="utf-8")
    seconds = time.monotonic() - started
    record = {"built": NAME, "what": f"OpenSSL {SOURCE.openssl_version} FIPS provider (fips.so) and its fipsmodule.cnf",
              "source": {"crate": SOURCE.crate, "version": SOURCE.version, "url": SOURCE.url, "sha256": digest,
                         "sha256_from": SOURCE.index_url, "openssl_version": SOURCE.openssl_version},
              "configure": configure, "make": [list(t) for t in MAKE_STEPS], "build_seconds": round(seconds, 1),
              "module": str(dest / "fips.so"), "module_sha256": sha256_file(dest / "fips.so"),
              "fipsmodule_cnf": str(dest / "fipsmodule.cnf"), "config": str(config_path(dest)),
              "fipsinstall": outcome, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cryptoperf_version": __version__, "host": hostinfo.fingerprint()}
    (dest / "build.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return record


def setup(force: bool, console: Console) -> str:
    """``cryptoperf setup openssl-fips``: build the provider unless it is installed (or
    ``force``). Returns the line to print. Raises SetupError as ``build`` does."""
    record = None if force else installed()
    if record is not None:
        return (f"{NAME} is already built (OpenSSL {record['source']['openssl_version']} FIPS provider, "
                f"fipsinstall: INSTALL PASSED): {provider_dir()} (--force rebuilds it)")
    record = build(console)
    m, s = divmod(int(round(record["build_seconds"])), 60)
    return (f"built {NAME} (OpenSSL {SOURCE.openssl_version} FIPS provider, self-tests passed) in "
            f"{m} min {s} s: {provider_dir()}")


#: The variable that tells the FIPS worker where the provider is (the worker's
#: ``fips::PROVIDER_ENV``); set in the FIPS build's worker processes only.
PROVIDER_ENV = "CRYPTOPERF_OPENSSL_FIPS_PROVIDER"


def worker_env(path: str | os.PathLike, env: dict[str, str] | None) -> dict[str, str]:
    """The environment for the worker binary ``path``, from ``env`` (default: this process's):
    for the FIPS build's binary (``builds.find_worker(FIPS)``), ``PROVIDER_ENV`` naming the
    installed provider's directory (unless the user set it); for any other binary, without
    ``PROVIDER_ENV``, so the default build's process is untouched."""
    out = dict(os.environ if env is None else env)
    try:
        fips_binary = Path(path).resolve() == builds.find_worker(builds.FIPS).resolve()
    except (WorkerNotFound, OSError):
        fips_binary = False
    if not fips_binary:
        out.pop(PROVIDER_ENV, None)
    elif PROVIDER_ENV not in out and installed() is not None:
        out[PROVIDER_ENV] = str(provider_dir())
    return out


def ready() -> bool:
    """True when a study needing the provider would not build it first: it is installed
    (``installed``) or ``PROVIDER_ENV`` names one."""
    return bool(os.environ.get(PROVIDER_ENV)) or installed() is not None


def ensure(who: str, console: Console) -> None:
    """Build the provider first when ``who`` (a study's FIPS configuration) needs the FIPS
    build and it is not installed, announcing it on ``console``. Raises SetupError as
    ``build`` does."""
    if ready():
        return
    console.print(f"{who} needs OpenSSL's FIPS provider, which is not built yet: `cryptoperf setup {NAME}`",
                  markup=False, soft_wrap=True)
    console.print(setup(False, console), markup=False, soft_wrap=True)
