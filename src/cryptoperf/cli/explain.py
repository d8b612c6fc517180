"""``cryptoperf explain``: why a configuration's operation costs more CPU than the reference's —
which functions (or libraries) take the difference, how much each, with intervals.
"""

from __future__ import annotations

import json

import click

from cryptoperf import __version__
from cryptoperf.cli.app import cli, err_console, out_console
from cryptoperf.errors import UsageError
from cryptoperf.explain import perf, profile
from cryptoperf.explain.pair import DEFAULT_BLOCKS, explain_pair
from cryptoperf.store import explanations
from cryptoperf.store import stored_run as stored
from cryptoperf.store.db import FORMAT_VERSION


def _cells(prepared, run, config: str, reference: str, op: str | None, backend: str | None,
           size_bytes: int | None = None):
    """The (reference, config) cells of operation ``op`` (a row label) on ``backend`` at
    ``size_bytes``, one pair, from the prepared study. Raises UsageError naming what is
    ambiguous or missing."""
    labels = sorted({c.label for c in prepared.cells if c.configuration == config})
    if not labels:
        names = sorted({c.configuration for c in prepared.cells})
        raise UsageError(f"run {run.id} has no configuration '{config}' (it has: {', '.join(names)})")
    if op is None:
        if len(labels) > 1:
            raise UsageError(f"configuration '{config}' has {len(labels)} operations; name one with --op "
                             f"({', '.join(labels)})")
        op = labels[0]
    pairs = []
    for c in prepared.cells:
        if (c.configuration == config and c.label == op and (backend is None or c.backend == backend)
                and (size_bytes is None or c.size_bytes == size_bytes)):
            ref = next((r for r in prepared.cells if r.configuration == reference and r.label == op
                        and r.backend == c.backend and r.size_bytes == c.size_bytes), None)
            if ref is not None:
                pairs.append((ref, c))
    if not pairs:
        raise UsageError(f"no operation '{op}' of configuration '{config}' with a reference in '{reference}'"
                         + (f" on {backend}" if backend else "") + (f" at {size_bytes} B" if size_bytes else "")
                         + f" (operations: {', '.join(labels)})")
    if len({c.backend for _, c in pairs}) > 1:
        raise UsageError(f"operation '{op}' runs on {len(pairs)} backends; name one with --backend "
                         f"({', '.join(sorted(c.backend for _, c in pairs))})")
    if len(pairs) > 1:
        raise UsageError(f"operation '{op}' runs at {len(pairs)} message sizes; name one with --size "
                         f"({', '.join(str(c.size_bytes) for _, c in pairs)})")
    ref, cell = pairs[0]
    if cell.server is not None or ref.server is not None:
        raise UsageError(f"'{op}' loads a server under test: explain profiles the worker's own process, "
                         "not another program's (profile the server with perf directly)")
    return ref, cell


@cli.command()
@click.argument("run_id", required=False, default="latest", metavar="[RUN_ID|latest]")
@click.option("--config", "config", default=None, metavar="CONFIG", help="The configuration to explain.")
@click.option("--reference", metavar="CONFIG", default=None,
              help="The configuration it is explained against (default: the study's baseline).")
@click.option("--op", "op", metavar="LABEL", default=None,
              help="The operation, as the run labels it (needed when the configuration has several).")
@click.option("--backend", metavar="NAME", default=None, help="The backend, when the operation runs on several.")
@click.option("--blocks", type=click.IntRange(2, 100), default=DEFAULT_BLOCKS, show_default=True,
              help="Profiled blocks (each runs both configurations once, in a random order).")
@click.option("--store", "store_path", type=click.Path(dir_okay=False), default=None, metavar="PATH|URL",
              help="Store to read the run from (default: the default store).")
@click.option("--extensions", is_flag=True,
              help="Instead: which CPU extension groups --op depends on on --backend, each masked alone "
                   "in a study of its own (verdicts, shares).")
@click.option("--size", "size_bytes", type=int, default=None, metavar="BYTES",
              help="The message size of a sized operation (needed when the run has several).")
@click.option("--json", "as_json", is_flag=True, help="Print the attribution as JSON.")
def explain(run_id: str, config: str | None, reference: str | None, op: str | None, backend: str | None,
            blocks: int, store_path: str | None, extensions: bool, size_bytes: int | None, as_json: bool) -> None:
    """Why CONFIG's operation costs more (or less) CPU than the reference's: the functions that
    take the difference, how much each, with intervals.

    Runs profiled blocks of the two cells of a stored study run — fresh worker processes under
    `perf record -e cpu-clock` (the kernel's software clock: it works in virtual machines),
    each block both configurations in a random order — and attributes each repetition's
    measured CPU per operation to functions by their samples (a stripped library's unnamed
    code to the library, under the public function it runs in), and per library. Per function: its CPU per operation in each configuration, the
    change with a paired 95 % interval across blocks, and its share of the total change. The
    profiled repetitions are separate from the study's: nothing they measure enters its
    figures; what sampling cost is said beside it. The explanation is kept with the run:
    `cryptoperf report RUN` shows it (tables, and a differential flame graph in HTML where
    inferno is installed), and `explain = true` in a study explains every decided comparison
    after its last block.

    With --extensions, no run is read: a study of --op on --backend runs now, the baseline
    with every extension against each CPU mask alone (those that clear something this CPU
    has) and against all of them together, and says which extension groups the operation
    depends on, by how much each alone (paired intervals, Bonferroni over the masks), each
    one's share of the slowdowns, and whether their costs add up; the run is stored as any
    study's.

    \b
    cryptoperf explain --config no-bignum --op rsa2048-sign
    cryptoperf explain 12 --config fips --reference default --op "handshake @ c=1" --json
    cryptoperf explain 7 --config aes-ni-off --op "aes-128-gcm seal" --size 16384 --backend openssl
    cryptoperf explain --extensions --op aes-128-gcm-seal --size 16384 --backend openssl
    """
    if extensions:
        return _extensions(op, backend, blocks, size_bytes, store_path, as_json)
    if config is None:
        raise UsageError("give the configuration to explain with --config (or --extensions with --op and --backend)")
    from cryptoperf.engine.prepare import prepare_study
    from cryptoperf.run.local import utc_now
    with stored.open_store(store_path) as store:
        run = stored.load_run(store, run_id)
        if run.study is None:
            raise UsageError(f"run {run.id} is a {run.meta.get('kind')} run; explain reads a study's run")
        reference = reference or run.study.baseline
        why = perf.unavailable()  # before anything is built or run
        if why is not None:
            raise perf.PerfUnavailable(why)
        console = err_console()
        prepared = prepare_study(run.study, console=console)
        ref, cell = _cells(prepared, run, config, reference, op, backend, size_bytes)
        workers = {name: path for name, (path, _) in prepared.workers.items()}
        profile.check_ready(ref, cell, workers)
        console.print(f"explaining run {run.id} (study {run.study.name}): {config} against {reference}")
        console.print(f"profiling {ref.label} on {ref.backend}: {blocks} blocks of 2 repetitions under perf "
                      f"({prepared.settings.warmup_s:g} s warm-up + {prepared.settings.seconds:g} s each)")
        doc, svg = explain_pair(run, ref, cell, workers, prepared.settings, blocks,
                                progress=lambda b, i, c: console.print(f"  block {b}: {c.configuration}",
                                                                       highlight=False))
        explanations.save(store, run.id, doc, utc_now(), svg)
    console.print(f"kept with run {run.id}: `cryptoperf report {run.id}` shows it"
                  + ("" if svg is not None else f" ({doc['flamegraph_missing']})"), highlight=False)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    from cryptoperf.report.explain import print_attribution
    print_attribution(out_console(), doc)


def _extensions(op: str | None, backend: str | None, blocks: int, size_bytes: int | None, store_path: str | None,
                as_json: bool) -> None:
    """``explain --extensions``: the extension groups ``op`` depends on, by a study of masks."""
    import tempfile
    from pathlib import Path

    from cryptoperf import builds, hostinfo
    from cryptoperf import study as study_mod
    from cryptoperf.engine.studyrun import run_study
    from cryptoperf.explain import extensions as ext
    from cryptoperf.run.worker import fetch_hello
    if op is None or backend is None:
        raise UsageError("--extensions needs the operation (--op, e.g. rsa2048-sign) and the backend (--backend)")
    hello = fetch_hello(builds.find_worker())
    announced = hello.raw.get("cpu_masks") or []
    flags = hostinfo.cpu_flags({f for m in announced for f in m.get("clears", [])})
    masks, skipped = ext.masks_to_try(announced, flags)
    if not masks:
        raise UsageError("no CPU mask of the worker clears an extension this CPU has: nothing to attribute")
    console = err_console()
    if skipped:
        console.print(f"left out (they clear nothing this CPU has): {', '.join(skipped)}")
    with tempfile.TemporaryDirectory(prefix="cryptoperf-extensions-") as tmp:
        path = Path(tmp) / f"extensions-{op}-{backend}.toml"
        path.write_text(ext.study_text(op, backend, masks, blocks, size_bytes))
        run = run_study(study_mod.load(path), store=store_path, out_dir=None, progress=True, reports=False,
                        console=console)
    rows = ext.rows(run.analysis.deltas, masks)
    level = next((d.latency.level for d in run.analysis.deltas if d.latency is not None), 0.95)
    inter = ext.interaction(run.analysis.summaries, ext.together(masks), level, run.analysis.settings.margin_pct)
    doc = {"format_version": FORMAT_VERSION, "kind": "explain-extensions", "cryptoperf_version": __version__,
           "run": run.id, "operation": op, "backend": backend, "left_out": skipped,
           "groups": [r.as_dict() for r in rows], "depends_on": [r.name for r in rows if r.kind == "slower"],
           "shared_flags": ext.shared_flags(rows),
           "interaction": None if inter is None else {**inter.as_dict(), "text": inter.text}}
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    from cryptoperf.report.explain import print_extensions
    print_extensions(out_console(), doc, rows)

