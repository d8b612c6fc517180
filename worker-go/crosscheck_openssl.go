package main

// The second library of the cross-checks: the system's OpenSSL libcrypto (3.0 here), called
// through cgo. The C below is glue only — each function is one EVP call sequence, no primitive
// is implemented here. Keys cross as DER: PKCS#8 for private keys, SubjectPublicKeyInfo for
// public ones; OpenSSL's own key pairs come from EVP_PKEY_Q_keygen.

/*
#cgo LDFLAGS: -lcrypto
#include <stdlib.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

static const char *cp_version(void) { return OpenSSL_version(OPENSSL_VERSION_STRING); }

static int cp_digest(const char *md, const unsigned char *msg, size_t len, unsigned char *out) {
	const EVP_MD *m = EVP_get_digestbyname(md);
	unsigned int n = 0;
	if (m == NULL || !EVP_Digest(msg, len, out, &n, m, NULL)) return -1;
	return (int)n;
}

static int cp_hmac(const char *md, const unsigned char *key, int klen, const unsigned char *msg, size_t len,
		unsigned char *out) {
	const EVP_MD *m = EVP_get_digestbyname(md);
	unsigned int n = 0;
	if (m == NULL || HMAC(m, key, klen, msg, len, out, &n) == NULL) return -1;
	return (int)n;
}

// Seal (enc = 1: out = ciphertext || 16-byte tag) or open (enc = 0: in = ciphertext || tag,
// out = plaintext) with a 12-byte nonce and no AAD. Returns out's length, -1 on failure.
static int cp_aead(const char *name, int enc, const unsigned char *key, const unsigned char *nonce,
		const unsigned char *in, int inlen, unsigned char *out) {
	const EVP_CIPHER *c = EVP_get_cipherbyname(name);
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0, fin = 0, ok;
	if (!enc) inlen -= 16;
	ok = c != NULL && ctx != NULL && inlen >= 0
		&& EVP_CipherInit_ex(ctx, c, NULL, NULL, NULL, enc)
		&& EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, 12, NULL)
		&& EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, enc)
		&& (enc || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, (void *)(in + inlen)))
		&& EVP_CipherUpdate(ctx, out, &n, in, inlen)
		&& EVP_CipherFinal_ex(ctx, out + n, &fin)
		&& (!enc || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, out + n + fin));
	EVP_CIPHER_CTX_free(ctx);
	return ok ? n + fin + (enc ? 16 : 0) : -1;
}

static EVP_PKEY *cp_private(const unsigned char *der, long len) { return d2i_AutoPrivateKey(NULL, &der, len); }
static EVP_PKEY *cp_public(const unsigned char *der, long len) { return d2i_PUBKEY(NULL, &der, len); }

// A fresh key pair: X25519 when curve is NULL, else EC on the named curve.
static EVP_PKEY *cp_keygen(const char *curve) {
	return curve == NULL ? EVP_PKEY_Q_keygen(NULL, NULL, "X25519") : EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve);
}

static int cp_encoded_public(EVP_PKEY *k, unsigned char *out, size_t cap) {
	size_t n = 0;
	if (!EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out, cap, &n)) return -1;
	return (int)n;
}

static int cp_derive(EVP_PKEY *k, EVP_PKEY *peer, unsigned char *out, size_t cap) {
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(k, NULL);
	size_t n = cap;
	int ok = ctx != NULL && EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_derive_set_peer(ctx, peer) > 0
		&& EVP_PKEY_derive(ctx, out, &n) > 0;
	EVP_PKEY_CTX_free(ctx);
	return ok ? (int)n : -1;
}

// The signature context: the message hashed with md (NULL for Ed25519, which hashes itself);
// pss: RSASSA-PSS, MGF1 with md, a salt of md's length.
static int cp_sig_init(EVP_MD_CTX *ctx, EVP_PKEY *k, const char *md, int pss, int sign) {
	EVP_PKEY_CTX *pctx = NULL;
	const EVP_MD *m = md == NULL ? NULL : EVP_get_digestbyname(md);
	if (md != NULL && m == NULL) return 0;
	if ((sign ? EVP_DigestSignInit(ctx, &pctx, m, NULL, k) : EVP_DigestVerifyInit(ctx, &pctx, m, NULL, k)) <= 0) return 0;
	return !pss || (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) > 0
		&& EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) > 0);
}

static int cp_sign(EVP_PKEY *k, const char *md, int pss, const unsigned char *msg, size_t len,
		unsigned char *sig, size_t cap) {
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t n = cap;
	int ok = ctx != NULL && cp_sig_init(ctx, k, md, pss, 1) && EVP_DigestSign(ctx, sig, &n, msg, len) > 0;
	EVP_MD_CTX_free(ctx);
	return ok ? (int)n : -1;
}

static int cp_verify(EVP_PKEY *k, const char *md, int pss, const unsigned char *msg, size_t len,
		const unsigned char *sig, size_t siglen) {
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = ctx != NULL && cp_sig_init(ctx, k, md, pss, 0) && EVP_DigestVerify(ctx, sig, siglen, msg, len) == 1;
	EVP_MD_CTX_free(ctx);
	return ok;
}

static void cp_error(char *buf, size_t len) {
	unsigned long e = ERR_get_error();
	ERR_clear_error();
	if (e == 0) { buf[0] = 0; return; }
	ERR_error_string_n(e, buf, len);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// OpenSSLVersion names the linked OpenSSL as cross-checks report it: "OpenSSL 3.0.19".
func OpenSSLVersion() string { return "OpenSSL " + C.GoString(C.cp_version()) }

// cptr points C at b's bytes (a 1-byte buffer for an empty b, so C never gets NULL).
func cptr(b []byte) *C.uchar {
	if cap(b) == 0 {
		b = make([]byte, 1)
	}
	return (*C.uchar)(unsafe.Pointer(unsafe.SliceData(b)))
}

// cstr is s as a C string, or NULL for ""; free it with C.free.
func cstr(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

// sslErr is OpenSSL's first queued error, prefixed with what failed.
func sslErr(what string) error {
	buf := make([]byte, 256)
	C.cp_error((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if msg := C.GoString((*C.char)(unsafe.Pointer(&buf[0]))); msg != "" {
		return fmt.Errorf("OpenSSL %s: %s", what, msg)
	}
	return errors.New("OpenSSL " + what + " failed")
}

// sslDigest is OpenSSL's digest `md` ("SHA256", "SHA3-256", ...) of msg.
func sslDigest(md string, msg []byte) ([]byte, error) {
	name, out := cstr(md), make([]byte, 64)
	defer C.free(unsafe.Pointer(name))
	n := C.cp_digest(name, cptr(msg), C.size_t(len(msg)), cptr(out))
	if n < 0 {
		return nil, sslErr("digest " + md)
	}
	return out[:n], nil
}

// sslHMAC is OpenSSL's HMAC with digest `md` of msg under key.
func sslHMAC(md string, key, msg []byte) ([]byte, error) {
	name, out := cstr(md), make([]byte, 64)
	defer C.free(unsafe.Pointer(name))
	n := C.cp_hmac(name, cptr(key), C.int(len(key)), cptr(msg), C.size_t(len(msg)), cptr(out))
	if n < 0 {
		return nil, sslErr("HMAC " + md)
	}
	return out[:n], nil
}

// sslAEAD seals (ciphertext || 16-byte tag) or opens `in` with OpenSSL's AEAD `cipher`
// ("AES-128-GCM", "ChaCha20-Poly1305"), a 12-byte nonce and no AAD. Errors: the tag did not
// verify, or OpenSSL failed.
func sslAEAD(cipher string, seal bool, key, nonce, in []byte) ([]byte, error) {
	name, out := cstr(cipher), make([]byte, len(in)+16)
	defer C.free(unsafe.Pointer(name))
	enc := C.int(0)
	if seal {
		enc = 1
	}
	n := C.cp_aead(name, enc, cptr(key), cptr(nonce), cptr(in), C.int(len(in)), cptr(out))
	if n < 0 {
		return nil, sslErr(cipher + " seal/open")
	}
	return out[:n], nil
}

// sslKey is an OpenSSL EVP_PKEY; free releases it.
type sslKey struct{ p *C.EVP_PKEY }

func (k sslKey) free() { C.EVP_PKEY_free(k.p) }

// sslPrivate imports a PKCS#8 DER private key; sslPublic a SubjectPublicKeyInfo DER one.
func sslPrivate(pkcs8 []byte) (sslKey, error) {
	k := C.cp_private(cptr(pkcs8), C.long(len(pkcs8)))
	if k == nil {
		return sslKey{}, sslErr("private key import")
	}
	return sslKey{k}, nil
}

func sslPublic(spki []byte) (sslKey, error) {
	k := C.cp_public(cptr(spki), C.long(len(spki)))
	if k == nil {
		return sslKey{}, sslErr("public key import")
	}
	return sslKey{k}, nil
}

// sslGenerate is a fresh OpenSSL key pair: X25519 for curve "", else EC on `curve` ("P-256").
func sslGenerate(curve string) (sslKey, error) {
	name := cstr(curve)
	defer C.free(unsafe.Pointer(name))
	k := C.cp_keygen(name)
	if k == nil {
		return sslKey{}, sslErr("key generation")
	}
	return sslKey{k}, nil
}

// encodedPublic is the key's public key as its group encodes it: 32 bytes for X25519, the SEC1
// uncompressed point for EC.
func (k sslKey) encodedPublic() ([]byte, error) {
	out := make([]byte, 256)
	n := C.cp_encoded_public(k.p, cptr(out), C.size_t(len(out)))
	if n < 0 {
		return nil, sslErr("public key encoding")
	}
	return out[:n], nil
}

// derive is the shared secret of k's private key and peer's public key.
func (k sslKey) derive(peer sslKey) ([]byte, error) {
	out := make([]byte, 128)
	n := C.cp_derive(k.p, peer.p, cptr(out), C.size_t(len(out)))
	if n < 0 {
		return nil, sslErr("derive")
	}
	return out[:n], nil
}

// sign is OpenSSL's signature of msg: hashed with `md` ("" for Ed25519), RSASSA-PSS (salt =
// digest length) when pss, else the key type's scheme (PKCS#1 v1.5, ECDSA with a DER signature,
// Ed25519).
func (k sslKey) sign(md string, pss bool, msg []byte) ([]byte, error) {
	name, out := cstr(md), make([]byte, 1024)
	defer C.free(unsafe.Pointer(name))
	n := C.cp_sign(k.p, name, cbool(pss), cptr(msg), C.size_t(len(msg)), cptr(out), C.size_t(len(out)))
	if n < 0 {
		return nil, sslErr("sign")
	}
	return out[:n], nil
}

// verify is nil when OpenSSL accepts sig as k's signature of msg (as sign makes them).
func (k sslKey) verify(md string, pss bool, msg, sig []byte) error {
	name := cstr(md)
	defer C.free(unsafe.Pointer(name))
	if C.cp_verify(k.p, name, cbool(pss), cptr(msg), C.size_t(len(msg)), cptr(sig), C.size_t(len(sig))) != 1 {
		return sslErr("verify")
	}
	return nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
