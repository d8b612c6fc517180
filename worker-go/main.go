// cryptoperf-worker-go: a cryptoperf worker in Go, speaking the worker protocol (JSON lines on
// stdin/stdout, docs/worker-protocol.md) for one backend, `go`: the Go standard library's
// crypto. Every request line gets one answer line; stderr carries diagnostics only.
//
// It answers `hello`, `run` and `bye` for the primitives in backend.go and ops_*.go (each
// checked against its known answer and cross-checked against a second library, crosscheck.go,
// before it is timed), and `run` and `check` for the TLS workloads
// (workload.go; with `--serve-workload` it is a workload's server process, server.go).
package main

import (
	"bufio"
	"crypto/fips140"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Protocol is the worker protocol version this worker speaks.
const Protocol = 1

// WorkerVersion is this worker's version.
const WorkerVersion = "0.1.0"

// MaxRequestBytes is the longest request line read (1 MiB), as the Rust worker.
const MaxRequestBytes = 1 << 20

type refusal struct{ code, message string }

func (r *refusal) Error() string { return r.message }

func errBadParams(msg string) error   { return &refusal{"bad_params", msg} }
func errUnsupported(msg string) error { return &refusal{"unsupported", msg} }

func send(w *bufio.Writer, msg map[string]any) {
	b, err := json.Marshal(msg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot encode an answer: %v\n", err)
		return
	}
	w.Write(b)
	w.WriteByte('\n')
	w.Flush()
}

// errorMsg is an `error` answer: its code (bad_request, unknown_backend, unknown_op, bad_params,
// protocol_mismatch) and one line saying what and why; `id` null until answer sets the request's.
func errorMsg(code, message string) map[string]any {
	return map[string]any{"type": "error", "id": nil, "code": code, "message": message}
}

// unknownName refuses a request naming a backend or an operation this worker does not have, as
// the protocol's unknown_backend and unknown_op errors listing the known ones; nil otherwise.
func unknownName(req map[string]any) error {
	backend, _ := req["backend"].(string)
	op, _ := req["op"].(string)
	if backend != Library {
		return &refusal{"unknown_backend", fmt.Sprintf("unknown backend '%s'; known: %s", backend, Library)}
	}
	if _, ok := ops[op]; ok {
		return nil
	}
	if _, ok := workloads[op]; ok {
		return nil
	}
	return unknownOp(op)
}

// unknownOp is the unknown_op error for operation `name`, listing every operation and workload.
func unknownOp(name string) error {
	return &refusal{"unknown_op", fmt.Sprintf("unknown operation '%s'; known: %s", name,
		strings.Join(withWorkloadNames(opNames()), ", "))}
}

func opNames() []string {
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// fipsState is Go's FIPS 140-3 mode in this process (GODEBUG=fips140=on or only, read at
// start-up): whether it is on, whether non-approved algorithms are refused (only), and the
// version of the Go Cryptographic Module.
func fipsState() map[string]any {
	return map[string]any{"enabled": fips140.Enabled(), "enforced": fips140.Enforced(), "module_version": fips140.Version()}
}

// baselineMask is the one CPU capability mask this worker takes: none (Go's crypto has no
// runtime mask), with the value every worker announces for it.
var baselineMask = map[string]any{
	"name": "baseline", "clears": []string{}, "description": "no mask: every extension the CPU has",
	"openssl_ia32cap": "~0x0000000000000000:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000:~0x0000000000000000",
}

func opParams() map[string]any {
	out := map[string]any{}
	for name, op := range ops {
		entry := map[string]any{"params": op.ParamNames(), "default_size_bytes": nil}
		if op.Sized {
			entry["default_size_bytes"] = op.DefaultSize
		}
		if op.DefaultDigest != "" {
			entry["default_digest"] = op.DefaultDigest
		}
		if op.DefaultPadding != "" {
			entry["default_padding"] = op.DefaultPadding
		}
		out[name] = entry
	}
	return out
}

// hello is the answer to `hello`, in the fields the Rust worker's has (docs/worker-protocol.md,
// "hello"): the one backend, its operations and their parameters, the limits, the CPU.
func hello() map[string]any {
	return map[string]any{
		"type": "hello", "protocol": Protocol, "worker_version": WorkerVersion, "build": buildName,
		"cpu": cpuInfo(), "cpu_masks": []map[string]any{baselineMask},
		"backends": []map[string]any{{"backend": Library, "library": LibraryName, "library_version": LibraryVersion(),
			"fips": fips140.Enabled(), "fips140": fipsState(), "capabilities": capabilities()}},
		"ops": withWorkloadNames(opNames()), "op_params": withWorkloadSpecs(opParams()), "param_values": workloadParamValues(paramValues()),
		"limits": map[string]any{"max_request_bytes": MaxRequestBytes, "max_size_bytes": MaxSizeBytes,
			"max_threads": MaxThreads, "max_seconds": MaxSeconds, "max_warmup_s": MaxWarmupS, "max_batch": MaxBatch,
			// the workloads' levels (load.go); no targets:N workload here
			"max_concurrency": MaxConcurrency, "open_threads": OpenThreads, "max_targets": 0},
	}
}

func capabilities() map[string]any {
	return map[string]any{"maskable": false, "reason": "Go's crypto has no runtime CPU capability mask"}
}

// serve answers the requests on in, one line each, until `bye` or the end of input.
func serve(in io.Reader, out io.Writer) int {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriter(out)
	greeted := false
	for {
		line, tooLong, err := readLine(r)
		if err == io.EOF && len(line) == 0 && !tooLong {
			return 0
		}
		if tooLong {
			send(w, errorMsg("bad_request", fmt.Sprintf("request line is longer than the limit of %d bytes", MaxRequestBytes)))
		} else if len(line) > 0 {
			if done := answer(w, line, &greeted); done >= 0 {
				return done
			}
		}
		if err == io.EOF {
			return 0
		}
	}
}

// readLine reads one line (without its newline); tooLong when it exceeded MaxRequestBytes,
// whose bytes are then discarded as they arrive.
func readLine(r *bufio.Reader) ([]byte, bool, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > MaxRequestBytes+1 {
				tooLong, line = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		return line, tooLong, err
	}
}

// answer handles one request line; returns the exit status when the worker must stop, else -1.
func answer(w *bufio.Writer, line []byte, greeted *bool) int {
	var req map[string]any
	if err := json.Unmarshal(line, &req); err != nil {
		send(w, errorMsg("bad_request", fmt.Sprintf("not a JSON object: %v", err)))
		return -1
	}
	kind, _ := req["type"].(string)
	send := func(w *bufio.Writer, msg map[string]any) { // an error answers with the request's id
		if id, ok := req["id"].(string); ok && msg["type"] == "error" {
			msg["id"] = id
		}
		send(w, msg)
	}
	switch {
	case kind == "":
		send(w, errorMsg("bad_request", "a request needs a string 'type'"))
	case kind == "hello":
		if p, ok := req["protocol"].(float64); !ok || p != Protocol {
			send(w, errorMsg("protocol_mismatch", fmt.Sprintf("this worker speaks protocol %d, got %v", Protocol, req["protocol"])))
			return 2
		}
		*greeted = true
		send(w, hello())
	case !*greeted:
		send(w, errorMsg("bad_request", "the first request must be hello"))
	case kind == "bye":
		return 0
	case kind == "check":
		send(w, check(req))
	case kind == "run":
		send(w, run(req))
	default:
		send(w, errorMsg("bad_request", fmt.Sprintf("unknown request type '%s'", kind)))
	}
	return -1
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == serveFlag { // a workload's server process (server.go)
		os.Exit(serveWorkloadMain(os.Stdin, os.Stdout))
	}
	os.Exit(serve(os.Stdin, os.Stdout))
}
