package main

// Validation before timing: a case's known-answer test, then its cross-checks against a second,
// independent library inside the worker — OpenSSL's libcrypto through cgo
// (crosscheck_openssl.go) for everything OpenSSL 3.0 has, Cloudflare's CIRCL for ML-KEM
// (crosscheck_circl.go). Each cross-check runs the case's own Go objects (its key, AEAD, digest
// function) on both directions: what Go makes, the other library accepts, and what the other
// library makes, Go accepts. A failed check makes the result "invalid" and nothing is timed.

import (
	"bytes"
	"crypto/fips140"
	"crypto/rand"
	"fmt"
)

// CrossCheck is one comparison of a case with another library, as a result's
// validation.cross_checks reports it: With names the library and its version ("OpenSSL
// 3.0.19", "CIRCL v1.6.5"), Status is "pass", "fail" or "skipped", Detail says what was compared
// or, for a failure, what differed.
type CrossCheck struct {
	With, Status, Detail string
}

func (c CrossCheck) json() map[string]any {
	return map[string]any{"with": c.With, "status": c.Status, "detail": c.Detail}
}

// crossResult is the CrossCheck of one comparison with `with`: pass with `what` when err is nil,
// else fail with the error.
func crossResult(with, what string, err error) CrossCheck {
	if err != nil {
		return CrossCheck{With: with, Status: "fail", Detail: err.Error()}
	}
	return CrossCheck{With: with, Status: "pass", Detail: what}
}

// randomBytes is n bytes from the system's random source: the messages cross-checks compare on.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// flipped is a copy of b with the lowest bit of its last byte flipped (a tampered signature or
// tag); b must not be empty.
func flipped(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)-1] ^= 1
	return c
}

func equal(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s differ: Go %x, other %x", what, short(got), short(want))
	}
	return nil
}

func short(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

// validate checks a prepared case before it is timed: its known-answer test, then its
// cross-checks, filling `validation` (kat, kat_source, cross_checks). It returns nil when both
// passed; an unsupported refusal when Go's enforced FIPS 140-3 module (GODEBUG=fips140=only)
// refuses a step that succeeds with enforcement lifted; else an error saying what failed (the
// case is then invalid).
func validate(op string, c Case, validation map[string]any) error {
	validation["kat"], validation["kat_source"], validation["cross_checks"] = "pass", c.KAT.Source, []map[string]any{}
	refused := func(err error) error {
		return errUnsupported(fmt.Sprintf("Go's FIPS 140-3 module (enforced: GODEBUG=fips140=only) refuses %s: %v", op, err))
	}
	kat := func() error { return guarded(c.KAT.Check) }
	if err := kat(); refusedByFIPS(err, kat) {
		validation["kat"] = "not applicable (the enforced FIPS 140-3 module refuses the operation)"
		return refused(err)
	} else if err != nil {
		validation["kat"] = "fail: " + err.Error()
		return fmt.Errorf("known-answer test failed: %v", err)
	}
	checks := guardedCross(c.Cross)
	if f := firstFailure(checks); f != nil && fips140.Enforced() {
		var again []CrossCheck
		fips140.WithoutEnforcement(func() { again = guardedCross(c.Cross) })
		if firstFailure(again) == nil {
			validation["cross_checks"] = []map[string]any{{"with": f.With, "status": "skipped",
				"detail": "the enforced FIPS 140-3 module refuses a step of it: " + f.Detail}}
			return refused(fmt.Errorf("%s", f.Detail))
		}
	}
	list := []map[string]any{}
	for _, x := range checks {
		list = append(list, x.json())
	}
	validation["cross_checks"] = list
	if f := firstFailure(checks); f != nil {
		return fmt.Errorf("cross-check with %s failed: %s", f.With, f.Detail)
	}
	return nil
}

func firstFailure(checks []CrossCheck) *CrossCheck {
	for i := range checks {
		if checks[i].Status == "fail" {
			return &checks[i]
		}
	}
	return nil
}

// guardedCross runs a case's cross-checks, a panic in them making one failed check.
func guardedCross(cross func() []CrossCheck) (checks []CrossCheck) {
	if err := guarded(func() error { checks = cross(); return nil }); err != nil {
		return []CrossCheck{{With: "the cross-check", Status: "fail", Detail: "it panicked: " + err.Error()}}
	}
	return checks
}
