"""How people spell operations and sizes: one place that turns their spellings into the
worker's names and into bytes.

Operation names
---------------

``canonical_op(name, known_ops)`` finds the worker operation a name means, ignoring case and
punctuation and knowing the field's common aliases. It is used wherever cryptoperf takes an
operation name: ``cryptoperf speed --op``, a study file's ``op`` (after ``{var}``
substitution) and ``--param digest=...``. The steps:

1. **normalise**: lowercase; ``_``, spaces, ``/`` and ``.`` become ``-``
   (``SHA3_256`` → ``sha3-256``);
2. **squash**: drop everything but letters and digits (``sha3-256`` → ``sha3256``,
   ``ML-KEM-768-encaps`` → ``mlkem768encaps``), so ``sha-256`` = ``SHA256`` = ``sha256``;
3. **aliases** (``ALIASES``, on the squashed name): names of the same algorithm that are not
   mere respellings — ``SHA2-256`` = ``sha256``, ``secp256r1`` = ``prime256v1`` = ``P-256``,
   ``AES-GCM-128`` = ``aes-128-gcm``, ``encrypt`` = ``seal`` (AEAD) and so on;
4. the result is compared with the known operations squashed the same way.

A name that lacks only the operation's verb (``sign``, ``seal``, ``derive``, ...: ``VERBS``)
resolves when exactly one known operation completes it; when several do (``aes-128-gcm`` →
``aes-128-gcm-seal`` and ``-open``; ``rsa2048`` → sign and verify; ``ecdh-p256`` → keygen,
derive and derive-validated) it does not resolve, and ``unknown_op_hint`` lists them. A bare curve names the
operations on that curve (``p256-sign`` → ``ecdsa-p256-sign``, ``P-256-derive`` →
``ecdh-p256-derive``).

**A suggestion is never a different algorithm.** "Did you mean" proposes only operations of
the same algorithm *and* parameters (hash, key size, curve) — another verb of it, or the verb
the user mistyped (``rsa2048-sgin`` → ``rsa2048-sign``). ``sha257`` suggests nothing (it is
not a misspelt ``sha256``: SHA-256 and SHA3-256 differ by one character and are different
algorithms), nor does ``rsa4097-sign`` or ``ecdsa-p521-sign``; the caller then lists the known
names. Names that differ in substance are not aliases either: Kyber768 is not ML-KEM-768
(FIPS 203 changed it), Dilithium3 is not ML-DSA-65, SHA-512/256 is not SHA-256.

Sizes
-----

``parse_size`` reads ``4096``, ``16k``, ``16K``, ``16KiB``, ``4 KiB``, ``1M``, ``1MiB``,
``1G`` as bytes. **k means 1024** (KiB), M 1024², G 1024³, as ``openssl speed`` and most
benchmark tools count message sizes; ``KB``/``MB``/``GB`` are refused as ambiguous (1000 or
1024?) with the spellings that are not.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from cryptoperf.errors import closest

#: The verbs that end an operation name (the rest names the algorithm and its parameters).
VERBS = ("sign", "verify", "seal", "open", "keygen", "encaps", "decaps", "derive",
         # ``ecdh-p256-derive-validated``: the derive that validates the peer's key, as squashed
         "derivevalidated")

#: Aliases, applied in order to the squashed name (lowercase letters and digits only):
#: (regular expression, replacement, what it means). Only names of the very same algorithm.
ALIASES: tuple[tuple[str, str, str], ...] = (
    (r"sha2(224|256|384|512)", r"sha\1", "SHA2-256 = SHA-256 (and 224, 384, 512)"),
    (r"secp256r1|prime256v1|nistp256", "p256", "secp256r1 = prime256v1 = NIST P-256"),
    (r"secp384r1|nistp384", "p384", "secp384r1 = NIST P-384"),
    (r"secp521r1|nistp521", "p521", "secp521r1 = NIST P-521"),
    (r"aesgcm(128|192|256)", r"aes\1gcm", "AES-GCM-128 = AES-128-GCM"),
    (r"chachapoly(?:1305)?", "chacha20poly1305", "ChaChaPoly = ChaCha20-Poly1305"),
    (r"encrypt$", "seal", "encrypt = seal (AEAD)"),
    (r"decrypt$", "open", "decrypt = open (AEAD)"),
    (r"(?:encapsulate|encap)$", "encaps", "encapsulate = encap = encaps (KEM)"),
    (r"(?:decapsulate|decap)$", "decaps", "decapsulate = decap = decaps (KEM)"),
)
_ALIASES = tuple((re.compile(p), r) for p, r, _ in ALIASES)
_CURVE = re.compile(r"^p\d+$")
#: Algorithms a bare curve name (``p256``) stands for, before the curve.
CURVE_ALGORITHMS = ("ecdsa", "ecdh")


def normalise(name: str) -> str:
    """Lowercase, ``_``/spaces/``/``/``.`` → ``-``, repeated ``-`` collapsed, none at the ends:
    ``" SHA3_256 "`` → ``sha3-256``."""
    text = re.sub(r"[\s_/.]+", "-", str(name).strip().lower())
    return re.sub(r"-{2,}", "-", text).strip("-")


def squash(name: str) -> str:
    """Letters and digits only, lowercase: ``ML-KEM-768`` → ``mlkem768``."""
    return re.sub(r"[^0-9a-z]", "", str(name).lower())


def op_key(name: str) -> str:
    """The form names are compared in: squashed, then ``ALIASES`` applied
    (``SHA2-256`` → ``sha256``, ``ecdsa-secp256r1-sign`` → ``ecdsap256sign``)."""
    key = squash(name)
    for pattern, repl in _ALIASES:
        key = pattern.sub(repl, key)
    return key


def _split(key: str) -> tuple[str, str | None]:
    """(algorithm, verb) of a key: ``rsa2048sign`` → (``rsa2048``, ``sign``); ``sha256`` →
    (``sha256``, None)."""
    for verb in VERBS:
        if key.endswith(verb) and len(key) > len(verb):
            return key[:-len(verb)], verb
    return key, None


def _family(alg: str, known: Sequence[str]) -> list[str]:
    """Known operations of algorithm ``alg`` (a key's algorithm part): the same algorithm and
    parameters, any verb. A bare curve (``p256``) stands for ``CURVE_ALGORITHMS`` on it."""
    algs = {alg}
    if _CURVE.match(alg):
        algs |= {a + alg for a in CURVE_ALGORITHMS}
    return [op for op in known if _split(op_key(op))[0] in algs]


def canonical_op(name: str, known_ops: Iterable[str]) -> str | None:
    """The known operation ``name`` means, or None.

    ``known_ops``: the worker's operation names (``hello.ops``). Matches ignoring case and
    punctuation, with ``ALIASES``; completes a missing verb only when one known operation
    fits (see the module doc). None when nothing matches or the name is ambiguous
    (``aes-128-gcm``): ``unknown_op_hint`` says which.

    >>> canonical_op("SHA2-256", ["sha256", "sha3-256"])
    'sha256'
    """
    known = list(known_ops)
    if name in known:
        return name
    key = op_key(name)
    hits = [op for op in known if op_key(op) == key]
    if len(hits) == 1:
        return hits[0]
    if hits:
        return None
    alg, verb = _split(key)
    family = _family(alg, known)
    if verb is None:
        return family[0] if len(family) == 1 and _split(op_key(family[0]))[1] is not None else None
    same_verb = [op for op in family if _split(op_key(op))[1] == verb]
    return same_verb[0] if len(same_verb) == 1 else None


def suggest_ops(name: str, known_ops: Iterable[str]) -> list[str]:
    """Known operations ``name`` may have meant — only ones of the same algorithm and
    parameters (another verb of it, the verb it mistyped, the operations a verb-less name
    stands for); [] when unsure. ``sha257``, ``rsa4097-sign``: []. Never raises."""
    known = list(known_ops)
    found = canonical_op(name, known)
    if found is not None:
        return [found]
    key = op_key(name)
    hits = [op for op in known if op_key(op) == key]
    if hits:
        return hits
    alg, verb = _split(key)
    family = _family(alg, known)
    if family:
        return family
    # a mistyped verb: "rsa2048-sgin" → the verbs of rsa2048 that look like "sgin"
    tokens = normalise(name).split("-")
    head, last = tokens[:-1], tokens[-1]
    if not head or not last.isalpha() or op_key(last) in VERBS:
        return []
    family = [op for op in _family(op_key("-".join(head)), known) if _split(op_key(op))[1]]
    verbs = {_split(op_key(op))[1]: op for op in family}
    close = closest(op_key(last), verbs)
    return [verbs[close]] if close else family


def unknown_op_hint(name: str, known_ops: Iterable[str]) -> str:
    """The hint to put after "unknown operation 'NAME'": ``; did you mean 'x'?``,
    ``; it names several operations: 'a', 'b' (give one)``, or '' when unsure (the caller
    lists the known names anyway)."""
    known = list(known_ops)
    options = suggest_ops(name, known)
    if not options:
        return ""
    quoted = ", ".join(f"'{o}'" for o in options)
    if len(options) == 1:
        return f"; did you mean {quoted}?"
    alg, verb = _split(op_key(name))
    if verb is None and len(_family(alg, known)) > 1:
        return f"; it names several operations: {quoted} (give one)"
    return f"; did you mean one of {quoted}?"


def canonical_name(name: str, known: Iterable[str]) -> str | None:
    """The one name of ``known`` equal to ``name`` ignoring case and punctuation
    (``AWS_LC`` → ``aws-lc``), or None (none or several). For names without aliases, such as
    backends."""
    names = list(known)
    if name in names:
        return name
    hits = [k for k in names if squash(k) == squash(name)]
    return hits[0] if len(hits) == 1 else None


# --------------------------------------------------------------------------- sizes

#: Multipliers of the size suffixes (case-insensitive). k = 1024, as in ``openssl speed``.
SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
              "g": 1 << 30, "gib": 1 << 30}
#: Suffixes refused as ambiguous (decimal or binary?).
AMBIGUOUS_UNITS = {"kb": "k", "mb": "M", "gb": "G"}
SIZE_FORMS = '4096, 16k = 16K = 16KiB = 16384 bytes, 1M = 1MiB = 1048576 bytes (k means 1024)'
_SIZE = re.compile(r"^\s*(\d+(?:_\d+)*(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes from a size: an int, or a string — a number and an optional binary suffix,
    case-insensitive, with or without a space: ``4096``, ``16k``, ``16KiB``, ``4 KiB``,
    ``1M``, ``1MiB``, ``1G``, ``512B`` (k = KiB = 1024, M = MiB = 1024², G = GiB = 1024³). A
    decimal number is allowed when it makes whole bytes (``1.5k`` = 1536).

    Returns an int >= 0 (the caller checks its own range). Raises ValueError saying what is
    accepted, for anything else — ``16KB`` too (ambiguous: 1000 or 1024?), a negative
    number, a bool.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a size; give bytes or a size such as {SIZE_FORMS}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"{text} is not a size: sizes are not negative")
        return text
    if len(str(text)) > 64:  # no size is that long; and int() refuses 4300 digits
        raise ValueError(f"'{str(text)[:40]}…' ({len(str(text))} characters) is not a size; write bytes or a "
                         f"size such as {SIZE_FORMS}")
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"'{text}' is not a size; write bytes or a size such as {SIZE_FORMS}")
    number, unit = m.group(1).replace("_", ""), m.group(2).lower()
    if unit in AMBIGUOUS_UNITS:
        short = AMBIGUOUS_UNITS[unit]
        raise ValueError(f"'{text}' is ambiguous ({m.group(2)}: powers of 1000 or of 1024?); write "
                         f"{number}{short} or {number}{short.upper()}iB (k = 1024), or the number of bytes")
    if unit not in SIZE_UNITS:
        raise ValueError(f"'{text}' has an unknown unit '{m.group(2)}'; write bytes or a size such "
                         f"as {SIZE_FORMS}")
    scale = SIZE_UNITS[unit]
    if "." not in number:
        return int(number) * scale
    whole, frac = number.split(".")
    numerator = int(whole + frac) * scale
    denominator = 10 ** len(frac)
    if numerator % denominator:
        raise ValueError(f"'{text}' is not a whole number of bytes ({numerator / denominator:g} "
                         f"bytes, with k = 1024)")
    return numerator // denominator
