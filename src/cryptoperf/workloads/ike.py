"""Figures of an IKE responder under test (the ``ike-sa`` workload): its CPU per IKE SA beside
the crypto composite of the same exchange (the ``ike-phase1`` workload, measured in the same
study), so that a reader sees what share of the daemon's cost is the exchange's public-key
cryptography and what is the rest (messages, PRF and key derivation, nonces, the certificate
chain, threads, the deletion).

A responder's point (configuration × level) is matched with the ``ike-phase1`` cell of the same
configuration and backend, the same DH group (``dh_group``) and, for an RSA certificate
(``cert = "rsaN"``), the same modulus (``rsa_bits = N``), at one exchange at a time
(``closed:1``): the composite's CPU per exchange is the worker's measuring threads' CPU over its
exchanges (DH key generation and agreement, an RSA signature and a verification, the work a
responder's AUTH needs), the responder's its process tree's over its IKE SAs, each a geometric
mean over the measured blocks with its 95 % interval. The share is composite ÷ responder:
descriptive (no verdict), its interval from the two estimates' log-scale standard errors
combined (independent repetitions). A responder without a matching composite (an ECDSA
certificate, no ``ike-phase1`` operation) has none.

The ``ike-sa`` families are still drawn by the generic workload sections (``GENERIC``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cryptoperf import stats
from cryptoperf.model import Outcome
from cryptoperf.workloads import generic
from cryptoperf.workloads.generic import BAND_LEVEL, Family, Point

#: The workload these figures are of.
KIND = "ike-sa"
#: Its families stay in the generic sections (throughput vs load, latency, CPU per side).
GENERIC = True
#: The workload whose cells are the crypto composite of the same exchange.
COMPOSITE = "ike-phase1"
#: The composite's level: one exchange at a time.
COMPOSITE_LOAD = "closed:1"


@dataclass(frozen=True)
class CryptoShare:
    """One responder point beside its composite.

    Attributes:
        configuration, backend, level: the responder's cell (``level`` as written, ``closed:4``).
        dh_group, cert: what the exchange used.
        responder_cpu_ns: the responder's CPU per IKE SA (set up and deleted), ns.
        composite_cpu_ns: the composite's CPU per exchange, ns; None without a match.
        composite_cell: the composite's cell key, '' without a match.
        share: composite ÷ responder with its interval (None without a match).
    """

    configuration: str
    backend: str
    level: str
    dh_group: str
    cert: str
    responder_cpu_ns: stats.Estimate
    composite_cpu_ns: stats.Estimate | None
    composite_cell: str
    share: stats.Estimate | None

    def as_dict(self) -> dict[str, Any]:
        """Every attribute; the estimates as ``Estimate.as_dict``."""
        est = lambda e: e.as_dict() if e is not None else None  # noqa: E731
        return {"configuration": self.configuration, "backend": self.backend, "level": self.level,
                "dh_group": self.dh_group, "cert": self.cert, "responder_cpu_ns": est(self.responder_cpu_ns),
                "composite_cpu_ns": est(self.composite_cpu_ns), "composite_cell": self.composite_cell,
                "share": est(self.share)}


@dataclass(frozen=True)
class IkeFigures:
    """Every responder point with its crypto share, in the families' order."""

    shares: tuple[CryptoShare, ...]

    def as_dict(self) -> dict[str, Any]:
        """``{"crypto_share": [CryptoShare.as_dict(), ...]}``."""
        return {"crypto_share": [s.as_dict() for s in self.shares]}


def _se(e: stats.Estimate) -> float | None:
    """The log-scale standard error behind ``e``'s interval, None without one."""
    if e.low is None or e.high is None or e.n < 2 or e.low <= 0:
        return None
    t = stats.t_quantile(e.level, e.n - 1)
    return (math.log(e.high) - math.log(e.low)) / (2 * t)


def ratio(num: stats.Estimate, den: stats.Estimate, level: float = BAND_LEVEL) -> stats.Estimate:
    """``num ÷ den`` of two independent log-mean estimates, with a ``level`` interval from their
    log-scale standard errors combined at the smaller of their degrees of freedom (no bounds when
    either has none)."""
    value = num.value / den.value
    a, b = _se(num), _se(den)
    if a is None or b is None:
        return stats.Estimate(value, None, None, level, min(num.n, den.n))
    half = stats.t_quantile(level, min(num.n, den.n) - 1) * math.hypot(a, b)
    return stats.Estimate(value, value * math.exp(-half), value * math.exp(half), level, min(num.n, den.n))


def _composites(measured: Mapping[str, Sequence[Outcome]]) -> dict[tuple, tuple[str, stats.Estimate]]:
    """(configuration, backend, dh_group, rsa_bits) → (cell key, CPU per exchange) of every
    measured composite cell at ``COMPOSITE_LOAD``."""
    out = {}
    for key, outs in measured.items():
        if not outs:
            continue
        cell = outs[0].repetition.cell
        if cell.op != COMPOSITE or str(cell.load) != COMPOSITE_LOAD:
            continue
        values = [v for o in outs if (v := generic.side_cpu_ns_per_tx(o.result, "process")) is not None and v > 0]
        if values:
            p = cell.params
            out[(cell.configuration, cell.backend, str(p.get("dh_group", "")), str(p.get("rsa_bits", "")))] = (
                key, stats.log_mean(values, BAND_LEVEL, min_n=stats.MIN_BLOCKS))
    return out


def _share(p: Point, composites: Mapping[tuple, tuple[str, stats.Estimate]]) -> CryptoShare | None:
    responder = p.cpu_ns_per_tx_estimate("server")
    if responder is None:
        return None
    c = p.summary.cell
    group, cert = str(c.params.get("dh_group", "")), str(c.params.get("cert", ""))
    bits = cert[3:] if cert.startswith("rsa") else None
    match = composites.get((c.configuration, c.backend, group, bits)) if bits else None
    return CryptoShare(c.configuration, c.backend, p.load.text, group, cert, responder,
                       match[1] if match else None, match[0] if match else "",
                       ratio(match[1], responder) if match else None)


def analyse(families: Sequence[Family], measured: Mapping[str, Sequence[Outcome]], context: Any) -> IkeFigures:
    """The ``IkeFigures`` of a run's ``ike-sa`` families (``measured``: cell key → its measured
    repetitions, every workload's; ``context`` unused)."""
    composites = _composites(measured)
    return IkeFigures(tuple(s for f in families for p in f.points if (s := _share(p, composites)) is not None))
