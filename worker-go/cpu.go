package main

// The CPU as hello reports it: its model and the crypto-relevant flags from /proc/cpuinfo, and
// the logical CPUs this process may use.

import (
	"os"
	"runtime"
	"strings"
)

// cryptoFlags are the flags hello lists when the CPU has them, in the Rust worker's order.
var cryptoFlags = []string{"aes", "pclmulqdq", "sha_ni", "avx", "avx2", "avx512f", "vaes", "vpclmulqdq", "bmi2", "adx"}

func cpuInfo() map[string]any {
	model, have := "unknown", map[string]bool{}
	if text, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(text), "\n") {
			key, value, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(key) {
			case "model name":
				model = strings.TrimSpace(value)
			case "flags":
				for _, f := range strings.Fields(value) {
					have[f] = true
				}
			}
			if model != "unknown" && len(have) > 0 {
				break
			}
		}
	}
	flags := []string{}
	for _, f := range cryptoFlags {
		if have[f] {
			flags = append(flags, f)
		}
	}
	return map[string]any{"model": model, "flags": flags, "logical_cpus": runtime.NumCPU(), "tsc": false}
}
