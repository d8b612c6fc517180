package main

// The TLS workloads' cross-checks: before it listens, the server process checks that Go's
// crypto/tls, configured as the run asks, interoperates with another implementation — OpenSSL,
// through its command-line peers — in both directions, one full handshake each over loopback:
//
//   - "openssl s_client → go server": `openssl s_client` (offering only the version, group and
//     suite asked for, verifying the chain against the CA and the name localhost) handshakes
//     with this process's Go server; the Go side must see what was asked negotiated;
//   - "go client → openssl s_server": the Go client handshakes with `openssl s_server` holding
//     the same certificate and key; the Go client must see what was asked negotiated, a
//     signature scheme of the certificate's key type included.
//
// The CA certificate, the leaf and its key reach OpenSSL through pipes (/dev/fd/N): no key is
// written to a file. Where the `openssl` command is missing, or lacks what is asked
// (X25519MLKEM768 before OpenSSL 3.5), the check is `skipped` with the reason, never passed.

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// crossCheckTimeout bounds one cross-check, OpenSSL's start-up included (~10 ms here).
const crossCheckTimeout = 10 * time.Second

var opensslGroups = map[string]string{"x25519": "X25519", "p256": "P-256", "x25519mlkem768": "X25519MLKEM768"}

var opensslTLS12Names = map[uint16]string{
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: "ECDHE-RSA-AES128-GCM-SHA256", tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: "ECDHE-RSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-RSA-CHACHA20-POLY1305",
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:     "ECDHE-ECDSA-AES128-GCM-SHA256", tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: "ECDHE-ECDSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
}

// crossCheck is one entry of `validation.cross_checks`.
func crossCheck(with, status, detail string) map[string]any {
	return map[string]any{"with": with, "status": status, "detail": detail}
}

const (
	withSClient = "openssl s_client → go server"
	withSServer = "go client → openssl s_server"
)

// opensslCrossChecks are both directions between Go's crypto/tls with identity `id` (`server`:
// the run's server configuration) and OpenSSL.
func opensslCrossChecks(s tlsSpec, id *identity, server *tls.Config) []map[string]any {
	s.Resume = false // full handshakes
	openssl, err := exec.LookPath("openssl")
	version := ""
	if err == nil {
		out, verr := exec.Command(openssl, "version").Output()
		version, err = strings.TrimSpace(string(out)), verr
	}
	if err != nil {
		why := fmt.Sprintf("the openssl command cannot be run here (%v): no other implementation to check Go's crypto/tls against", err)
		return []map[string]any{crossCheck(withSClient, "skipped", why), crossCheck(withSServer, "skipped", why)}
	}
	if s.Group == "x25519mlkem768" && !opensslAtLeast(version, 3, 5) {
		why := fmt.Sprintf("%s (the openssl command here) has no X25519MLKEM768 (OpenSSL 3.5 added it)", shortVersion(version))
		return []map[string]any{crossCheck(withSClient, "skipped", why), crossCheck(withSServer, "skipped", why)}
	}
	return []map[string]any{sClientCheck(openssl, version, s, id, server), sServerCheck(openssl, version, s, id)}
}

// shortVersion is "OpenSSL 3.0.19" of `openssl version`'s line.
func shortVersion(v string) string {
	f := strings.Fields(v)
	if len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return v
}

// opensslAtLeast: `openssl version`'s line names OpenSSL major.minor or later.
func opensslAtLeast(v string, major, minor int) bool {
	f := strings.Fields(v)
	if len(f) < 2 || f[0] != "OpenSSL" {
		return false
	}
	parts := strings.Split(f[1], ".")
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(parts[1])
	return ma > major || ma == major && mi >= minor
}

// opensslArgs are the version, group and suite options that make an OpenSSL peer offer or
// accept only what `s` asks for.
func opensslArgs(s tlsSpec) []string {
	groups := opensslGroups[s.Group]
	if needsCertCurve(s) {
		groups += ":P-256"
	}
	args := []string{"-groups", groups}
	if s.Version == "1.3" {
		return append(args, "-tls1_3", "-ciphersuites", tls.CipherSuiteName(s.suiteID()))
	}
	return append(args, "-tls1_2", "-cipher", opensslTLS12Names[s.suiteID()])
}

// needsCertCurve: in TLS 1.2 the supported groups also name the curves an ECDSA certificate
// may be on (RFC 8422 §5.1), and OpenSSL holds a peer to it; so with an ECDSA P-256 certificate
// and another group asked for, OpenSSL's side (and the Go client facing OpenSSL's server) also
// offers P-256, after the group asked for — which must still be the one negotiated.
func needsCertCurve(s tlsSpec) bool {
	return s.Version == "1.2" && s.keyType() == "ecdsa" && s.Group != "p256"
}

// certCurveNote is said in a pass detail when needsCertCurve applied.
func certCurveNote(s tlsSpec) string {
	if needsCertCurve(s) {
		return " (P-256, the certificate's curve, offered too, as TLS 1.2 requires for an ECDSA certificate)"
	}
	return ""
}

// pipeWith is the read end of a pipe holding `data` (small enough for the pipe's buffer), for a
// child's /dev/fd/N.
func pipeWith(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(data)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// tail is the last lines of OpenSSL's output, on one line, for a detail.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// sClientCheck: `openssl s_client` against the Go server configuration `server`.
func sClientCheck(openssl, version string, s tlsSpec, id *identity, server *tls.Config) map[string]any {
	fail := func(format string, a ...any) map[string]any {
		return crossCheck(withSClient, "fail", fmt.Sprintf(format, a...))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail("cannot listen on loopback: %v", err)
	}
	defer ln.Close()
	type seen struct {
		n   negotiated
		err error
	}
	got := make(chan seen, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- seen{err: err}
			return
		}
		conn.SetDeadline(time.Now().Add(crossCheckTimeout))
		c := tls.Server(conn, server)
		err = c.Handshake()
		got <- seen{n: negotiatedOf(c.ConnectionState()), err: err}
		c.Close()
	}()
	ca, err := pipeWith(id.caPEM())
	if err != nil {
		return fail("cannot hand OpenSSL the CA certificate: %v", err)
	}
	defer ca.Close()
	ctx, cancel := context.WithTimeout(context.Background(), crossCheckTimeout)
	defer cancel()
	args := append([]string{"s_client", "-connect", ln.Addr().String(), "-servername", "localhost", "-verify_hostname", "localhost",
		"-CAfile", "/dev/fd/3", "-verify_return_error", "-brief"}, opensslArgs(s)...)
	cmd := exec.CommandContext(ctx, openssl, args...)
	cmd.ExtraFiles = []*os.File{ca}
	out, runErr := cmd.CombinedOutput()
	ln.Close()
	var g seen
	select {
	case g = <-got:
	case <-time.After(crossCheckTimeout):
		return fail("the Go server saw no handshake from %s s_client: %s", shortVersion(version), tail(out))
	}
	switch {
	case runErr != nil || g.err != nil:
		return fail("%s s_client: %v, %s; Go server: %v", shortVersion(version), runErr, tail(out), g.err)
	case !strings.Contains(string(out), "Verification: OK"):
		return fail("%s s_client did not verify the Go server's chain: %s", shortVersion(version), tail(out))
	}
	// The server sees no signature scheme (the client signs nothing): that part is the other
	// direction's.
	g.n.SignatureScheme = ""
	if why := g.n.mismatch(s); why != "" {
		return fail("the Go server negotiated otherwise with %s s_client: %s", shortVersion(version), why)
	}
	return crossCheck(withSClient, "pass", fmt.Sprintf("%s %s %s; %s s_client verified the Go server's chain%s",
		g.n.Version, g.n.CipherSuite, g.n.Group, shortVersion(version), certCurveNote(s)))
}

// sServerCheck: the Go client configuration against `openssl s_server` holding id's
// certificate and key.
func sServerCheck(openssl, version string, s tlsSpec, id *identity) map[string]any {
	fail := func(format string, a ...any) map[string]any {
		return crossCheck(withSServer, "fail", fmt.Sprintf(format, a...))
	}
	keyPEM, err := id.keyPEM()
	if err != nil {
		return fail("cannot encode the key for OpenSSL: %v", err)
	}
	cert, err := pipeWith(id.leafPEM())
	if err != nil {
		return fail("cannot hand OpenSSL the certificate: %v", err)
	}
	defer cert.Close()
	key, err := pipeWith(keyPEM)
	if err != nil {
		return fail("cannot hand OpenSSL the key: %v", err)
	}
	defer key.Close()
	ctx, cancel := context.WithTimeout(context.Background(), crossCheckTimeout)
	defer cancel()
	args := append([]string{"s_server", "-accept", "127.0.0.1:0", "-naccept", "1", "-no_ticket", "-cert", "/dev/fd/3", "-key", "/dev/fd/4"},
		opensslArgs(s)...)
	cmd := exec.CommandContext(ctx, openssl, args...)
	cmd.ExtraFiles = []*os.File{cert, key}
	stdin, _ := cmd.StdinPipe() // kept open: s_server stops at the end of its input
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fail("cannot start openssl s_server: %v", err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	addr, seen := "", ""
	for sc := bufio.NewScanner(stdout); addr == "" && sc.Scan(); {
		seen = sc.Text()
		if a, ok := strings.CutPrefix(seen, "ACCEPT "); ok {
			addr = a
		}
	}
	if addr == "" {
		return fail("%s s_server did not listen: %s %s", shortVersion(version), seen, tail([]byte(stderr.String())))
	}
	pool, err := caPool(id.CADER)
	if err != nil {
		return fail("the CA certificate: %v", err)
	}
	cfg := clientConfig(s, pool)
	if needsCertCurve(s) {
		cfg.CurvePreferences = append(cfg.CurvePreferences, tls.CurveP256)
	}
	n, err := clientTransactionOnly(cfg, addr)
	if err != nil {
		return fail("Go client against %s s_server: %v %s", shortVersion(version), err, tail([]byte(stderr.String())))
	}
	if why := n.mismatch(s); why != "" {
		return fail("the Go client negotiated otherwise with %s s_server: %s", shortVersion(version), why)
	}
	return crossCheck(withSServer, "pass", fmt.Sprintf("%s %s %s %s; the Go client verified %s s_server's chain%s",
		n.Version, n.CipherSuite, n.Group, n.SignatureScheme, shortVersion(version), certCurveNote(s)))
}

// clientTransactionOnly connects to addr and handshakes with cfg; what it negotiated.
func clientTransactionOnly(cfg *tls.Config, addr string) (negotiated, error) {
	conn, err := net.DialTimeout("tcp", addr, crossCheckTimeout)
	if err != nil {
		return negotiated{}, err
	}
	conn.SetDeadline(time.Now().Add(crossCheckTimeout))
	c := tls.Client(conn, cfg)
	defer c.Close()
	if err := c.Handshake(); err != nil {
		return negotiated{}, err
	}
	return negotiatedOf(c.ConnectionState()), nil
}
