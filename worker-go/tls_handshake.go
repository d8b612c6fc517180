package main

// `tls-handshake` with Go's crypto/tls on both sides: one transaction = connect, a full or
// resumed handshake, a 1-byte request and a 1-byte response, close — so both sides have
// finished (a TLS 1.3 server completes on the client's Finished) and the client has its
// session tickets.
//
// Socket mode only: the server in a worker process of its own (server.go), the client
// goroutines in this one, each process pinned to its own CPU where the host has two. (The Rust
// worker's memory mode — both sides in one thread through buffers, each side's thread CPU read
// around its own calls — has no faithful Go counterpart: crypto/tls drives a blocking net.Conn,
// so the two sides would be two goroutines handing bytes over, and their CPU could not be
// told apart.)
//
// Correct before timed: the server process's cross-checks with OpenSSL (tls_interop.go), then
// the client's first two transactions (the first primes the session cache when resuming) must
// negotiate exactly what was asked — version, suite, group, a signature scheme of the
// certificate's key type, resumed or not — or the result is invalid and nothing is timed. Every
// timed transaction's negotiation is tallied (`negotiated_counts`); one that differs makes the
// result invalid too.

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

func init() { registerWorkload(tlsHandshakeWorkload) }

var tlsHandshakeWorkload = &workload{
	Name:      "tls-handshake",
	OwnParams: []string{"tls_version", "cert", "group", "suite", "session"},
	Spec: func() map[string]any {
		return map[string]any{
			"defaults": map[string]any{"tls_version": "1.3", "cert": "ecdsa-p256", "group": "x25519", "suite": "aes-128-gcm",
				"session": "full", "load": "closed:1", "mode": "socket"},
			"transaction": map[string]any{"one": "handshake", "many": "handshakes"},
		}
	},
	ParamValues: map[string][]string{"tls_version": tlsVersions, "cert": certKinds, "group": groupNames, "suite": suiteNames,
		"session": {"full", "resumed"}},
	Parse:      func(params map[string]any) (any, error) { return parseTLS(params, true) },
	Check:      func(req any) string { return checkTLS(req.(tlsSpec)) },
	Run:        runHandshake,
	ServerSide: handshakeServerSide,
}

// handshakeServerSide serves one transaction per connection.
func handshakeServerSide(req any, _ commonParams) (*serverSide, *startError) {
	_, cfg, setup, serr := tlsServerSide(req.(tlsSpec))
	if serr != nil {
		return nil, serr
	}
	return &serverSide{Setup: setup, Handler: func(conn net.Conn, served *atomic.Uint64) error {
		if err := serverTransaction(cfg, conn); err != nil {
			return err
		}
		served.Add(1)
		return nil
	}}, nil
}

// runHandshake validates, then measures tls-handshake at the case's level.
func runHandshake(wc *workloadCase, warmup, budget time.Duration) finish {
	s := wc.Req.(tlsSpec)
	t, f := startTLSSocket(wc, s)
	if f != nil {
		return *f
	}
	defer t.close()
	addr := t.server.Addr
	var first negotiated
	var err error
	for i := 0; i < 2 && err == nil; i++ {
		first, err = clientTransaction(t.client, addr)
	}
	if err != nil {
		return invalidFinish("handshake failed: "+err.Error(), tlsValidation(t.checks, "handshake failed"))
	}
	if why := first.mismatch(s); why != "" {
		return invalidFinish("negotiated differs from the request: "+why, tlsValidation(t.checks, why))
	}
	counts := newTally()
	newTxn := func() (TxnFunc, error) {
		cfg := t.client
		if s.Resume { // each goroutine resumes its own session, primed here (untimed)
			cfg = withOwnSessions(cfg)
			if _, err := clientTransaction(cfg, addr); err != nil {
				return nil, fmt.Errorf("priming a client's session: %w", err)
			}
		}
		return func() error {
			n, err := clientTransaction(cfg, addr)
			if err == nil {
				counts.add(n)
			}
			return err
		}, nil
	}
	w, f := socketWindow(t.server, newTxn, wc.Common.Load, warmup, budget, "transaction")
	t.server = nil
	if f != nil {
		f.Validation = tlsValidation(t.checks, "pass")
		return *f
	}
	if why := counts.mismatch(s); why != "" {
		return invalidFinish("negotiated differs from the request: "+why, tlsValidation(t.checks, why))
	}
	if w.firstError != nil {
		return invalidFinish(fmt.Sprintf("the server failed %d transaction(s): %s", w.errors, *w.firstError), tlsValidation(t.checks, "pass"))
	}
	fields, err := measuredFields(w.lm, 0)
	if err != nil {
		return invalidFinish("cannot encode the histogram: "+err.Error(), nil)
	}
	for k, v := range map[string]any{"negotiated": first, "negotiated_counts": counts.counts(), "server": w.server,
		"client_timeline": w.clientTimeline, "placement": t.placement} {
		fields[k] = v
	}
	return finish{Status: "ok", Validation: tlsValidation(t.checks, "pass"), Fields: fields}
}
