//! The clocks a measurement reads: `CLOCK_MONOTONIC` for wall time, `CLOCK_THREAD_CPUTIME_ID`
//! for the calling thread's on-CPU time, and the TSC for reference cycles where it exists.

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; both clock ids exist on every Linux kernel
    // this worker supports, so the call cannot fail.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time in ns from an arbitrary origin (`CLOCK_MONOTONIC`, not affected by NTP steps).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// On-CPU time of the calling thread in ns (`CLOCK_THREAD_CPUTIME_ID`). Unlike
/// `CLOCK_PROCESS_CPUTIME_ID` it is per thread. Time a hypervisor stole from a running vCPU is
/// left out where the guest kernel has paravirt steal accounting (most KVM and Xen guests) and
/// counted as on-CPU time where it has not (docs/methodology.md, "Stolen time and the CPU
/// clocks"), which is why steal is reported beside it.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The time-stamp counter (reference cycles), on x86-64 CPUs whose TSC is invariant
/// (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo); `None` elsewhere.
#[inline]
pub fn tsc(available: bool) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    if available {
        // SAFETY: RDTSC has no preconditions on x86-64.
        return Some(unsafe { core::arch::x86_64::_rdtsc() });
    }
    let _ = available;
    None
}
