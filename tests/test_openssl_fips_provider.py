"""`cryptoperf setup openssl-fips`: OpenSSL's FIPS provider built from the OpenSSL 3.1.2 source,
and the FIPS worker's openssl backend running under it.

The error paths use fakes (no network, a wrong checksum, missing tools, a failing self-test).
The real build runs once per session (``built_provider``, about 2 minutes on 2 cores); it is
skipped, saying why, where the toolchain or crates.io is missing — and fails instead under
CRYPTOPERF_REQUIRE_FIPS=1. The worker tests also need the real FIPS worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import assert_one_line_error, need_real_worker, run_subprocess
from cryptoperf import builds, paths, providerbuild
from cryptoperf.errors import SetupError
from real_workers import find

# beside other tests (pyproject.toml); .ci/run keeps a file's tests in one test process
# (--dist loadfile), so the provider is built once
pytestmark = pytest.mark.parallel

FIPS, WHY = find(builds.FIPS)
REQUIRE = "CRYPTOPERF_REQUIRE_FIPS"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    d = tmp_path / "data"
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(d))
    return d


def _index_line(cksum: str) -> bytes:
    return json.dumps({"name": "openssl-src", "vers": providerbuild.SOURCE.version, "cksum": cksum}).encode() + b"\n"


def test_no_network_is_one_line(cli, data_dir, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("no route to host")
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    res = cli("setup", "openssl-fips")
    errors = [l for l in res.err.splitlines() if l.startswith("cryptoperf: error:")]
    assert res.code == 1 and "Traceback" not in res.err and len(errors) == 1, res
    assert "cannot download https://index.crates.io/op/en/openssl-src (no route to host)" in errors[0]
    assert "needs network access to crates.io" in errors[0]
    assert not (data_dir / "providers" / "openssl-fips-3.1.2" / "build.json").exists()


def test_a_checksum_mismatch_is_one_line_and_leaves_nothing(cli, data_dir, monkeypatch):
    bodies = {providerbuild.SOURCE.index_url: _index_line("0" * 64), providerbuild.SOURCE.url: b"not the crate"}
    monkeypatch.setattr(providerbuild, "_fetch", bodies.__getitem__)
    res = cli("setup", "openssl-fips")
    errors = [l for l in res.err.splitlines() if l.startswith("cryptoperf: error:")]
    assert res.code == 1 and "Traceback" not in res.err and len(errors) == 1, res
    assert "checksum mismatch" in errors[0] and "0" * 64 in errors[0] and "nothing was built" in errors[0]
    assert not list((data_dir / "downloads").iterdir())


def test_missing_tools_are_named_before_anything_is_downloaded(cli, data_dir, monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(providerbuild, "_fetch", lambda url: pytest.fail(f"downloaded {url}"))
    assert_one_line_error(cli("setup", "openssl-fips"), "needs a C compiler, Perl", "lacks a C compiler, "
                          "Perl (OpenSSL's Configure), make", "`cryptoperf setup openssl-fips`", code=1)


def test_a_failed_self_test_is_one_line_and_installs_nothing(tmp_path):
    fake = tmp_path / "openssl"
    fake.write_text("#!/bin/sh\necho 'SHA1 : (KAT_Digest) : Pass'\necho 'SHA2 : (KAT_Digest) : Corrupt Fail'\n"
                    "echo 'INSTALL FAILED' >&2\nexit 1\n")
    fake.chmod(0o755)
    out = tmp_path / "fipsmodule.cnf"
    out.write_text("stale")
    with open(tmp_path / "log", "w") as log, pytest.raises(SetupError) as e:
        providerbuild.fipsinstall(fake, tmp_path / "fips.so", out, log, tmp_path)
    assert "failed its self-tests" in str(e.value) and "SHA2 : (KAT_Digest) : Corrupt Fail" in str(e.value)
    assert "INSTALL FAILED" in str(e.value) and "\n" not in str(e.value)
    assert not out.exists()


def test_setup_unknown_name_suggests_the_provider(cli, data_dir):
    assert_one_line_error(cli("setup", "openssl-fipz"), "did you mean 'openssl-fips'?", "openssl-fips, softhsm)", code=2)


def test_only_the_fips_builds_process_gets_the_provider(data_dir, monkeypatch, tmp_path):
    fips_bin = tmp_path / "cryptoperf-worker-fips"
    fips_bin.write_text("#!/bin/sh\n")
    fips_bin.chmod(0o755)
    monkeypatch.setenv("CRYPTOPERF_WORKER_FIPS", str(fips_bin))
    monkeypatch.setattr(providerbuild, "installed", lambda: {"module_sha256": "x"})
    base = {"PATH": "/bin", providerbuild.PROVIDER_ENV: "/elsewhere"}
    assert providerbuild.PROVIDER_ENV not in providerbuild.worker_env(tmp_path / "cryptoperf-worker", base)
    assert providerbuild.worker_env(fips_bin, base)[providerbuild.PROVIDER_ENV] == "/elsewhere"  # the user's own
    got = providerbuild.worker_env(fips_bin, {"PATH": "/bin"})
    assert got == {"PATH": "/bin", providerbuild.PROVIDER_ENV: str(providerbuild.provider_dir())}
    monkeypatch.setattr(providerbuild, "installed", lambda: None)
    assert providerbuild.PROVIDER_ENV not in providerbuild.worker_env(fips_bin, {"PATH": "/bin"})


# ----------------------------------------------------------------------------- the real build


def _skip_or_fail(why: str):
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{REQUIRE}=1 but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def built_provider(tmp_path_factory) -> Path:
    """A data dir with the provider built by the real `cryptoperf setup openssl-fips` (once)."""
    lacking = [t for t in ("cc", "perl", "make") if shutil.which(t) is None]
    if lacking:
        _skip_or_fail(f"building OpenSSL's FIPS provider needs {', '.join(lacking)}")
    data = tmp_path_factory.mktemp("fips-provider")
    res = run_subprocess("setup", "openssl-fips", env={paths.DATA_DIR_ENV: str(data)}, timeout=1800)
    if res.code != 0 and "cannot download" in res.err:
        _skip_or_fail(f"crates.io is out of reach: {res.err.strip().splitlines()[-1]}")
    assert res.code == 0, res.err
    assert res.out.startswith("built openssl-fips (OpenSSL 3.1.2 FIPS provider, self-tests passed)"), res.out
    return data


def test_setup_installs_the_provider_records_it_and_caches_it(built_provider):
    d = built_provider / "providers" / "openssl-fips-3.1.2"
    assert {p.name for p in d.iterdir()} == {"fips.so", "fipsmodule.cnf", "openssl-fips.cnf", "build.json"}
    record = json.loads((d / "build.json").read_text())
    assert record["source"] == {"crate": "openssl-src", "version": "300.1.3+3.1.2", "url": providerbuild.SOURCE.url,
                                "sha256": "cd2c101a165fff9935e34def4669595ab1c7847943c42be86e21503e482be107",
                                "sha256_from": providerbuild.SOURCE.index_url, "openssl_version": "3.1.2"}
    assert record["configure"][:3] == ["enable-fips", "no-tests", "shared"] and record["build_seconds"] > 0
    assert record["module_sha256"] == providerbuild.sha256_file(d / "fips.so")
    assert record["fipsinstall"][-1] == "INSTALL PASSED" and "version: 3.1.2" in record["fipsinstall"]
    assert sum(l.endswith(": Pass") for l in record["fipsinstall"]) >= 20
    assert not any(l.endswith("Fail") for l in record["fipsinstall"])
    assert record["host"]["cpu_model"] and record["host"]["kernel"]
    assert "module-mac" in (d / "fipsmodule.cnf").read_text()
    assert not (built_provider / "target" / "openssl-fips-3.1.2").exists()  # the build tree is gone
    again = run_subprocess("setup", "openssl-fips", env={paths.DATA_DIR_ENV: str(built_provider)})
    assert again.code == 0 and again.out.startswith("openssl-fips is already built"), again


def test_the_system_openssl_loads_the_provider(built_provider):
    d = built_provider / "providers" / "openssl-fips-3.1.2"
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command on this host")
    env = dict(os.environ, OPENSSL_CONF=str(d / "openssl-fips.cnf"), OPENSSL_MODULES=str(d))
    out = subprocess.run(["openssl", "list", "-providers"], env=env, capture_output=True, text=True).stdout
    assert "OpenSSL FIPS Provider" in out and "3.1.2" in out and "status: active" in out, out
    md5 = subprocess.run(["openssl", "dgst", "-md5"], input="abc", env=env, capture_output=True, text=True)
    assert md5.returncode != 0  # only FIPS algorithms are there


#: A small study's [study] table and its two configurations, FIPS off (baseline) and on; the
#: tests append their operations. ``{backends}``: a TOML list.
FIPS_STUDY_HEAD = """\
[study]
name = "fips-small"
baseline = "off"
backends = {backends}
repetitions = 3
seconds = 0.05
warmup_s = 0.01

[[configuration]]
name = "off"

[[configuration]]
name = "on"
fips = true

"""
SMALL_FIPS_STUDY = FIPS_STUDY_HEAD + """\
[[operation]]
op = "sha256"
sizes = [1024]
"""


APPROVED_OPS = ("sha256", "sha3-256", "hmac-sha256", "aes-128-gcm-open", "aes-256-gcm-seal", "rsa2048-sign",
                "rsa3072-verify", "ecdsa-p256-sign", "ecdsa-p256-verify", "ecdh-p256-derive", "ffdh-2048-derive")


def _speed(data: Path, env: dict | None = None, ops=("sha256", "aes-128-gcm-open", "rsa2048-sign", "ecdsa-p256-verify",
                                                    "ecdh-p256-derive"), params=()):
    args = [a for op in ops for a in ("--op", op)] + [a for p in params for a in ("--param", p)]
    e = {paths.DATA_DIR_ENV: str(data), "CRYPTOPERF_WORKER_FIPS": str(FIPS), **(env or {})}
    res = run_subprocess("speed", "--fips", "--json", "-b", "openssl", *args, "--seconds", "0.05",
                         "--warmup", "0.01", "--no-store", env=e)
    assert res.code == 0, res.err
    return json.loads(res.out)["results"]


def test_known_answers_pass_under_the_provider_and_results_name_it(built_provider):
    need_real_worker(FIPS, WHY, require=REQUIRE)
    results = _speed(built_provider, ops=APPROVED_OPS)
    assert {r["op"] for r in results} == set(APPROVED_OPS)
    for r in results:
        assert r["status"] == "ok", (r["op"], r.get("reason"))
        assert r["fips_reported"] is True and r["fips_provider"] == "OpenSSL FIPS Provider 3.1.2", r
        assert r["validation"]["kat"] == "pass", r["validation"]
        assert r["library_version"].startswith("3.0."), r  # the system libcrypto, the 3.1.2 provider
        # approved, except sealing with the caller's nonce (SP 800-38D §8.2.2), timed but flagged
        assert r["fips_approved"] is (r["op"] != "aes-256-gcm-seal"), (r["op"], r.get("fips_reason"))
    # PSS sets the digest before the padding (the provider checks it then), and SHA-1 still
    # verifies legacy signatures (SP 800-131A Rev. 2 §9)
    pss = _speed(built_provider, ops=("rsa2048-sign",), params=("padding=pss",))
    sha1 = _speed(built_provider, ops=("rsa2048-verify",), params=("digest=sha1",))
    for r in pss + sha1:
        assert r["status"] == "ok" and r["validation"]["kat"] == "pass", (r["op"], r["params"], r.get("reason"))


#: What the provider does not serve as approved, and a word its reason must hold.
REFUSED = {"chacha20-poly1305-seal": "ChaCha20-Poly1305", "ed25519-sign": "EdDSA", "ed25519-verify": "EdDSA",
           "x25519-derive": "SP 800-56A", "x25519-keygen": "SP 800-56A", "ml-kem-768-encaps": "ML-KEM",
           "ml-dsa-65-sign": "ML-DSA"}


def test_what_the_provider_does_not_approve_is_refused_with_its_reason(built_provider):
    need_real_worker(FIPS, WHY, require=REQUIRE)
    results = _speed(built_provider, ops=tuple(REFUSED))
    assert {r["op"] for r in results} == set(REFUSED)
    for r in results:
        assert r["status"] == "unsupported" and REFUSED[r["op"]] in r["reason"], (r["op"], r.get("reason"))
        assert r["fips_approved"] is False and r.get("ops_per_s") is None, r  # nothing timed under a FIPS name
    (sha1,) = _speed(built_provider, ops=("rsa2048-sign",), params=("digest=sha1",))
    assert sha1["status"] == "unsupported" and "SP 800-131A" in sha1["reason"], sha1
    # RSA below 2048 bits is not an operation at all
    res = run_subprocess("speed", "--fips", "-b", "openssl", "--op", "rsa1024-sign", "--no-store",
                         env={paths.DATA_DIR_ENV: str(built_provider), "CRYPTOPERF_WORKER_FIPS": str(FIPS)})
    assert res.code != 0 and "rsa1024-sign" in res.err and "Traceback" not in res.err, res


def test_a_study_gives_openssl_fips_verdicts_for_primitives_and_a_tls_handshake(built_provider, tmp_path,
                                                                                write_study):
    need_real_worker(FIPS, WHY, require=REQUIRE)
    default, why_default = find(builds.DEFAULT)
    need_real_worker(default, why_default)
    path = write_study(FIPS_STUDY_HEAD.format(backends='["openssl"]') + """\
[[operation]]
op = "rsa2048-sign"

[[operation]]
label = "handshake p256"
op = "tls-handshake"
params = { tls_version = "1.3", cert = "rsa2048", group = "p256", suite = "aes-128-gcm", session = "full" }

[[operation]]
label = "handshake x25519"
op = "tls-handshake"
params = { tls_version = "1.3", cert = "rsa2048", group = "x25519", session = "full" }
optional = true
""")
    env = {paths.DATA_DIR_ENV: str(built_provider), "CRYPTOPERF_WORKER_FIPS": str(FIPS),
           "CRYPTOPERF_WORKER": str(default)}
    res = run_subprocess("study", path, "--no-report", "--out", tmp_path / "out", "--store", tmp_path / "s.sqlite",
                         env=env, timeout=600)
    assert res.code == 0, res.err
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    reps = [r for r in doc["repetitions"] if not r["superseded"]]
    on = [r for r in reps if r["configuration"] == "on"]
    for r in on:
        assert r["status"] == "ok", (r["label"], r.get("reason"))
        assert r["result"]["fips_provider"] == "OpenSSL FIPS Provider 3.1.2", r["result"]
    assert {r["label"] for r in on} == {"rsa2048-sign", "handshake p256 @ c=1"}
    # X25519 in TLS is refused under the provider, before anything runs, with the reason
    (skipped,) = [line for line in res.err.splitlines() if line.startswith("skipped: operation 'handshake x25519'")]
    assert "configuration 'on' on openssl" in skipped and "SP 800-56A" in skipped, skipped
    deltas = {d["label"]: d for d in doc["deltas"]}
    for label in ("rsa2048-sign", "handshake p256 @ c=1"):
        assert deltas[label]["status"] == "ok" and deltas[label]["blocks"] == 3, deltas[label]
        assert deltas[label]["verdict"]["kind"] in ("slower", "faster", "equivalent", "inconclusive")


def test_without_the_generated_config_nothing_is_measured_as_fips(built_provider, tmp_path):
    need_real_worker(FIPS, WHY, require=REQUIRE)
    broken = tmp_path / "provider"
    shutil.copytree(built_provider / "providers" / "openssl-fips-3.1.2", broken)
    (broken / "openssl-fips.cnf").unlink()
    for r in _speed(built_provider, env={providerbuild.PROVIDER_ENV: str(broken)}):
        # `fips` is what the configuration asked for; `fips_reported` what the worker said
        assert r["status"] == "unsupported" and r["fips_reported"] is False and "fips_provider" not in r, r
        assert "openssl-fips.cnf" in r["reason"] and "cannot run in FIPS mode" in r["reason"], r["reason"]


# ----------------------------------------------------------------------------- when it is built




def test_the_provider_is_built_for_a_fips_configuration_on_openssl_only(cli, write_study, fake_worker, tmp_path,
                                                                       monkeypatch):
    fake_worker()
    fake_worker.fips()
    asked = []
    monkeypatch.setattr(providerbuild, "ensure", lambda who, console: asked.append(who))
    res = cli("study", write_study(SMALL_FIPS_STUDY.format(backends='["aws-lc"]')), "--no-report",
              "--out", tmp_path / "a")
    assert res.code == 0 and asked == [], (res.err, asked)  # AWS-LC's FIPS module needs no provider
    res = cli("study", write_study(SMALL_FIPS_STUDY.format(backends='["aws-lc", "openssl"]')), "--no-report",
              "--out", tmp_path / "b")
    assert res.code == 0, res.err
    assert len(asked) == 1 and "configuration 'on' (the openssl backend in the FIPS build)" in asked[0], asked
    res = cli("speed", "--fips", "-b", "aws-lc", "--op", "sha256", "--seconds", "0.05", "--no-store")
    assert res.code == 0 and len(asked) == 1, (res.err, asked)
    res = cli("speed", "--fips", "-b", "openssl", "--op", "sha256", "--seconds", "0.05", "--no-store")
    assert res.code == 0 and asked[1:] == ["--fips (the openssl backend in the FIPS build)"], (res.err, asked)


def test_a_result_under_a_provider_names_it_beside_its_library():
    from cryptoperf.result import decode
    base = {"type": "result", "id": "x", "status": "ok", "library": "OpenSSL", "library_version": "3.0.19"}
    assert decode(base).library_text == "OpenSSL 3.0.19"
    under = decode({**base, "fips_provider": "OpenSSL FIPS Provider 3.1.2"})
    assert under.library_text == "OpenSSL 3.0.19 with OpenSSL FIPS Provider 3.1.2"


def test_an_ike_responder_under_the_provider_has_it_mapped_and_says_so(built_provider, tmp_path):
    """strongSwan's openssl plugin with ``fips_mode = 1`` and OPENSSL_CONF naming the provider:
    the responder's tree maps ``fips.so`` (cryptoperf checks before it measures) and every result
    says so; beside it, the same responder without it does not. Here, beside the provider it
    needs, rather than in tests/test_ike_responder.py: the provider is built once per file."""
    import test_ike_responder as ike
    need_real_worker(ike.WORKER, ike.WHY)
    if not (os.access(ike.CHARON, os.X_OK) and os.geteuid() == 0):
        if os.environ.get("CRYPTOPERF_REQUIRE_STRONGSWAN") == "1":
            pytest.fail("CRYPTOPERF_REQUIRE_STRONGSWAN=1 but charon or root is missing", pytrace=False)
        pytest.skip("needs strongSwan's charon and root")
    import tempfile
    work = Path(tempfile.mkdtemp(prefix="ike-", dir="/tmp"))
    try:
        study = ike._study(tmp_path, [ike._config("off", "ecp256", "aes128gcm16-prfsha256-ecp256"),
                                      ike._config("fips", "ecp256", "aes128gcm16-prfsha256-ecp256", fips=True)],
                           reps=3, seconds=0.2, work=work)
        res, doc = ike._run(tmp_path, study, env={paths.DATA_DIR_ENV: str(built_provider)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert res.code == 0, res.err
    reps = ike._measured(doc)
    assert len(reps) == 6 and all(r["status"] == "ok" for r in reps), [r["reason"] for r in reps]
    for r in reps:
        assert r["result"]["responder"]["openssl_fips_provider"] is (r["configuration"] == "fips"), r["result"]

