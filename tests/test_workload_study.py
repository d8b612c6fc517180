"""Workload operations in study files: params, load levels, the cells they expand to, and the
checks made before anything runs (bad level, unknown parameter or value, port in use, more
connections than file descriptors)."""

from __future__ import annotations

import json
import resource
import socket
from pathlib import Path

import pytest

from conftest import WORKER_HELLO, worker_rules
from cryptoperf import levels, schedule, study, workdir
from cryptoperf.engine import preflight
from cryptoperf.errors import StudyError
from cryptoperf.hello import WorkerRules

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

RULES = worker_rules()

STUDY = """\
[study]
name = "tls"
baseline = "rsa"
backends = ["aws-lc"]
repetitions = 3

[[configuration]]
name = "rsa"
cert = "rsa2048"

[[configuration]]
name = "ec"
cert = "ecdsa-p256"

[[operation]]
label = "full handshake"
op = "tls-handshake"
params = { cert = "{cert}", group = "x25519", session = "full" }
loads = ["closed:1", "closed:4", "open:200"]
"""


def checked(text: str) -> study.Study:
    return study.check_against_worker(study.parse(text, "s.toml"), RULES)


def error(text: str) -> str:
    with pytest.raises(StudyError) as e:
        checked(text)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_the_hello_lists_the_workloads_and_their_params():
    assert {"tls-handshake", "tls-bulk", "ike-phase1"} <= set(RULES.workloads)
    assert {"cert", "group", "session", "load", "mode", "port"} <= RULES.op_params["tls-handshake"]
    assert "x25519mlkem768" in RULES.param_values["group"]
    assert "modp2048" in RULES.param_values["dh_group"]


def test_each_load_level_is_its_own_row_with_params_substituted():
    cells = schedule.expand(checked(STUDY))
    assert len(cells) == 2 * 3
    labels = sorted({c.label for c in cells})
    assert labels == ["full handshake @ 200/s", "full handshake @ c=1", "full handshake @ c=4"]
    rsa = [c for c in cells if c.configuration == "rsa"]
    assert all(c.params["cert"] == "rsa2048" and c.params["group"] == "x25519" for c in rsa)
    assert {c.load for c in rsa} == {"closed:1", "closed:4", "open:200"}
    assert all(c.is_workload for c in cells)
    # A workload's run request has one thread and no batch: its level sets the concurrency.
    rep = schedule.blocks(cells, 1, 1, seed=1, batches={c.group: 64 for c in cells})[0]
    req = schedule.run_request(rep, schedule.Settings(seconds=0.5, warmup_s=0.1, threads=8, timeout_s=60))
    assert req["threads"] == 1 and req["batch"] is None and req["params"]["load"] in ("closed:1", "closed:4", "open:200")


def test_a_workload_without_loads_runs_one_closed_connection():
    text = STUDY.replace('loads = ["closed:1", "closed:4", "open:200"]\n', "")
    cells = schedule.expand(checked(text))
    assert {c.load for c in cells} == {"closed:1"}
    assert {c.label for c in cells} == {"full handshake @ c=1"}


@pytest.mark.parametrize("loads, fragment", [
    ('["closed:0"]', "load 'closed:0' is not one of closed:N"),
    ('["half-open:3"]', "is not one of"),
    ('["open:-5"]', "is not one of"),
    ('["closed:2", "closed:2"]', "lists a load level twice"),
    ('["open:100MB/s"]', "is a byte rate; only storage takes one"),
    ("[" + ", ".join(f'"open:{i}"' for i in range(1, 1002)) + "]", "lists 1001 load levels; at most 1000"),
])
def test_bad_load_levels_are_one_line_at_the_key(loads, fragment):
    text = STUDY.replace('["closed:1", "closed:4", "open:200"]', loads)
    msg = error(text)
    assert fragment in msg and "loads" in msg and "s.toml:" in msg


@pytest.mark.parametrize("params, fragment", [
    ('{ cert = "{cert}", grup = "x25519" }', "has no parameter 'grup'; did you mean 'group'?"),
    ('{ cert = "{cert}", group = "x448" }', "group 'x448' is not one of"),
    ('{ cert = "{cert}", load = "closed:2" }', "goes in loads"),
    ('{ cert = "{cert}", group = "{undefined}" }', "'{undefined}' is not defined"),
    ('{ cert = 1.5 }', "must be a string, an integer or a boolean"),
    ('{ cert = "{cert}", session = true }', "session 'true' is not one of"),
])
def test_bad_workload_params_are_one_line(params, fragment):
    text = STUDY.replace('{ cert = "{cert}", group = "x25519", session = "full" }', params)
    assert fragment in error(text)


def test_params_and_loads_on_a_primitive_are_errors():
    text = STUDY.replace('op = "tls-handshake"', 'op = "rsa2048-sign"')
    assert "is a primitive operation; params applies to workloads" in error(text)


def test_a_port_in_use_is_refused_before_anything_runs():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        text = STUDY.replace('session = "full" }', f'session = "full", port = {port} }}')
        msg = error(text)
    assert f"port {port} on 127.0.0.1 is in use" in msg


def test_more_connections_than_descriptors_is_refused(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda _what: (256, 4096))
    text = STUDY.replace('"open:200"]', '"closed:1000"]')
    msg = error(text)
    assert "needs about 1064 file descriptors" in msg and "ulimit -n" in msg
    # memory mode holds no sockets
    text = text.replace('session = "full" }', 'session = "full", mode = "memory" }')
    checked(text)


def test_a_rate_sweep_doubles_up_to_its_top():
    assert levels.expand_loads(["closed:1", "open:100..700"]) == [
        "closed:1", "open:100", "open:200", "open:400", "open:700"]
    assert levels.expand_loads(["open:50..200/4"]) == ["open:50/4", "open:100/4", "open:200/4"]
    text = STUDY.replace('["closed:1", "closed:4", "open:200"]', '["open:100..400"]')
    assert {c.label for c in schedule.expand(checked(text))} == {
        "full handshake @ 100/s", "full handshake @ 200/s", "full handshake @ 400/s"}
    assert "doubles into" in error(STUDY.replace('["closed:1", "closed:4", "open:200"]', '["open:1..1000000"]'))


def test_load_labels_and_levels():
    assert levels.parse_load("closed:10").label == "c=10"
    assert levels.parse_load("closed:1@200").label == "c=1 paced 200/s"
    assert levels.parse_load("open:500").label == "500/s"
    assert levels.parse_load("open:500/4").connections == 4
    assert levels.parse_load("open:500").level == 500.0
    assert levels.parse_load("closed:16").level == 16.0
    # an open level's default threads and the most connections are the worker's (its hello)
    assert levels.parse_load("open:500").connections is None
    assert levels.parse_load("open:500", RULES.limits).connections == RULES.limits["open_threads"]
    assert levels.parse_load("closed:1025").connections == 1025  # the file alone: syntax only
    with pytest.raises(ValueError, match=r"1025 connections \(or threads\), above the worker's limit of 1024 "
                                         r"\(max_concurrency in its hello\)"):
        levels.parse_load("closed:1025", RULES.limits)
    assert "above the worker's limit of 1024" in error(STUDY.replace('"open:200"]', '"open:200/2000"]'))


def test_shipped_workload_studies_expand():
    from conftest import ROOT
    for name, n in (("tls-handshake.toml", 32), ("ike-phase1.toml", 32)):
        s = study.check_against_worker(study.load(ROOT / "studies" / name), RULES)
        assert len(schedule.expand(s)) == n, name


def test_the_cli_refuses_a_port_in_use_and_a_bad_level_with_one_line(fake_worker, write_study, cli):
    from conftest import assert_one_line_error
    fake_worker()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        path = write_study(STUDY.replace('session = "full" }', f'session = "full", port = {port} }}'))
        res = cli("study", path)
        assert_one_line_error(res, f"port {port} on 127.0.0.1 is in use", "params", code=2)
    path = write_study(STUDY.replace('"open:200"]', '"open:fast"]'))
    assert_one_line_error(cli("study", path), "load 'open:fast' is not one of", code=2)
    # a level the host cannot serve: more connections than file descriptors
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        path = write_study(STUDY.replace('"open:200"]', '"closed:1000"]'))
        assert_one_line_error(cli("study", path), "needs about 1064 file descriptors", code=2)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_by_load_decides_closed_levels_on_throughput_and_open_ones_on_latency(fake_worker, write_study, cli, tmp_path):
    import json
    from cryptoperf import stats
    assert stats.metric_for("by_load", "closed:4") == "throughput"
    assert stats.metric_for("by_load", "open:200") == "latency"
    assert stats.metric_for("by_load", None) == "latency"
    assert stats.metric_for("cpu_per_op", "closed:4") == "cpu_per_op"
    fake_worker({"config_factor": {"ec": 0.5}})
    text = STUDY.replace('repetitions = 3', 'repetitions = 3\nseconds = 0.01\nwarmup_s = 0\nverdict_on = "by_load"')
    res = cli("study", write_study(text), "--out", tmp_path / "out", "--no-report")
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    metrics = {d["label"]: d["verdict"]["metric"] for d in doc["deltas"] if d.get("verdict")}
    assert metrics == {"full handshake @ c=1": "throughput", "full handshake @ c=4": "throughput",
                       "full handshake @ 200/s": "p50 latency"}, metrics
    assert "verdicts on throughput (2 comparisons), p50 latency (1)" in " ".join(res.out.split())


def test_speed_runs_a_workload_with_threads_as_connections(fake_worker, cli):
    import json
    from conftest import assert_one_line_error
    fake_worker()
    res = cli("speed", "--op", "tls-handshake", "--backend", "aws-lc", "--threads", "3", "--seconds", "0.01",
              "--warmup", "0", "--json", "--no-store")
    assert res.code == 0, res.err
    (row,) = json.loads(res.out)["results"]
    assert row["status"] == "ok" and row["params"]["load"] == "closed:3"
    assert_one_line_error(cli("speed", "--op", "tls-handshake", "--param", "load=warp:9", "--no-store"),
                          "--param load: load 'warp:9' is not one of", code=2)
    assert_one_line_error(cli("speed", "--op", "tls-handshake", "--param", "size_bytes=9", "--no-store"),
                          "give message sizes with --size", code=2)


def test_a_combination_a_library_lacks_stops_the_study_before_it_measures(fake_worker, write_study, cli, tmp_path):
    from conftest import assert_one_line_error
    fake_worker()
    text = (STUDY.replace('backends = ["aws-lc"]', 'backends = ["aws-lc", "ring"]')
            .replace('group = "x25519"', 'group = "{group}"')
            .replace('cert = "rsa2048"', 'cert = "rsa2048"\ngroup = "x25519"')
            .replace('cert = "ecdsa-p256"', 'cert = "ecdsa-p256"\ngroup = "x25519mlkem768"'))
    store = tmp_path / "never.sqlite"
    res = cli("study", write_study(text), "--store", store)
    line = assert_one_line_error(res, "configuration 'ec' on ring: ring has no ML-KEM", code=2)
    assert "s.toml" in line or "study.toml" in line
    assert not store.exists() or "repetition" not in store.read_bytes().decode("latin-1")
    # the same check in a dry run
    assert_one_line_error(cli("study", write_study(text), "--dry-run"), "ring has no ML-KEM", code=2)


def test_a_transfer_reports_mb_per_s_and_cpu_per_byte_on_each_side(fake_worker, write_study, cli, tmp_path):
    fake_worker()
    text = (STUDY.replace('op = "tls-handshake"', 'op = "tls-bulk"\nsizes = ["1MiB"]')
            .replace(', session = "full" }', ' }').replace('repetitions = 3', 'repetitions = 3\nseconds = 0.01\nwarmup_s = 0'))
    res = cli("study", write_study(text), "--out", tmp_path / "out")
    assert res.code == 0, res.err
    md = next((tmp_path / "out").glob("*.md")).read_text()
    section = md[md.index("## Throughput vs load"):]
    assert "MB/s" in section and "ns/B" in section


def test_a_file_workload_repetition_dir_is_private_and_always_removed(tmp_path):
    import os
    import stat
    with workdir.repetition_dir(True, str(tmp_path)) as d:
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700 and d.startswith(str(tmp_path))
        (Path(d) / "data").write_bytes(b"x" * 4096)
    assert not Path(d).exists()
    with pytest.raises(RuntimeError):
        with workdir.repetition_dir(True, str(tmp_path)) as d:
            raise RuntimeError("the worker was killed")
    assert not Path(d).exists()
    with workdir.repetition_dir(False, str(tmp_path)) as none:
        assert none is None


def test_an_unwritable_work_dir_is_one_line(tmp_path):
    import os
    # A path under a regular file can never be a directory, whoever runs the test (root can
    # write a 0500 directory, so that is tried only when it can fail).
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    msg = workdir.writable_problem(blocker / "work", 0)
    assert msg and msg.startswith(f"work directory {blocker / 'work'} is not writable") and "\n" not in msg
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if not os.access(ro, os.W_OK):
            assert "is not writable" in (workdir.writable_problem(ro, 0) or "")
    finally:
        ro.chmod(0o700)


def test_a_work_dir_without_room_for_the_files_is_one_line(tmp_path, monkeypatch):
    import shutil as sh
    usage = sh.disk_usage(tmp_path)
    monkeypatch.setattr(sh, "disk_usage", lambda p: usage._replace(free=10 << 20))
    msg = workdir.writable_problem(tmp_path, 128 << 20)
    assert msg == (f"work directory {tmp_path} has 10 MiB free, the study's files need 128 MiB; "
                   "free space or choose a smaller file_bytes")


def test_a_workload_the_orchestrator_never_heard_of_is_planned_from_its_spec_alone(tmp_path):
    """A sixth workload announced only in hello (a name no Python module knows, with a spec of
    its own) is checked, expanded, sent and sized by its spec: its level kinds, byte rate, work
    directory, memory and result sizing — nothing in the orchestrator names it."""
    hello = json.loads(json.dumps(WORKER_HELLO))
    toy = dict(json.loads(json.dumps(hello["op_params"]["tls-handshake"])), params=["chunk", "load"],
               defaults={"chunk": 1000, "load": "closed:2"}, levels=["closed", "open_bytes"], modes=[],
               default_mode="file", server=False, needs_dir=True, bytes_per_tx_param="chunk",
               file_bytes_param="chunk", required=[])
    toy["sizing"]["memory"].update(base_bytes=1000, socket_bytes=0, per_connection_bytes=10,
                                   per_connection_param={"chunk": 3})
    toy["sizing"].update(result_bytes=500, result_bytes_per_s=0, result_bytes_per_target=0)
    hello["op_params"]["toy-io"] = toy
    hello["ops"].append("toy-io")
    rules = WorkerRules.from_hello(dict(hello, backends=[{"backend": "aws-lc"}]))
    text = STUDY.replace('op = "tls-handshake"', 'op = "toy-io"').replace(
        'params = { cert = "{cert}", group = "x25519", session = "full" }', "params = { chunk = 2000 }").replace(
        '"open:200"]', '"open:10MB/s"]').replace('cert = "rsa2048"', "").replace('cert = "ecdsa-p256"', "")
    assert "'toy-io' has no parameter 'cert'" in str(_error_with(rules, STUDY.replace('op = "tls-handshake"',
                                                                                      'op = "toy-io"')))
    s = study.check_against_worker(study.parse(text, "s.toml"), rules)
    cells = schedule.expand(s)
    assert {c.spec.name for c in cells} == {"toy-io"} and {c.load for c in cells} == {"closed:1", "closed:4",
                                                                                   "open:10MB/s"}
    rate = next(c for c in cells if c.load == "open:10MB/s")
    assert rate.worker_params()["load"] == f"open:{10e6 / 2000:.6g}"  # its bytes per transaction: chunk
    four = next(c for c in cells if c.load == "closed:4")
    assert preflight.cell_memory(four, 1, rules.limits) == (1000 + 4 * (10 + 3 * 2000),
                                                           "4 connection(s) in one process (file mode)")
    assert preflight.result_bytes(four, seconds=5) == preflight.ROW_BYTES + 500
    with workdir.repetition_dir(four.spec.needs_dir, str(tmp_path)) as d:
        assert Path(d).is_dir()
    # its byte rate is named where another workload is given one
    assert "is a byte rate; only storage and toy-io take one" in str(_error_with(rules, STUDY.replace('"open:200"]', '"open:1MB/s"]')))


def _error_with(rules, text: str) -> StudyError:
    with pytest.raises(StudyError) as e:
        study.check_against_worker(study.parse(text, "s.toml"), rules)
    return e.value
