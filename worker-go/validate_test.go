package main

// Every operation, with every digest and padding it takes, passes its known answer and its
// cross-checks; the announced parameters are the Rust worker's; the cross-checks compare (a
// wrong answer fails them); and under GODEBUG=fips140=only what the module approves passes
// while what it refuses is unsupported.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// everyCase is every operation with every digest and padding it takes: name, params.
func everyCase() [][2]any {
	var out [][2]any
	for _, name := range opNames() {
		op := ops[name]
		digests, paddings := []string{""}, []string{""}
		if op.DefaultDigest != "" {
			digests = Digests
		}
		if op.DefaultPadding != "" {
			paddings = Paddings
		}
		for _, d := range digests {
			for _, p := range paddings {
				params := map[string]any{}
				if d != "" {
					params["digest"] = d
				}
				if p != "" {
					params["padding"] = p
				}
				out = append(out, [2]any{name, params})
			}
		}
	}
	return out
}

func TestEveryOperationPassesItsKnownAnswerAndCrossChecks(t *testing.T) {
	for _, tc := range everyCase() {
		name, params := tc[0].(string), tc[1].(map[string]any)
		if wrongBuild && name == "sha256" {
			continue // the cryptoperf_wrong build's deliberate error: wrong_test.go
		}
		t.Run(fmt.Sprintf("%s%v", name, params), func(t *testing.T) {
			_, c, err := prepare(name, params)
			if err != nil {
				t.Fatal(err)
			}
			if c.KAT.Source == "" || c.KAT.Check == nil || c.Cross == nil {
				t.Fatalf("no known-answer test or cross-check: %+v", c.KAT)
			}
			validation := map[string]any{}
			if err := validate(name, c, validation); err != nil {
				t.Fatalf("%v (%v)", err, validation)
			}
			checks := validation["cross_checks"].([]map[string]any)
			if len(checks) == 0 {
				t.Fatal("no cross-check")
			}
			for _, x := range checks {
				with := x["with"].(string)
				if x["status"] != "pass" || !(strings.HasPrefix(with, "OpenSSL 3.") || strings.HasPrefix(with, "CIRCL v")) {
					t.Errorf("cross-check %v", x)
				}
			}
			if err := c.Run(); err != nil {
				t.Fatalf("the timed call fails: %v", err)
			}
		})
	}
}

func TestTheCrossChecksCompare(t *testing.T) {
	// a signer that accepts anything, or signs wrongly, is caught by OpenSSL on either side
	s, err := rsaSigner(2048)(Params{Size: 32, Digest: "sha256", Padding: "pss"})
	if err != nil {
		t.Fatal(err)
	}
	lax := s
	lax.verify = func(msg, sig []byte) error { return nil }
	if got := crossSignature(lax, Params{Size: 32}, nil, nil)[0]; got.Status != "fail" || !strings.Contains(got.Detail, "bit flipped") {
		t.Fatalf("a verifier accepting anything passed: %+v", got)
	}
	wrong := s
	wrong.sign = func(msg []byte) ([]byte, error) { return s.sign(append([]byte{1}, msg...)) }
	if got := crossSignature(wrong, Params{Size: 32}, nil, nil)[0]; got.Status != "fail" || !strings.Contains(got.Detail, "OpenSSL does not verify Go's signature") {
		t.Fatalf("a signer signing another message passed: %+v", got)
	}
	// an AEAD under another key than OpenSSL is given
	aead, err := aes128GCM.new(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	if got := crossAEAD(aes128GCM, aead, bytes.Repeat([]byte{1}, 16), 64, nil, nil)[0]; got.Status != "fail" {
		t.Fatalf("AES-GCM under two keys agreed: %+v", got)
	}
}

// rustHello is the Rust worker's hello, when it is built (worker/target/release).
func rustHello(t *testing.T) map[string]any {
	bin := "../worker/target/release/cryptoperf-worker"
	if _, err := os.Stat(bin); err != nil {
		t.Skip("the Rust worker is not built")
	}
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader(helloLine + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(bytes.SplitN(out, []byte("\n"), 2)[0], &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// onlyHere are the operations this worker has and the Rust worker does not (ECDH on P-384, which
// the issue asks of the Go backend; the Rust worker's ECDH is P-256's alone).
var onlyHere = map[string]bool{"ecdh-p384-derive": true, "ecdh-p384-keygen": true}

func TestParametersAreTheRustWorkers(t *testing.T) {
	ours := answers(t, helloLine)[0]
	rust := rustHello(t)
	mine, theirs := ours["op_params"].(map[string]any), rust["op_params"].(map[string]any)
	for _, name := range opNames() {
		r, ok := theirs[name].(map[string]any)
		if !ok && onlyHere[name] {
			continue
		}
		if !ok {
			t.Errorf("%s: the Rust worker has no such operation", name)
			continue
		}
		for _, k := range []string{"params", "default_size_bytes", "default_digest", "default_padding"} {
			if !reflect.DeepEqual(mine[name].(map[string]any)[k], r[k]) {
				t.Errorf("%s: %s is %v, the Rust worker's %v", name, k, mine[name].(map[string]any)[k], r[k])
			}
		}
	}
	for _, k := range []string{"digest", "padding"} {
		got := ours["param_values"].(map[string]any)[k]
		if want := rust["param_values"].(map[string]any)[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("param_values.%s: %v, the Rust worker's %v", k, got, want)
		}
	}
}

func TestBadParametersAreRefused(t *testing.T) {
	got := answers(t, helloLine,
		`{"type":"run","id":"a","backend":"go","op":"rsa2048-sign","params":{"digest":"md5"}}`,
		`{"type":"run","id":"b","backend":"go","op":"rsa2048-verify","params":{"padding":"oaep"}}`,
		`{"type":"run","id":"c","backend":"go","op":"ed25519-sign","params":{"digest":"sha256"}}`,
		`{"type":"run","id":"d","backend":"go","op":"ecdsa-p256-sign","params":{"padding":"pss"}}`,
		`{"type":"run","id":"e","backend":"go","op":"ml-kem-768-encaps","params":{"size_bytes":32}}`,
		`{"type":"run","id":"f","backend":"go","op":"ecdsa-p384-verify","params":{"digest":5}}`)[1:]
	want := []string{
		"rsa2048-sign: unknown digest 'md5'; known: sha1, sha256, sha384, sha512, sha3-256",
		"rsa2048-verify: unknown padding 'oaep'; known: pkcs1, pss",
		"unknown parameter 'digest' for ed25519-sign",
		"unknown parameter 'padding' for ecdsa-p256-sign",
		"unknown parameter 'size_bytes' for ml-kem-768-encaps",
		"ecdsa-p384-verify: unknown digest '5'; known: sha1, sha256, sha384, sha512, sha3-256",
	}
	for i, m := range got {
		if m["code"] != "bad_params" || m["message"] != want[i] {
			t.Errorf("got %v, want bad_params %q", m, want[i])
		}
	}
}

func TestAResultCarriesItsParametersAndCrossChecks(t *testing.T) {
	got := answers(t, helloLine,
		`{"type":"run","id":"a","backend":"go","op":"rsa3072-verify","params":{"padding":"pss","digest":"sha512"},"seconds":0.01,"warmup_s":0}`,
		`{"type":"run","id":"b","backend":"go","op":"ml-kem-768-decaps","seconds":0.01,"warmup_s":0}`)[1:]
	rsa, kem := got[0], got[1]
	if rsa["status"] != "ok" || !reflect.DeepEqual(rsa["params"], map[string]any{"size_bytes": 32.0, "digest": "sha512", "padding": "pss"}) {
		t.Fatalf("rsa3072-verify: %v", rsa)
	}
	x := rsa["validation"].(map[string]any)["cross_checks"].([]any)[0].(map[string]any)
	if x["status"] != "pass" || x["with"] != OpenSSLVersion() {
		t.Fatalf("rsa3072-verify cross-check: %v", x)
	}
	if kem["status"] != "ok" || len(kem["validation"].(map[string]any)["cross_checks"].([]any)) != 2 {
		t.Fatalf("ml-kem-768-decaps: %v", kem)
	}
	x = kem["validation"].(map[string]any)["cross_checks"].([]any)[0].(map[string]any)
	if x["status"] != "pass" || x["with"] != "CIRCL v1.6.5" {
		t.Fatalf("ml-kem-768-decaps cross-check: %v", x)
	}
}

// TestUnderFIPS140Only runs fips140OnlyChild in a process of its own under
// GODEBUG=fips140=only (the mode is read at start-up).
func TestUnderFIPS140Only(t *testing.T) {
	if os.Getenv("CRYPTOPERF_FIPS_CHILD") == "1" {
		t.Skip("the child runs fips140OnlyChild")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFIPS140OnlyChild$", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", "CRYPTOPERF_FIPS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFIPS140OnlyChild") {
		t.Fatalf("under GODEBUG=fips140=only: %v\n%s", err, out)
	}
}

func TestFIPS140OnlyChild(t *testing.T) {
	if os.Getenv("CRYPTOPERF_FIPS_CHILD") != "1" {
		t.Skip("run by TestUnderFIPS140Only")
	}
	approved := []string{"sha256", "sha3-256", "hmac-sha256", "aes-128-gcm-seal", "aes-256-gcm-open", "rsa2048-sign",
		"rsa3072-verify", "ecdsa-p256-sign", "ecdsa-p384-verify", "ed25519-sign", "ed25519-verify", "ecdh-p256-derive",
		"ecdh-p256-keygen", "ml-kem-768-keygen", "ml-kem-768-encaps", "ml-kem-1024-decaps"}
	refused := []string{"sha1", "chacha20-poly1305-seal", "chacha20-poly1305-open", "x25519-derive", "x25519-keygen"}
	if wrongBuild {
		approved = approved[1:] // sha256: the cryptoperf_wrong build's deliberate error (wrong_test.go)
	}
	lines := []string{helloLine}
	for _, op := range append(append([]string{}, approved...), refused...) {
		lines = append(lines, fmt.Sprintf(`{"type":"run","id":"%s","backend":"go","op":"%s","seconds":0.01,"warmup_s":0}`, op, op))
	}
	lines = append(lines, `{"type":"run","id":"rsa-sha1","backend":"go","op":"rsa2048-verify","params":{"digest":"sha1"},"seconds":0.01,"warmup_s":0}`)
	got := answers(t, lines...)[1:]
	for i, r := range got {
		want := "ok"
		if i >= len(approved) {
			want = "unsupported"
		}
		if r["status"] != want || r["fips"] != true {
			t.Errorf("%s: status %v (want %s), fips %v: %v", r["id"], r["status"], want, r["fips"], r["reason"])
			continue
		}
		if want == "unsupported" && !strings.Contains(r["reason"].(string), "FIPS 140-3 module (enforced: GODEBUG=fips140=only) refuses") {
			t.Errorf("%s: reason %v", r["id"], r["reason"])
		}
		if want == "ok" {
			v := r["validation"].(map[string]any)
			if v["kat"] != "pass" || v["cross_checks"].([]any)[0].(map[string]any)["status"] != "pass" {
				t.Errorf("%s: validation %v", r["id"], v)
			}
		}
	}
	names := []string{}
	for _, r := range got {
		names = append(names, r["id"].(string)+"="+r["status"].(string))
	}
	sort.Strings(names)
	t.Log(strings.Join(names, " "))
}

// TestEveryOperationRunsOnTwoThreads: a case whose Run keeps state gives each further thread a
// Run of its own (Case.NewRun); `go test -race` checks they share nothing.
func TestEveryOperationRunsOnTwoThreads(t *testing.T) {
	lines := []string{helloLine}
	for _, op := range opNames() {
		if wrongBuild && op == "sha256" {
			continue
		}
		lines = append(lines, fmt.Sprintf(`{"type":"run","id":"%s","backend":"go","op":"%s","threads":2,"seconds":0.005,"warmup_s":0}`, op, op))
	}
	for _, r := range answers(t, lines...)[1:] {
		if r["status"] != "ok" || r["threads"] != 2.0 || len(r["cpu_ns"].([]any)) != 2 {
			t.Errorf("%s on two threads: %v %v", r["id"], r["status"], r["reason"])
		}
	}
}
