"""The Ray executor (``--executor ray``): a local Ray cluster this module starts (one head on
127.0.0.1, 2 CPUs, one cryptoperf_slot, label cpu=fake) runs small studies on the fake worker,
which must give the same cells and verdicts as the local executor; a Ray worker killed
mid-block has its block run again whole; user errors (no Ray, a bad address, a label no node
has, a node with another cryptoperf version) are one line each. Without Ray installed the
cluster tests skip, saying why — except under CI (CRYPTOPERF_REQUIRE_RAY=1), where they fail.
The tests that need no cluster (Ray not installed, the local executor never importing Ray,
every-node block numbering) always run."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from conftest import FAKE_WORKER_EXEC, SRC, TWO_CONFIG_STUDY, assert_one_line_error, run_subprocess
from cryptoperf.model import RETRIED, Cell, Outcome, Repetition
from cryptoperf import analysis, stats

# The test cluster lives on the loopback address: Ray otherwise advertises (and connects
# drivers to) the machine's routable address. Read by Ray when it is first imported.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

DRIFT = [1.0, 1.05, 0.97, 1.02, 0.99]


def ray_or_skip():
    """Skip saying why when Ray is not installed; fail instead under CRYPTOPERF_REQUIRE_RAY=1
    (.ci/run)."""
    import importlib.util
    if importlib.util.find_spec("ray") is None:  # not imported here: the executor imports it first
        why = "Ray is not installed; `pip install '.[ray]'` runs these tests"
        if os.environ.get("CRYPTOPERF_REQUIRE_RAY") == "1":
            pytest.fail(f"CRYPTOPERF_REQUIRE_RAY=1 but {why}", pytrace=False)
        pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_cli() -> str:
    """The `ray` command of this Python's environment (else the one on PATH)."""
    cli = Path(sysconfig.get_path("scripts")) / "ray"
    return str(cli if cli.exists() else Path(shutil.which("ray") or cli))


def stop_group(p: subprocess.Popen) -> None:
    """Stop the process group ``p`` leads: SIGTERM, then SIGKILL after 6 s (a Ray node drains its
    tasks for up to 30 s on SIGTERM; a test's cluster has nothing left worth draining); gone
    already is fine."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=6)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=20)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Ray head started for this module: `ray start --head --block` in its own session
    (127.0.0.1, 2 CPUs, cryptoperf_slot 1, label cpu=fake); yields its address and stops it
    (its process group) at the end."""
    ray_or_skip()
    port = _free_port()
    log = tmp_path_factory.mktemp("ray") / "head.log"
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    cmd = [ray_cli(), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
           "--num-cpus=2", '--resources={"cryptoperf_slot": 1}', "--labels=cpu=fake",
           "--include-dashboard=false", "--disable-usage-stats"]
    with open(log, "w") as out:
        head = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Ray head did not start: {log.read_text()[-2000:]}")
                time.sleep(0.3)
        time.sleep(2)  # the raylet registers after the GCS port opens
        yield f"127.0.0.1:{port}"
    finally:
        stop_group(head)


@pytest.fixture
def baked_worker(tmp_path, monkeypatch):
    """A fake worker whose script (spec, state directory) is in its wrapper, not in the
    environment, so that it reaches Ray tasks through CRYPTOPERF_WORKER alone (the executor
    forwards CRYPTOPERF_* only). Call with a spec; returns the state directory."""
    def make(spec: dict) -> Path:
        state = tmp_path / "fake-worker-state"
        state.mkdir(exist_ok=True)
        wrapper = tmp_path / "baked-fake-worker"
        wrapper.write_text(f"#!/bin/sh\nFAKE_WORKER_SPEC={shlex.quote(json.dumps(spec))} "
                           f"FAKE_WORKER_STATE={shlex.quote(str(state))} "
                           f"{FAKE_WORKER_EXEC}\n")
        wrapper.chmod(0o755)
        monkeypatch.setenv("CRYPTOPERF_WORKER", str(wrapper))
        monkeypatch.delenv("FAKE_WORKER_SPEC", raising=False)
        return state
    return make


def study_text(reps: int = 3, extra: str = "", timeout: int = 60) -> str:
    """The two-configuration study, its block order pinned (seed 1): the tests below kill the
    worker of a block whose order they know."""
    return TWO_CONFIG_STUDY.format(reps=reps, timeout=timeout).replace(
        "[[configuration]]", "seed = 1\n" + extra + "\n[[configuration]]", 1)


def run(cli, write_study, tmp_path, text: str, *args: str, name: str = "study.toml"):
    out = tmp_path / ("out-" + name)
    res = cli("study", write_study(text, name), "--out", out, "--no-report", *args)
    docs = sorted(out.glob("t-*.json"))
    return res, (json.loads(docs[-1].read_text()) if docs else None)


def verdicts(doc: dict) -> list[tuple]:
    return [(d["backend"], d["label"], d["configuration"], d["status"], d["blocks"],
             d["verdict"]["kind"] if d["verdict"] else None, d["latency"]) for d in doc["deltas"]]


def test_a_study_on_ray_gives_the_same_cells_and_verdicts_as_the_local_executor(
        cluster, cli, write_study, baked_worker, tmp_path):
    baked_worker({"config_factor": {"B": 1.5}, "rep_factors": DRIFT, "noise_cv": 0.01})
    local_res, local_doc = run(cli, write_study, tmp_path, study_text(), name="local.toml")
    assert local_res.code == 0, local_res.err
    res, doc = run(cli, write_study, tmp_path, study_text(), "--executor", "ray", "--address", cluster,
                   name="ray.toml")
    assert res.code == 0, res.err
    assert [c["cell"] for c in doc["cells"]] == [c["cell"] for c in local_doc["cells"]]
    assert verdicts(doc) == verdicts(local_doc)
    (d,) = doc["deltas"]
    assert d["verdict"]["kind"] == "slower" and d["latency"]["ratio"] == pytest.approx(1.5, rel=0.02)
    # every repetition ran on the cluster's node and carries its fingerprint; locally none does
    assert {r["host"]["ray_node"]["address"] for r in doc["repetitions"]} == {"127.0.0.1"}
    assert all(r["host"]["hostname"] and r["host"]["libraries"] for r in doc["repetitions"])
    assert {r["host"] for r in local_doc["repetitions"]} == {None}
    # ... and the store keeps it: the run rebuilt from the store has each repetition's node
    from cryptoperf.store import stored_run as stored
    with stored.open_store(tmp_path / "runs.sqlite") as st:
        again = stored.load_run(st, doc["store"]["run_id"])
    assert {o.host["ray_node"]["address"] for o in again.outcomes} == {"127.0.0.1"}
    assert doc["host"]["ray"]["nodes"][0]["labels"] == {"cpu": "fake"}
    assert "ray: 0 block(s) retried after losing their worker or node, 0 failed" in res.out
    assert f"ray: {cluster}, 1 node(s) checked, one block per node at a time: " in res.err


def test_killing_the_ray_worker_running_a_block_runs_that_block_again(
        cluster, cli, write_study, baked_worker, tmp_path):
    """Block 2's B repetition is slow the first time; the Ray worker process running it (the
    fake worker's parent) is killed: Ray runs the block again, whole, and the study ends with
    every block of every cell, the lost attempt's outcomes kept but superseded."""
    state = baked_worker({"slow": {"B#2": 60}, "config_factor": {"B": 1.5}})
    marker = state / "slow-B#2.ppid"
    killed: list[int] = []

    def kill_when_slow():
        deadline = time.monotonic() + 240
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if marker.exists():
            pid = int(marker.read_text())
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_slow, daemon=True)
    killer.start()
    res, doc = run(cli, write_study, tmp_path, study_text(reps=4), "--executor", "ray", "--address", cluster)
    killer.join(timeout=5)
    assert killed, "the slow repetition never started"
    assert res.code == 0, res.err
    assert "ray: 1 block(s) retried after losing their worker or node, 0 failed" in res.out
    analysed = [r for r in doc["repetitions"] if r["block"] > 0 and not r["superseded"]]
    assert sorted((r["configuration"], r["block"]) for r in analysed) == sorted(
        (c, b) for c in "AB" for b in range(1, 5))
    assert all(r["status"] == "ok" for r in analysed)
    # what block 2 had delivered before B (its seeded order) was kept, superseded, and run again
    from cryptoperf import schedule
    order = [r.cell.configuration for r in schedule.blocks(
        [Cell(c, "openssl", "hash", "sha256", {}, 1024) for c in "AB"], 2, 2, seed=1)]
    before = order[:order.index("B")]
    lost = [r for r in doc["repetitions"] if r["superseded"]]
    assert [(r["configuration"], r["block"]) for r in lost] == [(c, 2) for c in before]
    assert all(r["disturbed"].startswith(RETRIED) and "was lost" in r["disturbed"] for r in lost)
    with sqlite3.connect(tmp_path / "runs.sqlite") as db:
        assert db.execute("SELECT count(*) FROM results WHERE superseded = 1").fetchone()[0] == len(lost)
    (d,) = doc["deltas"]
    assert d["blocks"] == 4 and d["dropped"] == 0 and d["verdict"]["kind"] == "slower"
    assert "disturbed by steal" not in res.out  # a retried block is not a disturbed repetition


def test_a_block_that_loses_its_worker_on_every_attempt_fails_with_the_reason(
        cluster, cli, write_study, baked_worker, tmp_path):
    """Kill the Ray worker running block 2 on each of its 1 + MAX_BLOCK_RETRIES attempts: the
    block is marked failed with the reason, and the study ends with every other block."""
    from cryptoperf.run.ray import MAX_BLOCK_RETRIES
    state = baked_worker({"slow": {"B#2": 60}, "slow_times": 99, "config_factor": {"B": 1.5}})
    marker = state / "slow-B#2.ppid"
    killed: list[int] = []

    def kill_every_attempt():
        deadline = time.monotonic() + 300
        while len(killed) < 1 + MAX_BLOCK_RETRIES and time.monotonic() < deadline:
            pid = int(marker.read_text()) if marker.exists() else None
            if pid is not None and pid not in killed:
                killed.append(pid)
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    killer = threading.Thread(target=kill_every_attempt, daemon=True)
    killer.start()
    res, doc = run(cli, write_study, tmp_path, study_text(reps=4), "--executor", "ray", "--address", cluster)
    killer.join(timeout=5)
    assert len(killed) == 1 + MAX_BLOCK_RETRIES
    assert res.code == 0, res.err
    assert "ray: 1 block(s) retried after losing their worker or node, 1 failed" in res.out
    (failed,) = [r for r in doc["repetitions"] if r["status"] == "failed"]
    assert (failed["configuration"], failed["block"], failed["superseded"]) == ("B", 2, False)
    assert failed["reason"].startswith("its block's Ray task failed on ")
    assert f"after {1 + MAX_BLOCK_RETRIES} attempts" in failed["reason"]
    (d,) = doc["deltas"]
    assert d["blocks"] == 3 and d["dropped"] == 1 and d["verdict"]["kind"] == "slower"


def test_every_node_runs_every_cell_on_each_matching_node(cluster, cli, write_study, baked_worker, tmp_path):
    baked_worker({"config_factor": {"B": 2.0}})
    res, doc = run(cli, write_study, tmp_path, study_text(extra='hosts = ["every-node", "label:cpu=fake"]\n'),
                   "--executor", "ray", "--address", cluster)
    assert res.code == 0, res.err
    assert doc["host"]["ray"]["every_node"] is True
    (d,) = doc["deltas"]
    assert d["blocks"] == 3 and d["verdict"]["kind"] == "slower"
    assert {r["host"]["ray_node"]["address"] for r in doc["repetitions"]} == {"127.0.0.1"}


def test_a_label_no_node_has_is_one_line_naming_it(cluster, cli, write_study, baked_worker, tmp_path):
    baked_worker({})
    res, doc = run(cli, write_study, tmp_path, study_text(extra='hosts = ["label:cpu=icelake"]\n'),
                   "--executor", "ray", "--address", cluster)
    line = assert_one_line_error(res, "study.toml:", "hosts", "label:cpu=icelake", "cpu=fake", code=2)
    assert cluster.split(":")[0] in line and doc is None


def test_a_node_with_another_cryptoperf_version_is_refused(cluster, cli, write_study, baked_worker, tmp_path,
                                                            monkeypatch):
    """The driver says 9.9.9; the node imports this tree's cryptoperf: refused, one line
    naming the node and both versions, before anything is stored."""
    import cryptoperf
    baked_worker({})
    monkeypatch.setattr(cryptoperf, "__version__", "9.9.9")
    res, doc = run(cli, write_study, tmp_path, study_text(), "--executor", "ray", "--address", cluster)
    assert_one_line_error(res, "Ray node 127.0.0.1", "is refused", f"cryptoperf {_real_version()}",
                          "cryptoperf 9.9.9", code=1)
    assert doc is None and not (tmp_path / "runs.sqlite").exists()


def _real_version() -> str:
    text = (SRC / "cryptoperf" / "__init__.py").read_text()
    return text.split('__version__ = "', 1)[1].split('"', 1)[0]


def test_an_unreachable_or_malformed_address_is_one_line(write_study, fake_worker, tmp_path):
    """In a process of its own: the CLI's one-line errors, read from its stderr."""
    ray_or_skip()
    path = write_study(study_text())
    port = _free_port()  # nothing listens there
    store = tmp_path / "s.sqlite"
    res = run_subprocess("study", path, "--executor", "ray", "--address", f"127.0.0.1:{port}", "--store", store)
    assert_one_line_error(res, f"cannot reach a Ray cluster at 127.0.0.1:{port}", "refused", code=1)
    res = run_subprocess("study", path, "--executor", "ray", "--address", "head-without-port", "--store", store)
    assert_one_line_error(res, "--address 'head-without-port' is not HOST:PORT", code=2)
    assert not store.exists()


def test_without_an_address_a_private_local_ray_instance_runs_the_study(write_study, baked_worker, tmp_path):
    """No --address and no RAY_ADDRESS: cryptoperf starts a Ray instance of its own on this
    machine (one slot), runs the study there and stops it."""
    ray_or_skip()
    baked_worker({"config_factor": {"B": 2.0}})
    path = write_study(study_text())
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = str(SRC)
    p = subprocess.run([sys.executable, "-m", "cryptoperf", "study", str(path), "--executor", "ray",
                        "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"), "--no-report"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(next((tmp_path / "out").glob("t-*.json")).read_text())
    assert doc["host"]["ray"]["address"].startswith("this machine")
    assert doc["deltas"][0]["verdict"]["kind"] == "slower"
    assert all(r["host"]["ray_node"]["node_id"] for r in doc["repetitions"])


# --------------------------------------------------------------------------- without a cluster


@pytest.mark.parametrize("line, problem", [
    ('hosts = ["cpu=icelake"]', 'element 1 ("cpu=icelake"): not a node selector'),
    ('hosts = ["label:cpu"]', "a label selector is KEY=VALUE"),
    ('hosts = []', "must not be empty"),
    ('hosts = ["resource:qat", "resource:qat"]', "lists a selector twice"),
    ('hosts = 3', 'must be a list of node selectors ("label:KEY=VALUE", "resource:NAME") or "every-node"'),
])
def test_a_malformed_hosts_is_one_study_error_at_its_line(line, problem):
    from cryptoperf import study
    text = study_text(extra=line + "\n")
    with pytest.raises(study.StudyError) as e:
        study.parse(text, "s.toml")
    assert problem in str(e.value) and e.value.line == text.splitlines().index(line) + 1


def test_hosts_parse_into_selectors_and_every_node():
    from cryptoperf import study
    s = study.parse(study_text(extra='hosts = ["every-node", "label:cpu=icelake"]\n').replace(
        'hash = "sha512"', 'hash = "sha512"\nhosts = ["resource:qat"]'), "s.toml")
    assert s.every_node and [h.text for h in s.hosts] == ["label:cpu=icelake"]
    assert [h.text for h in s.configuration("B").hosts] == ["resource:qat"] and s.configuration("A").hosts == ()
    assert s.hosts[0].matches({"cpu": "icelake"}, {}) and not s.hosts[0].matches({"cpu": "zen4"}, {})
    assert s.configuration("B").hosts[0].matches({}, {"qat": 1.0})
    with pytest.raises(study.StudyError, match="applies to the whole study"):
        study.parse(study_text().replace('hash = "sha512"', 'hash = "sha512"\nhosts = "every-node"'), "s.toml")


def test_without_ray_installed_executor_ray_is_one_line(write_study, fake_worker, tmp_path):
    """A `ray` that cannot be imported (as when it is not installed): one line with the
    install command, exit 1."""
    shadow = tmp_path / "no-ray"
    (shadow / "ray").mkdir(parents=True)
    (shadow / "ray" / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    path = write_study(study_text())
    res = run_subprocess("study", path, "--executor", "ray", "--store", tmp_path / "s.sqlite",
                         env={"PYTHONPATH": str(shadow)})
    assert_one_line_error(res, "--executor ray needs Ray, which is not installed", "pip install", code=1)


def test_the_local_executor_never_imports_ray(write_study, fake_worker, tmp_path):
    path = write_study(study_text())
    code = ("import sys; from cryptoperf.cli import main; "
            f"rc = main(['study', {str(path)!r}, '--store', {str(tmp_path / 's.sqlite')!r}, "
            f"'--out', {str(tmp_path / 'out')!r}, '--no-report']); "
            "print('RC', rc, 'RAY', 'ray' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "RC 0 RAY False" in p.stdout, (p.stdout, p.stderr)


def test_every_node_blocks_never_pair_two_machines():
    """Blocks of two nodes are numbered apart, each block task runs on one node, and the
    analysis pairs within those blocks: node X, where B costs 2× A, and node Y, where they
    cost the same, give per-block ratios 2 and 1 — never A of one machine against B of the
    other."""
    pytest.importorskip("hdrh")
    from cryptoperf import schedule
    from cryptoperf.run.ray import Node, split_blocks
    cells = [Cell(c, "openssl", "hash", "sha256", {}, 1024) for c in ("A", "B")]
    x = Node("x" * 56, "10.0.0.1", "x", {}, {"cryptoperf_slot": 1})
    y = Node("y" * 56, "10.0.0.2", "y", {}, {"cryptoperf_slot": 1})
    reps = schedule.blocks(cells, 1, 3, seed=1)
    tasks = split_blocks(reps, {cells[0].group: [x, y]})
    assert len(tasks) == 6 and {t.node.id for t in tasks} == {x.id, y.id}
    assert all(len({r.block for r in t.reps}) == 1 for t in tasks)
    by_node = {n.id: {t.reps[0].block for t in tasks if t.node.id == n.id} for n in (x, y)}
    assert by_node[x.id] == {1, 3, 5} and by_node[y.id] == {2, 4, 6}
    p50 = {(x.id, "A"): 1000, (x.id, "B"): 2000, (y.id, "A"): 3000, (y.id, "B"): 3000}
    outcomes = [_measured(r, p50[(t.node.id, r.cell.configuration)]) for t in tasks for r in t.reps]
    summaries = analysis.summarize(outcomes)
    a, b = (summaries[c.key] for c in cells)
    ratios = sorted(round(b.p50_by_block_ns[k] / a.p50_by_block_ns[k], 6) for k in a.p50_by_block_ns)
    assert ratios == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    # with plain blocks (no every-node) one task per block and group, blocks as scheduled
    plain = split_blocks(reps)
    assert [t.reps for t in plain] == [reps[i:i + 2] for i in range(0, 6, 2)] and all(t.node is None for t in plain)


def _measured(rep: Repetition, p50_ns: int) -> Outcome:
    """An ok outcome whose p50 is ``p50_ns`` (a one-value histogram)."""
    from hdrh.histogram import HdrHistogram
    h = HdrHistogram(1, 10**9, 3)
    h.record_value(p50_ns, 100)
    from cryptoperf.result import decode
    result = decode({"status": "ok", "histogram": h.encode().decode(), "ops": 100, "wall_ns": 100 * p50_ns,
                     "batch": 1, "cpu_ns_total": 100 * p50_ns, "threads": 1})
    return Outcome(rep, "ok", "", result, stats.latency_from_histogram(result.histogram), stats.throughput(result))
