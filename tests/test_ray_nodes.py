"""A job's slices on several Ray nodes (``[study] slices_on = "nodes"``): a two-node Ray cluster
on this machine (two `ray start` processes, each its own raylet with one cryptoperf_slot and
its own label) runs a small fleet-job study through the real CLI and the real worker, each
repetition's two slices as sub-jobs on the two nodes, merged into one job's result that
records which node ran which slice. User errors (slices_on without Ray, more slices than
nodes) are one line each.

Skipped, saying why, without Ray or a real worker; failed instead under
CRYPTOPERF_REQUIRE_RAY=1 / CRYPTOPERF_REQUIRE_WORKER=1. Nothing asserts how fast anything is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SRC, assert_one_line_error, need_real_worker, run_subprocess
from real_workers import find
from test_ray import _free_port, ray_cli, ray_or_skip, stop_group

#: Two nodes make a multi-node cluster, which Ray refuses on the loopback-only setting
#: test_ray.py uses (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0): these nodes, the probe and the CLI
#: run with it on, on the address Ray finds for this machine. Both nodes, the probe and the
#: CLI authenticate with the session's token (conftest._private_ray_token), set explicitly for
#: every one of them: never a file in the home directory that an earlier run may have left.
MULTI_NODE = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "RAY_AUTH_MODE": os.environ["RAY_AUTH_MODE"],
              "RAY_AUTH_TOKEN_PATH": os.environ["RAY_AUTH_TOKEN_PATH"]}

STUDY = """
[study]
name = "slices-on-nodes"
baseline = "sha256"
backends = ["aws-lc"]
repetitions = 3
seed = 1
timeout_s = 120
{extra}

[[configuration]]
name = "sha256"
digest = "sha256"

[[configuration]]
name = "sha384"
digest = "sha384"

[[operation]]
label = "audit"
op = "fleet-job"
params = {{ job = "audit", checks = 4, slices = {slices}, cap = 5, agents = 1, rtt_ms = 5 }}
loads = ["targets:20"]
"""


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """Two Ray nodes on this machine (a head and a second raylet joining it), each 1 CPU, one
    cryptoperf_slot, a small object store and its own label (node=a, node=b); yields the head's
    address once both are alive, and stops both (their process groups) at the end."""
    ray_or_skip()
    real, why = find()
    need_real_worker(real, why)
    port = _free_port()
    logs = tmp_path_factory.mktemp("ray2")
    env = dict(os.environ, **MULTI_NODE)
    common = ["--block", "--num-cpus=1", '--resources={"cryptoperf_slot": 1}',
              "--object-store-memory=80000000", "--disable-usage-stats"]
    procs: list[subprocess.Popen] = []

    def start(args: list[str], name: str) -> None:
        with open(logs / f"{name}.log", "w") as out:
            procs.append(subprocess.Popen([ray_cli(), "start", *args, *common], stdout=out, stderr=subprocess.STDOUT,
                                          env=env, start_new_session=True))
    try:
        start(["--head", f"--port={port}", "--include-dashboard=false", "--labels=node=a"], "head")
        address = f"127.0.0.1:{port}"
        _wait_for_nodes(address, 1, procs, logs)
        start([f"--address={address}", "--labels=node=b"], "second")
        _wait_for_nodes(address, 2, procs, logs)
        yield address
    finally:
        for p in reversed(procs):
            stop_group(p)


def _wait_for_nodes(address: str, n: int, procs: list, logs: Path) -> None:
    """Wait (at most 90 s) until ``n`` nodes of the cluster at ``address`` are alive, asked in a
    child process (this one never connects to Ray)."""
    probe = ("import sys; from cryptoperf.run.ray import import_ray; ray = import_ray(); "
             "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
             "print(sum(1 for x in ray.nodes() if x['Alive']))")  # import_ray: the token, as the driver sends it
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""), **MULTI_NODE)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        out = subprocess.run([sys.executable, "-c", probe, address], capture_output=True, text=True, timeout=60, env=env)
        if out.stdout.strip().isdigit() and int(out.stdout.strip()) >= n:
            return
        time.sleep(1)
    pytest.fail("the Ray nodes did not start: " + " | ".join(p.read_text()[-800:] for p in sorted(logs.glob("*.log"))))


def _study(tmp_path: Path, slices: int = 2, extra: str = 'slices_on = "nodes"') -> Path:
    path = tmp_path / "study.toml"
    path.write_text(STUDY.format(slices=slices, extra=extra))
    return path


def test_a_jobs_slices_run_on_both_nodes_and_the_result_says_which_ran_which(two_nodes, tmp_path):
    store = tmp_path / "runs.sqlite"
    res = run_subprocess("study", _study(tmp_path), "--executor", "ray", "--address", two_nodes, "--store", store,
                         "--out", tmp_path / "out", "--no-report", timeout=900, env=MULTI_NODE)
    assert res.code == 0, res.err
    from cryptoperf.store import stored_run as stored
    with stored.open_store(store) as st:
        run = stored.load_run(st)
    measured = [o for o in run.outcomes if not o.repetition.calibration and not o.superseded]
    assert sorted((o.repetition.cell.configuration, o.repetition.block) for o in measured) == [
        (c, b) for c in ("sha256", "sha384") for b in (1, 2, 3)]
    node_ids = set()
    for o in measured:
        assert o.status == "ok", o.reason
        raw = o.result.raw
        f = raw["fleet"]
        subs = f["sub_jobs"]
        # slice 0 and slice 1 each ran on its own node, and the result says which
        assert [s["slice"] for s in subs] == [0, 1]
        assert subs[0]["node_id"] and subs[1]["node_id"] and subs[0]["node_id"] != subs[1]["node_id"]
        assert all(s["address"] and s["hostname"] for s in subs)
        node_ids |= {s["node_id"] for s in subs}
        # the job as one: every target once, each on its slice, all completed
        rows = f["records"]["rows"]
        assert sorted(r[0] for r in rows) == list(range(20))
        assert all(r[1] == r[0] % 2 and r[2] == "ok" for r in rows)
        assert (f["targets"], f["slices"], f["completed"], f["failed"], raw["ops"]) == (20, 2, 20, 0, 20)
        assert [s["completed"] for s in subs] == [10, 10]
        # the job's time spans every sub-job's
        assert all(raw["wall_ns"] >= s["wall_ns"] for s in subs)
        # read exactly as a one-host job: the params as the study gave them, the figures' decoder
        assert "slice_index" not in raw["params"] and "start_at_unix_ns" not in raw["params"]
        from cryptoperf.workloads import fleet
        job = fleet.decode(o.result)
        assert job.slices == 2 and job.completed == 20 and len(job.targets_) == 20
        assert {p.role for p in job.processes} == {"coordinator", "slice", "agent"}
        assert sorted(p.index for p in job.processes if p.role == "slice") == [0, 1]
        # two nodes: each pinned its slice and agents apart on its own CPUs, which the saturation
        # figures must not read as one host's
        assert job.nodes == 2 and job.cpus_apart() is None
    assert len(node_ids) == 2


def test_slices_on_nodes_needs_ray_and_as_many_nodes_as_slices(two_nodes, tmp_path):
    store = tmp_path / "runs.sqlite"
    res = run_subprocess("study", _study(tmp_path), "--store", store, "--no-report")
    assert_one_line_error(res, "study.toml", "slices_on", "--executor ray")
    res = run_subprocess("study", _study(tmp_path, slices=3), "--executor", "ray", "--address", two_nodes,
                         "--store", store, "--no-report", timeout=300, env=MULTI_NODE)
    # (Ray's C++ core may say on stderr that it read its log level: that line is Ray's, not an error)
    res.err = "\n".join(line for line in res.err.splitlines() if "logging.cc" not in line)
    assert_one_line_error(res, "study.toml", "slices_on", "3 slices of fleet-job in configuration 'sha256'", "only 2 node(s)")
    res = run_subprocess("study", _study(tmp_path, extra='slices_on = "rack"'), "--store", store, "--no-report")
    assert_one_line_error(res, "study.toml", "slices_on", "'host', 'nodes'")
