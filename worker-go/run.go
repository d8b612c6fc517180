package main

// `run`: one operation measured — its parameters resolved, its known answer checked, then its
// window timed — answered with one `result` in the fields and units the Rust worker uses
// (tests/fixtures/worker-result.schema.json).

import (
	"crypto/fips140"
	"errors"
	"fmt"
	"math"
)

func number(req map[string]any, key string, def, lo, hi float64) (float64, error) {
	v, ok := req[key]
	if !ok || v == nil {
		return def, nil
	}
	f, isNum := v.(float64)
	if !isNum || math.IsNaN(f) || f < lo || f > hi {
		return 0, errBadParams(fmt.Sprintf("%s must be a number %g..%g, got %v", key, lo, hi, v))
	}
	return f, nil
}

func run(req map[string]any) map[string]any {
	id, _ := req["id"].(string)
	backend, _ := req["backend"].(string)
	op, _ := req["op"].(string)
	if err := unknownName(req); err != nil {
		return errorMsg(err.(*refusal).code, err.Error())
	}
	if w, ok := workloads[op]; ok { // a workload: workload.go
		return runWorkload(w, req)
	}
	base := map[string]any{"type": "result", "id": id, "backend": backend, "op": op, "library": LibraryName,
		"library_version": LibraryVersion(), "fips": fips140.Enabled(), "fips140": fipsState(), "params": map[string]any{}, "threads": 1,
		"cpu_mask": req["cpu_mask"], "capabilities": capabilities()}
	refuse := func(err error) map[string]any {
		var r *refusal
		if errors.As(err, &r) && r.code == "unsupported" {
			base["status"], base["reason"] = "unsupported", r.message
			return base
		}
		if errors.As(err, &r) {
			return errorMsg(r.code, r.message)
		}
		base["status"], base["reason"] = "invalid", err.Error()
		return base
	}
	if backend != Library {
		return refuse(errUnsupported(fmt.Sprintf("this worker has one backend, go; not '%s'", backend)))
	}
	if m, ok := req["cpu_mask"].(string); ok && m != "baseline" {
		return refuse(errUnsupported("go has no runtime CPU capability mask"))
	}
	params, _ := req["params"].(map[string]any)
	threads, err := number(req, "threads", 1, 1, MaxThreads)
	if err != nil {
		return refuse(err)
	}
	warmup, err := number(req, "warmup_s", 0.2, 0, MaxWarmupS)
	if err != nil {
		return refuse(err)
	}
	seconds, err := number(req, "seconds", 1.0, 1e-6, MaxSeconds)
	if err != nil {
		return refuse(err)
	}
	batch, err := number(req, "batch", 0, 1, MaxBatch)
	if err != nil {
		return refuse(err)
	}
	resolved, c, err := prepare(op, params)
	if refusedByFIPS(err, func() error { _, _, e := prepare(op, params); return e }) {
		return refuse(errUnsupported(fmt.Sprintf("Go's FIPS 140-3 module (enforced: GODEBUG=fips140=only) refuses %s: %v", op, err)))
	}
	if err != nil {
		return refuse(err)
	}
	base["params"], base["threads"] = resolved, int(threads)
	// the known answer, then the cross-checks against a second library (crosscheck.go)
	validation := map[string]any{}
	base["validation"] = validation
	if err := validate(op, c, validation); err != nil {
		var r *refusal
		if errors.As(err, &r) {
			return refuse(err)
		}
		base["status"], base["reason"] = "invalid", err.Error()
		return base
	}
	w, err := measure(c, int(threads), warmup, seconds, uint64(batch))
	if err != nil {
		base["status"], base["reason"] = "invalid", "the operation failed while timed: "+err.Error()
		return base
	}
	encoded, err := w.Hist.Encode(hdrV2)
	if err != nil {
		base["status"], base["reason"] = "invalid", "cannot encode the histogram: "+err.Error()
		return base
	}
	var total uint64
	for _, n := range w.CPUNs {
		total += n
	}
	timing := "batched"
	if w.Batch == 1 {
		timing = "individual"
	}
	for k, v := range map[string]any{"status": "ok", "ops": w.Ops, "wall_ns": w.WallNs, "cpu_ns": w.CPUNs,
		"cpu_ns_total": total, "histogram": string(encoded), "batch": w.Batch, "timing": timing,
		"bytes_per_op": c.BytesPerOp, "samples": w.Samples,
		"sample_ns_stats": map[string]any{"min": w.MinSampleNs, "max": w.MaxSampleNs},
		"steal_ticks":     w.Ticks.Steal, "busy_ticks": w.Ticks.Busy, "total_ticks": w.Ticks.Total, "tsc_cycles": nil} {
		base[k] = v
	}
	return base
}

// refusedByFIPS reports whether err is Go's FIPS 140-3 enforcement refusing an algorithm it does
// not approve: with enforcement on (GODEBUG=fips140=only), the same call (`again`) succeeds once
// enforcement is lifted. Such an operation is "unsupported" in FIPS mode, never timed.
func refusedByFIPS(err error, again func() error) bool {
	if err == nil || !fips140.Enforced() {
		return false
	}
	var out error
	fips140.WithoutEnforcement(func() { out = again() })
	return out == nil
}
