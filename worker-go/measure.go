package main

// The measuring window, as the Rust worker measures one: each thread (a goroutine locked to
// its own OS thread) warms up, then times samples of `batch` operations for `seconds`,
// recording each sample as `batch` values of t/batch in an HdrHistogram (1 ns to 1 h, 3
// significant digits); its on-CPU time over the window is CLOCK_THREAD_CPUTIME_ID's, the
// window's length CLOCK_MONOTONIC's, and the system's /proc/stat ticks are read around it.

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Histogram bounds, ns: the Rust worker's and the orchestrator's.
const (
	histLowestNs  = 1
	histHighestNs = 3_600_000_000_000
	histSigFigs   = 3
	// A calibrated batch makes a sample last at least this long, ns.
	minSampleNs = 10_000
)

// Window is what one run measured, all threads.
type Window struct {
	Ops         uint64
	WallNs      uint64
	CPUNs       []uint64
	Hist        *hdrhistogram.Histogram
	Batch       uint64
	Samples     uint64
	MinSampleNs uint64
	MaxSampleNs uint64
	Ticks       Ticks
}

// Ticks are /proc/stat's system-wide CPU ticks across the window.
type Ticks struct{ Steal, Busy, Total uint64 }

func readTicks() (Ticks, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return Ticks{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return Ticks{}, err
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return Ticks{}, fmt.Errorf("/proc/stat's first line is not the cpu line: %q", line)
	}
	var v []uint64
	for _, s := range fields[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return Ticks{}, err
		}
		v = append(v, n)
	}
	var total uint64
	for _, n := range v[:8] { // user nice system idle iowait irq softirq steal
		total += n
	}
	return Ticks{Steal: v[7], Busy: total - v[3] - v[4], Total: total}, nil
}

func threadCPUNs() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// calibrate doubles the batch from 1 until one sample lasts minSampleNs (at most 2^20).
func calibrate(run func() error) (uint64, error) {
	batch := uint64(1)
	for batch < 1<<20 {
		start := time.Now()
		for i := uint64(0); i < batch; i++ {
			if err := run(); err != nil {
				return 0, err
			}
		}
		if time.Since(start).Nanoseconds() >= minSampleNs {
			break
		}
		batch *= 2
	}
	return batch, nil
}

type threadResult struct {
	ops, wallNs, cpuNs, samples, minNs, maxNs uint64
	hist                                      *hdrhistogram.Histogram
	err                                       error
}

func runThread(c Case, batch uint64, warmup, budget time.Duration) threadResult {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := threadResult{hist: hdrhistogram.New(histLowestNs, histHighestNs, histSigFigs), minNs: ^uint64(0)}
	for end := time.Now().Add(warmup); time.Now().Before(end); {
		if r.err = c.Run(); r.err != nil {
			return r
		}
	}
	cpu0, start := threadCPUNs(), time.Now()
	end := start.Add(budget)
	for {
		t0 := time.Now()
		for i := uint64(0); i < batch; i++ {
			if r.err = c.Run(); r.err != nil {
				return r
			}
		}
		t1 := time.Now()
		ns := uint64(t1.Sub(t0).Nanoseconds())
		r.ops += batch
		r.samples++
		r.minNs, r.maxNs = min(r.minNs, ns), max(r.maxNs, ns)
		per := max(int64(ns/batch), histLowestNs)
		if err := r.hist.RecordValues(per, int64(batch)); err != nil {
			r.err = fmt.Errorf("a sample of %d ns per operation is outside the histogram: %w", per, err)
			return r
		}
		if !t1.Before(end) {
			r.wallNs, r.cpuNs = uint64(t1.Sub(start).Nanoseconds()), threadCPUNs()-cpu0
			return r
		}
	}
}

// measure runs case `c` on `threads` threads at once for `seconds` after `warmupS`, with
// `batch` operations per sample (0: calibrated here). Errors: an operation failed while timed.
func measure(c Case, threads int, warmupS, seconds float64, batch uint64) (Window, error) {
	if batch == 0 {
		var err error
		if batch, err = calibrate(c.Run); err != nil {
			return Window{}, err
		}
	}
	warmup, budget := time.Duration(warmupS*1e9), time.Duration(seconds*1e9)
	before, _ := readTicks()
	results := make([]threadResult, threads)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(i int) { defer wg.Done(); results[i] = runThread(c.forThread(i), batch, warmup, budget) }(i)
	}
	wg.Wait()
	after, _ := readTicks()
	w := Window{Batch: batch, Hist: hdrhistogram.New(histLowestNs, histHighestNs, histSigFigs), MinSampleNs: ^uint64(0),
		Ticks: Ticks{Steal: after.Steal - before.Steal, Busy: after.Busy - before.Busy, Total: after.Total - before.Total}}
	for _, r := range results {
		if r.err != nil {
			return Window{}, r.err
		}
		w.Ops += r.ops
		w.Samples += r.samples
		w.WallNs = max(w.WallNs, r.wallNs)
		w.CPUNs = append(w.CPUNs, r.cpuNs)
		w.MinSampleNs, w.MaxSampleNs = min(w.MinSampleNs, r.minNs), max(w.MaxSampleNs, r.maxNs)
		w.Hist.Merge(r.hist)
	}
	return w, nil
}

// hdrV2 is the encoding every worker sends its histogram in: HdrHistogram V2 compressed,
// base64.
const hdrV2 = hdrhistogram.V2CompressedEncodingCookieBase
