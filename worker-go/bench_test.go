package main

// Go's own benchmarks of the calls the go backend times (bench/go_worker_vs_testing_b compares
// the worker's figures with these): each benchmark runs the very Case the worker prepares, so
// the two differ only by the harness around the call.

import "testing"

func benchCase(b *testing.B, op string, size int) {
	params := map[string]any{}
	if ops[op].Sized {
		params["size_bytes"] = float64(size)
	}
	_, c, err := prepare(op, params)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(c.BytesPerOp))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSHA256_8KiB(b *testing.B)         { benchCase(b, "sha256", 8192) }
func BenchmarkAES128GCMSeal_16KiB(b *testing.B) { benchCase(b, "aes-128-gcm-seal", 16384) }
func BenchmarkECDSAP256Sign_32B(b *testing.B)   { benchCase(b, "ecdsa-p256-sign", 32) }
