"""Doors closed (docs/reliability.md, "Doors closed"): no private key and no database password in
any artefact of a full study run with the real worker — a TLS-handshake workload and a fleet job
at a few targets, stored in PostgreSQL through a URL with a password (and in SQLite); no key file
written anywhere by any process; listeners on loopback unless a study names an address; a
PostgreSQL URL's password in no error line of `study`.

What is searched for: "PRIVATE KEY" (any PEM private key), the PKCS #8, PKCS #1 and SEC1 DER
headers of the key types the worker uses (base64 and hex: they find freshly made keys too), and
the secret values of every private key compiled into the worker (the fleet-job pool,
worker/src/workloads/tls/keys, and the primitives' keys, worker/src/ops/keys): raw, hex, decimal
and base64 at each of the three byte alignments, so a key inside any PEM or JSON blob is found.
A planted key shows the search finds what it looks for.

The real-worker tests skip without a built worker, and fail instead under
CRYPTOPERF_REQUIRE_WORKER=1; the PostgreSQL ones likewise under CRYPTOPERF_REQUIRE_POSTGRES=1
(both set by .ci/run).
"""

from __future__ import annotations

import base64
import functools
import os
import re
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import ROOT, TWO_CONFIG_STUDY, assert_one_line_error, need_real_worker, run_subprocess
from cryptoperf import engine
from cryptoperf.engine import preflight
from cryptoperf.store import db as store_mod
from cryptoperf.result import WorkerResult
from cryptoperf.run.worker import WorkerClient
from pg_server import pg_database, pg_server, pg_url  # noqa: F401 (fixtures)
from real_workers import find
from test_real_workloads import _listening_sockets

pytestmark = pytest.mark.parallel  # see pyproject.toml: runs beside other tests

REAL, WHY = find()
KEY_DIRS = (ROOT / "worker" / "src" / "workloads" / "tls" / "keys", ROOT / "worker" / "src" / "ops" / "keys")
#: 127.0.0.1 in /proc/net/tcp's byte order, and ::1 in /proc/net/tcp6's
LOOPBACK = ("0100007F", "00000000000000000000000001000000")

STUDY = """\
[study]
name = "doors"
baseline = "rsa"
backends = ["aws-lc"]
repetitions = 3
seconds = 0.1
warmup_s = 0

[[configuration]]
name = "rsa"
cert = "rsa2048"

[[configuration]]
name = "ec"
cert = "ecdsa-p256"

[[operation]]
label = "handshake"
op = "tls-handshake"
params = { cert = "{cert}" }
loads = ["closed:2"]

[[operation]]
label = "audit"
op = "fleet-job"
params = { job = "audit", cert = "{cert}", checks = 8, cap = 4 }
loads = ["targets:4", "targets:12"]
"""


# --------------------------------------------------------------------------- what to look for


def _b64_windows(secret: bytes) -> list[str]:
    """Base64 text that any encoding of a blob holding ``secret`` contains, whatever the
    secret's offset: for each of the three alignments, the encoding of 30 whole bytes."""
    out = []
    for k in range(3):
        chunk = secret[k:k + 30]
        if len(chunk) == 30:
            text = base64.b64encode(chunk).decode()
            out += [text, text.replace("+", "-").replace("/", "_")]
    return out


def _header_markers(der: bytes) -> list[str]:
    """A DER private key's header — its version, algorithm (PKCS #8) and the tag and length of
    the first field that differs between keys — as hex and as the base64 it has in a PEM body,
    both with and without the outer length: the same for every key of its type and size class,
    so that a freshly made key is found too."""
    h = 2 if der[1] < 0x80 else 2 + (der[1] & 0x7F)  # past the outer SEQUENCE's tag and length

    def past_header(i: int) -> int:  # past a tag and its length
        return i + 2 if der[i + 1] < 0x80 else i + 2 + (der[i + 1] & 0x7F)

    k = h + 3  # the version, INTEGER 0 or 1
    if der[k] == 0x30:  # PKCS #8: the algorithm identifier, then the OCTET STRING's header
        k = past_header(k) + der[k + 1]
    k = past_header(k)
    out = [der[h:k].hex(), der[:k].hex()]
    start, end = -(-h // 3) * 3, k // 3 * 3
    if end - start >= 9:
        out.append(base64.b64encode(der[start:end]).decode())
    if end >= 6:
        out.append(base64.b64encode(der[:end]).decode())
    return out


@functools.lru_cache(maxsize=1)
def key_needles() -> dict[str, list[str | bytes]]:
    """What finds a private key: per key file, its secret values (raw, hex, decimal, base64
    windows) and its PKCS #8 and PKCS #1/SEC1 headers; plus "PRIVATE KEY"."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    needles: dict[str, list[str | bytes]] = {"PEM": ["PRIVATE KEY"]}
    files = sorted(p for d in KEY_DIRS for p in d.glob("*.pk8.der"))
    assert len(files) >= 25, files  # the pool (6 per kind) and the primitives' keys
    for f in files:
        der = f.read_bytes()
        key = serialization.load_der_private_key(der, None)
        forms = [der]
        if isinstance(key, rsa.RSAPrivateKey):
            n = key.private_numbers()
            secrets = [n.d, n.p, n.q]
            values = [x.to_bytes((x.bit_length() + 7) // 8, "big") for x in secrets]
            decimal = [str(n.d)]
        elif isinstance(key, ec.EllipticCurvePrivateKey):
            size = (key.curve.key_size + 7) // 8
            values, decimal = [key.private_numbers().private_value.to_bytes(size, "big")], []
        elif isinstance(key, ed25519.Ed25519PrivateKey):
            values, decimal = [key.private_bytes_raw()], []
        else:  # pragma: no cover - a new key type: extend this list
            raise AssertionError(f"{f}: key type {type(key).__name__} not handled")
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            forms.append(key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
        found: list[str | bytes] = []
        for v in values:
            found += [v, v.hex(), v.hex().upper(), *_b64_windows(v)]
        found += decimal
        for form in forms:
            found += _header_markers(form)
        needles[f.name] = found
    return needles


def leaks(artefacts: dict[str, bytes], needles: dict[str, list[str | bytes]]) -> list[str]:
    """``what: key (needle)`` for every artefact and key whose needle it holds. Text needles are
    also looked for lower-cased (hex), and in the artefact with line breaks, escaped line breaks
    and spaces taken out (a PEM body's 64-character lines, the same inside a JSON string)."""
    out = []
    for name, data in artefacts.items():
        squeezed = re.sub(rb"\\n|\\r|[\r\n ]", b"", data)
        low = squeezed.lower()
        for key, found in needles.items():
            for n in found:
                b = n if isinstance(n, bytes) else n.encode()
                hit = b in data if isinstance(n, bytes) else (
                    b in squeezed or (len(b) >= 16 and b.lower() in low))
                if hit:
                    out.append(f"{name}: {key} ({n[:24]!r})")
                    break
    return out


def test_the_search_finds_a_planted_key_in_every_form():
    """Not vacuous: a pool key as PEM, as hex, inside JSON, in raw bytes and its secret alone,
    each found; clean text is not."""
    from cryptography.hazmat.primitives import serialization
    needles = key_needles()
    for name in ("rsa2048-3.pk8.der", "ecdsa-p256-2.pk8.der", "ed25519-5.pk8.der", "rsa4096-1.pk8.der"):
        der = (KEY_DIRS[0] / name).read_bytes()
        key = serialization.load_der_private_key(der, None)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        body = b"".join(pem.splitlines()[1:-1])  # the base64 alone, without the PEM labels
        planted = {"pem": pem, "body": body, "json": b'{"x": "' + base64.b64encode(b"ab" + der) + b'"}',
                   "hex": der.hex().encode(), "raw": b"\x00" + der}
        found = leaks(planted, {k: v for k, v in needles.items() if k != "PEM"})
        for what in planted:  # each form is found, by this key's own needles
            assert any(f.startswith(f"{what}: {name} (") for f in found), (what, name, found)
    assert leaks({"clean": b"TLSv1.3 TLS_AES_128_GCM_SHA256 X25519 ecdsa_secp256r1_sha256"}, needles) == []


# --------------------------------------------------------------------------- a full study


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p)] = p.read_bytes()
    return out


def _dump(location: str | Path) -> dict[str, bytes]:
    """Every row of every table of the store, as text."""
    out = {}
    with store_mod.Store(location, create=False) as st:
        inspector = sa.inspect(st.engine)
        with st.engine.connect() as conn:
            for table in inspector.get_table_names():
                rows = conn.execute(sa.text(f'SELECT * FROM "{table}"')).all()
                out[f"table {table}"] = "\n".join(repr(tuple(r)) for r in rows).encode()
    return out


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it (from /proc/*/stat's parent ids)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in out} - out
        out |= more
        grew = bool(more)
    return out


class Listeners:
    """Samples, every 20 ms while active, the LISTEN sockets of ``pid`` and its descendants."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.seen: list[str] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.is_set():
            if self.pid is not None:
                self.seen.extend(_listening_sockets(_descendants(self.pid)))
            time.sleep(0.02)

    def __enter__(self) -> "Listeners":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def _run_cli(args, env, cwd):
    """``python -m cryptoperf ARGS`` in a child process whose pid the watcher follows."""
    import subprocess
    import sys
    e = dict(os.environ, **env)
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-m", "cryptoperf", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e, cwd=cwd)
    return p


@pytest.fixture
def real_worker():
    return need_real_worker(REAL, WHY)


# PostgreSQL carries the password; SQLite would repeat the key search (CRYPTOPERF_DOORS_SQLITE=1
# adds it, about 45 s more)
@pytest.fixture(params=["postgresql"] + (["sqlite"] if os.environ.get("CRYPTOPERF_DOORS_SQLITE") == "1" else []))
def store_location(request, tmp_path):
    if request.param == "sqlite":
        return tmp_path / "runs.sqlite", None
    server = request.getfixturevalue("pg_server")
    database = request.getfixturevalue("pg_database")
    return server.url(database), server.password


def test_a_full_study_leaves_no_key_and_no_password_in_any_artefact(real_worker, store_location, tmp_path):
    store, password = store_location
    dirs = {name: tmp_path / name for name in ("tmp", "home", "data", "cwd", "out")}
    for d in dirs.values():
        d.mkdir()
    study = dirs["cwd"] / "doors.toml"
    study.write_text(STUDY)
    env = {"CRYPTOPERF_WORKER": str(real_worker), "TMPDIR": str(dirs["tmp"]), "HOME": str(dirs["home"]),
           "CRYPTOPERF_DATA_DIR": str(dirs["data"]), "MPLCONFIGDIR": str(dirs["home"] / "mpl")}
    started = time.time()
    with Listeners() as listening:
        p = _run_cli(["study", study, "--store", store, "--out", dirs["out"]], env, dirs["cwd"])
        listening.pid = p.pid
        try:
            out, err = p.communicate(timeout=900)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 0, err
    artefacts: dict[str, bytes] = {"study stdout": out.encode(), "study stderr": err.encode()}
    for args in (("list",), ("list", "--json"), ("report", "1", "-f", "json", "-o", "-"),
                 ("report", "1", "-f", "md", "-o", "-"), ("report", "1", "-f", "csv", "-o", "-"),
                 ("report", "1", "-f", "html", "-o", "-"), ("report", "1"), ("compare", "1", "--by", "host"),
                 ("compare", "1", "1", "--json"), ("plan", "--op", "audit", "--rate", "10")):
        r = run_subprocess(*args, "--store", store, env=env, cwd=dirs["cwd"])
        artefacts[" ".join(args)] = (r.out + r.err).encode()
    artefacts.update(_dump(store))
    for d in dirs.values():  # the JSON, HTML and Markdown reports, the work directory, TMPDIR, HOME, cwd
        artefacts.update(_files(d))
    if isinstance(store, Path):
        artefacts.update(_files(store.parent))
    # not vacuous: the study stored and reported both workloads
    names = set(artefacts)
    assert {".json", ".html", ".md"} <= {Path(n).suffix for n in names if n.startswith(str(dirs["out"]))}
    results = artefacts["table results"].decode()
    assert '"fleet"' in results and "TLSv1.3" in results and results.count("'ok'") >= 24
    assert b"using run 1" in artefacts["report 1"]
    # no key: not in any artefact...
    assert leaks(artefacts, key_needles()) == []
    # ...and no key file written by any process: TMPDIR and the work directory are left empty
    assert _files(dirs["tmp"]) == {}
    assert [n for n in _files(dirs["data"]) if "work" in n] == []
    for shared in (Path("/tmp"), Path("/dev/shm")):  # nor anywhere shared, made during the study
        fresh = {n: b for n, b in _files_since(shared, started).items()}
        assert leaks(fresh, key_needles()) == []
    # no password anywhere either (the store is named, masked)
    if password is not None:
        assert [n for n, b in artefacts.items() if password.encode() in b] == []
        assert store_mod.mask(store).encode() in artefacts["list"]
    # the preflight estimates cover what the study wrote (docs/reliability.md)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CRYPTOPERF_WORKER", str(real_worker))
        needs = preflight.estimate(engine.prepare_study(str(study)))
    with store_mod.Store(store, create=False) as st, st.engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT sum(length(result_json)) FROM results")).scalar()
    written = sum(len(b) for n, b in artefacts.items() if n.startswith(str(dirs["out"])))
    assert 0 < stored <= needs.store_bytes and 0 < written <= needs.report_bytes, (stored, written, needs)
    # every listener of the study's processes (workers, TLS servers, fleet agents) on loopback
    assert listening.seen, "no listening socket was seen during the study"
    assert {a.split(":")[0] for a in listening.seen} <= set(LOOPBACK), listening.seen


def _files_since(root: Path, since: float) -> dict[str, bytes]:
    """Regular files directly under ``root`` or one level down modified since ``since`` (other
    processes' files that cannot be read are skipped)."""
    out = {}
    for p in list(root.glob("*")) + list(root.glob("*/*")):
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_mtime >= since and p.stat().st_size < 64 << 20:
                out[str(p)] = p.read_bytes()
        except OSError:
            continue
    return out


# --------------------------------------------------------------------------- listeners


def _listeners_of_one_run(real_worker: Path, op: str, params: dict) -> tuple[WorkerResult, list[str]]:
    with Listeners() as listening:
        with WorkerClient(real_worker) as w:
            w.hello()
            listening.pid = w._proc.pid  # noqa: SLF001 - the worker's process tree is what is watched
            r = w.run({"type": "run", "id": "t", "backend": "aws-lc", "op": op, "params": params,
                       "seconds": 0.3, "warmup_s": 0.0}, timeout_s=300)
    return r, listening.seen


def test_fleet_job_agents_listen_on_loopback_unless_an_address_is_named(real_worker):
    r, seen = _listeners_of_one_run(real_worker, "fleet-job", {"job": "audit", "load": "targets:8", "cap": 4,
                                                               "checks": 4, "agents": 2})
    assert r.status == "ok", r.reason
    ports = {a.split(":")[1] for a in seen}
    assert len(ports) >= 2, seen  # both agents were seen listening
    assert {a.split(":")[0] for a in seen} <= set(LOOPBACK), seen
    # the study names an address: only then do the agents listen elsewhere (here: every address)
    r, seen = _listeners_of_one_run(real_worker, "fleet-job", {"job": "audit", "load": "targets:8", "cap": 4,
                                                               "checks": 4, "agents": 2, "address": "0.0.0.0"})
    assert r.status == "ok", r.reason
    assert seen and {a.split(":")[0] for a in seen} == {"00000000"}, seen


def test_a_tls_server_leaves_loopback_only_for_an_explicit_address(real_worker):
    r, seen = _listeners_of_one_run(real_worker, "tls-handshake", {"load": "closed:1"})
    assert r.status == "ok" and r.server.address.startswith("127.0.0.1:"), r.reason
    assert seen and {a.split(":")[0] for a in seen} <= set(LOOPBACK), seen
    r, seen = _listeners_of_one_run(real_worker, "tls-handshake", {"load": "closed:1", "address": "0.0.0.0"})
    assert r.status == "ok" and r.server.address.startswith("0.0.0.0:"), r.reason
    assert {a.split(":")[0] for a in seen} == {"00000000"}, seen


def test_the_worker_binds_only_where_a_request_says():
    """Source guard: outside tests, the worker binds a socket in one place, the workload
    server's ``bind`` (worker/src/workloads/server.rs), at the request's ``address`` — whose
    default is loopback (worker/src/workloads/base.rs)."""
    sites = []
    for f in sorted((ROOT / "worker" / "src").rglob("*.rs")):
        if f.name == "tests.rs":
            continue
        text = f.read_text()
        text = text.split("#[cfg(test)]\nmod ")[0]  # a file's unit tests come last
        for m in re.finditer(r"(TcpListener|UdpSocket|UnixListener|UnixDatagram|Socket)::bind\w*\(([^)]*)\)", text):
            sites.append((f.relative_to(ROOT).as_posix(), m.group(0)))
    assert sites == [("worker/src/workloads/server.rs", "TcpListener::bind(addr)")], sites
    server = (ROOT / "worker" / "src" / "workloads" / "server.rs").read_text()
    assert "let addr = SocketAddr::new(common.address, common.port);" in server
    common = (ROOT / "worker" / "src" / "workloads" / "base.rs").read_text()
    assert 'text(params, "address", "127.0.0.1")' in common


# --------------------------------------------------------------------------- the password


def test_no_study_error_line_shows_the_postgresql_password(cli, write_study, fake_worker, pg_server, pg_database,  # noqa: F811
                                                           tmp_path):
    import port_for
    fake_worker()
    secret = pg_server.password
    study = write_study(TWO_CONFIG_STUDY.format(reps=3, timeout=5))
    free = port_for.get_port(None)
    cases = [
        (pg_server.url(pg_database, password="wrong-" + secret), "password authentication failed"),
        (pg_server.url(pg_database).replace(f":{pg_server.port}/", f":{free}/"),
         "check that the server runs and is reachable"),
        (pg_server.url(pg_database) + "?sslpassword=" + secret, None),  # a password in a parameter: masked too
    ]
    for url, fragment in cases:
        for dry in ((), ("--dry-run",)):
            res = cli("study", study, "--store", url, "--out", tmp_path / "out", *dry)
            text = res.out + res.err
            assert secret not in text, text
            if fragment is not None:
                assert_one_line_error(res, fragment, store_mod.mask(url), code=1)
            else:
                assert res.code == 0, res.err
    assert "***" in store_mod.mask(cases[2][0])
