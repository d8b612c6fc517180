package main

// Load levels for the workloads (docs/worker-protocol.md, "Load levels"), as the Rust worker's
// measure/load.rs runs them, with goroutines for its threads:
//
//   - closed:N — N client goroutines (connections), each starting its next transaction when its
//     last one ended; latency is each transaction's own time.
//   - closed:N@R — the same, paced to R transactions/s overall, timed from each transaction's
//     actual start (coordinated omission not corrected: a stall shows as one slow transaction
//     per goroutine).
//   - open:R, open:R/T — transaction k is due at start + k/R; T goroutines (default 32) take
//     them; latency is measured from when it was due (coordinated omission corrected, as wrk2
//     does), and one that starts more than 1 ms after it was due counts as `late`.
//
// Every goroutine makes its transaction first (connections, primed sessions), then all run the
// level for the warm-up, wait while the caller's `between` step runs (the server's counters read
// at the window's start), and run the window. The client side's CPU is the whole process's over
// the window (sampler.go says why).

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Limits of a load level (hello's `limits`), the Rust worker's.
const (
	// MaxConcurrency is the most client goroutines (connections) one level may use.
	MaxConcurrency = 1024
	// OpenThreads is the client goroutines of an open level that does not name them.
	OpenThreads = 32
	// maxRatePerS is the highest rate a level may ask for.
	maxRatePerS = 1e7
	// lateAfter is how late an open-loop transaction may start before it counts as late.
	lateAfter = time.Millisecond
)

// Load is a parsed load level.
type Load struct {
	// Kind is "closed" or "open".
	Kind string
	// Concurrency (closed) or Threads (open): the client goroutines.
	Concurrency int
	// RatePerS: the pace of a paced closed level, the arrival rate of an open one; 0 = unpaced.
	RatePerS float64
}

// Threads is the client goroutines (and connections at once) this level uses.
func (l Load) Threads() int { return l.Concurrency }

// parseLoad parses closed:N, closed:N@R, open:R or open:R/T. Errors name the syntax.
func parseLoad(text string) (Load, error) {
	bad := errBadParams(fmt.Sprintf("load '%s' is not one of closed:N, closed:N@RATE, open:RATE, open:RATE/THREADS "+
		"(N, THREADS 1..=%d; RATE per second)", text, MaxConcurrency))
	count := func(s string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return n, err == nil && n >= 1 && n <= MaxConcurrency
	}
	rate := func(s string) (float64, bool) {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return r, err == nil && r > 0 && r <= maxRatePerS
	}
	kind, rest, ok := strings.Cut(text, ":")
	switch strings.TrimSpace(kind) {
	case "closed":
		n, r, paced := strings.Cut(rest, "@")
		c, okN := count(n)
		if !ok || !okN {
			return Load{}, bad
		}
		if !paced {
			return Load{Kind: "closed", Concurrency: c}, nil
		}
		if pace, okR := rate(r); okR {
			return Load{Kind: "closed", Concurrency: c, RatePerS: pace}, nil
		}
	case "open":
		r, t, threaded := strings.Cut(rest, "/")
		arrivals, okR := rate(r)
		threads, okT := OpenThreads, true
		if threaded {
			threads, okT = count(t)
		}
		if ok && okR && okT {
			return Load{Kind: "open", Concurrency: threads, RatePerS: arrivals}, nil
		}
	case "targets":
		return Load{}, errBadParams(fmt.Sprintf("a targets:N level is not a time window; this workload takes closed:N or open:RATE (got '%s')", text))
	}
	return Load{}, bad
}

// resultFields is the result's `load` object for this level.
func (l Load) resultFields() map[string]any {
	out := map[string]any{"kind": l.Kind, "corrected": l.Kind == "open", "rate_per_s": nil}
	if l.RatePerS > 0 {
		out["rate_per_s"] = l.RatePerS
	}
	if l.Kind == "closed" {
		out["concurrency"] = l.Concurrency
	} else {
		out["threads"] = l.Concurrency
	}
	return out
}

// TxnFunc is one transaction, run by the goroutine that made it.
type TxnFunc func() error

// LoadMeasurement is what a level's window measured on the client side.
type LoadMeasurement struct {
	// Ops is the transactions completed in the window; WallNs the window's start to the last
	// completion; Hist each transaction's latency in ns (from its due time for open levels).
	Ops    uint64
	WallNs uint64
	Hist   *hdrhistogram.Histogram
	// Late is the open-loop transactions that started more than 1 ms after they were due.
	Late uint64
	// ProcessUserNs and ProcessSystemNs are this process's CPU over the window (getrusage).
	ProcessUserNs, ProcessSystemNs uint64
	// Ticks are the host's /proc/stat ticks across the window.
	Ticks Ticks
}

// phaseState is one phase's (warm-up or window) shared state: its start, the open loop's next
// transaction number, and what the goroutines recorded.
type phaseState struct {
	start time.Time
	next  atomic.Uint64
	mu    sync.Mutex
	hist  *hdrhistogram.Histogram
	ops   uint64
	end   time.Time
	late  uint64
}

func newPhase() *phaseState {
	return &phaseState{hist: hdrhistogram.New(histLowestNs, histHighestNs, histSigFigs)}
}

// record adds one transaction that ended at `end` with `latency`.
func (p *phaseState) record(latency time.Duration, end time.Time, late bool) {
	ns := min(max(latency.Nanoseconds(), histLowestNs), histHighestNs)
	p.mu.Lock()
	p.hist.RecordValue(ns)
	p.ops++
	if end.After(p.end) {
		p.end = end
	}
	if late {
		p.late++
	}
	p.mu.Unlock()
}

// runLoad runs `newTxn`'s transactions at `load`: each goroutine makes its own transaction, all
// run the level for `warmup`, then `between` runs while they wait, then the window of `budget`.
// Errors: the first error of any goroutine's making or transaction, else between's.
func runLoad(newTxn func() (TxnFunc, error), load Load, warmup, budget time.Duration, between func() error) (LoadMeasurement, error) {
	n := load.Threads()
	warm, window := newPhase(), newPhase()
	var prepared, warmed sync.WaitGroup
	goWarm, goWindow := make(chan struct{}), make(chan struct{})
	abort := atomic.Bool{}
	errs := make([]error, n)
	var done sync.WaitGroup
	prepared.Add(n)
	warmed.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer done.Done()
			txn, err := newTxn()
			prepared.Done()
			<-goWarm
			if err == nil {
				err = runPhase(txn, load, i, warmup, warm)
			}
			warmed.Done()
			<-goWindow
			if err == nil && !abort.Load() {
				err = runPhase(txn, load, i, budget, window)
			}
			errs[i] = err
		}(i)
	}
	prepared.Wait()
	warm.start = time.Now()
	close(goWarm)
	warmed.Wait()
	betweenErr := between()
	abort.Store(betweenErr != nil)
	ticks0, _ := readTicks()
	u0, s0 := processCPUNs()
	window.start = time.Now()
	close(goWindow)
	done.Wait()
	u1, s1 := processCPUNs()
	ticks1, _ := readTicks()
	for _, err := range errs {
		if err != nil {
			return LoadMeasurement{}, err
		}
	}
	if betweenErr != nil {
		return LoadMeasurement{}, betweenErr
	}
	m := LoadMeasurement{Ops: window.ops, Hist: window.hist, Late: window.late, ProcessUserNs: u1 - u0, ProcessSystemNs: s1 - s0,
		Ticks: Ticks{Steal: ticks1.Steal - ticks0.Steal, Busy: ticks1.Busy - ticks0.Busy, Total: ticks1.Total - ticks0.Total}}
	if window.ops > 0 {
		m.WallNs = uint64(window.end.Sub(window.start).Nanoseconds())
	}
	return m, nil
}

// runPhase runs goroutine i's part of one phase of `budget` from p.start.
func runPhase(txn TxnFunc, load Load, i int, budget time.Duration, p *phaseState) error {
	if budget <= 0 {
		return nil
	}
	deadline := p.start.Add(budget)
	switch {
	case load.Kind == "open":
		return openLoop(txn, load.RatePerS, deadline, p)
	case load.RatePerS > 0:
		interval := float64(load.Concurrency) / load.RatePerS * 1e9
		offset := float64(i) / load.RatePerS * 1e9 // the goroutines' slots interleave
		return pacedLoop(txn, interval, offset, deadline, p)
	default:
		return closedLoop(txn, deadline, p)
	}
}

func closedLoop(txn TxnFunc, deadline time.Time, p *phaseState) error {
	for {
		t0 := time.Now()
		if err := txn(); err != nil {
			return err
		}
		t1 := time.Now()
		p.record(t1.Sub(t0), t1, false)
		if !t1.Before(deadline) {
			return nil
		}
	}
}

// pacedLoop takes this goroutine's slots (offset + k·interval), skipping those missed while a
// transaction ran late, each timed from its actual start.
func pacedLoop(txn TxnFunc, intervalNs, offsetNs float64, deadline time.Time, p *phaseState) error {
	for k := 0.0; ; {
		slot := p.start.Add(time.Duration(offsetNs + k*intervalNs))
		if !slot.Before(deadline) {
			return nil
		}
		time.Sleep(time.Until(slot))
		t0 := time.Now()
		if err := txn(); err != nil {
			return err
		}
		t1 := time.Now()
		p.record(t1.Sub(t0), t1, false)
		k++
		if behind := float64(int64((float64(t1.Sub(p.start).Nanoseconds()) - offsetNs) / intervalNs)); behind > k {
			k = behind
		}
	}
}

// openLoop takes the next due transaction until one falls due after the deadline; latency from
// its due time.
func openLoop(txn TxnFunc, rate float64, deadline time.Time, p *phaseState) error {
	for {
		k := p.next.Add(1) - 1
		due := p.start.Add(time.Duration(float64(k) * 1e9 / rate))
		if !due.Before(deadline) {
			return nil
		}
		time.Sleep(time.Until(due))
		t0 := time.Now()
		if err := txn(); err != nil {
			return err
		}
		t1 := time.Now()
		p.record(t1.Sub(due), t1, t0.Sub(due) > lateAfter)
	}
}
