package main

// The workloads (docs/worker-protocol.md, "Workloads"): what every workload shares — its spec in
// hello, the parameters all of them take (load, mode, address, port, stall), the `check`
// request, and a `run` of one answered in the Rust worker's result fields. Each workload is one
// file (tls_handshake.go, tls_bulk.go) giving a `workload` value, registered in `workloads`.

import (
	"crypto/fips140"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"time"
)

// workload is one workload: its name and spec, how it reads a request's own parameters, why
// it cannot run one (the rules, then a real configuration), how it runs one and its server
// side (in a process of its own, server.go).
type workload struct {
	Name string
	// OwnParams are its own parameters, in order (the common ones follow in hello).
	OwnParams []string
	// Spec is the rest of its hello entry (defaults, transaction, bytes_per_tx_param, ...).
	Spec func() map[string]any
	// ParamValues are its enumerated parameters' values.
	ParamValues map[string][]string
	// Parse reads its own parameters. Errors: bad_params refusals.
	Parse func(params map[string]any) (any, error)
	// Check is why this worker cannot run the request ("" when it can), measuring nothing.
	Check func(req any) string
	// Run validates and measures the request.
	Run func(wc *workloadCase, warmup, budget time.Duration) finish
	// ServerSide builds its server side in the server process.
	ServerSide func(req any, common commonParams) (*serverSide, *startError)
}

// workloads are the workloads this worker runs, by name.
var workloads = map[string]*workload{}

func registerWorkload(w *workload) { workloads[w.Name] = w }

// commonParamNames are the parameters every workload here takes (the Rust worker's
// COMMON_PARAMS).
var commonParamNames = []string{"load", "mode", "address", "port", "stall_ms", "stall_every_ms"}

// commonParams are those parameters, checked.
type commonParams struct {
	Load    Load
	Mode    string
	Address string
	Port    int
	// StallMs: the server pauses StallMs at the start of every StallEveryMs (tests of the
	// latency method); 0 = none.
	StallMs, StallEveryMs int
}

// workloadCase is a checked workload request.
type workloadCase struct {
	W      *workload
	Common commonParams
	// Raw is the request's params as given (the server process parses them again).
	Raw map[string]any
	Req any
}

// finish is how a workload run ended: status ok with its result fields, or unsupported/invalid
// with the reason (and the validation, when it was learnt before).
type finish struct {
	Status, Reason string
	Validation     map[string]any
	Fields         map[string]any
}

func unsupportedFinish(reason string) finish { return finish{Status: "unsupported", Reason: reason} }

func invalidFinish(reason string, validation map[string]any) finish {
	return finish{Status: "invalid", Reason: reason, Validation: validation}
}

// textParam reads a string parameter (numbers and booleans spelt as text), or def.
func textParam(params map[string]any, key, def string) (string, error) {
	switch v := params[key].(type) {
	case nil:
		return def, nil
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", errBadParams(fmt.Sprintf("%s must be a string, got %v", key, params[key]))
}

// wholeParam reads a whole-number parameter (a number or its decimal text) in lo..hi, or def.
func wholeParam(params map[string]any, key string, def, lo, hi int) (int, error) {
	var f float64
	switch v := params[key].(type) {
	case nil:
		return def, nil
	case float64:
		f = v
	case string:
		n, err := strconv.ParseFloat(v, 64)
		f = n
		if err != nil {
			f = math.NaN()
		}
	default:
		f = math.NaN()
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, errBadParams(fmt.Sprintf("%s must be a whole number in %d..=%d, got %v", key, lo, hi, params[key]))
	}
	return int(f), nil
}

// parseWorkload checks a request for workload w: every parameter known, the common ones, then
// its own. Errors: bad_params refusals.
func parseWorkload(w *workload, params map[string]any) (*workloadCase, error) {
	accepted := append(append([]string{}, w.OwnParams...), commonParamNames...)
	known := map[string]bool{}
	for _, p := range accepted {
		known[p] = true
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !known[k] {
			return nil, errBadParams(fmt.Sprintf("unknown parameter '%s' for %s; it takes: %s", k, w.Name, joinComma(accepted)))
		}
	}
	common, err := parseCommon(w.Name, params)
	if err != nil {
		return nil, err
	}
	req, err := w.Parse(params)
	if err != nil {
		return nil, err
	}
	return &workloadCase{W: w, Common: common, Raw: params, Req: req}, nil
}

func parseCommon(name string, params map[string]any) (commonParams, error) {
	var c commonParams
	mode, err := textParam(params, "mode", "socket")
	if err != nil {
		return c, err
	}
	switch mode {
	case "socket":
	case "memory":
		return c, errBadParams(name + " runs in socket mode only in the Go worker: mode must be socket")
	default:
		return c, errBadParams(fmt.Sprintf("unknown mode '%s'; known: socket, memory", mode))
	}
	c.Mode = mode
	level, err := textParam(params, "load", "closed:1")
	if err != nil {
		return c, err
	}
	if c.Load, err = parseLoad(level); err != nil {
		return c, err
	}
	if c.Address, err = textParam(params, "address", "127.0.0.1"); err != nil {
		return c, err
	}
	if net.ParseIP(c.Address) == nil {
		return c, errBadParams(fmt.Sprintf("address must be an IP address, got %v", params["address"]))
	}
	if c.Port, err = wholeParam(params, "port", 0, 0, 65535); err != nil {
		return c, err
	}
	if c.StallMs, err = wholeParam(params, "stall_ms", 0, 0, 60_000); err != nil {
		return c, err
	}
	if c.StallEveryMs, err = wholeParam(params, "stall_every_ms", 1000, 1, 3_600_000); err != nil {
		return c, err
	}
	if c.StallMs >= c.StallEveryMs {
		return c, errBadParams(fmt.Sprintf("stall_ms (%d) must be shorter than stall_every_ms (%d)", c.StallMs, c.StallEveryMs))
	}
	return c, nil
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// Memory estimates for hello's sizing (docs/worker-protocol.md, "hello"), the Rust worker's
// margins: a worker process with its runtime and tables, and per connection a goroutine, its
// TLS connection's buffers (up to two 16 KiB records each way) and, for tls-bulk, its 64 KiB
// write chunks.
const (
	processBytes    = 32 << 20
	connectionBytes = 256 << 10
	resultBytes     = 16 << 10
	resultBytesPerS = 2 << 10
)

// workloadSpec is w's hello entry (`op_params[name]`).
func workloadSpec(w *workload) map[string]any {
	entry := map[string]any{
		"workload": true, "params": append(append([]string{}, w.OwnParams...), commonParamNames...),
		"default_size_bytes": nil, "required": []string{}, "levels": []string{"closed", "open"},
		"bytes_per_tx_param": nil, "modes": []string{"socket"}, "default_mode": "socket", "server": true,
		"file_params": []string{}, "connection_params": []string{}, "needs_dir": false, "file_bytes_param": nil,
		"job": false, "calibration_load": nil,
		"sizing": map[string]any{"result_bytes": resultBytes, "result_bytes_per_s": resultBytesPerS, "result_bytes_per_target": 0,
			"memory": map[string]any{"base_bytes": processBytes, "socket_bytes": processBytes, "per_connection_bytes": connectionBytes,
				"per_connection_param": map[string]any{}, "per_target_bytes": 0, "per_param_bytes": map[string]any{},
				"per_param_product_bytes": []any{}}},
	}
	for k, v := range w.Spec() {
		entry[k] = v
	}
	return entry
}

// withWorkloadNames is `names` (the primitives') with the workloads', sorted.
func withWorkloadNames(names []string) []string {
	for name := range workloads {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// withWorkloadSpecs is the primitives' op_params with every workload's entry added.
func withWorkloadSpecs(opParams map[string]any) map[string]any {
	for name, w := range workloads {
		opParams[name] = workloadSpec(w)
	}
	return opParams
}

// workloadParamValues are the workloads' enumerated parameters' values (hello's
// `param_values`), merged into `into`.
func workloadParamValues(into map[string]any) map[string]any {
	for _, w := range workloads {
		for k, v := range w.ParamValues {
			into[k] = v
		}
	}
	into["mode"] = []string{"socket"}
	return into
}

// workloadBase is a workload result's fields before it ran, or the refusal of its request
// (an `error` message) as the second value.
func workloadBase(req map[string]any) (map[string]any, map[string]any) {
	id, _ := req["id"].(string)
	backend, _ := req["backend"].(string)
	op, _ := req["op"].(string)
	params, _ := req["params"].(map[string]any)
	if params == nil {
		params = map[string]any{}
	}
	base := map[string]any{"type": "result", "id": id, "backend": backend, "op": op, "library": LibraryName,
		"library_version": LibraryVersion(), "fips": fips140.Enabled(), "fips140": fipsState(), "params": params, "threads": 1,
		"cpu_mask": req["cpu_mask"], "capabilities": capabilities()}
	if t, given := req["threads"]; given && t != nil && t != 1.0 {
		return nil, errorFor(req, errBadParams("a workload runs with threads = 1: its load level sets the connections (load = closed:N)"))
	}
	if b, given := req["batch"]; given && b != nil {
		return nil, errorFor(req, errBadParams("a workload times every transaction alone: batch must be absent"))
	}
	return base, nil
}

// errorFor is the `error` answer to request req for a refusal.
func errorFor(req map[string]any, err error) map[string]any {
	var r *refusal
	msg := errorMsg("bad_params", err.Error())
	if errors.As(err, &r) {
		msg = errorMsg(r.code, r.message)
	}
	if id, ok := req["id"].(string); ok {
		msg["id"] = id
	}
	return msg
}

// workloadRefusal is why this worker does not run the request at all (another backend, a CPU
// mask), or "".
func workloadRefusal(req map[string]any) string {
	if backend, _ := req["backend"].(string); backend != Library {
		return fmt.Sprintf("this worker has one backend, go; not '%s'", backend)
	}
	if m, ok := req["cpu_mask"].(string); ok && m != "baseline" {
		return "go has no runtime CPU capability mask"
	}
	return ""
}

// runWorkload answers a `run` of workload w: refused, unsupported, invalid or measured.
func runWorkload(w *workload, req map[string]any) map[string]any {
	base, refused := workloadBase(req)
	if refused != nil {
		return refused
	}
	if why := workloadRefusal(req); why != "" {
		base["status"], base["reason"] = "unsupported", why
		return base
	}
	warmup, err := number(req, "warmup_s", 0.2, 0, MaxWarmupS)
	if err != nil {
		return errorFor(req, err)
	}
	seconds, err := number(req, "seconds", 1.0, 1e-6, MaxSeconds)
	if err != nil {
		return errorFor(req, err)
	}
	wc, err := parseWorkload(w, base["params"].(map[string]any))
	if err != nil {
		return errorFor(req, err)
	}
	if why := w.Check(wc.Req); why != "" {
		base["status"], base["reason"] = "unsupported", why
		return base
	}
	f := w.Run(wc, time.Duration(warmup*1e9), time.Duration(seconds*1e9))
	base["status"] = f.Status
	if f.Reason != "" {
		base["reason"] = f.Reason
	}
	if f.Validation != nil {
		base["validation"] = f.Validation
	}
	for k, v := range f.Fields {
		base[k] = v
	}
	if f.Status == "ok" {
		base["workload"], base["mode"], base["load"] = w.Name, wc.Common.Mode, wc.Common.Load.resultFields()
	}
	return base
}

// check answers a `check` request: whether this worker can run that combination at all,
// measuring nothing (docs/worker-protocol.md, "check").
func check(req map[string]any) map[string]any {
	id, _ := req["id"].(string)
	backend, _ := req["backend"].(string)
	op, _ := req["op"].(string)
	out := map[string]any{"type": "checked", "id": id, "backend": backend, "op": op, "status": "supported", "reason": nil}
	if err := unknownName(req); err != nil {
		return errorFor(req, err)
	}
	params, _ := req["params"].(map[string]any)
	if params == nil {
		params = map[string]any{}
	}
	why := workloadRefusal(req)
	if w, ok := workloads[op]; ok && why == "" {
		wc, err := parseWorkload(w, params)
		if err != nil {
			return errorFor(req, err)
		}
		why = w.Check(wc.Req)
	} else if !ok && why == "" {
		if _, _, err := prepare(op, params); err != nil {
			var r *refusal
			if errors.As(err, &r) && r.code != "unsupported" {
				return errorFor(req, err)
			}
			why = err.Error()
		}
	}
	if why != "" {
		out["status"], out["reason"] = "unsupported", why
		return out
	}
	out["planned_wait_s"] = 0
	return out
}
