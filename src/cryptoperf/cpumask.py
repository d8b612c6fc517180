"""CPU capability masks: run a configuration's cells with CPU crypto extensions turned off.

OpenSSL and AWS-LC read the environment variable ``OPENSSL_ia32cap`` once, when the library is
loaded, and clear the capability bits it names (man 3 OPENSSL_ia32cap; AWS-LC's
crypto/fipsmodule/cpucap/cpu_intel.c). So a mask is applied by starting the worker process with
that variable, and by nothing else; the worker then checks, from the vector the library itself
reports, that the mask took effect (docs/worker-protocol.md, "CPU capability masks"). ring and
RustCrypto have no runtime switch: a masked cell on them is reported "unsupported".

``MASKS`` is the orchestrator's copy of the worker's table (worker/src/cpu.rs); ``check_hello``
refuses a worker whose table differs, so the variable the orchestrator sets is the one the
worker verifies. Values, bits and sources: docs/methodology.md, "CPU capability masks".
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from cryptoperf.errors import WorkerError

ENV_VAR = "OPENSSL_ia32cap"
BASELINE = "baseline"

#: name → value of OPENSSL_ia32cap, set in the worker's environment for every mask, baseline's
#: included. Every word is always spelt: OpenSSL 3.0 sets the second word (CPUID leaf 7: AVX2,
#: SHA, AVX-512, VAES) to zero when the value has no ':', and OpenSSL 3.6 (the openssl@3.6
#: build) likewise zeroes its third to fifth words unless given, hence the three trailing words
#: that clear nothing. Every word is ``~0x`` and 16 hex digits, so every value has the same
#: length (99 bytes) and every configuration's worker an environment of the same size (the
#: stack starts where the environment ends, which moves measured times); baseline's value
#: clears nothing. Never an empty value: OpenSSL then clears every capability.
MASKS: dict[str, str] = {
    "baseline": "~0x0000000000000000:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000",
    # bits #57 AES-NI, #33 PCLMULQDQ; #64+41 VAES, #64+42 VPCLMULQDQ
    "no-aesni": "~0x0200000200000000:~0x0000060000000000:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000",
    # bit #64+29 SHA extensions
    "no-shani": "~0x0000000000000000:~0x0000000020000000:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000",
    # bits #64+5 AVX2 and the AVX-512 bits below
    "no-avx2": "~0x0000000000000000:~0x00000000c0230020:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000",
    # bits #64+16 AVX512F, #64+17 AVX512DQ, #64+21 AVX512IFMA, #64+30 AVX512BW, #64+31 AVX512VL
    "no-avx512": "~0x0000000000000000:~0x00000000c0230000:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000",
    # bits #64+8 BMI2, #64+19 ADX, #64+21 AVX512IFMA: the big-number extensions of RSA and DH
    "no-bignum": "~0x0000000000000000:~0x0000000000280100:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000",
}
NAMES: tuple[str, ...] = tuple(MASKS)


def worker_env(mask: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a worker that runs under ``mask``: ``base`` (default: this
    process's environment) with ``OPENSSL_ia32cap`` set to the mask's value.

    The variable is always set, to baseline's clear-nothing value for ``baseline``: a value
    inherited from the user's shell is replaced, so it cannot silently mask a baseline, and
    every mask's worker gets an environment of the same size. Raises KeyError for an unknown
    mask.
    """
    env = dict(os.environ if base is None else base)
    env[ENV_VAR] = MASKS[mask]
    return env


def check_hello(hello_masks: Sequence[Mapping[str, Any]] | None, wanted: Sequence[str]) -> None:
    """Check that the worker's ``cpu_masks`` (from its hello) give every mask in ``wanted`` the
    value this orchestrator sets — baseline's too, which the worker requires exactly (a worker
    that expects another value would find every baseline repetition invalid). Raises
    WorkerError naming the difference. A worker without ``cpu_masks`` is too old to take the
    ``cpu_mask`` field every run request carries (even for baseline), so it is refused up front
    rather than failing every run."""
    if not hello_masks:
        raise WorkerError("this worker cannot verify CPU capability masks (its hello lists no "
                          "cpu_masks): it is older than this cryptoperf; rebuild both with "
                          "`pip install .` or point CRYPTOPERF_WORKER at a matching build")
    needed = list(dict.fromkeys(wanted))
    theirs = {m.get("name"): m.get("openssl_ia32cap") for m in hello_masks}
    for name in needed:
        if name not in theirs:
            raise WorkerError(f"the worker does not know CPU mask '{name}' (it knows "
                              f"{', '.join(map(str, theirs))}); rebuild it with `pip install .`")
        if theirs[name] != MASKS[name]:
            raise WorkerError(f"CPU mask '{name}' is {ENV_VAR}={MASKS[name]} here but "
                              f"{theirs[name]} in the worker; install matching versions "
                              "(`pip install .`)")
