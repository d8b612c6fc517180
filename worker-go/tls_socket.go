package main

// The TLS workloads in socket mode: the server process started and the client placed beside it,
// one transaction on each side, the `check` request's real handshake, and the window measured on
// both sides (the server's counters read at the window's start and end: `server.window`).

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// txnTimeout bounds one connection's exchanges (a stalled server included: stall_ms ≤ 60 s).
const txnTimeout = 2 * time.Minute

// tlsKAT is a TLS workload's `validation.kat`: its primitives are checked on their own.
const tlsKAT = "not applicable (a protocol workload: its primitives have their own known-answer tests; here the negotiated parameters are checked)"

// cpuScope says what the result's `cpu_ns` is in this worker.
const cpuScope = "process: the client worker process's CPU time over the window (getrusage RUSAGE_SELF, user + system, " +
	"every thread: the load goroutines and the Go runtime serving them), one entry, because Go moves goroutines between " +
	"threads; the Rust worker's cpu_ns are its client threads' own"

// tlsValidation is a TLS workload's validation: the cross-checks, and whether the negotiation
// was what was asked (`pass`, or what differed).
func tlsValidation(checks []any, negotiated string) map[string]any {
	return map[string]any{"kat": tlsKAT, "negotiated": negotiated, "cross_checks": checks}
}

// clientTransaction is one tls-handshake transaction on the client: connect, handshake, a
// 1-byte request, the 1-byte response (a TLS 1.3 client has its session tickets by then),
// close. What it negotiated; the error says which step failed.
func clientTransaction(cfg *tls.Config, addr string) (negotiated, error) {
	conn, err := net.DialTimeout("tcp", addr, txnTimeout)
	if err != nil {
		return negotiated{}, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	conn.SetDeadline(time.Now().Add(txnTimeout))
	c := tls.Client(conn, cfg)
	defer c.Close()
	if err := c.Handshake(); err != nil {
		return negotiated{}, fmt.Errorf("client handshake: %w", err)
	}
	if _, err := c.Write([]byte{'?'}); err != nil {
		return negotiated{}, fmt.Errorf("client write: %w", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return negotiated{}, fmt.Errorf("reading the response: %w", err)
	}
	return negotiatedOf(c.ConnectionState()), nil
}

// serverTransaction is the server's side of it on an accepted connection: handshake, read the
// request, write the response, close.
func serverTransaction(cfg *tls.Config, conn net.Conn) error {
	conn.SetDeadline(time.Now().Add(txnTimeout))
	c := tls.Server(conn, cfg)
	if err := c.Handshake(); err != nil {
		c.Close()
		return fmt.Errorf("server handshake: %w", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return fmt.Errorf("reading the request: %w", err)
	}
	if _, err := c.Write([]byte{'!'}); err != nil {
		c.Close()
		return fmt.Errorf("server write: %w", err)
	}
	c.Close() // the exchange is complete; the client may have closed first
	return nil
}

var (
	checkIDsMu sync.Mutex
	checkIDs   = map[string]*identity{}
)

// checkIdentity is an identity of kind `kind` made once per process for `check` requests.
func checkIdentity(kind string) (*identity, error) {
	checkIDsMu.Lock()
	defer checkIDsMu.Unlock()
	if id, ok := checkIDs[kind]; ok {
		return id, nil
	}
	id, err := newIdentity(kind)
	if err == nil {
		checkIDs[kind] = id
	}
	return id, err
}

// checkTLS is why Go's crypto/tls cannot run `s` ("" when it can): the rules
// (tlsSpec.unsupported), then the real thing (handshakeCheck).
func checkTLS(s tlsSpec) string {
	if why := s.unsupported(); why != "" {
		return why
	}
	return handshakeCheck(s)
}

// handshakeCheck: a server and a client configured as a run configures them, two transactions
// over loopback (the first primes the session cache when resuming), the second's negotiation
// compared with the request; "" when it is what was asked.
func handshakeCheck(s tlsSpec) string {
	id, err := checkIdentity(s.Cert)
	if err != nil {
		return fmt.Sprintf("Go cannot make a %s certificate here: %v", s.Cert, err)
	}
	defer useTLS13Suite(s.suiteID())()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Sprintf("cannot listen on loopback for the check: %v", err)
	}
	defer ln.Close()
	server := serverConfig(s, id)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			serverTransaction(server, conn)
		}
	}()
	pool, _ := caPool(id.CADER)
	client := clientConfig(s, pool)
	var n negotiated
	for i := 0; i < 2 && err == nil; i++ {
		n, err = clientTransaction(client, ln.Addr().String())
	}
	if err != nil {
		return fmt.Sprintf("Go's crypto/tls cannot make this handshake here: %v", err)
	}
	if why := n.mismatch(s); why != "" {
		return "Go's crypto/tls negotiates otherwise: " + why
	}
	return ""
}

// tlsServerSide is the TLS server in its own process: the TLS 1.3 suite set, a fresh identity
// (its key never leaves this process), the cross-checks with OpenSSL (a failed one stops the
// cell: invalid), and `setup` with the CA certificate (DER, base64) and the cross-checks.
func tlsServerSide(s tlsSpec) (*identity, *tls.Config, map[string]any, *startError) {
	useTLS13Suite(s.suiteID()) // for this process's life
	if why := s.unsupported(); why != "" {
		return nil, nil, nil, &startError{Code: "unsupported", Message: why}
	}
	id, err := newIdentity(s.Cert)
	if err != nil {
		return nil, nil, nil, &startError{Code: "failed", Message: fmt.Sprintf("cannot make the certificate: %v", err)}
	}
	cfg := serverConfig(s, id)
	checks := []any{}
	for _, c := range opensslCrossChecks(s, id, cfg) {
		checks = append(checks, c)
		if c["status"] == "fail" {
			return nil, nil, nil, &startError{Code: "invalid", Message: fmt.Sprintf("cross-check failed: %s: %s", c["with"], c["detail"]),
				Validation: tlsValidation(checks, "not checked")}
		}
	}
	return id, cfg, map[string]any{"ca_der": base64.StdEncoding.EncodeToString(id.CADER), "cross_checks": checks}, nil
}

// tlsSocket is a TLS workload's socket-mode set-up on the client side.
type tlsSocket struct {
	server *serverProcess
	client *tls.Config
	checks []any
	// placement says where the two sides run.
	placement string
	restore   []func()
}

// close undoes the set-up (the client's pinning, the TLS 1.3 suite list) and kills the server
// if it still runs.
func (t *tlsSocket) close() {
	for i := len(t.restore) - 1; i >= 0; i-- {
		t.restore[i]()
	}
	if t.server != nil && t.server.cmd.ProcessState == nil {
		t.server.kill()
	}
}

// startTLSSocket starts the server process for `wc` (pinned apart from the client where the host
// has two CPUs or more), pins this process, and makes the client configuration trusting the
// server's CA. On failure: the cell's answer.
func startTLSSocket(wc *workloadCase, s tlsSpec) (*tlsSocket, *finish) {
	t := &tlsSocket{restore: []func(){useTLS13Suite(s.suiteID())}}
	cpus := allowedCPUs()
	clientCPU, serverCPU := -1, -1
	if len(cpus) >= 2 {
		clientCPU, serverCPU = cpus[0], cpus[1]
	}
	server, serr := startServer(wc.W.Name, wc.Raw, wc.Common.Load.Threads(), serverCPU)
	if serr != nil {
		t.close()
		f := serr.finish()
		return nil, &f
	}
	t.server = server
	clientPinned := -1
	if clientCPU >= 0 {
		if restore, err := pinProcess(clientCPU); err == nil {
			t.restore, clientPinned = append(t.restore, restore), clientCPU
		}
	}
	switch {
	case clientPinned >= 0 && server.PinnedCPU >= 0:
		t.placement = fmt.Sprintf("client process on CPU %d (GOMAXPROCS 1), server process on CPU %d (GOMAXPROCS 1)", clientPinned, server.PinnedCPU)
	case clientCPU < 0:
		t.placement = fmt.Sprintf("not pinned: this process may use %d CPU(s), so client and server share it", len(cpus))
	default:
		t.placement = fmt.Sprintf("pinning failed (client CPU %d, server CPU %d): the sides may share CPUs", clientPinned, server.PinnedCPU)
	}
	if checks, ok := server.Setup["cross_checks"].([]any); ok {
		t.checks = checks
	}
	ca, _ := server.Setup["ca_der"].(string)
	der, err := base64.StdEncoding.DecodeString(ca)
	pool, perr := caPool(der)
	if ca == "" || err != nil || perr != nil {
		t.close()
		f := invalidFinish("the server sent no usable CA certificate", nil)
		return nil, &f
	}
	t.client = clientConfig(s, pool)
	return t, nil
}

// socketResult is what a socket window measured on both sides.
type socketResult struct {
	lm             LoadMeasurement
	clientTimeline []CPUSample
	server         map[string]any
	errors         uint64
	firstError     *string
}

// socketWindow runs newTxn's transactions at `load` against the running server for warmup +
// budget, the server's counters read at the window's start (while every load goroutine waits)
// and after its end, both sides' CPU sampled, the server stopped. `what` names a transaction in
// the error. On failure: the cell's answer (invalid).
func socketWindow(server *serverProcess, newTxn func() (TxnFunc, error), load Load, warmup, budget time.Duration, what string) (socketResult, *finish) {
	var before serverStats
	sampler := startSampler()
	lm, err := runLoad(newTxn, load, warmup, budget, func() error {
		var e error
		if before, e = server.stats(); e != nil {
			return fmt.Errorf("server: %w", e)
		}
		return nil
	})
	timeline := sampler.Stop()
	after, aerr := server.stats()
	stopped, serr := server.stop()
	fail := func(reason string) (socketResult, *finish) {
		f := invalidFinish(reason, nil)
		return socketResult{}, &f
	}
	switch {
	case err != nil:
		return fail(fmt.Sprintf("%s failed while measured: %v", what, err))
	case aerr != nil:
		return fail(fmt.Sprintf("server: %v", aerr))
	case serr != nil:
		return fail(fmt.Sprintf("server: %v", serr))
	}
	serverTimeline := stopped.Timeline
	if serverTimeline == nil {
		serverTimeline = []CPUSample{}
	}
	return socketResult{lm: lm, clientTimeline: timeline, errors: stopped.Errors, firstError: stopped.FirstError,
		server: map[string]any{"cpu_ns": after.CPUNs - before.CPUNs, "transactions": after.Transactions - before.Transactions,
			"window": true, "address": server.Addr, "timeline": serverTimeline}}, nil
}

// measuredFields are the result's measurement fields for a window (`bytesPerOp` per
// transaction). Errors: the histogram could not be encoded.
func measuredFields(lm LoadMeasurement, bytesPerOp int) (map[string]any, error) {
	encoded, err := lm.Hist.Encode(hdrV2)
	if err != nil {
		return nil, err
	}
	cpu := lm.ProcessUserNs + lm.ProcessSystemNs
	minNs, maxNs := int64(0), lm.Hist.Max()
	if lm.Ops > 0 {
		minNs = lm.Hist.Min()
	}
	return map[string]any{"ops": lm.Ops, "wall_ns": lm.WallNs, "cpu_ns": []uint64{cpu}, "cpu_ns_total": cpu, "cpu_ns_scope": cpuScope,
		"histogram": string(encoded), "timing": "individual", "batch": 1, "bytes_per_op": bytesPerOp, "samples": lm.Ops,
		"sample_ns_stats": map[string]any{"min": minNs, "max": maxNs}, "steal_ticks": lm.Ticks.Steal, "busy_ticks": lm.Ticks.Busy,
		"total_ticks": lm.Ticks.Total, "tsc_cycles": nil, "late": lm.Late}, nil
}
