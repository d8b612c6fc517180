//! CPU over time: a thread that samples this process's CPU use (user and system, from
//! `getrusage(RUSAGE_SELF)`, all threads) and the host's steal (from `/proc/stat`) every
//! [`INTERVAL`] while a workload runs, so a report can plot the process's CPU % over the cell's
//! lifetime beside the hypervisor's steal.

use super::clock;
use super::procstat::CpuTicks;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Time between samples: 100 ms.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// One interval's CPU use (sent by helper processes to the worker that started them, so it is
/// read back too).
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema, PartialEq)]
pub struct CpuSample {
    /// End of the interval, ms since the sampler started.
    pub t_ms: f64,
    /// This process's user and system CPU time over the interval, % of one CPU (two busy
    /// threads on two CPUs show 200).
    pub user_pct: f64,
    pub system_pct: f64,
    /// The host's stolen time over the interval, % of all its CPUs (`/proc/stat`).
    pub steal_pct: f64,
}

/// A running sampler; [`Sampler::stop`] ends it and returns the samples.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<CpuSample>>,
}

/// This process's (user, system) CPU time in ns, all threads.
pub fn process_cpu_ns() -> (u64, u64) {
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

impl Sampler {
    /// Start sampling in a thread of its own (its own CPU use is a few µs per sample).
    pub fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let t0 = clock::monotonic_ns();
            let (mut t, mut cpu, mut ticks) = (t0, process_cpu_ns(), CpuTicks::now());
            let mut out = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(INTERVAL);
                let (t1, cpu1, ticks1) = (clock::monotonic_ns(), process_cpu_ns(), CpuTicks::now());
                let dt = (t1 - t) as f64;
                let d = ticks1.since(ticks);
                out.push(CpuSample {
                    t_ms: (t1 - t0) as f64 / 1e6,
                    user_pct: round1(100.0 * cpu1.0.saturating_sub(cpu.0) as f64 / dt),
                    system_pct: round1(100.0 * cpu1.1.saturating_sub(cpu.1) as f64 / dt),
                    steal_pct: if d.total == 0 { 0.0 } else { round1(100.0 * d.steal as f64 / d.total as f64) },
                });
                (t, cpu, ticks) = (t1, cpu1, ticks1);
            }
            out
        });
        Sampler { stop, handle }
    }

    /// Stop after the current interval and return every sample taken.
    pub fn stop(self) -> Vec<CpuSample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Descriptors this process has open now (the entries of `/proc/self/fd`, the one the count
/// reads included), or `None` where that directory cannot be read.
pub fn open_fds() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count())
}

/// This process's peak resident set size in bytes so far (`VmHWM` of `/proc/self/status`, the
/// kernel's high-water mark), or `None` where it cannot be read.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Time between two counts of a [`FdWatch`]: 20 ms (a count reads one directory, ~20 µs).
pub const FD_INTERVAL: Duration = Duration::from_millis(20);

/// The most descriptors this process held open at once while it ran: a thread counts them
/// ([`open_fds`]) every [`FD_INTERVAL`]; [`FdWatch::stop`] returns the largest count (a
/// descriptor opened and closed between two counts is not seen).
pub struct FdWatch {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<usize>,
}

impl FdWatch {
    /// Start counting in a thread of its own.
    pub fn start() -> FdWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut most = open_fds().unwrap_or(0);
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(FD_INTERVAL);
                most = most.max(open_fds().unwrap_or(0));
            }
            most
        });
        FdWatch { stop, handle }
    }

    /// Stop and return the largest count seen (the count now included).
    pub fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let most = self.handle.join().unwrap_or(0);
        most.max(open_fds().unwrap_or(0))
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_shows_as_the_cpu_it_used() {
        let _cpu = crate::measure::cpu_test_lock();
        let s = Sampler::start();
        let (t0, c0) = (clock::monotonic_ns(), clock::thread_cpu_ns());
        let end = t0 + 450_000_000;
        while clock::monotonic_ns() < end {}
        let (t1, c1) = (clock::monotonic_ns(), clock::thread_cpu_ns());
        let samples = s.stop();
        assert!(samples.len() >= 4, "{samples:?}");
        // The spinning thread's own share of one CPU, by its own clock: ~100 % on an idle
        // machine, less when other work on the host takes turns with it. The sampler's full
        // intervals (user + system of the whole process) must read the same share.
        let own = 100.0 * (c1 - c0) as f64 / (t1 - t0) as f64;
        let busy: Vec<f64> = samples[..3].iter().map(|s| s.user_pct + s.system_pct).collect();
        let seen = busy.iter().sum::<f64>() / busy.len() as f64;
        assert!(own > 5.0 && (seen - own).abs() < 20.0, "sampler {busy:?} against the thread's own {own:.1} %");
        assert!(samples.windows(2).all(|w| w[1].t_ms > w[0].t_ms));
    }

    #[test]
    fn descriptors_and_peak_memory_are_counted() {
        let watch = FdWatch::start();
        let files: Vec<_> = (0..40).map(|_| std::fs::File::open("/proc/self/status").unwrap()).collect();
        std::thread::sleep(FD_INTERVAL * 3);
        drop(files);
        let most = watch.stop();
        assert!(most >= 40, "{most}");
        assert!(open_fds().unwrap() < most);
        assert!(peak_rss_bytes().unwrap() > 1 << 20);
    }
}
