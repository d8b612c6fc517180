package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestAWrongAnswerIsCaught(t *testing.T) {
	// the check compares, it does not just run: a vector with one bit flipped fails
	bad := digestKAT("flipped", "sha256", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ac")
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "want ba7816bf") {
		t.Fatalf("a wrong digest was not caught: %v", err)
	}
	wrongTag := gcmKAT("flipped tag", 16, "0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bdde")
	if err := wrongTag.Check(); err == nil {
		t.Fatal("a wrong AES-GCM tag was not caught")
	}
}

func answers(t *testing.T, lines ...string) []map[string]any {
	t.Helper()
	var out bytes.Buffer
	serve(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out)
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("answer %q is not JSON: %v", l, err)
		}
		got = append(got, m)
	}
	return got
}

const helloLine = `{"type":"hello","protocol":1}`

func TestEveryRequestLineGetsOneAnswer(t *testing.T) {
	got := answers(t, helloLine, `not json`, `{"no":"type"}`, `{"type":"nope"}`,
		`{"type":"run","id":"x","backend":"go","op":"sha256","params":{"size_bytes":-1}}`,
		`{"type":"run","id":"y","backend":"go","op":"rsa9-sign"}`,
		`{"type":"run","id":"z","backend":"go","op":"sha256","params":{"size_bytes":64},"seconds":0.01,"warmup_s":0}`,
		`{"type":"bye"}`)
	kinds := []string{}
	for _, m := range got {
		kinds = append(kinds, m["type"].(string)+"/"+str(m["code"])+str(m["status"]))
	}
	want := "hello/ error/bad_request error/bad_request error/bad_request error/bad_params error/unknown_op result/ok"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("got %s, want %s", strings.Join(kinds, " "), want)
	}
	ok := got[6]
	if ok["ops"].(float64) < 1 || ok["histogram"].(string) == "" || ok["bytes_per_op"].(float64) != 64 {
		t.Fatalf("an ok result without its figures: %v", ok)
	}
	if v := ok["validation"].(map[string]any); v["kat"] != "pass" {
		t.Fatalf("kat: %v", v)
	}
}

func TestHelloMustComeFirstAndSpeakTheProtocol(t *testing.T) {
	if got := answers(t, `{"type":"run","id":"a","backend":"go","op":"sha256"}`); got[0]["code"] != "bad_request" {
		t.Fatalf("a run before hello: %v", got)
	}
	var out bytes.Buffer
	if status := serve(strings.NewReader(`{"type":"hello","protocol":2}`+"\n"), &out); status != 2 ||
		!strings.Contains(out.String(), "protocol_mismatch") {
		t.Fatalf("protocol 2: status %d, %s", status, out.String())
	}
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
