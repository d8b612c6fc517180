//! Not a test: the micro-benchmark `bench/xts_ratio` runs (ignored by `cargo test`; it asserts
//! nothing and prints figures). It times each backend's XTS sector function
//! ([`super::SectorCipher`]), exactly as the `storage` workload calls it — one 4096-byte data
//! unit per call, a new tweak each — for both key sizes, on the thread's CPU clock.

use super::{by_name, XtsBits, NAMES};

/// CPU time of this thread, ns (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One JSON line per backend, key size and direction: `{"backend", "bits", "direction",
/// "sectors", "cpu_ns_per_byte"}`, over at least `XTS_BENCH_SECONDS` (default 0.5) of CPU each;
/// or `{"backend", "bits", "unsupported": reason}`.
#[test]
#[ignore = "a micro-benchmark for bench/xts_ratio, not a test"]
fn xts_sector_cpu_ns_per_byte() {
    const SECTOR: usize = 4096;
    let budget_ns = std::env::var("XTS_BENCH_SECONDS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.5) * 1e9;
    let key: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37).wrapping_add(11)).collect();
    for name in NAMES {
        let backend = by_name(name).expect("a real backend");
        for bits in XtsBits::ALL {
            let mut x = match backend.xts(bits, &key[..bits.key_len()]) {
                Ok(x) => x,
                Err(e) => {
                    println!("{}", serde_json::json!({"backend": name, "bits": bits.name(), "unsupported": e.to_string()}));
                    continue;
                }
            };
            let mut buf = vec![0xa5u8; SECTOR];
            for (direction, decrypt) in [("encrypt", false), ("decrypt", true)] {
                let mut run = |sector: u64, buf: &mut [u8]| {
                    if decrypt { x.decrypt_sector(sector, buf) } else { x.encrypt_sector(sector, buf) }.expect("a whole sector");
                };
                for s in 0..1000 {
                    run(s, &mut buf);
                }
                let (start, mut sectors) = (thread_cpu_ns(), 0u64);
                while ((thread_cpu_ns() - start) as f64) < budget_ns {
                    for _ in 0..256 {
                        run(sectors, &mut buf);
                        sectors += 1;
                    }
                }
                let ns = (thread_cpu_ns() - start) as f64;
                println!(
                    "{}",
                    serde_json::json!({"backend": name, "bits": bits.name(), "direction": direction, "sectors": sectors,
                                       "cpu_ns_per_byte": ns / (sectors as f64 * SECTOR as f64)})
                );
            }
        }
    }
}
