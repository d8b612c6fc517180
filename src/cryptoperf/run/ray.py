"""Execute a study's repetitions as Ray tasks on the nodes of a Ray cluster (``--executor ray``).

Ray does the placing, the queueing and the retrying; this module says what a task is and what
it needs:

- **A task is one randomised block**: every configuration of one cell (a group, in
  ``schedule``'s words) in one block, in the block's order — or, at calibration, one
  calibration repetition of each of the group's cells. It runs whole on one node, so a paired
  comparison never pairs repetitions from two machines; inside it, ``run.local.execute`` runs
  the repetitions one at a time, each in a fresh worker process, as on one machine (the
  disturbance re-run included).
- **Measurements do not compete**: every task asks for one unit of the custom resource
  ``cryptoperf_slot``; a node offering one runs one block at a time. ``cryptoperf`` gives a
  local Ray instance it starts itself one; the nodes of an existing cluster are started with
  ``--resources='{"cryptoperf_slot": 1}'`` (docs/ray.md).
- **Placement**: a study's ``hosts`` selectors become the task's ``label_selector`` (node
  labels) and ``resources`` (custom resources); with ``hosts = "every-node"`` each block is
  submitted once per eligible node, pinned there (``NodeAffinitySchedulingStrategy``), and
  numbered apart per node (block b on the i-th of n nodes is block (b − 1)·n + i + 1), so the
  analysis pairs only repetitions of one node; each result carries its node's fingerprint.
- **Streaming**: a task puts each finished repetition on a ``ray.util.queue.Queue`` at once
  and the driver stores it at once, so nothing a node finished is lost with the node.
- **Faults**: Ray retries a block whose worker process or node died (``max_retries``), on
  any eligible node. The driver sees the new attempt start; the outcomes the lost attempt had
  already delivered are kept in the store, superseded (``model.RETRIED``), and the block runs
  whole again. A block Ray gives up on, or whose every eligible node has left, is marked
  failed with the reason; every other block goes on.
- **Slices on several nodes** (``slices_on = "nodes"``): a block whose jobs spread runs on as
  many nodes as its jobs have slices, reserved together; ``run.spread`` says how.
- **Same versions everywhere**: before anything is stored, a task on each eligible node
  reports its cryptoperf version and its worker builds' ``hello`` (version, build); a node
  that differs from the driver is refused with one line naming it. Every block task checks
  again, for a node that joined later.

Ray is an optional dependency (``pip install .[ray]``): nothing imports this module unless
``--executor ray`` is given, and it imports Ray only when an executor starts.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import cryptoperf
from cryptoperf import PROTOCOL_VERSION, builds, hostinfo, schedule
from cryptoperf.errors import (CryptoperfError, NodeMismatch, RayError, RayNotInstalled, UsageError,
                               WorkerError)
from cryptoperf.model import CALIBRATION_BLOCK, FAILED, RETRIED, Outcome, Repetition
from cryptoperf.run import disturbance, local, spread
from cryptoperf.run.local import Progress, Workers
from cryptoperf.schedule import Settings
from cryptoperf.study import HostSelector, Study

#: The custom resource of which every block task takes one: a node offering 1 runs one block
#: at a time, so that measurements on it never compete.
SLOT = "cryptoperf_slot"
#: How many times Ray runs a block again after its worker process or node died.
MAX_BLOCK_RETRIES = 2
#: Environment variables the driver passes to its tasks: every ``CRYPTOPERF_*`` one (which
#: worker binaries to use, the data directory), as the driver sees them.
FORWARDED_PREFIX = "CRYPTOPERF_"
#: Seconds to wait for a TCP connection to ``--address`` before calling it unreachable.
CONNECT_TIMEOUT_S = 5.0
#: Seconds a node may take to answer the version check (a worker's hello per build).
CHECK_TIMEOUT_S = 120.0
#: How often (s) the driver collects streamed outcomes while blocks run.
POLL_S = 0.2
#: How often (s) the driver looks for blocks that no alive node can run any more.
LIVENESS_S = 5.0

_START, _OUTCOME = "start", "outcome"


def import_ray() -> Any:
    """The ``ray`` module. Raises RayNotInstalled (one line with the install command) when
    Ray is not installed."""
    # Ray's own log lines (C++ warnings on stderr) would bury cryptoperf's one-line errors.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    if "RAY_AUTH_MODE" not in os.environ and _token_available():
        # As `ray start` does when it finds a token: a cluster with token authentication (Ray's
        # default) refuses a driver that sends none. Ray reads this when it is imported.
        os.environ["RAY_AUTH_MODE"] = "token"
    try:
        import ray
    except ImportError as e:
        raise RayNotInstalled(f"--executor ray needs Ray, which is not installed here ({e}); install "
                              "it with `pip install 'cryptoperf[ray]'` (in a checkout: "
                              "`pip install '.[ray]'`), or run without --executor ray") from None
    return ray


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) of a Ray cluster's head (its GCS port, 6379
    unless the head was started with ``--port``) as (host, port). Raises UsageError (one line)
    for anything else."""
    host, sep, port = address.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--address {address!r} is not HOST:PORT; give the Ray head's address and port, "
                         "e.g. --address 10.0.0.5:6379 (`ray start --head` prints it)")
    return host, int(port)


def reachable(host: str, port: int, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """None if a TCP connection to ``host``:``port`` opens within ``timeout_s`` s, else why
    not (one phrase: "connection refused", "timed out", "unknown host")."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return None
    except socket.gaierror:
        return "unknown host"
    except socket.timeout:
        return f"no answer within {timeout_s:g} s"
    except OSError as e:
        return (e.strerror or str(e)).lower()


def _token_available() -> bool:
    """True when a Ray authentication token is at hand (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
    ~/.ray/auth_token, where `ray start` writes it)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    return Path(path).is_file()


def task_env() -> dict[str, str]:
    """The environment variables every task of this driver gets (its ``runtime_env``): the
    ``CRYPTOPERF_*`` variables as set here, and, when this cryptoperf runs from a source tree
    rather than an installed package, PYTHONPATH with that tree first, so that the tasks import
    the same code (a node without that path imports its installed cryptoperf, and the version
    check compares the two)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIX)}
    root = Path(cryptoperf.__file__).resolve().parents[1]
    if root.name not in ("site-packages", "dist-packages"):
        env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return env


# --------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class Node:
    """A Ray node as ``ray.nodes()`` describes it.

    Attributes:
        id: the node id (hex); address: the IP its raylet listens on; name: its node name;
        labels: label → value; resources: resource → amount (``CPU``, ``cryptoperf_slot``, ...).
    """

    id: str
    address: str
    name: str
    labels: Mapping[str, str]
    resources: Mapping[str, float]

    @property
    def slots(self) -> float:
        """How many blocks it may run at once (its ``cryptoperf_slot`` resource)."""
        return float(self.resources.get(SLOT) or 0)

    def matches(self, selectors: Sequence[HostSelector]) -> bool:
        """True if it has a slot and matches every selector."""
        return self.slots > 0 and all(s.matches(self.labels, self.resources) for s in selectors)

    def describe(self) -> str:
        """``192.0.2.7 (node 3f2a9c1e…, labels cpu=icelake)`` for messages."""
        labels = ", ".join(f"{k}={v}" for k, v in sorted(self.labels.items()) if not k.startswith("ray.io/"))
        return f"{self.address} (node {self.id[:8]}…" + (f", labels {labels}" if labels else "") + ")"


def alive_nodes(ray: Any) -> list[Node]:
    """The cluster's alive nodes, in ``ray.nodes()`` order."""
    return [Node(str(n["NodeID"]), str(n.get("NodeManagerAddress") or "?"), str(n.get("NodeName") or ""),
                 dict(n.get("Labels") or {}), dict(n.get("Resources") or {}))
            for n in ray.nodes() if n.get("Alive")]


def selectors_of(study: Study, configurations: Sequence[str]) -> tuple[HostSelector, ...]:
    """What a node must match to run a block of these configurations: the study's ``hosts``
    and every one of theirs, each once, in order."""
    out: list[HostSelector] = list(study.hosts)
    for name in configurations:
        for s in study.configuration(name).hosts:
            if s not in out:
                out.append(s)
    return tuple(out)


def _node_list(nodes: Sequence[Node]) -> str:
    shown = "; ".join(n.describe() for n in nodes[:4])
    return shown + (f"; and {len(nodes) - 4} more" if len(nodes) > 4 else "") if nodes else "none"


def check_placement(study: Study, cells: Sequence, nodes: Sequence[Node], where: str) -> dict[tuple, list[Node]]:
    """For every group of ``cells`` (``schedule.groups``), the alive nodes that may run its
    blocks (a slot, and every selector of its configurations). Raises RayError when no node
    offers a slot at all, StudyError (at the ``hosts`` key) when a group has no eligible node,
    naming the selectors and the nodes there are."""
    if not any(n.slots > 0 for n in nodes):
        raise RayError(f"no node of the Ray cluster at {where} offers the {SLOT} resource that keeps "
                       "measurements from competing (nodes: " + _node_list(nodes) + "); start each node with "
                       f"`ray start ... --resources='{{\"{SLOT}\": 1}}'` (docs/ray.md)")
    out: dict[tuple, list[Node]] = {}
    for group, members in schedule.groups(cells).items():
        names = list(dict.fromkeys(c.configuration for c in members))
        sels = selectors_of(study, names)
        eligible = [n for n in nodes if n.matches(sels)]
        if eligible:
            out[group] = eligible
            continue
        there = f"no node of the Ray cluster at {where} with a {SLOT} matches"
        if not any(n.matches(study.hosts) for n in nodes):
            raise study.error("study", 0, "hosts", f"{there} {', '.join(s.text for s in study.hosts)} "
                              f"(nodes: {_node_list(nodes)})")
        alone = [n for n in names if not any(x.matches(selectors_of(study, [n])) for x in nodes)]
        if alone:
            c = study.configuration(alone[0])
            raise study.error("configuration", c.index, "hosts",
                              f"{there} {', '.join(s.text for s in selectors_of(study, [c.name]))} "
                              f"(nodes: {_node_list(nodes)})")
        pinned = [n for n in names if study.configuration(n).hosts]
        c = study.configuration(pinned[0])
        raise study.error("configuration", c.index, "hosts",
                          f"configurations {', '.join(repr(n) for n in names)} run in the same blocks "
                          f"(a paired comparison needs one machine) but {there} all of "
                          f"{', '.join(s.text for s in sels)} (nodes: {_node_list(nodes)})")
    return out


# --------------------------------------------------------------------------- on a node


_FACTS: dict[tuple, dict[str, Any]] = {}


def node_facts(builds_needed: Sequence[str]) -> dict[str, Any]:
    """What a node reports about itself (run on the node; cached per process): ``cryptoperf``
    (its version), ``protocol``, ``hostname``, ``builds`` (build → ``worker_version``,
    ``build``, ``path``), ``host`` (its ``hostinfo.fingerprint``), ``error`` (why a worker
    build cannot be used there, or None) and, kept out of the driver's answer, the builds'
    paths and hellos under ``_workers``."""
    key = (tuple(builds_needed), tuple(sorted((k, v) for k, v in os.environ.items()
                                              if k.startswith(FORWARDED_PREFIX))))
    if key in _FACTS:
        return _FACTS[key]
    from cryptoperf.run.worker import fetch_hello
    from cryptoperf.builds import find_worker
    out: dict[str, Any] = {"cryptoperf": cryptoperf.__version__, "protocol": PROTOCOL_VERSION,
                           "hostname": socket.gethostname(), "builds": {}, "error": None, "_workers": {}}
    hellos = {}
    for name in builds_needed:
        try:
            path = find_worker(name)
            h = fetch_hello(path)
        except CryptoperfError as e:
            out["error"] = f"worker build {name}: {e}"
            break
        hellos[name] = h
        out["_workers"][name] = (path, h)
        out["builds"][name] = {"worker_version": h.worker_version, "build": h.raw.get("build"),
                               "path": str(path)}
    default = hellos.get(builds.DEFAULT)
    out["host"] = hostinfo.fingerprint(default.raw if default else None,
                                       {n: h.raw for n, h in hellos.items() if n != builds.DEFAULT})
    if out["error"] is None:
        _FACTS[key] = out
    return out


def _public(facts: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in facts.items() if not k.startswith("_")}


def check_node(builds_needed: Sequence[str]) -> dict[str, Any]:
    """The Ray task of the version check: ``node_facts`` without the hellos, plus the node's
    Ray id."""
    import ray
    out = _public(node_facts(builds_needed))
    out["node_id"] = ray.get_runtime_context().get_node_id()
    return out


def mismatch(facts: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """Why a node's ``facts`` differ from the driver's ``expected`` (same shape: ``cryptoperf``,
    ``protocol``, ``builds``), or None when they agree."""
    if facts.get("error"):
        return str(facts["error"])
    if facts.get("cryptoperf") != expected["cryptoperf"] or facts.get("protocol") != expected["protocol"]:
        return (f"it runs cryptoperf {facts.get('cryptoperf')} (protocol {facts.get('protocol')}), this driver "
                f"cryptoperf {expected['cryptoperf']} (protocol {expected['protocol']})")
    for name, want in expected["builds"].items():
        got = (facts.get("builds") or {}).get(name) or {}
        if (got.get("worker_version"), got.get("build")) != (want["worker_version"], want["build"]):
            return (f"its {name} worker is version {got.get('worker_version')} (build {got.get('build')}), "
                    f"this driver's {want['worker_version']} (build {want['build']})")
    return None


def refusal(node: str, hostname: str, why: str) -> str:
    """The one line refusing a node: which node, what differs, and the fix."""
    return (f"Ray node {node} (host {hostname or '?'}) is refused: {why}; every node needs the same "
            "cryptoperf install as this driver (`pip install '.[ray]'` of the same commit, with its "
            "workers) — fix that node or remove it from the cluster")


def run_block(key: str, reps: Sequence[Repetition], settings: Settings, builds_needed: Sequence[str],
              expected: Mapping[str, Any], limits: disturbance.Limits, queue: Any, pg: Any = None,
              env: Mapping[str, str] | None = None) -> str:
    """The Ray task of one block (run on a node): announce the attempt on ``queue`` (its key, a
    fresh token, the node's id, this process's pid and fingerprint), check the node's versions
    against ``expected`` (NodeMismatch if they differ), then run ``reps`` with
    ``run.local.execute`` — a fresh worker process each, the node's own worker binaries and
    unmasked capability vectors, disturbed repetitions re-run by ``limits.rule`` (one rule for
    the block: the node's steady other load is learnt from the block's own repetitions) —
    putting each outcome on ``queue`` as it finishes. With a placement group ``pg`` (its bundle
    0 this task's), the repetitions whose jobs spread run as sub-jobs on its bundles' nodes
    (``spread.execute``; the disturbance rule does not judge them: their ticks are several
    hosts'). Returns the token. Raises WorkerNotFound / ProtocolMismatch as ``execute`` does."""
    import ray
    token = uuid.uuid4().hex
    node_id = ray.get_runtime_context().get_node_id()
    facts = node_facts(builds_needed)
    queue.put((_START, key, token, node_id, os.getpid(), pickle.dumps(facts["host"])))
    why = mismatch(facts, expected)
    if why:
        raise NodeMismatch(refusal(f"{socket.gethostname()} (node {node_id[:8]}…)", facts["hostname"], why))
    workers = facts["_workers"]
    paths = {name: path for name, (path, _) in workers.items()}
    unmasked = {(name, backend): vector for name, (_, h) in workers.items()
                for backend, vector in h.unmasked_vectors().items()}
    cpus = int(workers[builds.DEFAULT][1].cpu.get("logical_cpus") or os.cpu_count() or 1)
    rule = limits.rule(cpus)
    setups: dict[str, float] = {}

    def spreads(r: Repetition) -> bool:
        return pg is not None and spread.parts(r) > 1

    def one(r: Repetition) -> Outcome:
        if spreads(r):
            return spread.execute(r, settings, pg, env or {}, builds_needed, paths[builds.DEFAULT], setups)
        return local.execute_one(paths, r, settings, unmasked)

    def send(o: Outcome) -> None:
        queue.put((_OUTCOME, key, token, pickle.dumps(o)))

    local.execute(reps, settings, paths, on_outcome=send, unmasked=unmasked, run_one=one,
                  disturbed=lambda o: "" if spreads(o.repetition) else rule(o))
    return token


# --------------------------------------------------------------------------- the driver


@dataclass
class _Block:
    """One block task as the driver follows it."""

    key: str
    reps: list[Repetition]
    group: tuple
    node: Node | None = None             # pinned (every-node), else None
    parts: int = 0                       # nodes its spread jobs need at once (0: none spreads)
    pg: Any = None                       # their placement group, while the block runs
    token: str | None = None             # the attempt running now
    attempts: int = 0
    node_id: str | None = None           # where the current attempt runs
    current: list[Outcome] = field(default_factory=list)


def split_blocks(reps: Sequence[Repetition], every_node: Mapping[tuple, Sequence[Node]] | None = None) -> list[_Block]:
    """``reps`` cut into block tasks: the repetitions of one group in one block, in their
    order (at calibration, block 0: a group's calibration repetitions), each to run whole on
    one node. With ``every_node`` (group → its eligible nodes), one copy per eligible node,
    pinned there, block b of the i-th of n nodes numbered (b − 1)·n + i + 1 (calibration stays
    block 0), so that repetitions of two nodes never share a block and the analysis, which
    pairs by block, never pairs two machines."""
    by: dict[tuple, list[Repetition]] = {}
    for r in reps:
        by.setdefault((r.block, r.cell.group), []).append(r)
    out = []
    for (block, group), members in by.items():
        name = "/".join("-" if x is None else str(x) for x in group)
        if every_node is None:
            out.append(_Block(f"{name}#{block}", members, group))
            continue
        nodes = list(every_node.get(group, ()))
        for i, node in enumerate(nodes):
            renumbered = [r if r.block == CALIBRATION_BLOCK
                          else dataclasses.replace(r, block=(r.block - 1) * len(nodes) + i + 1) for r in members]
            out.append(_Block(f"{name}#{renumbered[0].block}@{node.id[:8]}", renumbered, group, node=node))
    return out


class RayExecutor:
    """Runs a study's blocks as Ray tasks (see the module's doc); the engine drives it as it
    drives ``run.local.LocalExecutor``: ``start(plan)``, ``execute(...)`` per phase, ``close()``.

    Args:
        address: the head's ``HOST:PORT``; None: ``RAY_ADDRESS`` if set, else a private local
            Ray instance (this machine's CPUs, one slot) that ``close`` stops. When this process
            is already connected to Ray (``ray.is_initialized()``), that connection is used.

    Attributes (after ``execute``): retried_blocks (blocks Ray ran again after losing their
    worker or node), failed_blocks (blocks given up, their repetitions failed with the reason),
    events (one line per retried or failed block, in order).
    """

    name = "ray"

    def __init__(self, address: str | None = None):
        import_ray()  # no Ray: one line now, before a study is planned
        if address is not None and address != "auto":
            parse_address(address)
        self.address = address
        self.retried_blocks = 0
        self.failed_blocks = 0
        self.events: list[str] = []
        self._ray: Any = None
        self._owns_connection = False
        self._queue: Any = None
        self._study: Study | None = None
        self._every_node = False
        self._eligible: dict[tuple, list[Node]] = {}
        self._hosts: dict[str, dict[str, Any]] = {}
        self._expected: dict[str, Any] = {}
        self._builds: list[str] = []
        self._env: dict[str, str] = {}
        self._where = "?"
        self._block_task: Any = None
        self._started: dict[str, Any] | None = None

    # -- connecting and checking --------------------------------------------------------------

    def connect(self) -> Any:
        """Connect to the cluster (see the class doc). Raises UsageError for a malformed
        address, RayError when it cannot be reached or refuses the connection,
        RayNotInstalled."""
        ray = import_ray()
        self._ray = ray
        if ray.is_initialized():
            self._where = ray.get_runtime_context().gcs_address
            return ray
        address = self.address or os.environ.get("RAY_ADDRESS")
        quiet = dict(logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False)
        if not address:
            ray.init(address="local", num_cpus=os.cpu_count() or 1, resources={SLOT: 1},
                     namespace="cryptoperf", **quiet)
            self._owns_connection = True
            self._where = "this machine (a local Ray instance)"
            return ray
        if address != "auto":
            host, port = parse_address(address)
            why = reachable(host, port)
            if why:
                raise RayError(f"cannot reach a Ray cluster at {address}: {why}; start its head there with "
                               f"`ray start --head --port {port} --resources='{{\"{SLOT}\": 1}}'`, or give "
                               "the right --address (docs/ray.md)")
        try:
            ray.init(address=address, namespace="cryptoperf", logging_level=logging.ERROR, log_to_driver=False)
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, AuthenticationError, ...
            first = " ".join(str(e).split())[:300]
            hint = ("; a cluster with token authentication needs its token here (RAY_AUTH_TOKEN, or the "
                    "file ~/.ray/auth_token from its head) and RAY_AUTH_MODE=token"
                    if "auth" in first.lower() or "token" in first.lower() else "")
            raise RayError(f"cannot connect to the Ray cluster at {address}: {type(e).__name__}: {first}{hint}") from None
        self._owns_connection = True
        self._where = address
        return ray

    def start(self, plan: Any) -> dict[str, Any]:
        """Before the run is stored: connect, find the nodes that may run each group's blocks
        (``check_placement``), and check every one of them (a ``check_node`` task each): same
        cryptoperf, protocol and worker builds as this driver, or NodeMismatch naming the node.
        ``plan`` is an ``engine.PreparedStudy``; a second call returns the first's answer.

        Returns ``{"ray": {...}}`` for the run's host fingerprint: the address, whether every
        node runs every cell, and the nodes checked (id, address, host name, labels). Raises
        RayError subclasses, StudyError (a ``hosts`` selector no node matches)."""
        if self._started is not None:
            return self._started
        ray = self.connect()
        study: Study = plan.study
        self._study = study
        self._every_node = study.every_node
        self._builds = sorted({builds.DEFAULT} | {c.build for c in plan.cells})
        self._expected = {"cryptoperf": cryptoperf.__version__, "protocol": PROTOCOL_VERSION,
                          "builds": {name: {"worker_version": h.worker_version, "build": h.raw.get("build")}
                                     for name, (_, h) in plan.workers.items() if name in self._builds}}
        self._env = task_env()
        nodes = alive_nodes(ray)
        self._eligible = check_placement(study, plan.cells, nodes, self._where)
        spread.check(study, self._eligible, schedule.groups(plan.cells))
        checked = list({n.id: n for ns in self._eligible.values() for n in ns}.values())
        self._check_versions(checked)
        from ray.util.queue import Queue
        here = ray.get_runtime_context().get_node_id()
        self._queue = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": self._affinity(here, soft=True)})
        self._started = {"ray": {"address": self._where, "every_node": self._every_node,
                                 "nodes": [{"node_id": n.id, "address": n.address,
                                            "hostname": self._hosts[n.id].get("hostname"),
                                            "labels": {k: v for k, v in n.labels.items() if not k.startswith("ray.io/")}}
                                           for n in checked]}}
        return self._started

    def _affinity(self, node_id: str, soft: bool = False) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        return NodeAffinitySchedulingStrategy(node_id=node_id, soft=soft)

    def _check_versions(self, nodes: Sequence[Node]) -> None:
        ray = self._ray
        task = ray.remote(check_node)
        refs = {task.options(num_cpus=0, scheduling_strategy=self._affinity(n.id), max_retries=0,
                             runtime_env={"env_vars": self._env}).remote(self._builds): n for n in nodes}
        ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=CHECK_TIMEOUT_S)
        if late:
            raise RayError(f"Ray node {refs[late[0]].describe()} did not answer the version check within "
                           f"{CHECK_TIMEOUT_S:g} s; is cryptoperf installed there (docs/ray.md)?")
        for ref in ready:
            node = refs[ref]
            try:
                facts = ray.get(ref)
            except Exception as e:
                raise NodeMismatch(refusal(node.describe(), node.name, _first_line(e))) from None
            why = mismatch(facts, self._expected)
            if why:
                raise NodeMismatch(refusal(node.describe(), facts.get("hostname", ""), why))
            host = dict(facts["host"])
            host["ray_node"] = {"node_id": node.id, "address": node.address}
            self._hosts[node.id] = host

    # -- running blocks -----------------------------------------------------------------------

    def _submit(self, block: _Block, settings: Settings) -> Any:
        ray = self._ray
        study = self._study
        assert study is not None
        sels = selectors_of(study, list(dict.fromkeys(r.cell.configuration for r in block.reps)))
        options: dict[str, Any] = {"num_cpus": 1, "max_retries": MAX_BLOCK_RETRIES, "retry_exceptions": False,
                                   "runtime_env": {"env_vars": self._env}}
        resources = {SLOT: 1.0}
        if block.node is not None:
            options["scheduling_strategy"] = self._affinity(block.node.id)
        else:
            labels = {s.name: s.value for s in sels if s.kind == "label"}
            if labels:
                options["label_selector"] = labels
            for s in sels:
                if s.kind == "resource":
                    resources[s.name] = 0.001  # only where it is offered; a share that never runs out
        options["resources"] = resources
        block.parts = spread.block_parts(block.reps, study.slices_on)
        if block.parts:
            # k nodes reserved whole (spread's doc): this task in half of bundle 0's slot
            block.pg = spread.placement_group(ray, block.parts, SLOT, options.pop("label_selector", {}),
                                              [r for r in resources if r != SLOT])
            options.update(num_cpus=0, resources={SLOT: spread.SLOT_SHARE},
                           scheduling_strategy=spread.in_bundle(block.pg, 0))
        if self._block_task is None:
            self._block_task = ray.remote(run_block)
        return self._block_task.options(**options).remote(
            block.key, block.reps, settings, self._builds, self._expected,
            disturbance.Limits.of(study), self._queue,  # the driver's own load says nothing of a node
            block.pg, self._env)

    def _release(self, block: _Block) -> None:
        """Remove the block's placement group, if it has one (its nodes run other blocks)."""
        if block.pg is not None:
            try:
                self._ray.util.remove_placement_group(block.pg)
            except Exception:  # the cluster may be gone already
                pass
            block.pg = None

    def execute(self, reps: Sequence[Repetition], settings: Settings, workers: Workers,
                on_outcome: Callable[[Outcome], None] | None = None, progress: Progress | None = None,
                description: str = "measuring", disturbed: Callable[[Outcome], str] | None = None,
                unmasked: Mapping[tuple[str, str], str] | None = None,
                on_superseded: Callable[[list[Outcome], str], None] | None = None) -> list[Outcome]:
        """Run ``reps`` as block tasks on the cluster; return every outcome in the order it
        arrived. ``on_outcome`` gets each as it arrives (the store commits it); when Ray runs a
        block again, ``on_superseded`` gets the outcomes its lost attempt had delivered and why
        (they are marked superseded). ``workers``, ``disturbed`` and ``unmasked`` are the
        driver's and unused: each node uses its own binaries, CPU count and capability vectors.
        Raises NodeMismatch, WorkerError (a node without a worker: fatal, as locally), RayError;
        the remaining block tasks are cancelled on any exception."""
        ray = self._ray
        if ray is None:
            raise RayError("the Ray executor was not started (call start(plan) first)")
        progress = progress or local.NoProgress()
        blocks = split_blocks(reps, self._eligible if self._every_node else None)
        outcomes: list[Outcome] = []
        by_key = {b.key: b for b in blocks}
        pending = {self._submit(b, settings): b for b in blocks}
        progress.begin(description, sum(len(b.reps) for b in blocks))
        last_look = time.monotonic()

        def take(item: tuple) -> None:
            kind, key = item[0], item[1]
            b = by_key.get(key)
            if b is None:
                return
            if kind == _START:
                _, _, token, node_id, _pid, host = item
                if b.token is not None:
                    where = self._hosts.get(b.node_id or "", {}).get("hostname") or (b.node_id or "?")[:8]
                    why = (f"{RETRIED}the Ray worker or node running this block ({where}) was lost; the "
                           "block ran again whole")
                    for o in b.current:
                        o.superseded, o.disturbed = True, why
                    if b.current and on_superseded is not None:
                        on_superseded(list(b.current), why)
                    if b.attempts == 1:
                        self.retried_blocks += 1
                    self.events.append(f"block {key} retried after losing its worker on {where}")
                b.token, b.node_id, b.current = token, node_id, []
                b.attempts += 1
                if node_id not in self._hosts:
                    h = dict(pickle.loads(host))
                    h["ray_node"] = {"node_id": node_id, "address": None}
                    self._hosts[node_id] = h
                progress.starting(b.reps[0])
            elif kind == _OUTCOME:
                _, _, token, blob = item
                if token != b.token:
                    return  # a lost attempt's last word, after its retry began
                o: Outcome = pickle.loads(blob)
                o.host = self._hosts.get(b.node_id or "")
                b.current.append(o)
                outcomes.append(o)
                if on_outcome is not None:
                    on_outcome(o)
                progress.finished(o)

        def drain() -> None:
            while True:
                n = self._queue.qsize()
                if n == 0:
                    return
                for item in self._queue.get_nowait_batch(n):
                    take(item)

        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
                drain()
                for ref in ready:
                    b = pending.pop(ref)
                    self._release(b)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayTaskError as e:
                        cause = getattr(e, "cause", None)
                        if isinstance(cause, NodeMismatch):
                            raise NodeMismatch(str(cause)) from None
                        if isinstance(cause, WorkerError):  # no worker there, another protocol
                            raise RayError(f"on Ray node {self._node_text(b)}: {cause}") from None
                        raise RayError(f"a block task failed on Ray node {self._node_text(b)}: "
                                       f"{_first_line(cause or e)}") from None
                    except ray.exceptions.RayError as e:
                        self._fail(b, _first_line(e), outcomes, on_outcome, progress)
                if time.monotonic() - last_look > LIVENESS_S:
                    last_look = time.monotonic()
                    self._orphans(pending, outcomes, on_outcome, progress)
            drain()
        except BaseException:
            for ref, b in pending.items():
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # already finished or gone: nothing to cancel
                    pass
                self._release(b)
            raise
        finally:
            progress.end()
        return outcomes

    def _node_text(self, b: _Block) -> str:
        host = self._hosts.get(b.node_id or "", {})
        return f"{host.get('hostname') or '?'} (node {(b.node_id or '?')[:8]}…)"

    def _fail(self, b: _Block, why: str, outcomes: list[Outcome], on_outcome: Callable[[Outcome], None] | None,
              progress: Progress) -> None:
        """Give a block up: its repetitions without an outcome from its last attempt fail with
        ``why`` (those it had delivered stay: they ran on one node)."""
        self.failed_blocks += 1
        done = {(o.cell.key, o.repetition.block) for o in b.current}
        tries = f" after {b.attempts} attempt{'s' if b.attempts != 1 else ''}" if b.attempts else ""
        where = f" on {self._node_text(b)}" if b.node_id else ""
        self.events.append(f"block {b.key} failed{where}{tries}: {why}")
        for r in b.reps:
            if (r.cell.key, r.block) in done:
                continue
            o = Outcome(r, FAILED, f"its block's Ray task failed{where}{tries}: {why}")
            o.started_at = o.finished_at = local.utc_now()
            o.host = self._hosts.get(b.node_id or "")
            outcomes.append(o)
            if on_outcome is not None:
                on_outcome(o)
            progress.finished(o)

    def _orphans(self, pending: dict, outcomes: list[Outcome], on_outcome: Callable[[Outcome], None] | None,
                 progress: Progress) -> None:
        """Fail the waiting blocks that no alive node can run any more (Ray would wait for one
        forever): their eligible nodes all left the cluster."""
        nodes = alive_nodes(self._ray)
        study = self._study
        assert study is not None
        for ref, b in list(pending.items()):
            if b.node is not None:
                continue  # pinned: Ray itself fails it when that node is gone
            sels = selectors_of(study, list(dict.fromkeys(r.cell.configuration for r in b.reps)))
            if sum(n.matches(sels) for n in nodes) < max(b.parts, 1):
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # it may have just finished; the failure below stands
                    pass
                del pending[ref]
                self._release(b)
                fewer = f"fewer than {b.parts}" if b.parts else "no"
                self._fail(b, f"{fewer} alive node(s) of the cluster match its hosts now ("
                           f"{', '.join(s.text for s in sels) or 'any node with a ' + SLOT})",
                           outcomes, on_outcome, progress)

    def close(self) -> None:
        """Stop the queue and, if this executor connected (or started a local instance),
        disconnect from Ray (a local instance it started stops)."""
        if self._queue is not None:
            try:
                self._queue.shutdown(force=True)
            except Exception:  # the cluster may be gone already
                pass
            self._queue = None
        if self._ray is not None and self._owns_connection:
            self._ray.shutdown()
            self._owns_connection = False


def _first_line(e: BaseException) -> str:
    text = " ".join(str(e).strip().splitlines()[0].split()) if str(e).strip() else type(e).__name__
    return text[:300]
