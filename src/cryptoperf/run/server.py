"""The server under test: a real TLS server (nginx, ``openssl s_server``, HAProxy, a Go
service...) that a study's operation starts for each repetition, loads with a workload that
announces ``server_under_test`` in its spec, and reads the CPU of.

An operation with a ``server`` command gets, for every repetition, ``started(spec, ...)``:

1. a private directory (``tempfile.mkdtemp``, mode 0700) holding a fresh CA and a leaf
   certificate of the operation's ``cert`` kind for ``localhost`` and 127.0.0.1, the leaf's key
   mode 0600 — made with the ``cryptography`` package, never written anywhere else;
2. the ``server_files`` (templates in the study's directory, confined to it) rendered into that
   directory, and the ``server`` command and ``server_env`` rendered, with the configuration's
   variables and ``{dir}``, ``{port}`` (a free loopback port), ``{cert_file}``, ``{key_file}``,
   ``{chain_file}`` (leaf then CA) and ``{ca_file}``;
3. the command started in a session of its own, pinned to the second CPU the orchestrator may
   use (the worker's client threads take the first, as for the built-in servers), with a
   guard process (``run/reaper.py``, started as soon as the directory exists) that kills the
   session and removes the directory if this process dies without doing so (``kill -9``);
4. readiness: a TLS handshake with the port that verifies the leaf against the CA, within
   ``server_ready_s``;
5. the parameters the workload's spec names for a server under test (``Running.params``): the
   server's address, its CA certificate and its process (the worker reads the server's process
   tree's CPU at the window's edges);
6. afterwards: the session stopped (SIGTERM, then SIGKILL), its directory removed, and whether
   the server died during the repetition reported.

Fresh for each repetition (not once per block): every configuration of a block gets the same
treatment — a cold server, nothing carried over from the configuration before it (session
caches, memory, a server that degraded), and a server that fails takes only its own
repetition with it. The price is the server's start-up, which is outside the measured window.

Errors: ``ServerError`` (one line naming the server and what went wrong) from ``started``.
"""

from __future__ import annotations

import datetime
import os
import shlex
import shutil
import signal
import socket
import ssl
import string
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from cryptoperf.errors import CryptoperfError
from cryptoperf.model import ServerSpec

#: Placeholders ``started`` fills in besides the configuration's variables.
BUILTINS = ("dir", "port", "cert_file", "key_file", "chain_file", "ca_file", "client_cert_file", "client_key_file")
#: How long a stopped server gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 3.0
#: Kept of the server's own output for a failure's reason.
LOG_TAIL_CHARS = 300


class ServerError(CryptoperfError):
    """The server under test could not be started or was not ready (one line)."""


def render(template: str, values: Mapping[str, str], what: str) -> str:
    """``template`` with its ``{name}`` placeholders filled from ``values``. Raises ServerError
    naming the placeholder when ``values`` has no such name."""
    try:
        return string.Formatter().vformat(template, (), dict(values))
    except KeyError as e:
        raise ServerError(f"{what}: no value for {{{e.args[0]}}} (known: {', '.join(sorted(values))})") from None
    except (ValueError, IndexError) as e:
        raise ServerError(f"{what}: {e}") from None


def free_port() -> int:
    """A port on 127.0.0.1 that nothing used a moment ago, over TCP and over UDP (a TLS server
    listens on TCP, an IKE responder on UDP). Raises ServerError when none is found in 50 tries."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ServerError("no port on 127.0.0.1 is free over both TCP and UDP")


def _key(kind: str):
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    if kind in ("rsa2048", "rsa3072", "rsa4096"):
        return rsa.generate_private_key(public_exponent=65537, key_size=int(kind[3:]))
    if kind == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ServerError(f"cannot make a {kind} certificate for the server (known: rsa2048, rsa3072, rsa4096, ecdsa-p256, "
                      "ed25519)")


def make_identity(kind: str, where: Path, client: bool = False) -> dict[str, Path]:
    """A CA and a leaf of ``kind`` for ``localhost``/127.0.0.1 (serverAuth), valid from an hour
    ago for a day, written in ``where``: ``ca.pem``, ``cert.pem`` (the leaf), ``chain.pem``
    (leaf then CA), ``key.pem`` (the leaf's PKCS #8 key, mode 0600); with ``client``, also a
    second leaf of ``kind`` from the same CA, ``CN=cryptoperf client`` (clientAuth), in
    ``client-cert.pem`` and ``client-key.pem`` (mode 0600). Returns the paths by placeholder
    name (``ca_file``, ``cert_file``, ``chain_file``, ``key_file``, and ``client_cert_file``,
    ``client_key_file``)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, leaf_key = _key(kind), _key(kind)
    digest = None if kind == "ed25519" else hashes.SHA256()

    def cert(subject: str, issuer: str, public, signer, ca: bool) -> x509.Certificate:
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
             .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
             .public_key(public).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            b = (b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                              x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                 critical=False)
                 .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        return b.sign(signer, digest)

    ca = cert("cryptoperf server-under-test CA", "cryptoperf server-under-test CA", ca_key.public_key(), ca_key, True)
    leaf = cert("localhost", "cryptoperf server-under-test CA", leaf_key.public_key(), ca_key, False)
    pem = serialization.Encoding.PEM
    paths = {"ca_file": where / "ca.pem", "cert_file": where / "cert.pem", "chain_file": where / "chain.pem",
             "key_file": where / "key.pem"}
    paths["ca_file"].write_bytes(ca.public_bytes(pem))
    paths["cert_file"].write_bytes(leaf.public_bytes(pem))
    paths["chain_file"].write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    _write_key(paths["key_file"], leaf_key)
    if client:
        client_key = _key(kind)
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cryptoperf client")]))
             .issuer_name(ca.subject).public_key(client_key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        paths["client_cert_file"], paths["client_key_file"] = where / "client-cert.pem", where / "client-key.pem"
        paths["client_cert_file"].write_bytes(b.sign(ca_key, digest).public_bytes(pem))
        _write_key(paths["client_key_file"], client_key)
    return paths


def _write_key(path: Path, key) -> None:
    """``key`` as unencrypted PKCS #8 PEM in a new file ``path``, mode 0600 from its creation."""
    from cryptography.hazmat.primitives import serialization
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


def _server_cpu() -> int | None:
    """The CPU the server is pinned to: the second this process may use (the worker pins its
    client threads to the first), None with fewer than two."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[1] if len(cpus) >= 2 else None


def _log_tail(log: Path) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    tail = " | ".join(line.strip() for line in text.splitlines()[-3:] if line.strip())
    return tail[-LOG_TAIL_CHARS:]


def _handshake(port: int, ca_file: Path) -> str | None:
    """None when a verified TLS handshake with 127.0.0.1:``port`` succeeds, else why not."""
    ctx = ssl.create_default_context(cafile=str(ca_file))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost"):
                return None
    except (OSError, ssl.SSLError) as e:
        return str(e) or type(e).__name__


def _wait_ready(proc: subprocess.Popen, port: int, ca_file: Path, ready_s: float, name: str, log: Path,
                ready_file: Path | None = None) -> None:
    """Return once the server is ready: a verified TLS handshake with ``port``, or, with
    ``ready_file``, that file exists. Raises ServerError when the server exits first or
    ``ready_s`` passes, with the last lines of its output."""
    deadline = time.monotonic() + ready_s
    why = "nothing tried"
    while True:
        code = proc.poll()
        if code is not None:
            tail = _log_tail(log)
            raise ServerError(f"server {name} exited with status {code} before it was ready"
                              + (f": {tail}" if tail else ""))
        if ready_file is not None:
            why = None if ready_file.exists() else f"its start did not write {ready_file.name} in its directory"
        else:
            why = _handshake(port, ca_file)
        if why is None:
            return
        if time.monotonic() >= deadline:
            tail = _log_tail(log)
            what = why if ready_file is not None else f"no verified TLS handshake on 127.0.0.1:{port}: {why}"
            raise ServerError(f"server {name} was not ready within {ready_s:g} s ({what})"
                              + (f"; its output: {tail}" if tail else ""))
        time.sleep(0.02)


def stop(proc: subprocess.Popen) -> None:
    """Stop the server's whole session: SIGTERM, then SIGKILL after ``STOP_GRACE_S``; and every
    process left in it (workers a master forked) with SIGKILL."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; its children may not be
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        break
    if proc.poll() is None:
        proc.wait()


def provider_values() -> dict[str, str]:
    """``{openssl_fips_conf}`` and ``{openssl_fips_modules}``: the config that loads OpenSSL's
    FIPS provider built by ``cryptoperf setup openssl-fips`` and its directory, for a server's
    ``OPENSSL_CONF``/``OPENSSL_MODULES``; empty when it is not built (``_check_fips_provider``
    then refuses a server that asked for it)."""
    from cryptoperf import providerbuild
    if providerbuild.installed() is None:
        return {"openssl_fips_conf": "", "openssl_fips_modules": ""}
    d = providerbuild.provider_dir()
    return {"openssl_fips_conf": str(providerbuild.config_path(d)), "openssl_fips_modules": str(d)}


def _server_env(spec: ServerSpec, values: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default the orchestrator's), plus ``server_env``
    rendered; a variable that renders empty is removed (a configuration without FIPS sets
    ``openssl_conf = ""``)."""
    env = dict(os.environ if base is None else base)
    for k, v in spec.env:
        value = render(v, values, f"server_env {k}")
        if value:
            env[k] = value
        else:
            env.pop(k, None)
    return env


#: The built-in values that name OpenSSL's FIPS provider (``provider_values``).
FIPS_PROVIDER_VALUES = ("openssl_fips_conf", "openssl_fips_modules")


def asks_for_fips_provider(texts: Iterable[Any]) -> bool:
    """True when any of ``texts`` (a server's environment values or a configuration's variables,
    as the study writes them) names OpenSSL's FIPS provider: ``{openssl_fips_conf}`` or
    ``{openssl_fips_modules}``, which only a built provider can fill."""
    return any(name in str(t) for t in texts for name in FIPS_PROVIDER_VALUES)


def _check_fips_provider(spec: ServerSpec, values: Mapping[str, str], env: Mapping[str, str], pid: int,
                         name: str) -> None:
    """A server whose environment (``env``, as it was started with) names OpenSSL's FIPS
    provider config must have loaded the
    provider's ``fips.so`` (seen in its memory maps), else ServerError: a server that silently
    ran without it would be measured under a FIPS name."""
    conf = values.get("openssl_fips_conf", "")
    if not conf:
        if asks_for_fips_provider([v for _, v in spec.env] + [str(v) for v in spec.variables.values()]):
            raise ServerError(f"server {name} asks for OpenSSL's FIPS provider, which is not built: "
                              "`cryptoperf setup openssl-fips`")
        return
    if not any(conf in env.get(k, "") for k, _ in spec.env):
        return
    module = str(Path(values["openssl_fips_modules"]) / "fips.so")
    for p in [pid, *_children(pid)]:
        try:
            if module in Path(f"/proc/{p}/maps").read_text():
                return
        except OSError:
            continue
    raise ServerError(f"server {name} runs with OPENSSL_CONF={conf} but has not loaded {module}: "
                      "its OpenSSL does not use the FIPS provider (is it linked against another libcrypto?)")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _launch(spec: ServerSpec, values: Mapping[str, str], env: Mapping[str, str], work: Path,
            name: str) -> subprocess.Popen:
    argv = shlex.split(render(spec.command, values, f"server {name}"))
    if not argv:
        raise ServerError(f"server {name}: the command is empty")
    cpu = _server_cpu()
    log = open(work / "server.log", "wb")
    try:
        return subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None)
    except OSError as e:
        raise ServerError(f"server {name}: cannot start {argv[0]}: {e.strerror or e}") from None
    finally:
        log.close()


def _guard(work: Path) -> subprocess.Popen:
    """The reaper (``run/reaper.py``): removes ``work``, and kills the sessions whose ids were
    written to its stdin, when that closes."""
    return subprocess.Popen([sys.executable, "-m", "cryptoperf.run.reaper", str(work)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@dataclass
class Running:
    """A started server: where it listens (``connect``, ``127.0.0.1:PORT``), the CA certificate
    that signed its certificate (``ca_file``), its process (``pid``), and whether it died
    meanwhile."""

    connect: str
    ca_file: str
    pid: int
    proc: subprocess.Popen
    log: Path
    name: str
    dir: str = ""
    client_cert: str = ""
    client_key: str = ""

    def params(self, names: Mapping[str, str]) -> dict[str, str]:
        """The request parameters that point a workload at this server, under the names its
        spec announces (``WorkloadSpec.server_under_test``: ``connect_param``, ``ca_file_param``,
        ``pid_param``, and where named ``dir_param``, ``client_cert_param``,
        ``client_key_param``)."""
        out = {names["connect_param"]: self.connect, names["ca_file_param"]: self.ca_file,
               names["pid_param"]: str(self.pid)}
        for role, value in (("dir_param", self.dir), ("client_cert_param", self.client_cert),
                            ("client_key_param", self.client_key)):
            if role in names:
                out[names[role]] = value
        return out

    def died(self) -> str | None:
        """Why the server is gone before it was stopped (status and its last output), or None."""
        code = self.proc.poll()
        if code is None:
            return None
        tail = _log_tail(self.log)
        return f"server {self.name} exited with status {code} during the repetition" + (f": {tail}" if tail else "")


@contextmanager
def started(spec: ServerSpec, root: str | None, name: str,
            names: Mapping[str, str] | None = None, base_env: Mapping[str, str] | None = None) -> Iterator[Running]:
    """Start ``spec``'s server in a private directory under ``root`` (the system's temporary
    directory when None) for one repetition; yield it ready; stop it and remove its directory
    on the way out, whatever happens. ``name`` names it in messages (its command's first word).
    ``names`` is the loading workload's ``server_under_test``: a ``client_cert_param`` there
    also makes a client identity (``{client_cert_file}``, ``{client_key_file}``), a
    ``ready_file`` makes that file's appearance in the directory the readiness test.
    ``base_env`` is the environment the server starts from (default the orchestrator's; the
    configuration's CPU mask's, so that a masked configuration masks its server too).
    Raises ServerError (one line) when it cannot start or is not ready in time."""
    names = names or {}
    work = Path(tempfile.mkdtemp(prefix="cryptoperf-server-", dir=root))
    proc = None
    guard = _guard(work)  # from now on a kill -9 of this process leaves nothing behind
    try:
        builtins = {"dir": str(work), "port": str(free_port()), **provider_values()}
        identity = make_identity(spec.cert, work, client="client_cert_param" in names)
        builtins.update({k: str(p) for k, p in identity.items()})
        # a configuration's variable may itself name a built-in: openssl_conf = "{openssl_fips_conf}"
        values = {**{k: render(str(v), builtins, f"variable {k}") for k, v in spec.variables.items()}, **builtins}
        for f in spec.files:
            src = Path(spec.study_dir) / f
            try:
                text = src.read_text(encoding="utf-8")
            except OSError as e:
                raise ServerError(f"server file {f}: cannot read {src}: {e.strerror or e}") from None
            (work / Path(f).name).write_text(render(text, values, f"server file {f}"), encoding="utf-8")
        env = _server_env(spec, values, base_env)
        proc = _launch(spec, values, env, work, name)
        guard.stdin.write(f"{proc.pid}\n".encode())
        guard.stdin.flush()
        ready_file = work / names["ready_file"] if names.get("ready_file") else None
        _wait_ready(proc, int(values["port"]), Path(values["ca_file"]), spec.ready_s, name, work / "server.log",
                    ready_file)
        _check_fips_provider(spec, values, env, proc.pid, name)
        yield Running(f"127.0.0.1:{values['port']}", values["ca_file"], proc.pid, proc, work / "server.log", name,
                      str(work), values.get("client_cert_file", ""), values.get("client_key_file", ""))
    finally:
        if proc is not None:
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)
        guard.stdin.close()  # the reaper finds nothing left to do and exits
        guard.wait()
