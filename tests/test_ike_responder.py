"""A real IKE responder under test: strongSwan's charon, started by cryptoperf from the shipped
templates (studies/ike/) for each repetition, loaded by the worker's ``ike-sa`` workload through
an initiator charon of its own. Every repetition sets up IKE SAs whose first negotiated proposal
is checked; a responder that refuses the proposal invalidates its cell with the reason; the
responder's plugins (gmp vs openssl) are in the result; its CPU per IKE SA is at least the
``ike-phase1`` composite of the same exchange's responder-side crypto; ``kill -9`` of the
orchestrator leaves no charon, socket or key.

Needs the real worker, strongSwan's charon and swanctl (installed by .ci/run; skipped, saying
so, elsewhere — failed under CRYPTOPERF_REQUIRE_STRONGSWAN=1) and root (the daemons' private
mount namespaces).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SRC, need_real_worker, run_subprocess
from real_workers import find

WORKER, WHY = find()
ROOT = Path(__file__).resolve().parents[1]
CHARON = "/usr/lib/ipsec/charon"
SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"
OPENSSL_PLUGINS = ("random nonce openssl pem pkcs1 pkcs8 x509 pubkey revocation constraints kdf socket-default "
                   "kernel-netlink vici")
GMP_PLUGINS = ("random nonce gmp aes sha2 sha1 hmac gcm mgf1 pem pkcs1 pkcs8 x509 pubkey revocation constraints kdf "
               "socket-default kernel-netlink vici")


@pytest.fixture(autouse=True)
def _need_strongswan():
    need_real_worker(WORKER, WHY)
    missing = [what for what, ok in (("charon", os.access(CHARON, os.X_OK)),
                                     ("swanctl", shutil.which("swanctl") or os.access("/usr/sbin/swanctl", os.X_OK)),
                                     ("root", os.geteuid() == 0)) if not ok]
    if missing:
        if os.environ.get("CRYPTOPERF_REQUIRE_STRONGSWAN") == "1":
            pytest.fail(f"CRYPTOPERF_REQUIRE_STRONGSWAN=1 but missing: {', '.join(missing)}", pytrace=False)
        pytest.skip(f"needs {', '.join(missing)} (apt-get install strongswan-charon strongswan-swanctl; root)")


@pytest.fixture
def work():
    """A short work directory: the daemons' vici sockets live in the server's directory under
    it, and a Unix socket's path has at most 107 bytes (pytest's tmp_path is longer)."""
    d = Path(tempfile.mkdtemp(prefix="ike-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _config(name: str, group: str, proposal: str, plugins: str = OPENSSL_PLUGINS, cert: str = "rsa2048",
            fips: bool = False, token: bool = False) -> str:
    """A configuration of the shipped templates: the initiator's group, the responder's proposal,
    plugins and certificate kind; with ``fips`` the responder's openssl plugin under OpenSSL's
    FIPS provider (``cryptoperf setup openssl-fips``); with ``token`` its private key on a
    SoftHSM2 token."""
    conf, modules = ("{openssl_fips_conf}", "{openssl_fips_modules}") if fips else ("", "")
    return (f'[[configuration]]\nname = "{name}"\ndh_group = "{group}"\nproposal = "{proposal}"\ncert = "{cert}"\n'
            f'plugins = "{plugins}"\nfips_mode = "{int(fips)}"\nopenssl_conf = "{conf}"\n'
            f'openssl_modules = "{modules}"\nkey_store = "{"token" if token else "file"}"\n'
            f'softhsm_module = "{SOFTHSM}"\n\n')


def _study(tmp_path: Path, configs: list[str], *, reps: int = 3, seconds: float = 0.3, name: str = "ike",
           work: Path | None = None) -> Path:
    """A study in ``tmp_path`` on the shipped templates (copied beside it), with ``configs``,
    its servers' directories under ``work``."""
    shutil.copytree(ROOT / "studies" / "ike", tmp_path / "ike", dirs_exist_ok=True)
    baseline = configs[0].split('"', 2)[1]
    text = (f'[study]\nname = "{name}"\nbaseline = "{baseline}"\nbackends = ["openssl"]\nrepetitions = {reps}\n'
            f'seconds = {seconds}\nwarmup_s = 0.05\ntimeout_s = 60\nwork_dir = "{work or tmp_path}"\n'
            'verdict_on = "throughput"\n\n' + "".join(configs) +
            '[[operation]]\nlabel = "IKE SA"\nop = "ike-sa"\n'
            'params = { dh_group = "{dh_group}", cert = "{cert}" }\n'
            'server = "sh {dir}/responder.sh"\n'
            'server_files = ["ike/responder.sh", "ike/strongswan.conf", "ike/swanctl.conf"]\n'
            'server_env = { OPENSSL_CONF = "{openssl_conf}", OPENSSL_MODULES = "{openssl_modules}" }\n'
            'loads = ["closed:1"]\n')
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return p


def _run(tmp_path: Path, study: Path, *more: str, env: dict | None = None):
    res = run_subprocess("study", study, "--no-report", "--out", tmp_path / "out", "--store", tmp_path / "s.sqlite",
                         *more, env={"CRYPTOPERF_WORKER": str(WORKER), **(env or {})}, timeout=600)
    docs = sorted((tmp_path / "out").glob("*.json"))
    return res, (json.loads(docs[-1].read_text()) if docs else None)


def _measured(doc: dict) -> list[dict]:
    return [r for r in doc["repetitions"] if r["block"] > 0 and not r["superseded"]]


def test_every_repetition_sets_up_ike_sas_with_the_proposal_checked_and_the_plugins_named(tmp_path, work):
    study = _study(tmp_path, [_config("ecp256", "ecp256", "aes128gcm16-prfsha256-ecp256"),
                              _config("modp2048-gmp", "modp2048", "aes128gcm16-prfsha256-modp2048", GMP_PLUGINS)], work=work)
    res, doc = _run(tmp_path, study)
    assert res.code == 0, res.err
    reps = _measured(doc)
    assert len(reps) == 6 and all(r["status"] == "ok" for r in reps), [r["reason"] for r in reps]
    for r in reps:
        result = r["result"]
        want = "ECP_256" if r["configuration"] == "ecp256" else "MODP_2048"
        assert result["negotiated_proposal"] == {"encryption": "AES_GCM_16", "key_bits": "128", "integrity": None,
                                                 "prf": "PRF_HMAC_SHA2_256", "dh_group": want}
        plugins = result["responder"]["plugins"]
        # the plugin switch is visible: gmp alone does the big numbers, or openssl does
        assert ("gmp" in plugins, "openssl" in plugins) == ((True, False) if r["configuration"] == "modp2048-gmp"
                                                            else (False, True)), plugins
        assert result["responder"]["version"].startswith("charon ")
        server = result["server"]
        assert server["window"] and server["transactions"] == result["ops"] > 0 and server["cpu_ns"] > 0
        assert result["peer_process_cpu_ns"] > 0  # the initiator daemon's CPU, the client's real work
        assert result["responder"]["openssl_fips_provider"] is False
    family = doc["analysis"]["workloads"]["families"][0]
    assert all(p["server_cpu_ns_per_tx"]["value"] > 0 for p in family["points"])
    assert doc["deltas"][0]["verdict"]["kind"] in ("slower", "faster", "equivalent", "inconclusive")
    assert family["transaction"] == ["IKE SA", "IKE SAs"]  # the verdicts name IKE SAs/s


def test_a_responder_that_refuses_the_proposal_invalidates_its_cell_with_the_reason(tmp_path, work):
    # the responder offers ECP-256 only; the initiator asks for MODP-2048
    study = _study(tmp_path, [_config("ok", "ecp256", "aes128gcm16-prfsha256-ecp256"),
                              _config("refused", "modp2048", "aes128gcm16-prfsha256-ecp256")], reps=3, seconds=0.2, work=work)
    res, doc = _run(tmp_path, study)
    assert "Traceback" not in res.err
    refused = [r for r in doc["repetitions"] if r["configuration"] == "refused"]  # calibration included
    assert refused and all(r["status"] == "invalid" for r in refused), refused
    reason = refused[0]["reason"]
    assert "no IKE SA with the responder (aes128gcm16-prfsha256-modp2048)" in reason, reason
    assert "NO_PROPOSAL_CHOSEN" in reason or "proposal" in reason.lower(), reason
    assert all(r["status"] == "ok" for r in _measured(doc) if r["configuration"] == "ok")


def test_the_responders_cpu_per_ike_sa_is_at_least_the_crypto_composite_of_the_same_exchange(tmp_path, work):
    # the responder with MODP-2048 and RSA-2048, and in the same study the same exchange's
    # responder-side crypto composed in the worker on the library the responder's openssl plugin
    # uses (ike-phase1: DH key generation + agreement, an RSA-2048 signature and a verification)
    configs = [_config("modp2048", "modp2048", "aes128gcm16-prfsha256-modp2048"),
               _config("ecp256", "ecp256", "aes128gcm16-prfsha256-ecp256")]
    study = _study(tmp_path, configs, reps=3, name="daemon", work=work)
    study.write_text(study.read_text() + '\n[[operation]]\nlabel = "crypto composite"\nop = "ike-phase1"\n'
                     'params = { dh_group = "{dh_group}", rsa_bits = 2048 }\nloads = ["closed:1"]\n')
    res, doc = _run(tmp_path, study)
    assert res.code == 0, res.err
    (share,) = [s for s in doc["analysis"]["workloads"]["own"]["ike-sa"]["crypto_share"]
                if s["configuration"] == "modp2048"]
    daemon, crypto = share["responder_cpu_ns"]["value"], share["composite_cpu_ns"]["value"]
    assert share["composite_cell"].startswith("openssl/crypto composite") and share["dh_group"] == "modp2048"
    assert share["share"]["value"] == pytest.approx(crypto / daemon)
    assert daemon >= crypto, share  # the daemon does the same crypto and more
    print(f"responder CPU per IKE SA {daemon / 1e3:.0f} µs, crypto composite {crypto / 1e3:.0f} µs: "
          f"{100 * (1 - crypto / daemon):.0f} % of the daemon's cost is beyond the composite's crypto")
    # the report serialises the same analysis: the section and its row
    rep = run_subprocess("report", "latest", "--format", "md", "--store", tmp_path / "s.sqlite",
                         "--output", tmp_path / "report.md", env={"CRYPTOPERF_WORKER": str(WORKER)})
    assert rep.code == 0, rep.err
    md = (tmp_path / "report.md").read_text()
    assert "## IKE responder: crypto share" in md
    assert f"| modp2048 | closed:1 | modp2048 | rsa2048 |" in md and f"{100 * crypto / daemon:.0f} % [" in md


def _left_behind(tmp_path: Path) -> list[str]:
    """charon processes whose environment names a directory under ``tmp_path``, and server
    directories still there."""
    out = [str(p) for p in tmp_path.glob("cryptoperf-server-*")]
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if "charon" in Path(f"/proc/{d}/comm").read_text() and str(tmp_path) in Path(f"/proc/{d}/environ").read_text(errors="replace"):
                out.append(f"charon pid {d}")
        except OSError:
            continue
    return out


def test_kill_9_of_the_orchestrator_leaves_no_charon_socket_or_key(tmp_path, work):
    study = _study(tmp_path, [_config("ecp256", "ecp256", "aes128gcm16-prfsha256-ecp256"),
                              _config("x25519", "x25519", "aes128gcm16-prfsha256-curve25519")], reps=20, seconds=0.5, work=work)
    env = dict(os.environ, CRYPTOPERF_WORKER=str(WORKER), PYTHONPATH=str(SRC))
    proc = subprocess.Popen([sys.executable, "-m", "cryptoperf", "study", str(study), "--no-report",
                             "--out", str(tmp_path / "out"), "--store", str(tmp_path / "s.sqlite")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum("charon" in x for x in _left_behind(work)) < 2:
        time.sleep(0.05)
    assert sum("charon" in x for x in _left_behind(work)) >= 2, "no responder and initiator within 60 s"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _left_behind(work):
        time.sleep(0.1)
    assert _left_behind(work) == []  # no daemon, and no directory: no socket, no key


def test_a_plugin_that_does_not_load_fails_the_repetition_in_one_line(tmp_path, work):
    study = _study(tmp_path, [_config("ok", "ecp256", "aes128gcm16-prfsha256-ecp256"),
                              _config("missing", "ecp256", "aes128gcm16-prfsha256-ecp256",
                                      OPENSSL_PLUGINS + " nosuchplugin")], reps=3, seconds=0.2, work=work)
    res, doc = _run(tmp_path, study)
    assert "Traceback" not in res.err
    missing = [r for r in doc["repetitions"] if r["configuration"] == "missing"]
    assert missing and all(r["status"] == "failed" for r in missing), missing
    reason = missing[0]["reason"]
    assert "strongSwan plugin 'nosuchplugin' did not load" in reason and "\n" not in reason, reason


def test_the_responders_key_on_a_token_signs_through_the_pkcs11_plugin(tmp_path, work):
    if not (os.path.exists(SOFTHSM) and os.path.exists("/usr/lib/ipsec/plugins/libstrongswan-pkcs11.so")):
        if os.environ.get("CRYPTOPERF_REQUIRE_STRONGSWAN") == "1":
            pytest.fail("CRYPTOPERF_REQUIRE_STRONGSWAN=1 but softhsm2 or strongSwan's pkcs11 plugin is missing",
                        pytrace=False)
        pytest.skip("needs softhsm2 and libstrongswan-extra-plugins (strongSwan's pkcs11 plugin)")
    study = _study(tmp_path, [_config("file", "ecp256", "aes128gcm16-prfsha256-ecp256"),
                              _config("token", "ecp256", "aes128gcm16-prfsha256-ecp256",
                                      OPENSSL_PLUGINS.replace("openssl", "openssl pkcs11"), token=True)],
                   reps=3, seconds=0.3, work=work)
    res, doc = _run(tmp_path, study)
    assert res.code == 0, res.err
    reps = _measured(doc)
    assert len(reps) == 6 and all(r["status"] == "ok" for r in reps), [r["reason"] for r in reps]
    for r in reps:
        assert ("pkcs11" in r["result"]["responder"]["plugins"]) == (r["configuration"] == "token")

