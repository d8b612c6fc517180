"""An operation's ``threads = [...]``: a primitive measured at several thread counts (a device's
sessions), each count a row of its own, its requests asking that many threads; refused, at the
key, on a workload, beside ``loads``, twice, or above the worker's limit."""

import pytest

from conftest import worker_rules
from cryptoperf import schedule, study
from cryptoperf.errors import StudyError
from cryptoperf.model import Repetition
from cryptoperf.study import check_against_worker

pytestmark = pytest.mark.parallel

STUDY = """\
[study]
name = "sessions"
baseline = "software"
repetitions = 3

[[configuration]]
name = "software"
backend = "openssl"

[[configuration]]
name = "other"
backend = "aws-lc"

[[operation]]
label = "sign"
op = "rsa2048-sign"
{extra}
"""


def parsed(extra: str, tmp_path):
    return check_against_worker(study.parse(STUDY.format(extra=extra), str(tmp_path / "s.toml")), worker_rules())


def test_each_thread_count_is_a_row_and_its_requests_ask_that_many(tmp_path):
    s = parsed("threads = [1, 2, 4]", tmp_path)
    cells = schedule.expand(s)
    assert sorted({c.label for c in cells}) == ["sign @ 1 thread", "sign @ 2 threads", "sign @ 4 threads"]
    settings = schedule.Settings(seconds=0.1, warmup_s=0, threads=1, timeout_s=10)
    for c in cells:
        req = schedule.run_request(Repetition(c, 1, 0), settings)
        assert req["threads"] == c.threads == int(c.label.split("@ ")[1].split()[0])
        assert "threads" not in req["params"]  # not a worker parameter
    # without the key, the study's threads and the label as written
    (c, *_) = schedule.expand(parsed("", tmp_path))
    assert c.label == "sign" and c.threads is None
    assert schedule.run_request(Repetition(c, 1, 0), settings)["threads"] == 1


@pytest.mark.parametrize("extra,words", [
    ("threads = [1, 1]", "lists a thread count twice"),
    ("threads = [0]", "threads"),
    ("threads = [100000]", "above the worker's limit"),
])
def test_bad_thread_counts_are_refused_at_the_key(tmp_path, extra, words):
    with pytest.raises(StudyError, match=words) as e:
        parsed(extra, tmp_path)
    assert "field 'threads'" in str(e.value)


def test_threads_is_not_for_a_workload(tmp_path):
    text = STUDY.replace('op = "rsa2048-sign"', 'op = "tls-handshake"')
    with pytest.raises(StudyError, match="concurrency is its load level"):
        check_against_worker(study.parse(text.format(extra="threads = [2]"), str(tmp_path / "s.toml")), worker_rules())
    with pytest.raises(StudyError, match="concurrency is its load level"):
        study.parse(text.format(extra='threads = [2]\nloads = ["closed:2"]'), str(tmp_path / "s.toml"))
