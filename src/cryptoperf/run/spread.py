"""A job's slices on several Ray nodes (``[study] slices_on = "nodes"``, docs/ray.md "Slices on
several nodes"), so that horizontal scaling is measured and not bounded by one host's CPUs.

Which workloads spread, and how, the worker says in ``hello`` (its spec's ``spread``: the
count parameter, here ``slices``; what each part's request adds; the flag that merges the
parts): nothing here knows a workload's name. A repetition of a cell with k > 1 parts runs as k
sub-jobs, the j-th the cell's request with its index j and one start instant (wall clock, ns
since the Unix epoch) for all, each a Ray task on its own node; the block task then merges
their k results with its node's worker into the job's one result, which is stored and analysed
as a one-host job's is.

**Placement without deadlock.** A block with such repetitions reserves k nodes at once: a
``STRICT_SPREAD`` placement group of k bundles of one ``cryptoperf_slot`` each (Ray creates a
placement group whole or not at all, so two blocks never each hold half of what the other
needs). The block task takes half of bundle 0's slot, each sub-job half of its bundle's: the
k nodes measure nothing else while the block runs, and the block task never waits for a slot
it holds. Every wait has a timeout (the study's ``timeout_s`` plus the start margin).

**The start instant** is now plus a margin: ``START_MARGIN_S`` and twice the longest
readiness a sub-job of the same cell showed in this block (the first time:
``SETUP_S_PER_TARGET`` per target). A sub-job's readiness is the time from the moment it was
asked for to the end of its worker's setup, as its Ray task sees it: the task's start on its
node (a cold node starts a Ray worker process first), the node's hello, and the worker's own
setup. A sub-job whose setup ends more than 10 ms past the instant is not run (the worker says
so), rather than measured as a job whose slices did not start together; since nothing was
measured, the repetition is asked for again, once, with the margin grown from the readiness
just seen, and is invalid only if a slice is late again.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from typing import Any, Mapping, Sequence

from cryptoperf import cpumask
from cryptoperf.errors import CryptoperfError
from cryptoperf.model import FAILED, Outcome, Repetition, outcome_from_result
from cryptoperf.result import decode
from cryptoperf.schedule import Settings, run_request

#: Seconds between asking for the sub-jobs and their common start, beyond their expected setup.
START_MARGIN_S = 3.0
#: A first guess of a sub-job's setup (certificates, processes, probe), s per target of the job.
SETUP_S_PER_TARGET = 0.01
#: How many times a repetition whose sub-job was late for its start instant is asked for again.
LATE_RETRIES = 1
#: Seconds the block task waits for its sub-jobs beyond the study's timeout and the margin.
WAIT_EXTRA_S = 60.0
#: Seconds the merge of the sub-jobs' results may take.
MERGE_TIMEOUT_S = 120.0
#: Of the one slot in each bundle: the block task's share (bundle 0) and each sub-job's.
SLOT_SHARE = 0.5
NODES = "nodes"


def rule(rep: Repetition) -> Mapping[str, str] | None:
    """The spread rule of ``rep``'s workload (its hello's ``spread``), or None."""
    spec = rep.cell.spec
    return getattr(spec, "spread", None) if spec is not None else None


def parts(rep: Repetition) -> int:
    """How many sub-jobs ``rep`` runs as: its count parameter's value (the workload's default
    when not given); 1 for a calibration repetition or a workload that does not spread."""
    r = rule(rep)
    if r is None or rep.calibration:
        return 1
    value = rep.cell.worker_params().get(r["count_param"], (rep.cell.spec.defaults or {}).get(r["count_param"], 1))
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


def block_parts(reps: Sequence[Repetition], slices_on: str) -> int:
    """The nodes a block needs at once: the most sub-jobs one of its repetitions runs as, when
    ``slices_on`` is ``nodes``; 0 when none spreads (the block runs as any other)."""
    if slices_on != NODES:
        return 0
    k = max((parts(r) for r in reps), default=1)
    return k if k > 1 else 0


def check(study: Any, eligible: Mapping[tuple, Sequence[Any]], groups: Mapping[tuple, Sequence]) -> None:
    """Before anything runs: with ``slices_on = "nodes"``, not with every-node, some cell (of
    ``groups``: group → its cells) must spread, and every group's eligible nodes must number at least its cells' parts. Raises
    StudyError at ``slices_on`` (one line naming the cell, the parts and the nodes)."""
    if study.slices_on != NODES:
        return
    if study.every_node:
        raise study.error("study", 0, "slices_on", '"nodes" spreads a job over nodes; hosts = "every-node" runs it '
                          "whole on each node: give one or the other")
    from cryptoperf.model import Repetition as _Rep
    seen = False
    for group, members in groups.items():
        for cell in members:
            k = parts(_Rep(cell, 1))
            seen = seen or rule(_Rep(cell, 1)) is not None
            have = len(eligible.get(group, ()))
            if k > have:
                raise study.error("study", 0, "slices_on",
                                  f'"nodes" runs each of the {k} slices of {cell.op} in configuration '
                                  f"{cell.configuration!r} on its own node, but only {have} node(s) of the cluster may "
                                  "run it; add nodes with a cryptoperf_slot or lower its slices")
    if not seen:
        raise study.error("study", 0, "slices_on", '"nodes" applies to a job whose worker announces a spread (e.g. '
                          "fleet-job's slices); no operation of this study is one: remove it")


def placement_group(ray: Any, k: int, slot: str, labels: Mapping[str, str], resources: Sequence[str]) -> Any:
    """A ``STRICT_SPREAD`` placement group of ``k`` bundles, each one ``slot`` (and a sliver
    of each custom resource in ``resources``) on a node with ``labels``."""
    from ray.util.placement_group import placement_group as make
    bundle = {slot: 1.0, **{r: 0.001 for r in resources}}
    extra = {"bundle_label_selector": [dict(labels)] * k} if labels else {}
    return make([dict(bundle) for _ in range(k)], strategy="STRICT_SPREAD", **extra)


def in_bundle(pg: Any, index: int) -> Any:
    """The scheduling strategy that runs a task in bundle ``index`` of ``pg``."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    return PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=index)


def run_part(rep: Repetition, settings: Settings, index: int, asked_ns: int, start_at_ns: int,
             builds_needed: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """The Ray task of one sub-job (run on its node): the cell's request with this part's index
    and the start instant (ns since the Unix epoch; ``asked_ns``: when the orchestrator asked
    for it), in a fresh worker of this node's build; returns the result message with ``placed``
    (this node's id, IP address and host name) and ``ready_s`` (s from ``asked_ns`` to the end of
    the worker's setup; for a result without ``fleet.setup_ms``, to the result's arrival, which
    bounds it), or ``{"error": why}``."""
    import ray
    from cryptoperf.run.ray import node_facts
    from cryptoperf.run.worker import WorkerClient
    r = rule(rep)
    assert r is not None
    ctx = ray.get_runtime_context()
    placed = {"node_id": ctx.get_node_id(), "address": ray.util.get_node_ip_address(), "hostname": socket.gethostname()}
    try:
        facts = node_facts(builds_needed)
        if facts["error"]:
            return {"error": str(facts["error"]), "placed": placed}
        path, hello = facts["_workers"][rep.cell.build]
        request = run_request(rep, settings, hello.unmasked_vectors().get(rep.cell.backend))
        request["params"] = {**request["params"], r["index_param"]: index, r["start_param"]: start_at_ns}
        with WorkerClient(path, env={**cpumask.worker_env(rep.cell.cpu), **settings.env}) as w:
            w.hello()
            sent_ns = time.time_ns()
            raw = dict(w.run(request, timeout_s=timeout_s).raw)
    except CryptoperfError as e:
        return {"error": f"{type(e).__name__}: {e}", "placed": placed}
    setup_ms = _pointed(raw, r["setup_ms_pointer"])
    ready_ns = sent_ns + int(float(setup_ms) * 1e6) if isinstance(setup_ms, (int, float)) else time.time_ns()
    raw["placed"], raw["ready_s"] = placed, (ready_ns - asked_ns) / 1e9
    return raw


def _pointed(doc: Any, pointer: str) -> Any:
    """The value at JSON pointer ``pointer`` (RFC 6901, ``/fleet/setup_ms``) in ``doc``; None
    where the path does not lead."""
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc.get(part) if isinstance(doc, Mapping) else None
    return doc


def _targets(rep: Repetition) -> int:
    load = str(rep.cell.worker_params().get("load") or "")
    try:
        return int(load.split(":", 1)[1]) if ":" in load else 1000
    except ValueError:
        return 1000


def _failed(rep: Repetition, why: str, started: str) -> Outcome:
    from cryptoperf.run.local import utc_now
    o = Outcome(rep, FAILED, why)
    o.started_at, o.finished_at = started, utc_now()
    return o


def execute(rep: Repetition, settings: Settings, pg: Any, env: Mapping[str, str], builds_needed: Sequence[str],
            merger: Any, setups: dict[str, float]) -> Outcome:
    """Run ``rep`` as its sub-jobs, part j in bundle j of ``pg``, all starting at one instant;
    merge their results with the worker ``merger`` (this node's); return the job's outcome
    (failed, with the slice and why, when a sub-job failed, hung or the merge refused; invalid
    when a slice was late for the start instant on its last try). ``setups``: cell key → the
    longest sub-job readiness seen (s), updated here."""
    from cryptoperf.run.local import utc_now
    started = utc_now()
    for _ in range(LATE_RETRIES + 1):
        margin_s = START_MARGIN_S + 2 * setups.get(rep.cell.key, SETUP_S_PER_TARGET * _targets(rep))
        results = _ask(rep, settings, pg, env, builds_needed, margin_s)
        if isinstance(results, str):
            return _failed(rep, results, started)
        ready_s = max(float(res["ready_s"]) for res in results)
        setups[rep.cell.key] = max(setups.get(rep.cell.key, 0.0), ready_s)
        if ready_s <= margin_s or all(res.get("status") == "ok" for res in results):
            break  # on time (a slice late by more than the worker's tolerance is never "ok")
    outcome = _merge(rep, results, merger, started)
    outcome.started_at, outcome.finished_at = started, utc_now()
    return outcome


def _ask(rep: Repetition, settings: Settings, pg: Any, env: Mapping[str, str], builds_needed: Sequence[str],
         margin_s: float) -> list[dict[str, Any]] | str:
    """The k sub-jobs' results, asked for now to start ``margin_s`` s from now (part j in
    bundle j of ``pg``), or why they could not be had (one phrase: a timeout, a Ray task
    error, a sub-job's error with its slice and node)."""
    import ray
    from cryptoperf.run.ray import SLOT
    k = parts(rep)
    asked_ns = time.time_ns()
    start_at_ns = asked_ns + int(margin_s * 1e9)
    wait_s = settings.timeout_s + margin_s + WAIT_EXTRA_S
    task = ray.remote(run_part)
    refs = [task.options(num_cpus=0, resources={SLOT: SLOT_SHARE}, scheduling_strategy=in_bundle(pg, j), max_retries=0,
                         runtime_env={"env_vars": dict(env)}).remote(rep, settings, j, asked_ns, start_at_ns,
                                                                     builds_needed, settings.timeout_s + margin_s)
            for j in range(k)]
    ready, late = ray.wait(refs, num_returns=k, timeout=wait_s)
    if late:
        for ref in late:
            ray.cancel(ref, force=True)
        return f"timeout: slice {refs.index(late[0])}'s sub-job did not finish within {wait_s:.0f} s"
    try:
        results = ray.get(refs)
    except Exception as e:  # a Ray task error: the node or its worker process went away
        return f"a sub-job's Ray task failed: {' '.join(str(e).split())[:300]}"
    for j, res in enumerate(results):
        if "error" in res:
            return f"slice {j}'s sub-job on {res['placed']['hostname']} ({res['placed']['address']}): {res['error']}"
    return results


def _merge(rep: Repetition, results: list[dict[str, Any]], merger: Any, started: str) -> Outcome:
    """The job's outcome from its sub-jobs' ``results``, merged by the worker ``merger`` (the
    worker refuses parts that are not all ``ok``, naming the slice and why)."""
    r = rule(rep)
    assert r is not None
    text = "".join(json.dumps(res) + "\n" for res in results)
    try:
        done = subprocess.run([str(merger), r["merge_flag"]], input=text, capture_output=True, text=True,
                              timeout=MERGE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return _failed(rep, f"merging the sub-jobs' results: {e}", started)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        return _failed(rep, f"merging the sub-jobs' results: {last}", started)
    try:
        return outcome_from_result(rep, decode(json.loads(done.stdout)))
    except (ValueError, CryptoperfError) as e:
        return _failed(rep, f"the merged result is unreadable: {e}", started)
