package main

// The server side of a socket-mode workload, in a worker process of its own (the Rust worker's
// workloads/server.rs, same lines).
//
// The client's worker starts this very binary with `--serve-workload` (so the same build, and
// the same FIPS mode: GODEBUG is inherited), writes one JSON line — the workload, backend, the
// run request's `params`, the serving threads and the CPU to pin to — and reads one line back:
// `{"type":"listening","address":…,"port":…,"setup":{…},"pinned_cpu":…}` (`setup` is the
// workload's: the CA certificate a TLS client trusts and the server's cross-checks, never a
// private key) or `{"type":"error","code":…,"message":…,"fields":{"validation":…}}`. Then it
// sends `stats`, answered with the process's CPU time (getrusage: user + system, all threads)
// and the transactions completed so far, and `stop`, answered with the same plus the CPU
// timeline and the peak RSS; the process then exits.
//
// Keys stay in the server process's memory; nothing is written to disk. The listener binds the
// request's address, loopback unless the request named another.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// serveFlag is the command-line flag that makes this worker a workload server.
const serveFlag = "--serve-workload"

// serverSide is a workload's server, ready to listen: what it does with one accepted
// connection (adding 1 to `served` as each transaction on it completes) and the `setup` fields
// the client needs.
type serverSide struct {
	Handler func(conn net.Conn, served *atomic.Uint64) error
	Setup   map[string]any
}

// startError is why a server could not start: `Code` as in the protocol's errors
// (`port_in_use`, `unsupported`, `invalid`, `failed`, `bad_params`), one line, and the
// validation made before failing (TLS: its cross-checks), if any.
type startError struct {
	Code, Message string
	Validation    map[string]any
}

// finish is the run's answer for a server that did not start.
func (e *startError) finish() finish {
	switch e.Code {
	case "unsupported":
		return finish{Status: "unsupported", Reason: e.Message, Validation: e.Validation}
	case "invalid":
		return invalidFinish(e.Message, e.Validation)
	}
	return invalidFinish("server: "+e.Message, e.Validation)
}

// serverProcess is a running server process, seen from the client's worker.
type serverProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	// Addr is where it listens (host:port); Setup the workload's setup fields.
	Addr  string
	Setup map[string]any
	// PinnedCPU is the CPU it pinned itself to, or -1.
	PinnedCPU int
}

// serverStats are the server's counters at one moment (`Timeline` and `PeakRSSBytes` with
// `stop` only).
type serverStats struct {
	CPUNs        uint64      `json:"cpu_ns"`
	Transactions uint64      `json:"transactions"`
	Errors       uint64      `json:"errors"`
	FirstError   *string     `json:"first_error"`
	Timeline     []CPUSample `json:"timeline"`
	PeakRSSBytes uint64      `json:"peak_rss_bytes"`
}

// startServer starts the server for workload `op` with the run request's `params`, `threads`
// connections at most at once, pinned to `pinCPU` (-1: not pinned), and waits until it listens.
func startServer(op string, params map[string]any, threads, pinCPU int) (*serverProcess, *startError) {
	failed := func(m string) *startError { return &startError{Code: "failed", Message: m} }
	exe, err := os.Executable()
	if err != nil {
		return nil, failed(fmt.Sprintf("cannot find the worker binary: %v", err))
	}
	cmd := exec.Command(exe, serveFlag)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, failed(fmt.Sprintf("cannot start the server process: %v", err))
	}
	s := &serverProcess{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout), PinnedCPU: -1}
	var pin any
	if pinCPU >= 0 {
		pin = pinCPU
	}
	config, _ := json.Marshal(map[string]any{"workload": op, "backend": Library, "params": params, "threads": threads,
		"pin_cpu": pin, "side": nil})
	var answer struct {
		Type, Address, Code, Message string
		Port                         int
		Setup                        map[string]any
		PinnedCPU                    *int `json:"pinned_cpu"`
		Fields                       struct {
			Validation map[string]any `json:"validation"`
		}
	}
	_, werr := s.stdin.Write(append(config, '\n'))
	line, rerr := s.stdout.ReadBytes('\n')
	if werr != nil || rerr != nil {
		s.kill()
		return nil, failed("the server process exited before listening (its stderr is above)")
	}
	if err := json.Unmarshal(line, &answer); err != nil || answer.Type != "listening" {
		s.kill()
		if answer.Code == "" {
			answer.Code, answer.Message = "failed", fmt.Sprintf("the server sent no usable answer: %s", strings.TrimSpace(string(line)))
		}
		return nil, &startError{Code: answer.Code, Message: answer.Message, Validation: answer.Fields.Validation}
	}
	s.Addr, s.Setup = net.JoinHostPort(answer.Address, strconv.Itoa(answer.Port)), answer.Setup
	if answer.PinnedCPU != nil {
		s.PinnedCPU = *answer.PinnedCPU
	}
	return s, nil
}

func (s *serverProcess) ask(command string) (serverStats, error) {
	var st serverStats
	if _, err := io.WriteString(s.stdin, command+"\n"); err != nil {
		return st, fmt.Errorf("server process gone: %w", err)
	}
	line, err := s.stdout.ReadBytes('\n')
	if err != nil {
		return st, errors.New("the server process exited (its stderr is above)")
	}
	if err := json.Unmarshal(line, &st); err != nil {
		return st, fmt.Errorf("server sent '%s': %w", strings.TrimSpace(string(line)), err)
	}
	return st, nil
}

// stats is the server's counters now.
func (s *serverProcess) stats() (serverStats, error) { return s.ask("stats") }

// stop stops the server: its final counters, CPU timeline and peak RSS.
func (s *serverProcess) stop() (serverStats, error) {
	st, err := s.ask("stop")
	s.stdin.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.kill()
	}
	return st, err
}

// kill ends the server process (when it did not start, or would not stop).
func (s *serverProcess) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// serverCounters are the counters a server process keeps while it serves.
type serverCounters struct {
	served, errors atomic.Uint64
	mu             sync.Mutex
	firstError     *string
}

func (c *serverCounters) failed(err error) {
	c.errors.Add(1)
	c.mu.Lock()
	if c.firstError == nil {
		msg := err.Error()
		c.firstError = &msg
	}
	c.mu.Unlock()
}

func (c *serverCounters) stats() serverStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return serverStats{CPUNs: processCPUTotalNs(), Transactions: c.served.Load(), Errors: c.errors.Load(), FirstError: c.firstError}
}

// serverConfigLine is what the client's worker tells a server process.
type serverConfigLine struct {
	Workload string         `json:"workload"`
	Params   map[string]any `json:"params"`
	PinCPU   *int           `json:"pin_cpu"`
}

// serveWorkloadMain is the `--serve-workload` process: read the configuration, check its
// request as a `run` would, build the workload's server side, listen, serve, answer `stats`
// and `stop`. Returns the exit status.
func serveWorkloadMain(in io.Reader, out io.Writer) int {
	r, w := bufio.NewReader(in), bufio.NewWriter(out)
	say := func(msg map[string]any) { send(w, msg) }
	refuse := func(e *startError) int {
		say(map[string]any{"type": "error", "code": e.Code, "message": e.Message, "fields": map[string]any{"validation": e.Validation}})
		return 2
	}
	line, err := r.ReadBytes('\n')
	var config serverConfigLine
	if err != nil && len(line) == 0 || json.Unmarshal(line, &config) != nil {
		return 1
	}
	wl, ok := workloads[config.Workload]
	if !ok {
		return refuse(&startError{Code: "bad_params", Message: fmt.Sprintf("no workload '%s' has a server here", config.Workload)})
	}
	wc, err := parseWorkload(wl, config.Params)
	if err != nil {
		return refuse(&startError{Code: "bad_params", Message: err.Error()})
	}
	var pinned any
	if config.PinCPU != nil {
		if _, err := pinProcess(*config.PinCPU); err == nil {
			pinned = *config.PinCPU
		}
	}
	side, serr := wl.ServerSide(wc.Req, wc.Common)
	if serr != nil {
		return refuse(serr)
	}
	ln, serr := listen(wc.Common)
	if serr != nil {
		return refuse(serr)
	}
	sampler := startSampler()
	counters := &serverCounters{}
	go acceptLoop(ln, side, counters, wc.Common, time.Now())
	addr := ln.Addr().(*net.TCPAddr)
	say(map[string]any{"type": "listening", "address": addr.IP.String(), "port": addr.Port, "setup": side.Setup, "pinned_cpu": pinned})
	for {
		cmd, err := r.ReadString('\n')
		switch strings.TrimSpace(cmd) {
		case "stats":
			say(statsMessage(counters.stats()))
			continue
		case "stop":
			last := counters.stats()
			last.Timeline, last.PeakRSSBytes = sampler.Stop(), peakRSSBytes()
			say(statsMessage(last))
			return 0
		}
		if err != nil { // the client's worker is gone
			return 0
		}
	}
}

func statsMessage(s serverStats) map[string]any {
	b, _ := json.Marshal(s)
	var m map[string]any
	json.Unmarshal(b, &m)
	if s.Timeline == nil {
		delete(m, "timeline")
		delete(m, "peak_rss_bytes")
	}
	return m
}

// listen binds the request's address and port; a port in use is `port_in_use` with one line.
func listen(c commonParams) (net.Listener, *startError) {
	addr := net.JoinHostPort(c.Address, strconv.Itoa(c.Port))
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, &startError{Code: "port_in_use", Message: fmt.Sprintf("cannot listen on %s: the port is in use; choose another port or leave it out (0 = any free port)", addr)}
	}
	if err != nil {
		return nil, &startError{Code: "failed", Message: fmt.Sprintf("cannot listen on %s: %v", addr, err)}
	}
	return ln, nil
}

// acceptLoop serves every accepted connection in a goroutine of its own, after the injected
// stall when one is on (`stall_ms` at the start of every `stall_every_ms` since t0).
func acceptLoop(ln net.Listener, side *serverSide, counters *serverCounters, c commonParams, t0 time.Time) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			if c.StallMs > 0 {
				every, pause := time.Duration(c.StallEveryMs)*time.Millisecond, time.Duration(c.StallMs)*time.Millisecond
				if phase := time.Since(t0) % every; phase < pause {
					time.Sleep(pause - phase)
				}
			}
			if err := side.Handler(conn, &counters.served); err != nil {
				counters.failed(err)
			}
		}()
	}
}
