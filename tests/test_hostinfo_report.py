"""Host fingerprint and checks; terminal formatting helpers."""

from cryptoperf import hostinfo
from cryptoperf.report import terminal


def test_fingerprint_has_the_documented_keys():
    hello = {"worker_version": "0.1.0", "cpu": {"model": "X"},
             "backends": [{"backend": "openssl", "library": "OpenSSL", "library_version": "3.0", "fips": False}]}
    fp = hostinfo.fingerprint(hello)
    for key in ("cpu_model", "crypto_flags", "logical_cpus", "kernel", "hypervisor", "libraries"):
        assert key in fp
    assert set(fp["crypto_flags"]) <= set(hostinfo.CRYPTO_FLAGS)
    assert fp["libraries"]["openssl"] == {"library": "OpenSSL", "library_version": "3.0", "fips": False}
    assert set(fp["hypervisor"]) == {"present", "type", "container", "source"}


def test_checks_run_in_order_and_never_raise():
    results = hostinfo.run_checks()
    assert [r.name for r in results] == [c.name for c in hostinfo.CHECKS]
    for r in results:
        assert r.state in ("ok", "warning", "unknown")
        assert r.state != "warning" or r.advice


def test_format_helpers():
    assert terminal.fmt_ns(850) == "850 ns"
    assert terminal.fmt_ns(12_345) == "12.3 µs"
    assert terminal.fmt_ns(4_560_000) == "4.56 ms"
    assert terminal.fmt_ns(250_000) == "250 µs"
    assert terminal.fmt_ns(None) == "—"
    assert terminal.fmt_size(4096) == "4 KiB" and terminal.fmt_size(1048576) == "1 MiB"
    assert terminal.fmt_size(1000) == "1000 B"
    assert terminal.fmt_count(1_234_567) == "1.23 M"
    assert terminal.fmt_pct(12.34) == "+12.3 %"
