package main

// `tls-bulk` with Go's crypto/tls: application data streamed over established TLS
// connections. Each client goroutine (one per connection of the load level) connects and
// handshakes once, before the window; one transaction then sends `size_bytes` and waits for the
// receiver's 1-byte acknowledgement. The client is the sender, the server the receiver: `cpu_ns`
// is the sending process's CPU, `server.cpu_ns` the receiving one's.
//
// Records: crypto/tls has no maximum-fragment-length setting. Both sides turn its dynamic record
// sizing off (Config.DynamicRecordSizingDisabled: otherwise a connection starts with records of
// one TCP segment and grows them), so every record carries up to 16384 bytes of plaintext, the
// Rust worker's default; `record_bytes` is honoured at 16384 only, any other value is
// `unsupported`.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// defaultBulkBytes is the bytes sent per transaction when not given: 1 MiB.
	defaultBulkBytes = 1 << 20
	// maxBulkBytes is the largest transfer per transaction: 64 MiB (the primitives' limit).
	maxBulkBytes = 64 << 20
	// bulkChunk is the application write (and read) size.
	bulkChunk = 64 << 10
)

func init() { registerWorkload(tlsBulkWorkload) }

var tlsBulkWorkload = &workload{
	Name:      "tls-bulk",
	OwnParams: []string{"tls_version", "cert", "group", "suite", "size_bytes", "record_bytes"},
	Spec: func() map[string]any {
		return map[string]any{
			"defaults": map[string]any{"tls_version": "1.3", "cert": "ecdsa-p256", "group": "x25519", "suite": "aes-128-gcm",
				"size_bytes": defaultBulkBytes, "load": "closed:1", "mode": "socket"},
			"default_size_bytes": defaultBulkBytes, "bytes_per_tx_param": "size_bytes",
			"transaction": map[string]any{"one": "transfer", "many": "transfers"},
		}
	},
	ParamValues: map[string][]string{"tls_version": tlsVersions, "cert": certKinds, "group": groupNames, "suite": suiteNames},
	Parse:       parseBulk,
	Check:       func(req any) string { return checkTLS(req.(bulkSpec).TLS) },
	Run:         runBulk,
	ServerSide:  bulkServerSide,
}

// bulkSpec is a checked tls-bulk request.
type bulkSpec struct {
	TLS  tlsSpec
	Size int
}

func parseBulk(params map[string]any) (any, error) {
	s, err := parseTLS(params, false)
	if err != nil {
		return nil, err
	}
	if s.RecordBytes, err = wholeParam(params, "record_bytes", 0, 0, maxRecordBytes); err != nil {
		return nil, err
	}
	if s.RecordBytes != 0 && s.RecordBytes < 512 {
		return nil, errBadParams(fmt.Sprintf("record_bytes must be 512..=16384 (TLS's maximum fragment lengths), got %d", s.RecordBytes))
	}
	size, err := wholeParam(params, "size_bytes", defaultBulkBytes, 1, maxBulkBytes)
	if err != nil {
		return nil, err
	}
	return bulkSpec{TLS: s, Size: size}, nil
}

// bulkServerSide receives: per connection, handshake, then for each transaction read
// `size_bytes` and acknowledge with one byte, until the sender closes.
func bulkServerSide(req any, _ commonParams) (*serverSide, *startError) {
	spec := req.(bulkSpec)
	_, cfg, setup, serr := tlsServerSide(spec.TLS)
	if serr != nil {
		return nil, serr
	}
	return &serverSide{Setup: setup, Handler: func(conn net.Conn, served *atomic.Uint64) error {
		c := tls.Server(conn, cfg)
		defer c.Close()
		if err := c.Handshake(); err != nil {
			return fmt.Errorf("server handshake: %w", err)
		}
		buf := make([]byte, bulkChunk)
		for {
			if _, err := io.ReadFull(c, buf[:1]); err != nil {
				return nil // the sender closed between transactions
			}
			if err := drain(c, spec.Size-1, buf); err != nil {
				return err
			}
			if _, err := c.Write([]byte{1}); err != nil {
				return fmt.Errorf("acknowledging: %w", err)
			}
			served.Add(1)
		}
	}}, nil
}

// drain reads exactly n bytes of application data (discarded).
func drain(c io.Reader, n int, buf []byte) error {
	for n > 0 {
		got, err := c.Read(buf[:min(n, len(buf))])
		n -= got
		if err != nil && n > 0 {
			if errors.Is(err, io.EOF) {
				return errors.New("connection closed mid-transfer")
			}
			return err
		}
	}
	return nil
}

// sendOne is one transaction on an established connection: send `size` bytes, wait for the
// 1-byte acknowledgement.
func sendOne(c *tls.Conn, size int, data []byte) error {
	for left := size; left > 0; {
		n := min(left, len(data))
		if _, err := c.Write(data[:n]); err != nil {
			return fmt.Errorf("sending: %w", err)
		}
		left -= n
	}
	var ack [1]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return errors.New("the receiver closed before acknowledging")
	}
	return nil
}

// connectBulk connects and handshakes, with a deadline past the run's end.
func connectBulk(cfg *tls.Config, addr string, until time.Time) (*tls.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, txnTimeout)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	conn.SetDeadline(until)
	c := tls.Client(conn, cfg)
	if err := c.Handshake(); err != nil {
		c.Close()
		return nil, fmt.Errorf("client handshake: %w", err)
	}
	return c, nil
}

// runBulk validates (one connection must negotiate what was asked and carry one transfer),
// then measures tls-bulk, one connection per client goroutine.
func runBulk(wc *workloadCase, warmup, budget time.Duration) finish {
	spec := wc.Req.(bulkSpec)
	t, f := startTLSSocket(wc, spec.TLS)
	if f != nil {
		return *f
	}
	defer t.close()
	addr, until := t.server.Addr, time.Now().Add(warmup+budget+txnTimeout)
	data := make([]byte, bulkChunk)
	for i := range data {
		data[i] = 0x5a
	}
	c, err := connectBulk(t.client, addr, until)
	var first negotiated
	if err == nil {
		first = negotiatedOf(c.ConnectionState())
		err = sendOne(c, spec.Size, data)
		c.Close()
	}
	if err != nil {
		return invalidFinish("transfer failed: "+err.Error(), tlsValidation(t.checks, "transfer failed"))
	}
	if why := first.mismatch(spec.TLS); why != "" {
		return invalidFinish("negotiated differs from the request: "+why, tlsValidation(t.checks, why))
	}
	var mu sync.Mutex
	var conns []*tls.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	newTxn := func() (TxnFunc, error) {
		c, err := connectBulk(t.client, addr, until)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return func() error { return sendOne(c, spec.Size, data) }, nil
	}
	w, f := socketWindow(t.server, newTxn, wc.Common.Load, warmup, budget, "transfer")
	t.server = nil
	if f != nil {
		f.Validation = tlsValidation(t.checks, "pass")
		return *f
	}
	fields, err := measuredFields(w.lm, spec.Size)
	if err != nil {
		return invalidFinish("cannot encode the histogram: "+err.Error(), nil)
	}
	w.server["errors"] = w.errors
	for k, v := range map[string]any{"negotiated": first, "negotiated_counts": nil, "server": w.server,
		"client_timeline": w.clientTimeline, "placement": t.placement} {
		fields[k] = v
	}
	return finish{Status: "ok", Validation: tlsValidation(t.checks, "pass"), Fields: fields}
}
