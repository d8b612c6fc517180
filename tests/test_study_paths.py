"""Paths a study file can name: it cannot make any process read or write outside its work
directory (docs/reliability.md, "Paths a study file can name").

A study names three paths: ``[study] work_dir`` (where a file workload's repetitions get their
private directories), tls-handshake's ``ca_file`` (a certificate the worker reads) and, refused,
storage's ``dir`` (cryptoperf sets it for each repetition). ``..`` that leads out, symbolic
links, a NUL or an empty path are each one line with exit 2, before anything runs; the
repetition directory is made private (0700, mkdtemp) directly inside a root that is not a link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conftest import assert_one_line_error, worker_rules
from cryptoperf import study, workdir
from cryptoperf.errors import StudyError, WorkDirError
from cryptoperf.report.json import result_path

STUDY = """\
[study]
name = "paths"
baseline = "clear"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0
{extra}

[[configuration]]
name = "clear"
scheme = "clear"

[[configuration]]
name = "xts"
scheme = "aes-256-xts"

[[operation]]
label = "read"
op = "storage"
params = {{ scheme = "{{scheme}}", block_bytes = "64KiB", file_bytes = "1MiB"{params} }}
"""

TLS = """\
[study]
name = "tls"
baseline = "a"
backends = ["openssl"]
repetitions = 3
seconds = 0.01
warmup_s = 0

[[configuration]]
name = "a"
{var_a}

[[configuration]]
name = "b"
{var_b}

[[operation]]
label = "handshake"
op = "tls-handshake"
params = {{ connect = "127.0.0.1:4433", ca_file = {ca_file} }}
"""


def storage_study(tmp_path: Path, extra: str = "", params: str = "") -> Path:
    p = tmp_path / "studies" / "s.toml"
    p.parent.mkdir(exist_ok=True)
    p.write_text(STUDY.format(extra=extra, params=params))
    return p


def dry_run_error(cli, fake_worker, path: Path, *fragments: str) -> str:
    """``cryptoperf study PATH --dry-run`` fails with one line holding ``fragments``, exit 2."""
    fake_worker()
    res = cli("study", path, "--dry-run")
    return assert_one_line_error(res, *fragments, code=2)


# --------------------------------------------------------------------------- work_dir


@pytest.mark.parametrize("work_dir", ["../outside", "work/../../outside", "..", "./../x"])
def test_a_relative_work_dir_leading_out_of_the_study_directory_is_refused(cli, fake_worker, tmp_path, work_dir):
    p = storage_study(tmp_path, f'work_dir = "{work_dir}"')
    line = dry_run_error(cli, fake_worker, p, "s.toml:8", "field 'work_dir'", "through '..'")
    assert str(p.parent) in line


def test_a_relative_work_dir_is_taken_from_the_study_files_directory(tmp_path):
    p = storage_study(tmp_path, 'work_dir = "scratch/../work"')
    s = study.load(p)
    assert s.work_dir == str(p.parent / "work")


def test_an_absolute_work_dir_is_allowed_but_not_with_dotdot(cli, fake_worker, tmp_path):
    s = study.load(storage_study(tmp_path, f'work_dir = "{tmp_path / "w"}"'))
    assert s.work_dir == str(tmp_path / "w")
    p = storage_study(tmp_path, f'work_dir = "{tmp_path}/w/../../etc"')
    dry_run_error(cli, fake_worker, p, "field 'work_dir'", "'..' component")


def test_a_symlinked_work_dir_is_refused(cli, fake_worker, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    p = storage_study(tmp_path, f'work_dir = "{tmp_path / "link"}"')
    line = dry_run_error(cli, fake_worker, p, "field 'work_dir'", f"symbolic link, {tmp_path / 'link'}", str(real))


def test_a_work_dir_below_a_symlink_is_refused_even_if_it_does_not_exist_yet(cli, fake_worker, tmp_path):
    """The per-repetition directories would land wherever the link points, now or later."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    p = storage_study(tmp_path, f'work_dir = "{tmp_path / "link" / "new" / "deeper"}"')
    dry_run_error(cli, fake_worker, p, "field 'work_dir'", f"symbolic link, {tmp_path / 'link'}")
    # the same through a relative work_dir
    (p.parent / "here").symlink_to(real)
    p = storage_study(tmp_path, 'work_dir = "here/sub"')
    dry_run_error(cli, fake_worker, p, "field 'work_dir'", f"symbolic link, {p.parent / 'here'}")


@pytest.mark.parametrize("value,fragment", [('""', "is empty"), ('"a\\u0000b"', "NUL")])
def test_an_empty_work_dir_or_one_with_a_nul_is_refused(cli, fake_worker, tmp_path, value, fragment):
    p = storage_study(tmp_path, f"work_dir = {value}")
    dry_run_error(cli, fake_worker, p, "field 'work_dir'", fragment)


def test_the_default_work_dir_as_a_symlink_is_refused_up_front(cli, fake_worker, tmp_path, monkeypatch):
    """No work_dir: <data dir>/work; a link there is refused before anything runs, too."""
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (data / "work").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("CRYPTOPERF_DATA_DIR", str(data))
    p = storage_study(tmp_path)
    dry_run_error(cli, fake_worker, p, f"work directory {data / 'work'} is a symbolic link")


def test_a_stored_study_is_not_checked_against_todays_file_system(tmp_path):
    """A stored run's study text still loads (its work_dir as written), whatever is on disk now."""
    s = study.parse(STUDY.format(extra='work_dir = "../elsewhere"', params=""), str(tmp_path / "s.toml"),
                    stored=True)
    assert s.work_dir == "../elsewhere"


# --------------------------------------------------------------------------- the repetition directory


def test_the_repetition_directory_is_private_inside_the_root_and_removed(tmp_path):
    with workdir.repetition_dir(True, str(tmp_path)) as d:
        st = os.lstat(d)
        assert Path(d).parent == tmp_path and stat.S_ISDIR(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
        (Path(d) / "file").write_bytes(b"x")
    assert not Path(d).exists()
    with workdir.repetition_dir(False, str(tmp_path)) as none:
        assert none is None


def test_a_root_that_became_a_symlink_is_refused_at_the_repetition(tmp_path):
    """Between the up-front check and a repetition, the root was swapped for a link."""
    (tmp_path / "real").mkdir()
    (tmp_path / "root").symlink_to(tmp_path / "real")
    with pytest.raises(WorkDirError, match="is a symbolic link") as e:
        with workdir.repetition_dir(True, str(tmp_path / "root")):
            pass
    assert "\n" not in str(e.value)
    assert list((tmp_path / "real").iterdir()) == []


def test_a_root_that_is_a_file_is_refused_at_the_repetition(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(WorkDirError, match="not a directory"):
        with workdir.repetition_dir(True, str(tmp_path / "f")):
            pass


# --------------------------------------------------------------------------- dir: the orchestrator's


def test_a_study_given_dir_is_refused_at_the_operation(cli, fake_worker, tmp_path):
    p = storage_study(tmp_path, params=', dir = "/etc"')
    dry_run_error(cli, fake_worker, p, "s.toml:21", "operation 'read', field 'params'",
                  "dir is not a study's to set", "work_dir")


def test_dir_is_refused_through_a_templated_operation(cli, fake_worker, tmp_path):
    """The refusal is the spec's (``WorkloadSpec.set_by_cryptoperf``), checked once the operation
    is known: an op given as a template variable does not slip past it."""
    p = storage_study(tmp_path, params=', dir = "{scheme}"')
    p.write_text(p.read_text().replace('op = "storage"', 'op = "{kind}"')
                 .replace('scheme = "clear"', 'scheme = "clear"\nkind = "storage"')
                 .replace('scheme = "aes-256-xts"', 'scheme = "aes-256-xts"\nkind = "storage"'))
    dry_run_error(cli, fake_worker, p, "operation 'read', field 'params'", "dir is not a study's to set")


# --------------------------------------------------------------------------- ca_file


def tls_study(tmp_path: Path, ca_file: str, ca_a: str | None = None, ca_b: str | None = None) -> Path:
    p = tmp_path / "studies" / "tls.toml"
    p.parent.mkdir(exist_ok=True)
    p.write_text(TLS.format(ca_file=ca_file, var_a=f'ca = "{ca_a}"' if ca_a else "",
                            var_b=f'ca = "{ca_b}"' if ca_b else ""))
    return p


@pytest.mark.parametrize("ca_file,fragment", [('"/etc/ssl/ca.pem"', "is an absolute path"),
                                              ('"../ca.pem"', "through '..'"),
                                              ('"certs/../../ca.pem"', "through '..'")])
def test_a_ca_file_outside_the_study_directory_is_refused(cli, fake_worker, tmp_path, ca_file, fragment):
    p = tls_study(tmp_path, ca_file)
    dry_run_error(cli, fake_worker, p, "tls.toml:20", "field 'params'", "ca_file", fragment)


def test_a_ca_file_through_a_symlink_is_refused(cli, fake_worker, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "ca.pem").write_text("-")
    p = tls_study(tmp_path, '"certs/ca.pem"')
    (p.parent / "certs").symlink_to(tmp_path / "elsewhere")
    dry_run_error(cli, fake_worker, p, "ca_file", "symbolic link")


def test_a_templated_ca_file_is_checked_for_every_configuration(tmp_path):
    p = tls_study(tmp_path, '"{ca}"', ca_a="certs/ca.pem", ca_b="../../etc/ssl/ca.pem")
    s = study.load(p)  # a template: checked once substituted
    with pytest.raises(StudyError, match="through '..'"):
        study.check_against_worker(s, worker_rules())


def test_a_ca_file_inside_the_study_directory_reaches_the_worker_resolved(tmp_path):
    p = tls_study(tmp_path, '"certs/ca.pem"')
    s = study.check_against_worker(study.load(p), worker_rules())
    _, params = s.resolve(s.configurations[0], s.operations[0])
    assert params["ca_file"] == str(p.parent / "certs" / "ca.pem")


# --------------------------------------------------------------------------- the study's name


@pytest.mark.parametrize("name", ["../../etc/passwd", "/abs/x", "a/../../b", "..", "\x00x"])
def test_a_study_name_cannot_put_the_result_file_outside_out_dir(tmp_path, name):
    """The study's name becomes the result file's name with every character but letters,
    digits, '_', '.' and '-' replaced: no '/' survives, so the file is directly in --out."""
    path = result_path(tmp_path / "out", name, "2026-01-01T00:00:00.000Z", 3)
    assert path.parent == tmp_path / "out" and "/" not in path.name
