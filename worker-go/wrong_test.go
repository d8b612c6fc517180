//go:build cryptoperf_wrong

package main

// The deliberately wrong build (wrong_on.go; `go test -tags cryptoperf_wrong ./...`): its sha256
// passes its known answer and fails its cross-check, so a run is "invalid" and never timed.

import (
	"strings"
	"testing"
)

func TestTheCrossCheckCatchesWhatTheKnownAnswerDoesNot(t *testing.T) {
	if !wrongBuild {
		t.Fatal("not the cryptoperf_wrong build")
	}
	_, c, err := prepare("sha256", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.KAT.Check(); err != nil {
		t.Fatalf("the known answer (3 bytes) catches the wrong digest already: %v", err)
	}
	got := answers(t, helloLine,
		`{"type":"run","id":"w","backend":"go","op":"sha256","seconds":0.01,"warmup_s":0}`,
		`{"type":"run","id":"s","backend":"go","op":"sha256","params":{"size_bytes":64},"seconds":0.01,"warmup_s":0}`)[1:]
	wrong, short := got[0], got[1]
	v := wrong["validation"].(map[string]any)
	x := v["cross_checks"].([]any)[0].(map[string]any)
	if wrong["status"] != "invalid" || v["kat"] != "pass" || x["status"] != "fail" ||
		!strings.HasPrefix(wrong["reason"].(string), "cross-check with OpenSSL 3.") || wrong["ops"] != nil {
		t.Fatalf("the wrong sha256 was not caught by its cross-check, or was timed: %v", wrong)
	}
	if !strings.Contains(x["detail"].(string), "sha256 digests of a random 1024-byte message differ") {
		t.Fatalf("cross-check detail: %v", x)
	}
	// a message of one block is hashed right, and so passes
	if short["status"] != "ok" {
		t.Fatalf("sha256 of 64 bytes: %v", short)
	}
}
