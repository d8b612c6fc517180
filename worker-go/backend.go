package main

// The `go` backend: Go's standard library crypto, one prepared case per operation. A case is
// made from its parameters, checked against its published known answer (kat*.go) and against a
// second, independent library (crosscheck*.go), and only then timed. The operations live by
// family: ops_digest.go (hashes, HMAC), ops_aead.go (AEADs), ops_sign.go (signatures),
// ops_kex.go (key agreement) and ops_kem.go (ML-KEM).

import (
	"crypto/fips140"
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// Case is one prepared operation: Run does it once on the prepared inputs; NewRun, for a case
// whose Run keeps state (a hash, an output buffer, a nonce counter), makes another Run with
// state of its own for each further thread of a run (nil: Run may be called from several
// threads at once); BytesPerOp is the message bytes it processes (0 for unsized operations);
// KAT is the operation's known-answer test for the case's parameters; Cross compares the case's
// own outputs (its key, its AEAD, its digest function) with a second library's, one CrossCheck
// per library.
type Case struct {
	Run        func() error
	NewRun     func() func() error
	BytesPerOp int
	KAT        KAT
	Cross      func() []CrossCheck
}

// forThread is the case as thread i of a run runs it: thread 0 the case itself, the others a
// Run of their own where the case's keeps state.
func (c Case) forThread(i int) Case {
	if i > 0 && c.NewRun != nil {
		c.Run = c.NewRun()
	}
	return c
}

// Params are an operation's resolved parameters: Size the message bytes of a sized operation,
// Digest the hash a signature is made over (one of Digests; "" for an operation without one),
// Padding the RSA signature padding (one of Paddings; "" for a non-RSA operation).
type Params struct {
	Size    int
	Digest  string
	Padding string
}

// Op is one operation of the backend: whether it takes a message size and its default, its
// default digest and padding ("" when it takes no such parameter), how to prepare a case for
// given parameters, and its known-answer test for them.
type Op struct {
	Sized          bool
	DefaultSize    int
	DefaultDigest  string
	DefaultPadding string
	Prepare        func(p Params) (Case, error)
	KAT            func(p Params) KAT
}

// Digests are the `digest` values a signature operation accepts; Paddings the RSA `padding`
// values (hello's `param_values`, as the Rust worker's).
var (
	Digests  = []string{"sha1", "sha256", "sha384", "sha512", "sha3-256"}
	Paddings = []string{"pkcs1", "pss"}
)

// ParamNames are the `run` parameters the operation accepts, in the Rust worker's order
// (size_bytes, digest, padding).
func (op Op) ParamNames() []string {
	names := []string{}
	if op.Sized {
		names = append(names, "size_bytes")
	}
	if op.DefaultDigest != "" {
		names = append(names, "digest")
	}
	if op.DefaultPadding != "" {
		names = append(names, "padding")
	}
	return names
}

// MaxSizeBytes is the largest message a request may ask for (64 MiB), as the Rust worker.
const MaxSizeBytes = 64 << 20

// Library is the backend's name in requests; LibraryName the library's, as results report it.
const (
	Library     = "go"
	LibraryName = "Go"
)

// The limits of a run, as the Rust worker's (hello's `limits`).
const (
	MaxThreads = 1024
	MaxSeconds = 3600
	MaxWarmupS = 600
	MaxBatch   = 1 << 20
)

// LibraryVersion is the Go release the worker was built with (its crypto is the standard
// library's), and in FIPS 140-3 mode the Go Cryptographic Module's version: `go1.26.8`,
// `go1.26.8 (Go Cryptographic Module v1.0.0)`. Every result carries it, so a report names the
// module its figures come from, and cells of the two modes are never taken for one library.
func LibraryVersion() string {
	if fips140.Enabled() {
		return fmt.Sprintf("%s (Go Cryptographic Module %s)", runtime.Version(), fips140.Version())
	}
	return runtime.Version()
}

// ops is every operation of the backend by name; each ops_*.go file adds its family in init.
var ops = map[string]Op{}

func addOps(family map[string]Op) {
	for name, op := range family {
		if _, dup := ops[name]; dup {
			panic("operation defined twice: " + name)
		}
		ops[name] = op
	}
}

// fixedKAT is the known-answer test of an operation whose test does not depend on its
// parameters.
func fixedKAT(k KAT) func(Params) KAT { return func(Params) KAT { return k } }

// resolve checks a request's `params` against the operation's: the parameters with defaults
// filled in, or an error in the Rust worker's words (bad_params; unknown_op for a name not in
// hello's `ops`).
func resolve(name string, params map[string]any) (Op, Params, error) {
	op, ok := ops[name]
	if !ok {
		return Op{}, Params{}, unknownOp(name)
	}
	p := Params{Size: op.DefaultSize, Digest: op.DefaultDigest, Padding: op.DefaultPadding}
	for k, v := range params {
		switch {
		case k == "size_bytes" && op.Sized:
			f, ok := v.(float64)
			if !ok || f != float64(int(f)) || f < 0 || f > MaxSizeBytes {
				return op, p, errBadParams(fmt.Sprintf("size_bytes must be an integer 0..%d, got %v", MaxSizeBytes, v))
			}
			p.Size = int(f)
		case k == "digest" && op.DefaultDigest != "":
			s, err := oneOf(name, "digest", v, Digests)
			if err != nil {
				return op, p, err
			}
			p.Digest = s
		case k == "padding" && op.DefaultPadding != "":
			s, err := oneOf(name, "padding", v, Paddings)
			if err != nil {
				return op, p, err
			}
			p.Padding = s
		default:
			return op, p, errBadParams(fmt.Sprintf("unknown parameter '%s' for %s", k, name))
		}
	}
	return op, p, nil
}

func oneOf(op, param string, v any, known []string) (string, error) {
	s, ok := v.(string)
	if !ok || !slices.Contains(known, s) {
		return "", errBadParams(fmt.Sprintf("%s: unknown %s '%v'; known: %s", op, param, v, strings.Join(known, ", ")))
	}
	return s, nil
}

// prepare resolves an operation's parameters and prepares its case: the resolved parameters
// as a result reports them (size_bytes, digest, padding where the operation takes them), the
// case with its known-answer test, or an error naming the parameter.
func prepare(name string, params map[string]any) (map[string]any, Case, error) {
	op, p, err := resolve(name, params)
	if err != nil {
		return nil, Case{}, err
	}
	resolved := map[string]any{}
	if op.Sized {
		resolved["size_bytes"] = p.Size
	}
	if op.DefaultDigest != "" {
		resolved["digest"] = p.Digest
	}
	if op.DefaultPadding != "" {
		resolved["padding"] = p.Padding
	}
	var c Case
	if err := guarded(func() (e error) { c, e = op.Prepare(p); return e }); err != nil {
		return nil, Case{}, err
	}
	c.KAT = op.KAT(p)
	return resolved, c, nil
}

// paramValues are the primitive operations' enumerated parameter values, as hello's
// `param_values` announces them: the digests and RSA paddings this worker accepts.
func paramValues() map[string]any {
	return map[string]any{"digest": Digests, "padding": Paddings}
}

// guarded runs f, turning a panic into an error: Go's crypto panics on some calls the enforced
// FIPS 140-3 module refuses (hmac.New with a key under 112 bits, sha1.Sum), and a case's
// preparation, known-answer test or cross-check must answer, not stop the worker.
func guarded(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return f()
}
