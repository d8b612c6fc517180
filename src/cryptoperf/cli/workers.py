"""``cryptoperf backends`` and ``cryptoperf setup``: the worker's backends and operations, and the
worker builds ``pip install .`` does not make (e.g. ``openssl@3.6``)."""

from __future__ import annotations

import click

from cryptoperf import builds, paths, pkcs11, providerbuild, workerbuild
from cryptoperf.builds import find_worker
from cryptoperf.cli.app import cli, err_console, out_console
from cryptoperf.report import terminal
from cryptoperf.run.worker import fetch_hello


@cli.command()
@click.option("--no-detail", is_flag=True,
              help="Skip checking which backend supports which operation (faster).")
def backends(no_detail: bool) -> None:
    """List the workers' backends, library versions (and FIPS module versions), and which
    operations each supports: the Rust worker's, then each worker of its own backends (the Go
    worker, backend `go`, with its FIPS 140-3 module off and enforced)."""
    out = out_console()
    _print_worker(find_worker(), not no_detail)
    for name, spec in builds.BUILDS.items():
        if not spec.backends:
            continue
        available, where = builds.status(name)
        if available:
            _print_worker(where, not no_detail)
        else:
            out.print(f"worker build '{name}' (backend {', '.join(spec.backends)}) is unavailable: {where}",
                      markup=False, soft_wrap=True)
    _list_builds()


def _print_worker(path, detail: bool) -> None:
    """One worker binary's backends table and its operations (by backend with ``detail``, when
    the worker reports them)."""
    hello = fetch_hello(path, detail=detail)
    out = out_console()
    out.print(terminal.backends_table(hello))
    notes = terminal.Notes()
    support = terminal.support_table(hello, notes)
    if support is not None:
        out.print(support)
        notes.print(out)
    else:
        out.print("operations: " + ", ".join(hello.ops))


@cli.command()
@click.argument("names", nargs=-1, metavar="[BUILD]...")
@click.option("--list", "list_only", is_flag=True,
              help="List the worker builds, whether each is built and where (the default without BUILD).")
@click.option("--force", is_flag=True, help="Rebuild even when a usable build is cached.")
def setup(names: tuple[str, ...], list_only: bool, force: bool) -> None:
    """Build worker builds that `pip install .` does not make, once, and cache them.

    \b
    openssl@3.6   the worker with OpenSSL 3.6 built from source (openssl-src 300.6.x) and
                  linked statically into its openssl backend: about 5-10 minutes on 2 cores;
                  what `library = "openssl@3.6"` in a study needs (which builds it on first use).
    openssl-fips  OpenSSL's FIPS provider (fips.so) built from the OpenSSL 3.1.2 source
                  (openssl-src 300.1.3+3.1.2, sha256-checked against crates.io's index) with
                  enable-fips, installed with `openssl fipsinstall` (its self-tests): about 2-5
                  minutes; needs a C compiler, Perl and make. Goes to <data dir>/providers/.
    softhsm       a SoftHSM2 token for the pkcs11 backend (needs Debian's softhsm2): its
                  configuration, token and random user PIN (mode 0600) in <data dir>/softhsm/;
                  what a study with backend "pkcs11" uses (and makes on first use) unless
                  CRYPTOPERF_PKCS11_MODULE names another token (docs/offload.md).

    The worker builds need Rust's cargo (https://rustup.rs) and network access to crates.io. The binary goes to
    <data dir>/workers/<build>/ ($CRYPTOPERF_DATA_DIR, default: the user data directory), and is
    used only once it answers with the expected library version.
    """
    if list_only or not names:
        _list_builds()
        return
    others = (providerbuild.NAME, pkcs11.SETUP_NAME)
    for raw in names:
        if raw not in others:
            workerbuild.recipe(raw)  # every name checked before anything is built
    err, out = err_console(), out_console()
    for name in dict.fromkeys(n if n in others else builds.resolve(n) for n in names):
        if name == pkcs11.SETUP_NAME:
            line = pkcs11.setup_line(force)
        elif name == providerbuild.NAME:
            line = providerbuild.setup(force, err)
        else:
            line = workerbuild.setup(name, force, err)
        out.print(line, markup=False, soft_wrap=True)


def _list_builds() -> None:
    """Print every worker build: name, built or not (path or why not), what it is."""
    out = out_console()
    out.print(f"worker builds (cache: {paths.data_dir() / 'workers'}):", markup=False, soft_wrap=True)
    for b in workerbuild.states():
        label = b.name + (f" = {b.alias}" if b.alias else "")
        out.print(f"  {label:<26} {'built' if b.built else 'missing':<8} {b.description}", markup=False, soft_wrap=True)
        out.print(f"  {'':<26} {'':<8} {b.where}", markup=False, soft_wrap=True)
    record = providerbuild.installed()
    state = "built" if record else "missing"
    where = providerbuild.provider_dir() if record else f"not built yet: `cryptoperf setup {providerbuild.NAME}`"
    out.print(f"  {providerbuild.NAME:<26} {state:<8} OpenSSL {providerbuild.SOURCE.openssl_version} FIPS provider "
              "(for the fips build's openssl backend)", markup=False, soft_wrap=True)
    out.print(f"  {'':<26} {'':<8} {where}", markup=False, soft_wrap=True)
    made = (pkcs11.softhsm_dir() / "user.pin").exists()
    where = pkcs11.softhsm_dir() if made else f"not made yet: `cryptoperf setup {pkcs11.SETUP_NAME}` (or first use)"
    out.print(f"  {pkcs11.SETUP_NAME:<26} {'made' if made else 'missing':<8} SoftHSM2 token for the pkcs11 backend "
              "(software: docs/offload.md)", markup=False, soft_wrap=True)
    out.print(f"  {'':<26} {'':<8} {where}", markup=False, soft_wrap=True)
