//! The measurement method (docs/methodology.md): calibrated batching, warm-up, a
//! fixed time budget, wall and on-CPU clocks, steal and system load around the window, and an
//! HdrHistogram of per-operation latency. This module knows nothing about crypto: it times a
//! closure that performs one operation.

pub mod clock;
pub mod load;
pub mod procstat;
pub mod profile;
pub mod proctree;
pub mod sampler;

use crate::backends::BackendError;
use hdrhistogram::Histogram;
use procstat::CpuTicks;
use proctree::TreeSource;
use std::sync::Barrier;
use std::time::Duration;

/// One operation, ready to run: returns `Err` if the library reports a failure.
pub type OpFn = Box<dyn FnMut() -> Result<(), BackendError>>;

/// A sample shorter than this is too close to clock overhead: operations are batched until a
/// sample lasts at least this long (10 µs; `clock_gettime` through the vDSO costs ~20 ns).
pub const TARGET_SAMPLE_NS: u64 = 10_000;
/// Largest batch calibration will choose.
pub const MAX_BATCH: u64 = 1 << 20;
/// Histogram range: 1 ns to 1 hour, 3 significant digits.
pub const HIST_MAX_NS: u64 = 3_600_000_000_000;
pub const HIST_SIGFIG: u8 = 3;
/// Longest warm-up spent on calibration before the threads start.
const CALIBRATION_WARMUP: Duration = Duration::from_millis(20);

/// Tests that assert on CPU time hold this, and so do tests that keep CPUs busy with threads of
/// their own (the storage workload's runs), so on a 2-core machine neither starves the other
/// (the test harness runs two tests at once). A poisoned lock is still a lock.
#[cfg(test)]
pub(crate) fn cpu_test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What to measure and for how long.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Warm-up per thread before the measuring window.
    pub warmup: Duration,
    /// Measuring budget per thread; the last sample may overrun it by one sample.
    pub budget: Duration,
    /// Threads running the operation at once.
    pub threads: usize,
    /// Operations per timed sample; `None` calibrates (see [`calibrate`]).
    pub batch: Option<u64>,
    /// Whether the TSC is invariant and may be read for reference cycles.
    pub tsc: bool,
}

/// How operations were timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// Samples of `batch` operations, each recorded as `batch` values of t/batch.
    Batched,
    /// Every operation timed alone: the true tail is visible.
    Individual,
}

/// The raw outcome of a measurement; statistics are computed by the orchestrator.
#[derive(Debug)]
pub struct Measurement {
    /// Operations completed in the measuring windows, all threads.
    pub ops: u64,
    pub batch: u64,
    pub timing: Timing,
    /// Longest thread's window in ns (`CLOCK_MONOTONIC`).
    pub wall_ns: u64,
    /// Each thread's on-CPU ns over its window (`CLOCK_THREAD_CPUTIME_ID`).
    pub cpu_ns: Vec<u64>,
    /// TSC reference cycles over thread 0's window, where the TSC is usable.
    pub tsc_cycles: Option<u64>,
    /// System-wide `/proc/stat` ticks across the window.
    pub ticks: CpuTicks,
    /// The CPU of the backend's process outside this one (a token's daemon,
    /// [`crate::backends::Backend::companion`]) across the same span as `ticks`, ns.
    pub companion_cpu_ns: Option<u64>,
    /// Per-operation latency in ns, all threads merged.
    pub histogram: Histogram<u64>,
    /// Timed samples taken, and the shortest and longest sample in ns.
    pub samples: u64,
    pub sample_min_ns: u64,
    pub sample_max_ns: u64,
}

/// Time `batch` back-to-back operations; returns the elapsed ns.
#[inline]
fn time_batch(op: &mut OpFn, batch: u64) -> Result<u64, BackendError> {
    let start = clock::monotonic_ns();
    for _ in 0..batch {
        op()?;
    }
    Ok(clock::monotonic_ns() - start)
}

/// Run `op` for `duration` (warm-up: caches, branch predictors, CPU frequency).
fn run_for(op: &mut OpFn, duration: Duration) -> Result<(), BackendError> {
    let end = clock::monotonic_ns() + duration.as_nanos() as u64;
    while clock::monotonic_ns() < end {
        op()?;
    }
    Ok(())
}

/// Choose the batch size: the smallest power of two k for which k operations take at least
/// [`TARGET_SAMPLE_NS`], confirmed on a second try so one slow first call does not decide.
/// Returns 1 for operations that alone take that long: they are timed one by one.
pub fn calibrate(op: &mut OpFn) -> Result<u64, BackendError> {
    let mut k = 1;
    while k < MAX_BATCH {
        if time_batch(op, k)? >= TARGET_SAMPLE_NS && time_batch(op, k)? >= TARGET_SAMPLE_NS {
            break;
        }
        k *= 2;
    }
    Ok(k)
}

/// One thread's measuring window.
struct ThreadWindow {
    ops: u64,
    wall_ns: u64,
    cpu_ns: u64,
    tsc_cycles: Option<u64>,
    histogram: Histogram<u64>,
    samples: u64,
    sample_min_ns: u64,
    sample_max_ns: u64,
}

/// Histogram with the worker's fixed range and precision.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIG).expect("valid histogram bounds")
}

/// The measuring loop of one thread: samples of `batch` operations until the budget is spent.
fn measure_window(op: &mut OpFn, batch: u64, budget: Duration, tsc: bool) -> Result<ThreadWindow, BackendError> {
    let mut histogram = new_histogram();
    let (mut ops, mut samples) = (0u64, 0u64);
    let (mut sample_min_ns, mut sample_max_ns) = (u64::MAX, 0u64);
    let cpu_start = clock::thread_cpu_ns();
    let tsc_start = clock::tsc(tsc);
    let start = clock::monotonic_ns();
    let deadline = start + budget.as_nanos() as u64;
    let mut end;
    loop {
        let sample_start = clock::monotonic_ns();
        for _ in 0..batch {
            op()?;
        }
        end = clock::monotonic_ns();
        let elapsed = end - sample_start;
        // t/k, rounded; a value of 0 ns is not representable and means "under 1 ns".
        let per_op = ((elapsed + batch / 2) / batch).max(1);
        histogram.saturating_record_n(per_op, batch);
        ops += batch;
        samples += 1;
        sample_min_ns = sample_min_ns.min(elapsed);
        sample_max_ns = sample_max_ns.max(elapsed);
        if end >= deadline {
            break;
        }
    }
    let cpu_ns = clock::thread_cpu_ns() - cpu_start;
    let tsc_cycles = tsc_start.zip(clock::tsc(tsc)).map(|(a, b)| b.wrapping_sub(a));
    Ok(ThreadWindow {
        ops,
        wall_ns: end - start,
        cpu_ns,
        tsc_cycles,
        histogram,
        samples,
        sample_min_ns,
        sample_max_ns,
    })
}

/// Measure an operation according to `plan`.
///
/// `make` prepares one instance of the operation (keys parsed, buffers allocated); it is called
/// once for calibration and once per thread, inside that thread, so no state is shared between
/// threads. Threads meet at a barrier after warm-up so their windows overlap.
///
/// The CPU of `companion` (a process tree outside this one doing the backend's work,
/// [`crate::backends::Backend::companion`]) so far, ns; `None` without one. Errors: `Failed`
/// when it cannot be read (it died).
pub fn companion_cpu_ns(companion: Option<&TreeSource>) -> Result<Option<u64>, BackendError> {
    companion
        .map(|c| c.read().map(|t| t.cpu_ns).map_err(|e| BackendError::Failed(format!("the backend's own process ({}): {e}", c.name()))))
        .transpose()
}

/// The companion's CPU between two [`companion_cpu_ns`] readings: `None` without a companion,
/// the first failed reading's error.
pub fn companion_cpu_between(
    before: Result<Option<u64>, BackendError>,
    after: Result<Option<u64>, BackendError>,
) -> Result<Option<u64>, BackendError> {
    match (before?, after?) {
        (Some(b), Some(a)) => Ok(Some(a.saturating_sub(b))),
        _ => Ok(None),
    }
}

/// With `companion` (a process tree outside this one that does the backend's work: a PKCS#11
/// token's daemon), its CPU is read where the ticks are, before and after the window.
///
/// Errors: the first `BackendError` any thread's preparation or operation returns; `Failed`
/// when the companion cannot be read (it died).
pub fn measure<F>(make: F, plan: Plan, companion: Option<&TreeSource>) -> Result<Measurement, BackendError>
where
    F: Fn() -> Result<OpFn, BackendError> + Sync,
{
    let batch = match plan.batch {
        Some(k) => k.max(1),
        None => {
            let mut op = make()?;
            run_for(&mut op, CALIBRATION_WARMUP.min(plan.warmup))?;
            calibrate(&mut op)?
        }
    };
    let threads = plan.threads.max(1);
    let ready = Barrier::new(threads + 1);
    let go = Barrier::new(threads + 1);
    let (windows, ticks, companion_cpu) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (make, ready, go) = (&make, &ready, &go);
                scope.spawn(move || -> Result<ThreadWindow, BackendError> {
                    // Every thread reaches both barriers even when preparing fails, so a
                    // failure cannot leave the others waiting forever.
                    let prepared = make().and_then(|mut op| run_for(&mut op, plan.warmup).map(|_| op));
                    ready.wait();
                    go.wait();
                    let mut op = prepared?;
                    measure_window(&mut op, batch, plan.budget, plan.tsc && i == 0)
                })
            })
            .collect();
        ready.wait();
        profile::window_starts();
        let companion_before = companion_cpu_ns(companion);
        let before = CpuTicks::now();
        go.wait();
        let windows: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(BackendError::Failed("a measuring thread panicked".into()))))
            .collect();
        let ticks = CpuTicks::now().since(before);
        profile::window_ends();
        let companion_cpu = companion_cpu_between(companion_before, companion_cpu_ns(companion));
        (windows, ticks, companion_cpu)
    });
    let windows = windows.into_iter().collect::<Result<Vec<_>, _>>()?;
    let companion_cpu_ns = companion_cpu?;
    let mut histogram = new_histogram();
    for w in &windows {
        histogram.add(&w.histogram).expect("histograms share bounds");
    }
    Ok(Measurement {
        ops: windows.iter().map(|w| w.ops).sum(),
        batch,
        timing: if batch == 1 { Timing::Individual } else { Timing::Batched },
        wall_ns: windows.iter().map(|w| w.wall_ns).max().unwrap_or(0),
        cpu_ns: windows.iter().map(|w| w.cpu_ns).collect(),
        tsc_cycles: windows.first().and_then(|w| w.tsc_cycles),
        ticks,
        companion_cpu_ns,
        histogram,
        samples: windows.iter().map(|w| w.samples).sum(),
        sample_min_ns: windows.iter().map(|w| w.sample_min_ns).min().unwrap_or(0),
        sample_max_ns: windows.iter().map(|w| w.sample_max_ns).max().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An operation that busy-waits `ns` on the monotonic clock.
    fn spin(ns: u64) -> OpFn {
        Box::new(move || {
            let end = clock::monotonic_ns() + ns;
            while clock::monotonic_ns() < end {}
            Ok(())
        })
    }

    #[test]
    fn calibration_batches_short_operations_and_not_long_ones() {
        // ~200 ns: a batch must reach 10 µs, so k is at least 32 and a power of two.
        let k = calibrate(&mut spin(200)).unwrap();
        assert!(k.is_power_of_two());
        assert!((32..=64).contains(&k), "k = {k} for a 200 ns operation");
        // 50 µs: timed one by one.
        assert_eq!(calibrate(&mut spin(50_000)).unwrap(), 1);
    }

    #[test]
    fn measurement_counts_operations_and_records_latency() {
        let _cpu = cpu_test_lock();
        let plan = Plan {
            warmup: Duration::from_millis(5),
            budget: Duration::from_millis(50),
            threads: 1,
            batch: None,
            tsc: false,
        };
        // A busy-wait is on-CPU nearly all the time; on a 2-core machine shared with other
        // builds (and the other tests) one window can still be mostly descheduled, so one of
        // three windows must show it.
        let mut on_cpu = false;
        for _ in 0..3 {
            let m = measure(|| Ok(spin(20_000)), plan, None).unwrap();
            assert_eq!(m.timing, Timing::Individual);
            assert_eq!(m.histogram.len(), m.ops);
            // 50 ms of 20 µs operations: at most 2500 (+1 for the sample that ends the window).
            assert!(m.ops >= 2 && m.ops <= 2_501, "ops = {}", m.ops);
            // Each op spins ≥ 20 µs, so the median cannot be below that.
            assert!(m.histogram.value_at_quantile(0.5) >= 19_950);
            assert!(m.wall_ns >= 50_000_000);
            if m.cpu_ns[0] > m.wall_ns / 2 {
                on_cpu = true;
                break;
            }
        }
        assert!(on_cpu, "a busy-wait was mostly off-CPU in three windows");
    }

    #[test]
    fn threads_each_run_and_histograms_merge() {
        let plan = Plan {
            warmup: Duration::from_millis(1),
            budget: Duration::from_millis(20),
            threads: 2,
            batch: Some(4),
            tsc: false,
        };
        let m = measure(|| Ok(spin(1_000)), plan, None).unwrap();
        assert_eq!(m.cpu_ns.len(), 2);
        assert_eq!(m.batch, 4);
        assert_eq!(m.ops % 4, 0);
        assert_eq!(m.histogram.len(), m.ops);
    }

    #[test]
    fn a_failing_operation_fails_the_measurement_without_hanging() {
        let plan = Plan {
            warmup: Duration::from_millis(1),
            budget: Duration::from_millis(10),
            threads: 3,
            batch: Some(1),
            tsc: false,
        };
        let r = measure(|| Err(BackendError::Failed("broken".into())), plan, None);
        assert!(matches!(r, Err(BackendError::Failed(m)) if m == "broken"));
    }

    /// A companion process (a token's daemon) is read across the window: a busy one shows its
    /// CPU, one that is gone fails the measurement instead of reporting nothing.
    #[test]
    fn a_companion_process_cpu_is_read_across_the_window() {
        let mut busy = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let source = TreeSource::Proc(busy.id());
        let plan = Plan { warmup: Duration::ZERO, budget: Duration::from_millis(300), threads: 1, batch: Some(1), tsc: false };
        let m = measure(|| Ok(spin(20_000)), plan, Some(&source));
        busy.kill().unwrap();
        busy.wait().unwrap();
        let cpu = m.unwrap().companion_cpu_ns.expect("read");
        assert!(cpu > 30_000_000, "a spinning companion used {cpu} ns over 300 ms");
        let gone = measure(|| Ok(spin(20_000)), plan, Some(&source));
        assert!(matches!(gone, Err(BackendError::Failed(e)) if e.contains("the backend's own process")));
    }
}
