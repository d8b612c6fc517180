package main

// Tests of the TLS workloads: a short tls-handshake and tls-bulk run through the protocol (the
// server process is this test binary, TestMain), the result checked against the Rust worker's
// JSON Schema, the negotiation check, combinations Go cannot do refused by `check` and `run`
// alike, and the FIPS-mode refusals held to what crypto/tls itself does.

import (
	"crypto/fips140"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets this test binary be a workload's server process, as the worker binary is.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == serveFlag {
		os.Exit(serveWorkloadMain(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

func TestLoadLevelsParseAndBadOnesNameTheSyntax(t *testing.T) {
	for text, want := range map[string]Load{"closed:10": {"closed", 10, 0}, "closed:1@200": {"closed", 1, 200},
		"open:500": {"open", OpenThreads, 500}, "open:500/4": {"open", 4, 500}} {
		if got, err := parseLoad(text); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", text, got, err, want)
		}
	}
	for _, bad := range []string{"closed:0", "closed:2000", "open:0", "open:-1", "open:nan", "half:3", "closed", "open:10/0"} {
		if _, err := parseLoad(bad); err == nil || !strings.Contains(err.Error(), "closed:N") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestANegotiationThatDiffersIsCaught(t *testing.T) {
	s := tlsSpec{Version: "1.3", Cert: "ecdsa-p256", Group: "p256", Suite: "aes-128-gcm"}
	good := negotiated{"TLSv1.3", "TLS_AES_128_GCM_SHA256", "p256", "ecdsa_secp256r1_sha256", false}
	if why := good.mismatch(s); why != "" {
		t.Fatalf("the asked negotiation is refused: %s", why)
	}
	for _, bad := range []negotiated{
		{"TLSv1.2", "TLS_AES_128_GCM_SHA256", "p256", "ecdsa_secp256r1_sha256", false},
		{"TLSv1.3", "TLS_AES_256_GCM_SHA384", "p256", "ecdsa_secp256r1_sha256", false},
		{"TLSv1.3", "TLS_AES_128_GCM_SHA256", "x25519", "ecdsa_secp256r1_sha256", false},
		{"TLSv1.3", "TLS_AES_128_GCM_SHA256", "p256", "rsa_pss_rsae_sha256", false},
		{"TLSv1.3", "TLS_AES_128_GCM_SHA256", "p256", "none", true},
	} {
		if bad.mismatch(s) == "" {
			t.Errorf("%+v passed as %+v", bad, s)
		}
	}
}

// A TLS 1.3 suite other than Go's own preference is really negotiated (the suite lists set by
// linkname), and the signature scheme is read from crypto/tls.
func TestTheTLS13SuiteAskedForIsNegotiated(t *testing.T) {
	if fips140.Enabled() {
		t.Skip("in FIPS mode crypto/tls's TLS 1.3 suites are fixed")
	}
	for _, suite := range []string{"aes-256-gcm", "chacha20-poly1305"} {
		s := tlsSpec{Version: "1.3", Cert: "ed25519", Group: "x25519", Suite: suite}
		if why := checkTLS(s); why != "" {
			t.Errorf("%s: %s", suite, why)
		}
	}
}

func TestCombinationsGoCannotDoAreUnsupported(t *testing.T) {
	impossible := []string{
		`{"type":"check","id":"a","backend":"go","op":"tls-handshake","params":{"tls_version":"1.2","group":"x25519mlkem768"}}`,
		`{"type":"run","id":"b","backend":"go","op":"tls-handshake","params":{"tls_version":"1.2","group":"x25519mlkem768"},"seconds":0.1}`,
		`{"type":"check","id":"c","backend":"go","op":"tls-bulk","params":{"record_bytes":4096}}`,
		`{"type":"run","id":"d","backend":"go","op":"tls-bulk","params":{"record_bytes":4096},"seconds":0.1}`,
	}
	got := answers(t, append([]string{helloLine}, impossible...)...)[1:]
	for i, a := range got {
		if a["status"] != "unsupported" || str(a["reason"]) == "" {
			t.Errorf("%s: %v", impossible[i], a)
		}
	}
	if !strings.Contains(str(got[0]["reason"]), "TLS 1.3 key exchange") || !strings.Contains(str(got[2]["reason"]), "maximum-fragment-length") {
		t.Errorf("reasons: %v / %v", got[0]["reason"], got[2]["reason"])
	}
	other := answers(t, helloLine, `{"type":"check","id":"e","backend":"openssl","op":"tls-handshake"}`)[1]
	if other["type"] != "error" || other["code"] != "unknown_backend" || other["id"] != "e" {
		t.Errorf("another backend: %v", other)
	}
	bad := answers(t, helloLine, `{"type":"check","id":"f","backend":"go","op":"tls-handshake","params":{"cert":"rsa1024"}}`)[1]
	if bad["type"] != "error" || bad["code"] != "bad_params" || !strings.Contains(str(bad["message"]), "known: rsa2048") {
		t.Errorf("an unknown value: %v", bad)
	}
}

// What the rules refuse in FIPS mode is what crypto/tls itself refuses (or negotiates
// otherwise): run in a child with GODEBUG=fips140=on.
func TestFIPSRefusalsAreCryptoTLSOwn(t *testing.T) {
	if !fips140.Enabled() {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestFIPSRefusalsAreCryptoTLSOwn$", "-test.v")
		cmd.Env = append(os.Environ(), "GODEBUG=fips140=on")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("in FIPS mode: %v\n%s", err, out)
		}
		return
	}
	for _, s := range []tlsSpec{
		{Version: "1.3", Cert: "ecdsa-p256", Group: "x25519", Suite: "aes-128-gcm"},
		{Version: "1.3", Cert: "ecdsa-p256", Group: "p256", Suite: "chacha20-poly1305"},
		{Version: "1.2", Cert: "ecdsa-p256", Group: "p256", Suite: "chacha20-poly1305"},
		{Version: "1.3", Cert: "ecdsa-p256", Group: "p256", Suite: "aes-256-gcm"},
	} {
		if s.unsupported() == "" {
			t.Errorf("%+v: no FIPS rule refuses it", s)
		}
		if why := handshakeCheck(s); why == "" {
			t.Errorf("%+v: refused by the rules, yet crypto/tls does it in FIPS mode", s)
		}
	}
	ok := tlsSpec{Version: "1.3", Cert: "ecdsa-p256", Group: "p256", Suite: "aes-128-gcm"}
	if why := checkTLS(ok); why != "" {
		t.Errorf("the FIPS row (ECDSA P-256, P-256, TLS 1.3) is refused: %s", why)
	}
}

func TestAShortHandshakeRunIsMeasuredAndItsResultValidates(t *testing.T) {
	group := "x25519"
	if fips140.Enabled() {
		group = "p256"
	}
	got := answers(t, helloLine,
		fmt.Sprintf(`{"type":"run","id":"h","backend":"go","op":"tls-handshake","params":{"group":"%s","session":"resumed","load":"closed:2"},"seconds":0.3,"warmup_s":0.05}`, group),
		fmt.Sprintf(`{"type":"run","id":"b","backend":"go","op":"tls-bulk","params":{"group":"%s","size_bytes":65536,"load":"open:200/2"},"seconds":0.3,"warmup_s":0.05}`, group))
	schema := loadSchema(t)
	for _, r := range got[1:] {
		if r["status"] != "ok" {
			t.Fatalf("%v: %v", r["op"], r["reason"])
		}
		if err := schema.validate(r, schema.root, "result"); err != nil {
			t.Errorf("%v: %v", r["op"], err)
		}
		if err := schema.validate(r, schema.root["$defs"].(map[string]any)["TlsResult"], "result"); err != nil {
			t.Errorf("%v as a TlsResult: %v", r["op"], err)
		}
		server := r["server"].(map[string]any)
		ops, tx := r["ops"].(float64), server["transactions"].(float64)
		if ops < 5 || server["cpu_ns"].(float64) <= 0 || math.Abs(tx-ops) > 3 || server["window"] != true {
			t.Errorf("%v: ops %v, server %v", r["op"], ops, server)
		}
		if r["validation"].(map[string]any)["negotiated"] != "pass" {
			t.Errorf("%v: validation %v", r["op"], r["validation"])
		}
	}
	h := got[1]
	if n := h["negotiated"].(map[string]any); n["resumed"] != true || n["group"] != group {
		t.Errorf("negotiated %v", n)
	}
	var counted float64
	for _, c := range h["negotiated_counts"].([]any) {
		counted += c.(map[string]any)["count"].(float64)
	}
	if counted < h["ops"].(float64) {
		t.Errorf("negotiated_counts %v below ops %v", counted, h["ops"])
	}
	if got[2]["bytes_per_op"].(float64) != 65536 || got[2]["load"].(map[string]any)["corrected"] != true {
		t.Errorf("tls-bulk: %v %v", got[2]["bytes_per_op"], got[2]["load"])
	}
}

func TestHelloAnnouncesTheWorkloadsSpecs(t *testing.T) {
	h := answers(t, helloLine)[0]
	spec := h["op_params"].(map[string]any)["tls-handshake"].(map[string]any)
	for _, k := range []string{"params", "defaults", "required", "levels", "modes", "default_mode", "server", "bytes_per_tx_param",
		"transaction", "sizing", "file_params", "connection_params", "needs_dir", "file_bytes_param", "job", "calibration_load"} {
		if _, ok := spec[k]; !ok {
			t.Errorf("tls-handshake's spec lacks %s", k)
		}
	}
	bulk := h["op_params"].(map[string]any)["tls-bulk"].(map[string]any)
	if bulk["bytes_per_tx_param"] != "size_bytes" || h["limits"].(map[string]any)["max_concurrency"].(float64) != MaxConcurrency {
		t.Errorf("tls-bulk %v, limits %v", bulk, h["limits"])
	}
}

// jsonSchema validates with the keywords the worker-result schema uses (type, required,
// properties, items, $ref, anyOf, oneOf, enum, const, minimum, additionalProperties).
type jsonSchema struct{ root map[string]any }

func loadSchema(t *testing.T) *jsonSchema {
	b, err := os.ReadFile("../tests/fixtures/worker-result.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	return &jsonSchema{root}
}

func (s *jsonSchema) validate(v any, schemaAny any, at string) error {
	sch, _ := schemaAny.(map[string]any)
	if ref, ok := sch["$ref"].(string); ok {
		return s.validate(v, s.root["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")], at)
	}
	if types, ok := sch["type"]; ok && !typeMatches(v, types) {
		return fmt.Errorf("%s: %v is not of type %v", at, v, types)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := sch[key].([]any); ok {
			passed := 0
			for _, alt := range alts {
				if s.validate(v, alt, at) == nil {
					passed++
				}
			}
			if passed == 0 || key == "oneOf" && passed != 1 {
				return fmt.Errorf("%s: %d of %s's alternatives match", at, passed, key)
			}
		}
	}
	if enum, ok := sch["enum"].([]any); ok && !contains(enum, v) {
		return fmt.Errorf("%s: %v not in %v", at, v, enum)
	}
	if c, ok := sch["const"]; ok && c != v {
		return fmt.Errorf("%s: %v is not %v", at, v, c)
	}
	if m, ok := sch["minimum"].(float64); ok {
		if f, isNum := v.(float64); isNum && f < m {
			return fmt.Errorf("%s: %v below %v", at, f, m)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		for _, r := range asList(sch["required"]) {
			if _, has := obj[r.(string)]; !has {
				return fmt.Errorf("%s: required %s missing", at, r)
			}
		}
		props, _ := sch["properties"].(map[string]any)
		for k, x := range obj {
			if p, ok := props[k]; ok {
				if err := s.validate(x, p, at+"."+k); err != nil {
					return err
				}
			} else if sch["additionalProperties"] == false {
				return fmt.Errorf("%s: %s is not allowed", at, k)
			}
		}
	}
	if arr, ok := v.([]any); ok && sch["items"] != nil {
		for i, x := range arr {
			if err := s.validate(x, sch["items"], fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func typeMatches(v any, types any) bool {
	for _, t := range asList(types) {
		switch f, isNum := v.(float64); t {
		case "null":
			if v == nil {
				return true
			}
		case "integer":
			if isNum && f == math.Trunc(f) {
				return true
			}
		case "number":
			if isNum {
				return true
			}
		case "string", "boolean", "object", "array":
			if map[string]bool{"string": isString(v), "boolean": isBool(v), "object": isObject(v), "array": isArray(v)}[t.(string)] {
				return true
			}
		}
	}
	return false
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func contains(l []any, v any) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

func isString(v any) bool { _, ok := v.(string); return ok }
func isBool(v any) bool   { _, ok := v.(bool); return ok }
func isObject(v any) bool { _, ok := v.(map[string]any); return ok }
func isArray(v any) bool  { _, ok := v.([]any); return ok }
