package main

// Process-wide CPU for the workloads: the process's CPU time (getrusage(RUSAGE_SELF), every
// thread), a CPU timeline sampled every 100 ms (as the Rust worker's measure/sampler.rs: this
// process's user and system % of one CPU, the host's steal % from /proc/stat), the peak resident
// set size, and pinning the whole process to one CPU.
//
// Why the process and not a thread: Go moves goroutines between OS threads at will, so the CPU
// a transaction costs cannot be read from one thread's clock (CLOCK_THREAD_CPUTIME_ID) as the
// Rust worker reads its client threads'. A workload's client side is therefore the whole client
// worker process over the window — its load goroutines and what the Go runtime does for them
// (scheduler, network poller, garbage collector), and this sampler's few µs per 100 ms.

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// sampleInterval is the time between two timeline samples (the Rust worker's).
const sampleInterval = 100 * time.Millisecond

// processCPUNs is this process's (user, system) CPU time so far in ns, all threads.
func processCPUNs() (uint64, uint64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return uint64(ru.Utime.Nano()), uint64(ru.Stime.Nano())
}

// processCPUTotalNs is this process's user + system CPU time so far in ns.
func processCPUTotalNs() uint64 {
	u, s := processCPUNs()
	return u + s
}

// CPUSample is one interval of a CPU timeline, in the result's `CpuSample` fields.
type CPUSample struct {
	TMs       float64 `json:"t_ms"`
	UserPct   float64 `json:"user_pct"`
	SystemPct float64 `json:"system_pct"`
	StealPct  float64 `json:"steal_pct"`
}

// Sampler samples this process's CPU every sampleInterval in a goroutine of its own until
// Stop.
type Sampler struct {
	stop chan struct{}
	done chan []CPUSample
	// Start is when sampling started.
	Start time.Time
}

// startSampler starts a Sampler.
func startSampler() *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan []CPUSample, 1), Start: time.Now()}
	go s.loop()
	return s
}

func (s *Sampler) loop() {
	t, cu, cs := s.Start, uint64(0), uint64(0)
	cu, cs = processCPUNs()
	ticks, _ := readTicks()
	out := []CPUSample{}
	tick := time.NewTicker(sampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			s.done <- out
			return
		case <-tick.C:
		}
		t1 := time.Now()
		u1, s1 := processCPUNs()
		ticks1, _ := readTicks()
		dt := float64(t1.Sub(t).Nanoseconds())
		steal, total := ticks1.Steal-ticks.Steal, ticks1.Total-ticks.Total
		sample := CPUSample{TMs: float64(t1.Sub(s.Start).Nanoseconds()) / 1e6,
			UserPct: round1(100 * float64(u1-cu) / dt), SystemPct: round1(100 * float64(s1-cs) / dt)}
		if total > 0 {
			sample.StealPct = round1(100 * float64(steal) / float64(total))
		}
		out = append(out, sample)
		t, cu, cs, ticks = t1, u1, s1, ticks1
	}
}

// Stop ends sampling and returns every sample taken.
func (s *Sampler) Stop() []CPUSample {
	close(s.stop)
	return <-s.done
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// peakRSSBytes is this process's peak resident set size (VmHWM of /proc/self/status), or 0.
func peakRSSBytes() uint64 {
	text, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(text), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kib, _ := strconv.ParseUint(f[1], 10, 64)
			return kib * 1024
		}
	}
	return 0
}

// allowedCPUs are the CPUs this process may run on (the calling thread's affinity), in order.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var out []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// setProcessAffinity applies `set` to every thread of this process (each thread has its own
// mask on Linux; threads started later inherit their creator's). Twice over the threads, so a
// thread started during the first pass is caught by the second.
func setProcessAffinity(set *unix.CPUSet) error {
	var last error
	for pass := 0; pass < 2; pass++ {
		tasks, err := filepath.Glob("/proc/self/task/*")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(filepath.Base(task))
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				last = err
			}
		}
	}
	return last
}

// pinProcess pins the whole process to `cpu` with GOMAXPROCS 1 (one CPU, one running goroutine
// at a time); the returned function restores the affinity it had and Go's default GOMAXPROCS.
// Errors: the affinity could not be set (then nothing changed).
func pinProcess(cpu int) (func(), error) {
	var saved, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		return nil, err
	}
	one.Set(cpu)
	if err := setProcessAffinity(&one); err != nil {
		setProcessAffinity(&saved)
		return nil, err
	}
	runtime.GOMAXPROCS(1)
	return func() {
		setProcessAffinity(&saved)
		runtime.SetDefaultGOMAXPROCS()
	}, nil
}
