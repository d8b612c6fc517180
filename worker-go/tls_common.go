package main

// What the TLS workloads share (tls-handshake, tls-bulk): their parameters and what Go's
// crypto/tls can honour of them, the server's identity (a CA and a leaf for localhost, made in
// memory), the client and server configurations that offer exactly what was asked, and what a
// connection negotiated, checked against the request.
//
// Choosing the TLS 1.3 suite. crypto/tls has no setting for it (Config.CipherSuites applies to
// TLS 1.2 only): a client offers the package's list `defaultCipherSuitesTLS13` (or
// `defaultCipherSuitesTLS13NoAES` without AES-GCM hardware), and a server picks its first that
// the client offered. Both lists are kept by crypto/tls for access by linkname ("Do not remove or
// change the type signature", go.dev/issue/67401: quic-go sets them); a run here sets both to
// the one suite asked for, in the client's process and in the server's, so the client offers
// only that suite. In FIPS 140-3 mode crypto/tls uses a fixed list instead
// (`allowedCipherSuitesTLS13FIPS`: AES-128-GCM then AES-256-GCM, server preference in that
// order), so there only TLS_AES_128_GCM_SHA256 can be negotiated. Whatever the route, the
// negotiation is checked on the first transactions and tallied on every timed one.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
	_ "unsafe" // go:linkname
)

//go:linkname defaultCipherSuitesTLS13 crypto/tls.defaultCipherSuitesTLS13
var defaultCipherSuitesTLS13 []uint16

//go:linkname defaultCipherSuitesTLS13NoAES crypto/tls.defaultCipherSuitesTLS13NoAES
var defaultCipherSuitesTLS13NoAES []uint16

// The values of the TLS parameters (hello's `param_values`), the Rust worker's.
var (
	tlsVersions = []string{"1.2", "1.3"}
	certKinds   = []string{"rsa2048", "rsa4096", "ecdsa-p256", "ed25519"}
	groupNames  = []string{"x25519", "p256", "x25519mlkem768"}
	suiteNames  = []string{"aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"}
)

// maxRecordBytes is the plaintext of crypto/tls's largest record, the only size it sends once
// dynamic record sizing is off: it has no maximum-fragment-length setting.
const maxRecordBytes = 16384

var groupIDs = map[string]tls.CurveID{"x25519": tls.X25519, "p256": tls.CurveP256, "x25519mlkem768": tls.X25519MLKEM768}

var tls13Suites = map[string]uint16{"aes-128-gcm": tls.TLS_AES_128_GCM_SHA256, "aes-256-gcm": tls.TLS_AES_256_GCM_SHA384,
	"chacha20-poly1305": tls.TLS_CHACHA20_POLY1305_SHA256}

var tls12Suites = map[[2]string]uint16{
	{"rsa", "aes-128-gcm"}: tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, {"rsa", "aes-256-gcm"}: tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	{"rsa", "chacha20-poly1305"}: tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	{"ecdsa", "aes-128-gcm"}:     tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, {"ecdsa", "aes-256-gcm"}: tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	{"ecdsa", "chacha20-poly1305"}: tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
}

// tlsSpec is a checked TLS request: what to negotiate.
type tlsSpec struct {
	Version, Cert, Group, Suite string
	Resume                      bool
	// RecordBytes is the requested maximum record plaintext (0: not given).
	RecordBytes int
}

// choose reads enumerated parameter `key` (default `def`) from params.
func choose(params map[string]any, key, def string, known []string) (string, error) {
	v, err := textParam(params, key, def)
	if err != nil {
		return "", err
	}
	for _, k := range known {
		if v == k {
			return v, nil
		}
	}
	return "", errBadParams(fmt.Sprintf("unknown %s '%s'; known: %s", key, v, strings.Join(known, ", ")))
}

// parseTLS reads the TLS parameters; `session` only when withSession (tls-handshake).
func parseTLS(params map[string]any, withSession bool) (tlsSpec, error) {
	var s tlsSpec
	var err error
	if s.Version, err = choose(params, "tls_version", "1.3", tlsVersions); err != nil {
		return s, err
	}
	if s.Cert, err = choose(params, "cert", "ecdsa-p256", certKinds); err != nil {
		return s, err
	}
	if s.Group, err = choose(params, "group", "x25519", groupNames); err != nil {
		return s, err
	}
	if s.Suite, err = choose(params, "suite", "aes-128-gcm", suiteNames); err != nil {
		return s, err
	}
	if withSession {
		session, err := choose(params, "session", "full", []string{"full", "resumed"})
		if err != nil {
			return s, err
		}
		s.Resume = session == "resumed"
	}
	return s, nil
}

// keyType is the kind of signature the certificate makes: rsa, ecdsa or ed25519.
func (s tlsSpec) keyType() string {
	switch s.Cert {
	case "rsa2048", "rsa4096":
		return "rsa"
	case "ecdsa-p256":
		return "ecdsa"
	}
	return "ed25519"
}

func (s tlsSpec) versionID() uint16 {
	if s.Version == "1.2" {
		return tls.VersionTLS12
	}
	return tls.VersionTLS13
}

// suiteID is the cipher suite these parameters ask for (TLS 1.2: the ECDHE suite whose
// signature half fits the certificate; Ed25519 signs in the ECDSA suites).
func (s tlsSpec) suiteID() uint16 {
	if s.Version == "1.3" {
		return tls13Suites[s.Suite]
	}
	kind := s.keyType()
	if kind == "ed25519" {
		kind = "ecdsa"
	}
	return tls12Suites[[2]string{kind, s.Suite}]
}

// unsupported is why Go's crypto/tls cannot run this combination as asked ("" when it can, as
// far as the rules tell: the check's handshake confirms it).
func (s tlsSpec) unsupported() string {
	if s.Group == "x25519mlkem768" && s.Version == "1.2" {
		return "X25519MLKEM768 is a TLS 1.3 key exchange (draft-ietf-tls-ecdhe-mlkem); TLS 1.2 has none"
	}
	if s.RecordBytes != 0 && s.RecordBytes != maxRecordBytes {
		return fmt.Sprintf("record_bytes %d: Go's crypto/tls has no maximum-fragment-length setting; its records carry up to %d bytes "+
			"of plaintext (dynamic record sizing off), so only record_bytes = %d is honoured", s.RecordBytes, maxRecordBytes, maxRecordBytes)
	}
	if !fips140.Enabled() {
		return ""
	}
	mode := "Go's crypto/tls in FIPS 140-3 mode (GODEBUG fips140=" + fipsSetting() + ")"
	switch {
	case s.Group == "x25519":
		return mode + " does not offer X25519: it is not an approved key agreement (its groups: X25519MLKEM768, P-256, P-384, P-521)"
	case s.Suite == "chacha20-poly1305":
		return mode + " offers AES-GCM suites only: ChaCha20-Poly1305 is not FIPS-approved"
	case s.Version == "1.3" && s.Suite == "aes-256-gcm":
		return mode + " offers TLS 1.3's TLS_AES_128_GCM_SHA256 and TLS_AES_256_GCM_SHA384 in a fixed order and its server " +
			"picks TLS_AES_128_GCM_SHA256: the TLS 1.3 suite cannot be chosen in FIPS mode"
	}
	return ""
}

// fipsSetting is "only" when FIPS mode is enforced, else "on".
func fipsSetting() string {
	if fips140.Enforced() {
		return "only"
	}
	return "on"
}

// useTLS13Suite makes crypto/tls offer (client) and accept (server) only `suite` in TLS 1.3 in
// this process; the returned function restores its lists. No effect in FIPS mode (above).
func useTLS13Suite(suite uint16) func() {
	savedAES, savedNoAES := defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES
	defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES = []uint16{suite}, []uint16{suite}
	return func() { defaultCipherSuitesTLS13, defaultCipherSuitesTLS13NoAES = savedAES, savedNoAES }
}

// identity is a server's certificate chain and key, made in memory: a CA and a leaf for
// localhost (and 127.0.0.1), both of the requested key kind.
type identity struct {
	Kind    string
	CADER   []byte
	LeafDER []byte
	Key     crypto.Signer
	Cert    tls.Certificate
}

func newKey(kind string) (crypto.Signer, error) {
	switch kind {
	case "rsa2048":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "rsa4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	case "ecdsa-p256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unknown certificate kind %s", kind)
}

// newIdentity makes a CA and a leaf for localhost of key kind `kind` (certificates signed with
// SHA-256, Ed25519 with itself).
func newIdentity(kind string) (*identity, error) {
	caKey, err := newKey(kind)
	if err != nil {
		return nil, err
	}
	leafKey, err := newKey(kind)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cryptoperf test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("the CA certificate: %w", err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, leafKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("the leaf certificate: %w", err)
	}
	return &identity{Kind: kind, CADER: caDER, LeafDER: leafDER, Key: leafKey,
		Cert: tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}, nil
}

// caPEM and keyPEM are the CA certificate and the leaf's key in PEM (for the OpenSSL
// cross-checks, handed over a pipe: never written to a file).
func (id *identity) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.CADER})
}

func (id *identity) leafPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.LeafDER})
}

func (id *identity) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(id.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// caPool is a pool trusting the CA certificate `caDER` alone.
func caPool(caDER []byte) (*x509.CertPool, error) {
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, nil
}

// serverConfig accepts only what `s` asks for: the version, the group, the TLS 1.2 suite (the
// TLS 1.3 one: useTLS13Suite); session tickets only when resuming; full-size records.
func serverConfig(s tlsSpec, id *identity) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{id.Cert}, MinVersion: s.versionID(), MaxVersion: s.versionID(),
		CurvePreferences: []tls.CurveID{groupIDs[s.Group]}, CipherSuites: []uint16{s.suiteID()},
		SessionTicketsDisabled: !s.Resume, DynamicRecordSizingDisabled: true}
}

// clientConfig offers only what `s` asks for, trusting `pool` for localhost; a session cache of
// its own when resuming.
func clientConfig(s tlsSpec, pool *x509.CertPool) *tls.Config {
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: s.versionID(), MaxVersion: s.versionID(),
		CurvePreferences: []tls.CurveID{groupIDs[s.Group]}, CipherSuites: []uint16{s.suiteID()},
		SessionTicketsDisabled: !s.Resume, DynamicRecordSizingDisabled: true}
	if s.Resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	}
	return cfg
}

// withOwnSessions is `cfg` with a session cache of its own (a load goroutine resumes its own
// sessions, as an independent client would: TLS 1.3 tickets are meant for one use).
func withOwnSessions(cfg *tls.Config) *tls.Config {
	own := cfg.Clone()
	if own.ClientSessionCache != nil {
		own.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	}
	return own
}

// negotiated is what one side of a completed handshake reports (the result's `Negotiated`).
type negotiated struct {
	Version         string `json:"version"`
	CipherSuite     string `json:"cipher_suite"`
	Group           string `json:"group"`
	SignatureScheme string `json:"signature_scheme"`
	Resumed         bool   `json:"resumed"`
}

// peerSignatureScheme is the signature scheme the peer signed the handshake with (0 when
// resumed). crypto/tls keeps it in ConnectionState's unexported testingOnlyPeerSignatureAlgorithm
// (set on every connection, conn.go); it is read with reflect, and a Go without that field makes
// the negotiation check fail with this said rather than pass unseen.
func peerSignatureScheme(cs tls.ConnectionState) (tls.SignatureScheme, bool) {
	f := reflect.ValueOf(cs).FieldByName("testingOnlyPeerSignatureAlgorithm")
	if !f.IsValid() || f.Kind() != reflect.Uint16 {
		return 0, false
	}
	return tls.SignatureScheme(f.Uint()), true
}

var schemeNames = map[tls.SignatureScheme]string{
	tls.PKCS1WithSHA1: "rsa_pkcs1_sha1", tls.ECDSAWithSHA1: "ecdsa_sha1", tls.PKCS1WithSHA256: "rsa_pkcs1_sha256",
	tls.PKCS1WithSHA384: "rsa_pkcs1_sha384", tls.PKCS1WithSHA512: "rsa_pkcs1_sha512",
	tls.ECDSAWithP256AndSHA256: "ecdsa_secp256r1_sha256", tls.ECDSAWithP384AndSHA384: "ecdsa_secp384r1_sha384",
	tls.ECDSAWithP521AndSHA512: "ecdsa_secp521r1_sha512", tls.PSSWithSHA256: "rsa_pss_rsae_sha256",
	tls.PSSWithSHA384: "rsa_pss_rsae_sha384", tls.PSSWithSHA512: "rsa_pss_rsae_sha512", tls.Ed25519: "ed25519",
}

// negotiatedOf reads a connection's negotiation in the names the Rust worker reports.
func negotiatedOf(cs tls.ConnectionState) negotiated {
	n := negotiated{Version: "0x" + fmt.Sprintf("%04x", cs.Version), CipherSuite: tls.CipherSuiteName(cs.CipherSuite),
		Group: "none", SignatureScheme: "none", Resumed: cs.DidResume}
	switch cs.Version {
	case tls.VersionTLS13:
		n.Version = "TLSv1.3"
	case tls.VersionTLS12:
		n.Version = "TLSv1.2"
	}
	if cs.CurveID != 0 {
		n.Group = fmt.Sprintf("0x%04x", uint16(cs.CurveID))
		for name, id := range groupIDs {
			if id == cs.CurveID {
				n.Group = name
			}
		}
	}
	scheme, known := peerSignatureScheme(cs)
	switch {
	case !known:
		n.SignatureScheme = "unknown (this Go's crypto/tls does not say)"
	case scheme != 0:
		n.SignatureScheme = schemeNames[scheme]
		if n.SignatureScheme == "" {
			n.SignatureScheme = fmt.Sprintf("0x%04x", uint16(scheme))
		}
	}
	return n
}

// mismatch is "" when n is what s asked for, else what differs (the Rust worker's rule: the
// version, the suite, resumed or not, the group (not for a resumed TLS 1.2 handshake, which
// has no key exchange), and a signature scheme of the certificate's key type (not when
// resumed, nor when n's side did not see one: SignatureScheme "")).
func (n negotiated) mismatch(s tlsSpec) string {
	var diffs []string
	wantVersion := "TLSv" + s.Version
	if n.Version != wantVersion {
		diffs = append(diffs, fmt.Sprintf("negotiated version %s, asked for %s", n.Version, wantVersion))
	}
	if want := tls.CipherSuiteName(s.suiteID()); n.CipherSuite != want {
		diffs = append(diffs, fmt.Sprintf("negotiated cipher suite %s, asked for %s", n.CipherSuite, want))
	}
	if n.Resumed != s.Resume {
		if s.Resume {
			diffs = append(diffs, "full handshake, asked for a resumed one")
		} else {
			diffs = append(diffs, "resumed handshake, asked for a full one")
		}
	}
	if !(n.Resumed && n.Version == "TLSv1.2") && n.Group != s.Group {
		diffs = append(diffs, fmt.Sprintf("negotiated group %s, asked for %s", n.Group, s.Group))
	}
	if !n.Resumed && n.SignatureScheme != "" && schemeKeyType(n.SignatureScheme) != s.keyType() {
		diffs = append(diffs, fmt.Sprintf("signature scheme %s does not fit a %s certificate", n.SignatureScheme, s.Cert))
	}
	return strings.Join(diffs, "; ")
}

func schemeKeyType(scheme string) string {
	switch {
	case strings.HasPrefix(scheme, "rsa_"):
		return "rsa"
	case strings.HasPrefix(scheme, "ecdsa_"):
		return "ecdsa"
	case scheme == "ed25519":
		return "ed25519"
	}
	return ""
}

// tally counts the timed transactions' negotiations.
type tally struct {
	mu sync.Mutex
	m  map[negotiated]uint64
}

func newTally() *tally { return &tally{m: map[negotiated]uint64{}} }

func (t *tally) add(n negotiated) {
	t.mu.Lock()
	t.m[n]++
	t.mu.Unlock()
}

// counts is each negotiation with its count, most frequent first (`negotiated_counts`).
func (t *tally) counts() []map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []map[string]any{}
	for n, c := range t.m {
		out = append(out, map[string]any{"version": n.Version, "cipher_suite": n.CipherSuite, "group": n.Group,
			"signature_scheme": n.SignatureScheme, "resumed": n.Resumed, "count": c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["count"].(uint64) > out[j]["count"].(uint64) })
	return out
}

// mismatch is the first tallied negotiation that is not what s asked for, with its count.
func (t *tally) mismatch(s tlsSpec) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n, c := range t.m {
		if why := n.mismatch(s); why != "" {
			return fmt.Sprintf("%d timed handshake(s): %s", c, why)
		}
	}
	return ""
}
