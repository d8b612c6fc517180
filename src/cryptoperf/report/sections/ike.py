"""Report section of an IKE responder under test (the ``ike-sa`` workload): its CPU per IKE SA
beside the crypto composite of the same exchange (``ike-phase1`` in the same study), and the
share of the daemon's cost that is that crypto.

23  IKE responder: crypto share — one row per responder point: the responder's CPU per IKE SA,
                                   the composite's CPU per exchange, composite ÷ responder

Every figure is the analysis's (``cryptoperf.workloads.ike``).
"""

from __future__ import annotations

from cryptoperf.report import text as fmt
from cryptoperf.report.render import fragment, md_table
from cryptoperf.report.sections import Section, register
from cryptoperf.store.stored_run import StoredRun
from cryptoperf.workloads import ike

LEAD = ("What share of the IKE responder's CPU per IKE SA (set up and deleted; its process tree over the "
        "measured window) is the exchange's public-key cryptography: the crypto composite of the same "
        "exchange (DH key generation and agreement, an RSA signature and a verification, measured by the "
        "ike-phase1 operation of the same configuration, one exchange at a time) over the responder's cost. "
        "The rest is the daemon's own work: messages, the PRF and key derivation, nonces, the certificate "
        "chain, its threads and the deletion. Descriptive: no verdict; the intervals are 95 %.")


def _pct(e) -> str:
    if e is None:
        return "— (no composite of this exchange in the run)"
    if e.low is None or e.high is None:
        return f"{100 * e.value:.0f} %"
    return f"{100 * e.value:.0f} % [{100 * e.low:.0f}, {100 * e.high:.0f}]"


def rows(figures: ike.IkeFigures) -> list[dict[str, str]]:
    """One table row per responder point, formatted."""
    return [{"configuration": s.configuration, "level": s.level, "group": s.dh_group, "cert": s.cert,
             "responder": fmt.fmt_estimate(s.responder_cpu_ns, fmt.fmt_ns),
             "composite": fmt.fmt_estimate(s.composite_cpu_ns, fmt.fmt_ns), "share": _pct(s.share)}
            for s in figures.shares]


@register(order=23)
def ike_crypto_share(run: StoredRun) -> list[Section]:
    """"IKE responder: crypto share", for a run with ``ike-sa`` cells; nothing without."""
    figures = run.analysis.workloads.own.get(ike.KIND)
    if figures is None or not figures.shares:
        return []
    table = rows(figures)
    html = fragment("sections/ike.html.j2", lead=LEAD, rows=table)
    md = LEAD + "\n\n" + md_table(
        ["Configuration", "Level", "DH group", "Certificate", "Responder CPU / IKE SA", "Composite / exchange",
         "Crypto share"],
        [[r["configuration"], r["level"], r["group"], r["cert"], r["responder"], r["composite"], r["share"]]
         for r in table], align="llllrrr")
    return [Section("ike-crypto-share", "IKE responder: crypto share", html, md)]
