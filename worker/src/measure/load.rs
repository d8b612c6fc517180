//! Load generation for workloads: a transaction (a TLS handshake, an IKE phase 1, a transfer)
//! run at a load level, with every transaction timed alone.
//!
//! Three kinds of load ([`Load`]):
//!
//! - **closed** (`closed:N`): N client threads, each starting its next transaction as soon as
//!   its last one ended. Throughput is what N concurrent clients get; latency is each
//!   transaction's own time.
//! - **paced closed** (`closed:N@R`): the same N threads, each waiting for its next slot of an
//!   overall rate R per second, but starting late when its previous transaction ran over and
//!   timing from the *actual* start. This is what most load generators do, and it hides stalls:
//!   while the server stalls, the client sends nothing, so only one slow transaction per thread
//!   is recorded ("coordinated omission", Gil Tene; wrk2's README).
//! - **open** (`open:R`, or `open:R/T` with T client threads, default [`OPEN_THREADS`]):
//!   transaction k is *due* at `start + k/R` whatever happened before; a free client thread
//!   takes the next due transaction, and its latency is measured from when it was due, so time
//!   spent waiting behind a stall counts (wrk2's correction). When all T threads are busy the
//!   due transactions queue, and their queueing shows in the latency.
//!
//! Per thread the window also records `CLOCK_THREAD_CPUTIME_ID`, so the client side's CPU per
//! transaction is the sum over threads divided by the transactions; and the coordinating thread
//! records the whole process's user and system CPU over the window (`getrusage`), where kernel
//! work done for the transactions (file I/O) shows as system time.
//!
//! [`run_load_with`] runs a step of the caller's between the warm-up and the window, while every
//! load thread waits (the `storage` workload drops its file from the page cache there).

use super::clock;
use super::procstat::CpuTicks;
use super::sampler::process_cpu_ns;
use super::{new_histogram, Measurement, Timing};
use crate::backends::BackendError;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

/// One transaction, ready to run in the thread that made it.
pub type TxnFn = Box<dyn FnMut() -> Result<(), BackendError>>;

/// Client threads of an open-loop level that does not name them (`open:R`).
pub const OPEN_THREADS: usize = 32;
/// Most client threads (connections) one level may use.
pub const MAX_CONCURRENCY: usize = 1024;
/// Highest rate a level may ask for, per second.
pub const MAX_RATE_PER_S: f64 = 1e7;

/// A load level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Load {
    /// `concurrency` threads back to back; with `pace_per_s`, paced to that overall rate and
    /// timed from each transaction's actual start (coordinated omission not corrected).
    Closed { concurrency: usize, pace_per_s: Option<f64> },
    /// Transactions due at `rate_per_s`, taken by `threads` client threads, each timed from
    /// when it was due (coordinated omission corrected).
    Open { rate_per_s: f64, threads: usize },
    /// A fixed amount of work instead of a time window: one job over `targets` targets
    /// (`targets:N`, the `fleet-job` workload, which schedules them itself; [`run_load`] refuses
    /// it).
    Targets { targets: usize },
}

/// Most targets a `targets:N` level may name.
pub const MAX_TARGETS: usize = 10_000;

impl Load {
    /// Parse `closed:N`, `closed:N@R`, `open:R` or `open:R/T` (N, T whole numbers 1..=1024;
    /// R a rate per second, > 0), or a job level `targets:N` (1..=[`MAX_TARGETS`]). Errors name
    /// the syntax.
    pub fn parse(text: &str) -> Result<Load, String> {
        let bad = || {
            format!(
                "load '{text}' is not one of closed:N, closed:N@RATE, open:RATE, open:RATE/THREADS \
                 (N, THREADS 1..={MAX_CONCURRENCY}; RATE per second)"
            )
        };
        let (kind, rest) = text.split_once(':').ok_or_else(bad)?;
        let count = |s: &str| -> Result<usize, String> {
            s.trim().parse::<usize>().ok().filter(|n| (1..=MAX_CONCURRENCY).contains(n)).ok_or_else(bad)
        };
        let rate = |s: &str| -> Result<f64, String> {
            s.trim().parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0 && *r <= MAX_RATE_PER_S).ok_or_else(bad)
        };
        match kind.trim() {
            "closed" => match rest.split_once('@') {
                None => Ok(Load::Closed { concurrency: count(rest)?, pace_per_s: None }),
                Some((n, r)) => Ok(Load::Closed { concurrency: count(n)?, pace_per_s: Some(rate(r)?) }),
            },
            "open" => match rest.split_once('/') {
                None => Ok(Load::Open { rate_per_s: rate(rest)?, threads: OPEN_THREADS }),
                Some((r, t)) => Ok(Load::Open { rate_per_s: rate(r)?, threads: count(t)? }),
            },
            "targets" => match rest.trim().parse::<usize>() {
                Ok(n) if (1..=MAX_TARGETS).contains(&n) => Ok(Load::Targets { targets: n }),
                _ => Err(format!("load '{text}' is not targets:N (N targets, 1..={MAX_TARGETS})")),
            },
            _ => Err(bad()),
        }
    }

    /// Client threads (and so connections at once) this level uses (1 for a job level, whose
    /// concurrency is the job's own: `fleet-job`'s cap and slices).
    pub fn threads(&self) -> usize {
        match *self {
            Load::Closed { concurrency, .. } => concurrency,
            Load::Open { threads, .. } => threads,
            Load::Targets { .. } => 1,
        }
    }
}

/// What a level's window measured, beyond [`Measurement`].
#[derive(Debug)]
pub struct LoadMeasurement {
    /// Transactions completed (`ops`), wall time from the window's start to the last completion,
    /// client threads' CPU, per-transaction latency (from the due time for open loads).
    pub m: Measurement,
    /// Open loads: transactions that were due in the window but started later than 1 ms after
    /// their due time (all threads busy); 0 for closed loads.
    pub late: u64,
    /// This process's user and system CPU time in ns (`getrusage(RUSAGE_SELF)`, all threads),
    /// from just before the window's start to after the last load thread ended, read by the
    /// coordinating thread. Includes the load threads' kernel work (system time) and whatever
    /// else the process ran meanwhile (a sampler thread: a few µs per 100 ms).
    pub process_user_ns: u64,
    pub process_system_ns: u64,
}

/// Run `make`'s transaction at `load`: every thread makes its own transaction (inside the
/// thread); all threads then run the level for `warmup` (untimed), meet at a barrier, and run
/// it for the window of `budget`. An open or paced phase issues the transactions due within its
/// time and waits for the last to finish.
///
/// Errors: the first error any thread's preparation or transaction returns.
pub fn run_load<F>(make: F, load: Load, warmup: Duration, budget: Duration) -> Result<LoadMeasurement, BackendError>
where
    F: Fn() -> Result<TxnFn, BackendError> + Sync,
{
    run_load_with(make, load, warmup, budget, || Ok(()))
}

/// [`run_load`], with `between` run by the coordinating thread after every thread finished its
/// warm-up and before the window starts (its time is in neither); the load threads wait
/// meanwhile. A `between` that fails ends the run before the window: its error is returned
/// (after the threads' own preparation errors, which come first).
pub fn run_load_with<F, B>(make: F, load: Load, warmup: Duration, budget: Duration, between: B) -> Result<LoadMeasurement, BackendError>
where
    F: Fn() -> Result<TxnFn, BackendError> + Sync,
    B: FnOnce() -> Result<(), BackendError>,
{
    let threads = load.threads();
    let abort = AtomicBool::new(false);
    // Two phases, each started by the main thread for all: the warm-up (at the level itself,
    // so an open loop warms up at its rate, not flat out), then the window.
    let barriers: [Barrier; 4] = std::array::from_fn(|_| Barrier::new(threads + 1));
    let starts = [AtomicU64::new(0), AtomicU64::new(0)];
    let nexts = [AtomicU64::new(0), AtomicU64::new(0)];
    let (windows, ticks, process_cpu, between_result) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (make, barriers, starts, nexts, abort) = (&make, &barriers, &starts, &nexts, &abort);
                scope.spawn(move || -> Result<Window, BackendError> {
                    // Every thread reaches every barrier even when a phase fails, so a failure
                    // cannot leave the others waiting forever.
                    let mut prepared = make();
                    barriers[0].wait();
                    barriers[1].wait();
                    if let Ok(txn) = prepared.as_mut() {
                        let start = starts[0].load(Ordering::Acquire);
                        if let Err(e) = phase(txn, load, i, start, warmup.as_nanos() as u64, &nexts[0]) {
                            prepared = Err(e);
                        }
                    }
                    barriers[2].wait();
                    barriers[3].wait();
                    let mut txn = prepared?;
                    if abort.load(Ordering::Acquire) {
                        return Ok(Window::new().finish());
                    }
                    let start = starts[1].load(Ordering::Acquire);
                    phase(&mut txn, load, i, start, budget.as_nanos() as u64, &nexts[1])
                })
            })
            .collect();
        barriers[0].wait();
        starts[0].store(clock::monotonic_ns(), Ordering::Release);
        barriers[1].wait();
        barriers[2].wait();
        let between_result = between();
        abort.store(between_result.is_err(), Ordering::Release);
        super::profile::window_starts();
        let before = CpuTicks::now();
        let cpu_before = process_cpu_ns();
        starts[1].store(clock::monotonic_ns(), Ordering::Release);
        barriers[3].wait();
        let windows: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(BackendError::Failed("a load thread panicked".into()))))
            .collect();
        let cpu_after = process_cpu_ns();
        super::profile::window_ends();
        let process_cpu = (cpu_after.0.saturating_sub(cpu_before.0), cpu_after.1.saturating_sub(cpu_before.1));
        (windows, CpuTicks::now().since(before), process_cpu, between_result)
    });
    let windows = windows.into_iter().collect::<Result<Vec<_>, _>>()?;
    between_result?;
    let start = starts[1].load(Ordering::Acquire);
    let mut histogram = new_histogram();
    for w in &windows {
        histogram.add(&w.histogram).expect("histograms share bounds");
    }
    let ops: u64 = windows.iter().map(|w| w.ops).sum();
    let end = windows.iter().map(|w| w.end_ns).max().unwrap_or(start);
    Ok(LoadMeasurement {
        m: Measurement {
            ops,
            batch: 1,
            timing: Timing::Individual,
            wall_ns: end.saturating_sub(start),
            cpu_ns: windows.iter().map(|w| w.cpu_ns).collect(),
            tsc_cycles: None,
            ticks,
            // (A device's daemon is read for primitives only, `measure::measure`.)
            companion_cpu_ns: None,
            sample_min_ns: if ops == 0 { 0 } else { histogram.min() },
            sample_max_ns: histogram.max(),
            histogram,
            samples: ops,
        },
        late: windows.iter().map(|w| w.late).sum(),
        process_user_ns: process_cpu.0,
        process_system_ns: process_cpu.1,
    })
}

/// One phase (warm-up or window) of thread `i` at `load`, from `start` for `budget_ns`.
fn phase(txn: &mut TxnFn, load: Load, i: usize, start: u64, budget_ns: u64, next: &AtomicU64) -> Result<Window, BackendError> {
    match load {
        _ if budget_ns == 0 => Ok(Window::new().finish()),
        Load::Closed { pace_per_s: None, .. } => closed(txn, start, budget_ns),
        Load::Closed { concurrency, pace_per_s: Some(rate) } => {
            let interval = concurrency as f64 / rate * 1e9;
            // Thread i's slots are offset by i/rate so the threads interleave.
            let offset = i as f64 / rate * 1e9;
            paced(txn, start, budget_ns, interval, offset)
        }
        Load::Open { rate_per_s, .. } => open(txn, start, budget_ns, rate_per_s, next),
        Load::Targets { .. } => Err(BackendError::Failed("a targets:N level is a job, not a time window".into())),
    }
}

/// One thread's window.
struct Window {
    ops: u64,
    end_ns: u64,
    cpu_ns: u64,
    late: u64,
    histogram: Histogram<u64>,
}

impl Window {
    fn new() -> Window {
        Window { ops: 0, end_ns: 0, cpu_ns: clock::thread_cpu_ns(), late: 0, histogram: new_histogram() }
    }
    fn record(&mut self, latency_ns: u64, end_ns: u64) {
        self.histogram.saturating_record(latency_ns.max(1));
        self.ops += 1;
        self.end_ns = self.end_ns.max(end_ns);
    }
    fn finish(mut self) -> Window {
        self.cpu_ns = clock::thread_cpu_ns() - self.cpu_ns;
        self
    }
}

/// Sleep until `t_ns` (monotonic); returns at once when it has passed.
fn sleep_until(t_ns: u64) {
    let now = clock::monotonic_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

fn closed(txn: &mut TxnFn, start: u64, budget_ns: u64) -> Result<Window, BackendError> {
    let mut w = Window::new();
    let deadline = start + budget_ns;
    loop {
        let t0 = clock::monotonic_ns();
        txn()?;
        let t1 = clock::monotonic_ns();
        w.record(t1 - t0, t1);
        if t1 >= deadline {
            return Ok(w.finish());
        }
    }
}

fn paced(txn: &mut TxnFn, start: u64, budget_ns: u64, interval_ns: f64, offset_ns: f64) -> Result<Window, BackendError> {
    let mut w = Window::new();
    let deadline = start + budget_ns;
    let mut k = 0u64;
    loop {
        let slot = start + (offset_ns + k as f64 * interval_ns) as u64;
        if slot >= deadline {
            return Ok(w.finish());
        }
        sleep_until(slot);
        // Timed from the actual start: the delay behind a slow transaction is not counted.
        let t0 = clock::monotonic_ns();
        txn()?;
        let t1 = clock::monotonic_ns();
        w.record(t1 - t0, t1);
        // The next slot after the one just used, skipping slots missed while running late
        // (what a paced closed-loop generator does).
        k += 1;
        let behind = ((t1.saturating_sub(start) as f64 - offset_ns) / interval_ns).floor();
        if behind > k as f64 {
            k = behind as u64;
        }
    }
}

fn open(txn: &mut TxnFn, start: u64, budget_ns: u64, rate: f64, next: &AtomicU64) -> Result<Window, BackendError> {
    let mut w = Window::new();
    let deadline = start + budget_ns;
    loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let due = start + (k as f64 * 1e9 / rate) as u64;
        if due >= deadline {
            return Ok(w.finish());
        }
        sleep_until(due);
        let t0 = clock::monotonic_ns();
        if t0 > due + 1_000_000 {
            w.late += 1;
        }
        txn()?;
        let t1 = clock::monotonic_ns();
        // From when it was due, not when it started: waiting behind a stall counts.
        w.record(t1 - due, t1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::Mutex;

    #[test]
    fn loads_parse_and_bad_ones_name_the_syntax() {
        assert_eq!(Load::parse("closed:10"), Ok(Load::Closed { concurrency: 10, pace_per_s: None }));
        assert_eq!(Load::parse("closed:1@200"), Ok(Load::Closed { concurrency: 1, pace_per_s: Some(200.0) }));
        assert_eq!(Load::parse("open:500"), Ok(Load::Open { rate_per_s: 500.0, threads: OPEN_THREADS }));
        assert_eq!(Load::parse("open:500/4"), Ok(Load::Open { rate_per_s: 500.0, threads: 4 }));
        for bad in ["closed:0", "closed:2000", "open:0", "open:-1", "open:nan", "half:3", "closed", "open:10/0"] {
            let e = Load::parse(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("closed:N"), "{bad}: {e}");
        }
    }

    /// A transaction of `work` that stalls for `stall` in the first `stall` of every `period`
    /// after `t0` (a server pausing): the stall test of docs/methodology.md, on a clock only.
    fn stalling(t0: u64, work: Duration, stall: Duration, period: Duration) -> impl Fn() -> Result<TxnFn, BackendError> + Sync {
        move || {
            Ok(Box::new(move || {
                let now = clock::monotonic_ns() - t0;
                let phase = now % period.as_nanos() as u64;
                if phase < stall.as_nanos() as u64 {
                    std::thread::sleep(Duration::from_nanos(stall.as_nanos() as u64 - phase));
                }
                let end = clock::monotonic_ns() + work.as_nanos() as u64;
                while clock::monotonic_ns() < end {}
                Ok(())
            }) as TxnFn)
        }
    }

    #[test]
    fn open_loop_shows_a_stall_that_paced_closed_loop_hides() {
        // 100 ms pause every 500 ms, 200 µs of work, 500 transactions/s: 20 % of the open
        // loop's transactions fall due in a pause and wait for it.
        let t0 = clock::monotonic_ns();
        let make = stalling(t0, Duration::from_micros(200), Duration::from_millis(100), Duration::from_millis(500));
        let budget = Duration::from_millis(1500);
        let open = run_load(&make, Load::Open { rate_per_s: 500.0, threads: 1 }, Duration::ZERO, budget).unwrap();
        let paced = run_load(&make, Load::Closed { concurrency: 1, pace_per_s: Some(500.0) }, Duration::ZERO, budget).unwrap();
        let p99 = |m: &LoadMeasurement| m.m.histogram.value_at_quantile(0.99);
        assert!(p99(&open) > 40_000_000, "open p99 {} ns", p99(&open));
        assert!(p99(&paced) < 20_000_000, "paced p99 {} ns", p99(&paced));
        assert!(open.late > 0);
    }

    #[test]
    fn closed_loop_counts_every_thread_and_measures_each_transaction() {
        let seen = Arc::new(Mutex::new(0u64));
        let make = {
            let seen = seen.clone();
            move || {
                let seen = seen.clone();
                Ok(Box::new(move || {
                    std::thread::sleep(Duration::from_millis(2));
                    *seen.lock().unwrap() += 1;
                    Ok(())
                }) as TxnFn)
            }
        };
        let m = run_load(make, Load::Closed { concurrency: 4, pace_per_s: None }, Duration::ZERO, Duration::from_millis(200)).unwrap();
        assert_eq!(m.m.cpu_ns.len(), 4);
        assert_eq!(m.m.ops, *seen.lock().unwrap());
        let rate = m.m.ops as f64 / (m.m.wall_ns as f64 / 1e9);
        // 4 threads of ~2 ms each: about 2000/s, well above what one thread could do.
        assert!(rate > 800.0 && rate < 2100.0, "rate {rate}");
        assert!(m.m.histogram.value_at_quantile(0.5) >= 2_000_000);
    }

    /// The step between warm-up and window runs once, after every warm-up transaction and
    /// before every window transaction; a failing one ends the run with its error, untimed; the
    /// window's process CPU is recorded (a busy window shows user time).
    #[test]
    fn the_between_step_runs_once_between_warm_up_and_window() {
        let seen = Arc::new(Mutex::new(Vec::<&str>::new()));
        let phase = Arc::new(Mutex::new("warm-up"));
        let make = {
            let (seen, phase) = (seen.clone(), phase.clone());
            move || {
                let (seen, phase) = (seen.clone(), phase.clone());
                Ok(Box::new(move || {
                    seen.lock().unwrap().push(*phase.lock().unwrap());
                    let end = clock::monotonic_ns() + 100_000;
                    while clock::monotonic_ns() < end {}
                    Ok(())
                }) as TxnFn)
            }
        };
        let calls = Mutex::new(0);
        let between = || {
            *calls.lock().unwrap() += 1;
            *phase.lock().unwrap() = "window";
            Ok(())
        };
        let load = Load::Closed { concurrency: 2, pace_per_s: None };
        let m = run_load_with(&make, load, Duration::from_millis(20), Duration::from_millis(50), between).unwrap();
        assert_eq!(*calls.lock().unwrap(), 1);
        let seen = seen.lock().unwrap();
        let first_window = seen.iter().position(|p| *p == "window").unwrap();
        assert!(first_window > 0 && seen[first_window..].iter().all(|p| *p == "window"), "{seen:?}");
        assert_eq!(m.m.ops as usize, seen.len() - first_window);
        assert!(m.process_user_ns + m.process_system_ns > 0);
        let failing = || Err(BackendError::Failed("no cache to drop".into()));
        let e = run_load_with(&make, load, Duration::ZERO, Duration::from_millis(50), failing);
        assert!(matches!(e, Err(BackendError::Failed(m)) if m == "no cache to drop"));
    }

    #[test]
    fn open_loop_keeps_its_rate_and_a_failure_ends_it() {
        let make = || Ok(Box::new(|| Ok(())) as TxnFn);
        let m = run_load(make, Load::Open { rate_per_s: 1000.0, threads: 2 }, Duration::ZERO, Duration::from_millis(300)).unwrap();
        assert!((250..=301).contains(&m.m.ops), "ops {}", m.m.ops);
        let failing = || Ok(Box::new(|| Err(BackendError::Failed("boom".into()))) as TxnFn);
        let e = run_load(failing, Load::Closed { concurrency: 2, pace_per_s: None }, Duration::ZERO, Duration::from_millis(50));
        assert!(matches!(e, Err(BackendError::Failed(m)) if m == "boom"));
    }

    #[test]
    fn a_job_level_names_its_targets_and_is_no_time_window() {
        assert_eq!(Load::parse("targets:1000"), Ok(Load::Targets { targets: 1000 }));
        for bad in ["targets:0", "targets:-3", "targets:many", "targets:100000"] {
            let e = Load::parse(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("targets:N"), "{bad}: {e}");
        }
        let make = || Ok(Box::new(|| Ok(())) as TxnFn);
        assert!(run_load(make, Load::Targets { targets: 3 }, Duration::ZERO, Duration::from_millis(10)).is_err());
    }
}
