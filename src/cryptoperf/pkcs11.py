"""The PKCS#11 token a device backend (``pkcs11``) measures: the one the environment names, or
a SoftHSM2 token cryptoperf makes in its data directory on first use.

The worker reads which token, and how to log in, from its environment only
(``CRYPTOPERF_PKCS11_MODULE``, ``CRYPTOPERF_PKCS11_TOKEN``, ``CRYPTOPERF_PKCS11_PIN_FILE`` or
``CRYPTOPERF_PKCS11_PIN``; docs/offload.md), so a PIN never reaches a study file, a request, the
store, a report or a log. A user with a real module (an HSM, a cloud HSM's client library, a
smart card) exports those variables; without ``CRYPTOPERF_PKCS11_MODULE`` cryptoperf uses (and
first makes) its own SoftHSM2 token.

SoftHSM2 (https://github.com/softhsm/SoftHSMv2; Debian's ``softhsm2``) keeps its tokens in
files and computes in software, in the worker's own process: a study on it measures what the
PKCS#11 path costs (sessions, object handles, copies, its OpenSSL/Botan underneath), not what a
device would. Its token lives in ``<data dir>/softhsm/`` (configuration ``softhsm2.conf``,
token files ``tokens/``, the user PIN in ``user.pin``, mode 0600, a random one per data
directory).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from cryptoperf import paths
from cryptoperf.errors import MissingDependency

MODULE_ENV = "CRYPTOPERF_PKCS11_MODULE"
TOKEN_ENV = "CRYPTOPERF_PKCS11_TOKEN"
PIN_FILE_ENV = "CRYPTOPERF_PKCS11_PIN_FILE"
PIN_ENV = "CRYPTOPERF_PKCS11_PIN"
#: The process id of the daemon a module talks to (``p11-kit server``'s ``P11_KIT_SERVER_PID``,
#: an HSM vendor's client daemon): the worker measures its CPU beside its own, as the token's.
DAEMON_PID_ENV = "CRYPTOPERF_PKCS11_DAEMON_PID"
#: SoftHSM2's own variable naming its configuration file.
SOFTHSM_CONF_ENV = "SOFTHSM2_CONF"

#: Where distributions put SoftHSM2's module (Debian/Ubuntu first).
SOFTHSM_MODULES = ("/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
                   "/usr/lib64/pkcs11/libsofthsm2.so", "/usr/local/lib/softhsm/libsofthsm2.so")
#: The label of the token cryptoperf makes.
SOFTHSM_LABEL = "cryptoperf"
#: The device kind a backend announces in ``hello`` (``backends[].device``) for a PKCS#11 token.
DEVICE = "pkcs11"
#: ``cryptoperf setup softhsm``: what makes cryptoperf's SoftHSM2 token.
SETUP_NAME = "softhsm"
#: What to do when SoftHSM2 is missing, for messages.
INSTALL_HINT = "apt-get install softhsm2 (or set CRYPTOPERF_PKCS11_MODULE to your token's module)"


@dataclass(frozen=True)
class Token:
    """The token the workers use, as their environment names it.

    Attributes:
        module: the PKCS#11 module's path.
        label: the token's label, or None (the module's first token).
        pin_file: a file holding the user PIN, or None (the PIN is in ``CRYPTOPERF_PKCS11_PIN``
            of the environment the workers inherit).
        softhsm_conf: SoftHSM2's configuration file for a token cryptoperf made, else None.
        daemon_pid: the process id of the daemon the module talks to (``DAEMON_PID_ENV``), or
            None (the token's work is all in the worker's process, as SoftHSM2's is).
    """

    module: str
    label: str | None
    pin_file: str | None
    softhsm_conf: str | None = None
    daemon_pid: str | None = None

    def worker_env(self) -> dict[str, str]:
        """The environment variables that point a worker at this token (never the PIN itself)."""
        env = {MODULE_ENV: self.module}
        if self.label:
            env[TOKEN_ENV] = self.label
        if self.pin_file:
            env[PIN_FILE_ENV] = self.pin_file
        if self.softhsm_conf:
            env[SOFTHSM_CONF_ENV] = self.softhsm_conf
        if self.daemon_pid:
            env[DAEMON_PID_ENV] = self.daemon_pid
        return env

    def describe(self) -> str:
        """One line for people: module, token, where the PIN comes from (not the PIN)."""
        pin = f"PIN file {self.pin_file}" if self.pin_file else f"PIN from ${PIN_ENV}"
        daemon = f", its daemon pid {self.daemon_pid}" if self.daemon_pid else ""
        return f"PKCS#11 module {self.module}, token {self.label or '(the first)'}, {pin}{daemon}"


def configured(environ: Mapping[str, str] | None = None) -> Token | None:
    """The token ``environ`` (default: this process's environment) names, or None when it names
    no module (cryptoperf's SoftHSM2 token is then used, ``softhsm``)."""
    env = os.environ if environ is None else environ
    module = env.get(MODULE_ENV)
    if not module:
        return None
    return Token(module, env.get(TOKEN_ENV) or None, env.get(PIN_FILE_ENV) or None, env.get(SOFTHSM_CONF_ENV) or None,
                 env.get(DAEMON_PID_ENV) or None)


def softhsm_dir() -> Path:
    """``<data dir>/softhsm``: the SoftHSM2 configuration, token and PIN cryptoperf made."""
    return paths.data_dir() / "softhsm"


def softhsm_module() -> str | None:
    """SoftHSM2's module on this host, or None."""
    return next((m for m in SOFTHSM_MODULES if os.path.exists(m)), None)


def softhsm(force: bool = False) -> Token:
    """cryptoperf's SoftHSM2 token, made on first use (or again with ``force``): a configuration
    whose token directory is ``softhsm_dir()/tokens``, a token labelled ``SOFTHSM_LABEL`` with a
    random user PIN (kept in ``user.pin``, mode 0600) and a random SO PIN (not kept: cryptoperf
    never administers the token).

    Raises MissingDependency (one line) when SoftHSM2 is not installed, and RuntimeError with
    softhsm2-util's message when it cannot make the token.
    """
    module, util = softhsm_module(), shutil.which("softhsm2-util")
    if module is None or util is None:
        raise MissingDependency(f"SoftHSM2 is not installed (no {'module' if module is None else 'softhsm2-util'}); "
                                + INSTALL_HINT)
    root = softhsm_dir()
    conf, tokens, pin = root / "softhsm2.conf", root / "tokens", root / "user.pin"
    token = Token(module, SOFTHSM_LABEL, str(pin), str(conf))
    if not force and pin.exists() and conf.exists() and any(tokens.glob("*")):
        return token
    if force and root.exists():
        shutil.rmtree(root)
    tokens.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\nlog.level = ERROR\n"
                    "slots.removable = false\n")
    user_pin, so_pin = secrets.token_hex(8), secrets.token_hex(8)
    done = subprocess.run([util, "--init-token", "--free", "--label", SOFTHSM_LABEL, "--pin", user_pin,
                           "--so-pin", so_pin], env={**os.environ, SOFTHSM_CONF_ENV: str(conf)},
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        why = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(f"softhsm2-util could not make the token: {why[-1] if why else done.returncode}")
    fd = os.open(pin, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(user_pin + "\n")
    return token


def token(environ: Mapping[str, str] | None = None) -> Token:
    """The token the workers will use: the environment's (``configured``), else cryptoperf's
    SoftHSM2 token, made on first use. Raises as ``softhsm``."""
    return configured(environ) or softhsm()


def setup_line(force: bool = False) -> str:
    """``cryptoperf setup softhsm``: make (or with ``force`` remake) the SoftHSM2 token and say
    where it is, in one line."""
    t = softhsm(force)
    return f"SoftHSM2 token '{t.label}' ready: {t.describe()} ({SOFTHSM_CONF_ENV}={t.softhsm_conf})"
