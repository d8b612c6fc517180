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
#: Joins masks into one that clears every bit either clears (``no-aesni+no-bignum``), as the
#: worker's ``CpuMask::by_name`` reads it: to measure whether two groups' costs add up.
JOIN = "+"


def parts(mask: str) -> tuple[str, ...] | None:
    """The masks ``mask`` names: itself when it is one of ``NAMES``; for masks joined by
    ``JOIN``, each (two or more, distinct, none of them baseline); None when it is neither."""
    if mask in MASKS:
        return (mask,)
    names = tuple(mask.split(JOIN))
    if len(names) < 2 or len(set(names)) != len(names) or any(n not in MASKS or n == BASELINE for n in names):
        return None
    return names


def is_known(mask: str) -> bool:
    """Whether ``mask`` is a mask or masks joined by ``JOIN`` (``parts``)."""
    return parts(mask) is not None


def value(mask: str) -> str:
    """The value of OPENSSL_ia32cap for ``mask`` (joined masks: each word clears every bit any
    of them clears; same length as every other value). Raises KeyError for an unknown mask."""
    if mask in MASKS:
        return MASKS[mask]
    names = parts(mask)
    if names is None:
        raise KeyError(mask)
    words = [0] * len(MASKS[BASELINE].split(":"))
    for n in names:
        for i, w in enumerate(MASKS[n].split(":")):
            words[i] |= int(w.removeprefix("~0x"), 16)
    return ":".join(f"~0x{w:016x}" for w in words)


def worker_env(mask: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a worker that runs under ``mask``: ``base`` (default: this
    process's environment) with ``OPENSSL_ia32cap`` set to the mask's value.

    The variable is always set, to baseline's clear-nothing value for ``baseline``: a value
    inherited from the user's shell is replaced, so it cannot silently mask a baseline, and
    every mask's worker gets an environment of the same size. Raises KeyError for an unknown
    mask.
    """
    env = dict(os.environ if base is None else base)
    env[ENV_VAR] = value(mask)
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
    needed = list(dict.fromkeys(p for w in wanted for p in (parts(w) or (w,))))
    theirs = {m.get("name"): m.get("openssl_ia32cap") for m in hello_masks}
    for name in needed:
        if name not in theirs:
            raise WorkerError(f"the worker does not know CPU mask '{name}' (it knows "
                              f"{', '.join(map(str, theirs))}); rebuild it with `pip install .`")
        if theirs[name] != MASKS[name]:
            raise WorkerError(f"CPU mask '{name}' is {ENV_VAR}={MASKS[name]} here but "
                              f"{theirs[name]} in the worker; install matching versions "
                              "(`pip install .`)")
